package online

import (
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/stat"

	"github.com/streamkpca/streamkpca/features"
	"github.com/streamkpca/streamkpca/internal/synth"
	"github.com/streamkpca/streamkpca/snapshot"
)

// exactKernel is the centred Gram eigendecomposition K_c = QΛQᵀ of one view,
// used by the exact two-view references.
type exactKernel struct {
	kern      features.Kernel
	x         []float64
	n, d      int
	q         *mat.Dense // n×r
	lam       []float64  // r
	colMean   []float64  // column means of K
	totalMean float64
}

func newExactKernel(kern features.Kernel, x []float64, n, d, r int) *exactKernel {
	K := mat.NewSymDense(n, nil)
	for i := 0; i < n; i++ {
		for j := i; j < n; j++ {
			K.SetSym(i, j, kern.Eval(x[i*d:i*d+d], x[j*d:j*d+d]))
		}
	}
	e := &exactKernel{kern: kern, x: x, n: n, d: d, colMean: make([]float64, n)}
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			e.colMean[j] += K.At(i, j) / float64(n)
		}
	}
	for _, m := range e.colMean {
		e.totalMean += m / float64(n)
	}
	Kc := mat.NewSymDense(n, nil)
	for i := 0; i < n; i++ {
		for j := i; j < n; j++ {
			Kc.SetSym(i, j, K.At(i, j)-e.colMean[i]-e.colMean[j]+e.totalMean)
		}
	}
	var es mat.EigenSym
	es.Factorize(Kc, true)
	vals := es.Values(nil)
	var v mat.Dense
	es.VectorsTo(&v)
	e.q = mat.NewDense(n, r, nil)
	for c := 0; c < r; c++ {
		e.lam = append(e.lam, math.Max(vals[n-1-c], 1e-12))
		for i := 0; i < n; i++ {
			e.q.Set(i, c, v.At(i, n-1-c))
		}
	}
	return e
}

// centredKernel returns the centred kernel vectors of new points against
// the training points (rows×n).
func (e *exactKernel) centredKernel(x []float64, rows int) *mat.Dense {
	out := mat.NewDense(rows, e.n, nil)
	for r := 0; r < rows; r++ {
		var m float64
		row := make([]float64, e.n)
		for i := 0; i < e.n; i++ {
			row[i] = e.kern.Eval(x[r*e.d:r*e.d+e.d], e.x[i*e.d:i*e.d+e.d])
			m += row[i] / float64(e.n)
		}
		for i := 0; i < e.n; i++ {
			out.Set(r, i, row[i]-m-e.colMean[i]+e.totalMean)
		}
	}
	return out
}

// exactTwoView solves centred kernel SVD (eps < 0) or regularised kernel
// CCA (eps ≥ 0) exactly. With L = QΛ^½, a function u = Σ a_i k_c(x_i,·) has
// u(train) = Lc and ‖u‖² = ‖c‖² for c = Λ^½Qᵀa. KSVD: top singular vectors
// of LₓᵀL_y/n. KCCA: with D = (Λ/n + ε)^½, top singular vectors of
// D_x⁻¹LₓᵀL_yD_y⁻¹/n, c = D⁻¹γ. It returns the coefficient matrices a (n×k)
// of both views and the singular values.
func exactTwoView(ex, ey *exactKernel, k int, eps float64) (*mat.Dense, *mat.Dense, []float64) {
	r := len(ex.lam)
	lx, ly := mat.DenseCopyOf(ex.q), mat.DenseCopyOf(ey.q)
	dx, dy := make([]float64, r), make([]float64, r)
	for c := 0; c < r; c++ {
		dx[c], dy[c] = 1, 1
		if eps >= 0 {
			dx[c] = 1 / math.Sqrt(ex.lam[c]/float64(ex.n)+eps)
			dy[c] = 1 / math.Sqrt(ey.lam[c]/float64(ey.n)+eps)
		}
		for i := 0; i < ex.n; i++ {
			lx.Set(i, c, lx.At(i, c)*math.Sqrt(ex.lam[c])*dx[c])
			ly.Set(i, c, ly.At(i, c)*math.Sqrt(ey.lam[c])*dy[c])
		}
	}
	var t mat.Dense
	t.Mul(lx.T(), ly)
	t.Scale(1/float64(ex.n), &t)
	var svd mat.SVD
	svd.Factorize(&t, mat.SVDThin)
	var uu, vv mat.Dense
	svd.UTo(&uu)
	svd.VTo(&vv)
	coef := func(e *exactKernel, g *mat.Dense, d []float64) *mat.Dense {
		// a = QΛ^(−½)·c, c = D⁻¹... here g already holds γ; c = d∘γ.
		a := mat.NewDense(e.n, k, nil)
		for j := 0; j < k; j++ {
			for c := 0; c < r; c++ {
				w := g.At(c, j) * d[c] / math.Sqrt(e.lam[c])
				for i := 0; i < e.n; i++ {
					a.Set(i, j, a.At(i, j)+e.q.At(i, c)*w)
				}
			}
		}
		return a
	}
	return coef(ex, &uu, dx), coef(ey, &vv, dy), svd.Values(nil)[:k]
}

