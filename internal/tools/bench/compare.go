package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/streamkpca/streamkpca/features"
	"github.com/streamkpca/streamkpca/internal/blasimpl"
	"github.com/streamkpca/streamkpca/internal/synth"
	"github.com/streamkpca/streamkpca/internal/tools/baseline"
	"github.com/streamkpca/streamkpca/online"
	"gonum.org/v1/gonum/mat"
)

// compareCase is one stream of `bench compare`.
type compareCase struct {
	name  string
	h     synth.Hermite
	k     int
	about string
	// streamkpca's feature budget for the case (a flag overrides it); the
	// step schedule is the learner's default unless a flag sets it.
	features int
}

func compareCases() map[string]compareCase {
	slow := synth.Hermite16()
	slow.L /= 4
	return map[string]compareCase{
		"hermite1":  {"hermite1", synth.Hermite1D(), 3, "1-D hermite, s = 1, ℓ = 1, k = 3", 65536},
		"hermite16": {"hermite16", synth.Hermite16(), 5, "16-D hermite product form, ℓ = 2.5 (≈ median trick), k = 5", 16384},
		// k = 21, not 20: λ₂₀ = 0.002426 and λ₂₁ = 0.002404 differ by 0.9%,
		// so the top-20 span is ill-posed for every method; λ₂₁ → λ₂₂ is
		// a 7% gap (0.002404 → 0.002235).
		"slow": {"slow", slow, 21, "16-D hermite, ℓ = 0.625 (a quarter of the median trick): slowly decaying spectrum, k = 21", 65536},
	}
}

// CompareCheckpoint is one point of a method's error curve.
type CompareCheckpoint struct {
	Points  int     `json:"points"`
	Seconds float64 `json:"seconds"`
	Error   float64 `json:"subspace_error"`
}

// CompareMethod is one row of `bench compare`.
type CompareMethod struct {
	Method        string  `json:"method"`
	Size          int     `json:"size"`
	SizeOf        string  `json:"size_of"`
	To1e2         float64 `json:"seconds_to_1e-2"` // -1: not reached
	To1e3         float64 `json:"seconds_to_1e-3"`
	ErrorAtBudget float64 `json:"error_at_budget"` // NaN (null): no model within the budget
	ErrorAtEnd    float64 `json:"error_at_end"`
	Seconds       float64 `json:"seconds"`
	Points        int     `json:"points"` // streamed when the method stopped
	// PeakMiB is the child process's peak RSS (isolated runs) or the
	// sampled peak of the heap above its level at the start.
	PeakMiB float64             `json:"peak_mib"`
	PeakOf  string              `json:"peak_of"`
	Notes   string              `json:"notes,omitempty"`
	Curve   []CompareCheckpoint `json:"curve"`
}

// CompareResult is the JSON printed by `bench compare`.
type CompareResult struct {
	Bench         string  `json:"bench"`
	Case          string  `json:"case"`
	About         string  `json:"about"`
	K             int     `json:"k"`
	Points        int     `json:"points"`
	BudgetSeconds float64 `json:"budget_seconds"`
	// IdleRSSMiB is the peak RSS of a child that loads the binary and the
	// held-out truth and learns nothing: subtracted from each method's.
	IdleRSSMiB float64         `json:"idle_rss_mib,omitempty"`
	Methods    []CompareMethod `json:"methods"`
	// PeakRSSMiB is this process's peak RSS when RunCompare returned
	// (VmHWM; 0 where /proc is not there): what a child of
	// CompareIsolated says of itself.
	PeakRSSMiB float64 `json:"peak_rss_mib,omitempty"`
}

