package online

import (
	"bytes"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/streamkpca/streamkpca/features"
)

// readDigits200 reads ../features/testdata/mnist200.csv: 200 MNIST digits,
// the first 20 of each class in class order, pixels scaled to [0, 1]. It
// returns the images of classes 0–4 and of 5–9 (100 each, 784 pixels).
func readDigits200(t *testing.T) (low, high []float64) {
	t.Helper()
	data, err := os.ReadFile("../features/testdata/mnist200.csv")
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		for _, f := range bytes.Split(line, []byte(",")) {
			v, err := strconv.ParseFloat(string(f), 64)
			if err != nil {
				t.Fatal(err)
			}
			if i/20 < 5 {
				low = append(low, v/1000)
			} else {
				high = append(high, v/1000)
			}
		}
	}
	if len(low) != 100*784 || len(high) != 100*784 {
		t.Fatalf("%d and %d values, want 100 images of 784 pixels each", len(low), len(high))
	}
	return low, high
}

// TestFitScoreOnMNISTChanges: MNIST digits of classes 0–4 for 40 batches,
// then classes 5–9 — at once, or by a share rising over 40 batches, then
// 40 more. The stream draws from 100 images of each half, so exact kernel
// PCA of the 100 images of 5–9 is the truth after the change. With
// forgetting off, the model that went on learning is far from it and a
// learner started at the change's end close; FitScore on those images
// ranks the fresh learner above the stale one. k = 2: these images'
// eigenvalues after the first fall 0.038, 0.026, 0.021, 0.018, and the
// widest gap is the second's. (The held-out Score, the share of the
// variance, ranked a stale MNIST model above a fresh one at 10
// components and 25,600 points a phase: 0.7745 against 0.6619 at errors
// 0.83 and 0.012, bench drift --case mnist-ramp; here it happens to rank
// them right, by less.) The satellite switch of the issue is not in the
// repository; an MNIST class switch stands in for it.
func TestFitScoreOnMNISTChanges(t *testing.T) {
	low, high := readDigits200(t)
	const d, n, b, k = 784, 100, 64, 2
	kern := features.Kernel{Family: features.Gaussian, Bandwidth: MedianDistance(low, n, d, n)}
	ref := newExactKPCA(t, kern, high, n, d, k)
	truth := ref.at(high, n)
	for _, c := range []struct {
		name  string
		share func(step int) float64
	}{
		{"switch", func(step int) float64 { return float64(min(1, step/80)) }},
		{"ramp", func(step int) float64 { return min(1, max(0, float64(step-40)/40)) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			stale, fresh := staleAndFresh(t, Config{K: k, Oversample: -1, Theta0: 1, BlockSize: 128, MaxFeatures: 1024, Kernel: kern, Workers: 1, Forget: ForgetOff})
			rng := rand.New(rand.NewPCG(7, 7))
			x := make([]float64, b*d)
			for step := range 120 {
				p := c.share(step)
				for r := range b {
					src := low
					if p >= 1 || (p > 0 && rng.Float64() < p) {
						src = high
					}
					i := rng.IntN(n)
					copy(x[r*d:(r+1)*d], src[i*d:(i+1)*d])
				}
				if err := stale.Update(x, b); err != nil {
					t.Fatal(err)
				}
				if step >= 80 {
					if err := fresh.Update(x, b); err != nil {
						t.Fatal(err)
					}
				}
			}
			es, ef := synthErr(evalDense(stale, high, n), truth), synthErr(evalDense(fresh, high, n), truth)
			fs, _ := stale.FitScore(high, n)
			ff, _ := fresh.FitScore(high, n)
			ss, _ := stale.Score(high, n)
			sf, _ := fresh.Score(high, n)
			t.Logf("against exact kernel PCA of classes 5–9: stale error %.3g, fit %.4f (share score %.4f); fresh error %.3g, fit %.4f (share score %.4f)", es, fs, ss, ef, ff, sf)
			if !(es > 2*ef) {
				t.Fatalf("errors stale %.3g, fresh %.3g: the test needs a stale model far from the truth", es, ef)
			}
			if !(ff > fs) {
				t.Errorf("FitScore: stale %.4f, fresh %.4f; want the fresh learner higher", fs, ff)
			}
		})
	}
}
