package online

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"github.com/streamkpca/streamkpca/features"
	"github.com/streamkpca/streamkpca/snapshot"
)

var sinkErr error

// BenchmarkUpdate measures one DSGD step in steady state (b = 512, B = 128)
// with the model already holding the given number of features: the learner
// is initialised on one batch, then filled with random coefficients up to
// the feature count (revisiting, so the count stays fixed).
func BenchmarkUpdate(b *testing.B) {
	for _, solver := range []Solver{SolverSubspace, SolverOja} {
		for _, d := range []int{1, 64, 784} {
			for _, nf := range []int{4096, 65536} {
				for _, k := range []int{3, 50} {
					b.Run(fmt.Sprintf("solver=%s/d=%d/features=%d/k=%d", solver, d, nf, k), func(b *testing.B) {
						l, x := fullLearner(b, solver, d, nf, k)
						defer l.Close()
						sinkErr = l.Update(x, benchRows) // warm the cache and scratch
						b.ReportAllocs()
						b.ResetTimer()
						for i := 0; i < b.N; i++ {
							sinkErr = l.Update(x, benchRows)
						}
						b.ReportMetric(float64(benchRows*b.N)/b.Elapsed().Seconds(), "points/s")
					})
				}
			}
		}
	}
}

// BenchmarkSnapshot measures a step in steady state (as BenchmarkUpdate's)
// followed by a snapshot (snapshot=every-step: the coefficients copied
// and, for the subspace solver, the average orthonormalised) or by none:
// the ratio is what a snapshot at every step costs.
func BenchmarkSnapshot(b *testing.B) {
	for _, c := range []struct{ d, nf, k int }{{64, 32768, 10}, {64, 65536, 50}} {
		for _, every := range []bool{false, true} {
			name := map[bool]string{false: "none", true: "every-step"}[every]
			b.Run(fmt.Sprintf("d=%d/features=%d/k=%d/snapshot=%s", c.d, c.nf, c.k, name), func(b *testing.B) {
				l, x := fullLearner(b, SolverSubspace, c.d, c.nf, c.k)
				defer l.Close()
				sinkErr = l.Update(x, benchRows)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					sinkErr = l.Update(x, benchRows)
					if every {
						sinkSnap = l.Snapshot()
					}
				}
			})
		}
	}
}

var sinkSnap *snapshot.Snapshot

// benchRows is the batch of the benchmarks.
const benchRows = 512

// fullLearner returns a learner initialised on one batch of benchRows
// Gaussian rows of dimension d (returned) and filled with small random
// coefficients up to nf features.
func fullLearner(b *testing.B, solver Solver, d, nf, k int) (*KPCA, []float64) {
	b.Helper()
	rng := rand.New(rand.NewPCG(1, 1))
	x := make([]float64, benchRows*d)
	for i := range x {
		x[i] = rng.NormFloat64()
	}
	l, err := New(Config{K: k, Oversample: -1, MaxFeatures: nf, Solver: solver, Kernel: features.Kernel{Family: features.Gaussian, Bandwidth: float64(d)}})
	if err != nil {
		b.Fatal(err)
	}
	if err := l.Update(x, benchRows); err != nil {
		b.Fatal(err)
	}
	for j := len(l.seeds); j < nf/l.cfg.BlockSize; j++ {
		l.seeds = append(l.seeds, features.DeriveSeed(l.cfg.Seed, uint64(j)))
		for i := 0; i < l.cfg.BlockSize*k; i++ {
			l.coef = append(l.coef, 1e-3*rng.NormFloat64())
		}
	}
	return l, x
}

