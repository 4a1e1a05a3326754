package online

import (
	"fmt"
	"reflect"

	"gonum.org/v1/gonum/mat"

	"github.com/streamkpca/streamkpca/features"
	"github.com/streamkpca/streamkpca/snapshot"
)

// # Following gradual change: a scout, a candidate and a test
//
// The change detector (see monitor) sees a level drop of the held-out
// score: an abrupt change. A gradual one — a mix of the stream's sources
// shifting over tens of thousands of points — moves the score too slowly
// for it. With Forget = follow (the default) a learner that is assessed
// (one view here; two views by the same state machine, chase in duel.go,
// with a score of their own: followpair.go) follows it in two stages, each decided by a sequential test
// (duel.go) on held-out rows scored by both learners before either
// learns them, in a space of the exact kernel (refspace.go):
//
//  1. The scout. Two learners of a sixteenth of the feature budget learn
//     every batch the model learns: the shadow, started with the model's
//     first steps (or after the switch that made it the model) and never
//     restarted, and the
//     challenger, started followStart steps later on the stream as it is
//     then and restarted every followLife steps unless its evidence is
//     halfway to rejecting. Of equal capacity, they differ only in
//     the stream they have learned: the test rejects "the challenger is
//     no better than the shadow" only when the recent stream differs
//     from the whole in a way the functions see.
//  2. The candidacy. The scouts' rejection starts a candidate: a learner
//     of the model's settings and budget started on the next batch (its
//     first block by exact PCA of that batch, as a new model's: a model
//     that has learned the old stream rotates out of it slowly, and on
//     MNIST digits moving from 0–4 to 5–9 a candidate grown from the
//     winning challenger ended 5× further from the truth than one
//     started afresh). It learns beside the model, which stays served,
//     and the shadow, of the model's lineage, goes on learning; a new
//     test compares the candidate and the model. When it rejects "the
//     candidate is no better than the model", the candidate replaces the
//     model (Switches counts it): the model adopts its blocks,
//     coefficients and schedule and its versions go on, and the scouts
//     start again (blind for followLife steps: a shadow and a challenger
//     started together are one learner until the challenger restarts). A
//     candidate is withdrawn (Rollbacks counts it) and the model kept
//     when it is behind the model after followLife steps and
//     followLifeRows rows — a candidate started early in a long change
//     has learned part of the old stream too, and the scouts then find
//     the change again from the stream as it is — or when it is not
//     better by followMaxLife + followProbation steps of age.
//
// So the served model is replaced only by a learner the test finds
// better on rows neither had learned, never by a smaller, younger one
// because it fits a window: with Config.FollowAlpha = α, the probability
// that a model is ever replaced by a candidate that is no better is at
// most α over its whole life (the tests of a life spend α as
// α·6/(π²j²)). On a stream that does not change the scouts' test fails
// to reject with probability at least 1 − α, and nothing else runs.
//
// The cost: the challenger and the shadow learn every batch at a
// sixteenth of the budget each (an eighth more per step, less while the
// model is still growing) and evaluate the test's reference rows (m per
// step each); a candidate, rare on a stream that does not change, costs
// a second model and the model's values on the reference rows until it
// wins or is withdrawn.
//
// In a group (package cluster) the members step as one model: the
// group's rank 0 runs the scouts and the candidate on its own rows and
// held-out rows (Challenge, TeachChallenger) and, when the candidate
// wins, sends its snapshot (ChallengerSnapshot) with the step; every
// member Adopts those bytes after the step and the group stays one
// model. The candidate learns only rank 0's rows, so it takes longer to
// win than a service's own. Where a one-view learner has no challenger:
// landmark features, the covariance solver, learners that are never
// assessed (fit), Forget detect or off. Two-view learners follow by
// the same state machine and test (chase, duel.go) with a score of their
// own (followpair.go).

