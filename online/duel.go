package online

import (
	"errors"
	"math"

	"github.com/streamkpca/streamkpca/snapshot"
)

// # A switch a test justifies: testing by betting
//
// A challenger replaces the model only when a sequential test says it
// fits the stream better, with a stated bound on false switches, not a
// margin tuned on one data set. Each held-out row x, scored by both
// learners before either learns it (prequential), gives a paired
// difference
//
//	d = s_c(x) − s_m(x) ∈ [−1, 1],   s(x) = ‖P φ(x)‖²/k(x, x) ∈ [0, 1]
//
// of the two models' captured shares (Score's per-row figure: the share
// of the row's kernel variance that the k functions capture in their
// RKHS-orthonormal basis — the quantity kernel PCA maximises, the
// paper's eq. (1), so a model whose expected share is higher is the
// better kernel PCA of the stream). The null hypothesis is that the
// challenger is no better: E[d | the past] ≤ 0 at every row. The test
// bets on d (Shafer & Vovk; Waudby-Smith & Ramdas, JRSS-B 2024;
// Shekhar & Ramdas, IEEE Trans. IT 2023): the wealth
//
//	W_t(λ) = Π_{i ≤ t} (1 + λ·d_i),   E_t = mean over λ ∈ {0.9, 2⁻¹, …, 2⁻⁷} of W_t(λ)
//
// is a nonnegative supermartingale under the null for each fixed λ in
// [0, 1), and so is their mean: by Ville's inequality
// P(sup_t E_t ≥ 1/α) ≤ α, at whatever row the test stops — a
// challenger scored for a million rows is no more likely to win
// falsely than one scored for a hundred. A grid of fixed bets rather
// than a learned one (GRAPA, ONS) keeps the state eight numbers a
// snapshot can hold, and loses at most log 8 of log-wealth against the
// best bet of the grid. Against a challenger better by δ with paired
// spread σ, log E_t grows about t·max_λ(λδ − λ²σ²/2): with d of a few
// hundredths, a few hundred held-out rows (the switch-delay figures of
// TestBettingSwitchDelay).
//
// A model's life may see several candidates (follow.go): the j-th is
// tested at level α_j = α·6/(π²j²), whose sum over j is α, so the
// probability that the model is ever replaced by a candidate that is no
// better, over its whole life, is at most α (Config.FollowAlpha,
// learner.follow_alpha; default DefaultFollowAlpha). The threshold
// grows only as 2 log j. The scouts' tests, which decide only whether a
// candidacy starts, each run at α: on a stream that does not change at
// most one challenger in 1/α starts a candidacy, which then fails its
// own test with probability at least 1 − α_j.

// DefaultFollowAlpha is the default bound on the probability that a
// model is ever replaced by a challenger that is no better
// (Config.FollowAlpha).
const DefaultFollowAlpha = 0.01

// betGrid is the number of bets the wealth mixes: betTop, then 2⁻¹ …
// 2⁻⁷. A bet near 1 grows fastest when the differences are small beside
// their bound of 1 but consistent (about δ a row), which is what two
// learners of the same stream give.
const (
	betGrid = 8
	betTop  = 0.9
)

// betting is a test by betting on paired differences d ∈ [−1, 1] (see
// above): the log-wealth of each bet of the grid and the rows bet on.
type betting struct {
	logW [betGrid]float64
	rows int
}

// observe bets on one paired difference d, clamped to [−1, 1].
func (b *betting) observe(d float64) {
	if math.IsNaN(d) {
		return
	}
	d = max(-1, min(1, d))
	b.logW[0] += math.Log1p(betTop * d)
	lam := 0.5
	for i := 1; i < betGrid; i++ {
		b.logW[i] += math.Log1p(lam * d)
		lam /= 2
	}
	b.rows++
}

// logEvidence is log E_t, the log of the mean wealth over the grid (0
// before the first row).
func (b *betting) logEvidence() float64 {
	m := b.logW[0]
	for _, w := range b.logW[1:] {
		m = max(m, w)
	}
	var s float64
	for _, w := range b.logW {
		s += math.Exp(w - m)
	}
	return m + math.Log(s/betGrid)
}

