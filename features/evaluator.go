package features

import (
	"runtime"
	"slices"
	"sync"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
)

// ChunkBlocks is the number of consecutive blocks whose contributions are
// summed into one partial result; partials are then added in chunk order.
// The grouping is fixed, so results do not depend on the number of workers.
// Landmark maps use chunks of one block (see Map.Chunk).
const ChunkBlocks = 8

// Chunk is the number of blocks per chunk of an evaluation with m:
// ChunkBlocks, or 1 for a landmark map, whose few, costly blocks are then
// spread over the workers one by one.
func (m Map) Chunk() int {
	if m.Landmarks {
		return 1
	}
	return ChunkBlocks
}

// DefaultCacheBytes is EvaluatorConfig.CacheBytes' default: 1 GiB.
const DefaultCacheBytes = 1 << 30

// DefaultKeepBytes is EvaluatorConfig.KeepBytes' default: 512 MiB.
const DefaultKeepBytes = 512 << 20

// EvaluatorConfig configures an [Evaluator].
type EvaluatorConfig struct {
	// Workers is the number of goroutines evaluating chunks of blocks in
	// parallel. Default: runtime.GOMAXPROCS(0). 1 evaluates on the caller's
	// goroutine and starts none.
	Workers int
	// CacheBytes bounds the memory of cached generated blocks. Blocks
	// beyond the budget are regenerated from their seeds on every use.
	// Default: 1 GiB. A negative value disables the cache.
	CacheBytes int64
	// KeepBytes bounds the features EvalKeep keeps for Grad (rows × blocks
	// × B float64s). Past it Grad regenerates each block's features, which
	// costs as much as the evaluation again. Default: DefaultKeepBytes.
	// A negative value keeps nothing.
	KeepBytes int64
	// KeepBlocks is the number of blocks EvalKeep's buffer is sized for
	// when it first grows (the learner's feature budget), so that it is
	// allocated once rather than at every new block. Default: 0, as needed.
	KeepBlocks int
}

// Evaluator evaluates functions expanded on random feature blocks,
// H = Σ_j Φ_j(X)·A_j (paper Alg. 2 in mini-batch form), caching generated
// blocks under a memory budget. The cache keeps the lowest-numbered blocks:
// every evaluation visits all blocks in order, and for that cyclic access
// pattern keeping a fixed prefix is the optimal replacement policy.
//
// An Evaluator is not safe for concurrent use. Call Close to stop its
// workers.
type Evaluator struct {
	m           Map
	cacheBlocks int
	cache       []*Block
	workers     int
	landmarks   []*Block // a landmark map's blocks, all kept (they are data)

	// per-call state read by the workers
	x       []float64
	x32     []float32 // x rounded to float32 once per call (Float32 maps)
	rows    int
	seeds   []uint64
	coef    []float64
	k       int
	partial []float64

	// keep: the features of every block on the last EvalKeep batch,
	// block-major (block j at keep[j·rows·B:]); nil when not kept.
	keep       []float64
	keepBuf    []float64
	keepMax    int64
	keepBlocks int
	grad       bool      // the workers run gradChunk, not chunk
	resid      []float64 // rows×k right-hand side of Grad
	gradDst    []float64
	gradK      int
	gradScal   float64
	gradMean   []float64
	gradDiv    float64
	gradKPad   int
	residT     []float64

	x32buf  []float32
	gen     uint64 // counts evaluations: what a stackCache holds is for one
	scratch []evalScratch
	tasks   chan int
	wg      sync.WaitGroup
	done    sync.WaitGroup
	closed  bool
}

type evalScratch struct {
	phi, z, pt, rt []float64
	blk            Block
	sorf           stackCache
}

// stack returns the scratch's cache of a structured map's transforms for
// the evaluation of generation gen (one Eval, Grad or PhiTo call: its x
// does not change within it).
func (s *evalScratch) stack(gen uint64) *stackCache {
	if s.sorf.gen != gen {
		s.sorf.gen, s.sorf.valid = gen, false
	}
	return &s.sorf
}