func (e *exactKernel) eval(a *mat.Dense, x []float64, rows int) *mat.Dense {
	var out mat.Dense
	out.Mul(e.centredKernel(x, rows), a)
	return &out
}

func evalView(l *TwoView, i int, x []float64, rows int) *mat.Dense {
	out := make([]float64, rows*l.cfg.K)
	l.EvalTo(i, out, x, rows)
	return mat.NewDense(rows, l.cfg.K, out)
}

func streamPairs(t *testing.T, l *TwoView, x, y []float64, n, dx, dy, b, epochs int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(3, 3))
	perm := make([]int, n)
	for i := range perm {
		perm[i] = i
	}
	bx, by := make([]float64, b*dx), make([]float64, b*dy)
	for e := 0; e < epochs; e++ {
		rng.Shuffle(n, func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
		for s := 0; s+b <= n; s += b {
			for r := 0; r < b; r++ {
				p := perm[s+r]
				copy(bx[r*dx:(r+1)*dx], x[p*dx:(p+1)*dx])
				copy(by[r*dy:(r+1)*dy], y[p*dy:(p+1)*dy])
			}
			if err := l.Update(bx, by, b); err != nil {
				t.Fatalf("epoch %d: %v", e, err)
			}
		}
	}
}

// linearCCA returns the held-out sum of the top-k canonical correlations of
// linear CCA (gonum stat.CC) fitted on the training pairs.
func linearCCA(t *testing.T, x, y []float64, n, dx, dy int, hx, hy []float64, m, k int) float64 {
	var cc stat.CC
	if err := cc.CanonicalCorrelations(mat.NewDense(n, dx, x), mat.NewDense(n, dy, y), nil); err != nil {
		t.Fatal(err)
	}
	var a, b mat.Dense
	cc.LeftTo(&a, true)
	cc.RightTo(&b, true)
	var u, v mat.Dense
	u.Mul(mat.NewDense(m, dx, hx), a.Slice(0, dx, 0, k))
	v.Mul(mat.NewDense(m, dy, hy), b.Slice(0, dy, 0, k))
	return synth.Sum(synth.CanonicalCorrelations(&u, &v))
}

// TestKCCADefaultsBeatLinearCCA: on the twoview stream, KCCA with defaults
// (only k given) does not diverge and its held-out sum of canonical
// correlations beats linear CCA's by ≥ 30% (paper Table 3's pattern).
func TestKCCADefaultsBeatLinearCCA(t *testing.T) {
	t.Parallel() // CPU-bound on one worker: beside the package's other long tests (quick tier ≤ 2 minutes)
	rng := rand.New(rand.NewPCG(1, 1))
	const n, m, k = 4000, 1000, 2
	x, y := synth.TwoView(rng, n)
	hx, hy := synth.TwoView(rng, m)
	kccaBeatsLinear(t, x, y, hx, hy, n, m, 6, k, 8, 8)
}

