package online

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

// parallelRun learns steps batches of the stream x (rows points each after
// a shared first batch) with members learners, each taking its share of
// every batch (split unevenly) through Moments, Partial and Apply, the
// parts added in member order. It returns the members.
func parallelRun(t *testing.T, cfg Config, x []float64, d, rows, steps int, shares []int) []*KPCA {
	t.Helper()
	members := make([]*KPCA, len(shares))
	for i := range members {
		l, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(l.Close)
		if err := l.Update(x[:rows*d], rows); err != nil { // the shared first step
			t.Fatal(err)
		}
		members[i] = l
	}
	moms := make([]Moments, len(members))
	parts := make([]Partial, len(members))
	var total Moments
	var grad Partial
	for s := 1; s <= steps; s++ {
		lo := s * rows
		for i, l := range members {
			n := shares[i]
			if err := l.Moments(&moms[i], x[lo*d:(lo+n)*d], n); err != nil {
				t.Fatal(err)
			}
			lo += n
		}
		reduceMoments(&total, moms)
		for i, l := range members {
			if err := l.Partial(&parts[i], &total); err != nil {
				t.Fatal(err)
			}
		}
		reducePartials(&grad, parts)
		for _, l := range members {
			if err := l.Apply(&total, &grad); err != nil {
				t.Fatal(err)
			}
		}
	}
	return members
}

func reduceMoments(total *Moments, moms []Moments) {
	total.Rows = 0
	total.Sum = append(total.Sum[:0], make([]float64, len(moms[0].Sum))...)
	total.Outer = append(total.Outer[:0], make([]float64, len(moms[0].Outer))...)
	for i := range moms {
		total.Add(&moms[i])
	}
}

func reducePartials(grad *Partial, parts []Partial) {
	zero := func(s []float64, n int) []float64 { return append(s[:0], make([]float64, n)...) }
	grad.Grad, grad.New = zero(grad.Grad, len(parts[0].Grad)), zero(grad.New, len(parts[0].New))
	grad.Sums, grad.NewSums = zero(grad.Sums, len(parts[0].Sums)), zero(grad.NewSums, len(parts[0].NewSums))
	for i := range parts {
		grad.Add(&parts[i])
	}
}

// TestParallelOneMemberIsUpdate: a data-parallel step with one member is
// Update, bit for bit (without centring, where M is the same sum).
func TestParallelOneMemberIsUpdate(t *testing.T) {
	const rows, steps = 200, 24 // 16 blocks fill the budget: revisits after
	x := curvedData(rand.New(rand.NewPCG(7, 7)), rows*(steps+1))
	cfg := Config{K: 3, BlockSize: 64, MaxFeatures: 1024, Workers: 1}
	member := parallelRun(t, cfg, x, 10, rows, steps, []int{rows})[0]
	single, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer single.Close()
	for s := 0; s <= steps; s++ {
		if err := single.Update(x[s*rows*10:(s+1)*rows*10], rows); err != nil {
			t.Fatal(err)
		}
	}
	if member.Step() != single.Step() || member.SamplesSeen() != single.SamplesSeen() {
		t.Fatalf("member at step %d with %d samples, Update at %d with %d", member.Step(), member.SamplesSeen(), single.Step(), single.SamplesSeen())
	}
	a, b := member.Snapshot().Coef[0], single.Snapshot().Coef[0]
	for i := range b {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			t.Fatalf("coefficient %d: %v by Moments/Partial/Apply, %v by Update", i, a[i], b[i])
		}
	}
}

// TestParallelMembersAreOneModel: three members taking uneven shares of
// every batch hold the same coefficients bit for bit, and they are
// Update's on the union batches within 1e-12 (relative, Frobenius): one
// model, learned from the members' rows.
func TestParallelMembersAreOneModel(t *testing.T) {
	const rows, steps, d = 300, 24, 10
	x := curvedData(rand.New(rand.NewPCG(8, 8)), rows*(steps+1))
	for _, center := range []bool{false, true} {
		cfg := Config{K: 3, BlockSize: 64, MaxFeatures: 1024, Center: center}
		members := parallelRun(t, cfg, x, d, rows, steps, []int{130, 100, 70})
		single, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for s := 0; s <= steps; s++ {
			if err := single.Update(x[s*rows*d:(s+1)*rows*d], rows); err != nil {
				t.Fatal(err)
			}
		}
		want := single.Snapshot()
		single.Close()
		ref := members[0].Snapshot()
		for i, m := range members[1:] {
			got := m.Snapshot()
			for c, v := range ref.Coef[0] {
				if math.Float64bits(got.Coef[0][c]) != math.Float64bits(v) {
					t.Fatalf("center %v: member %d's coefficient %d is %v, member 0's %v", center, i+1, c, got.Coef[0][c], v)
				}
			}
			if got.Header.SamplesSeen != uint64(rows*(steps+1)) {
				t.Errorf("member %d: %d samples seen, want %d", i+1, got.Header.SamplesSeen, rows*(steps+1))
			}
		}
		var diff, norm float64
		for c, v := range want.Coef[0] {
			diff += (ref.Coef[0][c] - v) * (ref.Coef[0][c] - v)
			norm += v * v
		}
		rel := math.Sqrt(diff / norm)
		t.Logf("center %v: members vs one learner on the union batches: %.2g relative", center, rel)
		if !(rel <= 1e-12) {
			t.Errorf("center %v: members' coefficients %.3g (relative) from Update on the union batches, want ≤ 1e-12", center, rel)
		}
	}
}

