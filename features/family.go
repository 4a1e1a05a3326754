package features

import (
	"fmt"
	"math"
)

// family is one kernel family of paper Table 1: everything the package
// does with it, in one entry of families. A new family is a constant, an
// entry here with its functions, and its Python counterpart
// (clients/python/streamkpca/features.py); the tests walk Families
// through validation, the exact kernel, the generator, landmarks and the
// Python conformance cases.
type family struct {
	// bandwidth: a length scale ℓ (Kernel.Bandwidth; the median trick
	// sets it when 0). shiftInvariant: features cos(2π(x·ω + b)), ω in
	// turns over ℓ. radial: the spectral density depends on ‖ω‖ only, so
	// orthogonal frequencies apply (structured.go). nonnegative: inputs
	// must be ≥ 0 (CheckInput). identity: the feature map is the
	// identity (one block of Dim features, no randomness). offsetInput:
	// Ω sees x' = (x, √c), one input more (TensorSketch of (⟨x,y⟩ + c)^p).
	bandwidth, shiftInvariant, radial, nonnegative, identity, offsetInput bool
	// check reports what is wrong with the family's parameters (nil:
	// none to check).
	check func(k Kernel, bad func(f string, a ...any) error) error
	// eval is the exact kernel k(x, y), given s = ‖x − y‖², dot = ⟨x, y⟩
	// and nx, ny the squared norms.
	eval func(k Kernel, x, y []float64, s, dot, nx, ny float64) float64
	// draw sets a block's Ω (set(c, j, v): row c, column j) from the
	// keyed stream ko of the block's seed (Generate draws the phases of
	// the shift-invariant families after it).
	draw func(k Kernel, seed, ko uint64, d, nb, din int, dst *Block, set func(c, j int, v float64))
	// activate maps the n rows of z = x·Ω (n×cols) to features (n×B).
	activate func(m Map, dst, z []float64, n, cols int, b *Block, tmp []float64)
	// cols is the columns of Ω (nil: BlockSize, one per feature).
	cols func(m Map) int
	// landmark reports why the family has no landmark features (nil:
	// it has them; they need its exact Eval).
	landmark func(k Kernel) error
}

// families holds every Family's entry (Families lists them in order).
var families = map[Family]*family{
	Gaussian:     {bandwidth: true, shiftInvariant: true, radial: true, check: checkBandwidth, eval: evalGaussian, draw: drawGaussian, activate: activateCos},
	Laplacian:    {bandwidth: true, shiftInvariant: true, check: checkBandwidth, eval: evalLaplacian, draw: drawLaplacian, activate: activateCos},
	Cauchy:       {bandwidth: true, shiftInvariant: true, check: checkBandwidth, eval: evalCauchy, draw: drawCauchy, activate: activateCos},
	Matern:       {bandwidth: true, shiftInvariant: true, radial: true, check: checkMatern, eval: evalMatern, draw: drawMatern, activate: activateCos, landmark: landmarkMatern},
	DotProduct:   {check: checkDotProduct, eval: evalDotProduct, draw: drawDotProduct, activate: activateDotProduct, cols: func(m Map) int { return m.BlockSize * (len(m.Kernel.Coefficients) - 1) }},
	Polynomial:   {offsetInput: true, check: checkPolynomial, eval: evalPolynomial, draw: drawPolynomial, activate: activatePolynomial, cols: func(m Map) int { return m.BlockSize * m.Kernel.Degree }},
	ExpSemigroup: {nonnegative: true, check: checkExpSemigroup, eval: evalExpSemigroup, draw: drawExpSemigroup, activate: activateExp},
	RecSemigroup: {nonnegative: true, check: checkRecSemigroup, eval: evalRecSemigroup, draw: drawRecSemigroup, activate: activateExp},
	ArcCosine:    {radial: true, check: checkArcCosine, eval: evalArcCosine, draw: drawArcCosine, activate: activateArcCosine},
	Linear: {identity: true, eval: evalLinear, draw: drawLinear, activate: activateIdentity, landmark: func(Kernel) error {
		return fmt.Errorf("%w: the linear kernel has its identity map; landmarks add nothing", ErrKernel)
	}},
}

// spec is f's entry, nil for an unknown family.
func (f Family) spec() *family { return families[f] }

// has reports whether f is a known family with the property.
func (f Family) has(property func(*family) bool) bool {
	s := f.spec()
	return s != nil && property(s)
}

