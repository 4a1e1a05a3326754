package features

import (
	"fmt"
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

// eachWidth runs f with the AVX2 kernels and, where the CPU has it, with
// the AVX-512 ones.
func eachWidth(t *testing.T, f func(t *testing.T)) {
	saved := useAVX512
	defer func() { useAVX512 = saved }()
	for _, wide := range []bool{false, true} {
		if wide && !saved {
			t.Log("no AVX-512 on this CPU: the AVX-512 kernels are not tested here")
			continue
		}
		useAVX512 = wide
		t.Run(fmt.Sprintf("avx512=%v", wide), f)
	}
}

func testSIMDBitIdentical(t *testing.T) {
	t.Logf("AVX2 kernels in use: %v, AVX-512: %v", useAVX2, useAVX512)
	rng := rand.New(rand.NewPCG(1, 1))
	src := []float64{0, math.Copysign(0, -1), 0.5, -0.5, 0.25, -0.25, 0.75, 1e-310, -1e-310, 1 << 40, -(1 << 40) + 0.125, 123.456}
	for len(src) < 4096 {
		src = append(src, (rng.Float64()-0.5)*math.Pow(10, float64(rng.IntN(8))-2))
	}
	got := make([]float64, len(src))
	for _, s := range []float64{1, 0.125, math.Sqrt(2.0 / 128)} {
		for _, n := range []int{len(src), len(src) - 3, len(src) - 5} { // tails: 8 → 4 → scalar
			clear(got)
			cosScale(got[:n], src[:n], s)
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
		tile4(z1, x[:d], x[d:2*d], x[2*d:3*d], x[3*d:], om, d, nb)
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
	saved := useAVX512
	defer func() { useAVX512 = saved }()
	for _, wide := range []bool{false, true} {
		if wide && !saved {
			continue
		}
		useAVX512 = wide
		b.Run(fmt.Sprintf("cosScale/avx512=%v", wide), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				cosScale(dst, src, 1)
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
