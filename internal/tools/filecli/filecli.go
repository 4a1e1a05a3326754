// Package filecli is the file verbs of the streamkpca command: fit (learn
// a model from a file, online.Fit's orchestration: reading, budgets,
// stopping, the report), project and inspect. cmd/streamkpca dispatches
// to them.
package filecli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/streamkpca/streamkpca/configs"
	"github.com/streamkpca/streamkpca/ingest"
	"github.com/streamkpca/streamkpca/internal/cliflag"
	"github.com/streamkpca/streamkpca/internal/progress"
	"github.com/streamkpca/streamkpca/online"
	"github.com/streamkpca/streamkpca/snapshot"
)

// Files is where the file verbs write: their output (projections, the
// inspected header) to Out, their messages (what fit chose, warnings,
// a skipped header row) to Err.
type Files struct{ Out, Err io.Writer }

// Std is Files of the process's standard output and error.
func Std() Files { return Files{Out: os.Stdout, Err: os.Stderr} }

// Fit is `streamkpca fit`; args are its flags.
func (f Files) Fit(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("fit", flag.ContinueOnError)
	learnerSets := configs.LearnerFlags(fs)
	if fl := fs.Lookup("k"); fl != nil { // the service's default is not fit's: k is required
		fl.DefValue, fl.Usage = "", "components to learn (required)"
	}
	if fl := fs.Lookup("features"); fl != nil {
		fl.DefValue, fl.Usage = "", "random or landmarks (default for fit: landmarks for kpca and gha — a file is a bounded data set — random for two views)"
	}
	input := fs.String("input", "", "input file (csv, jsonl, f32le, f64le), - for stdin")
	format := fs.String("format", "", "input format: csv, jsonl, f32le, f64le (default: from the extension)")
	dim := fs.Int("dim", 0, "input dimension (required for f32le/f64le)")
	epochs := fs.Int("epochs", 0, "passes over the input (shuffled after the first); 0: until the held-out score stops rising (one row in 10 held out, then learned)")
	maxEpochs := fs.Int("max-epochs", 100, "with --epochs 0: at most this many passes")
	budget := fs.Duration("time", 10*time.Minute, "with --epochs 0: no pass starts after this long")
	grow := fs.Bool("grow", false, "with --features random (kpca, gha): grow the feature budget past max_features as far as --time pays for (a third of it spent growing)")
	yCols := fs.Int("y-cols", 0, "two-view algorithms: the last N columns of each row are y (ksir: 1, the target)")
	cols := fs.String("cols", "", "columns of the input to learn from, 1-based as cut's -f: 1-64 drops digits' label column; default all")
	out := fs.String("out", "model.skpca", "snapshot file to write")
	model := fs.String("model", "model", "model name stored in the snapshot")
	skipBad := fs.Bool("skip-bad", false, "pass over bad rows (NaN, ragged, text) and say how many, instead of stopping at the first")
	if err := cliflag.Parse(fs, args); err != nil {
		return err
	}
	if *input == "" {
		return errors.New("--input is required (a file, or - for stdin)")
	}
	sets := learnerSets()
	has := func(key string) bool {
		return slices.ContainsFunc(sets, func(s string) bool { return strings.HasPrefix(s, "learner."+key+"=") })
	}
	if !has("k") {
		return errors.New("--k is required: the number of components to learn")
	}
	x, rows, d, err := f.readInput(*input, *format, *dim, *cols, *skipBad)
	if err != nil {
		return err
	}
	if rows == 0 {
		return errors.New("input holds no vectors")
	}
	if !has("features") {
		sets = f.fileFeatures(sets, rows, has("max_features"))
	}
	c, err := configs.Load("", nil, sets...)
	if err != nil {
		return flagTerms(err)
	}
	cfg := c.Learner.Online(*model, 0)
	// The covariance solver's statistics grow as m²: an offline run takes
	// the features per view its time limit and memory bound pay for.
	if !has("max_features") && *yCols > 0 && *yCols < d && cfg.TakesCovarianceBudget() {
		cfg.MaxFeatures = online.CovarianceBudget(online.OfflineCovariance{MaxBytes: c.Learner.MaxModelBytes, Limit: *budget, Passes: *epochs,
			Rows: rows, K: cfg.K, Batch: c.Learner.Batch, Dims: [2]int{d - *yCols, *yCols}})
		fmt.Fprintf(f.Err, "features: %d per view (what --time and learner.max_model_bytes pay for; --max-features to choose)\n", cfg.MaxFeatures)
	}
	start := time.Now()
	pr := progress.New()
	total := float64(rows * *epochs)
	snap, rep, err := online.Fit(ctx, cfg, x, rows, d, online.FitOptions{Epochs: *epochs, MaxEpochs: *maxEpochs, Budget: *budget, Grow: *grow, Batch: c.Learner.Batch, YCols: *yCols,
		Progress: func(e int, seen uint64, feats int) {
			el := time.Since(start)
			if *epochs == 0 {
				pr.Update("pass %d  %d rows  %d features  %.0f rows/s", e+1, seen, feats, float64(seen)/el.Seconds())
				return
			}
			pr.Update("epoch %d/%d  %d rows  %d features  %.0f rows/s%s", e+1, *epochs, seen, feats, float64(seen)/el.Seconds(), progress.ETA(float64(seen), total, el))
		}})
	pr.Done()
	if err != nil {
		if cfg.Algorithm.TwoView() && *yCols == 0 {
			return fmt.Errorf("%s needs --y-cols N: the last N columns of each row are y (%w)", cfg.Algorithm, err)
		}
		return err
	}
	// The model as served: a covariance solver's statistics (m² values
	// per view pair) are for a learner that continues, which fit is not.
	if _, err := snapshot.WriteFile(*out, snap.Served()); err != nil {
		return err
	}
	f.fitReport(*out, cfg, rows, c.Learner.Batch, *epochs, rep, time.Since(start))
	return nil
}

