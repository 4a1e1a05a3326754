package plot

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamkpca/streamkpca/features"
	"github.com/streamkpca/streamkpca/internal/synth"
	"github.com/streamkpca/streamkpca/internal/tools/bench"
	"github.com/streamkpca/streamkpca/online"
	"github.com/streamkpca/streamkpca/snapshot"
)

// hermiteModel learns k = 3 on the 1-D hermite stream (s = ℓ = 1) and
// writes its snapshot; it returns the file.
func hermiteModel(t *testing.T, points int) string {
	t.Helper()
	l, err := online.New(online.Config{K: 3, BlockSize: 128, MaxFeatures: 4096, Seed: 1,
		Kernel: features.Kernel{Family: features.Gaussian, Bandwidth: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rng := rand.New(rand.NewPCG(2, 2))
	x := make([]float64, 512)
	for range points / len(x) {
		synth.Hermite1D().Sample(x, rng)
		if err := l.Update(x, len(x)); err != nil {
			t.Fatal(err)
		}
	}
	data, err := l.Snapshot().MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, "m.skpca", data)
}

// TestEigenCurvesMatchTheClosedForm: the curves Eigenfunctions draws are
// the learned functions rotated onto the hermite closed form; for a model
// of 50,000 points they lie on it (RMS over the central ±2s, where the
// stream has 95% of its mass, below 0.05 of the unit L² norm), and the
// figure is drawn and saved as a PNG.
func TestEigenCurvesMatchTheClosedForm(t *testing.T) {
	path := hermiteModel(t, 50_000)
	m, err := loadModel(path)
	if err != nil {
		t.Fatal(err)
	}
	grid, aligned, truth, err := eigenCurves(m, 1)
	if err != nil {
		t.Fatal(err)
	}
	for q := range 3 {
		var sq float64
		var n int
		for i, x := range grid {
			if math.Abs(x) <= 2 {
				d := aligned.At(i, q) - truth.At(i, q)
				sq += d * d
				n++
			}
		}
		rms := math.Sqrt(sq / float64(n))
		t.Logf("φ%d: RMS %.3g", q, rms)
		if rms > 0.05 {
			t.Errorf("φ%d: RMS %.3g from the closed form over ±2s, want ≤ 0.05", q, rms)
		}
	}
	p, err := Eigenfunctions(path, 1)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "f.png")
	if err := Save(p, 10, 8, out); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(out); err != nil || !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
		t.Errorf("%s is not a PNG (%v)", out, err)
	}
	if err := Save(p, 10, 8, filepath.Join(t.TempDir(), "no", "such", "dir", "f.png")); err == nil || !strings.Contains(err.Error(), "write ") {
		t.Errorf("save into a missing directory: %v", err)
	}
	if _, err := Eigenfunctions("", 1); err == nil || !strings.Contains(err.Error(), "--model") {
		t.Errorf("no model: %v", err)
	}
}

// TestScatterSplitsTheLabel: a label column anywhere in the row is taken
// out of the values (so the model sees only its own columns) and groups
// the points; the rows' count and the label column's range are checked.
func TestScatterSplitsTheLabel(t *testing.T) {
	raw := []float64{
		0.5, 2, 1.5, // value, label, value
		-1, 0, 3,
		4, 2, 5,
	}
	x, labels := splitLabel(raw, 3, 3, 1)
	if fmt.Sprint(x) != "[0.5 1.5 -1 3 4 5]" || fmt.Sprint(labels) != "[2 0 2]" {
		t.Errorf("values %v labels %v", x, labels)
	}
	if x, labels := splitLabel(raw, 3, 3, -1); len(x) != 9 || fmt.Sprint(labels) != "[0 0 0]" {
		t.Errorf("no label column: values %v labels %v", x, labels)
	}
	path := hermiteModel(t, 2048)
	csv := writeFile(t, "in.csv", []byte("0,0.5\n1,-0.25\n1,1.5\n"))
	if _, err := Scatter(path, csv, 0); err != nil {
		t.Errorf("scatter with the label in column 1: %v", err)
	}
	if _, err := Scatter(path, csv, 5); err == nil || !strings.Contains(err.Error(), "--label-col 6") {
		t.Errorf("label column past the row: %v", err)
	}
	if _, err := Scatter(path, csv, -1); err == nil || !strings.Contains(err.Error(), "--label-col") {
		t.Errorf("two columns for a 1-D model without a label column: %v, want a hint at --label-col", err)
	}
	if _, err := Scatter(path, "", 0); err == nil || !strings.Contains(err.Error(), "--input") {
		t.Errorf("no input: %v", err)
	}
	if _, err := Correlations(path, csv, 1); err == nil || !strings.Contains(err.Error(), "two-view") {
		t.Errorf("correlations of a one-view model: %v", err)
	}
}

