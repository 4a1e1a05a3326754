package online

import (
	"fmt"
	"math"

	"github.com/streamkpca/streamkpca/snapshot"
)

// # Following gradual change with two views
//
// A two-view learner (kcca, ksir, ksvd) with Forget = follow follows as
// KPCA does, by the same state machine and test (chase, duel.go; the
// story in follow.go): two scouts of scoutBudget learn every batch, the
// shadow from the model's first steps and the challenger restarted on
// the stream as it is then; when the test finds the challenger better a
// candidate of the model's settings and budget starts, and it replaces
// the model only when a test at the life's next share of α finds it
// better than the model — or it is withdrawn, and the model kept, after
// followMaxLife + followProbation steps. A change the level detector
// finds (see monitor) starts a candidacy at once instead of restarting
// the model: on MNIST halves whose classes moved from 0–4 to 5–9 over T
// = 25,600 pairs, the restart the detector made cost S_10 8.48 → 4.39 at
// +20% of T (a model of the old pairs still fitted the new ones better
// than a fresh one: `bench drift --case kcca-ramp`); a candidate that
// must win first cannot cost that.
//
// What a held-out pair (x, y), learned by neither, says of a learner is
// the product of its standardised values, summed over the k components,
//
//	p(x, y) = Σ_q (u_q(x) − ū_q)(v_q(y) − v̄_q)/(s_{u,q}·s_{v,q})
//
// whose mean is the sum of the held-out canonical correlations (kcca,
// ksir: Score, S_k); for ksvd the products are not standardised (their
// mean is the sum of the held-out singular values). The means ū, v̄ and
// deviations s are the learner's own, as it is when it scores the pair,
// on a reference set of refRows(k) held-out pairs chosen before the
// pairs it scores (as a one-view test's reference set: the held-out
// pairs that arrive after a test starts form the next one): a young
// learner's functions change scale, order and sign from step to step,
// and moments carried over the pairs before (tried first, weighted over
// 256) let a challenger score 3.5 against the shadow's 1.3 where the
// sum cannot exceed 2. The test bets on
//
//	d = (p_c − p_a)/(pairScale·k)   (ksvd: /(pairScale·Σ_q s_{u,q}s_{v,q}) of a),
//
// clamped to [−1, 1], a's the shadow's or the model's, c's the
// challenger's or the candidate's. Under the null hypothesis "E[d | the
// past] ≤ 0" the test's false-switch bound is the one-view test's
// (duel.go); the scale only sets which of the grid's bets grows fastest.
// (The rule before, followWins windows of 128 pairs won by a margin of
// Score and a paired z statistic over them, was tuned on one stream and
// had no bound.)

// pairScale: see above.
const pairScale = 2

// pairFollower is a two-view learner's following: the learners and the
// test (chase), the reference pairs and the scratch of a score.
type pairFollower struct {
	chase[*TwoView]
	// ref is the reference pairs in use, next those being collected
	// (m = 0: not collecting).
	ref, next refPairs
	// scratch: a learner's values on the reference pairs and on a batch,
	// and their means and deviations
	ru, rv, bu, bv []float64
	mu, mv, su, sv [2][]float64
}

// refPairs is a two-view test's reference pairs: raw x and y rows.
type refPairs struct {
	m, dx, dy int
	x, y      []float64
}

func (s *refPairs) reset(m, dx, dy int) {
	s.m, s.dx, s.dy = m, dx, dy
	s.x, s.y = s.x[:0], s.y[:0]
}

func (s *refPairs) rows() int {
	if s.dx == 0 {
		return 0
	}
	return len(s.x) / s.dx
}

// add appends pairs until the set holds m.
func (s *refPairs) add(x, y []float64, rows int) {
	take := min(rows, s.m-s.rows())
	if take <= 0 {
		return
	}
	s.x, s.y = append(s.x, x[:take*s.dx]...), append(s.y, y[:take*s.dy]...)
}

// full reports whether the set holds its m pairs.
func (s *refPairs) full() bool { return s.m > 0 && s.rows() == s.m }

// following reports whether l runs a challenger when assessed.
func (l *TwoView) following() bool {
	return l.cfg.Forget == ForgetFollow && !l.v[0].fm.Landmarks
}

// Switches returns how many times a candidate replaced the model.
func (l *TwoView) Switches() uint64 { return l.switches }