// Following's settings. followStart, followLife and followMinAge were
// chosen with the margin rule on `streamkpca bench drift --case
// mnist-ramp` (docs/results.md); the tests' level is a setting
// (Config.FollowAlpha), not a margin.
const (
	// followScoutShare: each scout's feature budget is this share of the
	// model's (scoutBudget).
	followScoutShare = 16
	// followCandidateShare: a candidate's block cache and kept features
	// are this share of the model's (sharedBytes): it lives beside the
	// model, within the room sized for one.
	followCandidateShare = 2
	// followStart: the challenger starts once the model has taken this
	// many steps; followLife: a challenger that has not won by this age,
	// and has been tested on followLifeRows held-out rows, is restarted on
	// the stream as it is then — unless the test's evidence is halfway to
	// rejecting (√(1/α)), until followMaxLife.
	followStart, followLife = 8, 24
	followLifeRows          = 256
	// followMaxLife: a challenger the evidence is for lives this long at
	// most (on MNIST digits moving from 0–4 to 5–9 over 50 batches, the
	// evidence took longer than 48 batches to reach 1/α).
	followMaxLife = 4 * followLife
	// followMinAge: a challenger is tested only from this age on.
	followMinAge = 4
	// followProbation: a candidate not better than the model at an age
	// of followMaxLife + followProbation steps is withdrawn.
	followProbation = 128
)

// follower is the one-view following state (see above): the learners
// and the test (chase, duel.go) and the reference space the two
// learners' shares are compared in.
type follower struct {
	chase[*KPCA]
	// ref is the reference set (refspace.go) in whose Nyström space the
	// two learners' shares of held-out rows are compared; next collects
	// the held-out rows after a test starts (scored in ref all the same)
	// and replaces ref once full (m = 0: not collecting). A reference set
	// is always chosen before the rows it scores.
	ref, next refSpace
	// scratch: the two learners' values on W, inputs, a row's shares
	vm, vo, xs, xr []float64
	two            [2]float64
}

// following reports whether l runs a challenger when assessed.
func (l *KPCA) following() bool {
	return l.cfg.Forget == ForgetFollow && !l.lazy && !l.fm.Landmarks && l.cfg.Solver != SolverCovariance
}

// Switches returns how many times a challenger replaced the model.
func (p *progress) Switches() uint64 { return p.switches }

// Rollbacks returns how many candidates were withdrawn: learners started
// when the scouts found a change that did not beat the model within the
// candidacy (see follower), so that the model was kept.
func (p *progress) Rollbacks() uint64 { return p.rollbacks }

// steps is the number of steps learned (rival).
func (p *progress) steps() uint64 { return p.t }

// FitScores returns the mean held-out shares (refspace.go) of the two
// learners of the current test over its rows: the shadow's and the
// challenger's, or in a candidacy the model's and the candidate's; zeros
// before its first row.
func (l *KPCA) FitScores() (model, challenger float64) { return l.fol.means() }

// Evidence returns the current test's evidence (its wealth, E_t: the
// test rejects at 1/level) and the level it rejects at; 0, 0 without a
// test.
func (l *KPCA) Evidence() (evidence, level float64) { return l.fol.evidence(l) }

// Candidate reports whether a candidate is on trial: a learner of the
// model's budget started when the scouts found a change, which replaces
// the model if it scores better (see follower).
func (l *KPCA) Candidate() bool { return !none(l.fol.cand) }

// dropChallenger ends following's learners and the current test.
func (l *KPCA) dropChallenger() {
	l.fol.drop(l)
	l.fol.ref.reset(0, 0)
}

// The arena of a one-view model (duel.go).

func (l *KPCA) started() bool                { return len(l.seeds) > 0 }
func (l *KPCA) self() *KPCA                  { return l }
func (l *KPCA) alpha() float64               { return l.cfg.FollowAlpha }
func (l *KPCA) withdrawn()                   { l.rollbacks++ }
func (l *KPCA) collect(b batch)              { l.fol.collectRows(b.x, b.rows) }
func (l *KPCA) newScout() *KPCA              { return l.newChallenger() }
func (l *KPCA) adopt(c *KPCA)                { l.swapIn(c); l.switches++ }
func (l *KPCA) learn(c *KPCA, b batch) error { return c.update(b.x, b.rows) }

// newScores collects a new reference set from the next held-out rows
// (the current one scores until it is full).
func (l *KPCA) newScores() { l.fol.next.reset(refRows(l.servedK()), l.fm.Dim) }

// score is pairShares in the current reference set (see arena).
func (l *KPCA) score(a, c *KPCA, b batch, t *trial) bool {
	return l.fol.ref.prepare(l) && l.pairShares(a, c, b.x, b.rows, t)
}

