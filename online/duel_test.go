package online

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// pairedDiffs draws paired differences d = s_c − s_m of two learners'
// shares: s_m ~ Beta-like on [0, 1] around 0.6, and s_c = s_m + δ plus
// noise of spread sigma, both clamped to [0, 1] as the shares are. With
// delta = 0 the challenger is no better (E[d] ≤ 0: the clamping at 1
// only lowers it).
func pairedDiffs(rng *rand.Rand, delta, sigma float64) float64 {
	sm := min(1, max(0, 0.6+0.15*rng.NormFloat64()))
	sc := min(1, max(0, sm+delta+sigma*rng.NormFloat64()))
	return sc - sm
}

// TestBettingFalseRejections: under the null (mean difference 0) the
// test rejects at most α of the time over its whole life, whatever its
// length (Ville's inequality): 2,000 tests of 1,000 rows each (2·10⁶
// rows) at α = 0.05 reject at a frequency within the binomial bound of
// α. And spending α over a life's tests (α·6/(π²j²) for the j-th) keeps
// the probability that any of 20 tests of a life rejects below α.
func TestBettingFalseRejections(t *testing.T) {
	const alpha, tests, rows = 0.05, 2000, 1000
	rng := rand.New(rand.NewPCG(1, 2))
	var rejected int
	for range tests {
		var b betting
		for range rows {
			b.observe(pairedDiffs(rng, 0, 0.05))
			if b.rejects(alpha) {
				rejected++
				break
			}
		}
	}
	freq := float64(rejected) / tests
	bound := alpha + 3*math.Sqrt(alpha*(1-alpha)/tests)
	t.Logf("null: %d of %d tests of %d rows rejected at α = %v (%.4f; the bound with 3 standard errors %.4f)", rejected, tests, rows, alpha, freq, bound)
	if freq > bound {
		t.Errorf("the test rejected %.4f of null tests, above α = %v (bound %.4f)", freq, alpha, bound)
	}

	// A life of 20 tests at the spent levels.
	const lives, perLife, lifeRows = 500, 20, 200
	var lifeFalse int
	for range lives {
	life:
		for j := 1; j <= perLife; j++ {
			var b betting
			for range lifeRows {
				b.observe(pairedDiffs(rng, 0, 0.05))
				if b.rejects(spend(alpha, j)) {
					lifeFalse++
					break life
				}
			}
		}
	}
	lf := float64(lifeFalse) / lives
	lbound := alpha + 3*math.Sqrt(alpha*(1-alpha)/lives)
	t.Logf("lives of %d tests (%d rows each) at spent levels: %d of %d had a false rejection (%.4f, bound %.4f)", perLife, lifeRows, lifeFalse, lives, lf, lbound)
	if lf > lbound {
		t.Errorf("a life's spent tests rejected falsely in %.4f of lives, above α = %v (bound %.4f)", lf, alpha, lbound)
	}
	var sum float64
	for j := 1; j <= 100000; j++ {
		sum += spend(alpha, j)
	}
	if sum > alpha {
		t.Errorf("the levels of a life sum to %v, above α = %v", sum, alpha)
	}
}

// TestBettingSwitchDelay: a challenger better by δ in expectation is
// found; the delay (rows until the test rejects at α = 0.01) is measured
// for δ of 0.01, 0.02 and 0.05 with paired spread 0.05, and stays within
// a factor of 2 of the bet's expected log-growth: the rows r at which
// r·E[log(1 + 0.9·d)] = log(8/α) (the top bet carrying the mixture of
// eight).
func TestBettingSwitchDelay(t *testing.T) {
	const alpha, sigma, runs = 0.01, 0.05, 200
	for _, delta := range []float64{0.01, 0.02, 0.05} {
		rng := rand.New(rand.NewPCG(3, uint64(delta*1000)))
		var growth float64
		const mc = 200000
		for range mc {
			growth += math.Log1p(betTop*pairedDiffs(rng, delta, sigma)) / mc
		}
		predicted := math.Log(betGrid/alpha) / growth
		delays := make([]float64, 0, runs)
		for range runs {
			var b betting
			n := 0
			for !b.rejects(alpha) && n < 100000 {
				b.observe(pairedDiffs(rng, delta, sigma))
				n++
			}
			delays = append(delays, float64(n))
		}
		slices.Sort(delays)
		med := delays[runs/2]
		t.Logf("δ = %.2f, σ = %.2f: median delay %.0f rows (10%%: %.0f, 90%%: %.0f); predicted by the top bet's growth %.0f", delta, sigma, med, delays[runs/10], delays[9*runs/10], predicted)
		if !(med <= 2*predicted && med >= predicted/2) {
			t.Errorf("δ = %.2f: median delay %.0f rows, predicted %.0f", delta, med, predicted)
		}
	}
}

// TestBettingSnapshotValues: a test stored and restored goes on bit for
// bit; a malformed store starts a new test.
func TestBettingSnapshotValues(t *testing.T) {
	var b betting
	rng := rand.New(rand.NewPCG(5, 5))
	for range 100 {
		b.observe(pairedDiffs(rng, 0.01, 0.05))
	}
	r := restoreBetting(b.values())
	if r != b {
		t.Errorf("restored %+v, want %+v", r, b)
	}
	if got := restoreBetting([]float64{1, 2}); got != (betting{}) {
		t.Errorf("a malformed store restored %+v", got)
	}
	bad := b.values()
	bad[0] = math.NaN()
	if got := restoreBetting(bad); got != (betting{}) {
		t.Errorf("a store with NaN restored %+v", got)
	}
}
