package pipeline

import (
	"github.com/streamkpca/streamkpca/features"
	"github.com/streamkpca/streamkpca/online"
	"github.com/streamkpca/streamkpca/snapshot"
)

// learner is what the loop needs of online.KPCA and online.TwoView.
type learner interface {
	update(x, y []float64, rows int) error
	snapshot() *snapshot.Snapshot
	samplesSeen() uint64
	step() uint64
	features() int
	// dims returns the input dimensions of x and y (y = 0: one view), 0
	// before the first batch.
	dims() (int, int)
	twoView() bool
	checkInput(x, y []float64) error
	bandwidth() float64
	// generated is the learner's generated feature blocks, which the
	// served model shares (snapshot.ModelOptions.Shared).
	generated() []features.Generated
	// assess scores the served model on held-out rows before they are
	// learned and reports a detected change of the stream (see
	// online.KPCA.Assess); quality is the score so far (nil: none).
	assess(x, y []float64, rows int) (bool, error)
	quality() *snapshot.Quality
	// following counts the challengers that replaced the model and the
	// candidates withdrawn without replacing it (learner.forget: follow;
	// 0 where there are none; a two-view model withdraws none).
	following() (switches, rollbacks uint64)
	// challengesOnChange: a detected change starts a challenger rather
	// than restarting the model (two views, learner.forget: follow).
	challengesOnChange() bool
	// holdGrowth stops or resumes adding feature blocks (load shedding).
	holdGrowth(hold bool)
	// budget is the feature budget; raiseBudget raises it by a block
	// unless the model's coefficients would pass maxBytes (about 32·k
	// bytes a feature) or the learner cannot grow (learner.budget:
	// stream), reporting the budget and whether it rose.
	budget() int
	raiseBudget(maxBytes int64, rows int) (int, bool)
	close()
}

type oneView struct{ l *online.KPCA }

// revisiter is a learner that can learn rows it has learned before as
// one more step of the model alone (online.KPCA.Revisit): the loop's
// replay (loop.go, online.Window). A cluster member's learner is not
// one: a group's step is the group's.
type revisiter interface {
	revisit(x, y []float64, rows int) error
}

func (o oneView) revisit(x, _ []float64, rows int) error  { return o.l.Revisit(x, rows) }
func (t twoViews) revisit(x, y []float64, rows int) error { return t.l.Revisit(x, y, rows) }

// batchFeatures is a learner that shows each step's features to f
// (online.KPCA.SetBatchHook; nil removes it): the output edge scores the
// batch from them.
type batchFeatures interface {
	setBatchHook(f func(rows int, seeds []uint64, kept func(j int) []float64))
}

func (o oneView) setBatchHook(f func(rows int, seeds []uint64, kept func(j int) []float64)) {
	o.l.SetBatchHook(f)
}

func (o oneView) update(x, _ []float64, rows int) error { return o.l.Update(x, rows) }
func (o oneView) snapshot() *snapshot.Snapshot          { return o.l.Snapshot() }
func (o oneView) samplesSeen() uint64                   { return o.l.SamplesSeen() }
func (o oneView) step() uint64                          { return o.l.Step() }
func (o oneView) features() int                         { return o.l.Features() }
func (o oneView) dims() (int, int)                      { return o.l.Dim(), 0 }
func (o oneView) twoView() bool                         { return false }
func (o oneView) checkInput(x, _ []float64) error       { return o.l.CheckInput(x) }
func (o oneView) bandwidth() float64                    { return o.l.Kernel().Bandwidth }
func (o oneView) close()                                { o.l.Close() }
func (o oneView) generated() []features.Generated       { return o.l.Generated() }
func (o oneView) assess(x, _ []float64, rows int) (bool, error) {
	return o.l.Assess(x, rows)
}
func (o oneView) quality() *snapshot.Quality  { return o.l.Quality() }
func (o oneView) following() (uint64, uint64) { return o.l.Switches(), o.l.Rollbacks() }
func (o oneView) challengesOnChange() bool    { return false }
func (o oneView) holdGrowth(hold bool)        { o.l.HoldGrowth(hold) }
func (o oneView) budget() int                 { return o.l.MaxFeatures() }
func (o oneView) raiseBudget(maxBytes int64, rows int) (int, bool) {
	n := o.l.MaxFeatures()
	next, ok := nextBudget(o.l, maxBytes, rows)
	if !ok {
		return n, false
	}
	got := o.l.RaiseBudget(next)
	return got, got > n
}