// MarshalJSON writes NaN and ±Inf as null.
func (m CompareMethod) MarshalJSON() ([]byte, error) {
	type plain CompareMethod
	out := struct {
		plain
		ErrorAtBudget *float64 `json:"error_at_budget"`
	}{plain: plain(m)}
	if !math.IsNaN(m.ErrorAtBudget) {
		out.ErrorAtBudget = &m.ErrorAtBudget
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads null error_at_budget back as NaN.
func (m *CompareMethod) UnmarshalJSON(b []byte) error {
	type plain CompareMethod
	aux := struct {
		*plain
		ErrorAtBudget *float64 `json:"error_at_budget"`
	}{plain: (*plain)(m)}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	m.ErrorAtBudget = math.NaN()
	if aux.ErrorAtBudget != nil {
		m.ErrorAtBudget = *aux.ErrorAtBudget
	}
	return nil
}

// CompareConfig configures RunCompare. Zero values mean the default.
type CompareConfig struct {
	// Case: hermite1, hermite16 or slow. Default: hermite16.
	Case string
	// Points streamed. Default: 1,000,000.
	Points int
	// Budget: each method's error is reported within this much compute.
	// Default: 30 s.
	Budget time.Duration
	// MaxTime stops a method once its clock passes it (0: the whole
	// stream).
	MaxTime time.Duration
	// K overrides the case's number of components.
	K int
	// Methods to run, in order: dsgd, dsgd-landmarks, rff, nystrom, exact;
	// name=size overrides the size. Default: dsgd, rff, nystrom, exact.
	Methods []string
	// DSGDFeatures is streamkpca's feature budget (0: the case's).
	DSGDFeatures int
	// Learner sets streamkpca's Solver, Theta0, Theta1, BlockSize,
	// KeepBytes, Precision, Compute and Center (zero values: the
	// learner's defaults). With Center the truth is exact centred kernel
	// PCA of ExactN fresh points of the stream's distribution (the
	// centred operator has no closed form here), and only streamkpca and
	// exact kernel PCA (centred too) run.
	Learner online.Config
	// RFFFeatures, Landmarks and ExactN size the baselines. Defaults:
	// 4,096, 512, 2,000.
	RFFFeatures, Landmarks, ExactN int
	// Seed of the stream and the features. Default: 1.
	Seed uint64
	// Progress, if set, is called at every checkpoint of every method.
	Progress func(points, stop int, err, seconds float64)
}

// RunCompare runs streamkpca and the baselines of internal/tools/baseline on
// the same stream (same seed, same batches) one after the other in this
// process, scoring each against the closed-form eigenfunctions on the same
// held-out sample at the same checkpoints. A method's clock counts its
// work on the stream up to a checkpoint plus the one Fit that produces
// its model there (earlier Fits are not charged; scoring never is).
func RunCompare(ctx context.Context, cfg CompareConfig) (CompareResult, error) {
	orDefault(&cfg.Case, "hermite16")
	orDefault(&cfg.Points, 1_000_000)
	orDefault(&cfg.Budget, 30*time.Second)
	orDefault(&cfg.RFFFeatures, 4096)
	orDefault(&cfg.Landmarks, 512)
	orDefault(&cfg.ExactN, 2000)
	orDefault(&cfg.Seed, 1)
	if len(cfg.Methods) == 0 {
		cfg.Methods = []string{"dsgd", "rff", "nystrom", "exact"}
	}
	var res CompareResult
	c, ok := compareCases()[cfg.Case]
	if !ok {
		return res, fmt.Errorf("unknown case %q (known: hermite1, hermite16, slow)", cfg.Case)
	}
	if cfg.K > 0 {
		c.k = cfg.K
	}
	growDSGD := cfg.DSGDFeatures == 0 // defaults: the budget grows within the time budget
	orDefault(&cfg.DSGDFeatures, c.features)
	d := c.h.Dim()
	kern := features.Kernel{Family: features.Gaussian, Bandwidth: c.h.L}
	res = CompareResult{Bench: "compare", Case: c.name, About: c.about, K: c.k, Points: cfg.Points, BudgetSeconds: cfg.Budget.Seconds()}

	hrng := rand.New(rand.NewPCG(cfg.Seed, 99))
	const held = 2000
	xh := make([]float64, held*d)
	c.h.Sample(xh, hrng)
	truth := c.h.Eigenfunctions(xh, held, c.k)
	if cfg.Learner.Center {
		var err error
		if truth, err = centredTruth(c.h, kern, c.k, cfg.ExactN, cfg.Seed, xh, held); err != nil {
			return res, err
		}
		for _, m := range cfg.Methods {
			if name, _, _ := strings.Cut(strings.TrimSpace(m), "="); name != "dsgd" && name != "exact" {
				return res, fmt.Errorf("--center: method %q learns the uncentred operator; only dsgd and exact", name)
			}
		}
		res.About += fmt.Sprintf("; centred, against exact centred kernel PCA of %d points", cfg.ExactN)
	}
	out := make([]float64, held*c.k)
	score := func(m baseline.Method) float64 {
		m.Eval(out, xh, held)
		return synth.SubspaceError(mat.NewDense(held, c.k, out), truth)
	}

	for _, name := range cfg.Methods {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		name, sizeArg, sized := strings.Cut(strings.TrimSpace(name), "=")
		size := 0
		if sized {
			v, err := strconv.Atoi(sizeArg)
			if err != nil || v < 1 {
				return res, fmt.Errorf("--methods: %q: want name=size with a positive size", name+"="+sizeArg)
			}
			size = v
		}
		pick := func(flagValue int) int {
			if sized {
				return size
			}
			return flagValue
		}
		var (
			m      baseline.Method
			sizeOf string
			stop   = cfg.Points
			closer func()
			grown  func() (int, string) // the budget a growing learner reached
		)
		switch name {
		case "dsgd", "dsgd-landmarks":
			lcfg := online.Config{Model: "compare", K: c.k, Kernel: kern,
				MaxFeatures: pick(cfg.DSGDFeatures), BlockSize: cfg.Learner.BlockSize, Solver: cfg.Learner.Solver, Theta0: cfg.Learner.Theta0, Theta1: cfg.Learner.Theta1, Average: cfg.Learner.Average, Seed: cfg.Seed, Precision: cfg.Learner.Precision, Compute: cfg.Learner.Compute, KeepBytes: cfg.Learner.KeepBytes, Center: cfg.Learner.Center}
			if name == "dsgd-landmarks" {
				lcfg.Features, lcfg.MaxFeatures = online.FeaturesLandmarks, pick(0)
			}
			l, err := online.New(lcfg)
			if err != nil {
				return res, err
			}
			if cfg.Learner.Compute == online.ComputeBLAS {
				blasimpl.SetThreads(1) // the learner's workers each call the BLAS
			}
			lc := l.Config()
			dm := newDSGDMethod(l)
			if name == "dsgd" && growDSGD && !sized && cfg.Budget > 0 {
				// Defaults: the budget grows with the run's time limit
				// (online.Growth), from the case's.
				dm.grow = &online.Growth{Limit: cfg.Budget}
				grown = func() (int, string) {
					return l.MaxFeatures(), fmt.Sprintf("features (grown from %d within the %v budget)", lc.MaxFeatures, cfg.Budget)
				}
			}
			m, size, sizeOf, closer = dm, lc.MaxFeatures, "features (max)", l.Close
			name = fmt.Sprintf("streamkpca (%s, θ₀ = %g, θ₁ = %g)", lc.Solver, lc.Theta0, lc.Theta1)
			if lc.Features == online.FeaturesLandmarks {
				sizeOf = "landmarks (max)"
				name = fmt.Sprintf("streamkpca, landmark blocks (%s, θ₀ = %g, θ₁ = %g)", lc.Solver, lc.Theta0, lc.Theta1)
			}
			if cfg.Learner.Precision == online.Float32 || cfg.Learner.Compute == online.ComputeBLAS {
				name = fmt.Sprintf("streamkpca %s/%s (%s, θ₀ = %g, θ₁ = %g)", cfg.Learner.Precision, cfg.Learner.Compute, lc.Solver, lc.Theta0, lc.Theta1)
			}
			if cfg.Learner.BlockSize > 0 {
				name = strings.TrimSuffix(name, ")") + fmt.Sprintf(", B = %d)", lc.BlockSize)
			}
		case "rff":
			r, err := baseline.NewRFF(kern, d, c.k, pick(cfg.RFFFeatures), 128, cfg.Seed)
			if err != nil {
				return res, err
			}
			m, size, sizeOf, closer = r, r.M, "features", r.Close
			name = "fixed random features + PCA"
		case "nystrom":
			n, err := baseline.NewNystrom(kern, d, c.k, pick(cfg.Landmarks))
			if err != nil {
				return res, err
			}
			m, size, sizeOf = n, pick(cfg.Landmarks), "landmarks"
			name = "Nyström + PCA"
		case "exact":
			e, err := baseline.NewExact(kern, d, c.k, pick(cfg.ExactN))
			if err != nil {
				return res, err
			}
			e.Center = cfg.Learner.Center
			m, size, sizeOf, stop = e, pick(cfg.ExactN), "points (sample)", pick(cfg.ExactN)
			name = "exact kernel PCA"
		default:
			return res, fmt.Errorf("unknown method %q (known: dsgd, dsgd-landmarks, rff, nystrom, exact)", name)
		}
		row, err := runCompare(ctx, m, c.h, cfg.Seed, stop, cfg.Budget, cfg.MaxTime, score, cfg.Progress)
		if grown != nil {
			size, sizeOf = grown()
		}
		if closer != nil {
			closer()
		}
		if err != nil {
			return res, fmt.Errorf("%s: %w", name, err)
		}
		row.Method, row.Size, row.SizeOf = name, size, sizeOf
		if stop < cfg.Points {
			row.Notes = fmt.Sprintf("uses the first %d points only", stop)
		}
		row.Points = row.Curve[len(row.Curve)-1].Points
		res.Methods = append(res.Methods, row)
	}
	res.PeakRSSMiB = processPeakRSS()
	return res, nil
}

// processPeakRSS is this process's peak resident set since its exec, in
// MiB (VmHWM in /proc/self/status; 0 if it cannot be read).
func processPeakRSS() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kib, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			if err != nil {
				return 0
			}
			return kib / 1024
		}
	}
	return 0
}