// NewEvaluator returns an evaluator for m. m must be valid.
func NewEvaluator(m Map, cfg EvaluatorConfig) *Evaluator {
	if err := m.Validate(); err != nil {
		panic(err)
	}
	if cfg.Workers <= 0 {
		cfg.Workers = runtime.GOMAXPROCS(0)
	}
	if cfg.CacheBytes == 0 {
		cfg.CacheBytes = DefaultCacheBytes
	}
	if cfg.KeepBytes == 0 {
		cfg.KeepBytes = DefaultKeepBytes
	}
	e := &Evaluator{m: m, workers: cfg.Workers, keepMax: cfg.KeepBytes, keepBlocks: cfg.KeepBlocks}
	if cfg.CacheBytes > 0 && !m.Landmarks {
		e.cacheBlocks = int(cfg.CacheBytes / int64(m.BlockBytes()))
	}
	e.scratch = make([]evalScratch, cfg.Workers)
	for i := range e.scratch {
		e.scratch[i].z = make([]float64, m.ScratchLen())
	}
	if cfg.Workers > 1 {
		e.tasks = make(chan int)
		e.done.Add(cfg.Workers)
		for w := 0; w < cfg.Workers; w++ {
			go e.work(&e.scratch[w])
		}
	}
	return e
}

// Map returns the feature map.
func (e *Evaluator) Map() Map { return e.m }

// HeldBytes is what the evaluator holds for a model of the given
// features evaluated on batches of rows rows: the kept features (EvalKeep,
// rows × features × 8 bytes, within KeepBytes) and the cached blocks
// (within CacheBytes). With the model's coefficients it is a learner's
// memory (online.KPCA.MemoryBytes).
func (e *Evaluator) HeldBytes(features, rows int) int64 {
	var n int64
	if e.keepMax > 0 {
		n = min(e.keepMax, int64(rows)*int64(features)*8)
	}
	blocks := (features + e.m.BlockSize - 1) / e.m.BlockSize
	if e.m.Landmarks {
		return n + int64(blocks)*int64(e.m.BlockBytes())
	}
	return n + int64(min(blocks, e.cacheBlocks))*int64(e.m.BlockBytes())
}

// CachedBlocks returns how many blocks the cache budget holds.
func (e *Evaluator) CachedBlocks() int { return e.cacheBlocks }

// Close stops the workers. The evaluator must not be used afterwards.
func (e *Evaluator) Close() {
	if e.closed {
		return
	}
	e.closed = true
	if e.tasks != nil {
		close(e.tasks)
		e.done.Wait()
	}
}

func (e *Evaluator) work(s *evalScratch) {
	defer e.done.Done()
	for c := range e.tasks {
		if e.grad {
			e.gradChunk(c, s)
		} else {
			e.chunk(c, s)
		}
		e.wg.Done()
	}
}

// AddLandmarks appends a landmark block (Map.Landmarks); it becomes block
// number Landmarks()−1. The learner's seed for it is ignored.
func (e *Evaluator) AddLandmarks(lb *Landmarks) {
	if !e.m.Landmarks {
		panic("features: AddLandmarks on a random-feature map")
	}
	e.landmarks = append(e.landmarks, &Block{LM: lb})
}

// TruncateLandmarks keeps the first n landmark blocks.
func (e *Evaluator) TruncateLandmarks(n int) {
	if n < len(e.landmarks) {
		e.landmarks = e.landmarks[:n]
	}
}

// Landmarks returns the number of landmark blocks and block j's (nil past
// the end or for a random-feature map).
func (e *Evaluator) Landmarks(j int) (int, *Landmarks) {
	if j < 0 || j >= len(e.landmarks) {
		return len(e.landmarks), nil
	}
	return len(e.landmarks), e.landmarks[j].LM
}

// block returns block j, from the cache or regenerated into s.
func (e *Evaluator) block(j int, seed uint64, s *evalScratch) *Block {
	if e.m.Landmarks {
		if j >= len(e.landmarks) {
			panic("features: landmark block not added")
		}
		return e.landmarks[j]
	}
	if j < e.cacheBlocks {
		if j >= len(e.cache) {
			panic("features: cache not grown") // grown in Eval before dispatch
		}
		b := e.cache[j]
		if b == nil || b.Seed != seed {
			// A new Block, never the old one's storage: blocks handed
			// out by Generated are immutable (seeds at a position change
			// only when one evaluator serves other seed lists, rarely).
			b = new(Block)
			e.m.Generate(b, seed)
			if e.m.Float32 { // the float32 copies are all PhiTo reads
				b.Omega, b.Phase = nil, nil
			}
			e.cache[j] = b
		}
		return b
	}
	e.m.Generate(&s.blk, seed)
	return &s.blk
}

