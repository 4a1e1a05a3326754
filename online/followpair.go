package online

import (
	"fmt"
	"math"

	"github.com/streamkpca/streamkpca/snapshot"
)

// # Following gradual change with two views
//
// A two-view learner (kcca, ksir, ksvd) with Forget = follow runs a
// challenger as KPCA does (see follow.go): a learner of the same
// settings at an eighth of the feature budget, started on the stream as
// it is now and restarted every followLife steps, both scored on the
// same held-out pairs, followWindow at a time, by Score (the held-out
// canonical correlations, or singular values for ksvd: a score of the
// pairs on the current stream, which ranks a fresh model above a stale
// one, TestPairScoreRanksFreshAboveStale). When the challenger wins
// followWins windows in a row by more than followMargin (advantage), it
// replaces the model.
//
// With the paper's rule (ksvd's and ksir's, kcca's with solver oja) the
// model then grows back to its budget a block a step, as KPCA does. The
// covariance solver (kcca's default) draws all its features before its
// first pair and cannot grow its statistics: after a switch the model
// is the challenger, at an eighth of the budget, and a successor — a
// learner at the full budget started on the next batch — runs in the
// challenger's place (so the learner holds a full model and an eighth,
// as before the switch); once followLife steps old it replaces the
// model unless it scores worse (by more than followMargin, or by the
// paired test) in one of followWins windows in a row, and the
// eighth-size challengers resume. Until then a further change is
// followed by the successor itself, which learns only the stream after
// the switch. A successor's replacement is not counted as a switch.

// A change the level detector finds (see monitor) does not restart a
// following two-view model: it starts a new challenger on the stream
// from there, which replaces the model when it wins as above. On MNIST
// halves whose classes moved from 0–4 to 5–9 over T = 25,600 pairs, the
// detector fired at the ramp's end and the restart it made cost S_10
// 8.48 → 4.39 at +20% of T (a model of the old pairs still fitted the
// new ones better than a fresh one: `bench drift --case kcca-ramp`).

// pairFollower is a two-view learner's challenger state.
type pairFollower struct {
	ch *TwoView
	// vals are the window's prequential values: the model's u and v and
	// the challenger's u and v (rows×k each) at each held-out pair,
	// computed when it was assessed, before either learned it.
	vals      [4][]float64
	successor bool // ch is a covariance model at the full budget (above)
	lead      lead // the paired differences of the windows it was compared in
	// uc, vc: scratch, the challenger's values at a batch's held-out pairs
	uc, vc []float64
	duel
}

// duel is a two-view challenger's standing against the model
// (TwoView's pairFollower, followpair.go): windows won by a margin. One
// view decides by the test (betting).
type duel struct {
	rows     int     // held-out rows in the comparison window so far
	wins     int     // windows in a row the challenger won
	compared int     // windows the challenger was compared in
	fit, chf float64 // the last window's scores: the model's, the challenger's
}

// judge records a full window's scores of the model (fit) and of a
// challenger of age steps, and reports whether the challenger has now
// won followWins windows in a row by more than margin (advantage) where
// the caller's paired test trusts the lead (trusted). Windows a score
// cannot be computed on (NaN) and those of a challenger younger than
// followMinAge count as lost and are not compared.
func (d *duel) judge(fit, chf float64, age uint64, margin float64, trusted bool) bool {
	d.rows = 0
	if !math.IsNaN(fit) && !math.IsNaN(chf) {
		d.fit, d.chf = fit, chf
	}
	if age < followMinAge || math.IsNaN(fit) || math.IsNaN(chf) {
		d.wins = 0
		return false
	}
	d.compared++
	if advantage(fit, chf) > margin && trusted {
		d.wins++
	} else {
		d.wins = 0
	}
	return d.wins >= followWins
}

// advantage is the challenger's lead over the model by their window
// scores: log(chf/fit) when both are positive (FitScore, held-out
// correlations of a model that has any), else the difference (a model
// whose functions do not correlate on the window loses to any challenger
// whose functions do).
func advantage(fit, chf float64) float64 {
	if fit > 0 && chf > 0 {
		return math.Log(chf / fit)
	}
	return chf - fit
}

// restored is the duel a snapshot's challenger state records.
func restored(c *snapshot.Challenger) duel {
	return duel{rows: c.Rows, wins: c.Wins, compared: c.Compared, fit: c.Fit, chf: c.ChallengerFit}
}

