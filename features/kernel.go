package features

import (
	"errors"
	"fmt"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
	"gonum.org/v1/gonum/blas/blas64"
	"math"
	"unsafe"
)

// Family names a kernel of paper Table 1.
type Family string

// Kernel families (paper Table 1). ℓ is Kernel.Bandwidth; Δ = x − y.
const (
	// Gaussian: exp(−‖Δ‖²/(2ℓ²)); ω ~ N(0, I/ℓ²); φ = √2·cos(ωᵀx + b).
	Gaussian Family = "gaussian"
	// Laplacian: exp(−‖Δ‖₁/ℓ); ω_i ~ Cauchy(0, 1/ℓ); φ = √2·cos(ωᵀx + b).
	Laplacian Family = "laplacian"
	// Cauchy: Π_i 1/(1 + Δ_i²/ℓ²); ω_i ~ Laplace(0, 1/ℓ); φ = √2·cos(ωᵀx + b).
	// (Table 1 writes Π 2/(1+Δ_i²): the same kernel times 2^d, which only
	// scales eigenvalues.)
	Cauchy Family = "cauchy"
	// Matern(ν, ℓ): 2^(1−ν)/Γ(ν)·(√(2ν)r/ℓ)^ν·K_ν(√(2ν)r/ℓ), r = ‖Δ‖; ω is
	// multivariate Student-t with 2ν degrees of freedom and scale 1/ℓ:
	// ω = z/ℓ·√(2ν/g), z ~ N(0, I), g ~ χ²(2ν).
	Matern Family = "matern"
	// DotProduct: Σ_n a_n⟨x,y⟩ⁿ (Kar & Karnick's random Maclaurin
	// features): N ~ P[N = n] = 1/p^(n+1), φ = √(a_N·p^(N+1))·Π_{i≤N} ω_iᵀx,
	// ω_i Rademacher. Coefficients a_0…a_M (degrees above M contribute 0).
	DotProduct Family = "dotproduct"
	// Polynomial: (⟨x,y⟩ + c)^p by TensorSketch (Pham & Pagh): with
	// x' = (x, √c), p count sketches C_j x' (hash h_j: coordinates → B
	// buckets, signs s_j) and φ = the circular convolution of the p sketches
	// (= FFT⁻¹(Π_j FFT(C_j x'))), computed directly.
	Polynomial Family = "polynomial"
	// ExpSemigroup: exp(−β·Σ_i √(x_i + y_i)) for x, y ≥ 0; ω_i ~ Lévy(0, β²/2)
	// (density β/(2√π)·ω^(−3/2)·exp(−β²/(4ω))), ω_i = β²/(2z²);
	// φ = exp(−ωᵀx).
	ExpSemigroup Family = "expsemigroup"
	// RecSemigroup: Π_i λ/(x_i + y_i + λ) for x, y ≥ 0; ω_i ~ Exponential
	// (rate λ); φ = exp(−ωᵀx).
	RecSemigroup Family = "recsemigroup"
	// ArcCosine(n): (1/π)‖x‖ⁿ‖y‖ⁿJ_n(θ) (Cho & Saul), n ∈ {0, 1, 2};
	// ω ~ N(0, I); φ = √2·Θ(ωᵀx)·(ωᵀx)ⁿ.
	ArcCosine Family = "arccosine"
	// Linear: ⟨x, y⟩ with the identity feature map (no randomness): one
	// block of Dim features, Φ(x) = x. For a view that needs no kernel.
	Linear Family = "linear"
)

// Families lists every family.
var Families = []Family{Gaussian, Laplacian, Cauchy, Matern, DotProduct, Polynomial, ExpSemigroup, RecSemigroup, ArcCosine, Linear}