// kccaBeatsLinear streams n training pairs (views of dimension d) into
// kcca with each of kccaSolvers, for the given epochs, and checks that no
// batch is rejected and that the held-out S_k is ≥ 1.3× linear CCA's.
func kccaBeatsLinear(t *testing.T, x, y, hx, hy []float64, n, m, d, k, ojaEpochs, covEpochs int) {
	t.Helper()
	sl := linearCCA(t, x, y, n, d, d, hx, hy, m, k)
	for _, c := range kccaSolvers {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "oja" && ojaEpochs*n > 100_000 {
				longOnly(t) // about 30 s
			}
			l, err := NewTwoView(c.cfg(Config{Algorithm: AlgKCCA, K: k}))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			epochs := ojaEpochs
			if c.name == "covariance" {
				epochs = covEpochs
			}
			streamPairs(t, l, x, y, n, d, d, 500, epochs)
			sk := synth.Sum(synth.CanonicalCorrelations(evalView(l, 0, hx, m), evalView(l, 1, hy, m)))
			t.Logf("held-out S_%d: KCCA %.3f (features %d, rejected %d), linear CCA %.3f", k, sk, l.Features(), l.Rejected(), sl)
			if l.Rejected() > 0 || !(sk >= 1.3*sl) {
				t.Errorf("KCCA S_k %.3f vs linear %.3f (need ≥ 1.3×), %d rejected batches", sk, sl, l.Rejected())
			}
		})
	}
}

// kccaSolvers are the two kcca rules the tests run: the default
// covariance solver (with 512 features per view instead of 2,048, to keep
// the tests fast; the statistics grow as m²) and the paper's Alg. 4.
var kccaSolvers = []struct {
	name string
	cfg  func(Config) Config
}{
	{"covariance", func(c Config) Config { c.MaxFeatures = 512; return c }},
	{"oja", func(c Config) Config { c.Solver = SolverOja; return c }},
}

// TestTwoViewAgainstExact compares streamed KCCA and KSVD with exact
// solutions on 800 twoview pairs (centred Gram matrices eigendecomposed by
// gonum EigenSym, then the regularised CCA / SVD problem in that basis),
// with the same kernels and bandwidths as the learner: held-out canonical
// correlations and the learned subspaces, after 80 epochs (320 steps).
// Measured when written: KCCA held-out correlations 0.888, 0.783 vs exact
// (ε = 1e-4) 0.908, 0.808 (sum within 2.7%); subspace errors U 0.21,
// V 0.17 — the correlations converge quickly, the individual subspaces
// more slowly (ρ₁ and ρ₂ are close), so the KCCA subspace bound (0.5) is
// loose; KSVD's top pair: U 0.056, V 0.023 (bound 0.2). TestKSVDMixture
// tests KSVD's top two pairs where they are well separated. KSVD is
// tested on its top pair only: the exact singular values 0.0113, 0.0081,
// 0.0069, 0.0060 leave the second pair poorly separated, and the step
// cannot grow past ≈ 1/λ̂ (a single batch's estimate of C_XY carries noise
// of order λ̂/√b ≫ σ), so KSVD converges slowly here.
func TestTwoViewAgainstExact(t *testing.T) {
	t.Parallel() // CPU-bound on one worker: beside the package's other long tests (quick tier ≤ 2 minutes)
	rng := rand.New(rand.NewPCG(5, 5))
	const n, m, k = 800, 600, 2
	x, y := synth.TwoView(rng, n)
	hx, hy := synth.TwoView(rng, m)
	for _, c := range []struct {
		alg    Algorithm
		f      FeatureSource
		maxF   int
		solver Solver
	}{{AlgKCCA, FeaturesRandom, 16384, SolverOja}, {AlgKSVD, FeaturesRandom, 16384, ""}, {AlgKCCA, FeaturesLandmarks, 768, SolverOja},
		{AlgKCCA, FeaturesRandom, 1024, SolverCovariance}, {AlgKCCA, FeaturesLandmarks, 512, SolverCovariance}} {
		alg := c.alg
		t.Run(string(alg)+"/"+string(c.f)+"/"+string(c.solver), func(t *testing.T) {
			if c.solver == SolverOja {
				longOnly(t) // about 10 s each; the covariance solver's cases stay quick
			}
			kk := k
			if alg == AlgKSVD {
				kk = 1 // σ₂ = 0.0081, σ₃ = 0.0069: only the top pair is well separated
			}
			block := 0
			if c.solver == SolverCovariance {
				block = 128 // its default 512 is more than a batch here
			}
			l, err := NewTwoView(Config{Algorithm: alg, K: kk, MaxFeatures: c.maxF, Features: c.f, Solver: c.solver, BlockSize: block})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			epochs := 80
			if c.solver == SolverCovariance {
				epochs = 6 // the budget fills in two; a few solves after
			}
			streamPairs(t, l, x, y, n, 6, 6, 200, epochs)
			snap := l.Snapshot()
			ex := newExactKernel(snap.Header.Views[0].Kernel, x, n, 6, 300)
			ey := newExactKernel(snap.Header.Views[1].Kernel, y, n, 6, 300)
			gotU, gotV := evalView(l, 0, hx, m), evalView(l, 1, hy, m)
			got := synth.CanonicalCorrelations(gotU, gotV)
			if alg == AlgKSVD {
				ax, ay, sv := exactTwoView(ex, ey, kk, -1)
				eU := synth.SubspaceError(gotU, ex.eval(ax, hx, m))
				eV := synth.SubspaceError(gotV, ey.eval(ay, hy, m))
				t.Logf("KSVD: exact singular values %.4f; held-out subspace error U %.3g, V %.3g", sv, eU, eV)
				if eU > 0.2 || eV > 0.2 {
					t.Errorf("KSVD subspace errors %.3g, %.3g > 0.2", eU, eV)
				}
				return
			}
			best, bestEps := -1.0, 0.0
			var bestU, bestV *mat.Dense
			for _, eps := range []float64{1e-4, 1e-3, 1e-2} {
				ax, ay, _ := exactTwoView(ex, ey, k, eps)
				u, v := ex.eval(ax, hx, m), ey.eval(ay, hy, m)
				if s := synth.Sum(synth.CanonicalCorrelations(u, v)); s > best {
					best, bestEps, bestU, bestV = s, eps, u, v
				}
			}
			eU := synth.SubspaceError(gotU, bestU)
			eV := synth.SubspaceError(gotV, bestV)
			t.Logf("KCCA: held-out correlations %.4f (sum %.4f) vs exact (ε=%g) sum %.4f; subspace error U %.3g, V %.3g",
				got, synth.Sum(got), bestEps, best, eU, eV)
			if math.Abs(synth.Sum(got)-best) > 0.05*best {
				t.Errorf("held-out S_k %.4f not within 5%% of exact %.4f", synth.Sum(got), best)
			}
			if eU > 0.5 || eV > 0.5 {
				t.Errorf("KCCA subspace errors %.3g, %.3g > 0.5", eU, eV)
			}
		})
	}
}

