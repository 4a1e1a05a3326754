package online

import (
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/streamkpca/streamkpca/features"
	"github.com/streamkpca/streamkpca/internal/synth"
	"github.com/streamkpca/streamkpca/snapshot"
)

var (
	exactOnce  sync.Once
	exactTrain []float64
	exactHeld  []float64
	exactRef   *exactKPCA
)

const exactN, exactHeldN, exactD, exactK = 1500, 500, 10, 3

// exactFixture computes the exact kernel PCA of 1,500 curvedData points
// once for all tests (bandwidth by the median trick on the first 512).
func exactFixture(t *testing.T) {
	exactOnce.Do(func() {
		rng := rand.New(rand.NewPCG(1, 1))
		exactTrain = curvedData(rng, exactN)
		exactHeld = curvedData(rng, exactHeldN)
		bw := MedianDistance(exactTrain, exactN, exactD, 512)
		exactRef = newExactKPCA(t, kernelG(bw), exactTrain, exactN, exactD, exactK)
	})
}

// streamEpochs streams the training points epochs times in shuffled
// mini-batches of b.
func streamEpochs(t *testing.T, l *KPCA, x []float64, n, d, b, epochs int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(2, 2))
	perm := make([]int, n)
	for i := range perm {
		perm[i] = i
	}
	batch := make([]float64, b*d)
	for e := 0; e < epochs; e++ {
		rng.Shuffle(n, func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
		for s := 0; s+b <= n; s += b {
			for r := 0; r < b; r++ {
				copy(batch[r*d:r*d+d], x[perm[s+r]*d:perm[s+r]*d+d])
			}
			if err := l.Update(batch, b); err != nil {
				t.Fatalf("epoch %d: %v", e, err)
			}
		}
	}
}

func evalDense(l *KPCA, x []float64, rows int) *mat.Dense {
	out := make([]float64, rows*l.Config().K)
	l.EvalTo(out, x, rows)
	return mat.NewDense(rows, l.Config().K, out)
}

// TestAgainstExactKPCA fits KPCA and GHA by streaming the same 1,500
// points for 40 epochs and compares the learned top-3 subspace with exact
// kernel PCA of those points (gonum EigenSym on the Gram matrix), on the
// training points and, through the Nyström extension, on 500 held-out
// points. GHA must also recover each eigenfunction in order and the
// eigenvalues.
func TestAgainstExactKPCA(t *testing.T) {
	t.Parallel() // CPU-bound on one worker: beside the package's other long tests (quick tier ≤ 2 minutes)
	exactFixture(t)
	truthTrain := exactRef.vecs
	truthHeld := exactRef.at(exactHeld, exactHeldN)
	for _, alg := range []Algorithm{AlgKPCA, AlgGHA} {
		t.Run(string(alg), func(t *testing.T) {
			l, err := New(Config{Algorithm: alg, K: exactK, Kernel: exactRef.kern})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			streamEpochs(t, l, exactTrain, exactN, exactD, 250, 40)
			eTrain := synth.SubspaceError(evalDense(l, exactTrain, exactN), truthTrain)
			eHeld := synth.SubspaceError(evalDense(l, exactHeld, exactHeldN), truthHeld)
			t.Logf("%s: features %d, subspace error train %.3g, held-out %.3g", alg, l.Features(), eTrain, eHeld)
			// The subspace solver reaches 1.3e-4 here; the oja rule 2e-3.
			if eTrain > 1.5e-3 || eHeld > 1.5e-3 {
				t.Errorf("subspace error train %.3g held-out %.3g, want ≤ 1.5e-3", eTrain, eHeld)
			}
			if alg != AlgGHA {
				return
			}
			got := evalDense(l, exactTrain, exactN)
			for q := 0; q < exactK; q++ {
				e := synth.SubspaceError(got.Slice(0, exactN, q, q+1), truthTrain.Slice(0, exactN, q, q+1))
				if e > 2e-2 {
					t.Errorf("GHA component %d: error %.3g vs exact eigenvector %d, want ≤ 2e-2", q, e, q)
				}
			}
			ev, _ := l.Eigenvalues()
			for q := 0; q < exactK; q++ {
				if math.Abs(ev[q]-exactRef.vals[q]) > 0.05*exactRef.vals[q] {
					t.Errorf("eigenvalue %d: estimate %.4f, exact %.4f", q, ev[q], exactRef.vals[q])
				}
			}
		})
	}
}