// behind reports whether the differences bet on sum to less than zero:
// the smallest bet's log-wealth, Σ log(1 + λd) ≈ λ·Σd for λ = 2⁻⁷, is
// negative.
func (b *betting) behind() bool { return b.rows > 0 && b.logW[betGrid-1] < 0 }

// rejects reports whether the evidence has reached 1/level.
func (b *betting) rejects(level float64) bool {
	return level > 0 && b.logEvidence() >= -math.Log(level)
}

// values is the test as a snapshot stores it: the log-wealths, then the
// rows.
func (b *betting) values() []float64 {
	return append(append(make([]float64, 0, betGrid+1), b.logW[:]...), float64(b.rows))
}

// restoreBetting is the test values stored (nil or malformed: a new test).
func restoreBetting(v []float64) betting {
	var b betting
	if len(v) != betGrid+1 {
		return b
	}
	for i := range b.logW {
		if math.IsNaN(v[i]) || math.IsInf(v[i], 1) {
			return betting{}
		}
	}
	copy(b.logW[:], v)
	b.rows = int(v[betGrid])
	return b
}

// spend is the level of the j-th test (j ≥ 1) of a model's life:
// α·6/(π²j²), which sums to α over j.
func spend(alpha float64, j int) float64 {
	j = max(j, 1)
	return alpha * 6 / (math.Pi * math.Pi * float64(j) * float64(j))
}

// # One duel for one and two views
//
// chase is following's state machine (follow.go tells its story), the
// same for a one-view model (KPCA) and a two-view one (TwoView): two
// scouts of equal size learn every batch the model learns, the shadow
// from the model's first steps and the challenger restarted on the
// stream as it is then; when the test rejects "the challenger is no
// better than the shadow" a candidate of the model's budget starts, and
// it replaces the model only when a test at the life's next share of α
// rejects "the candidate is no better than the model", or is withdrawn
// after followMaxLife + followProbation steps. What differs between the
// views is only how a held-out row is scored by two learners (arena's
// score: the share of the row's kernel variance for one view, the
// standardised product of the pair's values for two) and how a learner
// is made and adopted.

// batch is a mini-batch as following passes it: rows rows of x, and of
// y for two views (nil for one).
type batch struct {
	x, y []float64
	rows int
}

// rival is a learner following runs beside the model: a scout or a
// candidate (*KPCA or *TwoView; the zero value is none).
type rival interface {
	comparable
	contender
}

// contender is the methods of a rival.
type contender interface {
	steps() uint64 // steps learned
	started() bool // holds functions (a first block)
	Close()
}

// arena is what following asks of the model it runs for.
type arena[L rival] interface {
	steps() uint64 // the model's steps
	self() L
	alpha() float64  // Config.FollowAlpha
	newScout() L     // a scout: followScoutShare of the budget (zero: cannot be made)
	newCandidate() L // a learner of the model's settings and budget
	learn(c L, b batch) error
	// score scores held-out rows b, learned by neither, by learners a
	// and c as they are now, adds their scores to t's sums and bets on
	// each row's difference, c's less a's; false when either cannot be
	// scored.
	score(a, c L, b batch, t *trial) bool
	collect(b batch) // held-out rows for the next reference set (one view)
	newScores()      // a new test's scoring state
	adopt(c L)       // make c the model and count the switch
	withdrawn()      // count a candidate withdrawn
}

// trial is one test of following: the wealth and the two learners'
// score sums over the rows bet on.
type trial struct {
	test   betting
	sm, so float64
}

// chase is following's learners and test (see above).
type chase[L rival] struct {
	// ch is the challenger, shadow the scout of the model's lineage;
	// cand the candidate, zero outside a candidacy (ch is then zero).
	ch, shadow, cand L
	trial
	// tests counts the candidacies of the model's life so far: the j-th
	// is tested at level spend(α, j); the scouts' tests run at α.
	tests int
}

// restoredChase is the learners and test of a snapshot's challenger
// state c: ch as the candidate (c.Candidate) or the challenger, shadow
// as the shadow, the test and, once it has bet, its score sums.
func restoredChase[L rival](c *snapshot.Challenger, ch, shadow L) chase[L] {
	f := chase[L]{shadow: shadow, trial: trial{test: restoreBetting(c.Test)}, tests: c.Tests}
	if c.Candidate {
		f.cand = ch
	} else {
		f.ch = ch
	}
	if f.test.rows > 0 {
		f.sm, f.so = c.Fit, c.ChallengerFit
	}
	return f
}

