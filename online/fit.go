package online

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/streamkpca/streamkpca/internal/splitmix"
	"github.com/streamkpca/streamkpca/snapshot"
)

// FitOptions configures Fit. Zero values mean the default.
type FitOptions struct {
	// Epochs: passes over the rows, in order first, then shuffled. 0,
	// the default, stops by the held-out score (see Fit), after at most
	// MaxEpochs passes or Budget.
	Epochs int
	// MaxEpochs bounds the passes when Epochs is 0. Default: 100.
	MaxEpochs int
	// Budget, if positive, bounds the wall-clock time of the passes when
	// Epochs is 0: no pass starts after it (the running one finishes).
	Budget time.Duration
	// Grow, with Budget set, lets a one-view learner with random
	// features grow its feature budget past Config.MaxFeatures as long as
	// Budget and the memory bound pay for it (Growth): the model a time
	// limit buys. Off: the budget is Config.MaxFeatures.
	Grow bool
	// Batch is the mini-batch b. Default: 512.
	Batch int
	// YCols: for two-view algorithms, the last YCols columns of each row
	// are y (ksir: 1, the target). Required for them, ignored otherwise.
	YCols int
	// Progress, if set, is called after every batch with the epoch
	// (0-based), the samples learned and the features.
	Progress func(epoch int, samples uint64, features int)
}

// FitReport summarises a Fit.
type FitReport struct {
	Samples  uint64
	Features int
	// Rejected counts batches the divergence guard refused (they lower the
	// step; the fit goes on).
	Rejected int
	// Bandwidth is view x's kernel bandwidth (the median trick's choice
	// unless configured); Eigenvalues the estimates (one-view models).
	Bandwidth   float64
	Eigenvalues []float64
	// Epochs are the passes made; Scores the held-out score after each
	// (Epochs 0 only: KPCA.Score or TwoView.Score on the held-out rows);
	// Stop says why the passes ended.
	Epochs int
	Scores []float64
	Stop   string
}

// Fit learns cfg's model from rows×d values in memory (a bounded data set:
// `streamkpca fit`) by streaming them in mini-batches, the first pass in
// order, later ones shuffled by a shuffle seeded from cfg.Seed, and
// returns the snapshot. It is the streaming learner run over a file, not a
// batch solver: with opt.Epochs set, the result is what the service would
// learn from the same rows in the same order, with one difference for the
// one-view covariance solver: its statistics are the service's, but they
// are solved once, after the last batch (30 applications of the operator
// from its first basis), where the service solves after every batch.
//
// With opt.Epochs 0 (the default) the number of passes is chosen by the
// held-out score, as the service's is by its held-out slice: one row in
// fitHoldout (at most fitHoldoutMax, chosen by a hash of the row's index
// and cfg.Seed) is held out, the others are learned pass after pass, and
// after each pass the served model is scored on the held-out rows
// (KPCA.Score, TwoView.Score). The passes stop when, with the feature
// budget full, the score has not risen by fitTolerance (relative) for
// fitPatience passes, or at
// opt.MaxEpochs, or when opt.Budget has run out; then the held-out rows
// are learned too, so no row is left out. A file too small to hold out
// fitHoldoutMin rows is scored on all its rows (a convergence rule rather
// than a held-out one). A one-view learner with the covariance solver
// (landmark features' default) makes one pass: its statistics then hold
// every row once, and its solve is exact for them.
func Fit(ctx context.Context, cfg Config, x []float64, rows, d int, opt FitOptions) (*snapshot.Snapshot, FitReport, error) {
	if opt.Batch == 0 {
		opt.Batch = 512
	}
	if rows < 1 || d < 1 || len(x) != rows*d || opt.Epochs < 0 || opt.Batch < 0 {
		return nil, FitReport{}, fmt.Errorf("%w: %d values for %d rows of %d, %d epochs, batch %d", ErrInput, len(x), rows, d, opt.Epochs, opt.Batch)
	}
	b := min(opt.Batch, rows)
	fl, err := newFitLearner(cfg, x, d, b, opt)
	if err != nil {
		return nil, FitReport{}, err
	}
	defer fl.close()
	rng := rand.New(rand.NewPCG(cfg.Seed, 7))
	epochs, auto, stop := fitEpochs(opt, fl.onePass())
	rep := FitReport{Stop: stop}
	perm, held := fitSplit(rows, cfg.Seed, auto)
	var score func() (float64, error)
	if auto {
		score = fl.scorer(fitScored(held, perm))
	}
	rule := fitRule{best: math.Inf(-1), budget: opt.Budget, start: time.Now(), epochs: epochs}
	pass := fitPass{fl: fl, b: b, progress: opt.Progress}
	for e := 0; e < epochs; e++ {
		if e > 0 {
			rng.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
		}
		before := fl.features()
		if err := pass.learn(ctx, e, perm); err != nil {
			return nil, FitReport{}, err
		}
		rep.Epochs = e + 1
		if !auto {
			continue
		}
		sc, err := score()
		if err != nil {
			return nil, FitReport{}, err
		}
		rep.Scores = append(rep.Scores, sc)
		if why := rule.after(e, sc, fl.features() != before); why != "" {
			rep.Stop = why
			break
		}
	}
	if err := pass.learn(ctx, rep.Epochs-1, held); err != nil {
		return nil, FitReport{}, err
	}
	if err := fl.finish(); err != nil {
		return nil, FitReport{}, err
	}
	snap, r := fl.result()
	r.Rejected, r.Epochs, r.Scores, r.Stop = pass.rejected, rep.Epochs, rep.Scores, rep.Stop
	return snap, r, nil
}