// state is the duel's part of a snapshot's challenger state; Model is
// left to the caller.
func (d *duel) state() *snapshot.Challenger {
	return &snapshot.Challenger{Wins: d.wins, Compared: d.compared, Rows: d.rows, Fit: d.fit, ChallengerFit: d.chf}
}

// lead is the challenger's lead over the model in the last followWins
// windows it was compared in: each window's difference of Score and its
// jackknife variance (pairedLead), for a paired test on them together
// (one window of 128 pairs cannot trust a lead of less than about a
// fifth of the score; a test on every window of the challenger's life
// counted its first windows, where it is still weak, against it).
type lead struct{ d, variance []float64 }

// add records a window's difference and variance.
func (d *lead) add(diff, variance float64) {
	if len(d.d) == followWins {
		d.d, d.variance = d.d[1:], d.variance[1:]
	}
	d.d, d.variance = append(d.d, diff), append(d.variance, variance)
}

// t is the lead's z statistic, Σd/√Σvar over the windows it holds (0
// before one).
func (d *lead) t() float64 {
	var sum, v float64
	for i := range d.d {
		sum += d.d[i]
		v += d.variance[i]
	}
	switch {
	case len(d.d) == 0:
		return 0
	case v <= 0:
		return math.Copysign(math.Inf(1), sum)
	}
	return sum / math.Sqrt(v)
}

// values is the lead as a snapshot stores it: difference and variance
// of each window, oldest first.
func (d *lead) values() []float64 {
	out := make([]float64, 0, 2*len(d.d))
	for i := range d.d {
		out = append(out, d.d[i], d.variance[i])
	}
	return out
}

// following reports whether l runs a challenger when assessed.
func (l *TwoView) following() bool {
	return l.cfg.Forget == ForgetFollow && !l.v[0].fm.Landmarks
}

// Switches returns how many times a challenger replaced the model.
func (l *TwoView) Switches() uint64 { return l.switches }

// FitScores returns the last comparison window's held-out scores (Score)
// of the model and of the challenger; zeros before the first.
func (l *TwoView) FitScores() (model, challenger float64) { return l.fol.fit, l.fol.chf }

// dropChallenger ends the challenger and its window.
func (l *TwoView) dropChallenger() {
	if l.fol.ch != nil {
		l.fol.ch.Close()
	}
	l.fol.ch, l.fol.successor, l.fol.duel, l.fol.lead = nil, false, duel{}, lead{}
	l.fol.clearWindow()
}

// clearWindow empties the comparison window.
func (f *pairFollower) clearWindow() {
	for i := range f.vals {
		f.vals[i] = f.vals[i][:0]
	}
	f.rows = 0
}

// challengeNow is a following model's answer to a detected change:
// a new challenger (or successor) started on the stream from here, and
// a new reference for the detector.
func (l *TwoView) challengeNow() {
	l.dropChallenger()
	if l.t >= followStart {
		l.newChallenger()
	}
	l.mon.restart()
}

// ChallengesOnChange reports whether a change the detector finds starts
// a challenger that may replace the model (Forget follow with random
// features) rather than restarting it (Forget detect, landmark features)
// or keeping it (Forget off).
func (l *TwoView) ChallengesOnChange() bool { return l.following() }

// small reports whether the model holds fewer features than its budget
// after a switch of the covariance solver: its challenger is a successor.
func (l *TwoView) small() bool {
	return l.cfg.Solver == SolverCovariance && l.v[0].maxBlock < l.fullBlocks(0)
}

// fullBlocks is view i's feature budget in blocks (ksir's target view:
// its one block of slice indicators).
func (l *TwoView) fullBlocks(i int) int {
	if i == 1 && l.alg().targetY {
		return 1
	}
	return l.cfg.MaxFeatures / l.cfg.BlockSize
}

// newChallenger starts a challenger: an eighth of l's budget, or the
// full budget for a successor (see above); nil if it cannot be made.
func (l *TwoView) newChallenger() {
	c := l.cfg
	c.Forget = ForgetOff
	c.Kernel, c.KernelY = l.v[0].fm.Kernel, l.v[1].fm.Kernel
	successor := l.small()
	if !successor {
		c.MaxFeatures = challengerBudget(l.cfg.MaxFeatures, l.cfg.BlockSize)
		if c.Solver == SolverCovariance {
			// No ridge search for a learner that lives 24 steps: the
			// model's ridge.
			c.Ridge = l.ridgeNow()
		}
	}
	ch, err := NewTwoView(c)
	if err != nil {
		return
	}
	l.fol.ch, l.fol.successor, l.fol.duel, l.fol.lead = ch, successor, duel{}, lead{}
	l.fol.clearWindow()
}