// none reports whether c is no learner.
func none[L rival](c L) bool {
	var zero L
	return c == zero
}

// level is the current test's level: the scouts' α, a candidacy's share
// of α.
func (f *chase[L]) level(a arena[L]) float64 {
	if !none(f.cand) {
		return spend(a.alpha(), f.tests)
	}
	return a.alpha()
}

// means returns the mean scores of the current test's two learners over
// its rows (the shadow's and the challenger's, or the model's and the
// candidate's); zeros before its first row.
func (f *chase[L]) means() (model, challenger float64) {
	n := f.test.rows
	if n == 0 {
		return 0, 0
	}
	return f.sm / float64(n), f.so / float64(n)
}

// evidence returns the current test's evidence (E_t) and the level it
// rejects at; 0, 0 without a test.
func (f *chase[L]) evidence(a arena[L]) (evidence, level float64) {
	if !f.active() {
		return 0, 0
	}
	return math.Exp(f.test.logEvidence()), f.level(a)
}

// active reports whether a test is running: scouts or a candidate.
func (f *chase[L]) active() bool { return !none(f.ch) || !none(f.cand) }

// drop ends following's learners and the current test.
func (f *chase[L]) drop(a arena[L]) {
	var zero L
	for _, c := range []L{f.ch, f.shadow, f.cand} {
		if !none(c) {
			c.Close()
		}
	}
	f.ch, f.shadow, f.cand = zero, zero, zero
	f.tests = 0
	f.newTest(a)
}

// newTest starts a test: new wealth, sums and scoring state.
func (f *chase[L]) newTest(a arena[L]) {
	f.trial = trial{}
	a.newScores()
}

// startScouts starts a challenger (and the shadow, if there is none)
// and its test.
func (f *chase[L]) startScouts(a arena[L]) {
	if !none(f.ch) {
		f.ch.Close()
	}
	f.ch = a.newScout()
	if none(f.shadow) {
		f.shadow = a.newScout()
	}
	f.newTest(a)
}

// startCandidacy answers the scouts' rejection (or a change the level
// detector found): the candidate is a learner of the model's settings
// and budget started on the next batch; the challenger ends and the
// shadow, of the model's lineage, goes on learning beside it.
func (f *chase[L]) startCandidacy(a arena[L]) {
	c := a.newCandidate()
	if none(c) {
		return
	}
	var zero L
	for _, s := range []L{f.ch, f.cand} {
		if !none(s) {
			s.Close()
		}
	}
	f.ch, f.cand = zero, c
	f.tests++
	f.newTest(a)
}

// withdraw ends a candidacy without a switch: the model is kept and its
// life goes on (the next candidacy is tested at the next share of α),
// with the shadow of its lineage, against which the next challenger is
// tested. (A shadow of the withdrawn candidate's lineage, which this
// replaced, kept a stale model served for good: on a relation that grew
// over 200 batches, the candidate started halfway was withdrawn, and no
// challenger beat a shadow that had learned the same half.)
func (f *chase[L]) withdraw(a arena[L]) {
	var zero L
	f.cand.Close()
	f.cand = zero
	a.withdrawn()
	f.newTest(a)
}

// promoted starts the new model's life after a switch: the old model's
// shadow ends, and the scouts start again with the next assessment (a
// shadow and a challenger started together are the same learner for the
// challenger's first life: the new model's following is blind for
// followLife steps).
func (f *chase[L]) promoted(a arena[L]) {
	var zero L
	if !none(f.shadow) {
		f.shadow.Close()
	}
	f.shadow = zero
	f.tests = 0
	f.newTest(a)
}