// fitEpochs is how many passes Fit makes, whether its held-out score
// chooses when to stop (auto, at most that many), and the stop reason
// when it does not.
func fitEpochs(opt FitOptions, onePass bool) (epochs int, auto bool, stop string) {
	switch {
	case opt.Epochs > 0:
		return opt.Epochs, false, "the passes asked for"
	case onePass:
		// Every row is in the statistics once after a pass, and the
		// solve is exact for them: more passes only count rows twice.
		return 1, false, "one pass: the covariance solver's statistics then hold every row"
	case opt.MaxEpochs > 0:
		return opt.MaxEpochs, true, "the passes asked for"
	}
	return fitMaxEpochs, true, "the passes asked for"
}

// fitPass learns rows of Fit's file in mini-batches of b.
type fitPass struct {
	fl       fitLearner
	b        int
	progress func(epoch int, samples uint64, features int)
	rejected int // batches the learner refused as diverged
}

// learn learns the rows idx (indices into the file) in pass e.
func (p *fitPass) learn(ctx context.Context, e int, idx []int) error {
	for s := 0; s < len(idx); s += p.b {
		if err := ctx.Err(); err != nil {
			return err
		}
		err := p.fl.learnRows(idx[s:min(s+p.b, len(idx))])
		if p.progress != nil {
			p.progress(e, p.fl.samples(), p.fl.features())
		}
		if err != nil {
			if errors.Is(err, ErrDiverged) {
				p.rejected++
				continue
			}
			return err
		}
	}
	return nil
}

// fitRule is Fit's stopping rule over the passes' held-out scores.
type fitRule struct {
	best   float64 // the best score, at pass bestAt
	bestAt int
	budget time.Duration
	start  time.Time
	epochs int // the most passes
}

// after takes pass e's score (grew: blocks joined during the pass) and
// says why the passes stop after it ("": they go on).
func (r *fitRule) after(e int, sc float64, grew bool) string {
	// While blocks join, the score is not comparable from pass to pass
	// (the served average holds a young block at less than its share,
	// and a model with few features captures a larger share of their
	// span): the rule counts passes with the budget full.
	if sc > r.best+fitTolerance*math.Abs(r.best) || grew {
		r.best, r.bestAt = sc, e
	}
	switch {
	case e-r.bestAt >= fitPatience:
		return fmt.Sprintf("the held-out score rose by less than %g%% in %d passes", 100*fitTolerance, fitPatience)
	case r.budget > 0 && time.Since(r.start) >= r.budget:
		return fmt.Sprintf("the time budget (%s)", r.budget)
	case e == r.epochs-1:
		return fmt.Sprintf("the most passes (%d)", r.epochs)
	}
	return ""
}

// fitLearner is what Fit asks of a one-view or a two-view learner over
// the rows of a file.
type fitLearner interface {
	// learnRows learns the file's rows idx (at most a batch) as a batch.
	learnRows(idx []int) error
	// scorer returns the served model's score of the rows idx
	// (KPCA.Score, TwoView.Score).
	scorer(idx []int) func() (float64, error)
	features() int
	samples() uint64
	// onePass: the learner's statistics hold every row after a pass and
	// its solve is exact for them (the one-view covariance solver).
	onePass() bool
	// finish ends the passes: a learner that solves once solves.
	finish() error
	result() (*snapshot.Snapshot, FitReport)
	close()
}

