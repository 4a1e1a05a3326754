package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/streamkpca/streamkpca/features"
	"github.com/streamkpca/streamkpca/internal/mnist"
	"github.com/streamkpca/streamkpca/internal/synth"
	"github.com/streamkpca/streamkpca/internal/tools/baseline"
	"github.com/streamkpca/streamkpca/online"
)

// DriftConfig configures RunDrift. Zero values mean the default.
type DriftConfig struct {
	// Case is "switch" (16-D hermite rotated by a random orthogonal Q
	// after Points points), "rotate" (it turns by a quarter turn in
	// eight planes, evenly over the second Points points), "ramp" (the
	// same turn, then Points more points), "stationary" (16-D hermite,
	// unchanged, for 2·Points), "mnist" (MNIST digits of
	// classes 0–4, then of classes 5–9; needs MNIST), "mnist-ramp" (the
	// share of 5–9 rising evenly from 0 to 1 over the second Points
	// points, then Points of 5–9) or "mnist-stationary" (every digit,
	// shuffled, for 2·Points: no change; the truth on each side is exact
	// kernel PCA of other images of every digit). Default: switch.
	Case string
	// MNIST is the MNIST set for case mnist (mnist.Load).
	MNIST mnist.Set
	// Points on each side of the change, T. Default: 102,400 (mnist:
	// 51,200).
	Points int
	// K components. Default: 5 (mnist: 10).
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
	// Runs are the learners to run: defaults, forget-off, restarted.
	// Default: all three.
	Runs []string
	// Progress, if set, is called after every checkpoint.
	Progress func(run string, c DriftPoint, total int)
}

