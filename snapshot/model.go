package snapshot

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"sync"

	"github.com/streamkpca/streamkpca/features"
)

// Model projects new points with a snapshot: it regenerates every feature
// block from its seed and evaluates H(x) = Σ_j Φ_j(x)·alpha_j (paper Alg. 2),
// after the snapshot's standardisation and minus its centring offset. It
// reproduces the learner's own evaluation bit for bit.
//
// A Model is safe for concurrent use; each call uses its own scratch.
type Model struct {
	snap *Snapshot
	maps []features.Map
	// cache holds each view's blocks built at NewModel (generated up to
	// ModelOptions.CacheBytes, or shared through Reuse; landmark blocks
	// always); the rest are generated per call.
	cache []*blockCache
	// gram holds each view's whitened components for Score, built once.
	gramOnce []sync.Once
	gram     []*whitener
	// ref is Header.Novelty's residuals sorted, for Novelty, built once.
	refOnce sync.Once
	ref     []float64
}

type blockCache struct {
	blocks []*features.Block
}

// ModelOptions tune a Model.
type ModelOptions struct {
	// CacheBytes bounds the feature blocks a Model keeps generated between
	// calls, per view. Default 256 MiB; negative disables the cache.
	CacheBytes int64
	// Reuse, if set, is an earlier Model (of the same model, say the
	// previous version) whose generated blocks are shared where the view's
	// map and the block's seed (or landmark points) are the same, instead
	// of generated again: a service building a Model per snapshot then
	// generates only the blocks added since the last one. Blocks are
	// immutable once built, so sharing is safe for concurrent use; the
	// projections are the same bits either way.
	Reuse *Model
	// Shared, if set, offers blocks generated elsewhere, per view
	// (Shared[v] for view v): a learner's (features.Evaluator.Generated)
	// when a service serves the learner's own snapshots. A block is used
	// where the map equals the view's and its Seed is the view's seed at
	// that position, instead of being generated again; shared blocks cost
	// no memory of the Model's, so every one that matches is used,
	// whatever CacheBytes. Blocks are immutable; the projections are the
	// same bits either way.
	Shared []features.Generated
}

// DefaultModelCacheBytes is ModelOptions.CacheBytes' default.
const DefaultModelCacheBytes = 256 << 20

// NewModel validates s and returns a Model for it. The Model keeps s; do not
// modify it afterwards.
func NewModel(s *Snapshot, opt ModelOptions) (*Model, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if s.Header.Oversample > 0 {
		s = s.Served() // the first K components: those a learner of K + Oversample serves
	}
	if opt.CacheBytes == 0 {
		opt.CacheBytes = DefaultModelCacheBytes
	}
	m := &Model{snap: s, gramOnce: make([]sync.Once, len(s.Header.Views)), gram: make([]*whitener, len(s.Header.Views))}
	for vi, v := range s.Header.Views {
		seeds, bs := s.Header.ViewSeeds(vi)
		fm := features.Map{Kernel: v.Kernel, Dim: v.Dim, BlockSize: bs, Float32: v.Float32(), BLAS: v.BLAS(), Landmarks: v.Landmarks(),
			Structured: v.Structured()}
		if err := fm.Validate(); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrHeader, err)
		}
		m.maps = append(m.maps, fm)
		bc := &blockCache{}
		prev := opt.Reuse.reusable(vi, fm)
		if fm.Landmarks {
			// Landmark blocks are data, kept whatever the cache budget:
			// L is recomputed from the points exactly as the learner did.
			z := s.Landmarks[vi]
			n := bs * v.Dim
			for j := range seeds {
				if j < len(prev) && slices.Equal(prev[j].LM.Z, z[j*n:(j+1)*n]) {
					bc.blocks = append(bc.blocks, prev[j])
					continue
				}
				lb, err := fm.NewLandmarks(z[j*n : (j+1)*n])
				if err != nil {
					return nil, fmt.Errorf("%w: view %d block %d: %w", ErrHeader, vi, j, err)
				}
				bc.blocks = append(bc.blocks, &features.Block{LM: lb})
			}
		} else {
			// The cache is a prefix of the blocks: shared or reused ones
			// as far as they go, generated ones within CacheBytes.
			n := 0
			if opt.CacheBytes > 0 {
				n = min(int(opt.CacheBytes/int64(fm.BlockBytes())), len(seeds))
			}
			prevSeeds := opt.Reuse.seeds(vi)
			var shared []*features.Block
			if vi < len(opt.Shared) && reflect.DeepEqual(opt.Shared[vi].Map, fm) {
				shared = opt.Shared[vi].Blocks
			}
			for j, seed := range seeds {
				switch {
				case j < len(shared) && shared[j] != nil && shared[j].Seed == seed:
					bc.blocks = append(bc.blocks, shared[j])
				case j < len(prev) && j < len(prevSeeds) && prevSeeds[j] == seed:
					bc.blocks = append(bc.blocks, prev[j])
				case j < n:
					b := new(features.Block)
					fm.Generate(b, seed)
					bc.blocks = append(bc.blocks, b)
				}
				if len(bc.blocks) == j {
					break // past the budget, nothing to share: generated per call
				}
			}
		}
		m.cache = append(m.cache, bc)
	}
	return m, nil
}

// reusable returns view vi's built blocks when its map equals fm (nil for
// a nil Model or another map).
func (m *Model) reusable(vi int, fm features.Map) []*features.Block {
	if m == nil || vi >= len(m.maps) || !reflect.DeepEqual(m.maps[vi], fm) {
		return nil
	}
	return m.cache[vi].blocks
}

