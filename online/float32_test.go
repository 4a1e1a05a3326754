package online

import (
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/streamkpca/streamkpca/internal/synth"
	"github.com/streamkpca/streamkpca/online/features"
)

// TestFloat32Hermite: float32 mode meets the hermite bound of 1e-3 (the
// closed-form eigenfunctions, GPML §4.3.1) like float64 does, on the same
// stream and the same feature draws; the two errors are close.
func TestFloat32Hermite(t *testing.T) {
	h := synth.Hermite1D()
	held := make([]float64, 2000)
	h.Sample(held, rand.New(rand.NewPCG(2, 2)))
	truth := h.Eigenfunctions(held, 2000, 3)
	errs := map[Precision]float64{}
	for _, p := range []Precision{Float64, Float32} {
		l, err := New(Config{K: 3, Kernel: features.Kernel{Family: features.Gaussian, Bandwidth: 1},
			MaxFeatures: 8192, Precision: p})
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(1, 1))
		x := make([]float64, 512)
		for n := 0; n < 200_000; n += 512 {
			h.Sample(x, rng)
			if err := l.Update(x, 512); err != nil {
				t.Fatal(err)
			}
		}
		out := make([]float64, 2000*3)
		l.EvalTo(out, held, 2000)
		errs[p] = synth.SubspaceError(mat.NewDense(2000, 3, out), truth)
		l.Close()
	}
	t.Logf("subspace error after 200k points: float64 %.3g, float32 %.3g", errs[Float64], errs[Float32])
	for p, e := range errs {
		if !(e <= 1e-3) {
			t.Errorf("%s: subspace error %.3g, want ≤ 1e-3", p, e)
		}
	}
	if r := errs[Float32] / errs[Float64]; r > 1.5 || r < 1/1.5 {
		t.Errorf("float32 error %.3g vs float64 %.3g: more than 1.5× apart", errs[Float32], errs[Float64])
	}
}

// float32 needs a shift-invariant kernel; the error says so.
func TestFloat32NeedsShiftInvariant(t *testing.T) {
	l, err := New(Config{K: 2, Kernel: features.Kernel{Family: features.ArcCosine, Degree: 1}, Precision: Float32})
	if err == nil {
		err = l.Update(make([]float64, 64*3), 64)
	}
	if err == nil {
		t.Fatal("float32 with the arc-cosine kernel accepted")
	}
	if _, err := New(Config{K: 2, Precision: "float16"}); err == nil {
		t.Fatal("precision float16 accepted")
	}
}
