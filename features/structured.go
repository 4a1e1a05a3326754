package features

import "math"

// StructuredGeneratorID names the generator of structured orthogonal
// random features, documented in the package comment ("Structured
// orthogonal frequencies"). A snapshot with a structured view carries it
// instead of GeneratorID; the i.i.d. blocks it holds are GeneratorID's.
const StructuredGeneratorID = "splitmix64-sorf-v1"

// StreamExtra2 is a second stream of kernel-specific draws (the Matérn
// kernel's χ² mixing of structured blocks).
const StreamExtra2 uint64 = 6

// Radial reports whether the family's spectral density is radial (a
// function of ‖ω‖ alone): gaussian, matern and arc-cosine. Only those
// keep their kernel when frequencies are drawn as orthogonal directions
// with independent norms; the product kernels (laplacian, cauchy, the
// semigroups) do not.
func (f Family) Radial() bool { return f.has(func(s *family) bool { return s.radial }) }

// StructuredPad is the transform length p of a structured map on inputs
// of dimension d: the least power of two ≥ d.
func StructuredPad(d int) int {
	p := 1
	for p < d {
		p <<= 1
	}
	return p
}

// structuredStacks is the number of p×p orthogonal stacks a block of nb
// features draws from.
func (m Map) structuredStacks(p int) int { return (m.structuredFreqs() + p - 1) / p }

// structuredFreqs is the number of frequencies of a structured block:
// one per feature for arc-cosine, one per pair of features [cos, sin]
// for the shift-invariant kernels.
func (m Map) structuredFreqs() int {
	if m.Kernel.Family.ShiftInvariant() {
		return m.BlockSize / 2
	}
	return m.BlockSize
}

// pairPhase is the phase, in turns, of the second feature of a pair:
// cos 2π(t + ¾) = sin 2πt.
const pairPhase = 0.75

// structuredPartBits is how many low bits of a structured block's seed
// name its part: the block's frequencies are rows part·n … part·n+n−1 of
// the sequence of stacks its seed's other bits key (n frequencies a
// block), so consecutive blocks of a model share stacks and their
// frequencies are orthogonal to each other (Map.BlockSeed).
const structuredPartBits = 8

// BlockSeed returns the seed of block j of a model (or view) whose seeds
// derive from modelSeed: DeriveSeed(modelSeed, j) for i.i.d. frequencies;
// for a structured map, blocks come in groups of G = p/n (n frequencies a
// block, at most 256) that share the stacks of DeriveSeed(modelSeed, j/G)
// with its low byte replaced by the block's part j mod G.
func (m Map) BlockSeed(modelSeed uint64, j int) uint64 {
	if !m.Structured {
		return DeriveSeed(modelSeed, uint64(j))
	}
	g := m.structuredGroup()
	base := DeriveSeed(modelSeed, uint64(j/g))
	return base&^(1<<structuredPartBits-1) | uint64(j%g)
}

// structuredGroup is G, the blocks that share a stack.
func (m Map) structuredGroup() int {
	return max(1, min(StructuredPad(m.Dim)/m.structuredFreqs(), 1<<structuredPartBits))
}

// structuredRange returns the block's first global frequency and its
// first and last stack.
func (m Map) structuredRange(seed uint64) (g0, t0, t1 int) {
	p, nf := StructuredPad(m.Dim), m.structuredFreqs()
	g0 = int(seed&(1<<structuredPartBits-1)) * nf
	return g0, g0 / p, (g0 + nf - 1) / p
}

