package online

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/streamkpca/streamkpca/features"
	"gonum.org/v1/gonum/mat"

	"github.com/streamkpca/streamkpca/internal/splitmix"
	"github.com/streamkpca/streamkpca/internal/synth"
)

// TestFitIsTheStreamInOrder: one epoch of Fit is the learner fed the rows
// in order, batch by batch (the documented contract: what the service
// learns from the same rows), bit for bit, for one and two views; a
// two-view Fit without y columns is a configuration error; a cancelled
// context stops it.
func TestFitIsTheStreamInOrder(t *testing.T) {
	const rows, b = 1000, 128
	x := curvedData(rand.New(rand.NewPCG(4, 4)), rows)
	d := len(x) / rows
	cfg := Config{K: 2, BlockSize: 32, MaxFeatures: 512}
	snap, rep, err := Fit(context.Background(), cfg, x, rows, d, FitOptions{Batch: b, Epochs: 1})
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for s := 0; s < rows; s += b {
		n := min(b, rows-s)
		if err := l.Update(x[s*d:(s+n)*d], n); err != nil && !errors.Is(err, ErrDiverged) {
			t.Fatal(err)
		}
	}
	if !slices.Equal(snap.Coef[0], l.Snapshot().Coef[0]) || rep.Samples != rows || rep.Features != l.Features() {
		t.Errorf("Fit differs from the stream in order: %d samples, %d features", rep.Samples, rep.Features)
	}

	px, py := synth.TwoView(rand.New(rand.NewPCG(5, 5)), rows)
	xy := make([]float64, 0, rows*12)
	for r := 0; r < rows; r++ {
		xy = append(append(xy, px[r*6:(r+1)*6]...), py[r*6:(r+1)*6]...)
	}
	tcfg := Config{Algorithm: AlgKCCA, K: 2, BlockSize: 32, MaxFeatures: 256}
	tsnap, _, err := Fit(context.Background(), tcfg, xy, rows, 12, FitOptions{Batch: b, YCols: 6, Epochs: 1})
	if err != nil {
		t.Fatal(err)
	}
	tv, err := NewTwoView(tcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer tv.Close()
	for s := 0; s < rows; s += b {
		n := min(b, rows-s)
		if err := tv.Update(px[s*6:(s+n)*6], py[s*6:(s+n)*6], n); err != nil && !errors.Is(err, ErrDiverged) {
			t.Fatal(err)
		}
	}
	if ts := tv.Snapshot(); !slices.Equal(tsnap.Coef[0], ts.Coef[0]) || !slices.Equal(tsnap.Coef[1], ts.Coef[1]) {
		t.Error("two-view Fit differs from the stream in order")
	}
	if _, _, err := Fit(context.Background(), tcfg, xy, rows, 12, FitOptions{}); !errors.Is(err, ErrConfig) {
		t.Errorf("two-view Fit without y columns: %v, want ErrConfig", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := Fit(ctx, cfg, x, rows, d, FitOptions{Epochs: 3}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Fit: %v", err)
	}
}

// TestFitStopsByItsHeldOutScore: with Epochs 0 (the default) Fit makes
// passes until its held-out score stops rising, learns the held-out rows
// at the end (every row is learned), and ends far closer to exact kernel
// PCA of the same 600 rows (the same kernel) than the one pass that was
// the default before.
func TestFitStopsByItsHeldOutScore(t *testing.T) {
	const n, m = smallN, smallHeldN
	x, hx, kern, truth := smallExact(t)
	cfg := Config{K: exactK, Kernel: kern, MaxFeatures: 2048, BlockSize: 128}
	errOf := func(opt FitOptions) (float64, FitReport) {
		opt.Batch = 100
		snap, rep, err := Fit(context.Background(), cfg, x, n, exactD, opt)
		if err != nil {
			t.Fatal(err)
		}
		l, err := Restore(snap, Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return synthErr(evalDense(l, hx, m), truth), rep
	}
	one, _ := errOf(FitOptions{Epochs: 1})
	auto, rep := errOf(FitOptions{})
	t.Logf("one pass %.3g; by the rule %.3g after %d passes (%s), scores %.4g", one, auto, rep.Epochs, rep.Stop, rep.Scores)
	held := 0
	for i := range n {
		if splitmix.Mix(cfg.Seed^uint64(i))%fitHoldout == 0 {
			held++
		}
	}
	if want := uint64((n-held)*rep.Epochs + held); rep.Samples != want {
		t.Errorf("samples %d, want %d: %d passes over %d rows, then the %d held out", rep.Samples, want, rep.Epochs, n-held, held)
	}
	if rep.Epochs < 2 || len(rep.Scores) != rep.Epochs || rep.Epochs == fitMaxEpochs {
		t.Errorf("%d passes, %d scores: want the rule to stop it before %d", rep.Epochs, len(rep.Scores), fitMaxEpochs)
	}
	if !(auto < 1e-2) || !(auto < one/3) {
		t.Errorf("subspace error by the rule %.3g, one pass %.3g: want < 1e-2 and < a third of one pass's (0.033 and 5.2e-3 when written)", auto, one)
	}
}

// smallN curvedData points with exact kernel PCA (k = exactK, bandwidth
// by the median trick), evaluated on smallHeldN held-out points: the truth
// of the tests that stream a small set many times (fit's passes, a raised
// budget).
const smallN, smallHeldN = 600, 300

func smallExact(t *testing.T) (x, held []float64, kern features.Kernel, truth *mat.Dense) {
	t.Helper()
	rng := rand.New(rand.NewPCG(3, 3))
	x, held = curvedData(rng, smallN), curvedData(rng, smallHeldN)
	kern = kernelG(MedianDistance(x, smallN, exactD, 512))
	return x, held, kern, newExactKPCA(t, kern, x, smallN, exactD, exactK).at(held, smallHeldN)
}

// TestFitFeaturesFollowsTheRows: fit's landmark budget is √n·ln n rounded
// up to whole blocks of 512, within one block and the default 2,048 and
// never more than the rows in whole blocks; twice that for kcca; none
// for ksvd, ksir or a file smaller than a block.
func TestFitFeaturesFollowsTheRows(t *testing.T) {
	for _, c := range []struct{ rows, want int }{
		{511, 0},
		{518, 512},     // √n·ln n = 142
		{1617, 512},    // 297
		{4490, 1024},   // 564
		{20000, 1536},  // 1,400
		{200000, 2048}, // 5,459: the default budget
	} {
		f, got := FitFeatures(AlgKPCA, c.rows)
		if c.want == 0 {
			if f != "" {
				t.Errorf("%d rows: %q, want random features", c.rows, f)
			}
			continue
		}
		if f != FeaturesLandmarks || got != c.want {
			t.Errorf("%d rows: %q %d, want landmarks %d", c.rows, f, got, c.want)
		}
	}
	// kcca: twice the rule a view (the covariance solver, landmark
	// blocks); ksvd and ksir keep random features.
	for _, c := range []struct{ rows, want int }{{511, 0}, {518, 512}, {1617, 1024}, {8000, 2048}, {200000, 2048}} {
		f, got := FitFeatures(AlgKCCA, c.rows)
		if c.want == 0 && f != "" || c.want > 0 && (f != FeaturesLandmarks || got != c.want) {
			t.Errorf("kcca, %d rows: %q %d, want landmarks %d (0: random features)", c.rows, f, got, c.want)
		}
	}
	for _, alg := range []Algorithm{AlgKSVD, AlgKSIR} {
		if f, _ := FitFeatures(alg, 5000); f != "" {
			t.Errorf("%s: %q, want random features", alg, f)
		}
	}
}

// TestFitLandmarksAgainstExact: Fit with fit's default features for a
// file (FitFeatures: 512 landmarks for 1,500 rows) makes one pass and
// solves once (KPCA.lazy); its model is within the 5e-3 of exact
// kernel PCA of the same rows (gonum EigenSym on the Gram matrix) on 500
// held-out points, and it is the model of the service's learner fed the
// same batches, which solves after every batch (the same statistics: the
// same subspace to 1e-9).
func TestFitLandmarksAgainstExact(t *testing.T) {
	t.Parallel() // CPU-bound on one worker: beside the package's other long tests (quick tier ≤ 2 minutes)
	exactFixture(t)
	f, m := FitFeatures(AlgKPCA, exactN)
	cfg := Config{K: exactK, Kernel: exactRef.kern, Features: f, MaxFeatures: m}
	snap, rep, err := Fit(context.Background(), cfg, exactTrain, exactN, exactD, FitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Epochs != 1 || rep.Features != 512 || rep.Samples != exactN {
		t.Fatalf("%d passes, %d features, %d samples: want one pass over 1,500 rows with 512 landmarks", rep.Epochs, rep.Features, rep.Samples)
	}
	fitted, err := Restore(snap, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer fitted.Close()
	held := evalDense(fitted, exactHeld, exactHeldN)
	e := synth.SubspaceError(held, exactRef.at(exactHeld, exactHeldN))
	t.Logf("fit, 512 landmarks: subspace error %.3g against exact kernel PCA on held-out points", e)
	if !(e < 5e-3) {
		t.Errorf("subspace error %.3g against exact kernel PCA, want < 5e-3", e)
	}
	// The service's learner, the same rows in the same batches.
	l, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for s := 0; s < exactN; s += 512 {
		n := min(512, exactN-s)
		if err := l.Update(exactTrain[s*exactD:(s+n)*exactD], n); err != nil {
			t.Fatal(err)
		}
	}
	if d := synth.SubspaceError(held, evalDense(l, exactHeld, exactHeldN)); !(d < 1e-9) {
		t.Errorf("Fit and the learner fed the same batches differ by %.3g in subspace", d)
	}
}

// TestFitWhenTheLastBatchIsALandmarkBlock: a file whose every batch
// becomes a landmark block (512 rows, 512 landmarks) leaves no batch for
// a covariance step; fit must still solve the statistics of its blocks.
// (With the solve deferred to the end, such a fit once returned zero
// coefficients.) Against exact kernel PCA of the same rows: with as many
// landmarks as rows, Nyström is exact.
func TestFitWhenTheLastBatchIsALandmarkBlock(t *testing.T) {
	const n, d, k = 512, 10, 3
	rng := rand.New(rand.NewPCG(3, 3))
	x := curvedData(rng, n)
	held := curvedData(rng, 200)
	kern := kernelG(MedianDistance(x, n, d, n))
	ref := newExactKPCA(t, kern, x, n, d, k)
	cfg := Config{K: k, Kernel: kern, Features: FeaturesLandmarks, MaxFeatures: n}
	snap, _, err := Fit(context.Background(), cfg, x, n, d, FitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := Restore(snap, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if e := synth.SubspaceError(evalDense(l, held, 200), ref.at(held, 200)); !(e < 1e-6) {
		t.Errorf("subspace error %.3g against exact kernel PCA of the 512 rows, want < 1e-6", e)
	}
}