// Kernel is a kernel family with its parameters. Unused parameters must be
// zero. [Kernel.Validate] says what is missing.
type Kernel struct {
	// Family is the kernel family. Default: gaussian.
	Family Family `json:"family"`
	// Bandwidth is the length scale ℓ of gaussian, laplacian, cauchy and
	// matern kernels; > 0.
	Bandwidth float64 `json:"bandwidth,omitempty"`
	// Nu is the Matérn smoothness ν > 0 (closed-form Eval for 0.5, 1.5, 2.5).
	Nu float64 `json:"nu,omitempty"`
	// Degree is p of the polynomial kernel (1…8) or n of arc-cosine (0, 1, 2).
	Degree int `json:"degree,omitempty"`
	// Offset is c ≥ 0 of the polynomial kernel.
	Offset float64 `json:"offset,omitempty"`
	// Coefficients are a_0…a_M ≥ 0 of the dot-product kernel (M ≤ 12).
	Coefficients []float64 `json:"coefficients,omitempty"`
	// P > 1 is the dot-product kernel's degree distribution parameter.
	// Default (0): 2.
	P float64 `json:"p,omitempty"`
	// Beta > 0 of the exp-semigroup kernel.
	Beta float64 `json:"beta,omitempty"`
	// Lambda > 0 of the rec-semigroup kernel.
	Lambda float64 `json:"lambda,omitempty"`
}

// ErrKernel is returned (wrapped) for an invalid kernel or feature map.
var ErrKernel = errors.New("features: invalid kernel")

// ErrDomain is returned (wrapped) by CheckInput for inputs outside the
// kernel's domain (negative values for the semigroup kernels).
var ErrDomain = errors.New("features: input outside the kernel's domain")

func positive(v float64) bool { return v > 0 && !math.IsInf(v, 0) }

// Validate reports whether k can generate features.
func (k Kernel) Validate() error {
	bad := func(f string, a ...any) error {
		return fmt.Errorf("%w: %s: "+f, append([]any{ErrKernel, k.Family}, a...)...)
	}
	fam := k.Family.spec()
	if fam == nil {
		return fmt.Errorf("%w: unknown family %q (known: %v)", ErrKernel, k.Family, Families)
	}
	if fam.check != nil {
		return fam.check(k, bad)
	}
	return nil
}

// Identity reports whether the family's feature map is the identity (the
// linear kernel): one block of exactly Dim features, no randomness,
// nothing to grow and no landmarks.
func (f Family) Identity() bool { return f.has(func(s *family) bool { return s.identity }) }

// HasBandwidth reports whether the family has a length scale (set by the
// median trick when 0).
func (f Family) HasBandwidth() bool { return f.has(func(s *family) bool { return s.bandwidth }) }

// CheckInput reports an error for values outside the kernel's domain:
// the semigroup kernels need x ≥ 0. Other kernels accept any finite x.
func (k Kernel) CheckInput(x []float64) error {
	if !k.Family.has(func(s *family) bool { return s.nonnegative }) {
		return nil
	}
	for i, v := range x {
		if v < 0 {
			return fmt.Errorf("%w: %s kernel needs x ≥ 0, value %d is %v", ErrDomain, k.Family, i, v)
		}
	}
	return nil
}

// Eval returns the exact kernel value k(x, y) (paper Table 1), for tests and
// exact baselines. Matérn is closed-form for ν ∈ {0.5, 1.5, 2.5} only
// (NaN otherwise).
func (k Kernel) Eval(x, y []float64) float64 {
	if len(x) != len(y) {
		panic("features: dimension mismatch")
	}
	var s, dot, nx, ny float64
	for i := range x {
		d := x[i] - y[i]
		s += d * d
		dot += x[i] * y[i]
		nx += x[i] * x[i]
		ny += y[i] * y[i]
	}
	if fam := k.Family.spec(); fam != nil {
		return fam.eval(k, x, y, s, dot, nx, ny)
	}
	panic("features: Eval on invalid kernel " + string(k.Family))
}

