package bench

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/streamkpca/streamkpca/online"
)

// TestClassMix: the share of the second half of classes is 0 before T,
// rises evenly over [T, 2T) on a ramp (1 at once otherwise), and pick
// draws that half at that rate.
func TestClassMix(t *testing.T) {
	const T = 1000
	ramp, step := classMix{t: T, ramp: true}, classMix{t: T}
	for _, c := range []struct {
		m          classMix
		n          int
		share      float64
		half, pick int
	}{{ramp, T - 1, 0, 0, 0}, {ramp, T + T/4, 0.25, 0, -1}, {ramp, T + T/2, 0.5, 1, -1}, {ramp, 2 * T, 1, 1, 1}, {step, T, 1, 1, 1}, {step, T - 1, 0, 0, 0}} {
		if got := c.m.share(c.n); math.Abs(got-c.share) > 1e-12 || c.m.half(c.n) != c.half {
			t.Errorf("ramp %v at %d: share %v, half %d; want %v, %d", c.m.ramp, c.n, got, c.m.half(c.n), c.share, c.half)
		}
		rng := rand.New(rand.NewPCG(1, 2))
		var ones int
		const draws = 20000
		for range draws {
			ones += c.m.pick(rng, c.n)
		}
		if f := float64(ones) / draws; math.Abs(f-c.share) > 0.015 {
			t.Errorf("ramp %v at %d: picked half 1 in %.3f of draws, want %v", c.m.ramp, c.n, f, c.share)
		}
	}
}

// TestDriftKCCACase runs the kcca-ramp case on synthetic half-images
// whose right half is the left one mirrored (classes 0–4) or negated
// (5–9): every run reports a curve of held-out S_k, a checkpoint every
// batch of 256 (T/20 = 128 is less) over 3T and one at T − T/20 (where a
// batch is cut in two), and a relation this strong is learned (S_2 above
// 1.5 at the end, of at most 2).
func TestDriftKCCACase(t *testing.T) {
	set := mirroredOrNegated(9000)
	res, err := RunDrift(context.Background(), DriftConfig{Case: "kcca-ramp", MNIST: set, Points: 2560, K: 2, Batch: 256,
		Learner: online.Config{MaxFeatures: 256, BlockSize: 128}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != 3 {
		t.Fatalf("%d runs, want 3", len(res.Runs))
	}
	for _, r := range res.Runs {
		last := r.Curve[len(r.Curve)-1]
		t.Logf("%s: S_2 before %.3f, +20%% %.3f, +100%% %.3f; %d switches, changes at %v", r.Name, r.SumKBefore, r.SumKAt20, r.SumKAt100, r.Switches, r.Detected)
		if len(r.Curve) != 31 || last.Points != 3*2560 || !(r.SumKAt100 > 1.5) || r.SumKAt100 != last.SumK {
			t.Errorf("%s: %d checkpoints ending at %d points, S_2 at +100%% %.3f (last %.3f); want 31 ending at %d, above 1.5", r.Name, len(r.Curve), last.Points, r.SumKAt100, last.SumK, 3*2560)
		}
	}
}

// TestDriftReplayPacesRevisits: with Replay ρ a one-view run revisits ρ
// batches of the window after each batch it learns, as the service does
// on a stream that leaves it idle: on a stationary stream (no switch, no
// restart) the learner takes 1 + ρ steps a batch, and its samples are
// the stream's alone (a revisit is not a sample). Without Replay it takes
// one step a batch.
func TestDriftReplayPacesRevisits(t *testing.T) {
	for _, rho := range []float64{0, 3} {
		cfg := DriftConfig{Case: "stationary", Points: 2048, K: 3, Batch: 256, Seed: 1, Replay: rho,
			Learner: online.Config{MaxFeatures: 512, BlockSize: 128, Forget: online.ForgetOff}}
		d := newOneViewDrift(cfg, newHermiteDrift(cfg), "forget-off")
		if err := d.start(); err != nil {
			t.Fatal(err)
		}
		const batches = 12
		for i := range batches {
			if _, _, err := d.step(i*cfg.Batch, cfg.Batch); err != nil {
				t.Fatal(err)
			}
		}
		steps, seen := d.l.Step(), d.l.SamplesSeen()
		d.close()
		if want := uint64(batches * (1 + int(rho))); steps != want || seen != batches*uint64(cfg.Batch) {
			t.Errorf("replay %v: %d steps and %d samples after %d batches of %d; want %d steps and %d samples", rho, steps, seen, batches, cfg.Batch, want, batches*cfg.Batch)
		}
	}
}

// TestPassesWeighEveryItemAlike: items are taken in passes, each a
// permutation of all n, so that after any number of draws every item has
// been taken as often as any other, give or take one — the stream weighs
// its rows as the truth of those rows does — and the order is the seed's.
func TestPassesWeighEveryItemAlike(t *testing.T) {
	const n = 7
	var p, q passes
	rp, rq := rand.New(rand.NewPCG(5, 2)), rand.New(rand.NewPCG(5, 2))
	counts := make([]int, n)
	var firstPass []int
	for i := range 5*n + 3 {
		v := p.draw(rp, n)
		if w := q.draw(rq, n); w != v {
			t.Fatalf("draw %d: %d and %d from one seed", i, v, w)
		}
		counts[v]++
		if i < n {
			firstPass = append(firstPass, v)
		}
		lo, hi := counts[0], counts[0]
		for _, c := range counts {
			lo, hi = min(lo, c), max(hi, c)
		}
		if hi-lo > 1 {
			t.Fatalf("after %d draws the counts are %v: more than one apart", i+1, counts)
		}
	}
	seen := make([]bool, n)
	for _, v := range firstPass {
		seen[v] = true
	}
	if slices.Contains(seen, false) || slices.Equal(firstPass, []int{0, 1, 2, 3, 4, 5, 6}) {
		t.Errorf("first pass %v: want a shuffled permutation of 0…%d", firstPass, n-1)
	}
}