// dsgdMethod adapts the learner to baseline.Method. As the service
// does, it scores one point in DefaultHoldout before learning it
// (online.KPCA.Assess), so that the change detector runs on these
// stationary streams too.
type dsgdMethod struct {
	l    *online.KPCA
	seen *uint64
	held *[]float64
	grow *online.Growth // nil: a fixed budget
}

func newDSGDMethod(l *online.KPCA) dsgdMethod {
	return dsgdMethod{l: l, seen: new(uint64), held: new([]float64)}
}

func (m dsgdMethod) Observe(x []float64, rows int) {
	d := len(x) / rows
	*m.held = holdout((*m.held)[:0], x, rows, d, *m.seen, DefaultHoldout)
	*m.seen += uint64(rows)
	if _, err := m.l.Assess(*m.held, len(*m.held)/d); err != nil {
		panic(err)
	}
	t0 := time.Now()
	if err := m.l.Update(x, rows); err != nil && !errors.Is(err, online.ErrDiverged) {
		panic(err) // shapes are ours; nothing else can fail here
	}
	if m.grow != nil {
		m.grow.Step(m.l, time.Since(t0))
	}
}

// DefaultHoldout is the benchmarks' held-out slice: the service's.
const DefaultHoldout = online.DefaultHoldout

// holdout appends to dst the rows of x (rows×d) that online.HeldOut
// holds out, the first being stream point first.
func holdout(dst, x []float64, rows, d int, first uint64, every int) []float64 {
	for i := range rows {
		if online.HeldOut(first+uint64(i), every) {
			dst = append(dst, x[i*d:i*d+d]...)
		}
	}
	return dst
}
func (m dsgdMethod) Fit() error                      { return nil }
func (m dsgdMethod) Eval(dst, x []float64, rows int) { m.l.EvalTo(dst, x, rows) }