// landmarkMatern: landmark features need the closed-form Matérn kernels.
func landmarkMatern(k Kernel) error {
	if k.Nu != 0.5 && k.Nu != 1.5 && k.Nu != 2.5 {
		return fmt.Errorf("%w: landmark features need the closed-form Matérn kernel (nu 0.5, 1.5 or 2.5), got nu %v", ErrKernel, k.Nu)
	}
	return nil
}

func checkBandwidth(k Kernel, bad func(f string, a ...any) error) error {
	if !positive(k.Bandwidth) {
		return bad("bandwidth must be positive and finite, got %v", k.Bandwidth)
	}
	return nil
}

func checkMatern(k Kernel, bad func(f string, a ...any) error) error {
	if !positive(k.Bandwidth) || !positive(k.Nu) {
		return bad("bandwidth and nu must be positive, got %v and %v", k.Bandwidth, k.Nu)
	}
	return nil
}

func checkDotProduct(k Kernel, bad func(f string, a ...any) error) error {
	if len(k.Coefficients) == 0 || len(k.Coefficients) > 13 {
		return bad("needs 1 to 13 coefficients a_0…a_M, got %d", len(k.Coefficients))
	}
	for _, a := range k.Coefficients {
		if !(a >= 0) || math.IsInf(a, 0) {
			return bad("coefficients must be finite and ≥ 0, got %v", k.Coefficients)
		}
	}
	if k.P != 0 && !(k.P > 1) {
		return bad("p must be > 1, got %v", k.P)
	}
	return nil
}

func checkPolynomial(k Kernel, bad func(f string, a ...any) error) error {
	if k.Degree < 1 || k.Degree > 8 || !(k.Offset >= 0) || math.IsInf(k.Offset, 0) {
		return bad("degree must be in 1…8 and offset ≥ 0, got %d and %v", k.Degree, k.Offset)
	}
	return nil
}

func checkExpSemigroup(k Kernel, bad func(f string, a ...any) error) error {
	if !positive(k.Beta) {
		return bad("beta must be positive, got %v", k.Beta)
	}
	return nil
}

func checkRecSemigroup(k Kernel, bad func(f string, a ...any) error) error {
	if !positive(k.Lambda) {
		return bad("lambda must be positive, got %v", k.Lambda)
	}
	return nil
}

func checkArcCosine(k Kernel, bad func(f string, a ...any) error) error {
	if k.Degree < 0 || k.Degree > 2 {
		return bad("degree must be 0, 1 or 2, got %d", k.Degree)
	}
	return nil
}

func evalGaussian(k Kernel, x, y []float64, s, dot, nx, ny float64) float64 {
	l := k.Bandwidth
	return math.Exp(-s / (2 * l * l))
}

func evalLaplacian(k Kernel, x, y []float64, s, dot, nx, ny float64) float64 {
	l := k.Bandwidth
	var a float64
	for i := range x {
		a += math.Abs(x[i] - y[i])
	}
	return math.Exp(-a / l)
}

func evalCauchy(k Kernel, x, y []float64, s, dot, nx, ny float64) float64 {
	l := k.Bandwidth
	v := 1.0
	for i := range x {
		d := (x[i] - y[i]) / l
		v /= 1 + d*d
	}
	return v
}

func evalMatern(k Kernel, x, y []float64, s, dot, nx, ny float64) float64 {
	l := k.Bandwidth
	r := math.Sqrt(s) / l
	switch k.Nu {
	case 0.5:
		return math.Exp(-r)
	case 1.5:
		return (1 + math.Sqrt(3)*r) * math.Exp(-math.Sqrt(3)*r)
	case 2.5:
		return (1 + math.Sqrt(5)*r + 5*r*r/3) * math.Exp(-math.Sqrt(5)*r)
	}
	return math.NaN()
}

func evalDotProduct(k Kernel, x, y []float64, s, dot, nx, ny float64) float64 {
	var v float64
	for n, a := range k.Coefficients {
		v += a * math.Pow(dot, float64(n))
	}
	return v
}

func evalPolynomial(k Kernel, x, y []float64, s, dot, nx, ny float64) float64 {
	return math.Pow(dot+k.Offset, float64(k.Degree))
}

func evalExpSemigroup(k Kernel, x, y []float64, s, dot, nx, ny float64) float64 {
	var a float64
	for i := range x {
		a += math.Sqrt(x[i] + y[i])
	}
	return math.Exp(-k.Beta * a)
}

func evalRecSemigroup(k Kernel, x, y []float64, s, dot, nx, ny float64) float64 {
	v := 1.0
	for i := range x {
		v *= k.Lambda / (x[i] + y[i] + k.Lambda)
	}
	return v
}