// generateStructured fills dst with the structured block of the given
// seed (see the package comment): the three sign vectors of each stack
// it draws from, in the order they are applied, one scale per frequency
// and one phase per feature.
func (m Map) generateStructured(dst *Block, seed uint64) {
	k, nb := m.Kernel, m.BlockSize
	p, nf := StructuredPad(m.Dim), m.structuredFreqs()
	g0, t0, t1 := m.structuredRange(seed)
	base := seed &^ (1<<structuredPartBits - 1)
	dst.Seed = seed
	dst.Omega, dst.Omega32, dst.Phase32, dst.Degree = nil, nil, nil, nil
	dst.Signs = grow(dst.Signs, 3*(t1-t0+1)*p)
	dst.Scale = grow(dst.Scale, nf)
	dst.Phase = grow(dst.Phase, nb)
	ko := Key(base, StreamOmega)
	for i := range dst.Signs {
		dst.Signs[i] = 1
		if Word(ko, uint64(3*t0*p+i))>>63 == 1 {
			dst.Signs[i] = -1
		}
	}
	// M = H·D₃·H·D₂·H·D₁/p^{3/2} has orthonormal rows; global frequency
	// g is row g mod p of stack g/p, times a norm drawn as the kernel's ‖ω‖.
	pf := float64(p)
	norm := 1 / float64(pf*math.Sqrt(pf))
	if k.Family != ArcCosine { // frequencies in turns, over ℓ
		norm = 1 / float64(float64(float64(2*math.Pi*k.Bandwidth)*pf)*math.Sqrt(pf))
	}
	kr := Key(base, StreamExtra1)
	km := Key(base, StreamExtra2)
	for j := 0; j < nf; j++ {
		g := uint64(g0 + j)
		chi := math.Sqrt(2 * gammaDraw(Key(Word(kr, g), 0), pf/2)) // χ_p: the norm of p normals
		if k.Family == Matern {
			mix := 2 * gammaDraw(Key(Word(km, g), 0), k.Nu) // χ²(2ν): the Student-t mixing
			chi = float64(chi * math.Sqrt(2*k.Nu/mix))
		}
		dst.Scale[j] = float64(chi * norm)
	}
	if k.Family.ShiftInvariant() { // pairs [cos, sin] of one frequency
		for f := 1; f < nb; f += 2 {
			dst.Phase[f] = pairPhase
		}
	}
}

// structuredScratch is the scratch phiStructured needs: four rows of z
// and the transform of four rows, interleaved.
func (m Map) structuredScratch() int { return 4*m.BlockSize + 4*StructuredPad(m.Dim) }

// stackCache keeps the transform of an evaluation's rows by one stack,
// for the next blocks of the same group (consecutive blocks share their
// stack: Map.BlockSeed), so a stack of p frequencies is transformed once
// per evaluation rather than once per block. It holds one stack of an
// evaluation of generation gen (Evaluator), up to stackCacheBytes.
type stackCache struct {
	gen   uint64
	valid bool
	base  uint64 // the stack's seed bits and index
	t     int
	v     []float64 // tile r4's four rows interleaved at v[r4·4p:]
}

// stackCacheBytes bounds a stackCache (rows × p × 8 bytes).
const stackCacheBytes = 32 << 20

// phiStructured is PhiTo for a structured map: four rows at a time, each
// stack's transform v = H·D₃·H·D₂·H·D₁·x̃ (x̃ is x padded with zeros to
// p) on the four rows interleaved (v[4i+q] is coordinate i of row q),
// then z = v_i·scale for the block's frequencies, the second feature of
// a pair shifted by a quarter turn, and the family's activation.
func (m Map) phiStructured(dst, z, x []float64, rows int, b *Block, sc *stackCache) {
	d, nb := m.Dim, m.BlockSize
	p, nf := StructuredPad(d), m.structuredFreqs()
	g0, t0, t1 := m.structuredRange(b.Seed)
	base := b.Seed &^ (1<<structuredPartBits - 1)
	zt := z[:4*nb]
	tiles := (rows + 3) / 4
	var cached []float64
	if sc != nil && t0 == t1 && nf < p && tiles*4*p*8 <= stackCacheBytes {
		if !sc.valid || sc.base != base || sc.t != t0 {
			if cap(sc.v) < tiles*4*p {
				sc.v = make([]float64, tiles*4*p)
			}
			sc.v = sc.v[:tiles*4*p]
			for r := 0; r < rows; r += 4 {
				m.stackTransform(sc.v[r*p:(r+4)*p], x, r, min(4, rows-r), b.Signs[:3*p])
			}
			sc.valid, sc.base, sc.t = true, base, t0
		}
		cached = sc.v
	}
	v := z[4*nb : 4*nb+4*p]
	for r := 0; r < rows; r += 4 {
		n := min(4, rows-r)
		for t := t0; t <= t1; t++ {
			if cached != nil {
				v = cached[r*p : (r+4)*p]
			} else {
				m.stackTransform(v, x, r, n, b.Signs[3*(t-t0)*p:3*(t-t0+1)*p])
			}
			// the block's frequencies in this stack: global g0+j0 … g0+j1−1
			j0, j1 := max(t*p-g0, 0), min((t+1)*p-g0, nf)
			m.structuredOut(zt, v[4*(g0+j0-t*p):], b.Scale[j0:j1], n, j0)
		}
		m.activate(dst[r*nb:(r+n)*nb], zt[:n*nb], n, b, nil)
	}
}

