package features

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSIMDBitIdentical: the vectorised kernels (when the CPU has them)
// produce exactly the bits of the portable Go code, including at the
// awkward inputs: zeros of both signs, exact halves and quarters, large
// arguments, subnormals.
func TestSIMDBitIdentical(t *testing.T) { eachWidth(t, testSIMDBitIdentical) }

// eachWidth runs f at every kernel level this CPU can run: AVX2 and, where
// the CPU has it, AVX-512 (the environment's STREAMKPCA_NO_AVX512 does
// not keep them from being tested).
func eachWidth(t *testing.T, f func(t *testing.T, lv SIMDLevel)) {
	for _, lv := range []SIMDLevel{SIMDAVX2, SIMDAVX512} {
		if lv > maxLevel {
			t.Logf("no %v on this CPU: its kernels are not tested here", lv)
			continue
		}
		t.Run(lv.String(), func(t *testing.T) { f(t, lv) })
	}
}

func testSIMDBitIdentical(t *testing.T, lv SIMDLevel) {
	rng := rand.New(rand.NewPCG(1, 1))
	src := []float64{0, math.Copysign(0, -1), 0.5, -0.5, 0.25, -0.25, 0.75, 1e-310, -1e-310, 1 << 40, -(1 << 40) + 0.125, 123.456}
	for len(src) < 4096 {
		src = append(src, (rng.Float64()-0.5)*math.Pow(10, float64(rng.IntN(8))-2))
	}
	got := make([]float64, len(src))
	for _, s := range []float64{1, 0.125, math.Sqrt(2.0 / 128)} {
		for _, n := range []int{len(src), len(src) - 3, len(src) - 5} { // tails: 8 → 4 → scalar
			clear(got)
			cosScale(lv, got[:n], src[:n], s)
			for i, v := range src[:n] {
				want := float64(s * Cos2Pi(v))
				if math.Float64bits(got[i]) != math.Float64bits(want) {
					t.Fatalf("cosScale(%v)·%v = %v (%#x), Go gives %v (%#x)", v, s, got[i], math.Float64bits(got[i]), want, math.Float64bits(want))
				}
			}
		}
	}
	for _, dn := range [][2]int{{1, 128}, {3, 8}, {64, 128}, {7, 12}, {5, 6}, {9, 24}} {
		d, nb := dn[0], dn[1]
		x := make([]float64, 4*d)
		om := make([]float64, d*nb)
		for i := range x {
			x[i] = rng.NormFloat64() * 3
		}
		for i := range om {
			om[i] = rng.NormFloat64()
		}
		z1 := make([]float64, 4*nb)
		for i := range z1 {
			z1[i] = rng.Float64()
		}
		z2 := slices.Clone(z1)
		tile4(lv, z1, x[:d], x[d:2*d], x[2*d:3*d], x[3*d:], om, d, nb)
		tile4Go(z2, x[:d], x[d:2*d], x[2*d:3*d], x[3*d:], om, d, nb)
		if !slices.Equal(z1, z2) {
			t.Errorf("tile4 d=%d nb=%d differs from tile4Go", d, nb)
		}
	}
}

func BenchmarkCos(b *testing.B) {
	src := make([]float64, 4096)
	rng := rand.New(rand.NewPCG(1, 1))
	for i := range src {
		src[i] = rng.Float64() * 10
	}
	dst := make([]float64, len(src))
	b.Run("math.Cos", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			for j, v := range src {
				dst[j] = math.Cos(2 * math.Pi * v)
			}
		}
		b.ReportMetric(float64(b.N*len(src))/b.Elapsed().Seconds()/1e6, "Mcos/s")
	})
	b.Run("Cos2Pi", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			for j, v := range src {
				dst[j] = Cos2Pi(v)
			}
		}
		b.ReportMetric(float64(b.N*len(src))/b.Elapsed().Seconds()/1e6, "Mcos/s")
	})
	for _, lv := range []SIMDLevel{SIMDAVX2, SIMDAVX512} {
		if lv > maxLevel {
			continue
		}
		b.Run("cosScale/"+lv.String(), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				cosScale(lv, dst, src, 1)
			}
			b.ReportMetric(float64(b.N*len(src))/b.Elapsed().Seconds()/1e6, "Mcos/s")
		})
	}
}

