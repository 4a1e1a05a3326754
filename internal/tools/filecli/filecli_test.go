package filecli

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/streamkpca/streamkpca/features"
	"github.com/streamkpca/streamkpca/internal/synth"
	"github.com/streamkpca/streamkpca/internal/tools/baseline"
	"github.com/streamkpca/streamkpca/snapshot"
)

// quiet is Files that drops what the verbs write.
var quiet = Files{Out: io.Discard, Err: io.Discard}

// run runs a verb and returns what it wrote to Out.
func run(t *testing.T, verb func(Files) error) string {
	t.Helper()
	var out bytes.Buffer
	if err := verb(Files{Out: &out, Err: io.Discard}); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// messages runs a verb and returns what it wrote to Err.
func messages(t *testing.T, verb func(Files) error) string {
	t.Helper()
	var msg bytes.Buffer
	if err := verb(Files{Out: io.Discard, Err: &msg}); err != nil {
		t.Fatal(err)
	}
	return msg.String()
}

// TestFitProjectInspect: fit a KPCA model from a CSV file, project the same
// file (k columns per row, equal to snapshot.Model.Project), inspect it;
// fit a KCCA model from paired columns, saying the budget it chose.
func TestFitProjectInspect(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(1, 1))
	var rows [][]float64
	for i := 0; i < 2000; i++ {
		rows = append(rows, []float64{rng.NormFloat64(), 0.5 * rng.NormFloat64(), rng.ExpFloat64()})
	}
	in, model := filepath.Join(dir, "in.csv"), filepath.Join(dir, "m.skpca")
	writeCSV(t, in, rows)
	if err := quiet.Fit(context.Background(), []string{"--input", in, "--k", "2", "--epochs", "3", "--out", model}); err != nil {
		t.Fatal(err)
	}
	out := run(t, func(f Files) error { return f.Project([]string{"--model", model, "--input", in}) })
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil || len(recs) != 2000 || len(recs[0]) != 2 {
		t.Fatalf("project printed %d rows of %d columns (%v)", len(recs), len(recs[0]), err)
	}
	snap, _, _ := snapshot.Load(model)
	m, _ := snapshot.NewModel(snap, snapshot.ModelOptions{})
	want, _ := m.Project(nil, rows[7])
	if got := recs[7][0] + "," + recs[7][1]; got != fmt.Sprint(strconv.FormatFloat(want[0], 'g', -1, 64), ",", strconv.FormatFloat(want[1], 'g', -1, 64)) {
		t.Errorf("row 7 projected as %s, Model.Project gives %v", got, want)
	}
	info := run(t, func(f Files) error { return f.Inspect([]string{model}) })
	if !strings.Contains(info, `"samples_seen": 6000`) || !strings.Contains(info, `"algorithm": "kpca"`) {
		t.Errorf("inspect output lacks samples_seen 6000 / algorithm: %.300s", info)
	}

	x, y := synth.TwoView(rng, 1000)
	rows = rows[:0]
	for i := 0; i < 1000; i++ {
		rows = append(rows, append(append([]float64{}, x[i*6:(i+1)*6]...), y[i*6:(i+1)*6]...))
	}
	writeCSV(t, in, rows)
	two := filepath.Join(dir, "kcca.skpca")
	// kcca's covariance solver has the file's statistics after one pass:
	// no "try --epochs" hint for it (the step rules get one).
	stderr := messages(t, func(f Files) error {
		return f.Fit(context.Background(), []string{"--input", in, "--algo", "kcca", "--k", "2", "--y-cols", "6", "--epochs", "2", "--out", two})
	})
	if strings.Contains(stderr, "--epochs") {
		t.Errorf("fit kcca (covariance solver) suggests more epochs:\n%s", stderr)
	}
	// A file of pairs takes landmark blocks (online.FitFeatures: twice
	// √n·ln n a view, 512 for 1,000 rows).
	if !strings.Contains(stderr, "features: landmarks") {
		t.Errorf("fit kcca does not say it took landmarks:\n%s", stderr)
	}
	snap, _, err = snapshot.Load(two)
	if err != nil || len(snap.Header.Views) != 2 || snap.Header.Views[1].Dim != 6 {
		t.Fatalf("kcca snapshot: %v %+v", err, snap.Header.Views)
	}
	if !snap.Header.Views[0].Landmarks() || !snap.Header.Views[1].Landmarks() || snap.Header.MaxFeatures != 512 {
		t.Errorf("fit kcca: landmarks %v %v, %d features a view; want landmark views of 512", snap.Header.Views[0].Landmarks(), snap.Header.Views[1].Landmarks(), snap.Header.MaxFeatures)
	}
	// With random features asked for, the budget is chosen
	// (online.CovarianceBudget): for 1,000 rows the default, features
	// past the rows adding no rank.
	random := filepath.Join(dir, "kcca-random.skpca")
	stderr = messages(t, func(f Files) error {
		return f.Fit(context.Background(), []string{"--input", in, "--algo", "kcca", "--k", "2", "--y-cols", "6", "--epochs", "2", "--features", "random", "--out", random})
	})
	if !strings.Contains(stderr, "features: 2048 per view (what --time and learner.max_model_bytes pay for") {
		t.Errorf("fit kcca --features random does not say the budget it chose:\n%s", stderr)
	}
	if snap.Header.Covariance != nil || snap.State != nil {
		t.Error("fit wrote the covariance solver's statistics: its output is the served model")
	}
	if err := quiet.Fit(context.Background(), []string{"--input", in, "--algo", "kcca", "--k", "2", "--out", two}); err == nil || !strings.Contains(err.Error(), "--y-cols") {
		t.Errorf("kcca without --y-cols: %v", err)
	}
	if err := quiet.Fit(context.Background(), []string{"--input", in, "--k", "0"}); err == nil {
		t.Error("k = 0 accepted")
	}
}

