package bench

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestROCAUCByHand: the Mann–Whitney statistic worked out by hand.
func TestROCAUCByHand(t *testing.T) {
	for _, c := range []struct {
		pos, neg []float64
		want     float64
	}{
		{[]float64{2, 3}, []float64{1, 2}, 3.5 / 4}, // pairs: 2>1, 2=2 (½), 3>1, 3>2
		{[]float64{1}, []float64{2, 3}, 0},
		{[]float64{5, 6}, []float64{1, 2, 3}, 1},
		{[]float64{1, 1}, []float64{1}, 0.5},
	} {
		if got := rocAUC(c.pos, c.neg); math.Abs(got-c.want) > 1e-15 {
			t.Errorf("rocAUC(%v, %v) = %v, want %v", c.pos, c.neg, got, c.want)
		}
	}
	if !math.IsNaN(rocAUC(nil, []float64{1})) {
		t.Error("an AUC without rare rows")
	}
}

// TestRareStream: every common row once, the rare ones at their share,
// each row where its flag says.
func TestRareStream(t *testing.T) {
	const n = 1000
	x := make([]float64, n)
	labels := make([]int, n)
	for i := range x {
		x[i] = float64(i)
		labels[i] = i % 10 // 100 of label 9
	}
	out, rare := RareStream(x, 1, labels, 9, 0.02, rand.New(rand.NewPCG(1, 1)))
	seen := map[float64]bool{}
	nr := 0
	for i, v := range out {
		if seen[v] {
			t.Fatalf("row %v twice", v)
		}
		seen[v] = true
		if rare[i] != (int(v)%10 == 9) {
			t.Fatalf("row %v flagged rare %v", v, rare[i])
		}
		if rare[i] {
			nr++
		}
	}
	// 900 common rows; 2% of the stream: 900·0.02/0.98 = 18.4 → 18.
	if len(out) != 918 || nr != 18 {
		t.Errorf("%d rows, %d rare; want 918 and 18", len(out), nr)
	}
}

// TestNoveltyFindsFarPoints: points on a noisy circle with 2% of points
// far outside it, through the service with an output topic: the far
// points' residuals rank above the circle's (they are near k(x, x) = 1,
// nothing of them in the components), and about 1 − q of the circle's
// are flagged, on the stream's second half (in the first, version 1
// scores 8 batches with a reference of one batch's held-out rows: a
// novelty of at most 32/33).
func TestNoveltyFindsFarPoints(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	const n = 24000
	x := make([]float64, 0, 2*n)
	labels := make([]int, n)
	for i := range n {
		a := 2 * math.Pi * rng.Float64()
		r := 1 + 0.05*rng.NormFloat64()
		if i%10 == 9 {
			r, labels[i] = 4+rng.Float64(), 1
		}
		x = append(x, r*math.Cos(a), r*math.Sin(a))
	}
	xs, rare := RareStream(x, 2, labels, 1, 0.02, rng)
	res, err := RunNovelty(t.Context(), NoveltyConfig{X: xs, D: 2, Rare: rare, K: 3, Bandwidth: 0.5, Quantile: 0.95, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if res.AUC < 0.99 || res.Recall < 0.9 || res.FalseAlarm > 0.1 {
		t.Errorf("AUC %.4f, recall %.3f, false alarms %.4f at q = 0.95", res.AUC, res.Recall, res.FalseAlarm)
	}
	t.Logf("%d rows, %d rare: AUC %.4f, recall %.3f, false alarms %.4f (bound 0.05), %.1f s", res.Rows, res.Rare, res.AUC, res.Recall, res.FalseAlarm, res.Seconds)
}