// seeds returns view vi's block seeds (nil for a nil Model).
func (m *Model) seeds(vi int) []uint64 {
	if m == nil || vi >= len(m.maps) {
		return nil
	}
	s, _ := m.snap.Header.ViewSeeds(vi)
	return s
}

// Header returns the snapshot header.
func (m *Model) Header() *Header { return &m.snap.Header }

// Snapshot returns the snapshot the model was built from.
func (m *Model) Snapshot() *Snapshot { return m.snap }

// K returns the number of components.
func (m *Model) K() int { return m.snap.Header.K }

// Dim returns the input dimension of view v (1 for a KSIR target view).
func (m *Model) Dim(view int) int {
	if len(m.snap.Header.Views[view].Slices) > 0 {
		return 1 // KSIR target view
	}
	return m.snap.Header.Views[view].Dim
}

// Map returns view v's feature map: the map a learner's blocks must have
// been generated with to be shared (ModelOptions.Shared).
func (m *Model) Map(view int) features.Map { return m.maps[view] }

// Views returns the number of views.
func (m *Model) Views() int { return len(m.snap.Header.Views) }

// Project writes the k projections of each of the rows points in x
// (rows×Dim, row-major) for view 0 into dst (rows×k), allocating when dst is
// nil. It returns an error for non-finite input or a wrong length of x or
// dst. It allocates its scratch (the preprocessed input, one block's
// features and the partial sums) on every call.
func (m *Model) Project(dst, x []float64) ([]float64, error) {
	return m.ProjectView(0, dst, x)
}

// ProjectView is Project for a given view (0 = x, 1 = y).
func (m *Model) ProjectView(view int, dst, x []float64) ([]float64, error) {
	return m.project(view, dst, nil, x)
}

// project is ProjectView that also writes each row's squared feature norm
// ‖φ(x)‖² into sq (rows values) when sq is not nil: the projections are
// the same bits either way.
func (m *Model) project(view int, dst, sq, x []float64) ([]float64, error) {
	if view < 0 || view >= len(m.maps) {
		return nil, fmt.Errorf("snapshot: model has %d view(s), asked for view %d", len(m.maps), view)
	}
	v := &m.snap.Header.Views[view]
	d, k := v.Dim, m.snap.Header.K
	inDim := d
	if len(v.Slices) > 0 {
		inDim = 1 // KSIR target view: one target per row
	}
	if len(x)%inDim != 0 {
		return nil, fmt.Errorf("snapshot: input of %d values is not a whole number of %d-dimensional points", len(x), inDim)
	}
	for i, xv := range x {
		if math.IsNaN(xv) || math.IsInf(xv, 0) {
			return nil, fmt.Errorf("snapshot: input value %d is %v", i, xv)
		}
	}
	if err := v.Kernel.CheckInput(x); err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	rows := len(x) / inDim
	if dst == nil {
		dst = make([]float64, rows*k)
	} else if len(dst) != rows*k {
		return nil, fmt.Errorf("snapshot: dst of %d values for %d points of k = %d", len(dst), rows, k)
	}
	if sq != nil && len(sq) != rows {
		return nil, fmt.Errorf("snapshot: residuals of %d values for %d points", len(sq), rows)
	}
	var xs []float64
	if len(v.Slices) > 0 {
		xs = SliceIndicators(v.Slices, x)
	} else {
		xs = make([]float64, len(x))
		v.Preprocess.Apply(xs, x)
	}
	fm := m.maps[view]
	nb := fm.BlockSize
	coef := m.snap.Coef[view]
	seeds, _ := m.snap.Header.ViewSeeds(view)
	// Same grouping and order as features.Evaluator.Eval, through the same
	// Map.AddBlock: blocks summed in chunks of fm.Chunk() blocks, chunks
	// added in order.
	phi := make([]float64, rows*nb)
	z := make([]float64, fm.ScratchLen())
	part := make([]float64, rows*k)
	var scratch features.Block
	clear(dst)
	if sq != nil {
		clear(sq)
	}
	cache := m.cache[view].blocks
	for c0 := 0; c0 < len(seeds); c0 += fm.Chunk() {
		clear(part)
		for j := c0; j < min(c0+fm.Chunk(), len(seeds)); j++ {
			var blk *features.Block
			if j < len(cache) {
				blk = cache[j]
			} else {
				fm.Generate(&scratch, seeds[j])
				blk = &scratch
			}
			fm.AddBlock(part, phi, z, xs, rows, blk, coef[j*nb*k:(j+1)*nb*k], k)
			if sq != nil {
				addSquares(sq, phi, rows, nb)
			}
		}
		for i, p := range part {
			dst[i] += p
		}
	}
	if len(v.Center) == k {
		for r := 0; r < rows; r++ {
			for q := 0; q < k; q++ {
				dst[r*k+q] -= v.Center[q]
			}
		}
	}
	return dst, nil
}

// Apply writes the standardised x into dst (same length, a multiple of the
// dimension); with no statistics it copies.
func (p *Preprocess) Apply(dst, x []float64) {
	copy(dst, x)
	d := len(p.Mean)
	if d == 0 {
		return
	}
	for i := range dst {
		c := i % d
		dst[i] = (dst[i] - p.Mean[c]) / p.Scale[c]
	}
}

// SliceIndicators maps targets t (one per row) to one-hot slice indicators
// (rows × (len(thresholds)+1)): slice i holds thresholds[i-1] < t ≤
// thresholds[i] (paper Sec. 5.4, kernel sliced inverse regression).
func SliceIndicators(thresholds, t []float64) []float64 {
	s := len(thresholds) + 1
	out := make([]float64, len(t)*s)
	for r, v := range t {
		i := 0
		for i < len(thresholds) && v > thresholds[i] {
			i++
		}
		out[r*s+i] = 1
	}
	return out
}