// Generated is a map's generated blocks, offered for sharing with
// snapshot.Model (snapshot.ModelOptions.Shared): Blocks[j] is block j
// (nil where not generated), each with its Seed. Blocks are immutable
// once generated.
type Generated struct {
	Map    Map
	Blocks []*Block
}

// Generated returns the blocks the cache holds now: block j at index j,
// nil where none is generated. The slice is a copy; the blocks are
// immutable (a cache entry whose seed changes gets a new Block), so they
// stay valid for any reader while the evaluator goes on. Call it between
// evaluations (an Evaluator is not safe for concurrent use). Landmark
// maps return no blocks.
func (e *Evaluator) Generated() Generated {
	return Generated{Map: e.m, Blocks: slices.Clone(e.cache)}
}

func (e *Evaluator) growCache(nblocks int) {
	n := min(nblocks, e.cacheBlocks)
	for len(e.cache) < n {
		e.cache = append(e.cache, nil)
	}
}

func (s *evalScratch) phiBuf(n int) []float64 {
	if cap(s.phi) < n {
		s.phi = make([]float64, n)
	}
	return s.phi[:n]
}

// chunk computes the partial sum of the blocks of chunk c.
func (e *Evaluator) chunk(c int, s *evalScratch) {
	rows, k, nb := e.rows, e.k, e.m.BlockSize
	part := e.partial[c*rows*k : (c+1)*rows*k]
	clear(part)
	phi := s.phiBuf(rows * nb)
	cb := e.m.Chunk()
	end := min((c+1)*cb, len(e.seeds))
	for j := c * cb; j < end; j++ {
		if e.keep != nil {
			phi = e.keep[j*rows*nb : (j+1)*rows*nb]
		}
		e.m.addBlock(part, phi, s.z, e.x, e.x32, rows, e.block(j, e.seeds[j], s), e.coef[j*nb*k:(j+1)*nb*k], k, s.stack(e.gen))
	}
}

// AddBlock adds Φ_b(x)·A to part (rows×k): block b's features of the rows
// inputs x into phi (rows×B), then their product with the block's
// coefficients A (B×k) — by the linked BLAS when the map says so, else
// AddMul. z is PhiTo's scratch. It is the one evaluation of a block that
// the learner's Evaluator and snapshot.Model share, block after block in
// chunks of Chunk() blocks, chunks summed in order: the bit-identity of
// served projections with the learner's rests on this function, not on
// two copies agreeing.
func (m Map) AddBlock(part, phi, z, x []float64, rows int, b *Block, coef []float64, k int) {
	m.addBlock(part, phi, z, x, nil, rows, b, coef, k, nil)
}

// addBlock is AddBlock with x already rounded to float32 (x32) for the
// float32 and BLAS maps, or nil.
func (m Map) addBlock(part, phi, z, x []float64, x32 []float32, rows int, b *Block, coef []float64, k int, sc *stackCache) {
	m.phiToWith(phi, z, x, x32, rows, b, sc)
	m.MulAdd(part, phi, coef, rows, k)
}

// MulAdd adds phi·A to part (rows×k): a block's features (rows×B) times its
// coefficients A (B×k), by the linked BLAS when the map says so, else
// AddMul — AddBlock's second half, for features already computed (an
// Evaluator's Kept).
func (m Map) MulAdd(part, phi, coef []float64, rows, k int) {
	nb := m.BlockSize
	if m.BLAS {
		blas64.Gemm(blas.NoTrans, blas.NoTrans, 1,
			blas64.General{Rows: rows, Cols: nb, Data: phi, Stride: nb},
			blas64.General{Rows: nb, Cols: k, Data: coef, Stride: k},
			1, blas64.General{Rows: rows, Cols: k, Data: part, Stride: k})
		return
	}
	addMul(m.SIMD, part, phi, coef, rows, nb, k)
}

