// Package features implements kernels and their random feature maps
// (paper Table 1) together with a project-owned, counter-based generator
// that turns (block seed, feature index) into the random frequencies and
// phases of a feature block.
//
// # Random Fourier features
//
// For a shift-invariant kernel k(x, y) = k(x − y), Bochner's theorem (paper
// Sec. 2.3) gives k(x, y) = E[φ_ω(x) φ_ω(y)] with φ_ω(x) = √2·cos(ωᵀx + b),
// ω ~ p(ω), b ~ U[0, 2π). A block of B features stacks B such draws and is
// scaled by 1/√B so that a single block is an unbiased estimate of the kernel:
//
//	Φ(x) = √(2/B) · cos(x·Ω + b),   k(x, y) ≈ Φ(x)·Φ(y)ᵀ.
//
// Frequencies are stored in turns (ω/2π) and phases in turns in [0, 1), so
// the evaluation is Φ(x) = √(2/B)·cos2π(x·Ω' + β) with Ω' = Ω/2π, β = b/2π.
//
// # Generator (id "splitmix64-bm-v1")
//
// Every random number is a pure function of (seed, stream, index); nothing is
// drawn from a stateful source, so any block can be regenerated on its own,
// in any order, on any platform, and in another language:
//
//	fmix64(z): z ^= z>>30; z *= 0xBF58476D1CE4E5B9; z ^= z>>27;
//	           z *= 0x94D049BB133111EB; z ^= z>>31            (SplitMix64 finaliser)
//	key(seed, stream) = fmix64(seed ^ fmix64(stream + 0x9E3779B97F4A7C15))
//	word(key, i)      = fmix64(key + (i+1)·0x9E3779B97F4A7C15)   (mod 2⁶⁴)
//	uniform(w)        = ((w >> 11) + 0.5) · 2⁻⁵³                 ∈ (0, 1)
//
// Standard normals come in Box–Muller pairs: for pair j, u₁ = uniform(word(key,
// 2j)), u₂ = uniform(word(key, 2j+1)), r = √(−2·Log(u₁)), z_{2j} = r·Cos2π(u₂),
// z_{2j+1} = r·Cos2π(u₂ − 1/4). Log and Cos2π are this package's own
// polynomial implementations (see [Log] and [Cos2Pi]), every product rounded
// separately (no fused multiply-add), so the bits do not depend on the
// platform's libm or on the compiler's FMA fusion.
//
// Streams: 1 frequencies, 2 phases, 3 block seeds derived from a model seed.
// Within a block of B features in d dimensions, feature f uses normals
// f·d … f·d+d−1 of stream 1 and uniform f of stream 2.
//
// # Structured orthogonal frequencies (generator id "splitmix64-sorf-v1")
//
// A structured map (Map.Structured; radial families only: gaussian,
// matern, arccosine) draws each frequency as a direction of a random
// orthogonal matrix with an independent norm (Yu et al., "Orthogonal
// Random Features", NeurIPS 2016, their SORF). With p the least power of
// two ≥ d, H the unnormalised p×p Walsh–Hadamard matrix and D_u diagonal
// random signs, a stack is M = H·D₃·H·D₂·H·D₁/p^{3/2} (orthonormal rows).
// A block of B features has n frequencies: B/2 for the shift-invariant
// families, each giving the pair cos 2π(ωᵀx), cos 2π(ωᵀx + ¾) = sin 2π(ωᵀx)
// (features 2j, 2j+1), and B for arc-cosine. A block's seed s names its
// stacks by base = s with the low 8 bits cleared and its part = s mod 256:
// its frequencies are the global ones g = part·n … part·n + n − 1, global
// frequency g being row g mod p of stack t = g/p of base, x padded with
// zeros to p:
//
//	signs:  D_u[i] of stack t = −1 if word(key(base, 1), (3t+u−1)·p + i) ≥ 2⁶³, else 1
//	norm:   χ_g = √(2·Gamma(p/2)), Gamma drawn (gammaDraw) from key(word(key(base, 5), g), 0);
//	        matern: χ_g·√(2ν/(2·Gamma(ν))), that Gamma from key(word(key(base, 6), g), 0)
//	scale:  χ_g / ((2π·ℓ)·p·√p) in turns (arc-cosine: χ_g / (p·√p)), each product rounded
//	z_g(x): (H·D₃·H·D₂·H·D₁·x̃)[g mod p] · scale_g
//
// H·v is computed by stages h = p/2, p/4, …, 1, each replacing (v_i, v_{i+h})
// by (v_i + v_{i+h}, v_i − v_{i+h}) for i & h = 0 (additions only: the same
// bits in any language). Map.BlockSeed gives a model's consecutive blocks
// consecutive parts of one base, so that they tile whole stacks.
//
// # Invariants
//
//   - A block is a pure function of (generator id, kernel, dimension, block
//     size, seed). Changing any output of the generator changes the meaning of
//     every stored snapshot; the golden vectors in the tests pin it, and a
//     deliberate change must come with a new generator id.
//   - Evaluation is row-independent: the features of one row do not depend on
//     the other rows of the batch, so a point projected alone gets the same
//     bits as the same point inside a training batch. (Not in BLAS mode,
//     below, where it holds to rounding.)
//   - Hot loops do not allocate; scratch lives on the receiver.
//
// # Speed
//
// A step's cost is x·Ω (2·b·features·d flops), the activation (one cosine
// per feature and row) and Φ·α (2·b·features·k). Each has a kernel that
// performs exactly the Go code's operations in the same order, every
// product and sum rounded separately (no fused multiply-add): AVX-512 where
// the CPU has it, else AVX2, else Go, all giving the same bits
// (TestSIMDBitIdentical). x·Ω runs on tiles of four rows; the cosine is
// this package's polynomial Cos2Pi on eight lanes; Φ·α keeps a block of
// four rows by four columns of the result in registers. Φ is never
// materialised beyond one block (B features) for the rows of a batch.
//
// Two opt-in modes trade that portability for speed:
//   - Map.Float32: x·Ω in float32 (twice the lanes, half the cache); the
//     cosine and Φ·α stay float64. Still bit-identical across CPUs.
//   - Map.BLAS: x·Ω and Φ·α through gonum's blas64/blas32, i.e. the BLAS
//     linked into the binary (OpenBLAS with the openblas build tag, whose
//     FMA kernels do twice the flops per cycle). Deterministic for a given
//     binary and CPU; agrees with the default to rounding.
package features

