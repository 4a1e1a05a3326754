package online

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/streamkpca/streamkpca/online/internal/dense"
)

// Growth is the feature budget of an offline run (fit, bench): the
// paper's doubly stochastic growth, a new block every step (Alg. 1), goes
// on past Config.MaxFeatures for as long as a wall-clock limit and a
// memory bound can pay for the larger model. The service's budget is set
// by its stream instead (learner.budget: stream); an offline run has no
// stream to wait for, only a time limit.
//
// After each step that fills the budget, it is raised by one block of B
// when
//
//   - memory: the model's coefficients and their working copies at the
//     larger budget, 32·k bytes a feature, stay within MaxBytes; and
//   - time: the time left pays for as many more steps at the larger
//     budget F' as it has blocks: left ≥ c·F'²/B, where c is a step's
//     measured seconds per feature (an average of the recent steps).
//
// A step's cost grows with the features, so growing one block a step to F
// takes about c·F²/(2B); the rule stops when a third of the limit has
// gone into growing, F ≈ √(2·B·T/(3c)), and leaves the rest to learning
// at that size: every block then gets at least as many steps after its
// arrival as the model has blocks. kpca and gha with random features only
// (RaiseBudget's limits).
type Growth struct {
	// Limit is the run's wall-clock budget; 0 turns growth off.
	Limit time.Duration
	// MaxBytes bounds the coefficients (32·k bytes a feature). Default:
	// 1 GiB (the service's learner.max_model_bytes).
	MaxBytes int64

	start   time.Time
	perFeat float64          // seconds a step per feature, exponentially averaged
	raised  int              // blocks added past the configured budget
	now     func() time.Time // tests: a clock of their own
}

// DefaultGrowthBytes is Growth's default memory bound.
const DefaultGrowthBytes = 1 << 30

// ModelBytes is what a one-view model of k components holds at the given
// features: its coefficients and their working copies, about 32·k bytes
// a feature. Growth and the service's budget (learner.max_model_bytes)
// bound it.
func ModelBytes(features, k int) int64 { return int64(features) * int64(32*k) }

// MemoryBytes is what l holds for a model of the given features learned
// on batches of rows rows: ModelBytes plus the evaluator's kept batch
// features and cached blocks (features.Evaluator.HeldBytes), which at
// b = 512 cost about 4 KiB a feature (up to keep_bytes) against 32·k for
// the coefficients. Before the first batch (no evaluator yet): ModelBytes.
func (l *KPCA) MemoryBytes(features, rows int) int64 {
	n := ModelBytes(features, l.cfg.K)
	if l.ev != nil {
		n += l.ev.HeldBytes(features, rows)
	}
	f := &l.fol
	if f.ch != nil || f.shadow != nil || f.cand != nil {
		// The challenger and the shadow at the budget they would have
		// beside a model of features, and the test's reference set: its
		// rows (raw and preprocessed), their coordinates' map and both
		// learners' values.
		fc := scoutBudget(features, l.fm.BlockSize)
		m := refRows(l.servedK())
		n += int64(m*(2*l.fm.Dim+m+2*l.cfg.K)) * 8
		for _, c := range []*KPCA{f.ch, f.shadow} {
			if c != nil {
				n += ModelBytes(fc, l.cfg.K)
				if c.ev != nil {
					n += c.ev.HeldBytes(fc, rows)
				}
			}
		}
	}
	if c := f.cand; c != nil {
		// A candidate on trial: a second model of the same budget.
		n += ModelBytes(features, l.cfg.K)
		if c.ev != nil {
			n += c.ev.HeldBytes(features, rows)
		}
	}
	return n
}

// TakesCovarianceBudget reports whether CovarianceBudget sizes c's model
// in an offline run: two views, the covariance solver and random
// features, after defaults.
func (c Config) TakesCovarianceBudget() bool {
	w := c.WithDefaults()
	return w.Algorithm.TwoView() && w.Solver == SolverCovariance && w.Features == FeaturesRandom
}