// Map is the random feature map of a kernel on inputs of dimension Dim, in
// blocks of BlockSize features.
type Map struct {
	Kernel    Kernel
	Dim       int
	BlockSize int
	// Float32 computes z = x·Ω + b in float32 (Ω and b rounded to float32
	// once, x per row, every product and sum rounded to float32); the
	// activation and everything after it stay float64. Cached blocks take
	// half the memory and the product runs on twice the SIMD lanes. Only
	// for the shift-invariant families, whose phases are in turns: the
	// rounding of z moves each feature by ≲ 1e-4 of its scale √(2/B)
	// (measured 1.4e-5 for the Gaussian at d = 784), far below the
	// 1/√features of the approximation; the Laplacian's Cauchy
	// frequencies make |z| large, and its features move by up to ~1e-3.
	Float32 bool
	// BLAS computes the products x·Ω (and, in an Evaluator, Φ·α) with
	// the BLAS linked into the program through gonum's blas64/blas32 —
	// gonum's pure-Go BLAS by default, OpenBLAS in a binary built with the
	// openblas tag — in chunks of BLASRows rows. Results are deterministic
	// for a given binary and CPU but not bit-identical across them, and a
	// row's result may depend on how many rows share its call (BLAS
	// libraries pick kernels by shape): projections agree with the learner
	// to rounding, not bit for bit. Default false: the package's own
	// kernels, bit-identical everywhere.
	BLAS bool
	// Landmarks makes every block a landmark block (see [Landmarks]): B
	// points of the stream and the Nyström map they define, instead of B
	// random features from a seed. Its blocks are built by NewLandmarks
	// from data, not generated (Generate panics), and compute with the
	// package's own kernels (not with Float32 or BLAS).
	Landmarks bool
	// Structured draws each block's frequencies as structured orthogonal
	// random features (generator StructuredGeneratorID; see the package
	// comment): blocks of up to p = StructuredPad(Dim) orthogonal
	// directions with independent norms, evaluated by fast Walsh–Hadamard
	// transforms in O(p·log p) a row per p features instead of O(Dim) a
	// feature. Only for the radial families (Family.Radial), with the
	// package's float64 kernels (not with Float32, BLAS or Landmarks).
	Structured bool
	// SIMD selects the vector kernels (default SIMDAuto: the best this
	// CPU has). It changes the speed, never the bits, and is not part of
	// the model: snapshots do not record it.
	SIMD SIMDLevel
}

// MaxLandmarkBlock bounds the block size of a landmark map.
const MaxLandmarkBlock = 4096

// BLASRows is the row chunk of a BLAS-mode evaluation.
const BLASRows = 512

// Validate reports whether m is usable.
func (m Map) Validate() error {
	if err := m.Kernel.Validate(); err != nil {
		return err
	}
	if m.Dim < 1 {
		return fmt.Errorf("%w: dimension must be ≥ 1, got %d", ErrKernel, m.Dim)
	}
	if m.BlockSize < 1 || m.BlockSize > 1<<16 {
		return fmt.Errorf("%w: block size must be in [1, 65536], got %d", ErrKernel, m.BlockSize)
	}
	if m.Float32 && !m.Kernel.Family.ShiftInvariant() {
		return fmt.Errorf("%w: float32 precision is for the shift-invariant kernels (gaussian, laplacian, cauchy, matern), not %s", ErrKernel, m.Kernel.Family)
	}
	if m.Structured {
		if !m.Kernel.Family.Radial() {
			return fmt.Errorf("%w: structured orthogonal frequencies need a radial kernel (gaussian, matern, arccosine), not %s", ErrKernel, m.Kernel.Family)
		}
		if m.Float32 || m.BLAS || m.Landmarks {
			return fmt.Errorf("%w: structured orthogonal frequencies compute in float64 with the package's kernels (no float32 precision, BLAS compute or landmark blocks)", ErrKernel)
		}
		if m.Kernel.Family.ShiftInvariant() && m.BlockSize%2 != 0 {
			return fmt.Errorf("%w: structured orthogonal features of a shift-invariant kernel come in [cos, sin] pairs; the block size must be even, got %d", ErrKernel, m.BlockSize)
		}
		if m.Dim > 1<<20 {
			return fmt.Errorf("%w: structured orthogonal frequencies take at most %d dimensions, got %d", ErrKernel, 1<<20, m.Dim)
		}
	}
	if m.Landmarks {
		if m.Float32 || m.BLAS {
			return fmt.Errorf("%w: landmark blocks compute in float64 with the package's kernels (no float32 precision, no BLAS compute)", ErrKernel)
		}
		if err := landmarkFamily(m.Kernel); err != nil {
			return err
		}
		if m.BlockSize > MaxLandmarkBlock {
			return fmt.Errorf("%w: a landmark block holds at most %d points (factoring B points costs B³/3), got %d", ErrKernel, MaxLandmarkBlock, m.BlockSize)
		}
	}
	if m.Kernel.Family.Identity() && m.BlockSize != m.Dim {
		return fmt.Errorf("%w: the linear map has exactly Dim = %d features per block, got block size %d", ErrKernel, m.Dim, m.BlockSize)
	}
	return nil
}

