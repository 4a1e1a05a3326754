package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/streamkpca/streamkpca/features"
	"github.com/streamkpca/streamkpca/internal/mnist"
	"github.com/streamkpca/streamkpca/internal/synth"
	"github.com/streamkpca/streamkpca/internal/tools/baseline"
	"github.com/streamkpca/streamkpca/online"
)

// MNISTRun is what both MNIST benchmarks share: the split, the size of
// the problem, the learner's bounds and the baselines' sizes. Zero values
// mean the benchmark's default.
type MNISTRun struct {
	// Train and Test split the shuffled images (or image pairs).
	Train, Test int
	// K is the number of components (canonical pairs for kcca).
	K int
	// Epochs bounds the learner's passes over the training images and
	// Budget its wall-clock time (checked at the end of each epoch; it
	// stops at the first epoch ending past it).
	Epochs int
	Budget time.Duration
	// Batch is the learner's mini-batch. Default: 512 (fit's default).
	Batch int
	// Landmarks and RFFFeatures size the Nyström and random-feature
	// baselines (per view for kcca); 0 leaves one out.
	Landmarks, RFFFeatures int
	// Seed orders the images. Default: 1.
	Seed uint64
}

// setDefaults fills the zero fields from def.
func (r *MNISTRun) setDefaults(def MNISTRun) {
	orDefault(&r.Train, def.Train)
	orDefault(&r.Test, def.Test)
	orDefault(&r.K, def.K)
	orDefault(&r.Epochs, def.Epochs)
	orDefault(&r.Budget, def.Budget)
	orDefault(&r.Batch, 512)
	orDefault(&r.Seed, 1)
}

// MNISTDefaults are RunMNIST's defaults: 4,800 training and 1,200
// held-out images, k = 10, at most 100 epochs or 60 s, Nyström with 1,024
// landmarks and 8,192 fixed random features.
var MNISTDefaults = MNISTRun{Train: 4800, Test: 1200, K: 10, Epochs: 100, Budget: 60 * time.Second,
	Batch: 512, Landmarks: 1024, RFFFeatures: 8192, Seed: 1}

// MNISTConfig configures RunMNIST. Zero values mean the default
// (MNISTDefaults; the baselines' sizes are taken as given).
type MNISTConfig struct {
	MNISTRun
	// Learner overrides the learner's configuration; its zero value is the
	// defaults with only K set, which is what a new user runs.
	Learner online.Config
	// Progress, if set, is called after every scored checkpoint.
	Progress func(method string, c Checkpoint)
}

// Checkpoint is one point of an error curve.
type Checkpoint struct {
	Epoch    int     `json:"epoch,omitempty"`
	Seconds  float64 `json:"seconds"`
	Features int     `json:"features,omitempty"`
	Error    float64 `json:"subspace_error"`
}

// MethodResult is one method's row.
type MethodResult struct {
	Method  string       `json:"method"`
	Size    int          `json:"size"`
	SizeOf  string       `json:"size_of"`
	Seconds float64      `json:"seconds"`
	Error   float64      `json:"subspace_error"`
	Curve   []Checkpoint `json:"curve,omitempty"`
	// Changes the learner's detector found (streamkpca rows; the images
	// are stationary, so any is a false alarm that restarted the model).
	Changes uint64 `json:"changes_detected,omitempty"`
}

// MNISTResult is RunMNIST's report.
type MNISTResult struct {
	Bench        string         `json:"bench"`
	Train        int            `json:"train"`
	Test         int            `json:"test"`
	K            int            `json:"k"`
	Bandwidth    float64        `json:"bandwidth"`
	TruthSeconds float64        `json:"truth_seconds"`
	Methods      []MethodResult `json:"methods"`
}