// challengerStep teaches the challenger the pairs the model has just
// learned, restarting it when it is past followLife, has been compared
// in followLifeWindows windows and did not win the last (a successor
// runs until it wins).
func (l *TwoView) challengerStep(x, y []float64, rows int) {
	ch := l.fol.ch
	if ch == nil {
		return
	}
	if !l.fol.successor && ch.t >= followLife && l.fol.compared >= followLifeWindows && l.fol.wins == 0 {
		l.dropChallenger()
		l.newChallenger()
		if ch = l.fol.ch; ch == nil {
			return
		}
	}
	if err := ch.Update(x, y, rows); err != nil && ch.t == 0 {
		l.dropChallenger() // it cannot start on these pairs: the next assessment starts another
	}
}

// followAssess adds held-out pairs to the comparison window (starting a
// challenger when there is none and the model is old enough) and, when
// it is full, compares the model and the challenger on it; it reports
// whether the challenger replaced the model. u and v are the model's
// values at the pairs (rows×k).
//
// The window holds the two learners' values at each pair as it is
// assessed (prequential evaluation: each pair scored before either
// learns it), not the pairs: scored at the window's end, pairs both had
// learned in the meantime scored up to a third higher than new pairs
// while the model was young (0.93 against 0.68 over 2,048 learned and
// 4,000 new pairs, k = 2, 512 features a view), and more for the learner
// that fits its pairs more closely.
func (l *TwoView) followAssess(x, y, u, v []float64, rows int) bool {
	if !l.following() || l.t < followStart {
		return false
	}
	f := &l.fol
	if f.ch == nil {
		l.newChallenger()
		return false
	}
	if len(f.ch.v[0].seeds) == 0 {
		return false
	}
	k := l.cfg.K
	want := max(followWindow, 2*k)
	take := min(rows, want-f.rows)
	f.uc, f.vc = sized(f.uc, rows*k), sized(f.vc, rows*k)
	uc, vc := f.uc, f.vc
	f.ch.EvalTo(0, uc, x, rows)
	f.ch.EvalTo(1, vc, y, rows)
	for i, src := range [][]float64{u, v, uc, vc} {
		f.vals[i] = append(f.vals[i], src[:take*k]...)
	}
	f.rows += take
	if f.rows < want {
		return false
	}
	fit, chf, d, variance := pairedLead(f.vals, f.rows, k, !l.alg().correlated)
	f.clearWindow()
	if f.ch.t >= followMinAge {
		f.lead.add(d, variance)
	}
	margin, trusted := followMargin, f.lead.t() > followPairedT
	if f.successor {
		// The model's own settings on the stream since the switch: once
		// followLife steps old it takes over unless it scores worse.
		margin, trusted = -followMargin, f.ch.t >= followLife && f.lead.t() > -followPairedT
	}
	if !f.judge(fit, chf, f.ch.t, margin, trusted) {
		return false
	}
	l.promote()
	return true
}

// followPairedT: a two-view challenger's lead counts only when its z
// statistic over the windows it was compared in (lead) passes it. The
// window's Score alone is noisy enough that the margin made 3 switches in
// 300 batches of a stationary stream where the challenger's eighth of
// the budget nearly matched the model (TestPairFollowStationaryNoSwitch).
const followPairedT = 2

// pairedLead is the model's and the challenger's Scores on a window of
// rows pairs (vals as pairFollower's), the difference d = chf − fit and
// its jackknife variance (leaving out one pair at a time: a paired test
// of the statistic itself, whose variance, (1 − ρ²)²/n a correlation, is
// far below that of the pairs' products).
func pairedLead(vals [4][]float64, rows, k int, ksvd bool) (fit, chf, d, variance float64) {
	sm, sc := newScoreSums(vals[0], vals[1], rows, k), newScoreSums(vals[2], vals[3], rows, k)
	fit, chf = sm.score(ksvd, -1, nil, nil), sc.score(ksvd, -1, nil, nil)
	d = chf - fit
	n := float64(rows)
	loo := make([]float64, rows)
	var mean float64
	for r := range rows {
		loo[r] = sc.score(ksvd, r, vals[2], vals[3]) - sm.score(ksvd, r, vals[0], vals[1])
		mean += loo[r] / n
	}
	for _, x := range loo {
		variance += (x - mean) * (x - mean)
	}
	return fit, chf, d, variance * (n - 1) / n
}

