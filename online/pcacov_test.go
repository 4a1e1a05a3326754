package online

import (
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/streamkpca/streamkpca/internal/synth"
	"github.com/streamkpca/streamkpca/online/features"
)

// TestCovarianceLinearIsPCA: kpca with the covariance solver and the
// linear kernel (the identity map) is principal component analysis of
// everything streamed. After one pass over 3,000 points the centred
// functions span the top-4 principal subspace and the eigenvalue
// estimates are the covariance's eigenvalues, both against gonum's
// EigenSym of the points' covariance; uncentred, against the second
// moment.
func TestCovarianceLinearIsPCA(t *testing.T) {
	const n, d, k, b = 3000, 12, 4, 200
	rng := rand.New(rand.NewPCG(5, 5))
	x := make([]float64, n*d)
	for i := 0; i < n; i++ {
		for j := 0; j < d; j++ {
			// Decaying variances, a mean off zero and some correlation.
			x[i*d+j] = 3 + float64(j) + rng.NormFloat64()/float64(j+1)
		}
		x[i*d+1] += 0.5 * x[i*d]
	}
	for _, center := range []bool{true, false} {
		l, err := New(Config{K: k, Kernel: features.Kernel{Family: features.Linear}, Solver: SolverCovariance, Center: center, Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		for s := 0; s < n; s += b {
			if err := l.Update(x[s*d:(s+b)*d], b); err != nil {
				t.Fatal(err)
			}
		}
		// The truth: (1/n)·Σ (x − μ)(x − μ)ᵀ, μ = 0 uncentred.
		mu := make([]float64, d)
		if center {
			for i := 0; i < n; i++ {
				for j := 0; j < d; j++ {
					mu[j] += x[i*d+j] / n
				}
			}
		}
		c := mat.NewSymDense(d, nil)
		for a := 0; a < d; a++ {
			for bb := a; bb < d; bb++ {
				var s float64
				for i := 0; i < n; i++ {
					s += (x[i*d+a] - mu[a]) * (x[i*d+bb] - mu[bb])
				}
				c.SetSym(a, bb, s/n)
			}
		}
		var es mat.EigenSym
		if !es.Factorize(c, true) {
			t.Fatal("EigenSym failed")
		}
		vals := es.Values(nil)
		var vecs mat.Dense
		es.VectorsTo(&vecs)
		top := mat.NewDense(d, k, nil)
		for q := 0; q < k; q++ {
			for a := 0; a < d; a++ {
				top.Set(a, q, vecs.At(a, d-1-q))
			}
		}
		// Both as functions on the points: the learner's minus its centre,
		// the truth's minus the projected mean.
		xc := mat.NewDense(n, d, nil)
		for i := 0; i < n; i++ {
			for j := 0; j < d; j++ {
				xc.Set(i, j, x[i*d+j]-mu[j])
			}
		}
		var truth mat.Dense
		truth.Mul(xc, top)
		got := evalDense(l, x, n)
		if center {
			if e := synth.SubspaceError(got, &truth); e > 1e-10 {
				t.Errorf("centred: subspace error %.3g vs exact PCA, want ≤ 1e-10", e)
			}
		} else if e := synth.SubspaceError(got, &truth); e > 1e-10 {
			t.Errorf("uncentred: subspace error %.3g vs the second moment's eigenvectors, want ≤ 1e-10", e)
		}
		eig, _ := l.Eigenvalues()
		for q := 0; q < k; q++ {
			if want := vals[d-1-q]; math.Abs(eig[q]-want) > 1e-10*want {
				t.Errorf("center %v: eigenvalue %d = %.15g, exact %.15g", center, q, eig[q], want)
			}
		}
		l.Close()
	}
}

// TestCovarianceLandmarksIsEnsembleNystrom: kpca with landmark blocks and
// the covariance solver (their default) is, after one pass, exactly
// kernel PCA of the stream under the blocks' averaged Nyström kernel
// k̃(x, y) = (1/n)·Σ_j k(x, Z_j)(K_jj + ε_j·I)⁻¹k(Z_j, y), the batches
// that built the landmarks included. The truth is computed here from the
// landmark points and the kernel alone (gonum: Cholesky solves of each
// block's K_jj and EigenSym of the covariance of the features they give);
// the functions must match on the points and the eigenvalue estimates to
// 1e-8.
func TestCovarianceLandmarksIsEnsembleNystrom(t *testing.T) {
	const n, b, nb, k = 1024, 128, 128, 3
	rng := rand.New(rand.NewPCG(8, 8))
	x := curvedData(rng, n)
	d := exactD
	kern := kernelG(MedianDistance(x, n, d, 512))
	for _, center := range []bool{false, true} {
		l, err := New(Config{K: k, Kernel: kern, BlockSize: nb, MaxFeatures: 4 * nb, Features: FeaturesLandmarks, Center: center})
		if err != nil {
			t.Fatal(err)
		}
		if l.Config().Solver != SolverCovariance {
			t.Fatalf("landmark kpca's default solver is %q, want covariance", l.Config().Solver)
		}
		for s := 0; s < n; s += b {
			if err := l.Update(x[s*d:(s+b)*d], b); err != nil {
				t.Fatal(err)
			}
		}
		blocks, _ := l.ev.Landmarks(-1)
		if blocks != 4 {
			t.Fatalf("%d landmark blocks, want 4", blocks)
		}
		// Φ̃ (n × 4·nb): block j's columns are k(x, Z_j)·L_j⁻ᵀ/√4 with
		// L_j·L_jᵀ = K_jj + ε_j·I, so Φ̃Φ̃ᵀ is the averaged kernel.
		phi := mat.NewDense(n, blocks*nb, nil)
		for j := 0; j < blocks; j++ {
			_, lb := l.ev.Landmarks(j)
			kjj := mat.NewSymDense(nb, nil)
			for a := 0; a < nb; a++ {
				for c := a; c < nb; c++ {
					v := kern.Eval(lb.Z[a*d:a*d+d], lb.Z[c*d:c*d+d])
					if a == c {
						v += lb.Jitter
					}
					kjj.SetSym(a, c, v)
				}
			}
			var ch mat.Cholesky
			if !ch.Factorize(kjj) {
				t.Fatal("K_jj not positive definite")
			}
			var lo mat.TriDense
			ch.LTo(&lo)
			kx := mat.NewDense(nb, n, nil) // k(Z_j, x)
			for a := 0; a < nb; a++ {
				for i := 0; i < n; i++ {
					kx.Set(a, i, kern.Eval(lb.Z[a*d:a*d+d], x[i*d:i*d+d]))
				}
			}
			var f mat.Dense // L⁻¹·k(Z_j, x)
			if err := f.Solve(&lo, kx); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < n; i++ {
				for a := 0; a < nb; a++ {
					phi.Set(i, j*nb+a, f.At(a, i)/2)
				}
			}
		}
		if center {
			for c := 0; c < blocks*nb; c++ {
				var s float64
				for i := 0; i < n; i++ {
					s += phi.At(i, c)
				}
				for i := 0; i < n; i++ {
					phi.Set(i, c, phi.At(i, c)-s/n)
				}
			}
		}
		// The operator's eigenfunctions on the points are Φ̃·v for the
		// eigenvectors v of the feature covariance Φ̃ᵀΦ̃/n (gonum).
		m := blocks * nb
		cv := mat.NewSymDense(m, nil)
		cv.SymOuterK(1.0/n, phi.T())
		var es mat.EigenSym
		if !es.Factorize(cv, true) {
			t.Fatal("EigenSym failed")
		}
		vals := es.Values(nil)
		var vecs mat.Dense
		es.VectorsTo(&vecs)
		var truth mat.Dense
		truth.Mul(phi, vecs.Slice(0, m, m-k, m))
		got := evalDense(l, x, n)
		if e := synth.SubspaceError(got, &truth); e > 1e-8 {
			t.Errorf("center %v: subspace error %.3g vs exact ensemble-Nyström KPCA, want ≤ 1e-8", center, e)
		}
		eig, _ := l.Eigenvalues()
		want := slices.Clone(vals[m-k:])
		sort.Sort(sort.Reverse(sort.Float64Slice(want)))
		for q := range want {
			if math.Abs(eig[q]-want[q]) > 1e-8*want[0] {
				t.Errorf("center %v: eigenvalue %d = %.12g, exact %.12g", center, q, eig[q], want[q])
			}
		}
		l.Close()
	}
}
