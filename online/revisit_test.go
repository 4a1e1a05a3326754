package online

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestRevisitIsOneMoreStepOfTheModelAlone: Revisit of a batch is the
// step Update takes on it, to the bit (the model's coefficients, its step
// and its features), but SamplesSeen counts the stream's samples only;
// and following's scouts, which learn the stream from their own start,
// do not learn the revisited rows.
func TestRevisitIsOneMoreStepOfTheModelAlone(t *testing.T) {
	const d, b = 10, 64
	rng := rand.New(rand.NewPCG(4, 4))
	x := curvedData(rng, 40*b)
	const steps = 150
	for _, forget := range []Forgetting{ForgetOff, ForgetFollow} {
		cfg := Config{K: 3, BlockSize: 64, MaxFeatures: 1024, Kernel: kernelG(1.5), Seed: 3, Forget: forget, Workers: 1}
		a, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		u, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for s := range steps {
			batch := x[s%40*b*d : (s%40+1)*b*d]
			held := x[(s+1)%40*b*d:][:16*d] // following's scouts start on held-out rows
			for _, l := range []*KPCA{a, u} {
				if _, err := l.Assess(held, 16); err != nil {
					t.Fatal(err)
				}
			}
			if err := a.Update(batch, b); err != nil {
				t.Fatal(err)
			}
			if err := u.Update(batch, b); err != nil {
				t.Fatal(err)
			}
		}
		var chBefore, shBefore []float64
		if forget == ForgetFollow {
			if a.fol.ch == nil || a.fol.shadow == nil {
				t.Fatalf("follow: no scouts after %d steps", steps)
			}
			chBefore, shBefore = slices.Clone(a.fol.ch.Snapshot().Coef[0]), slices.Clone(a.fol.shadow.Snapshot().Coef[0])
		}
		a0 := slices.Clone(a.Snapshot().Coef[0])
		again := x[3*b*d : 4*b*d] // a batch both learned
		if err := a.Revisit(again, b); err != nil {
			t.Fatal(err)
		}
		if err := u.update(again, b); err != nil { // the model's step of Update
			t.Fatal(err)
		}
		if a.Step() != steps+1 || u.Step() != steps+1 {
			t.Errorf("%s: steps %d and %d, want %d", forget, a.Step(), u.Step(), steps+1)
		}
		if a.SamplesSeen() != steps*b || u.SamplesSeen() != (steps+1)*b {
			t.Errorf("%s: samples %d (revisited) and %d (updated), want %d and %d", forget, a.SamplesSeen(), u.SamplesSeen(), steps*b, (steps+1)*b)
		}
		sa, su := a.Snapshot(), u.Snapshot()
		if !slices.Equal(sa.Coef[0], su.Coef[0]) || !slices.Equal(sa.State, su.State) || sa.Header.Features() != su.Header.Features() {
			t.Errorf("%s: the revisited model differs from the model updated on the same batch", forget)
		}
		if forget == ForgetOff && slices.Equal(sa.Coef[0], a0) {
			t.Errorf("the revisit changed nothing")
		}
		if forget == ForgetFollow {
			if !slices.Equal(a.fol.ch.Snapshot().Coef[0], chBefore) || !slices.Equal(a.fol.shadow.Snapshot().Coef[0], shBefore) {
				t.Errorf("follow: a scout learned the revisited rows")
			}
		}
		a.Close()
		u.Close()
	}
	// Before the budget is full a revisit adds no block: the model grows
	// with the stream's steps.
	l, err := New(Config{K: 3, BlockSize: 64, MaxFeatures: 1024, Kernel: kernelG(1.5), Seed: 3, Forget: ForgetOff, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for s := range 5 {
		if err := l.Update(x[s*b*d:(s+1)*b*d], b); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Revisit(x[:b*d], b); err != nil {
		t.Fatal(err)
	}
	if l.Features() != 5*64 || l.Step() != 6 {
		t.Errorf("a revisit at 5 of 16 blocks: %d features after %d steps, want 320 after 6", l.Features(), l.Step())
	}
	if err := l.Update(x[5*b*d:6*b*d], b); err != nil {
		t.Fatal(err)
	}
	if l.Features() != 6*64 {
		t.Errorf("the next update after a revisit: %d features, want 384 (growth goes on)", l.Features())
	}
}

// TestReplayWeighsEveryRowAlike checks the window's promise (Window):
// with revisits paced at ρ per learned row, every row that lives its
// whole time in the window is revisited ρ times, give or take one (a
// row a sweep), and no draw returns a row older than the window. Drawn
// with replacement (the window before sweeps) the counts are
// Poisson(ρ): a standard deviation of √3 = 1.73 and rows revisited 0 or
// 8 times, which re-weigh the stream. Rows are numbered by their place
// in the stream; the draws are deterministic by seed.
func TestReplayWeighsEveryRowAlike(t *testing.T) {
	const b, w, batches, rho = 64, 512, 400, 3.0
	r := NewWindow(rho, w*16, 9) // one value and its place in a sweep a row: w rows
	counts := make([]float64, batches*b)
	x := make([]float64, b)
	for s := range batches {
		for i := range x {
			x[i] = float64(s*b + i)
		}
		r.Add(x, nil, b)
		for r.Due(b) {
			got, _ := r.Draw(b)
			for _, v := range got {
				if int(v) < (s+1)*b-w || int(v) > (s+1)*b-1 {
					t.Fatalf("batch %d: drew row %v, outside the window of the last %d rows", s, v, w)
				}
				counts[int(v)]++
			}
		}
	}
	// Rows that lived their whole time in the window: after the first w
	// rows (drawn from a smaller window) and before the last w.
	mid := counts[w : batches*b-w]
	mean, sq := 0.0, 0.0
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, c := range mid {
		mean += c
		lo, hi = math.Min(lo, c), math.Max(hi, c)
	}
	mean /= float64(len(mid))
	for _, c := range mid {
		sq += (c - mean) * (c - mean)
	}
	sd := math.Sqrt(sq / float64(len(mid)-1))
	if math.Abs(mean-rho) > 0.06 {
		t.Errorf("rows drawn %.3f times on average, want %.1f", mean, rho)
	}
	if sd > 0.8 || lo < rho-1 || hi > rho+1 {
		t.Errorf("draws per row: standard deviation %.2f, from %v to %v; want a row a sweep: ρ = %v give or take one", sd, lo, hi, rho)
	}
	r.Clear()
	if r.Due(b) {
		t.Error("an emptied window still has revisits due")
	}
}

// TestReplaySweepsTheWindow: a full window that takes no rows is
// revisited in sweeps — each of its rows once before any twice — in an
// order that differs from sweep to sweep and with the seed; after Clear
// only rows added since are drawn.
func TestReplaySweepsTheWindow(t *testing.T) {
	const b, w = 32, 256
	order := func(seed uint64) [][]float64 {
		r := NewWindow(3, w*16, seed)
		x := make([]float64, w)
		for i := range x {
			x[i] = float64(i)
		}
		r.Add(x, nil, w)
		var sweeps [][]float64
		for range 3 {
			var seen []float64
			for range w / b {
				if !r.Due(b) {
					t.Fatalf("seed %d: no revisit due after %d of %d rows", seed, len(sweeps)*w+len(seen), 3*w)
				}
				got, _ := r.Draw(b)
				seen = append(seen, got...)
			}
			sorted := slices.Sorted(slices.Values(seen))
			for i, v := range sorted {
				if v != float64(i) {
					t.Fatalf("seed %d, sweep %d: rows %v…, want each of the %d rows once", seed, len(sweeps), sorted[:min(len(sorted), 8)], w)
				}
			}
			sweeps = append(sweeps, seen)
		}
		if r.Due(b) {
			t.Errorf("seed %d: revisits due past ρ = 3 per learned row", seed)
		}
		r.Clear()
		r.Add([]float64{1000, 1001}, nil, 2)
		got, _ := r.Draw(4)
		for _, v := range got {
			if v != 1000 && v != 1001 {
				t.Errorf("seed %d: after Clear drew %v, want only the rows added since", seed, v)
			}
		}
		return sweeps
	}
	a, c := order(1), order(2)
	if slices.Equal(a[0], a[1]) || slices.Equal(a[0], c[0]) {
		t.Error("the sweeps' order repeats from sweep to sweep or across seeds")
	}
	if again := order(1); !slices.Equal(again[2], a[2]) {
		t.Error("the same seed gave another order")
	}
}
