package bench

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/streamkpca/streamkpca/internal/synth"
	"github.com/streamkpca/streamkpca/online"
	"github.com/streamkpca/streamkpca/online/features"
)

// DriftConfig configures RunDrift. Zero values mean the default.
type DriftConfig struct {
	// Case is "switch" (the stream is rotated by a random orthogonal Q
	// after Points points) or "rotate" (it turns by a quarter turn in
	// eight planes, evenly over the second Points points). Default:
	// switch.
	Case string
	// Points on each side of the change, T. Default: 102,400.
	Points int
	// K components. Default: 5.
	K int
	// Batch is the mini-batch b. Default: 512.
	Batch int
	// Holdout: one point in Holdout is scored before it is learned
	// (online.HeldOut of its index), as the service does. Default: 16.
	Holdout int
	// Learner overrides the learner's defaults (Model, K, Kernel and Seed
	// are set here).
	Learner online.Config
	// Seed of the stream, the rotation and the models. Default: 1.
	Seed uint64
	// Progress, if set, is called after every checkpoint.
	Progress func(run string, c DriftPoint, total int)
}

// DriftPoint is one checkpoint of a drift run.
type DriftPoint struct {
	Points   int     `json:"points"`
	Error    float64 `json:"subspace_error"`
	Quality  float64 `json:"quality,omitempty"`
	Features int     `json:"features"`
	Changes  uint64  `json:"changes"`
	Seconds  float64 `json:"seconds"`
}

// DriftRun is one learner's curve.
type DriftRun struct {
	Name string `json:"name"`
	// Detected lists the points at which a change was detected.
	Detected []int        `json:"detected,omitempty"`
	Curve    []DriftPoint `json:"curve"`
	// Before is the error at the change (the last checkpoint before it);
	// At20 and At100 at +20% and +100% of T after it.
	Before float64 `json:"error_before,omitempty"`
	At20   float64 `json:"error_at_20pct"`
	At100  float64 `json:"error_at_100pct"`
}

// DriftResult is the JSON printed by `bench drift`.
type DriftResult struct {
	Bench  string     `json:"bench"`
	Case   string     `json:"case"`
	Points int        `json:"points_each_side"`
	K      int        `json:"k"`
	Batch  int        `json:"batch"`
	Runs   []DriftRun `json:"runs"`
}

// RunDrift streams 16-D hermite for T points, then the same stream
// changed (Case), into three learners: the defaults (forgetting on), the
// same with Forget off, and a learner started afresh at the change (the
// restarted reference). Every Holdout-th point is scored (Assess) before
// it is learned. Each is scored against the closed-form eigenfunctions
// of the current distribution on 2,000 held-out points, every T/20
// points.
func RunDrift(ctx context.Context, cfg DriftConfig) (DriftResult, error) {
	if cfg.Case == "" {
		cfg.Case = "switch"
	}
	if cfg.Case != "switch" && cfg.Case != "rotate" {
		return DriftResult{}, errors.New("bench: drift case must be switch or rotate")
	}
	orDefault(&cfg.Points, 102_400)
	orDefault(&cfg.K, 5)
	orDefault(&cfg.Batch, 512)
	orDefault(&cfg.Holdout, DefaultHoldout)
	orDefault(&cfg.Seed, 1)
	res := DriftResult{Bench: "drift", Case: cfg.Case, Points: cfg.Points, K: cfg.K, Batch: cfg.Batch}
	for _, run := range []string{"defaults", "forget-off", "restarted"} {
		r, err := driftRun(ctx, cfg, run)
		if err != nil {
			return res, err
		}
		res.Runs = append(res.Runs, r)
	}
	return res, nil
}

// rotation is the change at stream point n ≥ T: a d×d orthogonal matrix.
type rotation struct {
	cfg DriftConfig
	q   *mat.Dense // the switch's Q
	d   int
}

func newRotation(cfg DriftConfig, d int) rotation {
	rng := rand.New(rand.NewPCG(cfg.Seed, 0xD21F7))
	g := mat.NewDense(d, d, nil)
	for i := range d {
		for j := range d {
			g.Set(i, j, rng.NormFloat64())
		}
	}
	var qr mat.QR
	qr.Factorize(g)
	var q mat.Dense
	qr.QTo(&q)
	return rotation{cfg: cfg, q: &q, d: d}
}