func evalArcCosine(k Kernel, x, y []float64, s, dot, nx, ny float64) float64 {
	n1, n2 := math.Sqrt(nx), math.Sqrt(ny)
	if n1 == 0 || n2 == 0 {
		if k.Degree == 0 {
			return 0.5
		}
		return 0
	}
	c := math.Max(-1, math.Min(1, dot/(n1*n2)))
	th := math.Acos(c)
	var j float64
	switch k.Degree {
	case 0:
		j = math.Pi - th
	case 1:
		j = math.Sin(th) + (math.Pi-th)*c
	case 2:
		j = 3*math.Sin(th)*c + (math.Pi-th)*(1+2*c*c)
	}
	return math.Pow(n1*n2, float64(k.Degree)) * j / math.Pi
}

func evalLinear(k Kernel, x, y []float64, s, dot, nx, ny float64) float64 {
	return dot
}

func drawGaussian(k Kernel, seed, ko uint64, d, nb, din int, dst *Block, set func(c, j int, v float64)) {
	scale := 1 / (2 * math.Pi * k.Bandwidth)
	for f := 0; f < nb; f++ {
		for c := 0; c < d; c++ {
			set(c, f, float64(Normal(ko, uint64(f*d+c))*scale))
		}
	}
}

func drawLaplacian(k Kernel, seed, ko uint64, d, nb, din int, dst *Block, set func(c, j int, v float64)) {
	// Cauchy(0, 1/ℓ) = tan(π(u − ½))/ℓ, in turns.
	scale := 1 / (2 * math.Pi * k.Bandwidth)
	for f := 0; f < nb; f++ {
		for c := 0; c < d; c++ {
			h := float64(Uniform(Word(ko, uint64(f*d+c)))-0.5) / 2 // θ/(2π), θ = π(u−½)
			t := Cos2Pi(h-0.25) / Cos2Pi(h)                        // sin θ / cos θ
			set(c, f, float64(t*scale))
		}
	}
}

func drawCauchy(k Kernel, seed, ko uint64, d, nb, din int, dst *Block, set func(c, j int, v float64)) {
	// Laplace(0, 1/ℓ) by inversion: −sign(u−½)·log(1 − 2|u−½|)/ℓ.
	scale := 1 / (2 * math.Pi * k.Bandwidth)
	for f := 0; f < nb; f++ {
		for c := 0; c < d; c++ {
			u := Uniform(Word(ko, uint64(f*d+c))) - 0.5
			w := -Log(1 - 2*math.Abs(u))
			if u < 0 {
				w = -w
			}
			set(c, f, float64(w*scale))
		}
	}
}

func drawMatern(k Kernel, seed, ko uint64, d, nb, din int, dst *Block, set func(c, j int, v float64)) {
	kg := Key(seed, StreamExtra1)
	for f := 0; f < nb; f++ {
		g := 2 * gammaDraw(Key(Word(kg, uint64(f)), 0), k.Nu) // χ²(2ν)
		scale := math.Sqrt(2*k.Nu/g) / (2 * math.Pi * k.Bandwidth)
		for c := 0; c < d; c++ {
			set(c, f, float64(Normal(ko, uint64(f*d+c))*scale))
		}
	}
}

func drawDotProduct(k Kernel, seed, ko uint64, d, nb, din int, dst *Block, set func(c, j int, v float64)) {
	// Degree N_f ~ P[N = n] = (p−1)/p^(n+1)·(p/(p−1))... see degreeOf;
	// Rademacher ω_{f,i} in columns f·M + i.
	mdeg := len(k.Coefficients) - 1
	if cap(dst.Degree) < nb {
		dst.Degree = make([]int, nb)
	}
	dst.Degree = dst.Degree[:nb]
	kn := Key(seed, StreamExtra1)
	for f := 0; f < nb; f++ {
		dst.Degree[f] = degreeOf(Uniform(Word(kn, uint64(f))), k.p())
		for i := 0; i < mdeg; i++ {
			for c := 0; c < d; c++ {
				v := 1.0
				if Word(ko, uint64((f*mdeg+i)*d+c))>>63 == 1 {
					v = -1
				}
				set(c, f*mdeg+i, v)
			}
		}
	}
}

