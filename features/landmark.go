package features

import (
	"fmt"
	"math"
)

// Landmarks is one landmark block: B points Z of the stream and the
// Nyström feature map they define,
//
//	ψ(x) = L⁻¹·k(Z, x),   L·Lᵀ = K_ZZ + ε·I   (Cholesky),
//
// so that ψ(x)·ψ(y) = k(x, Z)(K_ZZ + εI)⁻¹k(Z, y): the Nyström
// approximation of k(x, y) on the landmarks (Williams & Seeger 2001), which
// is exact when x or y is a landmark (up to ε). Like a block of random
// features it approximates the kernel on its own, so a learner that
// averages blocks (paper Eq. 6 summed over blocks) averages Nyström
// approximations on disjoint landmark sets (Kumar, Mohri & Talwalkar's
// ensemble Nyström). Unlike random features, the block is data: Z are rows
// of the stream (after standardisation) and are stored in snapshots.
//
// ε is 1e-8 times the mean of K_ZZ's diagonal, raised by ×100 until the
// factorisation succeeds (repeated landmarks make K_ZZ singular). Every
// value is computed by the package's own loops and kernels in a fixed
// order, so ψ is the same bits wherever Z is: a model restored from a
// snapshot recomputes L from Z and projects exactly as the learner did.
type Landmarks struct {
	// Z holds the B landmarks, B×Dim row-major.
	Z []float64
	// Jitter is the ε the factorisation used.
	Jitter float64

	zt []float64 // Zᵀ, Dim×B (the Gaussian's x·Zᵀ by AddMul)
	zn []float64 // ‖z_f‖²
	wt []float64 // (L⁻¹)ᵀ, B×B row-major: ψ = k(x, Z)·wt
}

// ErrLandmarks is returned (wrapped) when a landmark block cannot be built.
var ErrLandmarks = fmt.Errorf("%w: landmark block", ErrKernel)

// landmarkFamily reports whether k can be evaluated exactly (Kernel.Eval)
// for landmark features.
func landmarkFamily(k Kernel) error {
	if fam := k.Family.spec(); fam != nil && fam.landmark != nil {
		return fam.landmark(k)
	}
	return nil
}

// NewLandmarks builds the landmark block of the B = m.BlockSize points z
// (B×Dim, row-major; copied). m must be a valid landmark map.
func (m Map) NewLandmarks(z []float64) (*Landmarks, error) {
	d, nb := m.Dim, m.BlockSize
	if !m.Landmarks {
		return nil, fmt.Errorf("%w: the map is not a landmark map", ErrLandmarks)
	}
	if len(z) != nb*d {
		return nil, fmt.Errorf("%w: %d values for %d landmarks of dimension %d", ErrLandmarks, len(z), nb, d)
	}
	for i, v := range z {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("%w: landmark value %d is %v", ErrLandmarks, i, v)
		}
	}
	lb := &Landmarks{Z: append([]float64(nil), z...), zn: make([]float64, nb), zt: make([]float64, d*nb)}
	for f := 0; f < nb; f++ {
		zf := lb.Z[f*d : f*d+d]
		lb.zn[f] = sqNorm(zf)
		for i, v := range zf {
			lb.zt[i*nb+f] = v
		}
	}
	// K_ZZ by the same row computation as ψ's, so that ψ interpolates the
	// kernel on the landmarks in exactly the arithmetic it is used in.
	kzz := make([]float64, nb*nb)
	for r := 0; r < nb; r += 4 {
		n := min(4, nb-r)
		m.kernelRows(kzz[r*nb:(r+n)*nb], lb.Z[r*d:(r+n)*d], n, lb)
	}
	var tr float64
	for f := 0; f < nb; f++ {
		tr += kzz[f*nb+f]
	}
	if !(tr > 0) || math.IsInf(tr, 0) {
		return nil, fmt.Errorf("%w: the landmarks' kernel matrix has trace %v", ErrLandmarks, tr)
	}
	l := make([]float64, nb*nb)
	eps := 1e-8 * tr / float64(nb)
	for tries := 0; ; tries++ {
		if cholesky(l, kzz, nb, eps) {
			break
		}
		if tries == 6 {
			return nil, fmt.Errorf("%w: the landmarks' kernel matrix is not positive definite even with jitter %g", ErrLandmarks, eps)
		}
		eps *= 100
	}
	lb.Jitter = eps
	lb.wt = invLowerT(l, nb)
	return lb, nil
}