// nextBudget is l's budget a block larger, and whether what the learner
// holds there on batches of rows rows (its coefficients and their
// working copies, the batch's kept features, the cached blocks:
// online.KPCA.MemoryBytes) and the copies of its coefficients the
// service keeps (serviceCopies) stay within maxBytes.
func nextBudget(l *online.KPCA, maxBytes int64, rows int) (int, bool) {
	next := l.MaxFeatures() + l.Config().BlockSize
	return next, l.MemoryBytes(next, rows)+serviceCopies*online.ModelBytes(next, l.Columns()) <= maxBytes
}

type twoViews struct{ l *online.TwoView }

func (t twoViews) update(x, y []float64, rows int) error { return t.l.Update(x, y, rows) }
func (t twoViews) snapshot() *snapshot.Snapshot          { return t.l.Snapshot() }
func (t twoViews) samplesSeen() uint64                   { return t.l.SamplesSeen() }
func (t twoViews) step() uint64                          { return t.l.Step() }
func (t twoViews) features() int                         { return t.l.Features() }
func (t twoViews) dims() (int, int) {
	if t.l.Step() == 0 {
		return 0, 0
	}
	return t.l.Dims()
}
func (t twoViews) twoView() bool      { return true }
func (t twoViews) bandwidth() float64 { return 0 }
func (t twoViews) close()             { t.l.Close() }
func (t twoViews) generated() []features.Generated {
	return t.l.Generated()
}
func (t twoViews) assess(x, y []float64, rows int) (bool, error) {
	return t.l.Assess(x, y, rows)
}
func (t twoViews) quality() *snapshot.Quality  { return t.l.Quality() }
func (t twoViews) following() (uint64, uint64) { return t.l.Switches(), t.l.Rollbacks() }
func (t twoViews) challengesOnChange() bool    { return t.l.ChallengesOnChange() }
func (t twoViews) holdGrowth(hold bool)        { t.l.HoldGrowth(hold) }

// The two-view learners keep their budget (learner.budget: stream grows
// kpca and gha only).
func (t twoViews) budget() int                        { return t.l.Config().MaxFeatures }
func (t twoViews) raiseBudget(int64, int) (int, bool) { return t.budget(), false }
func (t twoViews) checkInput(x, y []float64) error {
	c := t.l.Config()
	if err := c.Kernel.CheckInput(x); err != nil {
		return err
	}
	if !c.Algorithm.TargetY() {
		return c.KernelY.CheckInput(y)
	}
	return nil
}

// newLearner builds the learner for cfg, or restores it from snap.
func newLearner(cfg online.Config, snap *snapshot.Snapshot) (learner, error) {
	if snap != nil {
		if online.Algorithm(snap.Header.Algorithm).TwoView() {
			l, err := online.RestoreTwoView(snap, cfg)
			return twoViews{l}, err
		}
		l, err := online.Restore(snap, cfg)
		return oneView{l}, err
	}
	if cfg.Algorithm.TwoView() {
		l, err := online.NewTwoView(cfg)
		if err != nil {
			return nil, err
		}
		return twoViews{l}, nil
	}
	l, err := online.New(cfg)
	if err != nil {
		return nil, err
	}
	return oneView{l}, nil
}

// shape is the learner as admission sees it (ingest.Shape): whichever
// learner the pipeline has now (a cluster member's is replaced).
type shape struct{ p *Pipeline }

func (s shape) Dims() (int, int)                { return s.p.learner.dims() }
func (s shape) TwoView() bool                   { return s.p.learner.twoView() }
func (s shape) CheckInput(x, y []float64) error { return s.p.learner.checkInput(x, y) }