// Step records a step of l that took d (measured by the caller around
// Update) and raises l's budget by a block when the rule above allows.
// It returns the budget.
func (g *Growth) Step(l *KPCA, d time.Duration) int {
	if g.Limit <= 0 || l.Step() == 0 {
		return l.MaxFeatures()
	}
	clock := g.now
	if clock == nil {
		clock = time.Now
	}
	now := clock()
	if g.start.IsZero() {
		g.start = now.Add(-d)
	}
	f := l.Features()
	if f > 0 {
		c := d.Seconds() / float64(f)
		if g.perFeat == 0 {
			g.perFeat = c
		} else {
			g.perFeat += 0.2 * (c - g.perFeat)
		}
	}
	budget := l.MaxFeatures()
	if f < budget {
		return budget // still filling
	}
	maxBytes := g.MaxBytes
	if maxBytes <= 0 {
		maxBytes = DefaultGrowthBytes
	}
	cfg := l.Config()
	next := budget + cfg.BlockSize
	if ModelBytes(next, l.Columns()) > maxBytes {
		return budget
	}
	left := g.Limit - now.Sub(g.start)
	if left.Seconds() < g.perFeat*float64(next)*float64(next)/float64(cfg.BlockSize) {
		return budget
	}
	if got := l.RaiseBudget(next); got > budget {
		g.raised++
		return got
	}
	return budget
}

// Raised is the number of blocks Step added past the configured budget.
func (g *Growth) Raised() int { return g.raised }

// OfflineCovariance describes an offline run (fit, bench) of a two-view
// learner under the covariance solver with random features, for
// CovarianceBudget. Zero values mean the default.
type OfflineCovariance struct {
	// MaxBytes bounds the solver's state. Default: DefaultGrowthBytes
	// (1 GiB, the service's learner.max_model_bytes).
	MaxBytes int64
	// Limit is the run's wall-clock budget; 0: memory alone decides.
	Limit time.Duration
	// Passes is how many passes over the rows Limit must pay for.
	// Default: 3 (kcca's held-out S50 on MNIST halves is within 0.05 of
	// its last value after the third).
	Passes int
	// Rows are the samples of a pass; Dims the two views' input
	// dimensions; K the components; Batch the mini-batch (default 512).
	Rows, K, Batch int
	Dims           [2]int
	// Rate is the machine's speed at the statistics' product, in flop/s
	// (two a multiply-add); 0: measured now (MeasureCovarianceRate).
	Rate float64
}

// CovarianceBudget returns the features per view an offline run of the
// covariance solver can afford: the largest multiple of its block size
// (DefaultCovarianceBlockSize), from DefaultCovarianceMaxFeatures up to
// MaxCovarianceFeatures, such that
//
//   - memory: the solver's state as it holds it (covarianceBytes: 5·m²
//     float64 of statistics and factors, the products' packing buffers,
//     the ridge choice's ring and, past ridgeFeatures, its own problem)
//     stays within MaxBytes;
//   - time: Passes passes over Rows samples at covarianceRowFlops(m)
//     each, at Rate, fit within Limit; and
//   - rows: a block more only while the blocks so far hold fewer
//     features than a pass has rows (past them a block adds no rank to
//     the statistics; a small file keeps the default).
//
// A service keeps DefaultCovarianceMaxFeatures: its step, which grows as
// m², must keep up with a stream; an offline run has only a time limit
// and the machine's memory, and random features buy accuracy with m (MNIST
// halves, k = 50, held-out S50 after three passes: 37.98 at 2,048 per
// view, 39.55 at 4,096, where 1 GiB stops it). It never returns less
// than the default.
func CovarianceBudget(o OfflineCovariance) int {
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultGrowthBytes
	}
	if o.Passes <= 0 {
		o.Passes = 3
	}
	if o.Batch <= 0 {
		o.Batch = 512
	}
	if o.Limit > 0 && o.Rate <= 0 {
		o.Rate = MeasureCovarianceRate(0)
	}
	best := DefaultCovarianceMaxFeatures
	for m := best + DefaultCovarianceBlockSize; m <= MaxCovarianceFeatures; m += DefaultCovarianceBlockSize {
		if m-DefaultCovarianceBlockSize >= o.Rows || covarianceBytes(m, m, o.K, o.Batch, ridgeFeatures) > o.MaxBytes {
			break
		}
		if o.Limit > 0 {
			secs := float64(o.Passes) * float64(o.Rows) * covarianceRowFlops(m, o.K, o.Dims[0], o.Dims[1]) / o.Rate
			if secs > o.Limit.Seconds() {
				break
			}
		}
		best = m
	}
	return best
}

