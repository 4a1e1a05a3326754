package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/streamkpca/streamkpca/configs"
	"github.com/streamkpca/streamkpca/internal/mnist"
	"github.com/streamkpca/streamkpca/internal/synth"
	"github.com/streamkpca/streamkpca/online"
)

// TestHermiteDriftScoresTheRotatedTruth: a drift case's scorer compares
// a model with the closed form of the stream in force. The closed-form
// eigenfunctions themselves, composed with the rotation's inverse (the
// eigenfunctions of the rotated stream), score 0 at every point of the
// stream; the unrotated ones score 0 before the change and far from it
// after a switch. Before T the held-out points are the unrotated ones.
func TestHermiteDriftScoresTheRotatedTruth(t *testing.T) {
	const T, k = 1000, 3
	s := newHermiteDrift(DriftConfig{Case: "switch", Points: T, K: k, Seed: 1})
	d := s.dim()
	at := 0 // the stream position the evaluators are asked at
	rotated := func(dst, x []float64, rows int) {
		xu := make([]float64, len(x))
		copy(xu, x)
		if r := s.rot.at(at); r != nil { // x = x₀·Rᵀ, so x₀ = x·R
			var m mat.Dense
			m.Mul(mat.NewDense(rows, d, x), r)
			copy(xu, m.RawMatrix().Data)
		}
		copy(dst, s.h.Eigenfunctions(xu, rows, k).RawMatrix().Data)
	}
	plain := func(dst, x []float64, rows int) { copy(dst, s.h.Eigenfunctions(x, rows, k).RawMatrix().Data) }
	for _, n := range []int{0, T - 1, T, 3 * T} {
		at = n
		if e := s.score(rotated, n); e > 1e-9 {
			t.Errorf("at %d: the stream's own eigenfunctions score %v, want 0", n, e)
		}
		e := s.score(plain, n)
		if n < T && e > 1e-9 || n >= T && e < 0.3 {
			t.Errorf("at %d: the unrotated eigenfunctions score %v; want 0 before %d and > 0.3 after", n, e, T)
		}
	}
	x, rows := s.heldOut(T - 1)
	if rows != 2000 || len(x) != rows*d || x[5] != s.xh[5] {
		t.Errorf("held-out before the change: %d rows, not the unrotated points", rows)
	}
	if s.kernel().Bandwidth != s.h.L {
		t.Errorf("bandwidth %v, want the closed form's %v", s.kernel().Bandwidth, s.h.L)
	}
}

// TestRunForgetAndRampCases: the three runs' learners and which cases are
// gradual, by hand.
func TestRunForgetAndRampCases(t *testing.T) {
	base := online.Config{Forget: online.ForgetFollow, K: 3}
	if c := runForget(base, "forget-off"); c.Forget != online.ForgetOff || c.K != 3 {
		t.Errorf("forget-off: %+v", c)
	}
	if c := runForget(base, "restarted"); c.Forget != online.ForgetDetect {
		t.Errorf("restarted: forget %v, want the detector alone", c.Forget)
	}
	if c := runForget(base, "defaults"); c.Forget != online.ForgetFollow {
		t.Errorf("defaults: forget %v, want the configuration's", c.Forget)
	}
	for c, want := range map[string]bool{"ramp": true, "mnist-ramp": true, "kcca-ramp": true, "rotate": false, "switch": false, "stationary": false, "mnist": false} {
		if rampCase(c) != want {
			t.Errorf("rampCase(%q) = %v", c, !want)
		}
	}
}

// TestRunDriftRefuses: unknown cases and runs, and MNIST cases without
// the images, are refused with what is known; nothing runs.
func TestRunDriftRefuses(t *testing.T) {
	for _, c := range []struct {
		cfg  DriftConfig
		want string
	}{
		{DriftConfig{Case: "spiral"}, "drift case must be"},
		{DriftConfig{Case: "switch", Runs: []string{"defaults", "twice"}}, `drift run "twice"`},
		{DriftConfig{Case: "mnist"}, "needs the MNIST images"},
		{DriftConfig{Case: "kcca-ramp"}, "MNIST"},
	} {
		t0 := time.Now()
		_, err := RunDrift(t.Context(), c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error with %q", c.cfg, err, c.want)
		}
		if time.Since(t0) > 10*time.Second {
			t.Errorf("%+v: refused only after %v", c.cfg, time.Since(t0))
		}
	}
}