// fileFeatures adds fit's choice of features to sets (the user chose
// none): a file is a bounded data set, so landmark blocks where the
// algorithm takes them (online.FitFeatures), with their count unless
// hasMax; it says what it chose and why.
func (f Files) fileFeatures(sets []string, rows int, hasMax bool) []string {
	alg := "kpca"
	for _, s := range sets {
		if v, ok := strings.CutPrefix(s, "learner.algorithm="); ok {
			alg = v
		}
	}
	if src, n := online.FitFeatures(online.Algorithm(alg), rows); src != "" {
		sets = append(sets, "learner.features="+string(src))
		if n > 0 && !hasMax {
			sets = append(sets, "learner.max_features="+strconv.Itoa(n))
		}
		fmt.Fprintf(f.Err, "features: landmarks (fit's default for a file; --features random for the streaming learner's random features)\n")
	} else if !online.Algorithm(alg).TwoView() {
		// Say why the README's default does not apply.
		fmt.Fprintf(f.Err, "features: random (%d rows, fewer than one landmark block of %d: landmark features need a block of rows; with so few rows exact kernel PCA is the better tool)\n", rows, online.DefaultCovarianceBlockSize)
	}
	return sets
}

// fitReport says what fit wrote (out) and learned, warns of a k the
// file's eigenvalues do not support, and hints at more passes when there
// were too few steps to converge.
func (f Files) fitReport(out string, cfg online.Config, rows, batch, epochs int, rep online.FitReport, took time.Duration) {
	fmt.Fprintf(f.Err, "wrote %s: %s, %d rows (%d samples learned over the passes), %d features, bandwidth %.4g", out, cfg.Algorithm, rows, rep.Samples, rep.Features, rep.Bandwidth)
	if len(rep.Eigenvalues) > 0 {
		fmt.Fprintf(f.Err, ", eigenvalue estimates %.4g", rep.Eigenvalues)
	}
	fmt.Fprintf(f.Err, ", %d batches rejected, %.1fs\n", rep.Rejected, took.Seconds())
	if w := kWarning(cfg.K, rows, rep.Eigenvalues); w != "" {
		fmt.Fprintln(f.Err, "warning: "+w)
	}
	if len(rep.Scores) > 0 {
		fmt.Fprintf(f.Err, "%d passes, stopped by %s; held-out score after each: %.4g\n", rep.Epochs, rep.Stop, rep.Scores)
	}
	// The step rules need steps; the covariance solver's statistics are
	// the file's after one pass.
	if steps := (rows + batch - 1) / batch * epochs; epochs > 0 && steps < 20 && cfg.Solver != online.SolverCovariance {
		fmt.Fprintf(f.Err, "hint: %d learning step(s) (%d rows, batch %d, %d epoch(s)); a small file needs more passes to converge: try --epochs %d\n",
			steps, rows, batch, epochs, max(20, 20*epochs/max(steps, 1)))
	}
}

