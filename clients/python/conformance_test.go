// Package python_test checks the Python client (clients/python) against
// the Go model: it learns a snapshot of every kernel and learner with the
// Go learner, projects points with snapshot.Model, and runs the client's
// tests, which must reproduce those projections bit for bit (within
// rounding for the BLAS compute mode and for non-Gaussian landmark
// kernels, whose exact kernel uses the platform's libm).
//
// The tests need a Python 3 with numpy: STREAMKPCA_PYTHON, else python3
// or /usr/bin/python3 (Debian's python3-numpy). Without one the test
// says so and skips, unless STREAMKPCA_REQUIRE_PYTHON=1 (set by CI),
// which makes the missing interpreter a failure.
package python_test

import (
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamkpca/streamkpca/features"
	"github.com/streamkpca/streamkpca/online"
	"github.com/streamkpca/streamkpca/snapshot"
)

// fixture is one case as the Python tests read it (tests/fixtures.py).
type fixture struct {
	Name string `json:"name"`
	// Exact: the client must give the same bits; otherwise RelTol bounds
	// the difference relative to the largest projection.
	Exact  bool        `json:"exact"`
	RelTol float64     `json:"rel_tol,omitempty"`
	Views  []viewProbe `json:"views"`
	// Eigenvalues: the served model's eigenvalue estimates (its header's
	// diagnostics, k of them; none for two views), which the client's
	// Model.eigenvalues_ must give.
	Eigenvalues []float64 `json:"eigenvalues,omitempty"`
}

type viewProbe struct {
	Dim  int       `json:"dim"`
	X    []float64 `json:"x"`
	Proj []float64 `json:"proj"`
	// Residual and Novelty: snapshot.Model.Score and Novelty of view x's
	// probes, for uncentred models (the Python client's Model.score).
	Residual []float64 `json:"residual,omitempty"`
	Novelty  []float64 `json:"novelty,omitempty"`
}

type conformanceCase struct {
	name   string
	cfg    online.Config
	data   func(r *rand.Rand, rows int) ([]float64, int, int) // rows×d values, d, y columns
	exact  bool
	relTol float64
	// stream: learned as the service learns (batches of 50, one row in
	// 16 assessed first, a challenger beside the model) and sent as
	// stored, with the challenger's state: format v4.
	stream bool
}

// streamed learns rows as the service does (see conformanceCase.stream).
func streamed(t *testing.T, cfg online.Config, x []float64, rows, d, ycols int) *snapshot.Snapshot {
	t.Helper()
	if cfg.Algorithm.TwoView() {
		return streamedPairs(t, cfg, x, rows, d, ycols)
	}
	l, err := online.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const b = 50
	for off := 0; off+b <= rows; off += b {
		var held []float64
		for r := off; r < off+b; r++ {
			if online.HeldOut(uint64(r), 16) {
				held = append(held, x[r*d:(r+1)*d]...)
			}
		}
		if _, err := l.Assess(held, len(held)/d); err != nil {
			t.Fatal(err)
		}
		if err := l.Update(x[off*d:(off+b)*d], b); err != nil {
			t.Fatal(err)
		}
	}
	return l.Snapshot()
}