// TestImageStreamTruthAndMessages: keep-up's image stream sends each
// image as a CSV line that parses back to it exactly, in order and
// around again; sets the service for it (CSV, 784 values, k, the median
// trick's bandwidth); and its truth is exact kernel PCA of the images:
// the Gram matrix's top eigenvectors, which the truth at the training
// images spans.
func TestImageStreamTruthAndMessages(t *testing.T) {
	const n, k = 60, 2
	set := latentImages(n, 7, twoFactors)
	var c configs.Config
	source, truth, err := imageStream(&c, KeepUpConfig{Images: set.X, Test: set.X, K: k})
	if err != nil {
		t.Fatal(err)
	}
	if c.Kafka.Format != "csv" || c.Kafka.Dim != mnist.Pixels || c.Learner.K != k || !(c.Learner.Bandwidth > 0) {
		t.Fatalf("service set to %s, dim %d, k %d, bandwidth %v", c.Kafka.Format, c.Kafka.Dim, c.Learner.K, c.Learner.Bandwidth)
	}
	for _, i := range []int{0, 17, n + 3} {
		fields := strings.Split(string(source(i)), ",")
		img := set.X[(i%n)*mnist.Pixels : (i%n+1)*mnist.Pixels]
		if len(fields) != mnist.Pixels {
			t.Fatalf("message %d: %d values", i, len(fields))
		}
		for j, f := range fields {
			if v, err := strconv.ParseFloat(f, 64); err != nil || v != img[j] {
				t.Fatalf("message %d, value %d: %q, want %v", i, j, f, img[j])
			}
		}
	}
	// The truth at the training images spans the top-k eigenvectors of
	// their Gram matrix K_ij = exp(−|xᵢ − xⱼ|²/(2σ²)).
	bw := c.Learner.Bandwidth
	g := mat.NewSymDense(n, nil)
	for i := range n {
		for j := i; j < n; j++ {
			var d2 float64
			for p := range mnist.Pixels {
				v := set.X[i*mnist.Pixels+p] - set.X[j*mnist.Pixels+p]
				d2 += v * v
			}
			g.SetSym(i, j, math.Exp(-d2/(2*bw*bw)))
		}
	}
	var es mat.EigenSym
	if !es.Factorize(g, true) {
		t.Fatal("eigendecomposition failed")
	}
	var v mat.Dense
	es.VectorsTo(&v)
	top := v.Slice(0, n, n-k, n) // eigenvalues ascend
	if e := synth.SubspaceError(truth(k), top); e > 1e-6 {
		t.Errorf("the truth at the training images against the Gram matrix's top %d eigenvectors: subspace error %v", k, e)
	}
	if r, c := truth(k + 1).Dims(); r != n || c != k+1 {
		t.Errorf("a truth for another k: %d×%d", r, c)
	}
}

// TestDriversRefuse: every driver that needs a directory, more images
// or more rows than it is given says so, and a cancelled one stops with
// the context's error, before any work.
func TestDriversRefuse(t *testing.T) {
	few := latentImages(20, 1, twoFactors)
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	for name, run := range map[string]func() error{
		"cluster without a directory": func() error { _, err := RunCluster(t.Context(), ClusterConfig{}); return err },
		"keepup without a directory":  func() error { _, err := RunKeepUp(t.Context(), KeepUpConfig{}); return err },
		"pipeline without a directory": func() error {
			_, err := RunPipeline(t.Context(), PipelineConfig{Dims: []int{4}, Points: 1024})
			return err
		},
		"mnist with 20 images": func() error {
			_, err := RunMNIST(t.Context(), few, MNISTConfig{MNISTRun: MNISTRun{Train: 16, Test: 8}})
			return err
		},
		"mnistcca with 20 images": func() error {
			_, err := RunMNISTCCA(t.Context(), few, MNISTCCAConfig{MNISTRun: MNISTRun{Train: 16, Test: 8}})
			return err
		},
		"fit of 5 rows": func() error {
			_, err := RunFitFile(t.Context(), make([]float64, 5*3), 5, 3, FitFileConfig{Learner: online.Config{K: 3}})
			return err
		},
		"a cancelled compare": func() error {
			_, err := RunCompare(cancelled, CompareConfig{Case: "hermite1", Methods: []string{"rff"}})
			if !errors.Is(err, context.Canceled) {
				return fmt.Errorf("got %v, want context.Canceled", err)
			}
			return errors.New("cancelled")
		},
		"a cancelled drift": func() error {
			_, err := RunDrift(cancelled, DriftConfig{Case: "switch", Points: 2000, Runs: []string{"forget-off"}})
			if !errors.Is(err, context.Canceled) {
				return fmt.Errorf("got %v, want context.Canceled", err)
			}
			return errors.New("cancelled")
		},
	} {
		if err := run(); err == nil || strings.HasPrefix(err.Error(), "got ") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