// covarianceBytes is the state of the two-view covariance solver at mx
// and my features per view (see newCovariance, newRidgeSearch and
// ridgeSearch.leading): S_xx, S_yy, their factors and S_xy; the basis
// and its scratch; a batch's features; the ridge choice's ring of
// ridgeKeep pairs and, past limit features (ridgeFeatures), its problem
// of that size.
func covarianceBytes(mx, my, k, batch, limit int) int64 {
	mm, p := max(mx, my), basisSize(mx, my, k)
	n := covarianceState(mx, my, k) +
		batch*(mx+my) + // the batch's features
		ridgeKeep*(mx+my) + // the ring
		2*ridgeKeep*k + 2*mm*k + mm*p // a choice's scratch
	if lx, ly := min(mx, limit), min(my, limit); lx < mx || ly < my {
		// The leading problem, its factors in the whole's.
		n += covarianceState(lx, ly, k) - lx*lx - ly*ly + ridgeKeep*(lx+ly) + packed(max(lx, ly), ridgeKeep, basisSize(lx, ly, k))
		n += packed(mm, batch, p)
	} else {
		n += packed(mm, max(batch, ridgeKeep), p)
	}
	return 8 * int64(n)
}

// packed is what Gemm's packing buffers hold (dense.Workspace) after the
// solver's largest products with m rows: S += Φᵀ·Φ over inner samples
// (m×inner and inner×m), and S_xy times the p-column basis in panels of
// applyPanel rows (see applyT).
func packed(m, inner, p int) int {
	pad := func(n, to int) int { return (n + to - 1) / to * to }
	return max(pad(m, 12)*inner, pad(min(applyPanel, m), 12)*m) + max(pad(m, 16)*inner, pad(p, 16)*m)
}

// covarianceState is the number of float64 newCovariance allocates for
// two views: the statistics and factors, the sums and means, the basis
// and its scratch.
func covarianceState(mx, my, k int) int {
	p := basisSize(mx, my, k)
	return 2*mx*mx + 2*my*my + mx*my + 2*(mx+my) + 2*max(mx, my)*p + (mx+my)*p + my*p + 3*p + p*p +
		64*p // the orthonormalisation's workspace (LAPACK's, at most)
}

// covarianceRowFlops is what a sample costs the two-view covariance solver
// at m features per view, in flops: the statistics' products (4·m²:
// S_xx and S_yy upper, S_xy whole), the solves spread over the (2/3)·m
// samples between them (see covariance.due: two factorisations, (2/3)·m³,
// and two iterations of 16·m²·p, so m² + 24·m·p a sample) and the
// features of both views (2·m·(dx + dy)).
func covarianceRowFlops(m, k, dx, dy int) float64 {
	p := float64(basisSize(m, m, k))
	f := float64(m)
	return 5*f*f + 24*f*p + 2*f*float64(dx+dy)
}

// MeasureCovarianceRate times the statistics' product on this machine
// (Gemm of a 512 × 1,024 batch into 1,024 × 1,024, the best of three) and
// returns its flop/s. workers ≤ 0: GOMAXPROCS, the learner's default.
func MeasureCovarianceRate(workers int) float64 {
	const b, m = 512, 1024
	rng := rand.New(rand.NewPCG(1, 1))
	a := make([]float64, b*m)
	for i := range a {
		a[i] = rng.Float64()
	}
	c := make([]float64, m*m)
	ws := dense.Workspace{Workers: workers}
	defer ws.Close()
	ws.Gemm(dense.Op{TransA: true}, dense.Dense(b, m, a), dense.Dense(b, m, a), dense.Dense(m, m, c)) // warm
	best := time.Duration(math.MaxInt64)
	for range 3 {
		t0 := time.Now()
		ws.Gemm(dense.Op{TransA: true}, dense.Dense(b, m, a), dense.Dense(b, m, a), dense.Dense(m, m, c))
		best = min(best, time.Since(t0))
	}
	return 2 * b * m * m / max(best.Seconds(), 1e-9)
}
