package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/streamkpca/streamkpca/configs"
	"github.com/streamkpca/streamkpca/features"
	"github.com/streamkpca/streamkpca/internal/mnist"
	"github.com/streamkpca/streamkpca/internal/synth"
	"github.com/streamkpca/streamkpca/internal/tools/baseline"
	"github.com/streamkpca/streamkpca/online"
	"github.com/streamkpca/streamkpca/snapshot"
)

// DriftConfig configures RunDrift. Zero values mean the default.
type DriftConfig struct {
	// SaveModels, when set, is a path prefix: each one-view run's final
	// model is written to <SaveModels>-<run>.skpca (for bench floor).
	SaveModels string
	// Case is "switch" (16-D hermite rotated by a random orthogonal Q
	// after Points points), "rotate" (it turns by a quarter turn in
	// eight planes, evenly over the second Points points), "ramp" (the
	// same turn, then Points more points), "stationary" (16-D hermite,
	// unchanged, for 2·Points), "mnist" (MNIST digits of
	// classes 0–4, then of classes 5–9; needs MNIST), "mnist-ramp" (the
	// share of 5–9 rising evenly from 0 to 1 over the second Points
	// points, then Points of 5–9) or "mnist-stationary" (every digit,
	// shuffled, for 2·Points: no change; the truth on each side is exact
	// kernel PCA of other images of every digit), "kcca-ramp" (kcca of
	// MNIST left and right half-images: digits 0–4, the share of 5–9
	// rising over T, then T of 5–9) or "kcca-stationary" (every digit
	// throughout; scored by the held-out S_k, see pairDrift). Default:
	// switch.
	Case string
	// MNIST is the MNIST set for case mnist (mnist.Load).
	MNIST mnist.Set
	// Rows (rows×Dim) are case file's data set: shuffled anew for every
	// pass and replayed for 2·Points points, no change.
	Rows []float64
	Dim  int
	// Points on each side of the change, T. Default: 102,400 (mnist:
	// 51,200; kcca: 25,600).
	Points int
	// K components. Default: 5 (mnist: 10).
	K int
	// Batch is the mini-batch b. Default: 512.
	Batch int
	// Holdout: one point in Holdout is scored before it is learned
	// (online.HeldOut of its index), as the service does. Default: 16.
	Holdout int
	// Replay is the service's learner.replay for one-view runs: after
	// each batch it learns, the learner revisits batches of recent
	// learned rows (online.Window of the service's default
	// learner.replay_bytes) up to Replay rows per learned row, as the
	// service's loop does while a slow stream leaves it idle
	// (pipeline/loop.go: the window emptied at a switch). 0: none.
	Replay float64
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
	Switches uint64  `json:"switches,omitempty"`
	// Rollbacks: one-view candidates withdrawn without replacing the
	// model (online.KPCA.Rollbacks).
	Rollbacks uint64 `json:"rollbacks,omitempty"`
	// Following's current test (one view): the two learners' mean
	// held-out shares (the shadow's and the challenger's, or with
	// Candidate the model's and the candidate's), its evidence and the
	// level it rejects at (online.KPCA.FitScores, Evidence).
	TestShares [2]float64 `json:"test_shares,omitzero"`
	Evidence   float64    `json:"evidence,omitempty"`
	Level      float64    `json:"level,omitempty"`
	Candidate  bool       `json:"candidate,omitempty"`
	Seconds    float64    `json:"seconds"`
	// CPUSeconds is the process's CPU time (user + system, every
	// thread) spent in those learning steps: what following costs, where
	// Seconds is wall time, which idles workers during serial parts.
	CPUSeconds float64 `json:"cpu_seconds"`
	// SumK is a two-view model's held-out S_k on the pairs of the
	// classes in force (kcca cases).
	SumK float64 `json:"sum_k,omitempty"`
}