// FitScores returns the mean held-out scores p (above) of the two
// learners of the current test over its pairs — the shadow's and the
// challenger's, or in a candidacy the model's and the candidate's: each
// an estimate of Score; zeros before the first pair bet on.
func (l *TwoView) FitScores() (model, challenger float64) { return l.fol.means() }

// Evidence returns the current test's evidence and the level it rejects
// at, as KPCA.Evidence.
func (l *TwoView) Evidence() (evidence, level float64) { return l.fol.evidence(l) }

// Candidate reports whether a candidate is on trial (see KPCA.Candidate).
func (l *TwoView) Candidate() bool { return !none(l.fol.cand) }

// dropChallenger ends following's learners and the test.
func (l *TwoView) dropChallenger() {
	l.fol.drop(l)
	l.fol.ref.reset(0, 0, 0)
}

// challengeNow is a following model's answer to a detected change: a
// candidacy started on the stream from here (once the model is
// followStart steps old), and a new reference for the detector.
func (l *TwoView) challengeNow() {
	if l.t >= followStart {
		l.fol.startCandidacy(l)
	}
	l.mon.restart()
}

// ChallengesOnChange reports whether a change the detector finds starts
// a candidate that may replace the model (Forget follow with random
// features) rather than restarting it (Forget detect, landmark features)
// or keeping it (Forget off).
func (l *TwoView) ChallengesOnChange() bool { return l.following() }

// fullBlocks is view i's feature budget in blocks (ksir's target view:
// its one block of slice indicators).
func (l *TwoView) fullBlocks(i int) int {
	if i == 1 && l.alg().targetY {
		return 1
	}
	return l.cfg.MaxFeatures / l.cfg.BlockSize
}

// The arena of a two-view model (duel.go).

func (l *TwoView) started() bool                   { return len(l.v[0].seeds) > 0 }
func (l *TwoView) self() *TwoView                  { return l }
func (l *TwoView) alpha() float64                  { return l.cfg.FollowAlpha }
func (l *TwoView) withdrawn()                      { l.rollbacks++ }
func (l *TwoView) collect(b batch)                 { l.fol.collectPairs(b) }
func (l *TwoView) learn(c *TwoView, b batch) error { return c.update(b.x, b.y, b.rows) }
func (l *TwoView) newScores() {
	l.fol.next.reset(refRows(l.cfg.K), l.v[0].fm.Dim, l.v[1].fm.Dim)
}
func (l *TwoView) adopt(c *TwoView) { l.promote(c) }
func (l *TwoView) newScout() *TwoView {
	return l.newLearner(pairScoutBudget(l.cfg.MaxFeatures, l.cfg.BlockSize))
}

func (l *TwoView) newCandidate() *TwoView { return l.newLearner(l.cfg.MaxFeatures) }

// pairScoutBudget is a two-view scout's feature budget: as scoutBudget,
// but from one block (the margin rule's challenger's size for kcca's
// defaults, 512 of 2,048 features a view): kcca's covariance solver
// learns all of a scout's features from its first pair, and with two
// blocks of 512 each scout held half the model's features (kcca's
// learning took 1.7× `forget: off`'s on stationary MNIST halves).
func pairScoutBudget(features, b int) int {
	return min(features, max(b, features/followScoutShare/b*b))
}

// newLearner returns a learner of l's settings and kernels with a budget
// of features, not following; nil if it cannot be made. A scout of the
// covariance solver takes the model's ridge (no ridge search for a
// learner that lives 24 steps).
func (l *TwoView) newLearner(features int) *TwoView {
	c := l.cfg
	c.Forget = ForgetOff
	c.Kernel, c.KernelY = l.v[0].fm.Kernel, l.v[1].fm.Kernel
	c.MaxFeatures = features
	if c.Solver == SolverCovariance && features < l.cfg.MaxFeatures {
		c.Ridge = l.ridgeNow()
	}
	ch, err := NewTwoView(c)
	if err != nil {
		return nil
	}
	return ch
}

// challengerStep teaches following's learners the pairs the model has
// just learned (chase.step).
func (l *TwoView) challengerStep(x, y []float64, rows int) {
	if l.following() {
		l.fol.step(l, batch{x: x, y: y, rows: rows})
	}
}

// followAssess scores held-out pairs with the two learners of the
// current test before any learns them and feeds the test (chase
// .challenge); it reports whether a candidate replaced the model.
func (l *TwoView) followAssess(x, y []float64, rows int) bool {
	if !l.following() || !l.fol.challenge(l, batch{x: x, y: y, rows: rows}) {
		return false
	}
	l.fol.win(l)
	return true
}