// TestParallelRefusedUnionBatch: when the union batch fails the guard,
// Partial says so on every member, and Apply counts the refusal (samples
// seen, refused batches, step halved) without a gradient: members that
// got ErrDiverged from Partial have none to pass.
func TestParallelRefusedUnionBatch(t *testing.T) {
	x := curvedData(rand.New(rand.NewPCG(11, 11)), 400)
	l, err := New(Config{K: 2, BlockSize: 32, MaxFeatures: 128})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.Update(x[:2000], 200); err != nil {
		t.Fatal(err)
	}
	eta := l.StepSize()
	var mom Moments
	if err := l.Moments(&mom, x[2000:], 200); err != nil {
		t.Fatal(err)
	}
	mom.Outer[0] = math.Inf(1) // another member's rows blew up
	var part Partial
	if err := l.Partial(&part, &mom); !errors.Is(err, ErrDiverged) {
		t.Fatalf("Partial: %v, want ErrDiverged", err)
	}
	if err := l.Apply(&mom, &Partial{}); !errors.Is(err, ErrDiverged) {
		t.Fatalf("Apply without a gradient: %v, want ErrDiverged", err)
	}
	if l.Step() != 1 || l.SamplesSeen() != 400 || l.Rejected() != 1 || l.StepSize() != eta/2 {
		t.Errorf("after the refusal: step %d, %d samples, %d refused, step size %v (was %v); want 1, 400, 1, halved", l.Step(), l.SamplesSeen(), l.Rejected(), l.StepSize(), eta)
	}
}

// TestParallelRefusals: Moments refuses learners that cannot take
// data-parallel steps and bad batches; Partial needs a Moments first.
func TestParallelRefusals(t *testing.T) {
	x := curvedData(rand.New(rand.NewPCG(9, 9)), 200)
	var mom Moments
	learner := func(cfg Config) *KPCA {
		l, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(l.Close)
		return l
	}
	fresh := learner(Config{K: 2, BlockSize: 32, MaxFeatures: 128})
	if err := fresh.Moments(&mom, x, 200); !errors.Is(err, ErrNotParallel) {
		t.Errorf("before the first step: %v, want ErrNotParallel", err)
	}
	oja := learner(Config{K: 2, BlockSize: 32, MaxFeatures: 128, Solver: SolverOja})
	if err := oja.Update(x, 200); err != nil {
		t.Fatal(err)
	}
	if err := oja.Moments(&mom, x, 200); !errors.Is(err, ErrNotParallel) {
		t.Errorf("oja solver: %v, want ErrNotParallel", err)
	}
	if err := fresh.Update(x, 200); err != nil {
		t.Fatal(err)
	}
	bad := append([]float64(nil), x...)
	bad[3] = math.NaN()
	if err := fresh.Moments(&mom, bad, 200); !errors.Is(err, ErrInput) {
		t.Errorf("NaN: %v, want ErrInput", err)
	}
	var part Partial
	if err := fresh.Partial(&part, &mom); !errors.Is(err, ErrInput) {
		t.Errorf("Partial without Moments: %v, want ErrInput", err)
	}
	if fresh.Step() != 1 {
		t.Errorf("refused calls changed the model: step %d", fresh.Step())
	}
}

// TestParallelStepAllocatesNothing: with the parts' buffers reused, a
// data-parallel step allocates nothing once the budget is full, as
// Update does.
func TestParallelStepAllocatesNothing(t *testing.T) {
	const rows = 128
	x := curvedData(rand.New(rand.NewPCG(10, 10)), rows)
	for _, center := range []bool{false, true} {
		l, err := New(Config{K: 3, BlockSize: 32, MaxFeatures: 128, Center: center})
		if err != nil {
			t.Fatal(err)
		}
		var mom Moments
		var part Partial
		step := func() {
			if err := l.Moments(&mom, x, rows); err != nil {
				t.Fatal(err)
			}
			if err := l.Partial(&part, &mom); err != nil {
				t.Fatal(err)
			}
			if err := l.Apply(&mom, &part); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Update(x, rows); err != nil {
			t.Fatal(err)
		}
		for range 8 {
			step()
		}
		if a := testing.AllocsPerRun(10, step); a != 0 {
			t.Errorf("center %v: %.1f allocations per data-parallel step, want 0", center, a)
		}
		l.Close()
	}
}