// TestDefaultsRobustToTheta0: theta0 from a tenth to ten times the oja
// default: no batch rejected by the divergence guard, finite
// coefficients, and the subspace within 0.2 of exact KPCA.
func TestDefaultsRobustToTheta0(t *testing.T) {
	t.Parallel() // CPU-bound on one worker: beside the package's other long tests (quick tier ≤ 2 minutes)
	exactFixture(t)
	for _, th := range []float64{DefaultTheta0 / 10, DefaultTheta0 * 3, DefaultTheta0 * 10} {
		l, err := New(Config{K: exactK, Theta0: th, MaxFeatures: 4096})
		if err != nil {
			t.Fatal(err)
		}
		streamEpochs(t, l, exactTrain, exactN, exactD, 250, 10)
		e := synth.SubspaceError(evalDense(l, exactTrain, exactN), exactRef.vecs)
		t.Logf("theta0 %.3g: rejected %d, error %.3g", th, l.Rejected(), e)
		if l.Rejected() != 0 {
			t.Errorf("theta0 %.3g: %d batches rejected by the divergence guard", th, l.Rejected())
		}
		if math.IsNaN(e) || e > 0.2 {
			t.Errorf("theta0 %.3g: subspace error %.3g", th, e)
		}
		for _, v := range l.coef {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Fatalf("theta0 %.3g: non-finite coefficient", th)
			}
		}
		l.Close()
	}
}

func hermiteBatches(n, b int) [][]float64 {
	h := synth.Hermite1D()
	rng := rand.New(rand.NewPCG(1, 1))
	var out [][]float64
	for i := 0; i < n; i++ {
		x := make([]float64, b)
		h.Sample(x, rng)
		out = append(out, x)
	}
	return out
}

// TestDeterministicAcrossWorkers: the coefficients do not depend on the
// number of workers or the cache budget.
func TestDeterministicAcrossWorkers(t *testing.T) {
	batches := hermiteBatches(30, 64)
	var ref []float64
	for _, cfg := range []Config{{Workers: 1}, {Workers: 4}, {Workers: 2, CacheBytes: -1},
		{Workers: 1, Precision: Float32}, {Workers: 3, Precision: Float32, CacheBytes: -1},
		{Workers: 1, Solver: SolverCovariance}, {Workers: 3, Solver: SolverCovariance}} {
		if (cfg.Precision == Float32 || cfg.Solver == SolverCovariance) && ref != nil && cfg.Workers == 1 {
			ref = nil // a new reference for float32 and for the covariance solver
		}
		cfg.K, cfg.BlockSize, cfg.MaxFeatures, cfg.Center = 3, 16, 256, true
		l, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range batches {
			if err := l.Update(x, 64); err != nil {
				t.Fatal(err)
			}
		}
		if ref == nil {
			ref = slices.Clone(l.coef)
		} else if !slices.Equal(ref, l.coef) {
			t.Errorf("workers %d cache %d: coefficients differ", cfg.Workers, cfg.CacheBytes)
		}
		l.Close()
	}
}