// newFitLearner makes cfg's learner for rows of d values (two-view: the
// last opt.YCols are y) in batches of at most b.
func newFitLearner(cfg Config, x []float64, d, b int, opt FitOptions) (fitLearner, error) {
	if cfg.Algorithm.TwoView() {
		yc := opt.YCols
		if yc < 1 || yc >= d {
			return nil, fmt.Errorf("%w: %s needs the y columns (1 ≤ N < %d): the last N columns of each row are y", ErrConfig, cfg.Algorithm, d)
		}
		l, err := NewTwoView(cfg)
		if err != nil {
			return nil, err
		}
		dx := d - yc
		return &fitTwoView{l: l, x: x, d: d, yc: yc, bx: make([]float64, b*dx), by: make([]float64, b*yc)}, nil
	}
	l, err := New(cfg)
	if err != nil {
		return nil, err
	}
	f := &fitOneView{l: l, x: x, d: d, batch: make([]float64, b*d)}
	if opt.Grow && opt.Budget > 0 {
		f.grow = &Growth{Limit: opt.Budget}
	}
	// One pass, then the model: the statistics are solved once, after
	// the last batch, not after each (see KPCA.lazy).
	l.lazy = f.onePass()
	return f, nil
}

// fitOneView is Fit's one-view learner.
type fitOneView struct {
	l     *KPCA
	x     []float64
	d     int
	batch []float64
	grow  *Growth // nil: the feature budget is Config.MaxFeatures
}

func (f *fitOneView) learnRows(idx []int) error {
	d := f.d
	for r, p := range idx {
		copy(f.batch[r*d:r*d+d], f.x[p*d:p*d+d])
	}
	n := len(idx)
	t0 := time.Now()
	err := f.l.Update(f.batch[:n*d], n)
	if f.grow != nil {
		f.grow.Step(f.l, time.Since(t0))
	}
	return err
}

func (f *fitOneView) scorer(idx []int) func() (float64, error) {
	d, n := f.d, len(idx)
	hx := make([]float64, 0, n*d)
	for _, i := range idx {
		hx = append(hx, f.x[i*d:i*d+d]...)
	}
	return func() (float64, error) { return f.l.Score(hx, n) }
}

func (f *fitOneView) features() int   { return f.l.Features() }
func (f *fitOneView) samples() uint64 { return f.l.SamplesSeen() }
func (f *fitOneView) onePass() bool   { return f.l.Config().Solver == SolverCovariance }
func (f *fitOneView) close()          { f.l.Close() }

func (f *fitOneView) finish() error {
	l := f.l
	if !l.lazy || len(l.seeds) == 0 {
		return nil
	}
	// Every batch may have become a landmark block, leaving no
	// covariance step to make the statistics (a file of exactly one
	// block's rows): make them from the blocks.
	l.ensureCov()
	return l.solveCov()
}

func (f *fitOneView) result() (*snapshot.Snapshot, FitReport) {
	eig, _ := f.l.Eigenvalues()
	return f.l.Snapshot(), FitReport{Samples: f.l.SamplesSeen(), Features: f.l.Features(), Bandwidth: f.l.Kernel().Bandwidth, Eigenvalues: eig}
}

// fitTwoView is Fit's two-view learner: a row's last yc values are y.
type fitTwoView struct {
	l      *TwoView
	x      []float64
	d, yc  int
	bx, by []float64
}

func (f *fitTwoView) learnRows(idx []int) error {
	d, yc := f.d, f.yc
	dx := d - yc
	for r, p := range idx {
		row := f.x[p*d : p*d+d]
		copy(f.bx[r*dx:(r+1)*dx], row[:dx])
		copy(f.by[r*yc:(r+1)*yc], row[dx:])
	}
	n := len(idx)
	return f.l.Update(f.bx[:n*dx], f.by[:n*yc], n)
}

func (f *fitTwoView) scorer(idx []int) func() (float64, error) {
	d, yc, n := f.d, f.yc, len(idx)
	dx := d - yc
	hx, hy := make([]float64, 0, n*dx), make([]float64, 0, n*yc)
	for _, i := range idx {
		hx = append(hx, f.x[i*d:i*d+dx]...)
		hy = append(hy, f.x[i*d+dx:i*d+d]...)
	}
	return func() (float64, error) { return f.l.Score(hx, hy, n) }
}

