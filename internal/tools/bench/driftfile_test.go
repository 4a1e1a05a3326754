package bench

import (
	"math/rand/v2"
	"slices"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/streamkpca/streamkpca/internal/synth"
)

// TestFileDriftReplaysEveryRowOncePerPass: case file streams a data
// set's rows, each pass a new order, each row exactly once a pass; its
// truth is the top-k eigenvectors of the rows' Gram matrix (checked here
// against gonum's eigendecomposition of it, evaluated by Nyström on the
// scored rows: the same functions up to a rotation, subspace error ~0).
func TestFileDriftReplaysEveryRowOncePerPass(t *testing.T) {
	const rows, d, k = 300, 3, 4
	rng := rand.New(rand.NewPCG(1, 1))
	x := make([]float64, rows*d)
	for i := range rows {
		x[i*d] = float64(i) // row i is recognised by its first value
		x[i*d+1], x[i*d+2] = rng.NormFloat64(), rng.NormFloat64()
	}
	// Scale the first column down so that the kernel sees all three.
	for i := range rows {
		x[i*d] /= rows
	}
	s, err := newFileDrift(DriftConfig{Rows: x, Dim: d, K: k, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]float64, 128*d)
	var orders [][]int
	for pass := range 3 {
		seen := make([]int, rows)
		var order []int
		for n := pass * rows; n < (pass+1)*rows; {
			b := min(128, (pass+1)*rows-n)
			s.sample(buf[:b*d], b, n)
			for r := range b {
				i := int(buf[r*d]*rows + 0.5)
				seen[i]++
				order = append(order, i)
			}
			n += b
		}
		for i, c := range seen {
			if c != 1 {
				t.Fatalf("pass %d: row %d streamed %d times", pass, i, c)
			}
		}
		orders = append(orders, order)
	}
	if slices.Equal(orders[0], orders[1]) || slices.Equal(orders[1], orders[2]) {
		t.Error("two passes streamed the rows in the same order")
	}
	// The truth against gonum on the same Gram matrix.
	g := mat.NewSymDense(rows, nil)
	for i := range rows {
		for j := i; j < rows; j++ {
			g.SetSym(i, j, s.kern.Eval(x[i*d:i*d+d], x[j*d:j*d+d]))
		}
	}
	var e mat.EigenSym
	if !e.Factorize(g, true) {
		t.Fatal("eigendecomposition failed")
	}
	var u mat.Dense
	e.VectorsTo(&u)
	// The scored rows are all the rows here (fewer than 1,000); a row's
	// truth value is u_j at that row: compare on the scored rows' order.
	idx := make([]int, s.nScore)
	for r := range s.nScore {
		idx[r] = int(s.scored[r*d]*rows + 0.5)
	}
	top := mat.NewDense(s.nScore, k, nil)
	for r, i := range idx {
		for j := range k {
			top.Set(r, j, u.At(i, rows-1-j))
		}
	}
	if e := synth.SubspaceError(top, s.truth); e > 1e-6 {
		t.Errorf("case file's truth is %.3g from the Gram matrix's top-%d eigenvectors", e, k)
	}
}