// inDim is the dimension the product x·Ω sees (x plus √c for TensorSketch).
func (m Map) inDim() int {
	if m.Kernel.Family.has(func(s *family) bool { return s.offsetInput }) {
		return m.Dim + 1
	}
	return m.Dim
}

// cols is the number of columns of Ω: the intermediate values z = x·Ω per
// row before the family's map to the B features.
func (m Map) cols() int {
	if fam := m.Kernel.Family.spec(); fam != nil && fam.cols != nil {
		return fam.cols(m)
	}
	return m.BlockSize
}

// ScratchLen is the scratch PhiTo needs.
func (m Map) ScratchLen() int {
	if m.Landmarks {
		return 4 * m.BlockSize
	}
	if m.Structured {
		return m.structuredScratch()
	}
	rows := 4
	if m.BLAS {
		rows = BLASRows
	}
	c, din := max(m.cols(), 1), m.inDim()
	n := rows*c + rows*din + m.BlockSize
	if m.Float32 { // z (float64) then z and x in float32, viewed in place
		n = max(n, rows*c+(rows*c+rows*din+1)/2+1)
	}
	return n
}

// BlockBytes is the memory one generated block occupies in a cache.
func (m Map) BlockBytes() int {
	if m.Landmarks { // Z, Zᵀ, (L⁻¹)ᵀ, ‖z‖²
		return 8 * (2*m.Dim*m.BlockSize + m.BlockSize*m.BlockSize + m.BlockSize)
	}
	if m.Structured { // signs, scales, phases
		p := StructuredPad(m.Dim)
		return 8 * (3*(m.structuredStacks(p)+1)*p + m.structuredFreqs() + m.BlockSize)
	}
	if m.Float32 {
		return 4 * (m.inDim() + 1) * max(m.cols(), 1)
	}
	return 8 * (m.inDim() + 2) * max(m.cols(), 1)
}

// ShiftInvariant reports whether the family is one of the shift-invariant
// kernels, whose features are cos(2π(x·ω + b)).
func (f Family) ShiftInvariant() bool { return f.has(func(s *family) bool { return s.shiftInvariant }) }

// Block is one generated block: Omega (inDim × cols, row-major:
// Omega[c*cols+j]) and Phase (cols). For shift-invariant families Omega is
// in turns (ω/2π) and Phase in turns in [0, 1); for the others Phase is 0.
// Degree holds the dot-product degree N_f of each feature.
//
// With Map.Float32, Omega32 and Phase32 hold the same values rounded to
// float32; an evaluator's cache then drops the float64 copies.
type Block struct {
	Seed    uint64
	Omega   []float64
	Phase   []float64
	Degree  []int
	Omega32 []float32
	Phase32 []float32
	// Signs and Scale are a structured block's (Map.Structured; Omega is
	// then nil): three sign vectors of length p per stack, in the order
	// they are applied, and each feature's norm over p^{3/2} (in turns
	// over ℓ for the shift-invariant kernels).
	Signs []float64
	Scale []float64
	// LM is the landmark block of a landmark map (nil otherwise).
	LM *Landmarks
}

