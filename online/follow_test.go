package online

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/streamkpca/streamkpca/features"
	"github.com/streamkpca/streamkpca/internal/synth"
	"github.com/streamkpca/streamkpca/snapshot"
)

// TestSubspaceFitClosedForm: FitScore's figure against closed forms. For
// K = diag(4, 3, 2, 1) the top-2 eigenvectors score 1; the span of e₁ and
// e₃ captures μ = (4, 2) of λ = (4, 3): √(2/3); and on a random kernel
// matrix its top-k eigenvectors score 1 and a random subspace less.
func TestSubspaceFitClosedForm(t *testing.T) {
	km := mat.NewSymDense(4, []float64{4, 0, 0, 0, 0, 3, 0, 0, 0, 0, 2, 0, 0, 0, 0, 1})
	e := func(cols ...int) *mat.Dense {
		v := mat.NewDense(4, len(cols), nil)
		for j, c := range cols {
			v.Set(c, j, 2) // any scale: the score sees the span
		}
		return v
	}
	if got := subspaceFit(km, e(0, 1)); math.Abs(got-1) > 1e-12 {
		t.Errorf("top-2 eigenvectors: %v, want 1", got)
	}
	if got, want := subspaceFit(km, e(0, 2)), math.Sqrt(2.0/3); math.Abs(got-want) > 1e-12 {
		t.Errorf("span(e1, e3): %v, want √(2/3) = %v", got, want)
	}
	if got := subspaceFit(km, mat.NewDense(4, 2, []float64{1, 2, 1, 2, 1, 2, 1, 2})); !math.IsNaN(got) {
		t.Errorf("dependent columns: %v, want NaN", got)
	}
	rng := rand.New(rand.NewPCG(3, 3))
	const n, k = 40, 5
	g := mat.NewDense(n, n, nil)
	for i := range n {
		for j := range n {
			g.Set(i, j, rng.NormFloat64())
		}
	}
	var a mat.Dense
	a.Mul(g, g.T())
	ks := mat.NewSymDense(n, a.RawMatrix().Data)
	var es mat.EigenSym
	if !es.Factorize(ks, true) {
		t.Fatal("eigendecomposition failed")
	}
	var vecs mat.Dense
	es.VectorsTo(&vecs)
	top := mat.DenseCopyOf(vecs.Slice(0, n, n-k, n))
	if got := subspaceFit(ks, top); math.Abs(got-1) > 1e-9 {
		t.Errorf("a random matrix's top-%d eigenvectors: %v, want 1", k, got)
	}
	r := mat.NewDense(n, k, nil)
	for i := range n {
		for j := range k {
			r.Set(i, j, rng.NormFloat64())
		}
	}
	if got := subspaceFit(ks, r); !(got > 0 && got < 0.9) {
		t.Errorf("a random subspace: %v, want well inside (0, 1)", got)
	}
}

// staleAndFresh returns two learners of cfg, closed when the test ends:
// one to go on learning through a change, one to start at it.
func staleAndFresh(t *testing.T, cfg Config) (stale, fresh *KPCA) {
	t.Helper()
	stale, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stale.Close)
	fresh, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fresh.Close)
	return stale, fresh
}