// TestKSIRBeatsPCA: y = sin(2·βᵀx) + noise with x ∈ R^20: a linear model on
// the 2 KSIR components predicts held-out y better than one on the top-2
// linear PCA components of x.
func TestKSIRBeatsPCA(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	const d, n, m, k = 20, 4000, 1000, 2
	beta := make([]float64, d)
	beta[0], beta[1] = 0.8, 0.6
	gen := func(n int) ([]float64, []float64) {
		x, y := make([]float64, n*d), make([]float64, n)
		for i := 0; i < n; i++ {
			var s float64
			for j := 0; j < d; j++ {
				sc := 1.0
				if j >= 2 {
					sc = 1.5 // nuisance directions with more variance: PCA prefers them
				}
				x[i*d+j] = sc * rng.NormFloat64()
				s += beta[j] * x[i*d+j]
			}
			y[i] = math.Sin(2*s) + 0.5*s + 0.1*rng.NormFloat64()
		}
		return x, y
	}
	x, y := gen(n)
	hx, hy := gen(m)
	l, err := NewTwoView(Config{Algorithm: AlgKSIR, K: k})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	streamPairs(t, l, x, y, n, d, 1, 500, 10)
	mseKSIR := regressMSE(evalView(l, 0, x, n), y, evalView(l, 0, hx, m), hy)
	var pc stat.PC
	pc.PrincipalComponents(mat.NewDense(n, d, x), nil)
	var vecs mat.Dense
	pc.VectorsTo(&vecs)
	var ptr, pte mat.Dense
	ptr.Mul(mat.NewDense(n, d, x), vecs.Slice(0, d, 0, k))
	pte.Mul(mat.NewDense(m, d, hx), vecs.Slice(0, d, 0, k))
	msePCA := regressMSE(&ptr, y, &pte, hy)
	t.Logf("held-out MSE: KSIR components %.4f, PCA components %.4f (var(y) %.4f)", mseKSIR, msePCA, stat.Variance(hy, nil))
	if !(mseKSIR < 0.8*msePCA) {
		t.Errorf("KSIR MSE %.4f not clearly below PCA's %.4f", mseKSIR, msePCA)
	}
}

