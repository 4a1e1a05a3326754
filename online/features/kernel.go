package features

import (
	"errors"
	"fmt"
	"math"
)

// Family names a kernel of paper Table 1.
type Family string

// Kernel families. Only shift-invariant families evaluate as
// √(2/B)·cos(x·Ω + b); the others have their own feature maps.
const (
	Gaussian Family = "gaussian" // exp(−‖x−y‖²/(2ℓ²)); ω ~ N(0, I/ℓ²)
)

// Kernel is a kernel family with its parameters. The zero value is not
// valid; [Kernel.Validate] says what is missing.
type Kernel struct {
	// Family is the kernel family. Default: gaussian.
	Family Family `json:"family"`
	// Bandwidth is the length scale ℓ of the Gaussian kernel
	// exp(−‖x−y‖²/(2ℓ²)). It must be positive and finite.
	Bandwidth float64 `json:"bandwidth"`
}

// ErrKernel is returned (wrapped) for an invalid kernel or feature map.
var ErrKernel = errors.New("features: invalid kernel")

// Validate reports whether k can generate features.
func (k Kernel) Validate() error {
	switch k.Family {
	case Gaussian:
		if !(k.Bandwidth > 0) || math.IsInf(k.Bandwidth, 0) {
			return fmt.Errorf("%w: gaussian bandwidth must be positive and finite, got %v", ErrKernel, k.Bandwidth)
		}
	default:
		return fmt.Errorf("%w: unknown family %q (known: gaussian)", ErrKernel, k.Family)
	}
	return nil
}

// Eval returns the exact kernel value k(x, y) (paper Table 1), for tests and
// for the exact baselines.
func (k Kernel) Eval(x, y []float64) float64 {
	if len(x) != len(y) {
		panic("features: dimension mismatch")
	}
	switch k.Family {
	case Gaussian:
		var s float64
		for i := range x {
			d := x[i] - y[i]
			s += d * d
		}
		return math.Exp(-s / (2 * k.Bandwidth * k.Bandwidth))
	}
	panic("features: Eval on invalid kernel " + string(k.Family))
}

// Map is the random feature map of a kernel on inputs of dimension Dim, in
// blocks of BlockSize features.
type Map struct {
	Kernel    Kernel
	Dim       int
	BlockSize int
}

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
	return nil
}

// BlockBytes is the memory one generated block occupies.
func (m Map) BlockBytes() int { return 8 * (m.Dim + 1) * m.BlockSize }

// Block is one generated block of random features: frequencies in turns
// (Dim×BlockSize, row-major: Omega[c*B+f] is coordinate c of feature f) and
// phases in turns in [0, 1).
type Block struct {
	Seed  uint64
	Omega []float64
	Phase []float64
}

// Generate fills dst with the block of the given seed, reusing its storage.
func (m Map) Generate(dst *Block, seed uint64) {
	d, nb := m.Dim, m.BlockSize
	if cap(dst.Omega) < d*nb {
		dst.Omega = make([]float64, d*nb)
	}
	if cap(dst.Phase) < nb {
		dst.Phase = make([]float64, nb)
	}
	dst.Omega = dst.Omega[:d*nb]
	dst.Phase = dst.Phase[:nb]
	dst.Seed = seed
	switch m.Kernel.Family {
	case Gaussian:
		// ω ~ N(0, I/ℓ²), stored in turns: ω/(2π).
		scale := 1 / (2 * math.Pi * m.Kernel.Bandwidth)
		ko := Key(seed, StreamOmega)
		for f := 0; f < nb; f++ {
			for c := 0; c < d; c++ {
				dst.Omega[c*nb+f] = float64(Normal(ko, uint64(f*d+c)) * scale)
			}
		}
	default:
		panic("features: Generate on invalid kernel " + string(m.Kernel.Family))
	}
	kp := Key(seed, StreamPhase)
	for f := 0; f < nb; f++ {
		dst.Phase[f] = Uniform(Word(kp, uint64(f)))
	}
}

// PhiTo writes the features of rows×Dim inputs x into dst (rows×BlockSize,
// row-major): dst[r,f] = √(2/B)·cos2π(x_r·Ω'_f + β_f). Each row is computed
// with the same operations in the same order whatever rows is. z is scratch
// of at least 4·BlockSize values.
func (m Map) PhiTo(dst, z, x []float64, rows int, b *Block) {
	d, nb := m.Dim, m.BlockSize
	if len(x) < rows*d || len(dst) < rows*nb || len(z) < 4*nb {
		panic("features: PhiTo buffer too small")
	}
	s := math.Sqrt(2 / float64(nb))
	om, ph := b.Omega, b.Phase
	r := 0
	// Tiles of four rows share each load of a row of Omega.
	for ; r+4 <= rows; r += 4 {
		for q := 0; q < 4; q++ {
			copy(z[q*nb:(q+1)*nb], ph)
		}
		tile4(z[:4*nb], x[r*d:r*d+d], x[(r+1)*d:(r+1)*d+d], x[(r+2)*d:(r+2)*d+d], x[(r+3)*d:(r+3)*d+d], om, d, nb)
		cosScale(dst[r*nb:(r+4)*nb], z[:4*nb], s)
	}
	for ; r < rows; r++ {
		z0 := z[:nb]
		copy(z0, ph)
		xr := x[r*d : r*d+d]
		for c := 0; c < d; c++ {
			w := om[c*nb : c*nb+nb]
			a := xr[c]
			for f, wf := range w {
				z0[f] += float64(a * wf)
			}
		}
		out := dst[r*nb : r*nb+nb]
		for f, v := range z0 {
			out[f] = float64(s * Cos2Pi(v))
		}
	}
}

// tile4Go is the portable tile4: z_q[f] += x_q[c]·Ω[c,f], c in order.
func tile4Go(z, x0, x1, x2, x3, om []float64, d, nb int) {
	z0, z1, z2, z3 := z[:nb], z[nb:2*nb], z[2*nb:3*nb], z[3*nb:4*nb]
	for c := 0; c < d; c++ {
		w := om[c*nb : c*nb+nb]
		a0, a1, a2, a3 := x0[c], x1[c], x2[c], x3[c]
		for f, wf := range w {
			z0[f] += float64(a0 * wf)
			z1[f] += float64(a1 * wf)
			z2[f] += float64(a2 * wf)
			z3[f] += float64(a3 * wf)
		}
	}
}