// TestConvergenceReferenceIsOneOverT: the reference line passes through
// the curve's first point and falls as 1/t: at 10× the points, a tenth of
// the error; a checkpoint of zero error (a log axis cannot show it) is
// left out.
func TestConvergenceReferenceIsOneOverT(t *testing.T) {
	r := bench.HermiteResult{Bench: "hermite", Curve: []bench.CurvePoint{
		{Points: 1000, Error: 0.2}, {Points: 2000, Error: 0}, {Points: 10000, Error: 0.03}, {Points: 100000, Error: 0.004}}}
	pts, ref := convergenceSeries(r)
	if len(pts) != 3 || len(ref) != 3 {
		t.Fatalf("points %v, reference %v: want 3 each", pts, ref)
	}
	for i, want := range []float64{0.2, 0.02, 0.002} {
		if math.Abs(ref[i].Y-want) > 1e-15 || ref[i].X != pts[i].X {
			t.Errorf("reference at %v = %v, want %v", ref[i].X, ref[i].Y, want)
		}
	}
	p := writeJSON(t, r)
	if _, err := Convergence(p); err != nil {
		t.Errorf("Convergence: %v", err)
	}
	if _, err := Convergence(writeJSON(t, bench.HermiteResult{Curve: []bench.CurvePoint{{Points: 1}, {Points: 2}}})); err == nil {
		t.Error("a curve of zero errors drawn")
	}
}

// TestDriftSeries: each run's positive errors, named with its first
// detection; the range spans every run; a result with no positive error
// is an error, not an empty figure.
func TestDriftSeries(t *testing.T) {
	r := bench.DriftResult{Bench: "drift", Case: "switch", Points: 100, K: 3, Runs: []bench.DriftRun{
		{Name: "defaults", Detected: []int{130, 170}, Curve: []bench.DriftPoint{{Points: 50, Error: 0.01}, {Points: 150, Error: 0.4}}},
		{Name: "restarted", Curve: []bench.DriftPoint{{Points: 150, Error: 0.002}, {Points: 200, Error: 0}}},
		{Name: "empty", Curve: []bench.DriftPoint{{Points: 150, Error: 0}, {Points: 200, Error: 0}}},
	}}
	series, lo, hi := driftSeries(r)
	if len(series) != 2 || series[0].name != "defaults (change found at 130)" || series[1].name != "restarted" ||
		len(series[1].pts) != 1 || lo != 0.002 || hi != 0.4 {
		t.Errorf("series %+v, range [%v, %v]", series, lo, hi)
	}
	if _, err := Drift(writeJSON(t, r)); err != nil {
		t.Errorf("Drift: %v", err)
	}
	r.Runs = r.Runs[2:]
	if _, err := Drift(writeJSON(t, r)); err == nil || !strings.Contains(err.Error(), "no positive error") {
		t.Errorf("no positive error: %v", err)
	}
}