// collectPairs adds held-out pairs to the reference set being
// collected; once full it replaces the one in use.
func (f *pairFollower) collectPairs(b batch) {
	if f.next.m == 0 {
		return
	}
	f.next.add(b.x, b.y, b.rows)
	if f.next.full() {
		f.ref, f.next = f.next, f.ref
		f.next.reset(0, 0, 0)
	}
}

// score is arena's score for pairs (above): each learner's products p
// of the held-out pairs b, standardised by its values on the reference
// pairs as it is now, and their difference bet on; false before the
// reference set is full or either learner has functions.
func (l *TwoView) score(a, c *TwoView, b batch, t *trial) bool {
	f := &l.fol
	if !f.ref.full() || !a.started() || !c.started() {
		return false
	}
	k, rows, m := l.cfg.K, b.rows, f.ref.m
	corr := l.alg().correlated
	f.ru, f.rv = sized(f.ru, m*k), sized(f.rv, m*k)
	f.bu, f.bv = sized(f.bu, 2*rows*k), sized(f.bv, 2*rows*k)
	for i, src := range []*TwoView{a, c} {
		src.EvalTo(0, f.ru, f.ref.x, m)
		src.EvalTo(1, f.rv, f.ref.y, m)
		f.mu[i], f.su[i] = columnMoments(f.mu[i], f.su[i], f.ru, m, k)
		f.mv[i], f.sv[i] = columnMoments(f.mv[i], f.sv[i], f.rv, m, k)
		src.EvalTo(0, f.bu[i*rows*k:(i+1)*rows*k], b.x, rows)
		src.EvalTo(1, f.bv[i*rows*k:(i+1)*rows*k], b.y, rows)
	}
	scale := pairScale * float64(k)
	if !corr {
		var s float64
		for q := range k {
			s += f.su[0][q] * f.sv[0][q]
		}
		scale = pairScale * s
	}
	if !(scale > 0) {
		return false
	}
	for r := range rows {
		var p [2]float64
		for i := range 2 {
			u, v := f.bu[(i*rows+r)*k:(i*rows+r+1)*k], f.bv[(i*rows+r)*k:(i*rows+r+1)*k]
			for q := range k {
				a, b := u[q]-f.mu[i][q], v[q]-f.mv[i][q]
				if !corr {
					p[i] += a * b
					continue
				}
				if f.su[i][q] > 0 && f.sv[i][q] > 0 {
					e := a/f.su[i][q] - b/f.sv[i][q]
					p[i] += max(-1, 1-e*e/2)
				}
			}
		}
		t.sm += p[0]
		t.so += p[1]
		t.test.observe((p[1] - p[0]) / scale)
	}
	return true
}

// columnMoments sets mean and dev to the means and standard deviations
// of the k columns of rows values (rows×k).
func columnMoments(mean, dev, vals []float64, rows, k int) ([]float64, []float64) {
	mean, dev = sized(mean, k), sized(dev, k)
	clear(mean)
	clear(dev)
	n := float64(rows)
	for r := range rows {
		for q, x := range vals[r*k : r*k+k] {
			mean[q] += x / n
		}
	}
	for r := range rows {
		for q, x := range vals[r*k : r*k+k] {
			dev[q] += (x - mean[q]) * (x - mean[q]) / n
		}
	}
	for q := range dev {
		dev[q] = math.Sqrt(dev[q])
	}
	return mean, dev
}

// promote makes candidate c the model and counts the switch: l adopts
// its views (blocks, coefficients, centres, preprocessing), statistics,
// ksir slices and schedule; with the paper's rule it keeps its own
// budget (a candidate is of the same). Step count and versions go on;
// the change detector starts a new reference. c is spent.
func (l *TwoView) promote(c *TwoView) {
	var maxBlock [2]int
	var hold [2]bool
	for i := range l.v {
		maxBlock[i], hold[i] = l.v[i].maxBlock, l.v[i].hold
		l.v[i].close()
	}
	if l.cov != nil {
		l.cov.ws.Close()
	}
	l.v, c.v = c.v, [2]view{}
	for i := range l.v {
		l.v[i].hold = hold[i]
		if l.cfg.Solver != SolverCovariance {
			l.v[i].maxBlock = maxBlock[i]
		}
	}
	l.cov, c.cov = c.cov, nil
	l.slices = c.slices
	l.lambda0, l.trace0, l.trRun, l.wnorm = c.lambda0, c.trace0, c.trRun, c.wnorm
	l.restart = l.t - min(c.t, l.t)
	l.backoff = c.backoff
	l.reset = false
	l.mon.restart()
	l.mom = moments{}
	l.switches++
	c.Close()
}

