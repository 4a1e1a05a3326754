package features

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// The float32 tile kernel gives exactly the bits of the portable float32
// Go code.
func TestFloat32SIMDBitIdentical(t *testing.T) { eachWidth(t, testFloat32SIMDBitIdentical) }

func testFloat32SIMDBitIdentical(t *testing.T, lv SIMDLevel) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, dn := range [][2]int{{1, 128}, {3, 8}, {64, 128}, {784, 16}, {7, 12}, {5, 48}} {
		d, nb := dn[0], dn[1]
		x := make([]float32, 4*d)
		om := make([]float32, d*nb)
		for i := range x {
			x[i] = float32(rng.NormFloat64() * 3)
		}
		for i := range om {
			om[i] = float32(rng.NormFloat64())
		}
		z1 := make([]float32, 4*nb)
		for i := range z1 {
			z1[i] = float32(rng.Float64())
		}
		z2 := slices.Clone(z1)
		tile4f32(lv, z1, x[:d], x[d:2*d], x[2*d:3*d], x[3*d:], om, d, nb)
		tile4Go(z2, x[:d], x[d:2*d], x[2*d:3*d], x[3*d:], om, d, nb)
		if !slices.Equal(z1, z2) {
			t.Errorf("tile4f32 d=%d nb=%d differs from tile4Go", d, nb)
		}
	}
}

// Float32 features against the float64 features of the same block (the
// float64 path is checked against the exact kernels elsewhere): each
// feature moves by at most 1e-4·√(2/B) (|Δz| ≲ √d·ulp(|x||ω|) turns,
// times the cosine's slope 2π) for the light-tailed frequency laws, and
// by 2e-3·√(2/B) for the Laplacian, whose Cauchy frequencies reach
// |z| ~ 10⁴ turns; measured 1.4e-5 and 1.1e-3 relative at d = 784.
func TestFloat32Features(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, k := range []Kernel{
		{Family: Gaussian, Bandwidth: 1},
		{Family: Laplacian, Bandwidth: 2},
		{Family: Cauchy, Bandwidth: 1.5},
		{Family: Matern, Bandwidth: 1, Nu: 1.5},
	} {
		for _, d := range []int{1, 16, 784} {
			const nb, rows = 128, 7 // 7 rows: the four-row tile and the tail
			bw := k.Bandwidth * math.Sqrt(float64(d))
			kk := k
			kk.Bandwidth = bw
			m64 := Map{Kernel: kk, Dim: d, BlockSize: nb}
			m32 := m64
			m32.Float32 = true
			if err := m32.Validate(); err != nil {
				t.Fatal(err)
			}
			x := make([]float64, rows*d)
			for i := range x {
				x[i] = rng.NormFloat64()
			}
			var b64, b32 Block
			m64.Generate(&b64, 42)
			m32.Generate(&b32, 42)
			p64, p32 := make([]float64, rows*nb), make([]float64, rows*nb)
			m64.PhiTo(p64, make([]float64, m64.ScratchLen()), x, rows, &b64)
			m32.PhiTo(p32, make([]float64, m32.ScratchLen()), x, rows, &b32)
			worst := 0.0
			for i := range p64 {
				worst = max(worst, math.Abs(p64[i]-p32[i]))
			}
			bound := 1e-4 * math.Sqrt(2.0/nb)
			if k.Family == Laplacian {
				bound = 2e-3 * math.Sqrt(2.0/nb)
			}
			if worst > bound {
				t.Errorf("%s d=%d: float32 features differ from float64 by %.3g, want ≤ %.3g", k.Family, d, worst, bound)
			}
		}
	}
	if err := (Map{Kernel: Kernel{Family: ArcCosine, Degree: 1}, Dim: 3, BlockSize: 8, Float32: true}).Validate(); err == nil {
		t.Error("float32 accepted for the arc-cosine kernel")
	}
}

// The evaluator's cache holds twice as many float32 blocks for the same
// budget, and a float32 evaluation is identical whichever the worker count.
func TestFloat32Evaluator(t *testing.T) {
	m := Map{Kernel: Kernel{Family: Gaussian, Bandwidth: 4}, Dim: 16, BlockSize: 64, Float32: true}
	m64 := m
	m64.Float32 = false
	budget := int64(100 * m64.BlockBytes())
	if got := NewEvaluator(m, EvaluatorConfig{CacheBytes: budget, Workers: 1}).CachedBlocks(); got < 199 {
		t.Errorf("float32 cache holds %d blocks where float64 holds 100", got)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	const rows, k, nblk = 33, 3, 20
	x := make([]float64, rows*16)
	for i := range x {
		x[i] = rng.NormFloat64()
	}
	seeds := make([]uint64, nblk)
	coef := make([]float64, nblk*64*k)
	for i := range seeds {
		seeds[i] = uint64(i) * 7919
	}
	for i := range coef {
		coef[i] = rng.NormFloat64()
	}
	var ref []float64
	for _, w := range []int{1, 2, 3} {
		for _, cache := range []int64{-1, budget} {
			e := NewEvaluator(m, EvaluatorConfig{Workers: w, CacheBytes: cache})
			h := make([]float64, rows*k)
			e.Eval(h, x, rows, seeds, coef, k)
			e.Eval(h, x, rows, seeds, coef, k) // second pass: from the cache
			e.Close()
			if ref == nil {
				ref = h
			} else if !slices.Equal(ref, h) {
				t.Fatalf("workers=%d cache=%d: result differs", w, cache)
			}
		}
	}
}

// BLAS mode computes the same features as the own kernels, to rounding:
// gonum's (or OpenBLAS's) GEMM sums x·Ω in its own order.
func TestBLASMode(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, c := range []struct {
		k   Kernel
		f32 bool
		tol float64 // relative to the feature scale
	}{
		{Kernel{Family: Gaussian, Bandwidth: 3}, false, 1e-12},
		{Kernel{Family: Laplacian, Bandwidth: 3}, false, 1e-10},
		{Kernel{Family: Polynomial, Degree: 2, Offset: 1}, false, 1e-12},
		{Kernel{Family: DotProduct, Coefficients: []float64{1, 1, 0.5}}, false, 1e-12},
		{Kernel{Family: ArcCosine, Degree: 1}, false, 1e-12},
		{Kernel{Family: Gaussian, Bandwidth: 3}, true, 1e-4},
	} {
		const d, nb, rows = 20, 32, 150 // 150 rows: two full BLAS chunks and a tail
		exact := Map{Kernel: c.k, Dim: d, BlockSize: nb, Float32: c.f32}
		viaBLAS := exact
		viaBLAS.BLAS = true
		x := make([]float64, rows*d)
		for i := range x {
			x[i] = rng.NormFloat64() / 3
		}
		var b1, b2 Block
		exact.Generate(&b1, 7)
		viaBLAS.Generate(&b2, 7)
		p1, p2 := make([]float64, rows*nb), make([]float64, rows*nb)
		exact.PhiTo(p1, make([]float64, exact.ScratchLen()), x, rows, &b1)
		viaBLAS.PhiTo(p2, make([]float64, viaBLAS.ScratchLen()), x, rows, &b2)
		scale, worst := 0.0, 0.0
		for i := range p1 {
			scale = max(scale, math.Abs(p1[i]))
			worst = max(worst, math.Abs(p1[i]-p2[i]))
		}
		if worst > c.tol*scale {
			t.Errorf("%s float32=%v: BLAS features differ by %.3g (scale %.3g), want ≤ %.0e relative", c.k.Family, c.f32, worst, scale, c.tol)
		}
	}
}