// SIMD names the vector kernels this process uses by default (Map.SIMD
// SIMDAuto): "avx512", "avx2" or "go" (a CPU without AVX2, or the purego
// build tag); STREAMKPCA_NO_AVX512=1 in the environment leaves AVX-512
// out. Every level gives the same bits.
func SIMD() string { return SIMDAuto.level().String() }

// SIMDLevel selects the vector kernels a Map (and an Evaluator of it)
// runs. Every level computes the same bits; the choice is speed only,
// for comparisons and for CPUs that slow their clock under AVX-512.
type SIMDLevel uint8

const (
	// SIMDAuto is the best level this CPU has, without AVX-512 when the
	// environment has STREAMKPCA_NO_AVX512=1 (read once, at start-up).
	SIMDAuto SIMDLevel = iota
	// SIMDGo is the portable Go code.
	SIMDGo
	// SIMDAVX2 uses the AVX2 kernels.
	SIMDAVX2
	// SIMDAVX512 uses the AVX-512 kernels where they exist (the tiles
	// and the cosine), AVX2 elsewhere.
	SIMDAVX512
)

func (l SIMDLevel) String() string {
	switch l {
	case SIMDGo:
		return "go"
	case SIMDAVX2:
		return "avx2"
	case SIMDAVX512:
		return "avx512"
	}
	return "auto"
}

// level is l resolved against the CPU: Auto becomes the detected level
// and a request above it is lowered to it.
func (l SIMDLevel) level() SIMDLevel {
	if l == SIMDAuto || l > detected {
		return detected
	}
	return l
}