// Project is `streamkpca project`; args are its flags.
func (f Files) Project(args []string) error {
	fs := flag.NewFlagSet("project", flag.ContinueOnError)
	modelPath := fs.String("model", "", "snapshot file")
	input := fs.String("input", "-", "input file, - for stdin")
	format := fs.String("format", "", "input format (default: from the extension, csv for stdin)")
	view := fs.String("view", "x", "view to project: x or y (two-view models)")
	cols := fs.String("cols", "", "columns of the input to project, 1-based as cut's -f (e.g. 1-64); default all")
	dim := fs.Int("dim", 0, "the record width of f32le/f64le input (default: the model's dimension)")
	if err := cliflag.Parse(fs, args); err != nil {
		return err
	}
	if *modelPath == "" {
		return errors.New("--model is required: the snapshot file to project with (from fit, or a service's snapshot.dir)")
	}
	snap, _, err := snapshot.Load(*modelPath)
	if err != nil {
		return notSnapshot(*modelPath, err)
	}
	m, err := snapshot.NewModel(snap, snapshot.ModelOptions{})
	if err != nil {
		return err
	}
	v := 0
	if *view == "y" {
		v = 1
	}
	d := m.Dim(min(v, m.Views()-1))
	width := 0 // text input: from the first row
	if ingest.FileFormat(*input, ingest.Format(*format)).Raw() {
		width = d
		if *dim > 0 {
			width = *dim
		}
	}
	x, rows, got, err := f.readInput(*input, *format, width, *cols, false)
	if err != nil {
		return err
	}
	if rows == 0 {
		return fmt.Errorf("%s holds no vectors to project", inputName(*input))
	}
	if got != d {
		return fmt.Errorf("the input has %d columns, the model's view %s %d; choose them with --cols", got, *view, d)
	}
	w := bufio.NewWriter(f.Out)
	defer w.Flush()
	k := m.K()
	const chunk = 1024
	for s := 0; s < rows; s += chunk {
		n := min(chunk, rows-s)
		p, err := m.ProjectView(v, nil, x[s*d:(s+n)*d])
		if err != nil {
			return err
		}
		for r := 0; r < n; r++ {
			for q := 0; q < k; q++ {
				if q > 0 {
					w.WriteByte(',')
				}
				w.WriteString(strconv.FormatFloat(p[r*k+q], 'g', -1, 64))
			}
			w.WriteByte('\n')
		}
	}
	return nil
}