func grow(s []float64, n int) []float64 {
	if cap(s) < n {
		return make([]float64, n)
	}
	s = s[:n]
	clear(s)
	return s
}

// Generate fills dst with the block of the given seed, reusing its storage.
func (m Map) Generate(dst *Block, seed uint64) {
	if m.Landmarks {
		panic("features: landmark blocks are built from data (NewLandmarks), not generated")
	}
	if m.Structured {
		m.generateStructured(dst, seed)
		return
	}
	d, nb, cols, din := m.Dim, m.BlockSize, m.cols(), m.inDim()
	dst.Omega = grow(dst.Omega, din*max(cols, 1))
	dst.Phase = grow(dst.Phase, max(cols, 1))
	dst.Seed = seed
	k := m.Kernel
	ko := Key(seed, StreamOmega)
	set := func(c, j int, v float64) { dst.Omega[c*cols+j] = v }
	fam := k.Family.spec()
	if fam == nil {
		panic("features: Generate on invalid kernel " + string(k.Family))
	}
	fam.draw(k, seed, ko, d, nb, din, dst, set)
	if k.Family.ShiftInvariant() {
		kp := Key(seed, StreamPhase)
		for f := 0; f < nb; f++ {
			dst.Phase[f] = Uniform(Word(kp, uint64(f)))
		}
	}
	if m.Float32 {
		dst.Omega32 = to32(dst.Omega32, dst.Omega)
		dst.Phase32 = to32(dst.Phase32, dst.Phase)
	}
}

// round32 sets dst[i] = float32(src[i]).
func round32(dst []float32, src []float64) {
	for i, v := range src {
		dst[i] = float32(v)
	}
}

// phiToWith is PhiTo given x already rounded to float32 (xs32, nil when
// the map is float64).
//
// sc, if not nil, keeps a structured map's transform of the rows between
// the blocks of one evaluation (see stackCache).
func (m Map) phiToWith(dst, z, x []float64, xs32 []float32, rows int, b *Block, sc *stackCache) {
	if len(x) < rows*m.Dim || len(dst) < rows*m.BlockSize || len(z) < m.ScratchLen() {
		panic("features: PhiTo buffer too small")
	}
	switch {
	case m.Landmarks:
		m.phiLandmarks(dst, z, x, rows, b.LM)
	case m.Structured:
		m.phiStructured(dst, z, x, rows, b, sc)
	case m.BLAS:
		m.phiToBLAS(dst, z, x, xs32, rows, b)
	case m.Float32:
		m.phiTo32(dst, z, x, xs32, rows, b)
	default:
		m.phiTo64(dst, z, x, rows, b)
	}
}

func to32(dst []float32, src []float64) []float32 {
	if cap(dst) < len(src) {
		dst = make([]float32, len(src))
	}
	dst = dst[:len(src)]
	for i, v := range src {
		dst[i] = float32(v)
	}
	return dst
}

func (k Kernel) p() float64 {
	if k.P == 0 {
		return 2
	}
	return k.P
}

// degreeOf maps a uniform u to N with P[N = n] = (1 − 1/p)·p^(−n), the
// geometric law of Kar & Karnick normalised to sum to 1 (the paper's
// 1/p^(n+1) is this for p = 2). The feature weight is 1/P[N = n].
func degreeOf(u, p float64) int {
	n := 0
	c := 1 - 1/p // P[N = 0]
	acc := c
	for u > acc && n < 64 {
		n++
		c /= p
		acc += c
	}
	return n
}