// streamedPairs is streamed for two-view learners: the last ycols
// columns of x are view y.
func streamedPairs(t *testing.T, cfg online.Config, x []float64, rows, d, ycols int) *snapshot.Snapshot {
	t.Helper()
	l, err := online.NewTwoView(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	dx := d - ycols
	split := func(from, to int, keep func(r int) bool) (xs, ys []float64) {
		for r := from; r < to; r++ {
			if keep(r) {
				xs, ys = append(xs, x[r*d:r*d+dx]...), append(ys, x[r*d+dx:(r+1)*d]...)
			}
		}
		return xs, ys
	}
	const b = 50
	for off := 0; off+b <= rows; off += b {
		hx, hy := split(off, off+b, func(r int) bool { return online.HeldOut(uint64(r), 16) })
		if _, err := l.Assess(hx, hy, len(hx)/dx); err != nil {
			t.Fatal(err)
		}
		bx, by := split(off, off+b, func(int) bool { return true })
		if err := l.Update(bx, by, b); err != nil {
			t.Fatal(err)
		}
	}
	return l.Snapshot()
}

// curved is a 3-D point cloud on a curved sheet; nonneg shifts it to
// x ≥ 0 for the semigroup kernels.
func curved(nonneg bool) func(r *rand.Rand, rows int) ([]float64, int, int) {
	return func(r *rand.Rand, rows int) ([]float64, int, int) {
		x := make([]float64, 0, rows*3)
		for i := 0; i < rows; i++ {
			a, b := r.NormFloat64(), r.NormFloat64()
			p := []float64{a, b, 0.5*a*a - 0.3*b + 0.1*r.NormFloat64()}
			if nonneg {
				for j := range p {
					p[j] = math.Abs(p[j])
				}
			}
			x = append(x, p...)
		}
		return x, 3, 0
	}
}

// paired is two 3-D views sharing a latent variable.
func paired(r *rand.Rand, rows int) ([]float64, int, int) {
	x := make([]float64, 0, rows*6)
	for i := 0; i < rows; i++ {
		z := r.NormFloat64()
		x = append(x, z+0.3*r.NormFloat64(), r.NormFloat64(), z*z+0.2*r.NormFloat64(),
			math.Sin(z)+0.3*r.NormFloat64(), r.NormFloat64(), 0.5*z+0.3*r.NormFloat64())
	}
	return x, 6, 3
}

// wide is d-dimensional points on a curved low-dimensional set plus
// noise: inputs wide enough (d ≥ online.MinStructuredDim) for structured
// orthogonal frequencies.
func wide(d int) func(r *rand.Rand, rows int) ([]float64, int, int) {
	return func(r *rand.Rand, rows int) ([]float64, int, int) {
		x := make([]float64, 0, rows*d)
		for i := 0; i < rows; i++ {
			a, b := r.NormFloat64(), r.NormFloat64()
			for c := 0; c < d; c++ {
				x = append(x, math.Sin(a*float64(c+1)/4)+b*float64(c%3)+0.1*r.NormFloat64())
			}
		}
		return x, d, 0
	}
}

// widePaired is wide x (20-D) with an 18-D y that depends on it.
func widePaired(r *rand.Rand, rows int) ([]float64, int, int) {
	x, _, _ := wide(20)(r, rows)
	out := make([]float64, 0, rows*38)
	for i := 0; i < rows; i++ {
		xr := x[i*20 : (i+1)*20]
		out = append(out, xr...)
		for c := 0; c < 18; c++ {
			out = append(out, xr[c]*xr[c+1]+0.2*r.NormFloat64())
		}
	}
	return out, 38, 18
}

// regression is 4-D x and a scalar target (ksir).
func regression(r *rand.Rand, rows int) ([]float64, int, int) {
	x := make([]float64, 0, rows*5)
	for i := 0; i < rows; i++ {
		a, b, c, d := r.NormFloat64(), r.NormFloat64(), r.NormFloat64(), r.NormFloat64()
		x = append(x, a, b, c, d, a*a+0.5*b+0.1*r.NormFloat64())
	}
	return x, 5, 1
}

func cases() []conformanceCase {
	g := features.Kernel{Family: features.Gaussian}
	kpca := func(name string, k features.Kernel, mod func(*online.Config)) conformanceCase {
		cfg := online.Config{K: 3, Kernel: k, BlockSize: 16, MaxFeatures: 160, Seed: 7}
		nonneg := k.Family == features.ExpSemigroup || k.Family == features.RecSemigroup
		if mod != nil {
			mod(&cfg)
		}
		return conformanceCase{name: name, cfg: cfg, data: curved(nonneg), exact: true}
	}
	std := func(c *online.Config) { c.Standardize, c.Center = true, true }
	out := []conformanceCase{
		kpca("gaussian", g, std),
		kpca("gaussian-gha", g, func(c *online.Config) { c.Algorithm = online.AlgGHA }),
		kpca("laplacian", features.Kernel{Family: features.Laplacian}, nil),
		// Columns beyond k (none by default): stored at an odd index (the
		// client reads k + 2 columns and serves the first k), then
		// published at an even one (k columns).
		kpca("oversampled-stored", g, func(c *online.Config) { c.Oversample = 2 }),
		kpca("oversampled-published", g, func(c *online.Config) { c.Oversample = 2 }),
		kpca("cauchy", features.Kernel{Family: features.Cauchy}, std),
		kpca("matern-1.5", features.Kernel{Family: features.Matern, Nu: 1.5}, nil),
		kpca("matern-0.7", features.Kernel{Family: features.Matern, Nu: 0.7}, nil),
		kpca("dotproduct", features.Kernel{Family: features.DotProduct, Coefficients: []float64{0.5, 1, 0.5, 0.25}}, std),
		kpca("dotproduct-p3", features.Kernel{Family: features.DotProduct, Coefficients: []float64{0, 1, 0.5}, P: 3}, nil),
		kpca("polynomial", features.Kernel{Family: features.Polynomial, Degree: 3, Offset: 1}, std),
		kpca("expsemigroup", features.Kernel{Family: features.ExpSemigroup, Beta: 0.7}, nil),
		kpca("recsemigroup", features.Kernel{Family: features.RecSemigroup, Lambda: 2}, nil),
		kpca("arccosine-0", features.Kernel{Family: features.ArcCosine, Degree: 0}, nil),
		kpca("arccosine-1", features.Kernel{Family: features.ArcCosine, Degree: 1}, std),
		kpca("arccosine-2", features.Kernel{Family: features.ArcCosine, Degree: 2}, nil),
		kpca("float32", g, func(c *online.Config) { c.Precision = online.Float32 }),
		kpca("landmarks-gaussian", g, func(c *online.Config) {
			c.Features, c.BlockSize, c.MaxFeatures = online.FeaturesLandmarks, 32, 96
			std(c)
		}),
	}
	blas := kpca("blas", g, func(c *online.Config) { c.Compute = online.ComputeBLAS })
	blas.exact, blas.relTol = false, 1e-12
	lap := kpca("landmarks-laplacian", features.Kernel{Family: features.Laplacian}, func(c *online.Config) {
		c.Features, c.BlockSize, c.MaxFeatures = online.FeaturesLandmarks, 32, 64
	})
	lap.exact, lap.relTol = false, 1e-12
	two := func(name string, alg online.Algorithm, ky features.Kernel, data func(*rand.Rand, int) ([]float64, int, int)) conformanceCase {
		return conformanceCase{name: name, data: data, exact: true,
			cfg: online.Config{Algorithm: alg, K: 2, Kernel: g, KernelY: ky, BlockSize: 16, MaxFeatures: 160, Seed: 9}}
	}
	// Structured orthogonal frequencies (orthogonal from d = 16): a block within
	// a stack (p = 32, four blocks a stack), blocks over several stacks
	// (p = 64, 80 frequencies a block), every radial family, two views.
	orth := func(name string, k features.Kernel, d int, mod func(*online.Config)) conformanceCase {
		c := kpca(name, k, func(c *online.Config) {
			c.Frequencies = online.FrequenciesOrthogonal // auto takes it from d = 32
			if mod != nil {
				mod(c)
			}
		})
		c.data = wide(d)
		return c
	}
	out = append(out,
		orth("orthogonal-gaussian", g, 20, std),
		orth("orthogonal-gaussian-stacks", g, 40, func(c *online.Config) { c.BlockSize, c.MaxFeatures = 160, 480 }),
		orth("orthogonal-matern-1.5", features.Kernel{Family: features.Matern, Nu: 1.5}, 20, nil),
		orth("orthogonal-matern-0.7", features.Kernel{Family: features.Matern, Nu: 0.7}, 24, nil),
		orth("orthogonal-arccosine-1", features.Kernel{Family: features.ArcCosine, Degree: 1}, 20, std),
		orth("orthogonal-arccosine-0", features.Kernel{Family: features.ArcCosine, Degree: 0}, 17, nil),
	)
	orthKCCA := two("orthogonal-kcca", online.AlgKCCA, g, widePaired)
	orthKCCA.cfg.Frequencies = online.FrequenciesOrthogonal
	follow := kpca("challenger", g, func(c *online.Config) { c.BlockSize, c.MaxFeatures, c.Forget = 16, 128, online.ForgetFollow })
	follow.stream = true
	followKCCA := two("challenger-kcca", online.AlgKCCA, g, paired)
	followKCCA.cfg.Forget, followKCCA.stream = online.ForgetFollow, true
	return append(out, blas, lap, follow, followKCCA,
		two("kcca", online.AlgKCCA, g, paired),
		two("ksvd-linear-y", online.AlgKSVD, features.Kernel{Family: features.Linear}, paired),
		two("ksir", online.AlgKSIR, g, regression),
		orthKCCA,
	)
}

// TestPythonClientConformance writes a snapshot and Go projections for
// every case to a temporary directory and runs the client's tests on them.
func TestPythonClientConformance(t *testing.T) {
	py := python(t)
	dir := t.TempDir()
	var names []string
	versions := map[uint32]int{}
	scored, oversampled := 0, 0
	for i, c := range cases() {
		r := rand.New(rand.NewPCG(uint64(i)+1, 17))
		const rows = 600
		x, d, ycols := c.data(r, rows)
		var snap *snapshot.Snapshot
		var err error
		if c.stream {
			if snap = streamed(t, c.cfg, x, rows, d, ycols); snap.Header.Challenger == nil {
				t.Fatalf("%s: streamed with a challenger, the snapshot holds none", c.name)
			}
		} else if snap, _, err = online.Fit(context.Background(), c.cfg, x, rows, d, online.FitOptions{Batch: 100, Epochs: 2, YCols: ycols}); err != nil {
			t.Fatalf("%s: fit: %v", c.name, err)
		}
		if orth := strings.HasPrefix(c.name, "orthogonal"); orth != (snap.Header.Generator == features.StructuredGeneratorID) {
			t.Fatalf("%s: generator %q: the orthogonal cases, and only they, must draw structured frequencies", c.name, snap.Header.Generator)
		}
		// Odd cases go as stored (with the learner's state: format v3
		// for the subspace solver's average, v2 for the covariance
		// solver's statistics), even ones as published (v2, no state):
		// the client must read both and project the same bits.
		served := snap.Served()
		if i%2 == 1 || c.stream {
			served = snap
		}
		versions[served.FormatVersion()]++
		if served.Header.Oversample > 0 {
			oversampled++ // stored with the columns learned beyond k: the client serves the first k
		}
		m, err := snapshot.NewModel(served, snapshot.ModelOptions{})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		// Uncentred models score: give them a novelty reference (the
		// residuals of 40 training rows), as the service's versions
		// carry, and write them with it.
		if _, res, err := m.Score(nil, nil, firstRows(x, d, d-ycols, 40)); err == nil {
			c := *served
			c.Header.Novelty = &snapshot.Novelty{Residuals: res}
			served = &c
			if m, err = snapshot.NewModel(served, snapshot.ModelOptions{}); err != nil {
				t.Fatal(err)
			}
			scored++
		}
		data, err := served.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		// Probe points: fresh draws of the same distribution, some of
		// them far outside it.
		px, _, _ := c.data(r, 37)
		for j := 0; j < 3*d; j++ {
			px[j] *= 4
		}
		ev := served.Header.Diagnostics.Eigenvalues
		f := fixture{Name: c.name, Exact: c.exact, RelTol: c.relTol, Eigenvalues: ev[:min(len(ev), served.Header.K)]}
		for v := 0; v < m.Views(); v++ {
			dv := m.Dim(v)
			lo, hi := 0, d-ycols
			if v == 1 {
				lo, hi = d-ycols, d
			}
			var in []float64
			for row := 0; row < 37; row++ {
				in = append(in, px[row*d+lo:row*d+hi]...)
			}
			if hi-lo != dv {
				t.Fatalf("%s: view %d has dimension %d, the data %d", c.name, v, dv, hi-lo)
			}
			p, err := m.ProjectView(v, nil, in)
			if err != nil {
				t.Fatalf("%s: view %d: %v", c.name, v, err)
			}
			probe := viewProbe{Dim: dv, X: in, Proj: p}
			if _, res, err := m.Score(nil, nil, in); v == 0 && err == nil {
				probe.Residual = res
				for _, r := range res {
					q, _ := m.Novelty(r)
					probe.Novelty = append(probe.Novelty, q)
				}
			}
			f.Views = append(f.Views, probe)
		}
		j, _ := json.Marshal(f)
		if err := os.WriteFile(filepath.Join(dir, c.name+".skpca"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, c.name+".json"), j, 0o644); err != nil {
			t.Fatal(err)
		}
		names = append(names, c.name)
	}
	if oversampled == 0 {
		t.Error("no case stored with columns learned beyond k (header oversample): the client's reading of them is not checked")
	}
	if scored < 10 {
		t.Fatalf("%d cases score: the uncentred ones should", scored)
	}
	if versions[4] == 0 || versions[3] == 0 || versions[2] == 0 {
		t.Fatalf("fixtures in formats %v: want v2, v3 and v4", versions)
	}
	cmd := exec.Command(py, "-m", "unittest", "discover", "-s", "tests", "-v")
	cmd.Env = append(os.Environ(), "STREAMKPCA_FIXTURES="+dir, "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python client tests failed: %v\n%s", err, out)
	}
	// Every case must have been compared, not skipped.
	for _, n := range names {
		if !strings.Contains(string(out), "case "+n+": ") {
			t.Errorf("the python tests did not report case %s", n)
		}
	}
	t.Logf("%s", out)
}

