package dense

import "math"

// Block sizes of the factorisation and of the triangular solves: the
// diagonal blocks are done by rows in Go, everything off them by Gemm.
const (
	cholBlock  = 128
	solveBlock = 64
)

// Cholesky factors the symmetric positive definite A (n×n; its upper
// triangle is read) in place into the upper triangular U with A = UᵀU,
// blocked so that all but O(n²·128) of its n³/3 flops go through Gemm.
// The strictly lower triangle is left unspecified. It reports false, with
// A partly overwritten, when a pivot is not positive (A is not positive
// definite, or holds a NaN).
func (w *Workspace) Cholesky(a Mat) bool {
	n := a.Rows
	for j := 0; j < n; j += cholBlock {
		j1 := min(j+cholBlock, n)
		if !cholRows(a.Slice(j, j1, j, j1)) {
			return false
		}
		if j1 < n {
			a12 := a.Slice(j, j1, j1, n)
			w.SolveUpper(a.Slice(j, j1, j, j1), a12, true)
			w.Gemm(Op{TransA: true, Sub: true, Upper: true}, a12, a12, a.Slice(j1, n, j1, n))
		}
	}
	return true
}

// cholRows is the unblocked right-looking factorisation of a diagonal
// block, by rows.
func cholRows(a Mat) bool {
	n := a.Rows
	for i := 0; i < n; i++ {
		row := a.Data[i*a.Stride+i : i*a.Stride+n]
		d := row[0]
		if !(d > 0) {
			return false
		}
		u := math.Sqrt(d)
		row[0] = u
		for j := 1; j < len(row); j++ {
			row[j] /= u
		}
		for l := 1; l < len(row); l++ {
			f := row[l]
			dst := a.Data[(i+l)*a.Stride+i+l : (i+l)*a.Stride+n]
			for j, v := range row[l:] {
				dst[j] -= f * v
			}
		}
	}
	return true
}

// SolveUpper overwrites B (n×p) with the solution X of U·X = B, or of
// Uᵀ·X = B with trans, U (n×n) upper triangular with a non-zero
// diagonal (its strictly lower triangle is not read).
func (w *Workspace) SolveUpper(u, b Mat, trans bool) {
	n, p := u.Rows, b.Cols
	if trans { // forward: X_i = U_iiᵀ⁻¹·B_i, then B_rest −= U_i,restᵀ·X_i
		for i0 := 0; i0 < n; i0 += solveBlock {
			i1 := min(i0+solveBlock, n)
			for i := i0; i < i1; i++ {
				row := b.Data[i*b.Stride : i*b.Stride+p]
				d := u.Data[i*u.Stride+i]
				for j := range row {
					row[j] /= d
				}
				for l := i + 1; l < i1; l++ {
					f := u.Data[i*u.Stride+l]
					dst := b.Data[l*b.Stride : l*b.Stride+p]
					for j, v := range row {
						dst[j] -= f * v
					}
				}
			}
			if i1 < n {
				w.Gemm(Op{TransA: true, Sub: true}, u.Slice(i0, i1, i1, n), b.Slice(i0, i1, 0, p), b.Slice(i1, n, 0, p))
			}
		}
		return
	}
	// backward: B_i −= U_i,below·X_below, then X_i = U_ii⁻¹·B_i
	for i1 := n; i1 > 0; i1 -= solveBlock {
		i0 := max(i1-solveBlock, 0)
		if i1 < n {
			w.Gemm(Op{Sub: true}, u.Slice(i0, i1, i1, n), b.Slice(i1, n, 0, p), b.Slice(i0, i1, 0, p))
		}
		for i := i1 - 1; i >= i0; i-- {
			row := b.Data[i*b.Stride : i*b.Stride+p]
			for l := i + 1; l < i1; l++ {
				f := u.Data[i*u.Stride+l]
				src := b.Data[l*b.Stride : l*b.Stride+p]
				for j, v := range src {
					row[j] -= f * v
				}
			}
			d := u.Data[i*u.Stride+i]
			for j := range row {
				row[j] /= d
			}
		}
	}
}