// newChallenger returns a scout: a learner of l's settings with
// scoutBudget of its budget and its bandwidth, nil if it cannot be made.
func (l *KPCA) newChallenger() *KPCA {
	c := l.userConfig()
	b := l.fm.BlockSize
	c.MaxFeatures = scoutBudget(l.cfg.MaxFeatures, b)
	c.BlockSize = b
	c.Kernel = l.fm.Kernel
	c.Forget = ForgetOff
	c.CacheBytes, c.KeepBytes = l.sharedBytes(followScoutShare)
	ch, err := New(c)
	if err != nil {
		return nil
	}
	ch.quickInit = true
	return ch
}

// challengerState is the follower's part of a snapshot (format v4): the
// challenger's (or the candidate's) own snapshot, with the shadow as its
// challenger, appended to the model's learner state after the test's
// reference rows; nil without one.
func (l *KPCA) challengerState() (*snapshot.Challenger, []float64) {
	f := &l.fol
	ch := f.ch
	if f.cand != nil {
		ch = f.cand
	}
	if ch == nil || len(ch.seeds) == 0 {
		return nil, nil // a challenger is made and taught in one step: it has blocks between steps
	}
	cs := ch.Snapshot()
	if sh := f.shadow; sh != nil && len(sh.seeds) > 0 {
		ss := sh.Snapshot()
		sHead := ss.Header
		cs.Header.Challenger = &snapshot.Challenger{Model: &sHead}
		cs.State = append(append(cs.State[:len(cs.State):len(cs.State)], ss.Coef[0]...), ss.State...)
	}
	h := cs.Header
	state := make([]float64, 0, len(f.ref.x)+len(f.next.x)+len(cs.Coef[0])+len(cs.State))
	state = append(append(append(append(state, f.ref.x...), f.next.x...), cs.Coef[0]...), cs.State...)
	c := &snapshot.Challenger{Model: &h, Rows: f.ref.rows() + f.next.rows(), Reference: f.ref.rows(), Collecting: f.next.m > 0,
		Test: f.test.values(), Tests: f.tests, Fit: f.sm, ChallengerFit: f.so, Candidate: f.cand != nil}
	return c, state
}

// restoreChallenger continues the following of a snapshot (see
// challengerState): the challenger or candidate and the shadow restored
// with the model's runtime settings, the test so far and its reference
// rows (window), so that the restored learner switches where the one
// that went on would. A snapshot of the margin rule (no test, no
// shadow; its window's rows, held out, become the reference set) goes
// on with a new test and a new shadow.
func (l *KPCA) restoreChallenger(c *snapshot.Challenger, window []float64, chSnap *snapshot.Snapshot) error {
	rt := l.cfg
	rt.Forget = ForgetOff
	ch, err := Restore(chSnap, rt)
	if err != nil {
		return fmt.Errorf("challenger: %w", err)
	}
	ch.quickInit = true
	var shadow *KPCA
	if _, _, sh := chSnap.SplitState(); sh != nil {
		if shadow, err = Restore(sh, rt); err != nil {
			ch.Close()
			return fmt.Errorf("challenger's shadow: %w", err)
		}
	}
	l.fol = follower{chase: restoredChase(c, ch, shadow)}
	d, m := l.fm.Dim, refRows(l.servedK())
	ref := min(max(c.Reference, 0), len(window)/max(d, 1))
	if len(c.Test) == 0 {
		ref = 0 // the margin rule's window: the rows of the next reference set
	}
	l.fol.ref.reset(m, d)
	l.fol.ref.add(window, ref)
	if c.Collecting || len(c.Test) == 0 {
		l.fol.next.reset(m, d)
		l.fol.next.add(window[ref*d:], len(window)/max(d, 1)-ref)
	}
	return nil
}