// scoreSums are the per-component sums of a window's function values
// that Score is made of.
type scoreSums struct {
	n, k                  int
	su, sv, suu, svv, suv []float64
}

func newScoreSums(u, v []float64, rows, k int) scoreSums {
	s := scoreSums{n: rows, k: k, su: make([]float64, k), sv: make([]float64, k), suu: make([]float64, k), svv: make([]float64, k), suv: make([]float64, k)}
	for r := range rows {
		for q := range k {
			a, b := u[r*k+q], v[r*k+q]
			s.su[q] += a
			s.sv[q] += b
			s.suu[q] += a * a
			s.svv[q] += b * b
			s.suv[q] += a * b
		}
	}
	return s
}

// score is Score from the sums (correlations, or covariances for ksvd),
// without pair out (≥ 0) whose values u, v hold; out < 0: every pair.
func (s *scoreSums) score(ksvd bool, out int, u, v []float64) float64 {
	n := float64(s.n)
	if out >= 0 {
		n--
	}
	var total float64
	for q := range s.k {
		su, sv, suu, svv, suv := s.su[q], s.sv[q], s.suu[q], s.svv[q], s.suv[q]
		if out >= 0 {
			a, b := u[out*s.k+q], v[out*s.k+q]
			su, sv, suu, svv, suv = su-a, sv-b, suu-a*a, svv-b*b, suv-a*b
		}
		cuv := suv/n - su*sv/(n*n)
		if ksvd {
			total += cuv
			continue
		}
		cuu, cvv := suu/n-su*su/(n*n), svv/n-sv*sv/(n*n)
		if cuu > 0 && cvv > 0 {
			total += cuv / math.Sqrt(cuu*cvv)
		}
	}
	return total
}

// promote makes the challenger the model: l adopts its views (blocks,
// coefficients, centres, preprocessing), statistics, ksir slices and
// schedule; with the paper's rule it keeps its own budget (new blocks
// join again one a step), with the covariance solver it holds the
// challenger's features until a successor replaces it. Step count and
// versions go on; the change detector starts a new reference.
func (l *TwoView) promote() {
	c, successor := l.fol.ch, l.fol.successor
	l.fol.ch = nil
	l.dropChallenger()
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
	if !successor {
		l.switches++
	}
	c.Close()
}

// challengerState is the follower's part of a snapshot (format v4), as
// KPCA's: the comparison window's values (pairFollower.vals, one after
// the other), then the challenger's coefficients of both views and its
// own state.
func (l *TwoView) challengerState() (*snapshot.Challenger, []float64) {
	f := &l.fol
	if f.ch == nil || len(f.ch.v[0].seeds) == 0 {
		return nil, nil
	}
	cs := f.ch.Snapshot()
	h := cs.Header
	state := make([]float64, 0, 4*len(f.vals[0])+len(cs.Coef[0])+len(cs.Coef[1])+len(cs.State))
	for _, v := range f.vals {
		state = append(state, v...)
	}
	state = append(append(append(state, cs.Coef[0]...), cs.Coef[1]...), cs.State...)
	c := f.state()
	c.Model, c.Successor = &h, f.successor
	c.Lead = f.lead.values()
	return c, state
}

// restoreChallenger continues the challenger of a snapshot (see
// challengerState), so that the restored learner switches where the one
// that went on would.
func (l *TwoView) restoreChallenger(c *snapshot.Challenger, window []float64, chSnap *snapshot.Snapshot) error {
	rt := l.cfg
	rt.Forget = ForgetOff
	ch, err := RestoreTwoView(chSnap, rt)
	if err != nil {
		return fmt.Errorf("challenger: %w", err)
	}
	n := c.Rows * l.cfg.K
	if len(window) != 4*n || len(c.Lead)%2 != 0 || len(c.Lead) > 2*followWins {
		ch.Close()
		return fmt.Errorf("challenger: %w: a window of %d values and a lead of %d for %d rows of k = %d", snapshot.ErrHeader, len(window), len(c.Lead), c.Rows, l.cfg.K)
	}
	l.fol = pairFollower{ch: ch, successor: c.Successor, duel: restored(c)}
	for i := 0; i < len(c.Lead); i += 2 {
		l.fol.lead.add(c.Lead[i], c.Lead[i+1])
	}
	for i := range l.fol.vals {
		l.fol.vals[i] = append([]float64(nil), window[i*n:(i+1)*n]...)
	}
	return nil
}