// TestFitScoreRanksFreshAboveStale: 16-D hermite whose axes are reversed
// after 60 batches (the top eigenfunctions move to other axes). Twelve
// batches later a model that kept learning (Forget off) is far from the
// closed-form eigenfunctions of the new stream and a learner started at
// the change is close (checked against the closed form); FitScore on
// held-out points of the new stream ranks the fresh one above the stale
// one.
func TestFitScoreRanksFreshAboveStale(t *testing.T) {
	h := synth.Hermite16()
	const d, b, k, before, after = 16, 512, 5, 60, 12
	stale, fresh := staleAndFresh(t, Config{K: k, Oversample: -1, Theta0: 1, BlockSize: 256, MaxFeatures: 4096, Kernel: features.Kernel{Family: features.Gaussian, Bandwidth: h.L}, Workers: 1, Forget: ForgetOff})
	rng := rand.New(rand.NewPCG(5, 5))
	reverse := func(x []float64) {
		for r := 0; r < len(x); r += d {
			for i, j := r, r+d-1; i < j; i, j = i+1, j-1 {
				x[i], x[j] = x[j], x[i]
			}
		}
	}
	x := make([]float64, b*d)
	for step := range before + after {
		h.Sample(x, rng)
		if step >= before {
			reverse(x)
			if err := fresh.Update(x, b); err != nil {
				t.Fatal(err)
			}
		}
		if err := stale.Update(x, b); err != nil {
			t.Fatal(err)
		}
	}
	const held = 1000
	xh := make([]float64, held*d)
	h.Sample(xh, rng)
	truth := h.Eigenfunctions(xh, held, k) // of the stream before the reversal, at the unreversed points
	reverse(xh)
	errOf := func(l *KPCA) float64 {
		out := make([]float64, held*k)
		l.EvalTo(out, xh, held)
		return synth.SubspaceError(mat.NewDense(held, k, out), truth)
	}
	es, ef := errOf(stale), errOf(fresh)
	if !(es > 0.5 && ef < 0.2) {
		t.Fatalf("subspace errors against the closed form: stale %.3g, fresh %.3g; the test needs a stale model far off and a fresh one close", es, ef)
	}
	fs, _ := stale.FitScore(xh[:256*d], 256)
	ff, _ := fresh.FitScore(xh[:256*d], 256)
	if !(ff > fs) {
		t.Errorf("FitScore: stale %.4f (error %.3g), fresh %.4f (error %.3g); want the fresh model higher", fs, es, ff, ef)
	}
	t.Logf("stale: error %.3g, fit %.4f; fresh: error %.3g, fit %.4f", es, fs, ef, ff)
}

// TestInitBlockTopKMatchesExact: the challenger's subspace-iteration start
// against the full eigendecomposition (initBlock) of a block's feature
// covariance with decaying directions: the same top-k eigenvalues and
// directions.
func TestInitBlockTopKMatchesExact(t *testing.T) {
	const rows, nb, k = 512, 256, 5
	rng := rand.New(rand.NewPCG(9, 9))
	phi := make([]float64, rows*nb)
	for i := range rows {
		for j := range nb {
			phi[i*nb+j] = rng.NormFloat64() * math.Pow(0.9, float64(j))
		}
	}
	exact, ev, err := initBlock(append([]float64(nil), phi...), rows, nb, k, false, false)
	if err != nil {
		t.Fatal(err)
	}
	quick, qv, err := initBlockTopK(append([]float64(nil), phi...), rows, nb, k, false, false)
	if err != nil {
		t.Fatal(err)
	}
	for j := range k {
		if math.Abs(qv[j]-ev[j]) > 1e-6*ev[0] {
			t.Errorf("eigenvalue %d: %.10g, exact %.10g", j, qv[j], ev[j])
		}
	}
	if e := synth.SubspaceError(mat.NewDense(nb, k, quick), mat.NewDense(nb, k, exact)); e > 1e-6 {
		t.Errorf("subspace error of the quick start against the exact one: %.3g", e)
	}
}

// followStream is a 4-D Gaussian stream (scales 1.6, 1.0, 0.6, 0.3) whose
// points come, with probability share(step), from the same distribution
// with its axes reversed: the top eigenfunctions move to other axes.
type followStream struct {
	h     synth.Hermite
	rng   *rand.Rand
	share func(step int) float64
}

func newFollowStream(seed uint64, share func(int) float64) *followStream {
	return &followStream{h: synth.Hermite{S: []float64{1.6, 1.0, 0.6, 0.3}, L: 1.5}, rng: rand.New(rand.NewPCG(seed, seed)), share: share}
}

func (s *followStream) batch(x []float64, rows, step int) {
	s.h.Sample(x, s.rng)
	p := s.share(step)
	for r := range rows {
		if p >= 1 || (p > 0 && s.rng.Float64() < p) {
			slices.Reverse(x[r*4 : r*4+4])
		}
	}
}

// errAfter is the subspace error of l against the closed-form
// eigenfunctions of the reversed stream, on 1,000 fresh points.
func (s *followStream) errAfter(l *KPCA, k int) float64 {
	const n = 1000
	x := make([]float64, n*4)
	s.h.Sample(x, rand.New(rand.NewPCG(77, 77)))
	truth := s.h.Eigenfunctions(x, n, k)
	for r := range n {
		slices.Reverse(x[r*4 : r*4+4])
	}
	out := make([]float64, n*k)
	l.EvalTo(out, x, n)
	return synth.SubspaceError(mat.NewDense(n, k, out), truth)
}