// regressMSE fits y ≈ [1, Z]·w by least squares on (z, y) and returns the
// mean squared error on (zt, yt).
func regressMSE(z *mat.Dense, y []float64, zt *mat.Dense, yt []float64) float64 {
	design := func(z *mat.Dense) *mat.Dense {
		r, c := z.Dims()
		a := mat.NewDense(r, c+1, nil)
		for i := 0; i < r; i++ {
			a.Set(i, 0, 1)
			for j := 0; j < c; j++ {
				a.Set(i, j+1, z.At(i, j))
			}
		}
		return a
	}
	var w mat.Dense
	if err := w.Solve(design(z), mat.NewVecDense(len(y), slices.Clone(y))); err != nil {
		return math.Inf(1)
	}
	var p mat.Dense
	p.Mul(design(zt), &w)
	var s float64
	for i, v := range yt {
		d := p.At(i, 0) - v
		s += d * d
	}
	return s / float64(len(yt))
}

// TestTwoViewSnapshotBitIdentical: Model.ProjectView of a two-view
// snapshot equals the learner's evaluation bit for bit, for both views,
// including KSIR's target view; a learner restored from a snapshot
// continues bit for bit.
func TestTwoViewSnapshotBitIdentical(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	x, y := synth.TwoView(rng, 600)
	for _, c := range []struct {
		alg Algorithm
		p   Precision
		f   FeatureSource
		s   Solver
	}{{AlgKCCA, Float64, "", ""}, {AlgKSVD, Float64, "", ""}, {AlgKSIR, Float64, "", ""}, {AlgKCCA, Float32, "", ""}, {AlgKSIR, Float32, "", ""},
		{AlgKCCA, Float64, FeaturesLandmarks, ""}, {AlgKSVD, Float64, FeaturesLandmarks, ""},
		{AlgKCCA, Float64, "", SolverOja}, {AlgKCCA, Float64, FeaturesLandmarks, SolverOja}} {
		alg := c.alg
		l, err := NewTwoView(Config{Algorithm: alg, K: 2, BlockSize: 16, MaxFeatures: 256, Precision: c.p, Features: c.f, Solver: c.s})
		if err != nil {
			t.Fatal(err)
		}

		yy, dy := y, 6
		if alg == AlgKSIR {
			yy, dy = make([]float64, 600), 1
			for i := range yy {
				yy[i] = y[i*6]
			}
		}
		streamPairs(t, l, x, yy, 600, 6, dy, 100, 4) // 24 steps: the 16 blocks, then the covariance solver's
		if c.p == Float32 {
			// float32 applies to the shift-invariant views only: KSIR's
			// slice view (linear map) stays float64.
			h := l.Snapshot().Header
			if !h.Views[0].Float32() || h.Views[1].Float32() == (alg == AlgKSIR) {
				t.Errorf("%s float32: views record float32 = %v, %v", alg, h.Views[0].Float32(), h.Views[1].Float32())
			}
		}
		if lm := c.f == FeaturesLandmarks; lm {
			h := l.Snapshot().Header
			snap := l.Snapshot()
			for v := range 2 {
				if !h.Views[v].Landmarks() || len(snap.Landmarks) != 2 || len(snap.Landmarks[v]) != len(l.v[v].seeds)*16*6 {
					t.Errorf("%s landmarks: view %d records landmarks %v with %d values", alg, v, h.Views[v].Landmarks(), len(snap.Landmarks))
				}
			}
		}
		// A learner restored from the bytes continues exactly like this one.
		mid, _ := l.Snapshot().MarshalBinary()
		midSnap, _ := snapshot.Decode(mid)
		res, err := RestoreTwoView(midSnap, Config{Workers: 2})
		if err != nil {
			t.Fatal(err)
		}
		for _, tv := range []*TwoView{l, res} {
			if err := tv.Update(x[:100*6], yy[:100*dy], 100); err != nil {
				t.Fatal(err)
			}
		}
		if !slices.Equal(res.v[0].coef, l.v[0].coef) || !slices.Equal(res.v[1].coef, l.v[1].coef) {
			t.Errorf("%s %s: restored learner diverges from the original", alg, c.s)
		}
		if cov := alg == AlgKCCA && c.s == ""; (l.cov != nil) != cov || (res.cov != nil) != cov || cov && l.cov.solves < 2 {
			t.Errorf("%s %q: covariance solver state %v, restored %v", alg, c.s, l.cov != nil, res.cov != nil)
		}
		res.Close()
		data, err := l.Snapshot().MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		snap, err := snapshot.Decode(data)
		if err != nil {
			t.Fatal(err)
		}
		mdl, err := snapshot.NewModel(snap, snapshot.ModelOptions{})
		if err != nil {
			t.Fatal(err)
		}
		gen := l.Generated()
		shared, err := snapshot.NewModel(snap, snapshot.ModelOptions{Shared: gen})
		if err != nil {
			t.Fatal(err)
		}
		for v, in := range [][]float64{x[:60], yy[:10*dy]} {
			rows := len(in) / []int{6, dy}[v]
			want := make([]float64, rows*2)
			l.EvalTo(v, want, in, rows)
			got, err := mdl.ProjectView(v, nil, in)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s view %d: Model.ProjectView differs from the learner", alg, v)
			}
			if sg, err := shared.ProjectView(v, nil, in); err != nil || !slices.Equal(sg, want) {
				t.Errorf("%s view %d: the model sharing the learner's blocks projects other bits (%v)", alg, v, err)
			}
			if c.f != FeaturesLandmarks && !reflect.DeepEqual(gen[v].Map, shared.Map(v)) {
				t.Errorf("%s view %d: the learner's map %+v is not the model's %+v: nothing shared", alg, v, gen[v].Map, shared.Map(v))
			}
		}
		l.Close()
	}
}

