package plot

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamkpca/streamkpca/internal/tools/bench"
)

// TestCompareSeries checks that each method becomes one curve of (seconds,
// error) and that the checkpoints a log axis cannot show are left out.
func TestCompareSeries(t *testing.T) {
	r := bench.CompareResult{Bench: "compare", Methods: []bench.CompareMethod{
		{Method: "streamkpca (subspace)", Size: 4096, SizeOf: "features", Curve: []bench.CompareCheckpoint{
			{Points: 2048, Seconds: 0.5, Error: 0.3}, {Points: 4096, Seconds: 1, Error: 0.1}, {Points: 8192, Seconds: 2, Error: 0.05}}},
		{Method: "Nyström + PCA", Size: 512, SizeOf: "landmarks", Curve: []bench.CompareCheckpoint{
			{Points: 2048, Seconds: 0, Error: 0.2}, {Points: 4096, Seconds: 1.5, Error: math.NaN()}, {Points: 8192, Seconds: 3, Error: 0.01}}},
		{Method: "exact kernel PCA", Size: 2000, Curve: []bench.CompareCheckpoint{{Points: 2000, Seconds: 4, Error: 0}}},
	}}
	got := compareSeries(r)
	if len(got) != 2 {
		t.Fatalf("%d curves, want 2 (the method with no positive error left out)", len(got))
	}
	if n := len(got[0].pts); n != 3 || got[0].pts[2].X != 2 || got[0].pts[2].Y != 0.05 {
		t.Errorf("first curve %v, want the three checkpoints as (seconds, error)", got[0].pts)
	}
	if n := len(got[1].pts); n != 1 || got[1].pts[0].X != 3 || got[1].pts[0].Y != 0.01 {
		t.Errorf("second curve %v, want only (3, 0.01): zero seconds and NaN left out", got[1].pts)
	}
	if got[0].name != "streamkpca (subspace) (4096 features)" || got[1].name != "Nyström + PCA (512 landmarks)" {
		t.Errorf("names %q, %q", got[0].name, got[1].name)
	}
}

func TestCompareRejectsOtherJSON(t *testing.T) {
	p := filepath.Join(t.TempDir(), "h.json")
	if err := os.WriteFile(p, []byte(`{"bench":"hermite","curve":[]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Compare(p); err == nil || !strings.Contains(err.Error(), "not a bench compare result") {
		t.Errorf("a bench hermite JSON: err %v, want 'not a bench compare result'", err)
	}
	if _, err := Compare(""); err == nil {
		t.Error("no --bench accepted")
	}
}
