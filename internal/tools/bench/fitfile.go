package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/streamkpca/streamkpca/features"
	"github.com/streamkpca/streamkpca/internal/splitmix"
	"github.com/streamkpca/streamkpca/internal/synth"
	"github.com/streamkpca/streamkpca/internal/tools/baseline"
	"github.com/streamkpca/streamkpca/online"
	"github.com/streamkpca/streamkpca/snapshot"
)

// FitFileConfig configures RunFitFile.
type FitFileConfig struct {
	// Learner is fit's learner configuration (K set; the rest defaults).
	Learner online.Config
	// Batch is fit's mini-batch. Default: 512.
	Batch int
	// TestShare of the rows, chosen by a hash of the row index, are kept
	// from fit and exact kernel PCA alike and score both. Default: 0.1.
	TestShare float64
	// Epochs lists fixed pass counts to run besides fit's default (which
	// stops by its own held-out score).
	Epochs []int
	// Budget is fit's time budget (FitOptions.Budget). Default: 10 min.
	Budget time.Duration
}

// FitFileResult is RunFitFile's report.
type FitFileResult struct {
	Bench        string          `json:"bench"`
	Rows         int             `json:"rows"`
	Test         int             `json:"test_rows"`
	Dim          int             `json:"dim"`
	K            int             `json:"k"`
	Bandwidth    float64         `json:"bandwidth"`
	ExactSeconds float64         `json:"exact_seconds"`
	Methods      []FitFileMethod `json:"methods"`
}

// FitFileMethod is one row of RunFitFile's report.
type FitFileMethod struct {
	Method  string    `json:"method"`
	Epochs  int       `json:"epochs"`
	Seconds float64   `json:"seconds"`
	Ratio   float64   `json:"seconds_over_exact"`
	Error   float64   `json:"subspace_error"`
	Scores  []float64 `json:"heldout_scores,omitempty"`
	Stop    string    `json:"stop,omitempty"`
}

// RunFitFile is `streamkpca bench fit`: `streamkpca fit` (online.Fit) on
// a file's rows against exact kernel PCA of the same rows at the fitted
// model's kernel (baseline.Exact), both scored on the test rows by the
// subspace error 1 − cos²θ_max between the learned and exact top-k spans
// of the functions' values. Fit's own held-out rows come out of its
// training rows; the test rows are seen by neither.
func RunFitFile(ctx context.Context, x []float64, rows, d int, cfg FitFileConfig) (FitFileResult, error) {
	if cfg.Batch == 0 {
		cfg.Batch = 512
	}
	if cfg.TestShare == 0 {
		cfg.TestShare = 0.1
	}
	if cfg.Budget == 0 {
		cfg.Budget = 10 * time.Minute
	}
	k := cfg.Learner.K
	var train, test []float64
	for i := range rows {
		if float64(splitmix.Mix(cfg.Learner.Seed^uint64(i)^0x7e57)%1000) < 1000*cfg.TestShare {
			test = append(test, x[i*d:i*d+d]...)
		} else {
			train = append(train, x[i*d:i*d+d]...)
		}
	}
	nTrain, nTest := len(train)/d, len(test)/d
	if cfg.Learner.Features == "" { // fit's defaults (online.FitFeatures)
		f, n := online.FitFeatures(cfg.Learner.Algorithm, nTrain)
		cfg.Learner.Features = f
		if cfg.Learner.MaxFeatures == 0 {
			cfg.Learner.MaxFeatures = n
		}
	}
	if nTest < k || nTrain < 2*k {
		return FitFileResult{}, fmt.Errorf("bench: %d rows give %d test and %d training rows; k = %d needs more", rows, nTest, nTrain, k)
	}
	res := FitFileResult{Bench: "fit", Rows: nTrain, Test: nTest, Dim: d, K: k}
	type run struct {
		name   string
		epochs int
	}
	runs := []run{{"fit (defaults: stops by its held-out score)", 0}}
	for _, e := range cfg.Epochs {
		runs = append(runs, run{fmt.Sprintf("fit --epochs %d", e), e})
	}
	var (
		truth *mat.Dense
		out   []float64
	)
	for _, r := range runs {
		t0 := time.Now()
		snap, rep, err := online.Fit(ctx, cfg.Learner, train, nTrain, d, online.FitOptions{Epochs: r.epochs, Batch: cfg.Batch, Budget: cfg.Budget})
		if err != nil {
			return res, err
		}
		secs := time.Since(t0).Seconds()
		if truth == nil {
			res.Bandwidth = rep.Bandwidth
			t0 := time.Now()
			ex, err := baseline.NewExact(features.Kernel{Family: features.Gaussian, Bandwidth: rep.Bandwidth}, d, k, nTrain)
			if err != nil {
				return res, err
			}
			ex.Center = cfg.Learner.Center
			ex.Observe(train, nTrain)
			if err := ex.Fit(); err != nil && !errors.Is(err, baseline.ErrNotConverged) {
				return res, fmt.Errorf("bench: exact kernel PCA: %w", err)
			}
			res.ExactSeconds = time.Since(t0).Seconds()
			tv := make([]float64, nTest*k)
			ex.Eval(tv, test, nTest)
			truth = mat.NewDense(nTest, k, tv)
		}
		m, err := snapshot.NewModel(snap.Served(), snapshot.ModelOptions{})
		if err != nil {
			return res, err
		}
		if out, err = m.ProjectView(0, nil, test); err != nil {
			return res, err
		}
		res.Methods = append(res.Methods, FitFileMethod{Method: r.name, Epochs: rep.Epochs, Seconds: secs,
			Error: synth.SubspaceError(mat.NewDense(nTest, k, out), truth), Scores: rep.Scores, Stop: rep.Stop})
	}
	for i := range res.Methods {
		res.Methods[i].Ratio = res.Methods[i].Seconds / res.ExactSeconds
	}
	return res, nil
}