// Eval sets h (rows×k, row-major) to Σ_j Φ_j(x)·A_j where block j has seed
// seeds[j] and coefficients A_j = coef[j·B·k : (j+1)·B·k] (B×k, row-major).
// x is rows×Dim. Each row of h depends only on the same row of x.
func (e *Evaluator) Eval(h, x []float64, rows int, seeds []uint64, coef []float64, k int) {
	e.keep = nil
	e.eval(h, x, rows, seeds, coef, k)
	e.x, e.x32, e.seeds = nil, nil, nil
}

// eval is Eval, storing each block's features in e.keep when it is set.
func (e *Evaluator) eval(h, x []float64, rows int, seeds []uint64, coef []float64, k int) {
	nb := e.m.BlockSize
	if len(h) < rows*k || len(x) < rows*e.m.Dim || len(coef) < len(seeds)*nb*k {
		panic("features: Eval buffer too small")
	}
	h = h[:rows*k]
	clear(h)
	if len(seeds) == 0 || rows == 0 {
		return
	}
	e.growCache(len(seeds))
	nchunks := (len(seeds) + e.m.Chunk() - 1) / e.m.Chunk()
	if need := nchunks * rows * k; cap(e.partial) < need {
		e.partial = make([]float64, need)
	}
	e.x, e.rows, e.seeds, e.coef, e.k = x, rows, seeds, coef, k
	e.gen++
	e.round(x, rows)
	e.partial = e.partial[:nchunks*rows*k]
	e.run(nchunks, false)
	for c := 0; c < nchunks; c++ {
		part := e.partial[c*rows*k : (c+1)*rows*k]
		for i, v := range part {
			h[i] += v
		}
	}
	e.coef = nil
}

// run computes chunks 0…n−1 (of Eval, or of Grad when grad is set) on the
// workers, or on the caller's goroutine when there are none.
func (e *Evaluator) run(n int, grad bool) {
	e.grad = grad
	if e.tasks == nil || n == 1 {
		for c := 0; c < n; c++ {
			if grad {
				e.gradChunk(c, &e.scratch[0])
			} else {
				e.chunk(c, &e.scratch[0])
			}
		}
		return
	}
	e.wg.Add(n)
	for c := 0; c < n; c++ {
		e.tasks <- c
	}
	e.wg.Wait()
}

// EvalKeep is Eval that also keeps every block's features on x for the
// next Grad (within EvaluatorConfig.KeepBytes; past it Grad regenerates
// them). x and seeds must not change until Release or the next
// Eval. The sums, and so h, are the same bits as Eval's.
func (e *Evaluator) EvalKeep(h, x []float64, rows int, seeds []uint64, coef []float64, k int) {
	e.keep = nil
	n := rows * len(seeds) * e.m.BlockSize
	if int64(n)*8 > e.keepMax {
		// Past the bound for good while the blocks grow: Grad
		// regenerates the features, and the buffer would only hold
		// memory.
		e.keepBuf = nil
	} else {
		if cap(e.keepBuf) < n {
			e.keepBuf = make([]float64, keepSize(n, cap(e.keepBuf), rows*e.keepBlocks*e.m.BlockSize, int(e.keepMax/8)))
		}
		e.keep = e.keepBuf[:n]
	}
	e.eval(h, x, rows, seeds, coef, k)
	e.x, e.seeds = x, seeds // for Grad, kept or not
}

// keepSize is the length of a new keep buffer that must hold n values,
// replacing one of capacity old: the whole budget's (full) when it fits
// within limit values, otherwise twice the old one, within limit. A budget
// past the bound then costs a few buffers while its blocks grow, not one
// per block (with 512 rows and blocks of 512, one per step: 2 MiB, 4 MiB,
// …, 512 MiB, 64 GiB allocated in all).
func keepSize(n, old, full, limit int) int {
	if full >= n && full <= limit {
		return full
	}
	if full < n { // the budget is not known (or already passed)
		full = limit
	}
	return max(n, min(limit, full, 2*old))
}