// at returns the rotation in force after n points (nil: none).
func (r rotation) at(n int) *mat.Dense {
	t := r.cfg.Points
	if n < t {
		return nil
	}
	if r.cfg.Case == "switch" {
		return r.q
	}
	// A quarter turn in the planes (0,1), (2,3), … (14,15), reached at 2T.
	a := math.Pi / 2 * math.Min(1, float64(n-t)/float64(t))
	m := mat.NewDense(r.d, r.d, nil)
	for i := 0; i+1 < r.d; i += 2 {
		c, s := math.Cos(a), math.Sin(a)
		m.Set(i, i, c)
		m.Set(i, i+1, -s)
		m.Set(i+1, i, s)
		m.Set(i+1, i+1, c)
	}
	return m
}

// apply rotates the rows of x (rows×d) in place: x ← x·Rᵀ.
func (r rotation) apply(rot *mat.Dense, x []float64, rows int) {
	if rot == nil {
		return
	}
	xm := mat.NewDense(rows, r.d, x)
	var y mat.Dense
	y.Mul(xm, rot.T())
	copy(x, y.RawMatrix().Data)
}

func driftRun(ctx context.Context, cfg DriftConfig, run string) (DriftRun, error) {
	h := synth.Hermite16()
	d, k, T := h.Dim(), cfg.K, cfg.Points
	rot := newRotation(cfg, d)
	rng := rand.New(rand.NewPCG(cfg.Seed, 1))
	const held = 2000
	xh := make([]float64, held*d)
	h.Sample(xh, rng)
	truth := h.Eigenfunctions(xh, held, k)
	xr := make([]float64, held*d)
	lcfg := cfg.Learner
	lcfg.Model, lcfg.K, lcfg.Seed = "drift", k, cfg.Seed
	lcfg.Kernel = features.Kernel{Family: features.Gaussian, Bandwidth: h.L}
	if run == "forget-off" {
		lcfg.Forget = online.ForgetOff
	}
	var l *online.KPCA
	newLearner := func() error {
		if l != nil {
			l.Close()
		}
		var err error
		l, err = online.New(lcfg)
		return err
	}
	if err := newLearner(); err != nil {
		return DriftRun{}, err
	}
	defer func() { l.Close() }()
	out := DriftRun{Name: run}
	x := make([]float64, cfg.Batch*d)
	hx := make([]float64, 0, cfg.Batch*d)
	pred := make([]float64, held*k)
	every := T / 20
	var learn time.Duration
	for n := 0; n < 2*T; {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		if run == "restarted" && n == T {
			if err := newLearner(); err != nil {
				return out, err
			}
		}
		b := min(cfg.Batch, 2*T-n)
		h.Sample(x[:b*d], rng)
		rot.apply(rot.at(n), x[:b*d], b)
		hx = holdout(hx[:0], x[:b*d], b, d, uint64(n), cfg.Holdout)
		t0 := time.Now()
		changed, err := l.Assess(hx, len(hx)/d)
		if err != nil {
			return out, err
		}
		if changed {
			out.Detected = append(out.Detected, n)
		}
		err = l.Update(x[:b*d], b)
		learn += time.Since(t0)
		if err != nil && !errors.Is(err, online.ErrDiverged) {
			return out, err
		}
		n += b
		if n%every == 0 || n == 2*T {
			copy(xr, xh)
			rot.apply(rot.at(n), xr, held)
			l.EvalTo(pred, xr, held)
			p := DriftPoint{Points: n, Features: l.Features(), Changes: l.Changes(), Seconds: learn.Seconds(),
				Error: synth.SubspaceError(mat.NewDense(held, k, pred), truth)}
			if q := l.Quality(); q != nil {
				p.Quality = q.Score
			}
			out.Curve = append(out.Curve, p)
			switch n {
			case T:
				out.Before = p.Error
			case T + T/5:
				out.At20 = p.Error
			case 2 * T:
				out.At100 = p.Error
			}
			if cfg.Progress != nil {
				cfg.Progress(run, p, 2*T)
			}
		}
	}
	return out, nil
}
