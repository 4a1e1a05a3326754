package online

import "math"

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