// TestKSVDMixtureAgainstExact: on the paper's latent-variable mixture
// stream (rank-2 centred cross-covariance), streamed KSVD with defaults
// recovers both singular function pairs of exact kernel SVD (800 pairs).
func TestKSVDMixtureAgainstExact(t *testing.T) {
	t.Parallel() // CPU-bound on one worker: beside the package's other long tests (quick tier ≤ 2 minutes)
	rng := rand.New(rand.NewPCG(11, 11))
	const n, m, k = 800, 600, 2
	x, y := synth.Mixture(rng, n)
	hx, hy := synth.Mixture(rng, m)
	l, err := NewTwoView(Config{Algorithm: AlgKSVD, K: k, MaxFeatures: 16384})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	streamPairs(t, l, x, y, n, 2, 2, 200, 40)
	snap := l.Snapshot()
	ex := newExactKernel(snap.Header.Views[0].Kernel, x, n, 2, 300)
	ey := newExactKernel(snap.Header.Views[1].Kernel, y, n, 2, 300)
	_, _, sv := exactTwoView(ex, ey, 4, -1)
	ax, ay, _ := exactTwoView(ex, ey, k, -1)
	eU := synth.SubspaceError(evalView(l, 0, hx, m), ex.eval(ax, hx, m))
	eV := synth.SubspaceError(evalView(l, 1, hy, m), ey.eval(ay, hy, m))
	t.Logf("exact singular values %.4g; held-out subspace error U %.3g, V %.3g", sv, eU, eV)
	if eU > 2e-2 || eV > 2e-2 {
		t.Errorf("KSVD subspace errors %.3g, %.3g > 2e-2", eU, eV)
	}
}

// TestKCCAImageHalves: KCCA with defaults (only k) between the left and
// right halves of 3,000 8×8 digit-like images (the MNIST-halves setup at
// small scale), 40 epochs, does not diverge and beats linear CCA's held-out
// S_k by ≥ 30%. The margin is thin (measured 4.757 vs 3.604, 1.32×): these
// synthetic strokes continue almost linearly across the halves.
func TestKCCAImageHalves(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 13))
	const n, m, k = 3000, 1000, 5
	split := func(img []float64, rows int) (l, r []float64) {
		for i := 0; i < rows; i++ {
			for row := 0; row < 8; row++ {
				l = append(l, img[i*64+row*8:i*64+row*8+4]...)
				r = append(r, img[i*64+row*8+4:i*64+row*8+8]...)
			}
		}
		return l, r
	}
	x, y := split(synth.Digits(rng, n), n)
	hx, hy := split(synth.Digits(rng, m), m)
	kccaBeatsLinear(t, x, y, hx, hy, n, m, 32, k, 40, 4) // the statistics are exact after one epoch
}

