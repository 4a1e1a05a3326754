package dense

import (
	"fmt"
	"runtime"
)

// The register tile of the micro-kernel (mr rows of C by nr columns) and
// the cache blocking around it: a packed mr×kc slice of A (24 KiB) stays
// in L1 while the kernel runs along a kc×nc block of B (1 MiB, L2).
const (
	mr = 12
	nr = 16
	kc = 256
	nc = 512
)

// The kernel levels (see level).
const (
	levelGo = iota
	levelAVX2
	levelAVX512
)

// Mat is a row-major view of a matrix: element (i, j) is
// Data[i·Stride + j].
type Mat struct {
	Rows, Cols, Stride int
	Data               []float64
}

// Dense is the r×c view of data with no padding between rows.
func Dense(r, c int, data []float64) Mat { return Mat{Rows: r, Cols: c, Stride: c, Data: data} }

// Slice returns the view of rows [i0, i1) and columns [j0, j1).
func (m Mat) Slice(i0, i1, j0, j1 int) Mat {
	if i0 == i1 || j0 == j1 {
		return Mat{Rows: i1 - i0, Cols: j1 - j0, Stride: m.Stride}
	}
	return Mat{Rows: i1 - i0, Cols: j1 - j0, Stride: m.Stride, Data: m.Data[i0*m.Stride+j0 : (i1-1)*m.Stride+j1]}
}

// Op says which product Gemm forms: C ± op(A)·op(B), op(X) = Xᵀ when
// Trans is set.
type Op struct {
	TransA, TransB bool
	// Sub subtracts the product from C instead of adding it.
	Sub bool
	// Upper: C is square and only its upper triangle is wanted. Tiles
	// wholly below the diagonal are skipped; the rest of the strictly
	// lower triangle is updated too and should be ignored.
	Upper bool
}

// Workspace holds the packing buffers and the worker goroutines of Gemm,
// so that calls after the first with the same sizes allocate nothing.
// Its zero value is ready to use; Close stops the workers. It is not safe
// for concurrent use.
type Workspace struct {
	// Workers splits C's row panels between goroutines (≤ 0:
	// GOMAXPROCS). The bits do not depend on it.
	Workers int

	ap, bp  []float64
	tiles   [][mr * nr]float64
	jobs    chan job
	done    chan struct{}
	started int
}

// Gemm sets C to C + op(A)·op(B) (or C − op(A)·op(B) with op.Sub): the
// product of op(A) (m×k) and op(B) (k×n) into C (m×n). Each element is
// summed over k in order with products rounded first (see the package
// doc), so the bits are those of the textbook loop.
func (w *Workspace) Gemm(op Op, a, b, c Mat) {
	m, n := c.Rows, c.Cols
	am, k := a.Rows, a.Cols
	if op.TransA {
		am, k = k, am
	}
	bk, bn := b.Rows, b.Cols
	if op.TransB {
		bk, bn = bn, bk
	}
	if am != m || bn != n || bk != k {
		panic(fmt.Sprintf("dense: Gemm of %d×%d by %d×%d into %d×%d", am, k, bk, bn, m, n))
	}
	if op.Upper && m != n {
		panic("dense: Gemm: Upper with a non-square C")
	}
	if m == 0 || n == 0 || k == 0 {
		return
	}
	mp, np := (m+mr-1)/mr, (n+nr-1)/nr
	w.ap = grow(w.ap, mp*mr*k)
	w.bp = grow(w.bp, np*nr*k)
	packA(w.ap, a, op.TransA, op.Sub, m, k)
	packB(w.bp, b, op.TransB, k, n)
	workers := w.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, mp)
	if len(w.tiles) < workers {
		w.tiles = make([][mr * nr]float64, workers)
	}
	if workers == 1 {
		w.run(op, c, k, 0, 1)
		return
	}
	w.start(workers)
	for wi := 1; wi < workers; wi++ {
		w.jobs <- job{op: op, c: c, k: k, wi: wi, workers: workers}
	}
	w.run(op, c, k, 0, workers)
	for wi := 1; wi < workers; wi++ {
		<-w.done
	}
}

// job is one worker's share of a Gemm.
type job struct {
	op             Op
	c              Mat
	k, wi, workers int
}

// start makes sure that workers−1 goroutines wait for jobs: started once,
// kept until Close, so that a Gemm allocates nothing.
func (w *Workspace) start(workers int) {
	for ; w.started < workers-1; w.started++ {
		if w.jobs == nil {
			w.jobs, w.done = make(chan job), make(chan struct{})
		}
		go func() {
			for j := range w.jobs {
				w.run(j.op, j.c, j.k, j.wi, j.workers)
				w.done <- struct{}{}
			}
		}()
	}
}

