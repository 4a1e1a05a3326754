// Package plot draws streamkpca's figures (`streamkpca plot`): learned
// against closed-form eigenfunctions, convergence curves, the methods of
// `bench compare` side by side, projections and canonical correlations,
// with gonum's plot package.
package plot

import (
	"encoding/json"
	"errors"
	"fmt"
	"image/color"
	"math"
	"math/rand/v2"
	"os"
	"strings"

	"gonum.org/v1/gonum/mat"
	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/streamkpca/streamkpca/ingest"
	"github.com/streamkpca/streamkpca/internal/synth"
	"github.com/streamkpca/streamkpca/internal/tools/bench"
	"github.com/streamkpca/streamkpca/snapshot"
)

// Save writes p as a PNG of the given size in centimetres.
func Save(p *gplot.Plot, widthCm, heightCm float64, path string) error {
	if err := p.Save(vg.Length(widthCm)*vg.Centimeter, vg.Length(heightCm)*vg.Centimeter, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// loadModel reads a snapshot file into a Model.
func loadModel(path string) (*snapshot.Model, error) {
	if path == "" {
		return nil, errors.New("--model is required")
	}
	snap, _, err := snapshot.Load(path)
	if err != nil {
		return nil, err
	}
	return snapshot.NewModel(snap, snapshot.ModelOptions{})
}

var palette = []color.Color{
	color.RGBA{31, 119, 180, 255}, color.RGBA{255, 127, 14, 255}, color.RGBA{44, 160, 44, 255},
	color.RGBA{214, 39, 40, 255}, color.RGBA{148, 103, 189, 255}, color.RGBA{140, 86, 75, 255},
	color.RGBA{227, 119, 194, 255}, color.RGBA{127, 127, 127, 255}, color.RGBA{188, 189, 34, 255},
	color.RGBA{23, 190, 207, 255},
}

// Eigenfunctions draws the learned functions of a 1-D model, rotated
// onto the closed-form eigenfunctions of the hermite operator (x ~ N(0, s²),
// the model's bandwidth) by least squares on a sample of the stream — the
// learned subspace is only defined up to a rotation — against the truth.
func Eigenfunctions(path string, s float64) (*gplot.Plot, error) {
	m, err := loadModel(path)
	if err != nil {
		return nil, err
	}
	h := m.Header()
	if m.Dim(0) != 1 || h.Views[0].Kernel.Family != "gaussian" {
		return nil, errors.New("eigenfunctions needs a 1-D gaussian model (e.g. from `streamkpca demo --dir` or fit on hermite data)")
	}
	grid, aligned, tg, err := eigenCurves(m, s)
	if err != nil {
		return nil, err
	}
	k := m.K()
	p := gplot.New()
	p.Title.Text = fmt.Sprintf("Learned eigenfunctions (lines) vs closed form (dashed); %d samples, %d features", h.SamplesSeen, h.Features())
	p.X.Label.Text = "x"
	p.Y.Label.Text = "φ(x), unit L²(p) norm"
	for q := 0; q < k; q++ {
		learned, exact := make(plotter.XYs, len(grid)), make(plotter.XYs, len(grid))
		for i, x := range grid {
			learned[i] = plotter.XY{X: x, Y: aligned.At(i, q)}
			exact[i] = plotter.XY{X: x, Y: tg.At(i, q)}
		}
		c := palette[q%len(palette)]
		l, _ := plotter.NewLine(learned)
		l.Color, l.Width = c, vg.Points(2)
		e, _ := plotter.NewLine(exact)
		e.Color, e.Dashes = c, []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(l, e)
		p.Legend.Add(fmt.Sprintf("φ%d learned", q), l)
		p.Legend.Add(fmt.Sprintf("φ%d exact", q), e)
	}
	return p, nil // legend bottom right, where the curves are flat
}

// eigenCurves evaluates m's functions on a grid over ±3s, rotated onto
// the closed form by least squares on 4,000 points of the stream (x ~
// N(0, s²), the model's bandwidth), and the closed form on the grid.
func eigenCurves(m *snapshot.Model, s float64) (grid []float64, aligned, truth *mat.Dense, err error) {
	k := m.K()
	herm := synth.Hermite{S: []float64{s}, L: m.Header().Views[0].Kernel.Bandwidth}
	const n = 4000
	xs := make([]float64, n)
	herm.Sample(xs, rand.New(rand.NewPCG(1, 1)))
	f, err := m.Project(nil, xs)
	if err != nil {
		return nil, nil, nil, err
	}
	var rot mat.Dense // F·R ≈ T in least squares
	if err := rot.Solve(mat.NewDense(n, k, f), herm.Eigenfunctions(xs, n, k)); err != nil {
		return nil, nil, nil, fmt.Errorf("align to the closed form: %w", err)
	}
	grid = make([]float64, 241)
	for i := range grid {
		grid[i] = -3*s + 6*s*float64(i)/240
	}
	fg, err := m.Project(nil, grid)
	if err != nil {
		return nil, nil, nil, err
	}
	aligned = new(mat.Dense)
	aligned.Mul(mat.NewDense(len(grid), k, fg), &rot)
	return grid, aligned, herm.Eigenfunctions(grid, len(grid), k), nil
}

// errorPlot returns an empty log–log plot of the subspace error against x.
func errorPlot(title, x string) *gplot.Plot {
	p := gplot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = "subspace error 1 − cos²θ_max"
	p.X.Scale, p.Y.Scale = gplot.LogScale{}, gplot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = gplot.LogTicks{Prec: -1}, gplot.LogTicks{Prec: -1}
	return p
}

// readBench reads the JSON that `streamkpca bench <name>` wrote at path
// into v, and reports it as not such a result unless ok says it is.
func readBench(path, name string, v any, ok func() bool) error {
	if path == "" {
		return fmt.Errorf("--bench is required (the JSON of `streamkpca bench %s`)", name)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil || !ok() {
		return fmt.Errorf("%s: not a bench %s result with a curve (%v)", path, name, err)
	}
	return nil
}

// Convergence draws a bench JSON's error curve on log–log axes with a
// 1/t reference line through its first point.
func Convergence(path string) (*gplot.Plot, error) {
	var r bench.HermiteResult
	if err := readBench(path, "hermite", &r, func() bool { return len(r.Curve) >= 2 }); err != nil {
		return nil, err
	}
	p := errorPlot(fmt.Sprintf("Convergence: hermite, k = %d, %d-D, %d features", r.K, r.Dims, r.MaxFeatures), "points")
	pts, ref := convergenceSeries(r)
	if len(pts) == 0 {
		return nil, fmt.Errorf("%s: no positive error to draw", path)
	}
	l, sc, err := plotter.NewLinePoints(pts)
	if err != nil {
		return nil, err
	}
	l.Color, l.Width = palette[0], vg.Points(2)
	sc.GlyphStyle.Color = palette[0]
	rl, _ := plotter.NewLine(ref)
	rl.Color, rl.Dashes = palette[7], []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(l, sc, rl)
	p.Legend.Add("streamkpca (DSGD)", l, sc)
	p.Legend.Add("1/t", rl)
	p.Legend.Top = true
	return p, nil
}

// convergenceSeries is the curve's (points, error) where the error is
// positive, and a 1/t line through its first point.
func convergenceSeries(r bench.HermiteResult) (pts, ref plotter.XYs) {
	for _, c := range r.Curve {
		if c.Error > 0 {
			pts = append(pts, plotter.XY{X: float64(c.Points), Y: c.Error})
		}
	}
	for _, q := range pts {
		ref = append(ref, plotter.XY{X: q.X, Y: pts[0].Y * pts[0].X / q.X})
	}
	return pts, ref
}

// Drift draws `bench drift`'s curves: each learner's subspace error
// against the points of the stream (linear axis, log error), a dashed line
// at the change and a tick where each learner detected one.
func Drift(path string) (*gplot.Plot, error) {
	var r bench.DriftResult
	if err := readBench(path, "drift", &r, func() bool { return len(r.Runs) > 0 && len(r.Runs[0].Curve) >= 2 }); err != nil {
		return nil, err
	}
	p := gplot.New()
	p.Title.Text = fmt.Sprintf("Following a change: case %s, k = %d, %d points on each side", r.Case, r.K, r.Points)
	p.X.Label.Text, p.Y.Label.Text = "points of the stream", "subspace error (current distribution)"
	p.Y.Scale, p.Y.Tick.Marker = gplot.LogScale{}, gplot.LogTicks{Prec: -1}
	series, lo, hi := driftSeries(r)
	if len(series) == 0 {
		return nil, fmt.Errorf("%s: no positive error to draw", path)
	}
	for i, s := range series {
		l, err := plotter.NewLine(s.pts)
		if err != nil {
			return nil, err
		}
		l.Color, l.Width = palette[i%len(palette)], vg.Points(2)
		p.Add(l)
		p.Legend.Add(s.name, l)
	}
	change, _ := plotter.NewLine(plotter.XYs{{X: float64(r.Points), Y: lo}, {X: float64(r.Points), Y: hi}})
	change.Color, change.Dashes = palette[7], []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(change)
	p.Legend.Add("the change", change)
	p.Legend.Top = true
	p.Y.Min, p.Y.Max = lo/2, hi*1.5
	return p, nil
}

// driftSeries is each run's (points, error) where the error is positive,
// named with the first change it found, and the errors' range.
func driftSeries(r bench.DriftResult) (series []compareLine, lo, hi float64) {
	lo, hi = math.Inf(1), 0.0
	for _, run := range r.Runs {
		var pts plotter.XYs
		for _, c := range run.Curve {
			if c.Error > 0 {
				pts = append(pts, plotter.XY{X: float64(c.Points), Y: c.Error})
				lo, hi = math.Min(lo, c.Error), math.Max(hi, c.Error)
			}
		}
		if len(pts) == 0 {
			continue
		}
		name := run.Name
		if len(run.Detected) > 0 {
			name += fmt.Sprintf(" (change found at %d)", run.Detected[0])
		}
		series = append(series, compareLine{name: name, pts: pts})
	}
	return series, lo, hi
}

// Scatter draws the first two projections of every input row,
// coloured by an optional integer label column (0-based; negative: none).
func Scatter(path, input string, labelCol int) (*gplot.Plot, error) {
	m, err := loadModel(path)
	if err != nil {
		return nil, err
	}
	if m.K() < 2 {
		return nil, errors.New("scatter needs a model with k ≥ 2")
	}
	if input == "" {
		return nil, errors.New("--input is required")
	}
	d := m.Dim(0)
	width := d
	if labelCol >= 0 {
		width++
	}
	tb, err := ingest.ReadFile(input, "", width)
	if err != nil {
		if ingest.Reason(err) == ingest.ReasonDimension {
			return nil, fmt.Errorf("%w (the model takes %d values; with a label column the rows have %d: --label-col N names it, 1-based)", err, d, d+1)
		}
		return nil, err
	}
	if labelCol >= width {
		return nil, fmt.Errorf("--label-col %d: the rows have %d columns (the model's %d values and the label)", labelCol+1, width, d)
	}
	rows := tb.Rows
	x, labels := splitLabel(tb.X, rows, width, labelCol)
	proj, err := m.Project(nil, x)
	if err != nil {
		return nil, err
	}
	k := m.K()
	groups := map[int]plotter.XYs{}
	for r := 0; r < rows; r++ {
		groups[labels[r]] = append(groups[labels[r]], plotter.XY{X: proj[r*k], Y: proj[r*k+1]})
	}
	p := gplot.New()
	p.Title.Text = fmt.Sprintf("Projections on components 1 and 2 (%s, %d rows)", m.Header().Algorithm, rows)
	p.X.Label.Text, p.Y.Label.Text = "component 1", "component 2"
	for lab := 0; lab < 1000 && len(groups) > 0; lab++ {
		g, ok := groups[lab]
		if !ok {
			continue
		}
		delete(groups, lab)
		sc, _ := plotter.NewScatter(g)
		sc.GlyphStyle.Color, sc.GlyphStyle.Radius = palette[lab%len(palette)], vg.Points(1.5)
		p.Add(sc)
		if labelCol >= 0 {
			p.Legend.Add(fmt.Sprint(lab), sc)
		}
	}
	return p, nil
}

// splitLabel takes column labelCol (negative: none) out of the rows×width
// table raw: the model's values, and each row's label (0 with none).
func splitLabel(raw []float64, rows, width, labelCol int) (x []float64, labels []int) {
	x = make([]float64, 0, rows*width)
	labels = make([]int, rows)
	for r := 0; r < rows; r++ {
		for c, v := range raw[r*width : (r+1)*width] {
			if c == labelCol {
				labels[r] = int(v)
				continue
			}
			x = append(x, v)
		}
	}
	return x, labels
}

// Correlations draws the held-out canonical correlations per component
// of a two-view model on paired data.
func Correlations(path, input string, yCols int) (*gplot.Plot, error) {
	m, err := loadModel(path)
	if err != nil {
		return nil, err
	}
	if m.Views() != 2 {
		return nil, errors.New("correlations needs a two-view model (ksvd, kcca, ksir)")
	}
	dx, dy := m.Dim(0), m.Dim(1)
	if yCols != dy {
		return nil, fmt.Errorf("--y-cols %d, the model's y has %d", yCols, dy)
	}
	tb, err := ingest.ReadFile(input, "", dx+dy)
	if err != nil {
		return nil, err
	}
	cc, err := correlations(m, tb.X, tb.Rows)
	if err != nil {
		return nil, err
	}
	k := m.K()
	p := gplot.New()
	p.Title.Text = fmt.Sprintf("Held-out canonical correlations (%s), sum %.3f", m.Header().Algorithm, synth.Sum(cc))
	p.Y.Label.Text = "correlation"
	p.X.Label.Text = "component"
	bars, err := plotter.NewBarChart(plotter.Values(cc), vg.Points(40))
	if err != nil {
		return nil, err
	}
	bars.Color = palette[0]
	p.Add(bars)
	p.Y.Min, p.Y.Max = 0, math.Max(1, cc[0])
	p.X.Min, p.X.Max = -0.7, float64(k)-0.3
	names := make([]string, k)
	for i := range names {
		names[i] = fmt.Sprint(i + 1)
	}
	p.NominalX(names...)
	return p, nil
}

// correlations are the canonical correlations of a two-view model's
// functions on rows pairs (each row x then y).
func correlations(m *snapshot.Model, raw []float64, rows int) ([]float64, error) {
	dx, dy := m.Dim(0), m.Dim(1)
	x, y := make([]float64, 0, rows*dx), make([]float64, 0, rows*dy)
	for r := 0; r < rows; r++ {
		x = append(x, raw[r*(dx+dy):r*(dx+dy)+dx]...)
		y = append(y, raw[r*(dx+dy)+dx:(r+1)*(dx+dy)]...)
	}
	u, err := m.ProjectView(0, nil, x)
	if err != nil {
		return nil, err
	}
	v, err := m.ProjectView(1, nil, y)
	if err != nil {
		return nil, err
	}
	k := m.K()
	return synth.CanonicalCorrelations(mat.NewDense(rows, k, u), mat.NewDense(rows, k, v)), nil
}

// Compare draws a `bench compare` JSON: each method's held-out subspace
// error against its compute seconds, log–log, one line per method, with
// a dashed vertical line at the budget.
func Compare(path string) (*gplot.Plot, error) {
	var r bench.CompareResult
	if err := readBench(path, "compare", &r, func() bool { return r.Bench == "compare" }); err != nil {
		return nil, err
	}
	series := compareSeries(r)
	if len(series) == 0 {
		return nil, fmt.Errorf("%s: no method has a checkpoint with positive seconds and error", path)
	}
	p := errorPlot(fmt.Sprintf("bench compare --case %s: %d points\n%s", r.Case, r.Points, r.About), "compute seconds")
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, s := range series {
		l, sc, err := plotter.NewLinePoints(s.pts)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
		c := palette[i%len(palette)]
		l.Color, l.Width = c, vg.Points(1.5)
		sc.GlyphStyle.Color, sc.GlyphStyle.Radius = c, vg.Points(1.5)
		p.Add(l, sc)
		p.Legend.Add(s.name, l, sc)
		for _, q := range s.pts {
			lo, hi = math.Min(lo, q.Y), math.Max(hi, q.Y)
		}
	}
	if r.BudgetSeconds > 0 {
		bl, _ := plotter.NewLine(plotter.XYs{{X: r.BudgetSeconds, Y: lo}, {X: r.BudgetSeconds, Y: hi}})
		bl.Color, bl.Dashes = palette[7], []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(bl)
		p.Legend.Add(fmt.Sprintf("budget (%.0f s)", r.BudgetSeconds), bl)
	}
	p.Legend.Left = true // errors fall to the right: the lower left is free
	return p, nil
}

// compareLine is one method's curve in Compare.
type compareLine struct {
	name string
	pts  plotter.XYs
}

// compareSeries turns each method of r into a curve of (seconds, error),
// leaving out the checkpoints a log axis cannot show (zero seconds or
// error, NaN); a method with none left is left out.
func compareSeries(r bench.CompareResult) []compareLine {
	var out []compareLine
	for _, m := range r.Methods {
		var pts plotter.XYs
		for _, c := range m.Curve {
			if c.Seconds > 0 && c.Error > 0 && !math.IsInf(c.Error, 0) {
				pts = append(pts, plotter.XY{X: c.Seconds, Y: c.Error})
			}
		}
		if len(pts) == 0 {
			continue
		}
		name := m.Method
		if m.Size > 0 && !strings.Contains(name, fmt.Sprint(m.Size)) {
			name = fmt.Sprintf("%s (%d %s)", name, m.Size, m.SizeOf)
		}
		out = append(out, compareLine{name: name, pts: pts})
	}
	return out
}

// Cluster draws `bench cluster`'s modelled curve: each exchange's group
// rate as a share of Instances × one instance's, against the group's size
// (log axis), one line per d and exchange, and the measured groups as
// points.
func Cluster(path string) (*gplot.Plot, error) {
	var r bench.ClusterResult
	if err := readBench(path, "cluster", &r, func() bool { return len(r.Model) >= 2 }); err != nil {
		return nil, err
	}
	p := gplot.New()
	p.Title.Text = fmt.Sprintf("One model on n instances: rate / (n × one instance), link %.3g GB/s", r.LinkBytesPerSec/1e9)
	p.X.Label.Text, p.Y.Label.Text = "instances", "efficiency"
	p.X.Scale, p.X.Tick.Marker = gplot.LogScale{}, gplot.LogTicks{Prec: -1}
	type key struct {
		d        int
		exchange string
	}
	var keys []key
	lines := map[key]plotter.XYs{}
	for _, m := range r.Model {
		k := key{m.D, m.Exchange}
		if _, ok := lines[k]; !ok {
			keys = append(keys, k)
		}
		lines[k] = append(lines[k], plotter.XY{X: float64(m.Instances), Y: m.Efficiency})
	}
	for i, k := range keys {
		l, err := plotter.NewLine(lines[k])
		if err != nil {
			return nil, err
		}
		l.Color, l.Width = palette[i%len(palette)], vg.Points(2)
		if k.exchange != "reduce-scatter" {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("d = %d, %s (model)", k.d, k.exchange), l)
	}
	measured := clusterMeasured(r)
	if len(measured) > 0 {
		sc, err := plotter.NewScatter(measured)
		if err != nil {
			return nil, err
		}
		sc.GlyphStyle.Color = palette[7]
		p.Add(sc)
		p.Legend.Add("measured on this machine (members share its cores)", sc)
	}
	p.Y.Min, p.Y.Max = 0, 1.05
	p.Legend.Top, p.Legend.Left = false, true
	return p, nil
}

// clusterMeasured is each measured group's efficiency: its rate over
// members × the rate of one instance alone (the row of 0 members) at the
// same d; a d with no such row is left out.
func clusterMeasured(r bench.ClusterResult) plotter.XYs {
	var measured plotter.XYs
	base := map[int]float64{}
	for _, row := range r.Rows {
		if row.Members == 0 {
			base[row.D] = row.PointsPerSec
		}
	}
	for _, row := range r.Rows {
		if row.Members > 0 && base[row.D] > 0 {
			measured = append(measured, plotter.XY{X: float64(row.Members), Y: row.PointsPerSec / (float64(row.Members) * base[row.D])})
		}
	}
	return measured
}