// TestTwoViewLandmarksFirstBatchTooSmall: as for KPCA, a first batch of
// fewer pairs than a landmark block is refused as input with nothing
// counted, and a later small batch is learned without adding a block.
func TestTwoViewLandmarksFirstBatchTooSmall(t *testing.T) {
	l, err := NewTwoView(Config{Algorithm: AlgKCCA, K: 2, BlockSize: 32, MaxFeatures: 64, Features: FeaturesLandmarks})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	x, y := synth.TwoView(rand.New(rand.NewPCG(3, 3)), 64)
	if err := l.Update(x[:10*6], y[:10*6], 10); !errors.Is(err, ErrInput) || l.SamplesSeen() != 0 || l.Features() != 0 {
		t.Fatalf("10 pairs for a block of 32: err %v, samples %d, features %d", err, l.SamplesSeen(), l.Features())
	}
	if err := l.Update(x, y, 64); err != nil || l.SamplesSeen() != 64 || l.Features() != 32 {
		t.Fatalf("64 pairs: err %v, samples %d, features %d", err, l.SamplesSeen(), l.Features())
	}
	if err := l.Update(x[:10*6], y[:10*6], 10); err != nil || l.SamplesSeen() != 74 || l.Features() != 32 {
		t.Fatalf("later 10 pairs: err %v, samples %d, features %d", err, l.SamplesSeen(), l.Features())
	}
	if err := l.Update(x, y, 64); err != nil || l.Features() != 64 {
		t.Fatalf("then 64 pairs: err %v, features %d (want a second block)", err, l.Features())
	}
}

// TestRestoreV1TwoView: a kcca snapshot written by format v1's code (the
// paper's rule, no solver recorded, settings in v1's "extra" map) restores
// with those settings and the paper's rule, and goes on learning.
func TestRestoreV1TwoView(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "snapshot", "testdata", "golden_v1_kcca.skpca"))
	if err != nil {
		t.Fatal(err)
	}
	snap, err := snapshot.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	l, err := RestoreTwoView(snap, Config{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c := l.Config()
	if c.Solver != SolverOja || !c.Standardize || c.Slices != 10 || c.Uncentered || l.trace0 != snap.Header.Settings.Trace0 || !(l.trace0 > 0) {
		t.Errorf("restored: solver %q, standardize %v, slices %d, uncentered %v, trace0 %v", c.Solver, c.Standardize, c.Slices, c.Uncentered, l.trace0)
	}
	x, y := synth.TwoView(rand.New(rand.NewPCG(4, 4)), 100)
	if err := l.Update(x, y, 100); err != nil || l.SamplesSeen() != snap.Header.SamplesSeen+100 {
		t.Errorf("update after restore: %v, samples %d", err, l.SamplesSeen())
	}
}

// TestCovarianceLinearIsCCA: with the linear kernel on both views the
// covariance solver's statistics are the data's covariances, so after one
// pass its functions are linear CCA of what it saw: their canonical
// correlations on those pairs equal gonum's stat.CC (another algorithm:
// SVD of the whitened cross-covariance by QR) to 1e-8 at a negligible
// ridge. Random-feature blocks (the linear kernel's too) are drawn at the
// first batch, so every pair, the first batch's too, is in the statistics.
func TestCovarianceLinearIsCCA(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 21))
	const n, d, k = 4000, 6, 3
	x, y := synth.TwoView(rng, n)
	lin := features.Kernel{Family: features.Linear}
	l, err := NewTwoView(Config{Algorithm: AlgKCCA, K: k, Kernel: lin, KernelY: lin, Solver: SolverCovariance, Ridge: 1e-12})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := 0; i < n; i += 100 {
		if err := l.Update(x[i*d:(i+100)*d], y[i*d:(i+100)*d], 100); err != nil {
			t.Fatal(err)
		}
	}
	if l.cov == nil {
		t.Fatal("no statistics")
	}
	if l.cov.n != n {
		t.Fatalf("statistics hold %v pairs, want %d", l.cov.n, n)
	}
	got := synth.CanonicalCorrelations(evalView(l, 0, x, n), evalView(l, 1, y, n))
	var cc stat.CC
	if err := cc.CanonicalCorrelations(mat.NewDense(n, d, x), mat.NewDense(n, d, y), nil); err != nil {
		t.Fatal(err)
	}
	want := cc.CorrsTo(nil)[:k]
	t.Logf("canonical correlations: covariance solver %.10f, stat.CC %.10f", got, want)
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-8 {
			t.Errorf("correlation %d: %.12f, stat.CC %.12f", i, got[i], want[i])
		}
	}
}
