package benchcli

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/streamkpca/streamkpca/internal/tools/bench"
)

// TestBenchCompare runs `bench compare` in-process on a short 1-D hermite
// stream: four methods on the same stream, each scored against the closed
// form. Bounds are loose (about 5× the errors seen at this length): this
// checks the harness end to end, the baselines' accuracy is tested in
// internal/tools/baseline.
func TestBenchCompare(t *testing.T) {
	var buf bytes.Buffer
	Stdout = &buf
	defer func() { Stdout = nil }()
	err := Run(context.Background(), []string{"compare", "--case", "hermite1", "--points", "30000",
		"--rff-features", "256", "--landmarks", "64", "--exact-n", "400", "--isolate=false", "--table=false"})
	if err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	var res bench.CompareResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("output is not the JSON result: %v\n%s", err, out)
	}
	if len(res.Methods) != 4 {
		t.Fatalf("%d methods, want 4", len(res.Methods))
	}
	bounds := map[string]float64{"streamkpca": 5e-2, "fixed random": 5e-2, "Nyström": 1e-3, "exact": 1e-2}
	for _, m := range res.Methods {
		var bound float64
		for prefix, b := range bounds {
			if strings.HasPrefix(m.Method, prefix) || strings.Contains(m.Method, prefix) {
				bound = b
			}
		}
		t.Logf("%s: error %.3g after %d points, %.2f s", m.Method, m.ErrorAtEnd, m.Curve[len(m.Curve)-1].Points, m.Seconds)
		if bound == 0 || !(m.ErrorAtEnd <= bound) {
			t.Errorf("%s: end error %.3g, want ≤ %.3g", m.Method, m.ErrorAtEnd, bound)
		}
		if len(m.Curve) < 2 && !strings.HasPrefix(m.Method, "exact") { // exact: one model, at its sample size
			t.Errorf("%s: %d checkpoints", m.Method, len(m.Curve))
		}
	}
}