// sharedBytes are the block cache and kept-feature bounds of a learner
// of following beside l, a share of l's own (Config.CacheBytes,
// KeepBytes, their defaults resolved): the service sizes those bounds for
// everything it holds, and a scout holding a sixteenth of the features
// needs a sixteenth of the room to keep the same share of them. Blocks
// past a cache are generated again from their seeds and features past
// the kept bound evaluated again: the same values, at some time.
func (l *KPCA) sharedBytes(share int64) (cache, keep int64) {
	cache, keep = l.cfg.CacheBytes, keepBytes(l.cfg.KeepBytes, l.fm.Dim, l.cfg.K)
	if cache == 0 {
		cache = features.DefaultCacheBytes
	}
	if keep == 0 {
		keep = features.DefaultKeepBytes
	}
	if cache > 0 {
		cache = max(1, cache/share)
	}
	if keep > 0 {
		keep = max(1, keep/share)
	}
	return cache, keep
}

// scoutBudget is the feature budget of each of a model's two scouts
// (one view or two): followScoutShare of the model's in whole blocks of
// b, at least two blocks and at most the model's. What their test needs
// is that they are of one size, not of the model's.
func scoutBudget(features, b int) int {
	return min(features, max(2*b, features/followScoutShare/b*b))
}

// challengerStep teaches following's learners the batch the model has
// just learned (chase.step).
func (l *KPCA) challengerStep(x []float64, rows int) {
	l.fol.step(l, batch{x: x, rows: rows})
}

// followAssess scores held-out rows x with the two learners of the
// current test before any learns them and feeds the test; it reports
// whether the model changed (a candidate replaced it).
func (l *KPCA) followAssess(x []float64, rows int) bool {
	if !l.Challenge(x, rows) {
		return false
	}
	l.fol.win(l)
	return true
}

// newCandidate returns a learner of l's settings, kernel and budget,
// not following, nil if it cannot be made.
func (l *KPCA) newCandidate() *KPCA {
	c := l.userConfig()
	c.BlockSize = l.fm.BlockSize
	c.Kernel = l.fm.Kernel
	c.Forget = ForgetOff
	c.CacheBytes, c.KeepBytes = l.sharedBytes(followCandidateShare)
	cand, err := New(c)
	if err != nil {
		return nil
	}
	return cand
}

// Challenge is the comparison half of following, for a learner on its
// own (Assess) and for a model that steps in a group (package cluster),
// where one member runs the scouts and the candidate on its own rows and
// the group adopts the candidate as one: it scores held-out rows x (not
// yet learned by any) with the two learners of the current test — the
// shadow and the challenger, starting them when there are none and the
// model is old enough, or in a candidacy the model and the candidate —
// and feeds their paired shares to the test (chase.challenge). A
// rejection of the scouts' test starts a candidacy. It reports whether
// the candidate has won: the caller then sends ChallengerSnapshot to
// every member, and each Adopts it at the same step. A learner on its
// own does all of this in Assess and Update.
func (l *KPCA) Challenge(x []float64, rows int) bool {
	if !l.following() {
		return false
	}
	return l.fol.challenge(l, batch{x: x, rows: rows})
}

// collectRows adds held-out rows to the reference set being collected;
// once full it replaces the one in use.
func (f *follower) collectRows(x []float64, rows int) {
	if f.next.m == 0 {
		return
	}
	f.next.add(x, rows)
	if f.next.rows() == f.next.m {
		f.ref, f.next = f.next, f.ref
		f.next.reset(0, 0)
	}
}

// pairShares scores held-out rows x (raw; the reference set full) in
// the reference space (refspace.go) by a and b, as both are now, adds
// their shares to t's sums and bets on each row's difference, b's share
// less a's; false when either cannot be scored (no functions yet, or
// linearly dependent on W).
func (l *KPCA) pairShares(a, b *KPCA, x []float64, rows int, t *trial) bool {
	f := &l.fol
	s := &f.ref
	k, d := l.servedK(), l.fm.Dim
	var ba, bb *mat.Dense
	f.vm, f.xs = a.valuesInto(f.vm, f.xs, s.x, s.m)
	f.vo, f.xs = b.valuesInto(f.vo, f.xs, s.x, s.m)
	if f.vm == nil || f.vo == nil {
		return false
	}
	if ba, bb = s.basis(f.vm, k), s.basis(f.vo, k); ba == nil || bb == nil {
		return false
	}
	f.xr = sized(f.xr, rows*d)
	l.pre.Apply(f.xr, x)
	for r := range rows {
		s.shares(f.two[:], l, f.xr[r*d:r*d+d], ba, bb)
		t.sm += f.two[0]
		t.so += f.two[1]
		t.test.observe(f.two[1] - f.two[0])
	}
	return true
}

