package online

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/streamkpca/streamkpca/features"
	"github.com/streamkpca/streamkpca/internal/synth"
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
		vals, top := topEigen(t, c, k)
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
			if want := vals[q]; math.Abs(eig[q]-want) > 1e-10*want {
				t.Errorf("center %v: eigenvalue %d = %.15g, exact %.15g", center, q, eig[q], want)
			}
		}
		l.Close()
	}
}

// TestCovarianceLandmarksIsNystrom: kpca with landmark blocks and the
// covariance solver (their default) is, after one pass, Nyström kernel
// PCA of the stream on all the landmarks of all the blocks (Williams &
// Seeger 2001), the batches that built the landmarks included. The truth
// is computed here from the landmark points and the kernel alone, the
// textbook way: φ(x) = K_ZZ^(−½)·k(Z, x) through gonum's EigenSym of the
// 512×512 K_ZZ (eigenvalues below 1e-10 of the largest dropped), then
// the top eigenvectors of the covariance of φ over the 1,024 points. The
// learned functions must match on the points to 1e-9 and the eigenvalue
// estimates to 1e-7 relative (the learner regularises K_ZZ by a jitter
// instead of the cut).
func TestCovarianceLandmarksIsNystrom(t *testing.T) {
	t.Parallel() // CPU-bound on one worker: beside the package's other long tests (quick tier ≤ 2 minutes)
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
		m := blocks * nb
		z := make([]float64, 0, m*d)
		for j := 0; j < blocks; j++ {
			_, lb := l.ev.Landmarks(j)
			z = append(z, lb.Z...)
		}
		kzz := mat.NewSymDense(m, nil)
		for a := 0; a < m; a++ {
			for c := a; c < m; c++ {
				kzz.SetSym(a, c, kern.Eval(z[a*d:a*d+d], z[c*d:c*d+d]))
			}
		}
		var ek mat.EigenSym
		if !ek.Factorize(kzz, true) {
			t.Fatal("EigenSym of K_ZZ failed")
		}
		kv := ek.Values(nil)
		var ku mat.Dense
		ek.VectorsTo(&ku)
		// T = U·diag(v^(−½)) over the kept eigenvalues: φ(x) = k(x, Z)·T.
		tm := mat.NewDense(m, m, nil)
		for c := 0; c < m; c++ {
			if kv[c] > 1e-10*kv[m-1] {
				for a := 0; a < m; a++ {
					tm.Set(a, c, ku.At(a, c)/math.Sqrt(kv[c]))
				}
			}
		}
		kx := mat.NewDense(n, m, nil)
		for i := 0; i < n; i++ {
			for a := 0; a < m; a++ {
				kx.Set(i, a, kern.Eval(x[i*d:i*d+d], z[a*d:a*d+d]))
			}
		}
		var phi mat.Dense
		phi.Mul(kx, tm)
		if center {
			for c := 0; c < m; c++ {
				var s float64
				for i := 0; i < n; i++ {
					s += phi.At(i, c)
				}
				for i := 0; i < n; i++ {
					phi.Set(i, c, phi.At(i, c)-s/n)
				}
			}
		}
		cv := mat.NewSymDense(m, nil)
		cv.SymOuterK(1.0/n, phi.T())
		vals, top := topEigen(t, cv, k)
		var truth mat.Dense
		truth.Mul(&phi, top)
		got := evalDense(l, x, n)
		e := synth.SubspaceError(got, &truth)
		t.Logf("center %v: subspace error %.3g vs exact Nyström KPCA", center, e)
		if e > 1e-9 {
			t.Errorf("center %v: subspace error %.3g vs exact Nyström KPCA, want ≤ 1e-9", center, e)
		}
		eig, _ := l.Eigenvalues()
		for q := range vals {
			if math.Abs(eig[q]-vals[q]) > 1e-7*vals[0] {
				t.Errorf("center %v: eigenvalue %d = %.12g, exact %.12g", center, q, eig[q], vals[q])
			}
		}
		l.Close()
	}
}

// topEigen returns the k largest eigenvalues of s, decreasing, and their
// eigenvectors as the columns of a matrix (gonum EigenSym).
func topEigen(t testing.TB, s *mat.SymDense, k int) ([]float64, *mat.Dense) {
	t.Helper()
	var es mat.EigenSym
	if !es.Factorize(s, true) {
		t.Fatal("EigenSym failed")
	}
	n := s.SymmetricDim()
	vals := es.Values(nil)
	var vecs mat.Dense
	es.VectorsTo(&vecs)
	top := mat.NewDense(n, k, nil)
	out := make([]float64, k)
	for q := 0; q < k; q++ {
		out[q] = vals[n-1-q]
		for a := 0; a < n; a++ {
			top.Set(a, q, vecs.At(a, n-1-q))
		}
	}
	return out, top
}
