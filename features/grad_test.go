package features

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestGradMatchesNaive checks Grad against Φ_jᵀ·r summed row by row in the
// plain loop (the reference arithmetic: each product rounded, then added
// in row order), bit for bit, with the features kept and regenerated, on
// one worker and on several, with the features' column means, and that
// EvalKeep's h equals Eval's.
func TestGradMatchesNaive(t *testing.T) {
	const d, nb, rows, k, blocks = 5, 24, 37, 6, 11
	rng := rand.New(rand.NewPCG(1, 1))
	m := Map{Kernel: Kernel{Family: Gaussian, Bandwidth: 1.3}, Dim: d, BlockSize: nb}
	x, seeds := gradInputs(rng, rows*d, blocks, 7)
	coef := make([]float64, blocks*nb*k)
	for i := range coef {
		coef[i] = rng.NormFloat64()
	}
	r := make([]float64, rows*k)
	for i := range r {
		r[i] = rng.NormFloat64()
	}
	const s = 0.37
	ref := NewEvaluator(m, EvaluatorConfig{Workers: 1})
	defer ref.Close()
	want := make([]float64, blocks*nb*k)
	wantMean := make([]float64, blocks*nb)
	phi := make([]float64, rows*nb)
	for j := range seeds {
		ref.PhiTo(phi, x, rows, j, seeds[j])
		for f := 0; f < nb; f++ {
			var sum float64
			for i := 0; i < rows; i++ {
				sum += phi[i*nb+f]
			}
			wantMean[j*nb+f] = sum / rows
			for q := 0; q < k; q++ {
				var acc float64
				for i := 0; i < rows; i++ {
					acc += float64(phi[i*nb+f] * float64(s*r[i*k+q]))
				}
				want[(j*nb+f)*k+q] = acc
			}
		}
	}
	hWant := make([]float64, rows*k)
	ref.Eval(hWant, x, rows, seeds, coef, k)
	for _, tc := range []struct {
		name    string
		workers int
		keep    int64
	}{{"kept/1", 1, 0}, {"kept/3", 3, 0}, {"regenerated/1", 1, -1}, {"regenerated/3", 3, -1}} {
		t.Run(tc.name, func(t *testing.T) {
			ev := NewEvaluator(m, EvaluatorConfig{Workers: tc.workers, KeepBytes: tc.keep})
			defer ev.Close()
			h := make([]float64, rows*k)
			ev.EvalKeep(h, x, rows, seeds, coef, k)
			for i := range h {
				if h[i] != hWant[i] {
					t.Fatalf("h[%d] = %v, Eval gives %v", i, h[i], hWant[i])
				}
			}
			g := make([]float64, len(want))
			mean := make([]float64, len(wantMean))
			ev.Grad(g, r, k, s, mean)
			for i := range g {
				if g[i] != want[i] {
					t.Fatalf("g[%d] = %v, want %v", i, g[i], want[i])
				}
			}
			for i := range mean {
				if mean[i] != wantMean[i] {
					t.Fatalf("mean[%d] = %v, want %v", i, mean[i], wantMean[i])
				}
			}
		})
	}
}

// TestKeepBufferGrowsGeometrically grows a model block by block past the
// keep bound, as the subspace solver does while its budget fills: the
// kept features' buffer must be replaced a logarithmic number of times
// (not once per block: with 512 rows and blocks of 512 that was a new
// buffer of up to 512 MiB every step, and GiBs of resident memory), and
// dropped once the blocks no longer fit, since Grad then regenerates
// them.
func TestKeepBufferGrowsGeometrically(t *testing.T) {
	const d, nb, rows, k, blocks = 2, 16, 32, 3, 64
	const fitBlocks = 24 // the bound holds 24 blocks' features of the batch
	m := Map{Kernel: Kernel{Family: Gaussian, Bandwidth: 1}, Dim: d, BlockSize: nb}
	ev := NewEvaluator(m, EvaluatorConfig{Workers: 1, KeepBytes: fitBlocks * rows * nb * 8, KeepBlocks: blocks})
	defer ev.Close()
	rng := rand.New(rand.NewPCG(3, 3))
	x, seeds := gradInputs(rng, rows*d, blocks, 9)
	coef := make([]float64, blocks*nb*k)
	h := make([]float64, rows*k)
	g := make([]float64, blocks*nb*k)
	r := make([]float64, rows*k)
	replaced, lastCap := 0, 0
	for j := 1; j <= blocks; j++ {
		ev.EvalKeep(h, x, rows, seeds[:j], coef[:j*nb*k], k)
		ev.Grad(g[:j*nb*k], r, k, 1, nil)
		ev.Release()
		c := cap(ev.keepBuf)
		if j <= fitBlocks {
			if c < j*rows*nb {
				t.Fatalf("%d blocks: keep buffer of %d values, fewer than the %d kept", j, c, j*rows*nb)
			}
			if c != lastCap {
				replaced++
				lastCap = c
			}
			if c > fitBlocks*rows*nb {
				t.Fatalf("%d blocks: keep buffer of %d values, past the bound (%d)", j, c, fitBlocks*rows*nb)
			}
		} else if ev.keepBuf != nil {
			t.Fatalf("%d blocks, past the bound: the keep buffer (%d values) is still held", j, c)
		}
	}
	if replaced > 6 { // 1, 2, 4, 8, 16, 24 blocks
		t.Errorf("the keep buffer was replaced %d times while 24 blocks grew, want at most 6 (doubling)", replaced)
	}
}

// gradInputs returns n standard normal inputs and the seeds of blocks
// blocks derived from seed.
func gradInputs(rng *rand.Rand, n, blocks int, seed uint64) ([]float64, []uint64) {
	x := make([]float64, n)
	for i := range x {
		x[i] = rng.NormFloat64()
	}
	seeds := make([]uint64, blocks)
	for j := range seeds {
		seeds[j] = DeriveSeed(seed, uint64(j))
	}
	return x, seeds
}

// BenchmarkGradTile times Grad's product on one step's kept features (64
// blocks of 512 rows × 512 features, 12 padded components, one worker),
// taking each block's rows all at once (rows=512: how Grad walked them
// before) or in tiles of 8 and 16 rows (Grad's gradTileRows is 8). Every
// tiling gives the same bits.
func BenchmarkGradTile(b *testing.B) {
	const kp, rows, nb, blocks = 12, 512, 512, 64
	rng := rand.New(rand.NewPCG(1, 1))
	resid, _ := gradInputs(rng, kp*rows, 0, 0)
	phi, _ := gradInputs(rng, blocks*rows*nb, 0, 0)
	gt := make([]float64, kp*nb)
	for _, tile := range []int{rows, 16, gradTileRows} {
		rt := make([]float64, kp*tile)
		b.Run(fmt.Sprintf("rows=%d", tile), func(b *testing.B) {
			for b.Loop() {
				for j := range blocks {
					blk := phi[j*rows*nb : (j+1)*rows*nb]
					clear(gt)
					for r0 := 0; r0 < rows; r0 += tile {
						for q := range kp {
							copy(rt[q*tile:(q+1)*tile], resid[q*rows+r0:q*rows+r0+tile])
						}
						addMul(SIMDAuto, gt, rt, blk[r0*nb:(r0+tile)*nb], kp, tile, nb)
					}
				}
			}
		})
	}
}