// runFollow streams steps batches of 512 (one point in 16 assessed
// before it is learned, as the service does) into a learner of forget
// and, from step fresh on (if ≥ 0), into a learner started then; raise,
// if set, is called before every step (a budget that grows).
func runFollow(t *testing.T, s *followStream, forget Forgetting, steps, fresh int, raise func(l *KPCA)) (l, f *KPCA) {
	t.Helper()
	// No oversampling: these streams and thresholds were set for a
	// learner of k columns (the group's test, TestGroupFollowsAGradualChange,
	// and bench drift follow with the default).
	cfg := Config{K: 3, Oversample: -1, Theta0: 1, BlockSize: 128, MaxFeatures: 2048, Kernel: features.Kernel{Family: features.Gaussian, Bandwidth: s.h.L}, Workers: 1, Forget: forget}
	l, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	const b = 512
	x := make([]float64, b*4)
	for step := range steps {
		s.batch(x, b, step)
		if step == fresh {
			fc := cfg
			fc.Forget = ForgetDetect
			if f, err = New(fc); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(f.Close)
		}
		if raise != nil {
			raise(l)
		}
		followStep(t, l, x, b, step)
		if f != nil {
			if err := f.Update(x, b); err != nil {
				t.Fatal(err)
			}
		}
	}
	return l, f
}

// followStep is one step of the service on the 4-D follow stream: the
// batch's held-out rows (one in 16) assessed, then the batch learned.
func followStep(t *testing.T, l *KPCA, x []float64, b, step int) {
	t.Helper()
	var held []float64
	for r := range b {
		if HeldOut(uint64(step*b+r), 16) {
			held = append(held, x[r*4:r*4+4]...)
		}
	}
	if _, err := l.Assess(held, len(held)/4); err != nil {
		t.Fatal(err)
	}
	if err := l.Update(x, b); err != nil {
		t.Fatal(err)
	}
}

// TestFollowerSurvivesARestart: a learner restored from a snapshot taken
// while its challenger is winning (one window won, a window half full)
// goes on as the learner that was never stopped: the same switches at
// the same steps, the same coefficients bit for bit. Before the
// challenger was in snapshots (format v4), a restored learner started a
// new challenger and the ramp's switch came later, or not at all.
func TestFollowerSurvivesARestart(t *testing.T) {
	t.Parallel() // CPU-bound on one worker: beside the package's other long tests (quick tier ≤ 2 minutes)
	ramp := func(step int) float64 { return min(1, max(0, float64(step-60)/200)) }
	const steps, b = 290, 512
	cfg := Config{K: 3, BlockSize: 128, MaxFeatures: 2048, Kernel: features.Kernel{Family: features.Gaussian, Bandwidth: 1.5}, Workers: 1, Forget: ForgetFollow}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	s := newFollowStream(1, ramp)
	var batches [][]float64
	restartAt, switchesAt := -1, []int(nil)
	for step := range steps {
		x := make([]float64, b*4)
		s.batch(x, b, step)
		batches = append(batches, x)
		before := a.Switches()
		followStep(t, a, x, b, step)
		if a.Switches() > before {
			switchesAt = append(switchesAt, step)
		}
		if restartAt < 0 && a.fol.ch != nil && a.fol.test.rows > 0 && a.fol.test.logEvidence() > 1 {
			restartAt = step + 1
		}
	}
	if restartAt < 0 || len(switchesAt) == 0 || switchesAt[0] < restartAt {
		t.Fatalf("the uninterrupted learner: first won window before step %d, switches at %v: the test needs a restart while a challenger is winning", restartAt, switchesAt)
	}
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for step, x := range batches[:restartAt] {
		followStep(t, r, x, b, step)
	}
	data, err := r.Snapshot().MarshalBinary()
	r.Close()
	if err != nil {
		t.Fatal(err)
	}
	var snap snapshot.Snapshot
	if err := snap.UnmarshalBinary(data); err != nil {
		t.Fatal(err)
	}
	if snap.Header.Challenger == nil {
		t.Fatal("a snapshot taken while a challenger is winning holds no challenger")
	}
	if snap.Served().Header.Challenger != nil {
		t.Error("the served copy of a model carries its challenger")
	}
	r, err = Restore(&snap, Config{Workers: 1, Forget: ForgetFollow})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var rSwitches []int
	for step := restartAt; step < steps; step++ {
		before := r.Switches()
		followStep(t, r, batches[step], b, step)
		if r.Switches() > before {
			rSwitches = append(rSwitches, step)
		}
	}
	t.Logf("restarted at step %d (a challenger %d steps old, test %d of the model's life, evidence e^%.2f); switches at %v, restored learner's after the restart at %v", restartAt, snap.Header.Challenger.Model.Step, snap.Header.Challenger.Tests, evidenceOf(snap.Header.Challenger.Test), switchesAt, rSwitches)
	if !slices.Equal(rSwitches, switchesAt) {
		t.Errorf("the restored learner switched at steps %v, the uninterrupted one at %v", rSwitches, switchesAt)
	}
	ca, cr := a.Snapshot().Coef[0], r.Snapshot().Coef[0]
	if !slices.Equal(ca, cr) {
		t.Errorf("coefficients differ after the run (%d and %d values): the restored learner did not go on as the uninterrupted one", len(ca), len(cr))
	}
}

