package bench

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/streamkpca/streamkpca/features"
	"github.com/streamkpca/streamkpca/internal/synth"
	"github.com/streamkpca/streamkpca/online"
)

// CurvePoint is one point of a convergence curve (paper Figure 1).
type CurvePoint struct {
	Points   int     `json:"points"`
	Features int     `json:"features"`
	Error    float64 `json:"subspace_error"`
	Seconds  float64 `json:"seconds"`
}

// HermiteResult is the JSON printed by `bench hermite`.
type HermiteResult struct {
	Bench           string       `json:"bench"`
	Dims            int          `json:"dims"`
	K               int          `json:"k"`
	Algorithm       string       `json:"algorithm"`
	Batch           int          `json:"batch"`
	Block           int          `json:"block"`
	MaxFeatures     int          `json:"max_features"`
	Solver          string       `json:"solver"`
	Theta0          float64      `json:"theta0"`
	Theta1          float64      `json:"theta1"`
	Points          int          `json:"points"`
	Features        int          `json:"features"`
	SubspaceError   float64      `json:"subspace_error"`
	Seconds         float64      `json:"seconds"`
	PointsPerSecond float64      `json:"points_per_second"`
	Slope10k100k    float64      `json:"loglog_slope_10k_100k"`
	Curve           []CurvePoint `json:"curve"`
}

// HermiteConfig configures RunHermite. Zero values mean the default.
type HermiteConfig struct {
	// Points streamed. Default: 1,000,000.
	Points int
	// K components. Default: 3.
	K int
	// Dims: 1 (s = 1, ℓ = 1) or 16 (the product form of the shared data).
	// Default: 1.
	Dims int
	// Learner overrides the learner's configuration (Model, K, Kernel and
	// Seed are set here). Defaults: BlockSize 128, MaxFeatures 65,536, the
	// paper's setup.
	Learner online.Config
	// Batch is the mini-batch b. Default: 512.
	Batch int
	// Seed of the stream and the model. Default: 1.
	Seed uint64
	// Progress, if set, is called after every scored checkpoint.
	Progress func(c CurvePoint, total int)
}

// RunHermite streams the hermite stream into KPCA (or GHA) and scores the
// learned subspace against the closed-form eigenfunctions on 2,000
// held-out points at checkpoints 10^⅛ apart from 1,000 points on (paper
// Figure 1); the clock counts Update only.
func RunHermite(ctx context.Context, cfg HermiteConfig) (HermiteResult, error) {
	orDefault(&cfg.Points, 1_000_000)
	orDefault(&cfg.K, 3)
	orDefault(&cfg.Dims, 1)
	orDefault(&cfg.Batch, 512)
	orDefault(&cfg.Seed, 1)
	orDefault(&cfg.Learner.BlockSize, 128)
	orDefault(&cfg.Learner.MaxFeatures, 65536)
	h := synth.Hermite1D()
	switch cfg.Dims {
	case 1:
	case 16:
		h = synth.Hermite16()
	default:
		return HermiteResult{}, errors.New("bench: hermite dims must be 1 or 16")
	}
	d, k := h.Dim(), cfg.K
	rng := rand.New(rand.NewPCG(cfg.Seed, 1))
	const held = 2000
	xh := make([]float64, held*d)
	h.Sample(xh, rng)
	truth := h.Eigenfunctions(xh, held, k)
	lcfg := cfg.Learner
	lcfg.Model, lcfg.K, lcfg.Seed = "hermite", k, cfg.Seed
	lcfg.Kernel = features.Kernel{Family: features.Gaussian, Bandwidth: h.L}
	l, err := online.New(lcfg)
	if err != nil {
		return HermiteResult{}, err
	}
	defer l.Close()
	lc := l.Config()
	res := HermiteResult{Bench: "hermite", Dims: d, K: k, Algorithm: string(lc.Algorithm), Solver: string(lc.Solver),
		Batch: cfg.Batch, Block: lc.BlockSize, MaxFeatures: lc.MaxFeatures, Theta0: lc.Theta0, Theta1: lc.Theta1}
	x := make([]float64, cfg.Batch*d)
	hx := make([]float64, 0, cfg.Batch*d)
	out := make([]float64, held*k)
	var learn time.Duration
	next := 1000.0
	for n := 0; n < cfg.Points; {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		b := min(cfg.Batch, cfg.Points-n)
		h.Sample(x[:b*d], rng)
		t0 := time.Now()
		hx = holdout(hx[:0], x[:b*d], b, d, uint64(n), DefaultHoldout)
		if _, err := l.Assess(hx, len(hx)/d); err != nil {
			return res, err
		}
		err := l.Update(x[:b*d], b)
		learn += time.Since(t0)
		if err != nil && !errors.Is(err, online.ErrDiverged) {
			return res, err
		}
		n += b
		if float64(n) >= next || n == cfg.Points {
			l.EvalTo(out, xh, held)
			c := CurvePoint{Points: n, Features: l.Features(), Error: synth.SubspaceError(mat.NewDense(held, k, out), truth), Seconds: learn.Seconds()}
			res.Curve = append(res.Curve, c)
			if cfg.Progress != nil {
				cfg.Progress(c, cfg.Points)
			}
			for next <= float64(n) {
				next *= math.Pow(10, 0.125)
			}
		}
	}
	last := res.Curve[len(res.Curve)-1]
	res.Points, res.Features, res.SubspaceError = last.Points, last.Features, last.Error
	res.Seconds = learn.Seconds()
	res.PointsPerSecond = float64(res.Points) / res.Seconds
	res.Slope10k100k = Slope(res.Curve, 10_000, 100_000)
	return res, nil
}

// Slope is the least-squares log–log slope of the curve between two point
// counts (NaN with fewer than two points between them).
func Slope(c []CurvePoint, lo, hi int) float64 {
	var sx, sy, sxx, sxy, n float64
	for _, p := range c {
		if p.Points < lo || p.Points > hi || !(p.Error > 0) {
			continue
		}
		x, y := math.Log(float64(p.Points)), math.Log(p.Error)
		sx, sy, sxx, sxy, n = sx+x, sy+y, sxx+x*x, sxy+x*y, n+1
	}
	if n < 2 {
		return math.NaN()
	}
	return (n*sxy - sx*sy) / (n*sxx - sx*sx)
}