// TestClusterEfficiency: a measured group's efficiency is its rate over
// members × one instance's at the same d (hand-computed here); a d with
// no single-instance row has none.
func TestClusterEfficiency(t *testing.T) {
	r := bench.ClusterResult{
		Rows: []bench.ClusterRow{{D: 16, Members: 0, PointsPerSec: 1000}, {D: 16, Members: 2, PointsPerSec: 1600},
			{D: 16, Members: 3, PointsPerSec: 2100}, {D: 784, Members: 2, PointsPerSec: 50}},
		Model: []bench.ClusterModelRow{{D: 16, Instances: 1, Exchange: "reduce-scatter", Efficiency: 1},
			{D: 16, Instances: 8, Exchange: "reduce-scatter", Efficiency: 0.9}, {D: 16, Instances: 8, Exchange: "all-to-all", Efficiency: 0.5}},
	}
	m := clusterMeasured(r)
	if len(m) != 2 || m[0].X != 2 || m[0].Y != 0.8 || m[1].X != 3 || math.Abs(m[1].Y-0.7) > 1e-15 {
		t.Errorf("measured %v, want (2, 0.8) and (3, 0.7)", m)
	}
	if _, err := Cluster(writeJSON(t, r)); err != nil {
		t.Errorf("Cluster: %v", err)
	}
}

// writeJSON writes v as a bench result file.
func writeJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, "r.json", b)
}

// writeFile writes b to a new file name in a temporary directory.
func writeFile(t *testing.T, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCorrelationsOfDependentAndIndependentViews: kcca learned on pairs
// y = x² + small noise finds a first held-out canonical correlation near
// 1 (x² is a function of x, which a Gaussian kernel represents); on pairs
// with y independent of x every correlation is near 0 (independence; 2,000
// held-out pairs put chance at about 1/√2000 ≈ 0.02).
func TestCorrelationsOfDependentAndIndependentViews(t *testing.T) {
	for _, dependent := range []bool{true, false} {
		pair := func(rng *rand.Rand, x, y []float64) {
			for i := range x {
				x[i] = rng.NormFloat64()
				y[i] = rng.NormFloat64()
				if dependent {
					y[i] = x[i]*x[i] + 0.05*y[i]
				}
			}
		}
		l, err := online.NewTwoView(online.Config{Algorithm: online.AlgKCCA, K: 2, BlockSize: 64, MaxFeatures: 512, Seed: 3,
			Kernel: features.Kernel{Family: features.Gaussian, Bandwidth: 1}, KernelY: features.Kernel{Family: features.Gaussian, Bandwidth: 1}})
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(4, 4))
		x, y := make([]float64, 256), make([]float64, 256)
		for range 80 {
			pair(rng, x, y)
			if err := l.Update(x, y, len(x)); err != nil {
				t.Fatal(err)
			}
		}
		snap := l.Snapshot()
		l.Close()
		m, err := snapshot.NewModel(snap, snapshot.ModelOptions{})
		if err != nil {
			t.Fatal(err)
		}
		const rows = 2000
		hx, hy := make([]float64, rows), make([]float64, rows)
		pair(rng, hx, hy)
		raw := make([]float64, 0, 2*rows)
		for i := range rows {
			raw = append(raw, hx[i], hy[i])
		}
		cc, err := correlations(m, raw, rows)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("dependent %v: held-out correlations %.3f", dependent, cc)
		if dependent && !(cc[0] > 0.9) || !dependent && !(cc[0] < 0.1) {
			t.Errorf("dependent %v: first held-out canonical correlation %.3f", dependent, cc[0])
		}
	}
}

// TestCompareNeedsAPositiveCheckpoint: a compare result whose methods
// have no checkpoint a log axis can show is an error naming the file,
// not an empty figure; with one, the budget line is drawn.
func TestCompareNeedsAPositiveCheckpoint(t *testing.T) {
	r := bench.CompareResult{Bench: "compare", Methods: []bench.CompareMethod{
		{Method: "m", Curve: []bench.CompareCheckpoint{{Points: 1, Seconds: 0, Error: 0.1}}}}}
	p := writeJSON(t, r)
	if _, err := Compare(p); err == nil || !strings.Contains(err.Error(), p) {
		t.Errorf("no positive checkpoint: %v, want an error naming %s", err, p)
	}
	r.Methods[0].Curve[0].Seconds, r.BudgetSeconds = 2, 60
	if _, err := Compare(writeJSON(t, r)); err != nil {
		t.Errorf("one positive checkpoint and a budget: %v", err)
	}
}