// DriftRun is one learner's curve.
type DriftRun struct {
	Name string `json:"name"`
	// Detected lists the points at which a change was detected: the
	// change detector's restarts, one view's switches and the starts of
	// its candidacies (following's scouts finding a change).
	Detected []int        `json:"detected,omitempty"`
	Curve    []DriftPoint `json:"curve"`
	// Before is the error at the last checkpoint before the change, T/20
	// points before it; At20 and At100 at +20% and +100% of T after it.
	Before float64 `json:"error_before,omitempty"`
	At20   float64 `json:"error_at_20pct"`
	At100  float64 `json:"error_at_100pct"`
	// SumKBefore, SumKAt20 and SumKAt100 are the same checkpoints' held-out
	// S_k (kcca cases; higher is better); Switches is the challengers
	// that replaced the model.
	SumKBefore float64 `json:"sum_k_before,omitempty"`
	SumKAt20   float64 `json:"sum_k_at_20pct,omitempty"`
	SumKAt100  float64 `json:"sum_k_at_100pct,omitempty"`
	Switches   uint64  `json:"switches,omitempty"`
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
	// newRun makes a run's learner on a new stream (cfg as defaulted).
	var newRun func(cfg DriftConfig, run string) (driftLearner, error)
	switch cfg.Case {
	case "switch", "rotate", "ramp", "stationary":
		orDefault(&cfg.Points, 102_400)
		orDefault(&cfg.K, 5)
		newRun = func(cfg DriftConfig, run string) (driftLearner, error) {
			return newOneViewDrift(cfg, newHermiteDrift(cfg), run), nil
		}
	case "mnist", "mnist-ramp", "mnist-stationary":
		orDefault(&cfg.Points, 51_200)
		orDefault(&cfg.K, 10)
		newRun = func(cfg DriftConfig, run string) (driftLearner, error) {
			st, err := newMNISTDrift(cfg)
			if err != nil {
				return nil, err
			}
			return newOneViewDrift(cfg, st, run), nil
		}
	case "file":
		orDefault(&cfg.K, 10)
		orDefault(&cfg.Points, 6*len(cfg.Rows)/max(cfg.Dim, 1)) // 12 passes
		newRun = func(cfg DriftConfig, run string) (driftLearner, error) {
			st, err := newFileDrift(cfg)
			if err != nil {
				return nil, err
			}
			return newOneViewDrift(cfg, st, run), nil
		}
	case "kcca-ramp", "kcca-stationary":
		orDefault(&cfg.Points, 25_600)
		orDefault(&cfg.K, 10)
		newRun = newPairDriftLearner
	default:
		return DriftResult{}, errors.New("bench: drift case must be switch, rotate, ramp, stationary, mnist, mnist-ramp, mnist-stationary, file, kcca-ramp or kcca-stationary")
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
	}
	for _, run := range cfg.Runs {
		dl, err := newRun(cfg, run)
		if err != nil {
			return res, err
		}
		r, err := driveDrift(ctx, cfg, run, rampCase(cfg.Case), dl)
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

// mnistDrift streams MNIST digits of classes 0–4, then of 5–9, taken
// from each half's training images in passes (see passes); the truth of
// each half is exact kernel PCA of its training images (baseline.Exact),
// scored on its held-out images, with one bandwidth (the median trick on
// the first half) for both.
type mnistDrift struct {
	classMix
	rng   *rand.Rand
	next  [2]passes // the order each half's images are taken in
	train [2][]float64
	test  [2][]float64
	truth [2]*mat.Dense
	pred  []float64
	kern  features.Kernel
	k     int
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
	s := &mnistDrift{classMix: classMix{t: cfg.Points, ramp: cfg.Case == "mnist-ramp"}, rng: rand.New(rand.NewPCG(cfg.Seed, 2)), k: cfg.K, still: cfg.Case == "mnist-stationary"}
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

// classMix is the mix of an MNIST stream's two halves of classes (0–4
// and 5–9, or two halves of every digit): half 0 for T points, then half
// 1, at once or (ramp) by a share rising evenly over [T, 2T).
type classMix struct {
	t    int
	ramp bool
}

// share is the fraction of half 1 at stream position n.
func (s classMix) share(n int) float64 {
	switch {
	case n < s.t:
		return 0
	case !s.ramp || n >= 2*s.t:
		return 1
	}
	return float64(n-s.t) / float64(s.t)
}

// half is the half whose truth is in force at n: the majority.
func (s classMix) half(n int) int {
	if s.share(n) < 0.5 {
		return 0
	}
	return 1
}

// pick draws the half of the next point at stream position n.
func (s classMix) pick(rng *rand.Rand, n int) int {
	if p := s.share(n); p >= 1 || (p > 0 && rng.Float64() < p) {
		return 1
	}
	return 0
}
func (s *mnistDrift) sample(x []float64, rows, n int) {
	const d = mnist.Pixels
	for r := range rows {
		h := s.pick(s.rng, n)
		i := s.next[h].draw(s.rng, mnistDriftTrain)
		copy(x[r*d:(r+1)*d], s.train[h][i*d:(i+1)*d])
	}
}

// passes takes a set's n items in passes, each a new random order of all
// of them (random reshuffling), so that after any number of passes every
// item has been taken as often as any other, give or take one: a stream
// whose rows weigh as its truth's do. Drawn with replacement instead, the
// images' counts after 25,600 draws of 2,000 vary by ±28% (Poisson), and
// where the spectrum is flat at k that sample's kernel PCA is not the
// truth's: on the MNIST ramp's new digits at seed 5, exact kernel PCA of
// the 25,600 rows drawn was 0.035 from the truth (seed 1: 0.002), and
// every learner converged towards it (docs/results.md, "The ramp's seed
// 5, traced").
type passes struct {
	order []int
	at    int
}

// draw returns the next item of n, starting a new pass (a Fisher–Yates
// shuffle with rng) when the last has ended.
func (p *passes) draw(rng *rand.Rand, n int) int {
	if p.at == len(p.order) {
		if p.order == nil {
			p.order = make([]int, n)
			for i := range p.order {
				p.order[i] = i
			}
		}
		rng.Shuffle(n, func(i, j int) { p.order[i], p.order[j] = p.order[j], p.order[i] })
		p.at = 0
	}
	p.at++
	return p.order[p.at-1]
}
func (s *mnistDrift) score(eval func(dst, x []float64, rows int), n int) float64 {
	h := s.half(n)
	eval(s.pred, s.test[h], mnistDriftTest)
	return synth.SubspaceError(mat.NewDense(mnistDriftTest, s.k, s.pred), s.truth[h])
}
func (s *mnistDrift) heldOut(n int) ([]float64, int) { return s.test[s.half(n)], mnistDriftTest }

// rampCase reports whether the case changes gradually over [T, 2T) and
// runs on for T after (3T points; the restarted learner starts at 2T).
func rampCase(c string) bool { return c == "ramp" || c == "mnist-ramp" || c == "kcca-ramp" }

// newOneViewDrift is a one-view run's learner on st.
func newOneViewDrift(cfg DriftConfig, st driftStream, run string) *oneViewDrift {
	lcfg := cfg.Learner
	lcfg.Model, lcfg.K, lcfg.Seed = "drift", cfg.K, cfg.Seed
	lcfg.Kernel = st.kernel()
	d := &oneViewDrift{learnerSlot: learnerSlot[*online.KPCA]{cfg: cfg, lcfg: runForget(lcfg, run)}, st: st, x: make([]float64, cfg.Batch*st.dim())}
	d.make = func(c online.Config) (*online.KPCA, error) { // a new learner, a new window
		d.replay = online.NewWindow(cfg.Replay, configs.DefaultReplayBytes, cfg.Seed)
		return online.New(c)
	}
	return d
}

// runForget is a drift run's learner configuration: forgetting off for
// forget-off; for restarted, the reference started afresh at the
// change's end, the detector alone (no challenger of its own to replace
// it).
func runForget(c online.Config, run string) online.Config {
	switch run {
	case "forget-off":
		c.Forget = online.ForgetOff
	case "restarted":
		c.Forget = online.ForgetDetect
	}
	return c
}

// driftLearner is what driveDrift needs of a run's learner, one view or
// two.
type driftLearner interface {
	// start starts a new learner (closing the one before).
	start() error
	// step learns b points at stream position n, their held-out ones
	// scored first, and reports a detected change and the time it took
	// (the stream's sampling left out).
	step(n, b int) (changed bool, took time.Duration, err error)
	// point measures the model at stream position n.
	point(n int) DriftPoint
	switches() uint64
	close()
}

// driveDrift streams the run's points into dl (restarted: a learner
// started afresh at the change's end) and measures it every T/20
// points.
func driveDrift(ctx context.Context, cfg DriftConfig, run string, ramp bool, dl driftLearner) (DriftRun, error) {
	T := cfg.Points
	end, total := T, 2*T // the change's end (the restart), the stream's
	if ramp {
		end, total = 2*T, 3*T
	}
	if err := dl.start(); err != nil {
		return DriftRun{}, err
	}
	defer dl.close()
	if ss, ok := dl.(interface{ snapshot() *snapshot.Snapshot }); ok && cfg.SaveModels != "" {
		defer func() {
			if _, err := snapshot.WriteFile(cfg.SaveModels+"-"+run+".skpca", ss.snapshot()); err != nil {
				fmt.Fprintln(os.Stderr, "bench drift: the model was not saved:", err)
			}
		}()
	}
	out := DriftRun{Name: run}
	every := T / 20
	// No batch straddles a mark: the checkpoint T/20 before the change,
	// the change's start and end (the restart), the +20% and +100%
	// checkpoints and the stream's end, whatever T and the batch (a
	// restarted run whose T was not a multiple of the batch never
	// restarted, and its figures at the marks were left out).
	marks := []int{T - every, T, end, end + T/5, end + T, total}
	var learn time.Duration
	var learnCPU float64 // the process's CPU seconds while learning (cpuNow: all its threads)
	for n := 0; n < total; {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		if run == "restarted" && n == end {
			if err := dl.start(); err != nil {
				return out, err
			}
		}
		b := cfg.Batch
		for _, m := range marks {
			if m > n {
				b = min(b, m-n)
			}
		}
		c0 := cpuNow()
		changed, took, err := dl.step(n, b)
		learn += took
		learnCPU += cpuNow() - c0
		if err != nil {
			return out, err
		}
		if changed {
			out.Detected = append(out.Detected, n)
		}
		n += b
		if n%every != 0 && !slices.Contains(marks, n) {
			continue
		}
		p := dl.point(n)
		p.Points, p.Seconds, p.CPUSeconds = n, learn.Seconds(), learnCPU
		out.Curve = append(out.Curve, p)
		if n <= T-every { // the last checkpoint T/20 or more before the change
			out.Before, out.SumKBefore = p.Error, p.SumK
		}
		switch n {
		case end + T/5:
			out.At20, out.SumKAt20 = p.Error, p.SumK
		case end + T:
			out.At100, out.SumKAt100 = p.Error, p.SumK
		}
		if cfg.Progress != nil {
			cfg.Progress(run, p, total)
		}
	}
	out.Switches = dl.switches()
	return out, nil
}

// learnerSlot is what a run's learner of either kind keeps between
// starts: its configuration, the learner and the constructor that starts
// one (online.New or online.NewTwoView).
type learnerSlot[L interface {
	Close()
	Switches() uint64
}] struct {
	cfg  DriftConfig
	lcfg online.Config
	l    L
	live bool
	make func(online.Config) (L, error)
}

// start closes the learner and starts a new one.
func (d *learnerSlot[L]) start() error {
	d.close()
	l, err := d.make(d.lcfg)
	if err != nil {
		return err
	}
	d.l, d.live = l, true
	return nil
}

func (d *learnerSlot[L]) close() {
	if d.live {
		d.l.Close()
		d.live = false
	}
}

func (d *learnerSlot[L]) switches() uint64 { return d.l.Switches() }

// oneViewDrift is a one-view run's learner on a driftStream.
type oneViewDrift struct {
	learnerSlot[*online.KPCA]
	st     driftStream
	x, hx  []float64
	replay *online.Window // DriftConfig.Replay (nil: off)
}

// snapshot is the run's final model (DriftConfig.SaveModels).
func (d *oneViewDrift) snapshot() *snapshot.Snapshot { return d.l.Snapshot() }

func (d *oneViewDrift) step(n, b int) (bool, time.Duration, error) {
	dim := d.st.dim()
	x := d.x[:b*dim]
	d.st.sample(x, b, n)
	d.hx = holdout(d.hx[:0], x, b, dim, uint64(n), d.cfg.Holdout)
	t0 := time.Now()
	candidate := d.l.Candidate()
	changed, err := d.l.Assess(d.hx, len(d.hx)/dim)
	if err != nil {
		return false, time.Since(t0), err
	}
	// Following's scouts finding a change starts a candidacy: a change
	// found, as the detector's restart is.
	detected := changed
	changed = changed || (!candidate && d.l.Candidate())
	switches := d.l.Switches()
	err = d.l.Update(x, b)
	if errors.Is(err, online.ErrDiverged) {
		err = nil // refused and counted by the learner
	}
	if err != nil || d.replay == nil {
		return changed, time.Since(t0), err
	}
	// The service's loop (pipeline/loop.go): a switch or a restart
	// empties the window; the batch learned joins it; revisits follow
	// while the window's budget allows, as on a stream slow enough to
	// leave the learner idle.
	if d.l.Switches() > switches || detected && d.lcfg.Forget != online.ForgetOff {
		d.replay.Clear()
	}
	d.replay.Add(x, nil, b)
	for d.replay.Due(b) {
		rx, _ := d.replay.Draw(b)
		if err := d.l.Revisit(rx, b); err != nil && !errors.Is(err, online.ErrDiverged) {
			return changed, time.Since(t0), err
		}
	}
	return changed, time.Since(t0), nil
}

func (d *oneViewDrift) point(n int) DriftPoint {
	l := d.l
	p := DriftPoint{Features: l.Features(), Changes: l.Changes(), Switches: l.Switches(), Rollbacks: l.Rollbacks(), Error: d.st.score(l.EvalTo, n)}
	p.TestShares[0], p.TestShares[1] = l.FitScores()
	p.Evidence, p.Level = l.Evidence()
	p.Candidate = l.Candidate()
	if q := l.Quality(); q != nil {
		p.Quality = q.Score
	}
	hx, hr := d.st.heldOut(n)
	p.Score, _ = l.Score(hx, hr)
	// The fit score on at most 500 of them: it costs rows³.
	fr := min(hr, 500)
	if f, err := l.FitScore(hx[:fr*d.st.dim()], fr); err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
		p.FitScore = f
	}
	return p
}
