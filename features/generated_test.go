package features

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// TestGeneratedBlocksAreImmutable: a block handed out by Generated keeps
// its seed and values when the evaluator later evaluates another seed at
// the same position (it regenerated the cached block in place before, so
// a served model sharing it would have projected with the wrong
// features), and equals the block Generate makes from its seed, for both
// precisions.
func TestGeneratedBlocksAreImmutable(t *testing.T) {
	for _, f32 := range []bool{false, true} {
		const d, nb, rows, k = 3, 8, 5, 2
		m := Map{Kernel: Kernel{Family: Gaussian, Bandwidth: 1.1}, Dim: d, BlockSize: nb, Float32: f32}
		e := NewEvaluator(m, EvaluatorConfig{Workers: 1})
		rng := rand.New(rand.NewPCG(3, 3))
		x := make([]float64, rows*d)
		for i := range x {
			x[i] = rng.NormFloat64()
		}
		coef := make([]float64, 2*nb*k)
		h := make([]float64, rows*k)
		e.Eval(h, x, rows, []uint64{11, 12}, coef, k)
		g := e.Generated()
		if !reflect.DeepEqual(g.Map, m) || len(g.Blocks) != 2 || g.Blocks[0] == nil || g.Blocks[0].Seed != 11 || g.Blocks[1].Seed != 12 {
			t.Fatalf("float32 %v: generated %+v, want blocks of seeds 11 and 12", f32, g)
		}
		held := g.Blocks[0]
		omega32 := slices.Clone(held.Omega32)
		omega := slices.Clone(held.Omega)
		e.Eval(h, x, rows, []uint64{99, 12}, coef, k)
		if held.Seed != 11 || !slices.Equal(held.Omega, omega) || !slices.Equal(held.Omega32, omega32) {
			t.Fatalf("float32 %v: a handed-out block changed to seed %d when the evaluator moved on", f32, held.Seed)
		}
		var fresh Block
		m.Generate(&fresh, 11)
		if f32 {
			if !slices.Equal(held.Omega32, fresh.Omega32) || !slices.Equal(held.Phase32, fresh.Phase32) {
				t.Errorf("float32: the generated block differs from Generate's")
			}
		} else if !slices.Equal(held.Omega, fresh.Omega) || !slices.Equal(held.Phase, fresh.Phase) {
			t.Errorf("the generated block differs from Generate's")
		}
		if now := e.Generated(); now.Blocks[0].Seed != 99 || now.Blocks[1] != g.Blocks[1] {
			t.Errorf("float32 %v: the cache holds seeds %d, %d after the second evaluation; want 99 and the same block of 12", f32, now.Blocks[0].Seed, now.Blocks[1].Seed)
		}
		e.Close()
	}
}