// stackTransform sets v (4p) to the transform of rows r … r+n−1 of x by
// the stack whose signs are sg (3p), four rows interleaved (rows past n
// are zeros).
func (m Map) stackTransform(v, x []float64, r, n int, sg []float64) {
	d, p := m.Dim, len(sg)/3
	lv := m.SIMD.level()
	clear(v[4*d : 4*p])
	i0 := 0
	if n == 4 {
		i0 = interleave4SIMD(lv, v, x[r*d:(r+4)*d], sg, d)
	}
	for q := 0; q < 4; q++ {
		if q >= n {
			for i := 0; i < d; i++ {
				v[4*i+q] = 0
			}
			continue
		}
		xr := x[(r+q)*d : (r+q+1)*d]
		for i := i0; i < d; i++ {
			v[4*i+q] = xr[i] * sg[i] // a sign: exact
		}
	}
	fwht4(lv, v, p)
	signs4(lv, v, sg[p:2*p])
	fwht4(lv, v, p)
	signs4(lv, v, sg[2*p:3*p])
	fwht4(lv, v, p)
}

// structuredOut writes z for n rows of the block's frequencies j0 … j0+
// len(sc)−1 from their transform values vs (interleaved, frequency i at
// vs[4i:]): z = v·scale, and for a pair the same plus a quarter turn.
func (m Map) structuredOut(zt, vs, sc []float64, n, j0 int) {
	nb := m.BlockSize
	pair := m.structuredFreqs() < nb
	w := 1
	if pair {
		w = 2
	}
	i0 := 0
	if n == 4 {
		i0 = structuredOutSIMD(m.SIMD.level(), zt[w*j0:], nb, vs, sc, pair)
	}
	for q := 0; q < n; q++ {
		if pair {
			zq := zt[q*nb+2*j0 : q*nb+2*(j0+len(sc))]
			for i := i0; i < len(sc); i++ {
				u := float64(vs[4*i+q] * sc[i])
				zq[2*i] = u
				zq[2*i+1] = u + pairPhase
			}
			continue
		}
		zq := zt[q*nb+j0 : q*nb+j0+len(sc)]
		for i := i0; i < len(sc); i++ {
			zq[i] = float64(vs[4*i+q] * sc[i])
		}
	}
}

// signs4 multiplies coordinate i of the four interleaved rows by s[i]
// (±1: exact).
func signs4(lv SIMDLevel, v, s []float64) {
	if signs4SIMD(lv, v, s) {
		return
	}
	signs4Go(v, s)
}

// signs4Go is signs4 in Go.
func signs4Go(v, s []float64) {
	for i, si := range s {
		w := v[4*i : 4*i+4 : 4*i+4]
		w[0] *= si
		w[1] *= si
		w[2] *= si
		w[3] *= si
	}
}

// fwht4 applies the unnormalised Walsh–Hadamard transform of length p (a
// power of two) to four interleaved rows in place: stages h = p/2, p/4,
// …, 1, each replacing (a, b) = (v_i, v_{i+h}) by (a + b, a − b) for
// every i with i & h = 0. Additions only, so every level's kernel gives
// the same bits.
func fwht4(lv SIMDLevel, v []float64, p int) {
	if p >= 4 && fwht4SIMD(lv, v, p) {
		return
	}
	fwht4Go(v, p)
}

// fwht4Go is fwht4 in Go.
func fwht4Go(v []float64, p int) {
	for h := p / 2; h >= 1; h /= 2 {
		for i0 := 0; i0 < p; i0 += 2 * h {
			for i := i0; i < i0+h; i++ {
				a := v[4*i : 4*i+4 : 4*i+4]
				b := v[4*(i+h) : 4*(i+h)+4 : 4*(i+h)+4]
				a0, a1, a2, a3 := a[0], a[1], a[2], a[3]
				b0, b1, b2, b3 := b[0], b[1], b[2], b[3]
				a[0], a[1], a[2], a[3] = a0+b0, a1+b1, a2+b2, a3+b3
				b[0], b[1], b[2], b[3] = a0-b0, a1-b1, a2-b2, a3-b3
			}
		}
	}
}