// Grad sets g_j = Φ_j(x)ᵀ·(s·r) (B×k, row-major, at g[j·B·k:]) for every
// block j of the last EvalKeep, where r is rows×k: the gradient of
// Σ_rows r·H with respect to every block's coefficients (paper Eq. 6 over
// all blocks instead of the new one alone). Each element sums
// Φ_j[row,f]·(s·r[row,q]) over the rows in order with every product
// rounded, as AddMul does.
//
// mean, if not nil, receives the column means of those blocks' features
// (block j's at mean[j·B:]): what a centring learner needs to move its
// centre estimate with the functions.
func (e *Evaluator) Grad(g, r []float64, k int, s float64, mean []float64) {
	e.gradWith(g, r, k, s, mean, float64(e.rows))
}

// GradSums is Grad with sums, if not nil, receiving the column sums of the
// blocks' features rather than their means: the numbers a data-parallel
// step adds across the members' batches before dividing by their total.
func (e *Evaluator) GradSums(g, r []float64, k int, s float64, sums []float64) {
	e.gradWith(g, r, k, s, sums, 1)
}

// gradWith is Grad, with the column sums divided by div.
func (e *Evaluator) gradWith(g, r []float64, k int, s float64, mean []float64, div float64) {
	nb := e.m.BlockSize
	if e.x == nil || len(g) < len(e.seeds)*nb*k || len(r) < e.rows*k {
		panic("features: Grad without EvalKeep, or buffer too small")
	}
	if mean != nil && len(mean) < len(e.seeds)*nb {
		panic("features: Grad mean buffer too small")
	}
	e.resid, e.gradDst, e.gradK, e.gradScal, e.gradMean, e.gradDiv = r[:e.rows*k], g, k, s, mean, div
	// residT = (s·r)ᵀ, k rows padded with zeros to a multiple of four.
	e.gradKPad = (k + 3) &^ 3
	if need := e.gradKPad * e.rows; cap(e.residT) < need {
		e.residT = make([]float64, need)
	}
	e.residT = e.residT[:e.gradKPad*e.rows]
	clear(e.residT[k*e.rows:])
	for i := 0; i < e.rows; i++ {
		for q, v := range r[i*k : i*k+k] {
			e.residT[q*e.rows+i] = float64(v * s)
		}
	}
	if e.keep == nil {
		e.gen++
		e.round(e.x, e.rows)
	}
	e.run((len(e.seeds)+e.m.Chunk()-1)/e.m.Chunk(), true)
	e.resid, e.gradDst, e.gradMean = nil, nil, nil
}

// Kept returns block j's features (rows×B, row-major) on the batch of the
// last EvalKeep, or nil when they were not kept; valid until Release or the
// next Eval. They are the bits AddBlock computes for those rows.
func (e *Evaluator) Kept(j int) []float64 {
	if e.keep == nil || j < 0 || (j+1)*e.rows*e.m.BlockSize > len(e.keep) {
		return nil
	}
	return e.keep[j*e.rows*e.m.BlockSize : (j+1)*e.rows*e.m.BlockSize]
}

// Release drops the batch and features kept by EvalKeep.
func (e *Evaluator) Release() {
	e.x, e.x32, e.seeds, e.keep = nil, nil, nil, nil
}