// TestSnapshotProjectBitIdentical: a snapshot's Model projects exactly what
// the learner evaluates, and a learner restored from it continues bit for
// bit as if never interrupted (through the encoded bytes).
func TestSnapshotProjectBitIdentical(t *testing.T) {
	batches := hermiteBatches(40, 64)
	for _, cfg := range []Config{
		{K: 3, BlockSize: 16, MaxFeatures: 256},
		{K: 2, BlockSize: 8, MaxFeatures: 512, Center: true, Standardize: true, Algorithm: AlgGHA},
		{K: 3, BlockSize: 16, MaxFeatures: 256, Precision: Float32},
		{K: 3, BlockSize: 16, MaxFeatures: 256, Compute: ComputeBLAS},
		{K: 3, BlockSize: 16, MaxFeatures: 256, Features: FeaturesLandmarks},
		{K: 2, BlockSize: 64, MaxFeatures: 512, Features: FeaturesLandmarks, Center: true, Standardize: true, Algorithm: AlgGHA},
		{K: 3, BlockSize: 16, MaxFeatures: 256, Features: FeaturesLandmarks, Solver: SolverSubspace},
		{K: 3, BlockSize: 16, MaxFeatures: 256, Solver: SolverCovariance, Center: true},
	} {
		full, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		part, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for i, x := range batches {
			if err := full.Update(x, 64); err != nil {
				t.Fatal(err)
			}
			if i < 25 {
				part.Update(x, 64)
			}
		}
		data, err := part.Snapshot().MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		snap, err := snapshot.Decode(data)
		if err != nil {
			t.Fatal(err)
		}
		if got := snap.Header.Views[0].Float32(); got != (cfg.Precision == Float32) {
			t.Errorf("%+v: snapshot records float32 = %v", cfg, got)
		}
		if lm := cfg.Features == FeaturesLandmarks; snap.Header.Views[0].Landmarks() != lm ||
			lm && len(snap.Landmarks[0]) != part.Features()*part.Dim() {
			t.Errorf("%+v: snapshot landmarks %v, %d values for %d features", cfg, snap.Header.Views[0].Landmarks(), len(snap.Landmarks), part.Features())
		}
		m, err := snapshot.NewModel(snap, snapshot.ModelOptions{})
		if err != nil {
			t.Fatal(err)
		}
		probe := batches[39]
		want := make([]float64, 64*cfg.K)
		part.EvalTo(want, probe, 64)
		got, err := m.Project(nil, probe)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Compute == ComputeBLAS {
			// The BLAS may round a one-row call differently: to rounding.
			for i := range got {
				if math.Abs(got[i]-want[i]) > 1e-12*(1+math.Abs(want[i])) {
					t.Fatalf("%+v: Model.Project differs from the learner beyond rounding: %v vs %v", cfg, got[i], want[i])
				}
			}
		} else if !slices.Equal(got, want) {
			t.Errorf("%+v: Model.Project differs from the learner's evaluation", cfg)
		}
		// A model sharing the learner's generated blocks (the service's
		// served model) projects the same bits; with random features the
		// maps must match, or nothing is shared.
		gen := part.Generated()
		shared, err := snapshot.NewModel(snap, snapshot.ModelOptions{Shared: gen})
		if err != nil {
			t.Fatal(err)
		}
		if sg, _ := shared.Project(nil, probe); !slices.Equal(sg, got) {
			t.Errorf("%+v: the model sharing the learner's blocks projects other bits", cfg)
		}
		if cfg.Features != FeaturesLandmarks && (!reflect.DeepEqual(gen[0].Map, shared.Map(0)) || len(gen[0].Blocks) != len(snap.Header.Seeds)) {
			t.Errorf("%+v: the learner's %d generated blocks of map %+v are not the model's (%+v)", cfg, len(gen[0].Blocks), gen[0].Map, shared.Map(0))
		}
		res, err := Restore(snap, Config{Workers: 2})
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range batches[25:] {
			if err := res.Update(x, 64); err != nil {
				t.Fatal(err)
			}
		}
		if !slices.Equal(res.coef, full.coef) || res.SamplesSeen() != full.SamplesSeen() {
			t.Errorf("%+v: restored learner diverges from the uninterrupted one", cfg)
		}
		// With the subspace solver the model served is the average of the
		// iterates: the snapshot carries the iterate as state, and the
		// restored learner serves the same average.
		averaged := part.Config().Solver == SolverSubspace
		if (snap.Header.Averaged != nil) != averaged {
			t.Errorf("%+v: snapshot averaged state %+v, want it %v", cfg, snap.Header.Averaged, averaged)
		}
		rc, _, _ := res.served()
		fc, _, ok := full.served()
		if !slices.Equal(rc, fc) || ok != averaged {
			t.Errorf("%+v: restored learner serves other coefficients than the uninterrupted one (averaged %v)", cfg, ok)
		}
		full.Close()
		part.Close()
		res.Close()
	}
}