func TestAddMulBitIdentical(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, dims := range [][3]int{{5, 16, 3}, {4, 128, 50}, {3, 7, 9}, {1, 50, 50}, {2, 8, 4}, {8, 128, 5}, {9, 16, 10}, {4, 3, 1}, {12, 8, 2}, {4, 16, 7}, {8, 16, 8}, {4, 32, 16}, {4, 9, 13}, {16, 128, 50}} {
		rows, nb, k := dims[0], dims[1], dims[2]
		phi := make([]float64, rows*nb)
		a := make([]float64, nb*k)
		for i := range phi {
			phi[i] = rng.NormFloat64()
		}
		for i := range a {
			a[i] = rng.NormFloat64()
		}
		got := make([]float64, rows*k)
		for i := range got {
			got[i] = rng.Float64()
		}
		want := slices.Clone(got)
		AddMul(got, phi, a, rows, nb, k)
		for r := 0; r < rows; r++ {
			for q := 0; q < k; q++ {
				for f := 0; f < nb; f++ {
					want[r*k+q] += float64(phi[r*nb+f] * a[f*k+q])
				}
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("rows=%d nb=%d k=%d: AddMul differs from the scalar definition", rows, nb, k)
		}
	}
}

// Map.SIMD selects the kernels per map: features and evaluations of
// random (float64 and float32) and landmark maps are the same bits at
// every level the CPU has as in the portable Go code (SIMDGo), and a
// request above the CPU's level runs at the CPU's.
func TestMapSIMDLevelsSameBits(t *testing.T) {
	const d, nb, rows, k = 7, 64, 9, 3
	rng := rand.New(rand.NewPCG(5, 6))
	x := make([]float64, rows*d)
	for i := range x {
		x[i] = rng.NormFloat64()
	}
	coef := make([]float64, 2*nb*k)
	for i := range coef {
		coef[i] = rng.NormFloat64()
	}
	run := func(m Map, lv SIMDLevel) (phi, h []float64) {
		m.SIMD = lv
		var b Block
		if m.Landmarks {
			pts := make([]float64, nb*d)
			for i := range pts {
				pts[i] = float64(i%13) / 7
			}
			lb, err := m.NewLandmarks(pts)
			if err != nil {
				t.Fatal(err)
			}
			b.LM = lb
		} else {
			m.Generate(&b, 11)
		}
		phi = make([]float64, rows*nb)
		m.PhiTo(phi, make([]float64, m.ScratchLen()), x, rows, &b)
		h = make([]float64, rows*k)
		m.AddBlock(h, make([]float64, rows*nb), make([]float64, m.ScratchLen()), x, rows, &b, coef[:nb*k], k)
		return phi, h
	}
	for _, m := range []Map{
		{Kernel: Kernel{Family: Gaussian, Bandwidth: 1.3}, Dim: d, BlockSize: nb},
		{Kernel: Kernel{Family: Gaussian, Bandwidth: 1.3}, Dim: d, BlockSize: nb, Float32: true},
		{Kernel: Kernel{Family: Gaussian, Bandwidth: 1.3}, Dim: d, BlockSize: nb, Landmarks: true},
	} {
		wantPhi, wantH := run(m, SIMDGo)
		for _, lv := range []SIMDLevel{SIMDAuto, SIMDAVX2, SIMDAVX512} {
			phi, h := run(m, lv)
			if !slices.Equal(phi, wantPhi) || !slices.Equal(h, wantH) {
				t.Errorf("float32 %v, landmarks %v: level %v (runs %v) differs from the Go code", m.Float32, m.Landmarks, lv, lv.level())
			}
		}
	}
	if SIMDAVX512.level() > maxLevel || SIMDAuto.level() != detected {
		t.Errorf("levels resolve to %v and %v on a CPU with %v", SIMDAVX512.level(), SIMDAuto.level(), maxLevel)
	}
}

// TestAddSquaresBitIdentical: AddSquares at every level the CPU has is
// the definition's bits — four running sums over f ≡ l (mod 4), in
// order, then (s₀ + s₁) + (s₂ + s₃) — for row counts and widths that are
// and are not multiples of four, and across the 64-row runs.
func TestAddSquaresBitIdentical(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	for _, dims := range [][2]int{{1, 1}, {3, 7}, {4, 4}, {5, 16}, {8, 512}, {9, 13}, {63, 8}, {64, 128}, {65, 6}, {130, 515}, {4, 3}} {
		rows, nb := dims[0], dims[1]
		phi := make([]float64, rows*nb)
		for i := range phi {
			phi[i] = rng.NormFloat64() * math.Exp(4*rng.NormFloat64())
		}
		start := make([]float64, rows)
		for i := range start {
			start[i] = rng.Float64()
		}
		want := slices.Clone(start)
		for r := 0; r < rows; r++ {
			var s [4]float64
			for f := 0; f < nb; f++ {
				v := phi[r*nb+f]
				s[f%4] += float64(v * v)
			}
			want[r] += (s[0] + s[1]) + (s[2] + s[3])
		}
		for lv := SIMDGo; lv <= maxLevel; lv++ {
			got := slices.Clone(start)
			addSquares(lv, got, phi, rows, nb)
			if !slices.Equal(got, want) {
				t.Errorf("rows=%d nb=%d level %v: AddSquares differs from the definition", rows, nb, lv)
			}
		}
	}
}

func BenchmarkAddSquares(b *testing.B) {
	const rows, nb = 512, 512
	phi := make([]float64, rows*nb)
	for i := range phi {
		phi[i] = float64(i%97) / 97
	}
	sq := make([]float64, rows)
	for lv := SIMDGo; lv <= maxLevel; lv++ {
		b.Run(lv.String(), func(b *testing.B) {
			for b.Loop() {
				addSquares(lv, sq, phi, rows, nb)
			}
			b.ReportMetric(float64(b.N*rows*nb)/b.Elapsed().Seconds()/1e9, "Gsq/s")
		})
	}
}
