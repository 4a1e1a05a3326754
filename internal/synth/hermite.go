package synth

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"gonum.org/v1/gonum/lapack/lapack64"
	"gonum.org/v1/gonum/mat"
)

// Hermite is the hermite stream: x ~ N(0, diag(S²)), Gaussian kernel of
// bandwidth L.
type Hermite struct {
	S []float64
	L float64
}

// Hermite1D is the paper's one-dimensional setup (s = 1, ℓ = 1).
func Hermite1D() Hermite { return Hermite{S: []float64{1}, L: 1} }

// Hermite16 is the 16-dimensional product form of testdata/hermite16_heldout_2k.csv:
// s_i = 0.85^(i−1), ℓ = 2.5.
func Hermite16() Hermite {
	s := make([]float64, 16)
	for i := range s {
		s[i] = math.Pow(0.85, float64(i))
	}
	return Hermite{S: s, L: 2.5}
}

// Dim returns the input dimension.
func (h Hermite) Dim() int { return len(h.S) }

// Sample fills x (rows×Dim) with draws from the stream's distribution.
func (h Hermite) Sample(x []float64, rng *rand.Rand) {
	d := len(h.S)
	for i := range x {
		x[i] = rng.NormFloat64() * h.S[i%d]
	}
}

type dim1 struct{ a, c, lam0, ratio float64 }

func (h Hermite) dims() []dim1 {
	out := make([]dim1, len(h.S))
	for i, s := range h.S {
		a := 1 / (4 * s * s)
		b := 1 / (2 * h.L * h.L)
		c := math.Sqrt(a*a + 2*a*b)
		A := a + b + c
		out[i] = dim1{a: a, c: c, lam0: math.Sqrt(2 * a / A), ratio: b / A}
	}
	return out
}

// Index is a multi-index n (one degree per dimension) with its eigenvalue.
type Index struct {
	N      []int
	Lambda float64
}

type idxHeap []Index

func (h idxHeap) Len() int           { return len(h) }
func (h idxHeap) Less(i, j int) bool { return h[i].Lambda > h[j].Lambda }
func (h idxHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *idxHeap) Push(x any)        { *h = append(*h, x.(Index)) }
func (h *idxHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Top returns the multi-indices of the top k eigenfunctions, largest
// eigenvalue first (best-first search: eigenvalues fall in every degree).
func (h Hermite) Top(k int) []Index {
	ds := h.dims()
	lam := func(n []int) float64 {
		v := 1.0
		for i, d := range ds {
			v *= d.lam0 * math.Pow(d.ratio, float64(n[i]))
		}
		return v
	}
	seen := map[string]bool{}
	zero := make([]int, len(ds))
	hp := &idxHeap{{N: zero, Lambda: lam(zero)}}
	seen[fmt.Sprint(zero)] = true
	var out []Index
	for len(out) < k && hp.Len() > 0 {
		top := heap.Pop(hp).(Index)
		out = append(out, top)
		for i := range ds {
			n := slices.Clone(top.N)
			n[i]++
			key := fmt.Sprint(n)
			if !seen[key] {
				seen[key] = true
				heap.Push(hp, Index{N: n, Lambda: lam(n)})
			}
		}
	}
	return out
}

// Eigenvalues returns the top k eigenvalues in decreasing order.
func (h Hermite) Eigenvalues(k int) []float64 {
	var out []float64
	for _, ix := range h.Top(k) {
		out = append(out, ix.Lambda)
	}
	return out
}

// Eigenfunctions returns the top k eigenfunctions at rows points x
// (rows×Dim), as a rows×k matrix, normalised to unit L2(p) norm.
func (h Hermite) Eigenfunctions(x []float64, rows, k int) *mat.Dense {
	ds := h.dims()
	d := len(ds)
	top := h.Top(k)
	out := mat.NewDense(rows, k, nil)
	for r := 0; r < rows; r++ {
		for j, ix := range top {
			v := 1.0
			for i, di := range ds {
				xi := x[r*d+i]
				// Normalised so that E[φ²] = 1 under N(0, s²):
				// E[exp(−2(c−a)x²)H_n(√(2c)x)²] = √(a/c)·2ⁿn!.
				v *= math.Exp(-(di.c-di.a)*xi*xi) * hermiteH(ix.N[i], math.Sqrt(2*di.c)*xi) /
					math.Sqrt(math.Sqrt(di.a/di.c)*math.Pow(2, float64(ix.N[i]))*factorial(ix.N[i]))
			}
			out.Set(r, j, v)
		}
	}
	return out
}

func factorial(n int) float64 {
	f := 1.0
	for i := 2; i <= n; i++ {
		f *= float64(i)
	}
	return f
}

// hermiteH is the physicists' Hermite polynomial H_n(x).
func hermiteH(n int, x float64) float64 {
	h0, h1 := 1.0, 2*x
	if n == 0 {
		return h0
	}
	for i := 1; i < n; i++ {
		h0, h1 = h1, 2*x*h1-2*float64(i)*h0
	}
	return h1
}

// SubspaceError returns 1 − cos²θ_max between the column spans of a and b
// (n×k each, evaluations on the same held-out points).
func SubspaceError(a, b mat.Matrix) float64 {
	qa, qb := orthonormal(a), orthonormal(b)
	var p mat.Dense
	p.Mul(qa.T(), qb)
	var svd mat.SVD
	if !svd.Factorize(&p, mat.SVDNone) {
		return math.NaN()
	}
	vals := svd.Values(nil)
	smin := vals[len(vals)-1]
	_, ca := a.Dims()
	_, cb := b.Dims()
	if ca != cb {
		panic("synth: SubspaceError of spans of different dimension")
	}
	return math.Max(0, 1-smin*smin)
}

func orthonormal(a mat.Matrix) *mat.Dense {
	// Householder QR (Geqrf) and the thin Q (Orgqr, n×c): O(n·c²) time and
	// n×c memory, where mat.QR's QTo would build the full n×n Q.
	q := mat.DenseCopyOf(a)
	g := q.RawMatrix()
	tau := make([]float64, min(g.Rows, g.Cols))
	work := make([]float64, 1)
	lapack64.Geqrf(g, tau, work, -1)
	work = make([]float64, max(int(work[0]), g.Rows))
	lapack64.Geqrf(g, tau, work, len(work))
	lapack64.Orgqr(g, tau, work, len(work))
	return q
}