// TestColumns: fit --cols on a file with an extra (label) column learns
// exactly the model of the file without it, project --cols projects the
// same bits, a header row is reported, and a wrong width names --cols.
func TestColumns(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(3, 3))
	var narrow, wide [][]float64
	for i := 0; i < 600; i++ {
		a, b := rng.NormFloat64(), rng.NormFloat64()
		narrow = append(narrow, []float64{a, b})
		wide = append(wide, []float64{float64(i % 10), a, b}) // a label first
	}
	pn, pw := filepath.Join(dir, "n.csv"), filepath.Join(dir, "w.csv")
	writeCSV(t, pn, narrow)
	writeCSV(t, pw, wide)
	mn, mw := filepath.Join(dir, "n.skpca"), filepath.Join(dir, "w.skpca")
	if err := quiet.Fit(context.Background(), []string{"--input", pn, "--k", "2", "--out", mn}); err != nil {
		t.Fatal(err)
	}
	stderr := messages(t, func(f Files) error {
		return f.Fit(context.Background(), []string{"--input", pw, "--cols", "2-3", "--k", "2", "--out", mw})
	})
	if !strings.Contains(stderr, `header row: "a,b,c"`) {
		t.Errorf("fit did not say it skipped the header row:\n%s", stderr)
	}
	sn, _, _ := snapshot.Load(mn)
	sw, _, err := snapshot.Load(mw)
	if err != nil || !slices.Equal(sn.Coef[0], sw.Coef[0]) || sw.Header.Views[0].Dim != 2 {
		t.Fatalf("fit --cols 2-3 differs from fit on the two columns (%v)", err)
	}
	pnOut := run(t, func(f Files) error { return f.Project([]string{"--model", mn, "--input", pn}) })
	pwOut := run(t, func(f Files) error { return f.Project([]string{"--model", mn, "--input", pw, "--cols", "2,3"}) })
	if pnOut != pwOut || len(pnOut) == 0 {
		t.Error("project --cols 2,3 differs from project on the two columns")
	}
	err = quiet.Project([]string{"--model", mn, "--input", pw})
	if err == nil || !strings.Contains(err.Error(), "3 columns") || !strings.Contains(err.Error(), "--cols") {
		t.Errorf("project of a wider file: %v, want an error naming the widths and --cols", err)
	}
	if err := quiet.Fit(context.Background(), []string{"--input", pw, "--cols", "4", "--k", "2", "--out", mw}); err == nil || !strings.Contains(err.Error(), "1-3") {
		t.Errorf("fit --cols 4 of a 3-column file: %v", err)
	}
}