// Close stops the workers' goroutines. The Workspace stays usable: the
// next parallel Gemm starts them again.
func (w *Workspace) Close() {
	if w.jobs != nil {
		close(w.jobs)
		w.jobs, w.done, w.started = nil, nil, 0
	}
}

func grow(s []float64, n int) []float64 {
	if cap(s) < n {
		return make([]float64, n)
	}
	return s[:n]
}

// packA writes op(A) (m×k) as row panels: panel p holds rows p·mr… of
// op(A) column by column, ap[p·k·mr + r·mr + i] = op(A)[p·mr+i, r],
// zero past row m; negated with neg, which is how Gemm subtracts:
// c − round(a·b) and c + round((−a)·b) are the same float64.
func packA(ap []float64, a Mat, trans, neg bool, m, k int) {
	for p := 0; p*mr < m; p++ {
		dst := ap[p*k*mr : (p+1)*k*mr]
		rows := min(mr, m-p*mr)
		for r := 0; r < k; r++ {
			d := dst[r*mr : r*mr+mr]
			if trans { // op(A)[i, r] = A[r, i]: contiguous
				copy(d, a.Data[r*a.Stride+p*mr:r*a.Stride+p*mr+rows])
			} else {
				for i := 0; i < rows; i++ {
					d[i] = a.Data[(p*mr+i)*a.Stride+r]
				}
			}
			clear(d[rows:])
			if neg {
				for i := range d[:rows] {
					d[i] = -d[i]
				}
			}
		}
	}
}

// packB writes op(B) (k×n) as column panels: bp[q·k·nr + r·nr + j] =
// op(B)[r, q·nr+j], zero past column n.
func packB(bp []float64, b Mat, trans bool, k, n int) {
	for q := 0; q*nr < n; q++ {
		dst := bp[q*k*nr : (q+1)*k*nr]
		cols := min(nr, n-q*nr)
		for r := 0; r < k; r++ {
			d := dst[r*nr : r*nr+nr]
			if trans { // op(B)[r, j] = B[j, r]
				for j := 0; j < cols; j++ {
					d[j] = b.Data[(q*nr+j)*b.Stride+r]
				}
			} else {
				copy(d, b.Data[r*b.Stride+q*nr:r*b.Stride+q*nr+cols])
			}
			clear(d[cols:])
		}
	}
}

// run is worker wi of workers: row panels wi, wi+workers, …, for every
// k block in order (so each element's sum keeps the order of k).
func (w *Workspace) run(op Op, c Mat, k, wi, workers int) {
	m, n := c.Rows, c.Cols
	mp, np := (m+mr-1)/mr, (n+nr-1)/nr
	tile := w.tiles[wi][:]
	for pc := 0; pc < k; pc += kc {
		kk := min(kc, k-pc)
		for jc := 0; jc < np; jc += nc / nr {
			for p := wi; p < mp; p += workers {
				a := w.ap[p*k*mr+pc*mr : p*k*mr+(pc+kk)*mr]
				i0 := p * mr
				rows := min(mr, m-i0)
				for q := jc; q < min(jc+nc/nr, np); q++ {
					if op.Upper && (q+1)*nr <= i0 {
						continue // wholly below the diagonal
					}
					b := w.bp[q*k*nr+pc*nr : q*k*nr+(pc+kk)*nr]
					j0 := q * nr
					cols := min(nr, n-j0)
					cd := c.Data[i0*c.Stride+j0:]
					if rows == mr && cols == nr {
						if !kernelAsm(kk, a, b, cd, c.Stride) {
							kernelGo(kk, a, b, cd, c.Stride, mr, nr)
						}
						continue
					}
					// An edge tile: through a full one, so that the
					// kernel never touches memory past C.
					for i := 0; i < rows; i++ {
						copy(tile[i*nr:i*nr+cols], cd[i*c.Stride:i*c.Stride+cols])
					}
					if !kernelAsm(kk, a, b, tile, nr) {
						kernelGo(kk, a, b, tile, nr, rows, cols)
					}
					for i := 0; i < rows; i++ {
						copy(cd[i*c.Stride:i*c.Stride+cols], tile[i*nr:i*nr+cols])
					}
				}
			}
		}
	}
}

// kernelGo is the micro-kernel in Go for rows×cols of a tile: for r < k
// in order, c[i·ldc+j] += round(a[r·mr+i]·b[r·nr+j]). The explicit
// float64 conversion keeps the compiler from fusing the multiply and the
// add (the Go spec allows it otherwise), so the generated kernel's bits
// are these.
func kernelGo(k int, a, b, c []float64, ldc, rows, cols int) {
	for r := 0; r < k; r++ {
		br := b[r*nr : r*nr+cols]
		for i, ai := range a[r*mr : r*mr+rows] {
			cr := c[i*ldc : i*ldc+cols]
			for j, bj := range br {
				cr[j] += float64(ai * bj)
			}
		}
	}
}