// TestFollowGradualChange: the share of the reversed stream rises from 0
// to 1 over 200 batches after 60. Thirty batches after the ramp's end the
// default learner (follow) is within 2× of a learner started at the
// ramp's end, against the closed form, having replaced its model with a
// challenger; with forget detect (the level detector alone) it is far
// off. The switches are kept in the snapshot and restored.
func TestFollowGradualChange(t *testing.T) {
	t.Parallel() // CPU-bound on one worker: beside the package's other long tests (quick tier ≤ 2 minutes)
	ramp := func(step int) float64 { return min(1, max(0, float64(step-60)/200)) }
	const steps, end = 290, 260
	fol, fresh := runFollow(t, newFollowStream(1, ramp), ForgetFollow, steps, end, nil)
	det, _ := runFollow(t, newFollowStream(1, ramp), ForgetDetect, steps, -1, nil)
	s := newFollowStream(1, ramp)
	ef, er, ed := s.errAfter(fol, 3), s.errAfter(fresh, 3), s.errAfter(det, 3)
	t.Logf("30 batches after the ramp: follow %.3g (%d switches), fresh %.3g, detect %.3g (%d changes)", ef, fol.Switches(), er, ed, det.Changes())
	if fol.Switches() == 0 || ef > 2*er+1e-3 {
		t.Errorf("follow: error %.3g after %d switches; want a switch and within 2× of the fresh learner's %.3g", ef, fol.Switches(), er)
	}
	if ed < 3*er {
		t.Errorf("detect alone: error %.3g, the fresh learner %.3g: the test needs a change the level detector does not follow", ed, er)
	}
	snap := fol.Snapshot()
	if snap.Header.Diagnostics.Switches != fol.Switches() {
		t.Errorf("snapshot switches %d, learner %d", snap.Header.Diagnostics.Switches, fol.Switches())
	}
	r, err := Restore(snap, Config{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Switches() != fol.Switches() || r.Step() != steps {
		t.Errorf("restored: switches %d, step %d; want %d, %d", r.Switches(), r.Step(), fol.Switches(), steps)
	}
}

// TestFollowStationaryNoSwitch: 300 batches of one distribution: the
// challengers (restarted every followLife batches) never win.
func TestFollowStationaryNoSwitch(t *testing.T) {
	t.Parallel() // CPU-bound on one worker: beside the package's other long tests (quick tier ≤ 2 minutes)
	l, _ := runFollow(t, newFollowStream(2, func(int) float64 { return 0 }), ForgetFollow, 300, -1, nil)
	if l.Switches() != 0 || l.Changes() != 0 {
		t.Errorf("a stationary stream: %d switches, %d changes; want none", l.Switches(), l.Changes())
	}
}

// TestFollowYoungAndGrowingModels: an abrupt change at batch 50, where
// the level detector is not yet armed (it waits for a full budget and
// monitorArmAge batches), and the same with a budget raised every batch
// (learner.budget: stream disarms it after each raise): the challenger
// finds both, and the model ends within 2× of a learner started at the
// change.
func TestFollowYoungAndGrowingModels(t *testing.T) {
	t.Parallel() // CPU-bound on one worker: beside the package's other long tests (quick tier ≤ 2 minutes)
	sw := func(step int) float64 {
		if step >= 50 {
			return 1
		}
		return 0
	}
	for _, c := range []struct {
		name  string
		raise func(l *KPCA)
	}{
		{"young", nil},
		{"growing", func(l *KPCA) { l.RaiseBudget(l.MaxFeatures() + 128) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			l, fresh := runFollow(t, newFollowStream(3, sw), ForgetFollow, 110, 50, c.raise)
			s := newFollowStream(3, sw)
			e, ef := s.errAfter(l, 3), s.errAfter(fresh, 3)
			if l.Switches()+l.Changes() == 0 || e > 2*ef+1e-3 {
				t.Errorf("60 batches after a change at batch 50: %d switches, %d changes, error %.3g; a learner started at the change %.3g", l.Switches(), l.Changes(), e, ef)
			}
			t.Logf("switches %d, changes %d, error %.3g (fresh %.3g)", l.Switches(), l.Changes(), e, ef)
		})
	}
}

// evidenceOf is the log-evidence of a stored test.
func evidenceOf(v []float64) float64 {
	b := restoreBetting(v)
	return b.logEvidence()
}

// TestFollowScoresOnlyUnlearnedRows: every row following's test bets on
// is a held-out row of the Assess call that scores it, before Update
// learns it: the test's row count grows within an Assess call by at most
// that call's rows, and not at all in Update. The margin rule this
// replaced kept each window's raw rows and scored all 128 when the
// window filled, three batches after both learners had learned the
// first of them (its window grew by 26 rows a call and was scored 128 at
// once).
func TestFollowScoresOnlyUnlearnedRows(t *testing.T) {
	s := newFollowStream(4, func(step int) float64 { return min(1, max(0, float64(step-20)/40)) })
	cfg := Config{K: 3, BlockSize: 128, MaxFeatures: 2048, Kernel: features.Kernel{Family: features.Gaussian, Bandwidth: s.h.L}, Workers: 1, Forget: ForgetFollow}
	l, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const b = 512
	x := make([]float64, b*4)
	var bets int
	for step := range 120 {
		s.batch(x, b, step)
		var held []float64
		for r := range b {
			if HeldOut(uint64(step*b+r), 16) {
				held = append(held, x[r*4:r*4+4]...)
			}
		}
		before := l.fol.test.rows
		if _, err := l.Assess(held, len(held)/4); err != nil {
			t.Fatal(err)
		}
		after := l.fol.test.rows
		if after > before && after-before > len(held)/4 {
			t.Fatalf("step %d: the test bet on %d rows in an Assess of %d", step, after-before, len(held)/4)
		}
		bets += max(after-before, 0)
		if err := l.Update(x, b); err != nil {
			t.Fatal(err)
		}
		if l.fol.test.rows > after {
			t.Fatalf("step %d: the test bet on %d rows in Update, which learns them", step, l.fol.test.rows-after)
		}
	}
	if bets == 0 {
		t.Fatal("the test bet on no row: the check above checked nothing")
	}
	t.Logf("%d held-out rows bet on, each in the Assess call that brought it", bets)
}

// TestFollowComparesLargeK: with k ≥ 128 the scouts are compared (the
// margin rule's 128-row window could not score k ≥ 128 functions, and
// its challenger cost CPU every batch for nothing): the test bets on
// held-out rows, its reference set holds 2k rows.
func TestFollowComparesLargeK(t *testing.T) {
	t.Parallel() // CPU-bound on one worker: beside the package's other long tests (quick tier ≤ 2 minutes)
	const d, k, b = 8, 128, 512
	cfg := Config{K: k, BlockSize: 256, MaxFeatures: 2048, Kernel: features.Kernel{Family: features.Gaussian, Bandwidth: 2}, Workers: 1, Forget: ForgetFollow}
	l, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rng := rand.New(rand.NewPCG(6, 6))
	x := make([]float64, b*d)
	for step := range 24 {
		for i := range x {
			x[i] = rng.NormFloat64()
		}
		var held []float64
		for r := range b {
			if HeldOut(uint64(step*b+r), 8) {
				held = append(held, x[r*d:r*d+d]...)
			}
		}
		if _, err := l.Assess(held, len(held)/d); err != nil {
			t.Fatal(err)
		}
		if err := l.Update(x, b); err != nil {
			t.Fatal(err)
		}
	}
	if l.fol.ref.m != refRows(k) || l.fol.test.rows == 0 {
		t.Errorf("k = %d: reference set of %d rows (want %d), %d rows bet on (want some)", k, l.fol.ref.m, refRows(k), l.fol.test.rows)
	}
	model, ch := l.FitScores()
	t.Logf("k = %d: %d rows bet on; shares: shadow %.3f, challenger %.3f", k, l.fol.test.rows, model, ch)
}