// TestFitUsesLandmarksOnAFile: `fit` with defaults on a file learns with
// landmark blocks (streaming Nyström; a file is a bounded data set) in one
// pass, and lands on exact kernel PCA of the file's rows (before: random
// features, one pass, 0.1–0.4 away on the files measured).
func TestFitUsesLandmarksOnAFile(t *testing.T) {
	dir := t.TempDir()
	h := synth.Hermite1D()
	const n, m = 1500, 500
	x, held := make([]float64, n), make([]float64, m)
	h.Sample(x, rand.New(rand.NewPCG(5, 5)))
	h.Sample(held, rand.New(rand.NewPCG(6, 6)))
	rows := make([][]float64, n)
	for i := range rows {
		rows[i] = []float64{x[i]}
	}
	csv, model := filepath.Join(dir, "h.csv"), filepath.Join(dir, "h.skpca")
	writeCSV(t, csv, rows)
	if err := quiet.Fit(context.Background(), []string{"--input", csv, "--k", "3", "--bandwidth", "1", "--out", model}); err != nil {
		t.Fatal(err)
	}
	snap, _, err := snapshot.Load(model)
	if err != nil {
		t.Fatal(err)
	}
	if !snap.Header.Views[0].Landmarks() || snap.Header.Features() != 512 {
		t.Fatalf("features %d, landmarks %v: want 512 landmarks (√n·ln n = 283, rounded up to a block of 512)", snap.Header.Features(), snap.Header.Views[0].Landmarks())
	}
	ex, err := baseline.NewExact(features.Kernel{Family: features.Gaussian, Bandwidth: 1}, 1, 3, n)
	if err != nil {
		t.Fatal(err)
	}
	ex.Observe(x, n)
	if err := ex.Fit(); err != nil && !errors.Is(err, baseline.ErrNotConverged) {
		t.Fatal(err)
	}
	truth := make([]float64, m*3)
	ex.Eval(truth, held, m)
	mod, err := snapshot.NewModel(snap, snapshot.ModelOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := mod.Project(nil, held)
	if err != nil {
		t.Fatal(err)
	}
	if e := synth.SubspaceError(mat.NewDense(m, 3, got), mat.NewDense(m, 3, truth)); !(e < 1e-6) {
		t.Errorf("fit with defaults: subspace error %.3g against exact kernel PCA of its rows, want < 1e-6", e)
	}
}

func writeCSV(t *testing.T, path string, rows [][]float64) {
	t.Helper()
	var b strings.Builder
	b.WriteString("a,b,c\n") // a header row is skipped
	for _, r := range rows {
		for j, v := range r {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.FormatFloat(v, 'g', -1, 64))
		}
		b.WriteByte('\n')
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestMessagesInTheUsersTerms: fit's errors name its flags, not the
// service's settings; a k beyond the rows is a warning; inspect of a CSV
// file and project of an empty one say what is wrong.
func TestMessagesInTheUsersTerms(t *testing.T) {
	dir := t.TempDir()
	csv := filepath.Join(dir, "d.csv")
	writeCSV(t, csv, [][]float64{{1, 2, 0}, {2, 1, 1}, {0, 3, 0}, {3, 0, 1}, {1, 1, 0}})
	errOf := func(f func() error) string {
		if err := f(); err != nil {
			return err.Error()
		}
		return ""
	}
	fit := func(args ...string) string {
		return errOf(func() error {
			return quiet.Fit(context.Background(), append([]string{"--input", csv, "--out", filepath.Join(dir, "m.skpca")}, args...))
		})
	}
	for _, c := range []struct{ args, want, not []string }{
		{[]string{"--k", "0"}, []string{"-k", "must be positive"}, []string{"--set", "learner."}},
		{[]string{"--k", "abc"}, []string{"-k", "not a whole number"}, []string{"strconv"}},
		{[]string{"--k", "2", "--max-features", "64", "--block", "128"}, []string{"--max-features"}, []string{"learner.", "configs/streamkpca.yaml"}},
	} {
		got := fit(c.args...)
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("fit %v: %q, want it to say %q", c.args, got, w)
			}
		}
		for _, w := range c.not {
			if strings.Contains(got, w) {
				t.Errorf("fit %v: %q, should not say %q", c.args, got, w)
			}
		}
	}
	// k more than the data supports: a warning.
	warn := messages(t, func(f Files) error {
		return f.Fit(context.Background(), []string{"--input", csv, "--k", "6", "--out", filepath.Join(dir, "m.skpca"), "--epochs", "1"})
	})
	if !strings.Contains(warn, "warning: k = 6 but the input has 5 rows") {
		t.Errorf("fit --k 6 on 5 rows said:\n%s", warn)
	}
	if got := errOf(func() error { return quiet.Inspect([]string{csv}) }); !strings.Contains(got, "is not a streamkpca snapshot") || strings.Count(got, "snapshot:") > 0 {
		t.Errorf("inspect of a CSV: %q", got)
	}
	if err := quiet.Fit(context.Background(), []string{"--input", csv, "--cols", "1-2", "--k", "2", "--out", filepath.Join(dir, "m.skpca"), "--epochs", "1"}); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty.csv")
	os.WriteFile(empty, nil, 0o644)
	if got := errOf(func() error {
		return quiet.Project([]string{"--model", filepath.Join(dir, "m.skpca"), "--input", empty})
	}); !strings.Contains(got, "holds no vectors") {
		t.Errorf("project of an empty file: %q", got)
	}
}