// challenge scores held-out rows b (learned by no one yet) with the two
// learners of the current test — the shadow and the challenger,
// starting them when there are none and the model is old enough, or in
// a candidacy the model and the candidate — and feeds the test. A
// rejection of the scouts' test starts a candidacy. It reports whether
// the candidate has won (the caller makes it the model: win).
func (f *chase[L]) challenge(a arena[L], b batch) bool {
	if a.steps() == 0 || b.rows == 0 {
		return false
	}
	if none(f.shadow) {
		// The shadow learns with the model from its first steps: a
		// challenger started with it would be the same learner, bit for
		// bit, for its whole first life (and on a stream that switched
		// at step 20, no test could tell it from the shadow).
		f.shadow = a.newScout()
	}
	if a.steps() < followStart {
		return false
	}
	if !none(f.cand) {
		if !f.cand.started() {
			a.collect(b)
			return false
		}
		return f.duel(a, a.self(), f.cand, b)
	}
	if none(f.ch) {
		f.startScouts(a)
		return false
	}
	if none(f.shadow) || f.ch.steps() < followMinAge || !f.ch.started() {
		a.collect(b)
		return false
	}
	if f.duel(a, f.shadow, f.ch, b) {
		f.startCandidacy(a)
	}
	return false
}

// win makes the candidate that has won the model.
func (f *chase[L]) win(a arena[L]) {
	var zero L
	c := f.cand
	f.cand = zero
	a.adopt(c)
	f.promoted(a)
}

// duel scores held-out rows b with x and y, bets on y's lead and
// collects the rows for the next reference set; it reports whether the
// test has rejected "y is no better than x" at its level.
func (f *chase[L]) duel(a arena[L], x, y L, b batch) bool {
	scored := a.score(x, y, b, &f.trial)
	a.collect(b)
	return scored && f.test.rejects(f.level(a))
}

// learnBoth teaches x and y the batch at once (its own function: the
// goroutine's captures are on the heap only when it runs, and a step
// without both scouts allocates nothing).
func learnBoth[L rival](a arena[L], x, y L, b batch) (errX, errY error) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		errX = a.learn(x, b)
	}()
	errY = a.learn(y, b)
	<-done
	return errX, errY
}

// ahead reports whether the current test's evidence is halfway to
// rejecting, in log-evidence. A challenger barely ahead kept for its
// whole longest life had learned the old stream as the shadow had (MNIST
// ramp, seed 3: evidence 1.1–2.8 for 96 steps).
func (f *chase[L]) ahead(a arena[L]) bool {
	return f.test.logEvidence() >= 0.5*-math.Log(f.level(a))
}

// step teaches following's learners the batch the model has just
// learned. A challenger past followLife steps, tested on followLifeRows
// rows and not ahead (or past followMaxLife) is restarted; a candidate
// past followMaxLife + followProbation steps is withdrawn.
func (f *chase[L]) step(a arena[L], b batch) {
	var zero L
	if c := f.cand; !none(c) {
		if err := a.learn(c, b); err != nil && !errors.Is(err, ErrDiverged) {
			f.withdraw(a)
		} else if c.steps() >= followMaxLife+followProbation {
			f.withdraw(a) // not better by followProbation steps after the latest a challenger can win
		} else if c.steps() >= followLife && f.test.rows >= followLifeRows && f.test.behind() {
			// Futile: behind the model on the rows of its trial so far. A
			// candidate started early in a long change has learned part of
			// the old stream too; withdrawn, the scouts start again on the
			// stream as it is now. (Stopping a test early can only lower
			// its false-switch rate.)
			f.withdraw(a)
		}
	}
	if ch := f.ch; !none(ch) && ch.steps() >= followLife && f.test.rows >= followLifeRows && (!f.ahead(a) || ch.steps() >= followMaxLife) {
		f.startScouts(a)
	}
	// The two scouts learn the batch at once: each is a small learner
	// whose steps leave the model's workers idle, and they share nothing.
	sh, ch := f.shadow, f.ch
	var errS, errC error
	switch {
	case !none(sh) && !none(ch):
		errS, errC = learnBoth(a, sh, ch, b)
	case !none(sh):
		errS = a.learn(sh, b)
	case !none(ch):
		errC = a.learn(ch, b)
	}
	if errS != nil && sh.steps() == 0 {
		sh.Close()
		f.shadow = zero
	}
	if errC != nil && ch.steps() == 0 {
		ch.Close()
		f.ch = zero // it cannot start on this batch: the next assessment starts another
	}
}