// TestUpdateAllocatesNothing pins the steady state at zero allocations per
// step: both solvers, one and two views, float64 and float32, random and
// landmark blocks, once the feature budget is reached and blocks are
// revisited.
func TestUpdateAllocatesNothing(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	const rows, d = 128, 8
	x, y := make([]float64, rows*d), make([]float64, rows*d)
	for i := range x {
		x[i], y[i] = rng.NormFloat64(), rng.NormFloat64()+0.5*x[i]
	}
	for _, cfg := range []Config{
		{K: 3, BlockSize: 32, MaxFeatures: 128},
		{K: 3, BlockSize: 32, MaxFeatures: 128, Solver: SolverOja, Center: true},
		{K: 3, BlockSize: 32, MaxFeatures: 128, Precision: Float32, Algorithm: AlgGHA},
		{K: 3, BlockSize: 32, MaxFeatures: 128, Features: FeaturesLandmarks}, // the covariance solver
		{K: 3, BlockSize: 32, MaxFeatures: 128, Features: FeaturesLandmarks, Solver: SolverSubspace, Center: true},
		{K: 3, BlockSize: 32, MaxFeatures: 128, Solver: SolverCovariance, Center: true, Algorithm: AlgGHA},
	} {
		l, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for range 8 { // past the budget: blocks are revisited from here on
			if err := l.Update(x, rows); err != nil {
				t.Fatal(err)
			}
		}
		if a := testing.AllocsPerRun(10, func() { sinkErr = l.Update(x, rows) }); a != 0 {
			t.Errorf("%+v: %.1f allocations per step, want 0", cfg, a)
		}
		l.Close()
	}
	for _, alg := range []Algorithm{AlgKCCA, AlgKSVD} {
		l, err := NewTwoView(Config{Algorithm: alg, K: 2, BlockSize: 32, MaxFeatures: 128, Solver: SolverOja})
		if err != nil {
			t.Fatal(err)
		}
		for range 8 {
			if err := l.Update(x, y, rows); err != nil {
				t.Fatal(err)
			}
		}
		if a := testing.AllocsPerRun(10, func() { sinkErr = l.Update(x, y, rows) }); a != 0 {
			t.Errorf("%s: %.1f allocations per step, want 0", alg, a)
		}
		l.Close()
	}
	// The covariance solver's step and its solves: the products,
	// factorisations and triangular solves run in online/internal/dense on
	// buffers and workers kept from step to step (gonum's GEMM, used
	// before, started a goroutine per 64×64 tile). Every size includes
	// solves (every step for the first four); the last has the default
	// solver's shape at k = 50 (a basis of 100 columns).
	for _, c := range []struct{ m, k int }{{128, 2}, {512, 2}, {1024, 50}} {
		m := c.m
		l, err := NewTwoView(Config{Algorithm: AlgKCCA, K: c.k, BlockSize: 128, MaxFeatures: m})
		if err != nil {
			t.Fatal(err)
		}
		for range 5 {
			if err := l.Update(x, y, rows); err != nil {
				t.Fatal(err)
			}
		}
		if l.cov == nil || l.cov.solves == 0 {
			t.Fatal("the covariance solver never solved")
		}
		if a := testing.AllocsPerRun(5, func() { sinkErr = l.Update(x, y, rows) }); a != 0 {
			t.Errorf("covariance solver, %d features per view: %.1f allocations per step, want 0", m, a)
		}
		l.Close()
	}
}

// TestKeepBytesTradesTimeNotBits: with KeepBytes negative the subspace
// solver keeps no features between evaluating the functions and the
// gradient (each step evaluates them twice); the model is the same bits,
// and the step no longer allocates the batch × features buffer.
func TestKeepBytesTradesTimeNotBits(t *testing.T) {
	const rows, steps = 256, 6
	x := curvedData(rand.New(rand.NewPCG(5, 5)), rows)
	cfg := Config{K: 3, BlockSize: 64, MaxFeatures: 1024, Workers: 1}
	learn := func(keep int64) ([]float64, uint64) {
		cfg.KeepBytes = keep
		return learnAllocating(t, cfg, x, rows, steps)
	}
	kept, keptBytes := learn(0)
	none, noneBytes := learn(-1)
	if len(kept) != len(none) {
		t.Fatalf("%d coefficients kept vs %d without", len(kept), len(none))
	}
	for i := range kept {
		if math.Float64bits(kept[i]) != math.Float64bits(none[i]) {
			t.Fatalf("coefficient %d: %v with the features kept, %v without", i, kept[i], none[i])
		}
	}
	// The kept buffer is sized once for the budget: rows × 1,024 × 8 bytes
	// (2 MiB). The other allocations of a run (the runtime's, other
	// goroutines') vary by tens of KB, so half of it is the bound.
	t.Logf("allocated %d bytes keeping, %d without", keptBytes, noneBytes)
	if want := uint64(rows * 1024 * 8 / 2); keptBytes < noneBytes+want {
		t.Errorf("keeping allocated %d bytes more than not keeping, want ≥ %d (half the buffer)", int64(keptBytes)-int64(noneBytes), want)
	}
}