// PhiTo writes the features of rows×Dim inputs x into dst (rows×B,
// row-major). Each row is computed with the same operations in the same
// order whatever rows is. z is scratch of at least ScratchLen() values.
func (m Map) PhiTo(dst, z, x []float64, rows int, b *Block) {
	m.phiToWith(dst, z, x, nil, rows, b, nil)
}

// phiTo64 is PhiTo with the package's float64 kernels.
func (m Map) phiTo64(dst, z, x []float64, rows int, b *Block) {
	d, nb, cols, din := m.Dim, m.BlockSize, m.cols(), m.inDim()
	zt := z[:4*cols]
	xr := z[4*cols : 4*cols+4*din]
	tmp := z[4*cols+4*din:]
	row := func(r, q int) []float64 {
		if din == d {
			return x[r*d : r*d+d]
		}
		xq := xr[q*din : (q+1)*din]
		copy(xq, x[r*d:r*d+d])
		xq[d] = math.Sqrt(m.Kernel.Offset)
		return xq
	}
	for r := 0; r < rows; r += 4 {
		n := min(4, rows-r)
		for q := 0; q < 4; q++ {
			copy(zt[q*cols:(q+1)*cols], b.Phase[:cols])
		}
		if n == 4 {
			tile4(m.SIMD.level(), zt, row(r, 0), row(r+1, 1), row(r+2, 2), row(r+3, 3), b.Omega, din, cols)
		} else {
			for q := 0; q < n; q++ {
				oneRow(zt[q*cols:(q+1)*cols], row(r+q, q), b.Omega, din, cols)
			}
		}
		m.activate(dst[r*nb:(r+n)*nb], zt[:n*cols], n, b, tmp)
	}
}

// phiTo32 is PhiTo with z = x·Ω + b in float32 (Map.Float32): the
// float32 views of the scratch hold four rows of x and of z; z is widened
// to float64 for the activation. Shift-invariant families only, so
// cols = B and inDim = Dim.
//
// xs32, if not nil, is x already rounded to float32 (an Evaluator rounds
// a batch once for all its blocks); otherwise each tile is rounded here.
func (m Map) phiTo32(dst, z, x []float64, xs32 []float32, rows int, b *Block) {
	d, nb := m.Dim, m.BlockSize
	zt := z[:4*nb]
	rest := z[4*nb:]
	// The float32 scratch lives in the float64 scratch's memory
	// (float64 alignment satisfies float32's).
	f32 := unsafe.Slice((*float32)(unsafe.Pointer(&rest[0])), 4*nb+4*d)
	z32, x32 := f32[:4*nb], f32[4*nb:]
	for r := 0; r < rows; r += 4 {
		n := min(4, rows-r)
		xt := x32
		if xs32 != nil {
			xt = xs32[r*d : (r+n)*d]
		}
		for q := 0; q < n; q++ {
			copy(z32[q*nb:(q+1)*nb], b.Phase32)
			if xs32 == nil {
				round32(x32[q*d:(q+1)*d], x[(r+q)*d:(r+q+1)*d])
			}
		}
		if n == 4 {
			tile4f32(m.SIMD.level(), z32, xt[:d], xt[d:2*d], xt[2*d:3*d], xt[3*d:4*d], b.Omega32, d, nb)
		} else {
			for q := 0; q < n; q++ {
				oneRow(z32[q*nb:(q+1)*nb], xt[q*d:(q+1)*d], b.Omega32, d, nb)
			}
		}
		for i, v := range z32[:n*nb] {
			zt[i] = float64(v)
		}
		m.activate(dst[r*nb:(r+n)*nb], zt[:n*nb], n, b, nil)
	}
}

