package dense

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
)

// newMat returns a zeroed r×c matrix.
func newMat(r, c int) Mat { return Dense(r, c, make([]float64, r*c)) }

// at returns element (i, j).
func (m Mat) at(i, j int) float64 { return m.Data[i*m.Stride+j] }

func randMat(rng *rand.Rand, r, c, stride int) Mat {
	m := Mat{Rows: r, Cols: c, Stride: stride, Data: make([]float64, r*stride)}
	for i := range m.Data {
		m.Data[i] = rng.NormFloat64()
	}
	return m
}

// loops is the textbook product, element by element, in order of k, with
// the product rounded before the sum: the bits Gemm promises.
func loops(op Op, a, b, c Mat) {
	k := a.Cols
	if op.TransA {
		k = a.Rows
	}
	get := func(x Mat, t bool, i, j int) float64 {
		if t {
			return x.Data[j*x.Stride+i]
		}
		return x.Data[i*x.Stride+j]
	}
	for i := 0; i < c.Rows; i++ {
		for j := 0; j < c.Cols; j++ {
			if op.Upper && j < i {
				continue
			}
			s := c.Data[i*c.Stride+j]
			for r := 0; r < k; r++ {
				p := float64(get(a, op.TransA, i, r) * get(b, op.TransB, r, j))
				if op.Sub {
					s -= p
				} else {
					s += p
				}
			}
			c.Data[i*c.Stride+j] = s
		}
	}
}

// Every product Gemm forms is the textbook loop's, bit for bit, with the
// generated kernel and with the Go one, on one worker and on three, at
// sizes with edge tiles and more than one k and n block.
func TestMulAddAgainstLoops(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	sizes := []struct{ m, n, k int }{{1, 1, 1}, {12, 16, 1}, {13, 17, 5}, {40, 33, 300}, {50, 530, 260}, {100, 100, 513}}
	best := level
	defer func() { level = best }()
	for _, sz := range sizes {
		for _, op := range []Op{{}, {TransA: true}, {TransB: true}, {TransA: true, TransB: true, Sub: true}, {TransA: true, Upper: true}, {Sub: true, Upper: true}} {
			n := sz.n
			if op.Upper {
				n = sz.m
			}
			ar, ac := sz.m, sz.k
			if op.TransA {
				ar, ac = ac, ar
			}
			br, bc := sz.k, n
			if op.TransB {
				br, bc = bc, br
			}
			a := randMat(rng, ar, ac, ac+3)
			b := randMat(rng, br, bc, bc+1)
			c0 := randMat(rng, sz.m, n, n+2)
			want := Mat{Rows: c0.Rows, Cols: c0.Cols, Stride: c0.Stride, Data: append([]float64(nil), c0.Data...)}
			loops(op, a, b, want)
			for lv := best; lv >= levelGo; lv-- {
				level = lv
				for _, workers := range []int{1, 3} {
					got := Mat{Rows: c0.Rows, Cols: c0.Cols, Stride: c0.Stride, Data: append([]float64(nil), c0.Data...)}
					ws := Workspace{Workers: workers}
					ws.Gemm(op, a, b, got)
					for i := 0; i < got.Rows; i++ {
						for j := 0; j < got.Cols; j++ {
							if op.Upper && j < i {
								continue
							}
							if g, w := got.at(i, j), want.at(i, j); math.Float64bits(g) != math.Float64bits(w) {
								t.Fatalf("%+v %dx%dx%d kernel level %d workers=%d: C[%d,%d] = %v, loops %v", op, sz.m, n, sz.k, lv, workers, i, j, g, w)
							}
						}
					}
					// Padding columns of C's stride are never touched.
					for i := 0; i < got.Rows; i++ {
						for j := got.Cols; j < got.Stride; j++ {
							if got.Data[i*got.Stride+j] != c0.Data[i*got.Stride+j] {
								t.Fatalf("%+v: the stride's padding at row %d was written", op, i)
							}
						}
					}
				}
			}
		}
	}
	if best < levelAVX512 {
		t.Logf("this CPU's best kernel level is %d: the AVX-512 kernel was not checked", best)
	}
}

// Against another implementation: gonum's GEMM agrees to rounding.
func TestMulAddAgainstGonum(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const m, n, k = 77, 65, 600
	a, b := randMat(rng, k, m, m), randMat(rng, k, n, n)
	c := newMat(m, n)
	ws := Workspace{Workers: 2}
	defer ws.Close()
	ws.Gemm(Op{TransA: true}, a, b, c)
	g := blas64.General{Rows: m, Cols: n, Stride: n, Data: make([]float64, m*n)}
	blas64.Gemm(blas.Trans, blas.NoTrans, 1, blas64.General{Rows: k, Cols: m, Stride: m, Data: a.Data},
		blas64.General{Rows: k, Cols: n, Stride: n, Data: b.Data}, 0, g)
	for i, v := range g.Data {
		if math.Abs(c.Data[i]-v) > 1e-12*math.Sqrt(k) {
			t.Fatalf("element %d: %v, gonum %v", i, c.Data[i], v)
		}
	}
}

// BenchmarkMulAdd is the covariance solver's step: C += ΦᵀΦ for a batch
// of 512 and 2,048 features, as a full product and as the upper triangle,
// next to gonum's GEMM and SYRK.
func BenchmarkMulAdd(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 6))
	const rows, m = 512, 2048
	phi := randMat(rng, rows, m, m)
	c := newMat(m, m)
	flops := func(b *testing.B, f float64) {
		b.ReportMetric(f*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	}
	for _, upper := range []bool{false, true} {
		name := "full"
		f := 2.0 * rows * m * m
		if upper {
			name, f = "upper", f/2
		}
		b.Run(name, func(b *testing.B) {
			ws := Workspace{Workers: 2}
			defer ws.Close()
			for b.Loop() {
				ws.Gemm(Op{TransA: true, Upper: upper}, phi, phi, c)
			}
			flops(b, f)
		})
	}
	for lv, name := range map[int]string{levelAVX2: "upper-avx2", levelGo: "upper-go"} {
		if lv > level {
			continue
		}
		b.Run(name, func(b *testing.B) {
			best := level
			defer func() { level = best }()
			level = lv
			ws := Workspace{Workers: 2}
			defer ws.Close()
			for b.Loop() {
				ws.Gemm(Op{TransA: true, Upper: true}, phi, phi, c)
			}
			flops(b, 1.0*rows*m*m)
		})
	}
	g := blas64.General{Rows: rows, Cols: m, Stride: m, Data: phi.Data}
	b.Run("gonum-gemm", func(b *testing.B) {
		for b.Loop() {
			blas64.Gemm(blas.Trans, blas.NoTrans, 1, g, g, 1, blas64.General{Rows: m, Cols: m, Stride: m, Data: c.Data})
		}
		flops(b, 2.0*rows*m*m)
	})
	b.Run("gonum-syrk", func(b *testing.B) {
		for b.Loop() {
			blas64.Syrk(blas.Trans, 1, g, 1, blas64.Symmetric{N: m, Stride: m, Data: c.Data, Uplo: blas.Upper})
		}
		flops(b, 1.0*rows*m*m)
	})
}