// gradChunk computes the gradient blocks of chunk c from the kept (or
// regenerated) features: gᵀ = (s·r)ᵀ·Φ_j by AddMul, then transposed (k×B,
// small) into g; the BLAS mode calls the BLAS with Φ_j transposed.
func (e *Evaluator) gradChunk(c int, s *evalScratch) {
	rows, k, nb := e.rows, e.gradK, e.m.BlockSize
	phi := s.phiBuf(rows * nb)
	if cap(s.pt) < e.gradKPad*nb {
		s.pt = make([]float64, e.gradKPad*nb)
	}
	pt := s.pt[:e.gradKPad*nb]
	cb := e.m.Chunk()
	end := min((c+1)*cb, len(e.seeds))
	for j := c * cb; j < end; j++ {
		if e.keep != nil {
			phi = e.keep[j*rows*nb : (j+1)*rows*nb]
		} else {
			e.m.phiToWith(phi, s.z, e.x, e.x32, rows, e.block(j, e.seeds[j], s), s.stack(e.gen))
		}
		var mean []float64
		if e.gradMean != nil {
			mean = e.gradMean[j*nb : (j+1)*nb]
			clear(mean)
		}
		g := e.gradDst[j*nb*k : (j+1)*nb*k]
		clear(g)
		if e.m.BLAS {
			colSums(mean, phi, 0, rows, nb)
			divide(mean, e.gradDiv)
			blas64.Gemm(blas.Trans, blas.NoTrans, e.gradScal,
				blas64.General{Rows: rows, Cols: nb, Data: phi, Stride: nb},
				blas64.General{Rows: rows, Cols: k, Data: e.resid, Stride: k},
				0, blas64.General{Rows: nb, Cols: k, Data: g, Stride: k})
			continue
		}
		// gᵀ = (s·r)ᵀ·Φ_j, gradTileRows rows of Φ_j at a time: AddMul's
		// kernels walk a tile's rows four (padded) components at a time,
		// and the column sums take the tile while it is in cache. Each
		// element still sums over the rows in order.
		gt := pt[:e.gradKPad*nb]
		clear(gt)
		kp := e.gradKPad
		rt := s.rtBuf(kp * gradTileRows)
		for r0 := 0; r0 < rows; r0 += gradTileRows {
			n := min(gradTileRows, rows-r0)
			for q := range kp {
				copy(rt[q*n:(q+1)*n], e.residT[q*rows+r0:q*rows+r0+n])
			}
			tile := phi[r0*nb : (r0+n)*nb]
			addMul(e.m.SIMD, gt, rt[:kp*n], tile, kp, n, nb)
			colSums(mean, tile, 0, n, nb)
		}
		divide(mean, e.gradDiv)
		for q := 0; q < k; q++ {
			for f, v := range gt[q*nb : q*nb+nb] {
				g[f*k+q] = v
			}
		}
	}
}

// gradTileRows is how many rows of a block's features Grad takes at a
// time. Walking all of a block's rows for each group of four columns
// steps through memory by the block's row length, 4 KiB at B = 512:
// every row falls in the same set of a 4 KiB-aliased L1 cache, and the
// block (2 MiB at 512 rows) was read again from L3 or memory for each
// group of components. Eight rows fit the cache's eight ways
// (BenchmarkGradTile).
const gradTileRows = 8

// colSums adds the column sums of rows r0..r1−1 of the rows×nb matrix
// phi to sums, row by row in order (nothing for nil sums).
func colSums(sums, phi []float64, r0, r1, nb int) {
	if sums == nil {
		return
	}
	for r := r0; r < r1; r++ {
		for f, v := range phi[r*nb : (r+1)*nb] {
			sums[f] += v
		}
	}
}

// divide divides v by div (nothing for div 1).
func divide(v []float64, div float64) {
	if div == 1 {
		return
	}
	for i := range v {
		v[i] /= div
	}
}

func (s *evalScratch) rtBuf(n int) []float64 {
	if cap(s.rt) < n {
		s.rt = make([]float64, n)
	}
	return s.rt[:n]
}

// round sets e.x32 to x rounded to float32 for a Float32 map (nil
// otherwise), reusing its storage.
func (e *Evaluator) round(x []float64, rows int) {
	if !e.m.Float32 {
		e.x32 = nil
		return
	}
	n := rows * e.m.Dim
	if cap(e.x32buf) < n {
		e.x32buf = make([]float32, n)
	}
	e.x32 = e.x32buf[:n]
	round32(e.x32, x[:n])
}

// PhiTo writes the features of block j (seed seed) on rows×Dim inputs x
// into dst (rows×B), using the cache.
func (e *Evaluator) PhiTo(dst, x []float64, rows, j int, seed uint64) {
	e.growCache(j + 1)
	e.round(x, rows)
	e.gen++
	e.m.phiToWith(dst, e.scratch[0].z, x, e.x32, rows, e.block(j, seed, &e.scratch[0]), e.scratch[0].stack(e.gen))
	e.x32 = nil
}

// AddMul adds phi·a to dst, where phi is rows×nb, a is nb×k and dst is
// rows×k, all row-major. Every product is rounded before it is added, and
// each dst element sums over f in order, in a register: the kernels block
// four rows by four columns (AVX2, the last column group masked) or four
// rows by one column (portable), which changes the speed, not the bits.
func AddMul(dst, phi, a []float64, rows, nb, k int) { addMul(SIMDAuto, dst, phi, a, rows, nb, k) }