// TestAverageOnAStream: on a stream of independent batches the subspace
// solver's iterate fluctuates around its limit, and the average it serves
// (Config.Average) is closer to the exact kernel PCA of the data than the
// iterate, step after step; with Average < 0 the iterate is served. The
// truth is gonum's EigenSym of the Gram matrix of 600 points; the batches
// are 200 points drawn with replacement, so no pass over the data ends
// on a step (a pass that does makes its last iterate unusually good:
// TestOtherKernelsAgainstExact).
func TestAverageOnAStream(t *testing.T) {
	t.Parallel() // CPU-bound on one worker: beside the package's other long tests (quick tier ≤ 2 minutes)
	rng := rand.New(rand.NewPCG(1, 1))
	const n, d, k, b = 600, 4, 2, 200
	scale := []float64{1, 0.6, 0.35, 0.2}
	x := make([]float64, n*d)
	for i := range x {
		x[i] = scale[i%d] * rng.Float64()
	}
	kern := features.Kernel{Family: features.Laplacian, Bandwidth: 1}
	ref := newExactKPCA(t, kern, x, n, d, k)
	avg, err := New(Config{K: k, Kernel: kern, MaxFeatures: 16384})
	if err != nil {
		t.Fatal(err)
	}
	defer avg.Close()
	last, err := New(Config{K: k, Kernel: kern, MaxFeatures: 16384, Average: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer last.Close()
	if got := avg.Config().Average; got != DefaultAverage {
		t.Fatalf("default average window %v, want %v", got, DefaultAverage)
	}
	batch := make([]float64, b*d)
	var errAvg, errIter []float64
	for step := 0; step < 100; step++ {
		for r := 0; r < b; r++ {
			copy(batch[r*d:r*d+d], x[rng.IntN(n)*d:][:d])
		}
		for _, l := range []*KPCA{avg, last} {
			if err := l.Update(batch, b); err != nil {
				t.Fatal(err)
			}
		}
		if step >= 80 {
			errAvg = append(errAvg, synthErr(evalDense(avg, x, n), ref.vecs))
			errIter = append(errIter, synthErr(evalDense(last, x, n), ref.vecs))
		}
	}
	// The two learners take the same steps: only what they serve differs.
	if !slices.Equal(avg.coef, last.coef) {
		t.Fatal("averaging changed the iterate")
	}
	slices.Sort(errAvg)
	slices.Sort(errIter)
	ma, mi := errAvg[len(errAvg)/2], errIter[len(errIter)/2]
	t.Logf("subspace error over the last 20 steps, median (max): average %.3g (%.3g), last iterate %.3g (%.3g)", ma, errAvg[len(errAvg)-1], mi, errIter[len(errIter)-1])
	if !(ma < mi/2) || !(errAvg[len(errAvg)-1] < errIter[len(errIter)-1]) {
		t.Errorf("the average (median %.3g) is not below half the last iterate's error (%.3g)", ma, mi)
	}
}

// TestGuardNeverCorrupts: a model whose functions have exploded (here
// forced by scaling the coefficients 1e4×) makes the guard reject the
// batch: the coefficients are left exactly as they were and the step backs
// off. A NaN batch is refused as input.
func TestGuardNeverCorrupts(t *testing.T) {
	l, err := New(Config{K: 3, BlockSize: 16, MaxFeatures: 512})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	bs := hermiteBatches(20, 64)
	for _, x := range bs[:10] {
		if err := l.Update(x, 64); err != nil {
			t.Fatal(err)
		}
	}
	for i := range l.coef {
		l.coef[i] *= 1e4
	}
	before := slices.Clone(l.coef)
	eta := l.StepSize()
	if err := l.Update(bs[10], 64); !errors.Is(err, ErrDiverged) {
		t.Fatalf("exploded model: Update returned %v, want ErrDiverged", err)
	}
	if !slices.Equal(before, l.coef) {
		t.Error("a rejected batch changed the coefficients")
	}
	if l.StepSize() >= eta || l.Rejected() != 1 {
		t.Errorf("step %g → %g, rejected %d: want a backoff and one rejection", eta, l.StepSize(), l.Rejected())
	}
	if err := l.Update([]float64{math.NaN()}, 1); !errors.Is(err, ErrInput) {
		t.Errorf("NaN batch: %v, want ErrInput", err)
	}
	if err := l.Update([]float64{1, 2}, 1); !errors.Is(err, ErrInput) {
		t.Errorf("wrong dimension: %v, want ErrInput", err)
	}
}

// TestLandmarksAgainstExactKPCA: landmark blocks (Nyström maps of points
// of the stream) reach exact kernel PCA of the 1,500 fixture points far
// closer than random features of the same count, on the training points
// and held out.
func TestLandmarksAgainstExactKPCA(t *testing.T) {
	longOnly(t) // about 12 s; TestCovarianceLandmarksIsNystrom stays quick
	exactFixture(t)
	truthTrain := exactRef.vecs
	truthHeld := exactRef.at(exactHeld, exactHeldN)
	errs := map[FeatureSource]float64{}
	for _, src := range []FeatureSource{FeaturesRandom, FeaturesLandmarks} {
		l, err := New(Config{K: exactK, Kernel: exactRef.kern, BlockSize: 250, MaxFeatures: 1000, Features: src})
		if err != nil {
			t.Fatal(err)
		}
		streamEpochs(t, l, exactTrain, exactN, exactD, 250, 20)
		eTrain := synth.SubspaceError(evalDense(l, exactTrain, exactN), truthTrain)
		eHeld := synth.SubspaceError(evalDense(l, exactHeld, exactHeldN), truthHeld)
		t.Logf("%s: %d features, subspace error train %.3g, held-out %.3g", src, l.Features(), eTrain, eHeld)
		errs[src] = eHeld
		// 1,000 of the 1,500 points as landmarks: Nyström on them is
		// exact kernel PCA up to the rest's residual (the covariance
		// solver, their default, solves it exactly).
		if src == FeaturesLandmarks && (eTrain > 1e-8 || eHeld > 1e-8) {
			t.Errorf("landmarks: subspace error train %.3g held-out %.3g, want ≤ 1e-8", eTrain, eHeld)
		}
		l.Close()
	}
	if errs[FeaturesLandmarks] > errs[FeaturesRandom]/10 {
		t.Errorf("landmarks %.3g, random features %.3g: want landmarks 10× closer at 1,000 features", errs[FeaturesLandmarks], errs[FeaturesRandom])
	}
}

// TestLandmarksFirstBatchTooSmall: a first batch with fewer points than a
// landmark block is refused as input (model unchanged, samples not
// counted: the pipeline keeps such rows and retries with more), and the
// same points with more after them start the model.
func TestLandmarksFirstBatchTooSmall(t *testing.T) {
	l, err := New(Config{K: 2, BlockSize: 32, MaxFeatures: 64, Features: FeaturesLandmarks})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	x := curvedData(rand.New(rand.NewPCG(7, 7)), 64)
	if err := l.Update(x[:10*exactD], 10); !errors.Is(err, ErrInput) || l.SamplesSeen() != 0 || l.Features() != 0 {
		t.Fatalf("10 points for a block of 32: err %v, samples %d, features %d", err, l.SamplesSeen(), l.Features())
	}
	if err := l.Update(x, 64); err != nil || l.SamplesSeen() != 64 || l.Features() != 32 {
		t.Fatalf("64 points: err %v, samples %d, features %d", err, l.SamplesSeen(), l.Features())
	}
	// A later batch smaller than a block is learned; it adds no block.
	if err := l.Update(x[:10*exactD], 10); err != nil || l.SamplesSeen() != 74 || l.Features() != 32 {
		t.Fatalf("later 10 points: err %v, samples %d, features %d", err, l.SamplesSeen(), l.Features())
	}
}

// TestAverageConfig: Config.Average outside (0, 1] is refused unless
// negative (the last iterate); the other solvers ignore it.
func TestAverageConfig(t *testing.T) {
	for _, a := range []float64{1.5, math.NaN(), math.Inf(1)} {
		if _, err := New(Config{K: 2, Average: a}); !errors.Is(err, ErrConfig) {
			t.Errorf("Average %v: %v, want ErrConfig", a, err)
		}
	}
	for _, c := range []Config{{K: 2, Average: -1}, {K: 2, Average: 1}, {K: 2, Solver: SolverOja, Average: 0.5}} {
		l, err := New(c)
		if err != nil {
			t.Errorf("%+v: %v", c, err)
			continue
		}
		l.Close()
	}
}