// runCompare streams stop points of the case into m (the stream is the
// same for every method: the same seed), fitting and scoring at
// checkpoints spaced ×10^(1/8).
func runCompare(ctx context.Context, m baseline.Method, h synth.Hermite, seed uint64, stop int, budget, maxTime time.Duration, score func(baseline.Method) float64,
	progress func(points, stop int, err, seconds float64)) (CompareMethod, error) {
	const batch = 512
	d := h.Dim()
	rng := rand.New(rand.NewPCG(seed, 1))
	x := make([]float64, batch*d)
	row := CompareMethod{To1e2: -1, To1e3: -1, ErrorAtBudget: math.NaN()}
	mem := startPeakHeap()
	var work time.Duration
	next := 2048.0
	for n := 0; n < stop; {
		if err := ctx.Err(); err != nil {
			mem.stop()
			return row, err
		}
		b := min(batch, stop-n)
		h.Sample(x[:b*d], rng)
		t0 := time.Now()
		m.Observe(x[:b*d], b)
		work += time.Since(t0)
		n += b
		if float64(n) < next && n != stop {
			continue
		}
		for next <= float64(n) {
			next *= math.Pow(10, 0.125)
		}
		t0 = time.Now()
		err := m.Fit()
		fit := time.Since(t0)
		if err != nil && !errors.Is(err, baseline.ErrNotConverged) {
			mem.stop()
			return row, err
		}
		if err != nil {
			row.Notes = err.Error()
		}
		cp := CompareCheckpoint{Points: n, Seconds: (work + fit).Seconds(), Error: score(m)}
		row.Curve = append(row.Curve, cp)
		if cp.Error <= 1e-2 && row.To1e2 < 0 {
			row.To1e2 = cp.Seconds
		}
		if cp.Error <= 1e-3 && row.To1e3 < 0 {
			row.To1e3 = cp.Seconds
		}
		if cp.Seconds <= budget.Seconds() {
			row.ErrorAtBudget = cp.Error
		}
		if progress != nil {
			progress(n, stop, cp.Error, cp.Seconds)
		}
		if maxTime > 0 && cp.Seconds > maxTime.Seconds() && n < stop {
			row.Notes = fmt.Sprintf("stopped by the time limit (--max-time) after %d points", n)
			break
		}
	}
	row.PeakMiB, row.PeakOf = float64(mem.stop())/(1<<20), "heap"
	last := row.Curve[len(row.Curve)-1]
	row.ErrorAtEnd, row.Seconds = last.Error, last.Seconds
	return row, nil
}