// DriftPoint is one checkpoint of a drift run.
type DriftPoint struct {
	Points  int     `json:"points"`
	Error   float64 `json:"subspace_error"`
	Quality float64 `json:"quality,omitempty"`
	// Score and FitScore are the model's held-out score (online.KPCA.Score)
	// and fit score (FitScore) on the truth's held-out points at this
	// point of the stream.
	Score    float64 `json:"score"`
	FitScore float64 `json:"fit_score"`
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
	// Before is the error at the last checkpoint before the change, T/20
	// points before it; At20 and At100 at +20% and +100% of T after it.
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
	var newStream func() (driftStream, error)
	switch cfg.Case {
	case "switch", "rotate", "ramp", "stationary":
		orDefault(&cfg.Points, 102_400)
		orDefault(&cfg.K, 5)
		newStream = func() (driftStream, error) { return newHermiteDrift(cfg), nil }
	case "mnist", "mnist-ramp", "mnist-stationary":
		orDefault(&cfg.Points, 51_200)
		orDefault(&cfg.K, 10)
		newStream = func() (driftStream, error) { return newMNISTDrift(cfg) }
	default:
		return DriftResult{}, errors.New("bench: drift case must be switch, rotate, ramp, stationary, mnist, mnist-ramp or mnist-stationary")
	}
	orDefault(&cfg.Batch, 512)
	orDefault(&cfg.Holdout, DefaultHoldout)
	orDefault(&cfg.Seed, 1)
	res := DriftResult{Bench: "drift", Case: cfg.Case, Points: cfg.Points, K: cfg.K, Batch: cfg.Batch}
	if len(cfg.Runs) == 0 {
		cfg.Runs = []string{"defaults", "forget-off", "restarted"}
	}
	for _, run := range cfg.Runs {
		if run != "defaults" && run != "forget-off" && run != "restarted" {
			return res, fmt.Errorf("bench: drift run %q (known: defaults, forget-off, restarted)", run)
		}
		st, err := newStream()
		if err != nil {
			return res, err
		}
		r, err := driftRun(ctx, cfg, st, run)
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
	if n < t || r.cfg.Case == "stationary" {
		return nil
	}
	if r.cfg.Case == "switch" {
		return r.q
	}
	// A quarter turn in the planes (0,1), (2,3), … (14,15), reached at 2T
	// (rotate, ramp).
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

// driftStream is a stream with a change after T points and a truth to
// score a model against at every point of it.
type driftStream interface {
	dim() int
	kernel() features.Kernel
	// sample writes rows points at stream position n into x.
	sample(x []float64, rows, n int)
	// score is the subspace error of eval's functions against the truth
	// in force at stream position n.
	score(eval func(dst, x []float64, rows int), n int) float64
	// heldOut is the truth's held-out points at stream position n
	// (rows×dim), to compare models' scores on.
	heldOut(n int) ([]float64, int)
}

// hermiteDrift is 16-D hermite, rotated (cases switch and rotate).
type hermiteDrift struct {
	h       synth.Hermite
	rot     rotation
	rng     *rand.Rand
	xh, xr  []float64
	truth   *mat.Dense
	pred    []float64
	k, held int
}

func newHermiteDrift(cfg DriftConfig) *hermiteDrift {
	h := synth.Hermite16()
	d := h.Dim()
	s := &hermiteDrift{h: h, rot: newRotation(cfg, d), rng: rand.New(rand.NewPCG(cfg.Seed, 1)), k: cfg.K, held: 2000}
	s.xh = make([]float64, s.held*d)
	h.Sample(s.xh, s.rng)
	s.truth = h.Eigenfunctions(s.xh, s.held, cfg.K)
	s.xr = make([]float64, s.held*d)
	s.pred = make([]float64, s.held*cfg.K)
	return s
}

func (s *hermiteDrift) dim() int { return s.h.Dim() }
func (s *hermiteDrift) kernel() features.Kernel {
	return features.Kernel{Family: features.Gaussian, Bandwidth: s.h.L}
}
func (s *hermiteDrift) sample(x []float64, rows, n int) {
	s.h.Sample(x, s.rng)
	s.rot.apply(s.rot.at(n), x, rows)
}
func (s *hermiteDrift) score(eval func(dst, x []float64, rows int), n int) float64 {
	x, rows := s.heldOut(n)
	eval(s.pred, x, rows)
	return synth.SubspaceError(mat.NewDense(s.held, s.k, s.pred), s.truth)
}
func (s *hermiteDrift) heldOut(n int) ([]float64, int) {
	copy(s.xr, s.xh)
	s.rot.apply(s.rot.at(n), s.xr, s.held)
	return s.xr, s.held
}

// mnistDrift streams MNIST digits of classes 0–4, then of 5–9, drawn at
// random from each half's training images; the truth of each half is
// exact kernel PCA of its training images (baseline.Exact), scored on
// its held-out images, with one bandwidth (the median trick on the first
// half) for both.
type mnistDrift struct {
	t     int
	rng   *rand.Rand
	train [2][]float64
	test  [2][]float64
	truth [2]*mat.Dense
	pred  []float64
	kern  features.Kernel
	k     int
	ramp  bool
	still bool // mnist-stationary: every digit on both sides
}

// mnistDriftTrain and mnistDriftTest are each half's training and
// held-out images.
const mnistDriftTrain, mnistDriftTest = 2000, 500

func newMNISTDrift(cfg DriftConfig) (*mnistDrift, error) {
	if cfg.MNIST.Len() == 0 {
		return nil, errors.New("bench: drift case mnist needs the MNIST images (--mnist DIR)")
	}
	set := cfg.MNIST.Shuffle(rand.New(rand.NewPCG(cfg.Seed, 1)))
	const d = mnist.Pixels
	s := &mnistDrift{t: cfg.Points, rng: rand.New(rand.NewPCG(cfg.Seed, 2)), k: cfg.K, ramp: cfg.Case == "mnist-ramp", still: cfg.Case == "mnist-stationary"}
	var all [2][]float64
	for i, lab := range set.Labels {
		h := 0
		if lab >= 5 {
			h = 1
		}
		if s.still {
			h = i % 2 // both halves hold every digit: no change
		}
		all[h] = append(all[h], set.X[i*d:(i+1)*d]...)
	}
	for h := range 2 {
		if len(all[h]) < (mnistDriftTrain+mnistDriftTest)*d {
			return nil, fmt.Errorf("bench: %d images of half %d, need %d", len(all[h])/d, h, mnistDriftTrain+mnistDriftTest)
		}
		s.train[h] = all[h][:mnistDriftTrain*d]
		s.test[h] = all[h][mnistDriftTrain*d : (mnistDriftTrain+mnistDriftTest)*d]
	}
	s.kern = features.Kernel{Family: features.Gaussian, Bandwidth: online.MedianDistance(s.train[0], 512, d, 512)}
	for h := range 2 {
		ex, err := baseline.NewExact(s.kern, d, cfg.K, mnistDriftTrain)
		if err != nil {
			return nil, err
		}
		ex.Observe(s.train[h], mnistDriftTrain)
		if err := ex.Fit(); err != nil && !errors.Is(err, baseline.ErrNotConverged) {
			return nil, fmt.Errorf("bench: exact kernel PCA of half %d: %w", h, err)
		}
		tr := make([]float64, mnistDriftTest*cfg.K)
		ex.Eval(tr, s.test[h], mnistDriftTest)
		s.truth[h] = mat.NewDense(mnistDriftTest, cfg.K, tr)
	}
	s.pred = make([]float64, mnistDriftTest*cfg.K)
	return s, nil
}

func (s *mnistDrift) dim() int                { return mnist.Pixels }
func (s *mnistDrift) kernel() features.Kernel { return s.kern }

// share is the fraction of digits 5–9 at stream position n: 0 then 1
// (mnist), or rising evenly over [T, 2T) (mnist-ramp).
func (s *mnistDrift) share(n int) float64 {
	switch {
	case n < s.t:
		return 0
	case !s.ramp || n >= 2*s.t:
		return 1
	}
	return float64(n-s.t) / float64(s.t)
}

// half is the half whose truth is in force at n: the majority.
func (s *mnistDrift) half(n int) int {
	if s.share(n) < 0.5 {
		return 0
	}
	return 1
}
func (s *mnistDrift) sample(x []float64, rows, n int) {
	const d = mnist.Pixels
	p := s.share(n)
	for r := range rows {
		h := 0
		if p >= 1 || (p > 0 && s.rng.Float64() < p) {
			h = 1
		}
		i := s.rng.IntN(mnistDriftTrain)
		copy(x[r*d:(r+1)*d], s.train[h][i*d:(i+1)*d])
	}
}
func (s *mnistDrift) score(eval func(dst, x []float64, rows int), n int) float64 {
	h := s.half(n)
	eval(s.pred, s.test[h], mnistDriftTest)
	return synth.SubspaceError(mat.NewDense(mnistDriftTest, s.k, s.pred), s.truth[h])
}
func (s *mnistDrift) heldOut(n int) ([]float64, int) { return s.test[s.half(n)], mnistDriftTest }

// rampCase reports whether the case changes gradually over [T, 2T) and
// runs on for T after (3T points; the restarted learner starts at 2T).
func rampCase(c string) bool { return c == "ramp" || c == "mnist-ramp" }

func driftRun(ctx context.Context, cfg DriftConfig, st driftStream, run string) (DriftRun, error) {
	d, T := st.dim(), cfg.Points
	end, total := T, 2*T // the change's end (the restart), the stream's
	if rampCase(cfg.Case) {
		end, total = 2*T, 3*T
	}
	lcfg := cfg.Learner
	lcfg.Model, lcfg.K, lcfg.Seed = "drift", cfg.K, cfg.Seed
	lcfg.Kernel = st.kernel()
	switch run {
	case "forget-off":
		lcfg.Forget = online.ForgetOff
	case "restarted":
		// The reference: a learner started afresh at the change's end,
		// with no challenger of its own to replace it.
		lcfg.Forget = online.ForgetDetect
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
	every := T / 20
	var learn time.Duration
	for n := 0; n < total; {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		if run == "restarted" && n == end {
			if err := newLearner(); err != nil {
				return out, err
			}
		}
		b := min(cfg.Batch, total-n)
		st.sample(x[:b*d], b, n)
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
		if n%every == 0 || n == total {
			p := DriftPoint{Points: n, Features: l.Features(), Changes: l.Changes(), Seconds: learn.Seconds(),
				Error: st.score(l.EvalTo, n)}
			if q := l.Quality(); q != nil {
				p.Quality = q.Score
			}
			hx, hr := st.heldOut(n)
			p.Score, _ = l.Score(hx, hr)
			// The fit score on at most 500 of them: it costs rows³.
			fr := min(hr, 500)
			if f, err := l.FitScore(hx[:fr*d], fr); err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
				p.FitScore = f
			}
			out.Curve = append(out.Curve, p)
			switch n {
			case T - every:
				out.Before = p.Error
			case end + T/5:
				out.At20 = p.Error
			case end + T:
				out.At100 = p.Error
			}
			if cfg.Progress != nil {
				cfg.Progress(run, p, 2*T)
			}
		}
	}
	return out, nil
}
