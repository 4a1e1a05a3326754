package bench

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/streamkpca/streamkpca/internal/synth"
	"github.com/streamkpca/streamkpca/online"
)

// RunFitFile scores fit against exact kernel PCA of the same training
// rows, on test rows neither saw: on 1,200 rows of the 16-D hermite
// stream both runs (fit's defaults: 512 landmarks; three fixed passes)
// reach the exact subspace closely, about a tenth of the rows are kept
// for the test, and each run's time is given over the exact solver's.
func TestRunFitFileAgainstExact(t *testing.T) {
	const rows = 1200
	h := synth.Hermite16()
	x := make([]float64, rows*h.Dim())
	h.Sample(x, rand.New(rand.NewPCG(3, 3)))
	res, err := RunFitFile(context.Background(), x, rows, h.Dim(), FitFileConfig{Learner: online.Config{K: 3, Seed: 1}, Epochs: []int{3}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows+res.Test != rows || res.Test < rows/20 || res.Test > rows/5 || res.Dim != 16 || res.K != 3 {
		t.Errorf("%d training and %d test rows of d = %d, k = %d; want %d rows, about a tenth for the test", res.Rows, res.Test, res.Dim, res.K, rows)
	}
	if len(res.Methods) != 2 || !strings.HasPrefix(res.Methods[0].Method, "fit (defaults") || res.Methods[1].Epochs != 3 {
		t.Fatalf("methods %+v, want fit's defaults and --epochs 3", res.Methods)
	}
	if !(res.Bandwidth > 0) || !(res.ExactSeconds > 0) {
		t.Errorf("bandwidth %v, exact solver %v s", res.Bandwidth, res.ExactSeconds)
	}
	for _, m := range res.Methods {
		t.Logf("%s: %d epochs, error %.3g, %.2f s (%.2f× exact)", m.Method, m.Epochs, m.Error, m.Seconds, m.Ratio)
		if !(m.Error < 1e-4) {
			t.Errorf("%s: subspace error %v against exact kernel PCA, want below 1e-4", m.Method, m.Error)
		}
		if rel(m.Ratio, m.Seconds/res.ExactSeconds) > 1e-12 {
			t.Errorf("%s: ratio %v, want %v s over the exact solver's %v s", m.Method, m.Ratio, m.Seconds, res.ExactSeconds)
		}
	}
	if _, err := RunFitFile(context.Background(), x[:8*16], 8, 16, FitFileConfig{Learner: online.Config{K: 3}}); err == nil {
		t.Error("8 rows for k = 3 accepted")
	}
}