// peakHeap samples the live heap every 10 ms and keeps the maximum above
// the level at its start (after a GC): the memory a method holds.
type peakHeap struct {
	base uint64
	peak uint64
	done chan struct{}
	wg   sync.WaitGroup
}

const heapMetric = "/memory/classes/heap/objects:bytes"

func readHeap() uint64 {
	s := []metrics.Sample{{Name: heapMetric}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func startPeakHeap() *peakHeap {
	runtime.GC()
	p := &peakHeap{base: readHeap(), done: make(chan struct{})}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-p.done:
				return
			case <-t.C:
				p.peak = max(p.peak, readHeap())
			}
		}
	}()
	return p
}

// stop returns the peak heap above the start level.
func (p *peakHeap) stop() uint64 {
	close(p.done)
	p.wg.Wait()
	p.peak = max(p.peak, readHeap())
	if p.peak < p.base {
		return 0
	}
	return p.peak - p.base
}

// PrintCompareTable writes r as a table.
func PrintCompareTable(w io.Writer, r CompareResult) {
	fmt.Fprintf(w, "\n%s — %d points, budget %.0f s", r.About, r.Points, r.BudgetSeconds)
	if r.IdleRSSMiB > 0 {
		fmt.Fprintf(w, ", idle RSS %.0f MiB", r.IdleRSSMiB)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "method\tsize\ts to 1e-2\ts to 1e-3\terror at budget\terror at end\tseconds\tpeak MiB")
	secs := func(v float64) string {
		switch {
		case v < 0:
			return "not reached"
		case v < 1:
			return fmt.Sprintf("%.2f", v)
		}
		return fmt.Sprintf("%.1f", v)
	}
	for _, m := range r.Methods {
		ab := "—"
		if !math.IsNaN(m.ErrorAtBudget) {
			ab = fmt.Sprintf("%.2g", m.ErrorAtBudget)
		}
		fmt.Fprintf(tw, "%s\t%d %s\t%s\t%s\t%s\t%.2g\t%.1f\t%.0f (%s)\n", m.Method, m.Size, m.SizeOf, secs(m.To1e2), secs(m.To1e3), ab, m.ErrorAtEnd, m.Seconds, m.PeakMiB, m.PeakOf)
	}
	tw.Flush()
}