// firstRows returns the first n rows' first dx columns of x (rows of d).
func firstRows(x []float64, d, dx, n int) []float64 {
	var out []float64
	for r := 0; r < n; r++ {
		out = append(out, x[r*d:r*d+dx]...)
	}
	return out
}

// python returns an interpreter with numpy.
func python(t *testing.T) string {
	t.Helper()
	cands := []string{os.Getenv("STREAMKPCA_PYTHON"), "python3", "/usr/bin/python3"}
	for _, c := range cands {
		if c == "" {
			continue
		}
		if err := exec.Command(c, "-c", "import numpy").Run(); err == nil {
			return c
		}
	}
	msg := "no Python 3 with numpy (tried STREAMKPCA_PYTHON, python3, /usr/bin/python3); install Debian's python3-numpy to run the Python client's tests"
	if os.Getenv("STREAMKPCA_REQUIRE_PYTHON") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// TestInstallsOffline: `pip install ./clients/python` with no index (no
// network) into a fresh virtual environment that sees the system's numpy,
// then the installed package imports from the environment. Before, pip's
// build isolation fetched setuptools and the install failed offline. The
// source directory is left as it was (no build/ or .egg-info).
func TestInstallsOffline(t *testing.T) {
	py := python(t)
	venv := filepath.Join(t.TempDir(), "venv")
	if out, err := exec.Command(py, "-m", "venv", "--system-site-packages", venv).CombinedOutput(); err != nil {
		msg := "python -m venv: " + err.Error() + "\n" + string(out) + "(Debian: python3-venv)"
		if os.Getenv("STREAMKPCA_REQUIRE_PYTHON") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	pip := exec.Command(filepath.Join(venv, "bin", "pip"), "install", "--no-index", "--no-cache-dir", ".")
	pip.Env = append(os.Environ(), "PIP_NO_INDEX=1", "PIP_DISABLE_PIP_VERSION_CHECK=1")
	if out, err := pip.CombinedOutput(); err != nil {
		t.Fatalf("pip install --no-index ./clients/python: %v\n%s", err, out)
	}
	imp := exec.Command(filepath.Join(venv, "bin", "python"), "-c", "import streamkpca, numpy; print(streamkpca.__file__)")
	imp.Dir = t.TempDir() // not the source directory
	out, err := imp.CombinedOutput()
	if err != nil || !strings.HasPrefix(strings.TrimSpace(string(out)), venv) {
		t.Fatalf("import after the install: %v: %s (want it from %s)", err, out, venv)
	}
	for _, leftover := range []string{"build", "streamkpca.egg-info"} {
		if _, err := os.Stat(leftover); err == nil {
			t.Errorf("the install left %s in the source directory", leftover)
		}
	}
}

// TestCasesCoverEveryFamily (issue 46): every kernel family of
// features.Families (paper Table 1) is the kernel of some conformance
// case, so a family added to Go cannot miss the Python client's
// regeneration tests; and every radial family that takes orthogonal
// frequencies has a structured case.
func TestCasesCoverEveryFamily(t *testing.T) {
	seen, structured := map[features.Family]bool{}, map[features.Family]bool{}
	for _, c := range cases() {
		for _, k := range []features.Kernel{c.cfg.Kernel, c.cfg.KernelY} {
			if k.Family == "" {
				continue
			}
			seen[k.Family] = true
			if c.cfg.Frequencies == online.FrequenciesOrthogonal {
				structured[k.Family] = true
			}
		}
		if c.cfg.Kernel.Family == "" {
			seen[features.Gaussian] = true // the default
		}
	}
	for _, f := range features.Families {
		if !seen[f] {
			t.Errorf("no conformance case has kernel family %q: add one to cases()", f)
		}
		if f.Radial() && !structured[f] {
			t.Errorf("no conformance case draws orthogonal frequencies for the radial family %q", f)
		}
	}
}
