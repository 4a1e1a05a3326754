package bench

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/stat"

	"github.com/streamkpca/streamkpca/internal/synth"
	"github.com/streamkpca/streamkpca/online"
)

// KCCAResult is RunKCCA's report (the JSON of `bench kcca`).
type KCCAResult struct {
	Bench           string    `json:"bench"`
	K               int       `json:"k"`
	Points          int       `json:"points"`
	Features        int       `json:"features"`
	HeldOut         []float64 `json:"heldout_correlations"`
	SumK            float64   `json:"heldout_sum"`
	LinearCCASumK   float64   `json:"linear_cca_heldout_sum"`
	Seconds         float64   `json:"seconds"`
	PointsPerSecond float64   `json:"points_per_second"`
}

// KCCAConfig configures RunKCCA. Zero values mean the default.
type KCCAConfig struct {
	// Points: pairs streamed. Default: 200,000.
	Points int
	// K components. Default: 2.
	K int
	// Solver of kcca: the learner's default (covariance) or oja.
	Solver online.Solver
	// Progress, if set, is called after every batch.
	Progress func(n, total, features int, learn time.Duration)
}

// RunKCCA streams fresh pairs of the twoview stream into KCCA (defaults
// except k and the solver) and reports held-out canonical correlations next to linear CCA
// (gonum stat.CC) fitted on 20,000 pairs of the same stream.
func RunKCCA(ctx context.Context, cfg KCCAConfig) (KCCAResult, error) {
	orDefault(&cfg.Points, 200_000)
	orDefault(&cfg.K, 2)
	points, k := &cfg.Points, &cfg.K
	rng := rand.New(rand.NewPCG(1, 1))
	const held = 2000
	hx, hy := synth.TwoView(rng, held)
	l, err := online.NewTwoView(online.Config{Algorithm: online.AlgKCCA, K: *k, Solver: cfg.Solver})
	if err != nil {
		return KCCAResult{}, err
	}
	defer l.Close()
	var learn time.Duration
	for n := 0; n < *points; n += 512 {
		if err := ctx.Err(); err != nil {
			return KCCAResult{}, err
		}
		b := min(512, *points-n)
		x, y := synth.TwoView(rng, b)
		t0 := time.Now()
		if err := l.Update(x, y, b); err != nil && !errors.Is(err, online.ErrDiverged) {
			return KCCAResult{}, err
		}
		learn += time.Since(t0)
		if cfg.Progress != nil {
			cfg.Progress(n+b, *points, l.Features(), learn)
		}
	}
	u, v := make([]float64, held**k), make([]float64, held**k)
	l.EvalTo(0, u, hx, held)
	l.EvalTo(1, v, hy, held)
	cc := synth.CanonicalCorrelations(mat.NewDense(held, *k, u), mat.NewDense(held, *k, v))
	tx, ty := synth.TwoView(rng, 20000)
	var lc stat.CC
	if err := lc.CanonicalCorrelations(mat.NewDense(20000, 6, tx), mat.NewDense(20000, 6, ty), nil); err != nil {
		return KCCAResult{}, err
	}
	var a, bm, lu, lv mat.Dense
	lc.LeftTo(&a, true)
	lc.RightTo(&bm, true)
	lu.Mul(mat.NewDense(held, 6, hx), a.Slice(0, 6, 0, *k))
	lv.Mul(mat.NewDense(held, 6, hy), bm.Slice(0, 6, 0, *k))
	res := KCCAResult{Bench: "kcca", K: *k, Points: *points, Features: l.Features(), HeldOut: cc, SumK: synth.Sum(cc),
		LinearCCASumK: synth.Sum(synth.CanonicalCorrelations(&lu, &lv)), Seconds: learn.Seconds(),
		PointsPerSecond: float64(*points) / learn.Seconds()}
	return res, nil
}