// valuesInto sets dst to the served functions' values (rows×k) on rows
// raw points x, preprocessed into xs; nil before the first step or for
// a bad batch.
func (l *KPCA) valuesInto(dst, xs, x []float64, rows int) ([]float64, []float64) {
	if len(l.seeds) == 0 || l.checkBatch(x, rows) != nil {
		return nil, xs
	}
	coef, center, k := l.assessed()
	d := l.fm.Dim
	xs = sized(xs, rows*d)
	l.pre.Apply(xs, x)
	dst = sized(dst, rows*k)
	l.evalWith(dst, xs, rows, k, coef, center)
	return dst, xs
}

// TeachChallenger teaches the scouts (see Challenge) a batch the model
// has learned; Update does it for a learner on its own.
func (l *KPCA) TeachChallenger(x []float64, rows int) { l.challengerStep(x, rows) }

// DropChallenger ends following's learners and the test: the members of
// a group that do not run them (package cluster).
func (l *KPCA) DropChallenger() { l.dropChallenger() }

// ChallengerSnapshot returns the candidate's own snapshot (its blocks,
// coefficients and solver state), nil without one.
func (l *KPCA) ChallengerSnapshot() *snapshot.Snapshot {
	if l.fol.cand == nil || len(l.fol.cand.seeds) == 0 {
		return nil
	}
	return l.fol.cand.Snapshot()
}

// Adopt makes the candidate of snapshot ch (ChallengerSnapshot of a
// learner of the same model) the model, as a switch does (Switches
// counts it): the members of a group adopt the same bytes at the same
// step and stay one model. ch must be a one-view random-feature model of
// l's algorithm, k, dimension, kernel and block size. On the member that
// ran the candidate its following goes on with the candidate's shadow.
func (l *KPCA) Adopt(ch *snapshot.Snapshot) error {
	rt := l.cfg
	rt.Forget = ForgetOff
	c, err := Restore(ch, rt)
	if err != nil {
		return fmt.Errorf("online: adopt a challenger: %w", err)
	}
	if c.cfg.Algorithm != l.cfg.Algorithm || c.cfg.K != l.cfg.K || c.fm.Dim != l.fm.Dim || !reflect.DeepEqual(c.fm.Kernel, l.fm.Kernel) ||
		c.fm.BlockSize != l.fm.BlockSize || c.fm.Landmarks || c.cfg.Solver != l.cfg.Solver || c.fm.Structured != l.fm.Structured {
		c.Close()
		return fmt.Errorf("online: adopt a challenger: %w: it is not a challenger of this model (algorithm, k, dimension, kernel, block size, solver or frequencies differ)", snapshot.ErrHeader)
	}
	if l.t == 0 {
		c.Close()
		return fmt.Errorf("online: adopt a challenger: the model has not started")
	}
	if cand := l.fol.cand; cand != nil {
		cand.Close()
		l.fol.cand = nil
	}
	l.adopt(c)
	l.fol.promoted(l)
	return nil
}

// swapIn makes c's model l's: its view, solver state, running estimates,
// scratch and schedule, with l's budget, progress (c's age becomes the
// model's) and change detector (a new reference); l's model is released
// and c is spent.
func (l *KPCA) swapIn(c *KPCA) {
	maxBlock, hold, maxF := l.maxBlock, l.hold, l.cfg.MaxFeatures
	l.view.close()
	if l.cov != nil {
		l.cov.ws.Close()
	}
	l.view, c.view = c.view, view{}
	l.maxBlock, l.hold = maxBlock, hold
	l.sub, l.cov = c.sub, c.cov
	c.sub, c.cov = nil, nil
	if l.sub != nil {
		l.sub.reserve(maxF)
	}
	l.lambda0, l.mrun = c.lambda0, c.mrun
	l.m, l.mUse, l.tmp, l.hbar, l.pv, l.pw = c.m, c.mUse, c.tmp, c.hbar, c.pv, c.pw
	l.restart = l.t - min(c.age(), l.t)
	l.backoff = c.backoff
	l.reset = false
	l.raisedAt = l.t
	l.mon.restart()
	l.fol.ref.ready = false // its coordinates in the new model's preprocessing
	c.Close()
}