// CompareIsolated runs one method of RunCompare per child process, the
// command line argv (a binary whose `bench compare` flags it extends with
// --methods M --isolate=false --table=false and whose stdout is the JSON
// result), so that one method's garbage and caches do not touch the next;
// each method's memory is its child's peak RSS above that of an idle
// child (the same binary, held-out set and truth, and a trivial method).
func CompareIsolated(ctx context.Context, argv []string, methods []string) (CompareResult, error) {
	run := func(extra ...string) (CompareResult, float64, error) {
		cargs := append(append(slices.Clone(argv[1:]), extra...), "--isolate=false", "--table=false")
		cmd := exec.CommandContext(ctx, argv[0], cargs...)
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			return CompareResult{}, 0, err
		}
		var one CompareResult
		if err := json.Unmarshal(out, &one); err != nil || len(one.Methods) != 1 {
			return CompareResult{}, 0, fmt.Errorf("printed no result (%v)", err)
		}
		// The child's own figure: the kernel's ru_maxrss of a child
		// counts this process's resident memory at the fork (the child
		// runs in it until its exec), so a large parent hid every method
		// under its own size.
		rss := one.PeakRSSMiB
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok && rss == 0 {
			rss = float64(ru.Maxrss) / 1024 // Linux: KiB
		}
		return one, rss, nil
	}
	_, idle, err := run("--methods", "exact=1", "--k", "1", "--points", "1")
	if err != nil {
		return CompareResult{}, fmt.Errorf("bench compare: idle run: %w", err)
	}
	var res CompareResult
	for _, m := range methods {
		one, rss, err := run("--methods", m)
		if err != nil {
			return res, fmt.Errorf("bench compare: method %s: %w", m, err)
		}
		row := one.Methods[0]
		row.PeakMiB, row.PeakOf = rss-idle, "RSS above idle"
		rows := res.Methods
		res = one
		res.Methods = append(rows, row)
	}
	res.IdleRSSMiB = idle
	return res, nil
}

// centredTruth is exact centred kernel PCA of n fresh points of h's
// distribution at the held-out points xh (rows×k): the truth of a
// centred run.
func centredTruth(h synth.Hermite, kern features.Kernel, k, n int, seed uint64, xh []float64, held int) (*mat.Dense, error) {
	d := h.Dim()
	e, err := baseline.NewExact(kern, d, k, n)
	if err != nil {
		return nil, err
	}
	e.Center = true
	x := make([]float64, n*d)
	h.Sample(x, rand.New(rand.NewPCG(seed, 98)))
	e.Observe(x, n)
	if err := e.Fit(); err != nil && !errors.Is(err, baseline.ErrNotConverged) {
		return nil, fmt.Errorf("bench: exact centred kernel PCA: %w", err)
	}
	out := make([]float64, held*k)
	e.Eval(out, xh, held)
	return mat.NewDense(held, k, out), nil
}