// InvLT returns (L⁻¹)ᵀ (B×B, row-major, upper triangular), the map's
// factor: ψ(x) = k(x, Z)·InvLT(). It is the block's own storage: read it,
// do not write it.
func (lb *Landmarks) InvLT() []float64 { return lb.wt }

// sqNorm is Σ v² in order, every product rounded.
func sqNorm(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += float64(x * x)
	}
	return s
}

// cholesky sets l (n×n, row-major, lower) to the Cholesky factor of
// a + eps·I. It reports false at a pivot that is not positive.
func cholesky(l, a []float64, n int, eps float64) bool {
	clear(l)
	for j := 0; j < n; j++ {
		lj := l[j*n : j*n+j]
		s := a[j*n+j] + eps - sqNorm(lj)
		if !(s > 0) {
			return false
		}
		d := math.Sqrt(s)
		l[j*n+j] = d
		for i := j + 1; i < n; i++ {
			li := l[i*n : i*n+j]
			var t float64
			for c, v := range li {
				t += float64(v * lj[c])
			}
			l[i*n+j] = (a[i*n+j] - t) / d
		}
	}
	return true
}

// invLowerT returns (L⁻¹)ᵀ (n×n, row-major, upper triangular) for the
// lower-triangular l, by forward substitution on each unit vector.
func invLowerT(l []float64, n int) []float64 {
	wt := make([]float64, n*n)
	x := make([]float64, n)
	for c := 0; c < n; c++ { // column c of L⁻¹: L·x = e_c, x_i = 0 for i < c
		clear(x)
		for i := c; i < n; i++ {
			var s float64
			if i == c {
				s = 1
			}
			li := l[i*n : i*n+i]
			for j := c; j < i; j++ {
				s -= float64(li[j] * x[j])
			}
			x[i] = s / l[i*n+i]
		}
		// wt[c][i] = (L⁻¹)ᵀ[c][i] = (L⁻¹)[i][c] = x_i
		copy(wt[c*n+c:(c+1)*n], x[c:])
	}
	return wt
}

// kernelRows sets dst (n×B, n ≤ 4) to k(x_r, z_f) for the n rows of x.
// Gaussian: exp(−(‖x‖² + ‖z‖² − 2x·z)/(2ℓ²)) with x·Zᵀ by AddMul and
// ExpNeg, bit-identical on every CPU; the other families by Kernel.Eval.
func (m Map) kernelRows(dst, x []float64, n int, lb *Landmarks) {
	d, nb := m.Dim, m.BlockSize
	dst = dst[:n*nb]
	if m.Kernel.Family == Gaussian {
		clear(dst)
		addMul(m.SIMD, dst, x[:n*d], lb.zt, n, d, nb)
		inv := 1 / float64(2*float64(m.Kernel.Bandwidth*m.Kernel.Bandwidth))
		for q := 0; q < n; q++ {
			xn := sqNorm(x[q*d : q*d+d])
			row := dst[q*nb : q*nb+nb]
			for f, g := range row {
				s := float64(xn+lb.zn[f]) - float64(2*g)
				row[f] = ExpNeg(float64(math.Max(s, 0) * inv))
			}
		}
		return
	}
	for q := 0; q < n; q++ {
		xq := x[q*d : q*d+d]
		for f := 0; f < nb; f++ {
			dst[q*nb+f] = m.Kernel.Eval(xq, lb.Z[f*d:f*d+d])
		}
	}
}

// phiLandmarks is PhiTo for a landmark block: four rows at a time,
// k(x, Z) into the scratch, then ψ = k(x, Z)·(L⁻¹)ᵀ by AddMul.
func (m Map) phiLandmarks(dst, z, x []float64, rows int, lb *Landmarks) {
	d, nb := m.Dim, m.BlockSize
	if lb == nil {
		panic("features: landmark map without a landmark block")
	}
	kx := z[:4*nb]
	for r := 0; r < rows; r += 4 {
		n := min(4, rows-r)
		m.kernelRows(kx, x[r*d:(r+n)*d], n, lb)
		out := dst[r*nb : (r+n)*nb]
		clear(out)
		addMul(m.SIMD, out, kx[:n*nb], lb.wt, n, nb, nb)
	}
}
