package bench

import (
	"errors"
	"fmt"
	"math/rand/v2"

	"gonum.org/v1/gonum/mat"

	"github.com/streamkpca/streamkpca/features"
	"github.com/streamkpca/streamkpca/internal/synth"
	"github.com/streamkpca/streamkpca/internal/tools/baseline"
	"github.com/streamkpca/streamkpca/online"
)

// fileDrift is a real data set's rows, shuffled anew for every pass and
// replayed (case file: a stream that never changes). The truth is exact
// kernel PCA of the rows streamed (baseline.Exact; of fileDriftExact of
// them drawn at random from a larger set), with the bandwidth of the
// median trick on them (the one the learners are given), scored on up
// to fileDriftScored of them.
type fileDrift struct {
	x      []float64
	rows   int
	d      int
	kern   features.Kernel
	perm   []int
	pass   int
	rng    *rand.Rand
	scored []float64
	nScore int
	truth  *mat.Dense
	pred   []float64
	k      int
}

// fileDriftScored is how many of the rows score a model; fileDriftExact
// how many the truth is computed from at most.
const fileDriftScored, fileDriftExact = 1000, 5000

func newFileDrift(cfg DriftConfig) (*fileDrift, error) {
	d := cfg.Dim
	if d <= 0 || len(cfg.Rows) < 2*d || len(cfg.Rows)%d != 0 {
		return nil, errors.New("bench: drift case file needs rows (--input FILE or --mnist DIR)")
	}
	rows := len(cfg.Rows) / d
	if rows <= cfg.K {
		return nil, fmt.Errorf("bench: drift case file: %d rows for k = %d", rows, cfg.K)
	}
	s := &fileDrift{x: cfg.Rows, rows: rows, d: d, k: cfg.K, rng: rand.New(rand.NewPCG(cfg.Seed, 3)), pass: -1}
	s.kern = features.Kernel{Family: features.Gaussian, Bandwidth: online.MedianDistance(s.x, rows, d, 1000)}
	// The truth: exact kernel PCA of every row, or of fileDriftExact of
	// them drawn at random from a larger set (its distribution's).
	nx := min(rows, fileDriftExact)
	tx := s.x[:nx*d]
	if nx < rows {
		tx = make([]float64, nx*d)
		for i, r := range rand.New(rand.NewPCG(cfg.Seed, 5)).Perm(rows)[:nx] {
			copy(tx[i*d:(i+1)*d], s.x[r*d:(r+1)*d])
		}
	}
	ex, err := baseline.NewExact(s.kern, d, cfg.K, nx)
	if err != nil {
		return nil, err
	}
	ex.Observe(tx, nx)
	if err := ex.Fit(); err != nil && !errors.Is(err, baseline.ErrNotConverged) {
		return nil, fmt.Errorf("bench: exact kernel PCA of the rows: %w", err)
	}
	s.nScore = min(rows, fileDriftScored)
	pick := rand.New(rand.NewPCG(cfg.Seed, 4)).Perm(rows)[:s.nScore]
	s.scored = make([]float64, s.nScore*d)
	for i, r := range pick {
		copy(s.scored[i*d:(i+1)*d], s.x[r*d:(r+1)*d])
	}
	tr := make([]float64, s.nScore*cfg.K)
	ex.Eval(tr, s.scored, s.nScore)
	s.truth = mat.NewDense(s.nScore, cfg.K, tr)
	s.pred = make([]float64, s.nScore*cfg.K)
	return s, nil
}

func (s *fileDrift) dim() int                { return s.d }
func (s *fileDrift) kernel() features.Kernel { return s.kern }

// sample writes the rows at stream positions n … n+rows−1: pass n/N in
// its own order.
func (s *fileDrift) sample(x []float64, rows, n int) {
	d := s.d
	for r := range rows {
		p, i := (n+r)/s.rows, (n+r)%s.rows
		for s.pass < p {
			s.perm = s.rng.Perm(s.rows)
			s.pass++
		}
		j := s.perm[i]
		copy(x[r*d:(r+1)*d], s.x[j*d:(j+1)*d])
	}
}

func (s *fileDrift) score(eval func(dst, x []float64, rows int), _ int) float64 {
	eval(s.pred, s.scored, s.nScore)
	return synth.SubspaceError(mat.NewDense(s.nScore, s.k, s.pred), s.truth)
}

func (s *fileDrift) heldOut(int) ([]float64, int) { return s.scored, s.nScore }