func drawPolynomial(k Kernel, seed, ko uint64, d, nb, din int, dst *Block, set func(c, j int, v float64)) {
	// Sketch j: coordinate c goes to bucket h_j(c) with sign s_j(c):
	// column j·B + h_j(c) of row c holds s_j(c).
	for j := 0; j < k.Degree; j++ {
		for c := 0; c < din; c++ {
			w := Word(ko, uint64(j*din+c))
			h := int((w >> 1) % uint64(nb))
			s := 1.0
			if w&1 == 1 {
				s = -1
			}
			set(c, j*nb+h, s)
		}
	}
}

func drawExpSemigroup(k Kernel, seed, ko uint64, d, nb, din int, dst *Block, set func(c, j int, v float64)) {
	// Lévy(0, β²/2): ω = β²/(2z²).
	for f := 0; f < nb; f++ {
		for c := 0; c < d; c++ {
			z := Normal(ko, uint64(f*d+c))
			set(c, f, float64(k.Beta*k.Beta)/float64(2*float64(z*z)))
		}
	}
}

func drawRecSemigroup(k Kernel, seed, ko uint64, d, nb, din int, dst *Block, set func(c, j int, v float64)) {
	// Exponential(rate λ): −log(u)/λ.
	for f := 0; f < nb; f++ {
		for c := 0; c < d; c++ {
			set(c, f, -Log(Uniform(Word(ko, uint64(f*d+c))))/k.Lambda)
		}
	}
}

func drawArcCosine(k Kernel, seed, ko uint64, d, nb, din int, dst *Block, set func(c, j int, v float64)) {
	for f := 0; f < nb; f++ {
		for c := 0; c < d; c++ {
			set(c, f, Normal(ko, uint64(f*d+c)))
		}
	}
}

func drawLinear(k Kernel, seed, ko uint64, d, nb, din int, dst *Block, set func(c, j int, v float64)) {
	for c := 0; c < d; c++ {
		set(c, c, 1)
	}
}

func activateCos(m Map, dst, z []float64, n, cols int, b *Block, tmp []float64) {
	nb := m.BlockSize
	cosScale(m.SIMD.level(), dst, z, math.Sqrt(2/float64(nb)))
}

func activateExp(m Map, dst, z []float64, n, cols int, b *Block, tmp []float64) {
	nb := m.BlockSize
	s := 1 / math.Sqrt(float64(nb))
	for i, v := range z {
		dst[i] = float64(s * ExpNeg(v))
	}
}

func activateArcCosine(m Map, dst, z []float64, n, cols int, b *Block, tmp []float64) {
	nb, k := m.BlockSize, m.Kernel
	s := math.Sqrt(2 / float64(nb))
	for i, v := range z {
		switch {
		case v <= 0:
			dst[i] = 0
		case k.Degree == 0:
			dst[i] = s
		case k.Degree == 1:
			dst[i] = float64(s * v)
		default:
			dst[i] = float64(float64(s*v) * v)
		}
	}
}

func activateIdentity(m Map, dst, z []float64, n, cols int, b *Block, tmp []float64) {
	copy(dst, z)
}

func activateDotProduct(m Map, dst, z []float64, n, cols int, b *Block, tmp []float64) {
	nb, k := m.BlockSize, m.Kernel
	mdeg := len(k.Coefficients) - 1
	p := k.p()
	for r := 0; r < n; r++ {
		for f := 0; f < nb; f++ {
			deg := b.Degree[f]
			if deg > mdeg || k.Coefficients[deg] == 0 {
				dst[r*nb+f] = 0
				continue
			}
			// weight √(a_N / P[N]) / √B with P[N = n] = (1−1/p)·p^(−n).
			v := math.Sqrt(k.Coefficients[deg]/((1-1/p)*math.Pow(p, -float64(deg)))) / math.Sqrt(float64(nb))
			zr := z[r*cols+f*mdeg : r*cols+f*mdeg+deg]
			for _, zi := range zr {
				v = float64(v * zi)
			}
			dst[r*nb+f] = v
		}
	}
}

func activatePolynomial(m Map, dst, z []float64, n, cols int, b *Block, tmp []float64) {
	nb, k := m.BlockSize, m.Kernel
	// Circular convolution of the sketches, in sketch order.
	for r := 0; r < n; r++ {
		out := dst[r*nb : (r+1)*nb]
		copy(out, z[r*cols:r*cols+nb])
		for j := 1; j < k.Degree; j++ {
			sk := z[r*cols+j*nb : r*cols+(j+1)*nb]
			t := tmp[:nb]
			clear(t)
			for a, va := range out {
				if va == 0 {
					continue
				}
				for c, vc := range sk {
					t[(a+c)%nb] += float64(va * vc)
				}
			}
			copy(out, t)
		}
	}
}
