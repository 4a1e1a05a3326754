package online

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/streamkpca/streamkpca/snapshot"
)

// FitOptions configures Fit. Zero values mean the default.
type FitOptions struct {
	// Epochs: passes over the rows, in order first, then shuffled.
	// Default: 1.
	Epochs int
	// Batch is the mini-batch b. Default: 512.
	Batch int
	// YCols: for two-view algorithms, the last YCols columns of each row
	// are y (ksir: 1, the target). Required for them, ignored otherwise.
	YCols int
	// Progress, if set, is called after every batch with the epoch
	// (0-based), the samples learned and the features.
	Progress func(epoch int, samples uint64, features int)
}

// FitReport summarises a Fit.
type FitReport struct {
	Samples  uint64
	Features int
	// Rejected counts batches the divergence guard refused (they lower the
	// step; the fit goes on).
	Rejected int
	// Bandwidth is view x's kernel bandwidth (the median trick's choice
	// unless configured); Eigenvalues the estimates (one-view models).
	Bandwidth   float64
	Eigenvalues []float64
}

// Fit learns cfg's model from rows×d values in memory (a bounded data set:
// `streamkpca fit`) by streaming them in mini-batches for opt.Epochs
// epochs, shuffled after the first by a shuffle seeded from cfg.Seed, and
// returns the snapshot. It is the streaming learner run over a file, not a
// batch solver: the result is what the service would learn from the same
// rows in the same order.
func Fit(ctx context.Context, cfg Config, x []float64, rows, d int, opt FitOptions) (*snapshot.Snapshot, FitReport, error) {
	if opt.Epochs == 0 {
		opt.Epochs = 1
	}
	if opt.Batch == 0 {
		opt.Batch = 512
	}
	if rows < 1 || d < 1 || len(x) != rows*d || opt.Epochs < 0 || opt.Batch < 0 {
		return nil, FitReport{}, fmt.Errorf("%w: %d values for %d rows of %d, %d epochs, batch %d", ErrInput, len(x), rows, d, opt.Epochs, opt.Batch)
	}
	b := min(opt.Batch, rows)
	var (
		update  func(epoch int, perm []int) error
		done    func() (*snapshot.Snapshot, FitReport)
		release func()
	)
	if cfg.Algorithm.TwoView() {
		yc := opt.YCols
		if yc < 1 || yc >= d {
			return nil, FitReport{}, fmt.Errorf("%w: %s needs the y columns (1 ≤ N < %d): the last N columns of each row are y", ErrConfig, cfg.Algorithm, d)
		}
		l, err := NewTwoView(cfg)
		if err != nil {
			return nil, FitReport{}, err
		}
		dx := d - yc
		bx, by := make([]float64, b*dx), make([]float64, b*yc)
		update = func(epoch int, perm []int) error {
			for r, p := range perm {
				row := x[p*d : p*d+d]
				copy(bx[r*dx:(r+1)*dx], row[:dx])
				copy(by[r*yc:(r+1)*yc], row[dx:])
			}
			n := len(perm)
			err := l.Update(bx[:n*dx], by[:n*yc], n)
			if opt.Progress != nil {
				opt.Progress(epoch, l.SamplesSeen(), l.Features())
			}
			return err
		}
		done = func() (*snapshot.Snapshot, FitReport) {
			return l.Snapshot(), FitReport{Samples: l.SamplesSeen(), Features: l.Features(), Bandwidth: l.v[0].fm.Kernel.Bandwidth}
		}
		release = l.Close
	} else {
		l, err := New(cfg)
		if err != nil {
			return nil, FitReport{}, err
		}
		batch := make([]float64, b*d)
		update = func(epoch int, perm []int) error {
			for r, p := range perm {
				copy(batch[r*d:r*d+d], x[p*d:p*d+d])
			}
			n := len(perm)
			err := l.Update(batch[:n*d], n)
			if opt.Progress != nil {
				opt.Progress(epoch, l.SamplesSeen(), l.Features())
			}
			return err
		}
		done = func() (*snapshot.Snapshot, FitReport) {
			eig, _ := l.Eigenvalues()
			return l.Snapshot(), FitReport{Samples: l.SamplesSeen(), Features: l.Features(), Bandwidth: l.Kernel().Bandwidth, Eigenvalues: eig}
		}
		release = l.Close
	}
	defer release()
	rng := rand.New(rand.NewPCG(cfg.Seed, 7))
	perm := make([]int, rows)
	for i := range perm {
		perm[i] = i
	}
	var rejected int
	for e := 0; e < opt.Epochs; e++ {
		if e > 0 {
			rng.Shuffle(rows, func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
		}
		for s := 0; s < rows; s += b {
			if err := ctx.Err(); err != nil {
				return nil, FitReport{}, err
			}
			if err := update(e, perm[s:min(s+b, rows)]); err != nil {
				if errors.Is(err, ErrDiverged) {
					rejected++
					continue
				}
				return nil, FitReport{}, err
			}
		}
	}
	snap, rep := done()
	rep.Rejected = rejected
	return snap, rep, nil
}
