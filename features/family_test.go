package features

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestEveryFamilyIsCovered: every family of Families has its entry in the
// table (an exact kernel, a sampler, an activation), is in
// TestKernelMonteCarlo's kernels unless its map is the identity, and has
// landmark features that interpolate its exact kernel on their points —
// ψ(z_i)·ψ(z_j) = k(z_i, z_j), Nyström's defining property — or refuses
// them with ErrKernel. A new family that misses any of these fails here;
// clients/python's TestPythonClientConformance checks it has a Python
// counterpart that regenerates its features bit for bit.
func TestEveryFamilyIsCovered(t *testing.T) {
	if len(families) != len(Families) {
		t.Fatalf("%d families in the table, %d in Families", len(families), len(Families))
	}
	const d, nb = 4, 12
	for _, f := range Families {
		t.Run(string(f), func(t *testing.T) {
			s := f.spec()
			if s == nil || s.eval == nil || s.draw == nil || s.activate == nil {
				t.Fatalf("no complete entry in the table: %+v", s)
			}
			i := slices.IndexFunc(mcKernels, func(c struct {
				kern  Kernel
				input func(*rand.Rand) float64
			}) bool {
				return c.kern.Family == f
			})
			if f.Identity() {
				return // exact: one block of Dim features, no landmarks (TestLandmarksRefused)
			}
			if i < 0 {
				t.Fatal("not among TestKernelMonteCarlo's kernels")
			}
			k, input := mcKernels[i].kern, mcKernels[i].input
			if f == Matern {
				k.Nu = 1.5 // landmarks need a closed form
			}
			m := Map{Kernel: k, Dim: d, BlockSize: nb, Landmarks: true}
			if err := m.Validate(); err != nil {
				if !errors.Is(err, ErrKernel) {
					t.Fatalf("landmarks refused with %v, want ErrKernel", err)
				}
				return
			}
			rng := rand.New(rand.NewPCG(9, 9))
			z := make([]float64, nb*d)
			for j := range z {
				z[j] = input(rng)
			}
			lb, err := m.NewLandmarks(z)
			if err != nil {
				t.Fatal(err)
			}
			phi := make([]float64, nb*nb)
			m.PhiTo(phi, make([]float64, m.ScratchLen()), z, nb, &Block{LM: lb})
			var worst float64
			for a := range nb {
				for c := range nb {
					var dot float64
					for q := range nb {
						dot += phi[a*nb+q] * phi[c*nb+q]
					}
					want := k.Eval(z[a*d:(a+1)*d], z[c*d:(c+1)*d])
					worst = max(worst, math.Abs(dot-want)/max(1, math.Abs(want)))
				}
			}
			t.Logf("landmarks reproduce the kernel to %.2g", worst)
			if worst > 1e-6 {
				t.Errorf("landmark features reproduce the kernel on their points to %.3g, want 1e-6", worst)
			}
		})
	}
}