func (f *fitTwoView) features() int   { return f.l.Features() }
func (f *fitTwoView) samples() uint64 { return f.l.SamplesSeen() }
func (f *fitTwoView) onePass() bool   { return false }
func (f *fitTwoView) finish() error   { return nil }
func (f *fitTwoView) close()          { f.l.Close() }

func (f *fitTwoView) result() (*snapshot.Snapshot, FitReport) {
	return f.l.Snapshot(), FitReport{Samples: f.l.SamplesSeen(), Features: f.l.Features(), Bandwidth: f.l.v[0].fm.Kernel.Bandwidth}
}

// fit's stopping rule (see Fit).
const (
	fitHoldout    = 10   // one row in fitHoldout is held out
	fitHoldoutMin = 32   // fewer held-out rows: score on all rows
	fitHoldoutMax = 4096 // at most this many held out
	fitMaxEpochs  = 100
	fitTolerance  = 1e-3
	fitPatience   = 2
)

// fitSplit returns the rows learned pass after pass, in order, and the
// held-out ones (none unless auto; see Fit).
func fitSplit(rows int, seed uint64, auto bool) (learn, held []int) {
	learn = make([]int, 0, rows)
	for i := range rows {
		if auto && len(held) < fitHoldoutMax && splitmix.Mix(seed^uint64(i))%fitHoldout == 0 {
			held = append(held, i)
			continue
		}
		learn = append(learn, i)
	}
	if len(held) < fitHoldoutMin {
		learn, held = learn[:0], held[:0]
		for i := range rows {
			learn = append(learn, i)
		}
	}
	return learn, held
}

// fitScored returns the rows scored after each pass: the held-out ones,
// or, with none, up to fitHoldoutMax of the learned rows spread over the
// file.
func fitScored(held, learned []int) []int {
	if len(held) > 0 {
		return held
	}
	var idx []int
	step := max(1, len(learned)/fitHoldoutMax)
	for i := 0; i < len(learned); i += step {
		idx = append(idx, learned[i])
	}
	return idx
}

// FitFeatures is fit's feature source for a file of rows rows when the
// user chose none: landmark blocks for kpca and gha (streaming Nyström
// with the covariance solver: after one pass its statistics hold every
// row), with a budget of √n·ln n landmarks rounded up to whole blocks,
// at least one block and at most the rows and the default budget; the
// same for kcca with twice the count (below); "" (random features, the
// streaming learner's default) for ksvd and ksir and for a file of fewer
// rows than a landmark block.
//
// Why √n·ln n: Nyström kernel PCA with m uniformly drawn landmarks
// matches the statistical accuracy of exact kernel PCA of the n rows
// once m grows like √n·log n (Sterge, Sriperumbudur, Rosasco & Rudi,
// AISTATS 2020; Sterge & Sriperumbudur, JMLR 2022), while its cost,
// n·m² for the statistics, grows past exact kernel PCA's as m nears n.
// Measured on 4,490 MNIST images pooled to 7×7, k = 10 (`streamkpca
// bench fit`): 512 landmarks 1.8e-5 against exact kernel PCA of the same
// rows, 1,024 (the rule's) 1.1e-6 in about exact kernel PCA's time, 2,048
// (the former default) 1.4e-7 in 2.3 times it.
//
// kcca (the covariance solver, its default) takes landmark blocks too,
// twice the rule's count a view: its canonical directions must be in the
// span of both views' landmarks, and on MNIST halves (8,000 pairs, k =
// 50, `streamkpca bench mnist --task kcca`) 1,024 landmarks a view (the
// rule's) gave S50 39.86 and 2,048 gave 40.56 after one pass, 40.93
// after three, where the random features fit took before (4,096 a view,
// what 120 s and 1 GiB paid for) gave 39.55. ksvd and ksir, whose
// default is the paper's rule, keep random features.
func FitFeatures(alg Algorithm, rows int) (FeatureSource, int) {
	b := DefaultCovarianceBlockSize
	if (alg.TwoView() && alg != AlgKCCA) || rows < b {
		return "", 0
	}
	n := float64(rows)
	rule := math.Sqrt(n) * math.Log(n)
	if alg == AlgKCCA {
		rule *= 2
	}
	m := int(math.Ceil(rule/float64(b))) * b
	return FeaturesLandmarks, max(b, min(m, rows-rows%b, DefaultCovarianceMaxFeatures))
}
