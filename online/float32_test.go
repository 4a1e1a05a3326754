package online

import (
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/streamkpca/streamkpca/features"
	"github.com/streamkpca/streamkpca/internal/synth"
)

// TestModesHermite: float32 precision and BLAS compute meet the hermite
// bound of 1e-3 (the closed-form eigenfunctions, GPML §4.3.1) like the
// default does, on the same stream and feature draws, with errors close to
// the default's.
func TestModesHermite(t *testing.T) {
	longOnly(t)
	h := synth.Hermite1D()
	held := make([]float64, 2000)
	h.Sample(held, rand.New(rand.NewPCG(2, 2)))
	truth := h.Eigenfunctions(held, 2000, 3)
	errs := map[string]float64{}
	for _, mode := range []struct {
		p Precision
		c Compute
	}{{Float64, ComputeExact}, {Float32, ComputeExact}, {Float64, ComputeBLAS}} {
		l, err := New(Config{K: 3, Kernel: features.Kernel{Family: features.Gaussian, Bandwidth: 1},
			MaxFeatures: 8192, Precision: mode.p, Compute: mode.c})
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
		errs[string(mode.p)+"/"+string(mode.c)] = synth.SubspaceError(mat.NewDense(2000, 3, out), truth)
		l.Close()
	}
	t.Logf("subspace errors after 200k points: %v", errs)
	ref := errs["float64/exact"]
	for mode, e := range errs {
		if !(e <= 1e-3) {
			t.Errorf("%s: subspace error %.3g, want ≤ 1e-3", mode, e)
		}
		if r := e / ref; r > 1.5 || r < 1/1.5 {
			t.Errorf("%s: error %.3g vs the default's %.3g: more than 1.5× apart", mode, e, ref)
		}
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