// challengerState is the follower's part of a snapshot (format v4), as
// KPCA's: the challenger's (or the candidate's) own snapshot with the
// shadow as its challenger, after the test's reference pairs (each
// row x then y; the first Challenger.Reference in use, the rest being
// collected); nil without one.
func (l *TwoView) challengerState() (*snapshot.Challenger, []float64) {
	f := &l.fol
	ch := f.ch
	if !none(f.cand) {
		ch = f.cand
	}
	if none(ch) || !ch.started() {
		return nil, nil
	}
	cs := ch.Snapshot()
	if sh := f.shadow; !none(sh) && sh.started() {
		ss := sh.Snapshot()
		sHead := ss.Header
		cs.Header.Challenger = &snapshot.Challenger{Model: &sHead}
		cs.State = append(append(append(cs.State[:len(cs.State):len(cs.State)], ss.Coef[0]...), ss.Coef[1]...), ss.State...)
	}
	h := cs.Header
	state := make([]float64, 0, len(f.ref.x)+len(f.ref.y)+len(f.next.x)+len(f.next.y)+len(cs.Coef[0])+len(cs.Coef[1])+len(cs.State))
	for _, p := range []*refPairs{&f.ref, &f.next} {
		for r := range p.rows() {
			state = append(append(state, p.x[r*p.dx:(r+1)*p.dx]...), p.y[r*p.dy:(r+1)*p.dy]...)
		}
	}
	state = append(append(append(state, cs.Coef[0]...), cs.Coef[1]...), cs.State...)
	c := &snapshot.Challenger{Model: &h, Rows: f.ref.rows() + f.next.rows(), Reference: f.ref.rows(), Collecting: f.next.m > 0,
		Test: f.test.values(), Tests: f.tests, Fit: f.sm, ChallengerFit: f.so, Candidate: !none(f.cand)}
	return c, state
}

// restoreChallenger continues the following of a snapshot (see
// challengerState), so that the restored learner switches where the one
// that went on would. A snapshot of the margin rule (no test) goes on
// with its successor as a candidate, or with new scouts.
func (l *TwoView) restoreChallenger(c *snapshot.Challenger, window []float64, chSnap *snapshot.Snapshot) error {
	rt := l.cfg
	rt.Forget = ForgetOff
	if len(c.Test) == 0 && !c.Successor {
		return nil // the margin rule's eighth-size challenger: new scouts start with the next assessment
	}
	ch, err := RestoreTwoView(chSnap, rt)
	if err != nil {
		return fmt.Errorf("challenger: %w", err)
	}
	if len(c.Test) == 0 {
		l.fol = pairFollower{chase: chase[*TwoView]{cand: ch, tests: 1}}
		return nil
	}
	var shadow *TwoView
	if _, _, sh := chSnap.SplitState(); sh != nil {
		if shadow, err = RestoreTwoView(sh, rt); err != nil {
			ch.Close()
			return fmt.Errorf("challenger's shadow: %w", err)
		}
	}
	dx, dy, m := l.v[0].fm.Dim, l.v[1].fm.Dim, refRows(l.cfg.K)
	if len(window) != c.Rows*(dx+dy) || c.Reference < 0 || c.Reference > min(c.Rows, m) || c.Rows-c.Reference > m {
		ch.Close()
		if shadow != nil {
			shadow.Close()
		}
		return fmt.Errorf("challenger: %w: %d reference values in %d rows (%d in use) for pairs of %d and %d", snapshot.ErrHeader, len(window), c.Rows, c.Reference, dx, dy)
	}
	l.fol = pairFollower{chase: restoredChase(c, ch, shadow)}
	f := &l.fol
	row := func(r int) ([]float64, []float64) {
		w := window[r*(dx+dy) : (r+1)*(dx+dy)]
		return w[:dx], w[dx:]
	}
	f.ref.reset(m, dx, dy)
	for r := range c.Reference {
		x, y := row(r)
		f.ref.add(x, y, 1)
	}
	if c.Collecting {
		f.next.reset(m, dx, dy)
		for r := c.Reference; r < c.Rows; r++ {
			x, y := row(r)
			f.next.add(x, y, 1)
		}
	}
	return nil
}
