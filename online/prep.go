package online

import (
	"fmt"
	"math"
	"sort"

	"github.com/streamkpca/streamkpca/snapshot"
)

// MedianDistance returns the median Euclidean distance between the
// pairs of distinct points among min(rows, maxPoints) points of x
// (rows×d) — all of them, or maxPoints spread evenly over the rows
// (point i·rows/maxPoints) when there are more: the median trick for the
// Gaussian bandwidth ℓ in exp(−‖x−y‖²/(2ℓ²)). Pairs of equal points are
// left out (a stream that repeats a point has no scale in the repeats),
// and so every held row can change the result: 0 only when all the
// points are equal.
func MedianDistance(x []float64, rows, d, maxPoints int) float64 {
	n := min(rows, maxPoints)
	if n < 2 {
		return 0
	}
	at := func(i int) []float64 {
		r := i
		if rows > n {
			r = int(int64(i) * int64(rows) / int64(n))
		}
		return x[r*d : r*d+d]
	}
	ds := make([]float64, 0, n*(n-1)/2)
	for i := 0; i < n; i++ {
		xi := at(i)
		for j := i + 1; j < n; j++ {
			xj := at(j)
			var s float64
			for c := range xi {
				t := xi[c] - xj[c]
				s += t * t
			}
			if s > 0 {
				ds = append(ds, s)
			}
		}
	}
	if len(ds) == 0 {
		return 0
	}
	sort.Float64s(ds)
	m := len(ds) / 2
	med := ds[m]
	if len(ds)%2 == 0 {
		med = (ds[m-1] + ds[m]) / 2
	}
	return math.Sqrt(med)
}

// standardizer returns per-dimension mean and standard deviation of x;
// a constant dimension gets scale 1.
func standardizer(x []float64, rows, d int) snapshot.Preprocess {
	p := snapshot.Preprocess{Mean: make([]float64, d), Scale: make([]float64, d)}
	for r := 0; r < rows; r++ {
		for c := 0; c < d; c++ {
			p.Mean[c] += x[r*d+c]
		}
	}
	for c := range p.Mean {
		p.Mean[c] /= float64(rows)
	}
	for r := 0; r < rows; r++ {
		for c := 0; c < d; c++ {
			t := x[r*d+c] - p.Mean[c]
			p.Scale[c] += t * t
		}
	}
	for c := range p.Scale {
		s := math.Sqrt(p.Scale[c] / float64(rows))
		if !(s > 1e-12) {
			s = 1
		}
		p.Scale[c] = s
	}
	return p
}

// Restore returns a learner that continues from snap. Runtime and group
// settings (Config's `setting` tags) come from rt; everything that
// defines the model comes from the snapshot.
func Restore(snap *snapshot.Snapshot, rt Config) (*KPCA, error) {
	if err := snap.Validate(); err != nil {
		return nil, err
	}
	h := &snap.Header
	if a := Algorithm(h.Algorithm); a == "" || a.spec().solvers == nil || a.spec().twoView {
		return nil, fmt.Errorf("%w: algorithm %q", snapshot.ErrUnsupported, h.Algorithm)
	}
	v := h.Views[0]
	cfg := Config{Dim: v.Dim, Kernel: v.Kernel, Solver: Solver(h.Schedule.Solver)}
	cfg.fromHeader(h)
	if cfg.Oversample == 0 {
		cfg.Oversample = -1 // the columns it learns: none beyond K, not New's default
	}
	cfg.Standardize = len(v.Preprocess.Mean) > 0 // the view's statistics say (v1 snapshots may lack the setting)
	cfg.takeRuntime(rt)
	if h.Averaged != nil {
		cfg.Average = h.Averaged.Window
	}
	if h.Schedule.Ridge > 0 { // the covariance solver's (snapshots before 2026-11-28 lack it: the default)
		cfg.Ridge = h.Schedule.Ridge
	}
	restoredConfig(&cfg, v)
	l, err := New(cfg)
	if err != nil {
		return nil, err
	}
	// Rebuild scratch through init with the recorded dimension; x is unused
	// because bandwidth and standardisation are fixed.
	l.cfg.Standardize = false
	if err := l.init(nil, 0, v.Dim); err != nil {
		return nil, err
	}
	l.cfg.Standardize = len(v.Preprocess.Mean) > 0
	var z []float64
	if len(snap.Landmarks) > 0 {
		z = snap.Landmarks[0]
	}
	if err := l.view.restore(v, h.Seeds, snap.Coef[0], z, h.Columns()); err != nil {
		l.Close()
		return nil, err
	}
	own, window, chSnap := snap.SplitState()
	if h.Averaged != nil {
		if err := l.restoreIterate(h, own); err != nil {
			l.Close()
			return nil, err
		}
	}
	l.resume(h)
	l.mon.resume(h.Diagnostics.Quality)
	l.mon.resumeDetector(h.Detector)
	l.lambda0 = h.Schedule.Scale
	if len(h.Running) == h.Columns()*h.Columns() {
		copy(l.mrun, h.Running)
	}
	if l.sub != nil && len(h.Diagnostics.Eigenvalues) == h.Columns() {
		copy(l.sub.eig, h.Diagnostics.Eigenvalues)
	}
	if h.Covariance != nil {
		if cfg.Solver != SolverCovariance {
			l.Close()
			return nil, fmt.Errorf("%w: covariance state in a model whose solver is %q", snapshot.ErrHeader, h.Schedule.Solver)
		}
		c, err := restoreCovariance(h.Covariance, own, len(l.coef)/h.Columns(), 0, h.Columns(), l.cfg.Ridge, l.cfg.Seed, l.cfg.Workers)
		if err != nil {
			l.Close()
			return nil, err
		}
		if l.fm.Landmarks {
			c.setGram(landmarkGram(l.ev, l.seeds, &c.ws)) // a pure function of the landmarks
		}
		l.cov = c
	}
	if chSnap != nil && l.following() {
		if err := l.restoreChallenger(h.Challenger, window, chSnap); err != nil {
			l.Close()
			return nil, err
		}
	}
	return l, nil
}

// restoreIterate sets the subspace solver's iterate and running average
// (and their centres) from the snapshot's learner state
// (snapshot.Averaged).
func (l *KPCA) restoreIterate(h *snapshot.Header, st []float64) error {
	s := l.sub
	if s == nil || s.window == 0 {
		return fmt.Errorf("%w: averaged state in a model whose solver is %q", snapshot.ErrHeader, h.Schedule.Solver)
	}
	n, k := len(l.coef), len(l.center)
	copy(l.coef, st[:n])
	s.avg = append(s.avg[:0], st[n:2*n]...)
	copy(l.center, st[2*n:2*n+k])
	s.avgCenter = append(s.avgCenter[:0], st[2*n+k:]...)
	s.stale = true
	return nil
}