// addMul is AddMul with the kernels of level lv.
func addMul(lv SIMDLevel, dst, phi, a []float64, rows, nb, k int) {
	r0 := addMulSIMD(lv.level(), dst, phi, a, rows, nb, k)
	addMulGo(dst[r0*k:], phi[r0*nb:], a, rows-r0, nb, k)
}

// AddSquares adds the squared norm of each of the rows rows of phi
// (rows×nb) to sq: per row, four running sums s_l of φ_f² over the
// features f ≡ l (mod 4), in order, each product rounded, then
// (s₀ + s₁) + (s₂ + s₃) — an order another language can follow
// (clients/python), and one the AVX2 kernel keeps lane for lane, four
// rows at a time. It allocates nothing (the lanes of 64 rows at a time
// are on the stack).
func AddSquares(sq, phi []float64, rows, nb int) { addSquares(SIMDAuto, sq, phi, rows, nb) }

// squareRows is how many rows addSquares hands the kernel at once.
const squareRows = 64

// addSquares is AddSquares with the kernels of level lv.
func addSquares(lv SIMDLevel, sq, phi []float64, rows, nb int) {
	var lanes [4 * squareRows]float64
	for r0 := 0; r0 < rows; r0 += squareRows {
		n := min(squareRows, rows-r0)
		p := phi[r0*nb : (r0+n)*nb]
		done := squaresSIMD(lv.level(), lanes[:], p, n, nb)
		for r := 0; r < done; r++ {
			l := lanes[4*r : 4*r+4]
			row := p[r*nb : (r+1)*nb]
			for f := nb &^ 3; f < nb; f++ {
				l[f%4] += float64(row[f] * row[f])
			}
			sq[r0+r] += (l[0] + l[1]) + (l[2] + l[3])
		}
		squaresGo(sq[r0+done:r0+n], p[done*nb:], n-done, nb)
	}
}

// squaresGo is AddSquares in Go, a row at a time.
func squaresGo(sq, phi []float64, rows, nb int) {
	for r := 0; r < rows; r++ {
		p := phi[r*nb : (r+1)*nb]
		var s0, s1, s2, s3 float64
		f := 0
		for ; f+4 <= nb; f += 4 {
			s0 += float64(p[f] * p[f])
			s1 += float64(p[f+1] * p[f+1])
			s2 += float64(p[f+2] * p[f+2])
			s3 += float64(p[f+3] * p[f+3])
		}
		for ; f < nb; f++ {
			switch f % 4 {
			case 0:
				s0 += float64(p[f] * p[f])
			case 1:
				s1 += float64(p[f] * p[f])
			case 2:
				s2 += float64(p[f] * p[f])
			default:
				s3 += float64(p[f] * p[f])
			}
		}
		sq[r] += (s0 + s1) + (s2 + s3)
	}
}

// addMulGo is AddMul with scalar accumulators, four rows at a time.
func addMulGo(dst, phi, a []float64, rows, nb, k int) {
	r := 0
	for ; r+4 <= rows; r += 4 {
		p0, p1, p2, p3 := phi[r*nb:r*nb+nb], phi[(r+1)*nb:(r+2)*nb], phi[(r+2)*nb:(r+3)*nb], phi[(r+3)*nb:(r+4)*nb]
		for q := 0; q < k; q++ {
			s0, s1, s2, s3 := dst[r*k+q], dst[(r+1)*k+q], dst[(r+2)*k+q], dst[(r+3)*k+q]
			for f := 0; f < nb; f++ {
				v := a[f*k+q]
				s0 += float64(p0[f] * v)
				s1 += float64(p1[f] * v)
				s2 += float64(p2[f] * v)
				s3 += float64(p3[f] * v)
			}
			dst[r*k+q], dst[(r+1)*k+q], dst[(r+2)*k+q], dst[(r+3)*k+q] = s0, s1, s2, s3
		}
	}
	for ; r < rows; r++ {
		p := phi[r*nb : r*nb+nb]
		for q := 0; q < k; q++ {
			s := dst[r*k+q]
			for f, pf := range p {
				s += float64(pf * a[f*k+q])
			}
			dst[r*k+q] = s
		}
	}
}