// phiToBLAS is PhiTo with z = x·Ω + b computed by the linked BLAS
// (Map.BLAS), BLASRows rows per call: z is initialised to the phases and
// GEMM adds x·Ω to it (beta = 1); float32 maps call SGEMM.
func (m Map) phiToBLAS(dst, z, x []float64, xs32 []float32, rows int, b *Block) {
	d, nb, cols, din := m.Dim, m.BlockSize, m.cols(), m.inDim()
	zc := z[:BLASRows*cols]
	xc := z[BLASRows*cols : BLASRows*cols+BLASRows*din]
	var z32, x32 []float32
	if m.Float32 {
		rest := z[BLASRows*cols:]
		f32 := unsafe.Slice((*float32)(unsafe.Pointer(&rest[0])), BLASRows*cols+BLASRows*din)
		z32, x32 = f32[:BLASRows*cols], f32[BLASRows*cols:]
	}
	for r := 0; r < rows; r += BLASRows {
		n := min(BLASRows, rows-r)
		if m.Float32 {
			xt := x32[:n*d]
			if xs32 != nil {
				xt = xs32[r*d : (r+n)*d]
			} else {
				round32(xt, x[r*d:(r+n)*d])
			}
			for q := 0; q < n; q++ {
				copy(z32[q*cols:(q+1)*cols], b.Phase32)
			}
			blas32.Gemm(blas.NoTrans, blas.NoTrans, 1,
				blas32.General{Rows: n, Cols: din, Data: xt, Stride: din},
				blas32.General{Rows: din, Cols: cols, Data: b.Omega32, Stride: cols},
				1, blas32.General{Rows: n, Cols: cols, Data: z32, Stride: cols})
			for i, v := range z32[:n*cols] {
				zc[i] = float64(v)
			}
		} else {
			xin := x[r*d : (r+n)*d] // used in place unless augmented
			for q := 0; q < n; q++ {
				copy(zc[q*cols:(q+1)*cols], b.Phase[:cols])
				if din > d {
					xq := xc[q*din : (q+1)*din]
					copy(xq, x[(r+q)*d:(r+q+1)*d])
					xq[d] = math.Sqrt(m.Kernel.Offset)
				}
			}
			if din > d {
				xin = xc[:n*din]
			}
			blas64.Gemm(blas.NoTrans, blas.NoTrans, 1,
				blas64.General{Rows: n, Cols: din, Data: xin, Stride: din},
				blas64.General{Rows: din, Cols: cols, Data: b.Omega, Stride: cols},
				1, blas64.General{Rows: n, Cols: cols, Data: zc, Stride: cols})
		}
		m.activate(dst[r*nb:(r+n)*nb], zc[:n*cols], n, b, z[BLASRows*cols+BLASRows*din:])
	}
}

// oneRow is tile4Go for a single row: z[j] += x[c]·Ω[c,j], c in order.
func oneRow[T float32 | float64](z, x, om []T, d, cols int) {
	for c := 0; c < d; c++ {
		a := x[c]
		w := om[c*cols : c*cols+cols]
		for j, wj := range w {
			z[j] += T(a * wj) // the conversion rounds the product: no fusing
		}
	}
}

// activate maps the n rows of z (n×cols) to features (n×B).
func (m Map) activate(dst, z []float64, n int, b *Block, tmp []float64) {
	m.Kernel.Family.spec().activate(m, dst, z, n, m.cols(), b, tmp)
}

// tile4Go is the portable tile4: z_q[j] += x_q[c]·Ω[c,j], c in order.
func tile4Go[T float32 | float64](z, x0, x1, x2, x3, om []T, d, nb int) {
	z0, z1, z2, z3 := z[:nb], z[nb:2*nb], z[2*nb:3*nb], z[3*nb:4*nb]
	for c := 0; c < d; c++ {
		w := om[c*nb : c*nb+nb]
		a0, a1, a2, a3 := x0[c], x1[c], x2[c], x3[c]
		for f, wf := range w {
			z0[f] += T(a0 * wf)
			z1[f] += T(a1 * wf)
			z2[f] += T(a2 * wf)
			z3[f] += T(a3 * wf)
		}
	}
}