// Inspect is `streamkpca inspect`; args are its flags and the file.
func (f Files) Inspect(args []string) error {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: streamkpca inspect FILE.skpca\n\nPrints the snapshot's file size, feature count and header as JSON. A model\nwith landmark features holds rows of the data it learned from: the output\nsays how many (data_rows) and warns.")
	}
	if err := cliflag.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("usage: streamkpca inspect FILE")
	}
	snap, data, err := snapshot.Load(fs.Arg(0))
	if err != nil {
		return notSnapshot(fs.Arg(0), err)
	}
	out := struct {
		File     string           `json:"file"`
		Bytes    int              `json:"bytes"`
		Features int              `json:"features"`
		DataRows int              `json:"data_rows"`
		Warning  string           `json:"warning,omitempty"`
		Header   *snapshot.Header `json:"header"`
	}{File: fs.Arg(0), Bytes: len(data), Features: snap.Header.Features(), Header: &snap.Header}
	for v, view := range snap.Header.Views {
		if view.Landmarks() {
			seeds, bs := snap.Header.ViewSeeds(v)
			out.DataRows += len(seeds) * bs
		}
	}
	if out.DataRows > 0 {
		out.Warning = fmt.Sprintf("this model holds %d rows of the data it learned from (its landmark points, standardised if standardize was on): treat the file as you treat the data", out.DataRows)
		fmt.Fprintln(f.Err, "warning: "+out.Warning)
	}
	enc := json.NewEncoder(f.Out)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// readInput reads a file for fit or project, says once that a header row
// was skipped (and how many bad rows, with skipBad: fit's --skip-bad),
// and keeps the columns --cols names.
func (f Files) readInput(path, format string, dim int, cols string, skipBad bool) ([]float64, int, int, error) {
	read := ingest.ReadFile
	if skipBad {
		read = ingest.ReadFileSkipping
	}
	tb, err := read(path, ingest.Format(format), dim)
	if err != nil {
		if !skipBad {
			err = fmt.Errorf("%w (--skip-bad passes over bad rows)", err)
		}
		return nil, 0, 0, err
	}
	if n := tb.SkippedRows(); n > 0 {
		fmt.Fprintf(f.Err, "skipped %d bad rows of %d (%v); the first, at line %d: %v\n", n, n+tb.Rows, tb.Skipped, tb.FirstBadAt, tb.FirstBadErr)
	}
	if tb.Header != "" {
		h := tb.Header
		if len(h) > 60 {
			h = h[:60] + "…"
		}
		fmt.Fprintf(f.Err, "skipped the first line as a header row: %q\n", h)
	}
	if cols == "" {
		return tb.X, tb.Rows, tb.Dim, nil
	}
	x, d, err := ingest.SelectColumns(tb.X, tb.Rows, tb.Dim, cols)
	return x, tb.Rows, d, err
}

// flagTerms puts a learner setting's error in fit's terms: the setting
// learner.max_features is the flag --max-features.
func flagTerms(err error) error {
	msg := learnerKey.ReplaceAllStringFunc(err.Error(), func(m string) string {
		return "--" + strings.ReplaceAll(strings.TrimPrefix(m, "learner."), "_", "-")
	})
	msg = strings.ReplaceAll(msg, "configs: flags: --set ", "")
	return errors.New(msg)
}

var learnerKey = regexp.MustCompile(`learner\.[a-z_0-9]+`)

// kWarning says when k asks for more components than the data supports:
// more than rows − 1, or eigenvalue estimates that are zero to rounding
// (their components carry no variance; "" when all is well).
func kWarning(k, rows int, eig []float64) string {
	if k >= rows {
		return fmt.Sprintf("k = %d but the input has %d rows: at most %d components carry variance; use a smaller --k", k, rows, max(rows-1, 1))
	}
	if len(eig) == 0 || !(eig[0] > 0) {
		return ""
	}
	zero := 0
	for _, v := range eig {
		if v < 1e-10*eig[0] {
			zero++
		}
	}
	if zero > 0 {
		return fmt.Sprintf("the last %d of k = %d eigenvalue estimates are zero to rounding (largest %.3g): the data supports about %d components; use a smaller --k", zero, k, eig[0], k-zero)
	}
	return ""
}

// notSnapshot puts a snapshot.Load error in the user's terms.
func notSnapshot(path string, err error) error {
	switch {
	case errors.Is(err, snapshot.ErrMagic):
		return fmt.Errorf("%s is not a streamkpca snapshot (.skpca files are written by fit and by the service's snapshot.dir)", path)
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("%s: no such file", path)
	}
	return err
}

// inputName names an input for messages: the path, or standard input.
func inputName(path string) string {
	if path == "-" {
		return "standard input"
	}
	return path
}