// BenchmarkAssess measures a step in steady state (as BenchmarkUpdate's)
// preceded by scoring its held-out slice (assess=1-in-16: Assess on the
// batch's 32 rows, as the service does by default) or not (assess=none):
// the ratio is what the held-out score costs.
func BenchmarkAssess(b *testing.B) {
	for _, c := range []struct{ d, nf, k int }{{16, 32768, 5}, {784, 32768, 10}} {
		for _, assess := range []bool{false, true} {
			name := map[bool]string{false: "none", true: "1-in-16"}[assess]
			b.Run(fmt.Sprintf("d=%d/features=%d/k=%d/assess=%s", c.d, c.nf, c.k, name), func(b *testing.B) {
				l, x := fullLearner(b, SolverSubspace, c.d, c.nf, c.k)
				defer l.Close()
				sinkErr = l.Update(x, benchRows)
				held := x[:benchRows/16*c.d]
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if assess {
						_, sinkErr = l.Assess(held, benchRows/16)
					}
					sinkErr = l.Update(x, benchRows)
				}
			})
		}
	}
}

// TestKeepBytesDefaultFollowsDimAndK: by default (KeepBytes 0) the
// learner keeps the batch's features only for inputs of at least k
// dimensions; below, evaluating them again costs a small share of a step
// (docs/learners.md) and they would cost b × features × 8 bytes. 2-D
// points with k = 3 allocate no kept buffer by default, as with -1; with
// KeepBytes set they do.
func TestKeepBytesDefaultFollowsDimAndK(t *testing.T) {
	const rows, d, steps = 256, 2, 6
	rng := rand.New(rand.NewPCG(6, 6))
	x := make([]float64, rows*d)
	for i := range x {
		x[i] = rng.NormFloat64()
	}
	cfg := Config{K: 3, BlockSize: 64, MaxFeatures: 1024, Workers: 1, Kernel: features.Kernel{Family: features.Gaussian, Bandwidth: 1}}
	alloc := func(keep int64) uint64 {
		cfg.KeepBytes = keep
		_, n := learnAllocating(t, cfg, x, rows, steps)
		return n
	}
	def, none, set := alloc(0), alloc(-1), alloc(64<<20)
	t.Logf("allocated %d bytes by default, %d keeping none, %d keeping up to 64 MiB", def, none, set)
	half := uint64(rows * 1024 * 8 / 2)
	if def >= none+half {
		t.Errorf("2-D inputs, k = 3, default: allocated %d bytes more than keeping none, want < %d (no kept buffer)", int64(def)-int64(none), half)
	}
	if set < none+half {
		t.Errorf("KeepBytes set: allocated %d bytes more than keeping none, want ≥ %d (the kept buffer)", int64(set)-int64(none), half)
	}
}

// learnAllocating learns steps batches of x (rows points) with a learner
// of cfg and returns its coefficients and the bytes allocated meanwhile.
func learnAllocating(t *testing.T, cfg Config, x []float64, rows, steps int) ([]float64, uint64) {
	t.Helper()
	l, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range steps {
		if err := l.Update(x, rows); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	return l.Snapshot().Coef[0], after.TotalAlloc - before.TotalAlloc
}

// TestServedCopySharesNoStateWithTheStep: the served (averaged,
// orthonormalised) copy lives in the gradient's buffer between steps. At
// every step of a stream with held-out scoring before each batch, what
// the learner serves equals, bit for bit, what a learner restored from its
// snapshot at that step serves (computed afresh, no shared buffer).
func TestServedCopySharesNoStateWithTheStep(t *testing.T) {
	const rows, d = 128, 10
	x := curvedData(rand.New(rand.NewPCG(8, 8)), rows*12)
	cfg := Config{K: 3, BlockSize: 64, MaxFeatures: 512, Workers: 1}
	l, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	probe := x[:16*d]
	got, want := make([]float64, 16*3), make([]float64, 16*3)
	for step := range 12 {
		batch := x[step*rows*d : (step+1)*rows*d]
		if step > 0 {
			if _, err := l.Assess(batch[:8*d], 8); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Update(batch, rows); err != nil {
			t.Fatal(err)
		}
		l.EvalTo(got, probe, 16)
		r, err := Restore(l.Snapshot(), Config{Workers: 1})
		if err != nil {
			t.Fatal(err)
		}
		r.EvalTo(want, probe, 16)
		r.Close()
		if !slices.Equal(got, want) {
			t.Fatalf("step %d: the learner serves other functions than its restored snapshot", step)
		}
	}
}