// orDefault sets *v to def when it is zero.
func orDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// RunMNIST learns kernel PCA of MNIST images (Gaussian kernel, bandwidth
// by the median trick on the first 512 training images; uncentred, or
// centred with Learner.Center, when the truth is exact centred kernel PCA
// and the uncentred baselines are left out) and
// scores every method by its held-out subspace error against exact kernel
// PCA of the training images, extended to the held-out images by Nyström
// (baseline.Exact): 1 − cos²θ_max between the learned and exact top-k
// spans of the functions' values on the held-out images.
//
// The learner streams the training images for up to Epochs epochs, the
// first in order (so that its median trick sees the same 512 images),
// then shuffled, and is scored after each epoch; its clock excludes the
// scoring. As in the service, one image in DefaultHoldout is scored by
// the held-out score before its batch is learned, and the change detector
// runs (forgetting on, the default): the figure is the defaults'.
func RunMNIST(ctx context.Context, set mnist.Set, cfg MNISTConfig) (MNISTResult, error) {
	cfg.setDefaults(MNISTDefaults)
	if set.Len() < cfg.Train+cfg.Test {
		return MNISTResult{}, fmt.Errorf("bench: %d images, need %d + %d", set.Len(), cfg.Train, cfg.Test)
	}
	set = set.Shuffle(rand.New(rand.NewPCG(cfg.Seed, 1)))
	const d = mnist.Pixels
	train, test := set.X[:cfg.Train*d], set.X[cfg.Train*d:(cfg.Train+cfg.Test)*d]
	k := cfg.K
	bw := online.MedianDistance(train, min(cfg.Batch, cfg.Train), d, 512)
	kern := features.Kernel{Family: features.Gaussian, Bandwidth: bw}
	res := MNISTResult{Bench: "mnist-kpca", Train: cfg.Train, Test: cfg.Test, K: k, Bandwidth: bw}

	start := time.Now()
	exact, err := baseline.NewExact(kern, d, k, cfg.Train)
	if err != nil {
		return res, err
	}
	exact.Center = cfg.Learner.Center
	exact.Observe(train, cfg.Train)
	if err := exact.Fit(); err != nil && !errors.Is(err, baseline.ErrNotConverged) {
		return res, fmt.Errorf("bench: exact kernel PCA: %w", err)
	}
	res.TruthSeconds = time.Since(start).Seconds()
	truth := make([]float64, cfg.Test*k)
	exact.Eval(truth, test, cfg.Test)
	truthM := mat.NewDense(cfg.Test, k, truth)
	out := make([]float64, cfg.Test*k)
	score := func(eval func(dst, x []float64, rows int)) float64 {
		eval(out, test, cfg.Test)
		return synth.SubspaceError(mat.NewDense(cfg.Test, k, out), truthM)
	}

	// The learner: defaults (with K), fed as fit feeds it.
	lc := cfg.Learner
	lc.K = k
	l, err := online.New(lc)
	if err != nil {
		return res, err
	}
	defer l.Close()
	row := MethodResult{Method: "streamkpca (" + string(l.Config().Solver) + " solver, defaults)", Size: l.Config().MaxFeatures, SizeOf: "features (max)"}
	if l.Config().Features == online.FeaturesLandmarks {
		row.Method = "streamkpca (" + string(l.Config().Solver) + " solver, landmark blocks)"
		row.SizeOf = "landmarks (max)"
	}
	if lc.Center {
		row.Method = strings.TrimSuffix(row.Method, ")") + ", centred)"
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 2))
	batch := make([]float64, cfg.Batch*d)
	var held []float64
	var seen uint64
	var clock time.Duration
	for e := 0; e < cfg.Epochs && clock < cfg.Budget; e++ {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		perm := make([]int, cfg.Train)
		for i := range perm {
			perm[i] = i
		}
		if e > 0 {
			rng.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
		}
		t0 := time.Now()
		for s := 0; s < cfg.Train; s += cfg.Batch {
			n := min(cfg.Batch, cfg.Train-s)
			for r := 0; r < n; r++ {
				copy(batch[r*d:(r+1)*d], train[perm[s+r]*d:(perm[s+r]+1)*d])
			}
			// As the service does: one image in DefaultHoldout scored
			// (and the change detector run) before the batch is learned.
			held = holdout(held[:0], batch[:n*d], n, d, seen, DefaultHoldout)
			seen += uint64(n)
			if _, err := l.Assess(held, len(held)/d); err != nil {
				return res, err
			}
			if err := l.Update(batch[:n*d], n); err != nil && !errors.Is(err, online.ErrDiverged) {
				return res, err
			}
		}
		clock += time.Since(t0)
		row.Changes = l.Changes()
		c := Checkpoint{Epoch: e + 1, Seconds: clock.Seconds(), Features: l.Features(), Error: score(l.EvalTo)}
		row.Curve = append(row.Curve, c)
		if cfg.Progress != nil {
			cfg.Progress(row.Method, c)
		}
	}
	row.Seconds, row.Error = clock.Seconds(), row.Curve[len(row.Curve)-1].Error
	res.Methods = append(res.Methods, row)

	// One pass of the training images through each fixed-size baseline.
	run := func(name string, size int, sizeOf string, m baseline.Method) error {
		t0 := time.Now()
		for s := 0; s < cfg.Train; s += cfg.Batch {
			n := min(cfg.Batch, cfg.Train-s)
			m.Observe(train[s*d:(s+n)*d], n)
		}
		if err := m.Fit(); err != nil && !errors.Is(err, baseline.ErrNotConverged) {
			return fmt.Errorf("bench: %s: %w", name, err)
		}
		secs := time.Since(t0).Seconds()
		res.Methods = append(res.Methods, MethodResult{Method: name, Size: size, SizeOf: sizeOf, Seconds: secs, Error: score(m.Eval)})
		if cfg.Progress != nil {
			cfg.Progress(name, Checkpoint{Seconds: secs, Error: res.Methods[len(res.Methods)-1].Error})
		}
		return nil
	}
	if cfg.Learner.Center {
		// The baselines are uncentred: against the centred truth their
		// error would measure the centring, not the method.
		return res, nil
	}
	if cfg.Landmarks > 0 {
		ny, err := baseline.NewNystrom(kern, d, k, cfg.Landmarks)
		if err != nil {
			return res, err
		}
		if err := run("Nyström + PCA", cfg.Landmarks, "landmarks", ny); err != nil {
			return res, err
		}
	}
	if cfg.RFFFeatures > 0 {
		rf, err := baseline.NewRFF(kern, d, k, cfg.RFFFeatures, 128, cfg.Seed)
		if err != nil {
			return res, err
		}
		defer rf.Close()
		if err := run("fixed random features + PCA", rf.M, "features", rf); err != nil {
			return res, err
		}
	}
	return res, nil
}
