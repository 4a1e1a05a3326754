package bench

import (
	"errors"
	"math"
	"slices"
	"testing"
	"time"
)

// fakeDrift is a driftLearner that records what driveDrift asks of it:
// its error at a checkpoint is the stream position, its learning time a
// millisecond a step, and it reports a change where told.
type fakeDrift struct {
	starts []int // stream positions at which a learner was started
	steps  []int // the batch sizes asked for
	at     int   // the stream position after the steps so far
	change map[int]bool
	fail   error
	closed int
}

func (f *fakeDrift) start() error {
	f.starts = append(f.starts, f.at)
	return nil
}

func (f *fakeDrift) step(n, b int) (bool, time.Duration, error) {
	if n != f.at {
		return false, 0, errors.New("a step out of order")
	}
	f.steps = append(f.steps, b)
	f.at += b
	return f.change[n], time.Millisecond, f.fail
}

func (f *fakeDrift) point(n int) DriftPoint {
	return DriftPoint{Error: float64(n), SumK: float64(2 * n)}
}
func (f *fakeDrift) switches() uint64 { return 7 }
func (f *fakeDrift) close()           { f.closed++ }

// TestDriveDriftBookkeeping: over a stream of T = 2,000 (a switch: 2T
// points; a ramp: 3T) in batches of 64, no batch straddles a mark (T −
// T/20, T, the change's end: T or 2T on a ramp, end + T/5, end + T, the
// stream's end)
// and none is larger than 64; driveDrift measures at every mark and at
// every multiple of T/20 = 100 a batch ends on, and nowhere else; Before,
// At20 and At100 are the checkpoints at T − T/20, end + T/5 and end + T; a restarted run starts a new learner at end,
// once; the learning time is the steps' own; the changes are where they
// were reported. Before, a restarted run with T not a multiple of the
// batch never restarted, At20 and At100 stayed 0 and Before was 1,600.
func TestDriveDriftBookkeeping(t *testing.T) {
	const T = 2000
	for _, c := range []struct {
		run    string
		ramp   bool
		starts []int
	}{{"defaults", false, []int{0}}, {"restarted", false, []int{0, T}}, {"restarted", true, []int{0, 2 * T}}} {
		f := &fakeDrift{change: map[int]bool{64 * 20: true}}
		out, err := driveDrift(t.Context(), DriftConfig{Points: T, Batch: 64}, c.run, c.ramp, f)
		if err != nil {
			t.Fatal(err)
		}
		total, end := 2*T, T
		if c.ramp {
			total, end = 3*T, 2*T
		}
		marks := []int{T - 100, T, end, end + T/5, end + T, total}
		n := 0
		for _, b := range f.steps {
			for _, m := range marks {
				if n < m && n+b > m || b > 64 || b < 1 {
					t.Fatalf("%s ramp %v: a batch of %d from %d (mark %d)", c.run, c.ramp, b, n, m)
				}
			}
			n += b
		}
		got := map[int]bool{}
		for _, p := range out.Curve {
			got[p.Points] = true
			if p.Error != float64(p.Points) || p.SumK != float64(2*p.Points) || p.Points%100 != 0 && !slices.Contains(marks, p.Points) {
				t.Errorf("%s: checkpoint %+v", c.run, p)
			}
		}
		for _, m := range marks {
			if !got[m] {
				t.Errorf("%s ramp %v: no checkpoint at the mark %d", c.run, c.ramp, m)
			}
		}
		if !slices.Equal(f.starts, c.starts) || f.closed != 1 || n != total {
			t.Errorf("%s ramp %v: learners started at %v, closed %d times, stream to %d; want %v, 1, %d", c.run, c.ramp, f.starts, f.closed, n, c.starts, total)
		}
		if out.Before != T-100 || out.SumKBefore != 2*(T-100) {
			t.Errorf("%s: before %v (S_k %v), want the checkpoint at %d", c.run, out.Before, out.SumKBefore, T-100)
		}
		if out.At20 != float64(end+T/5) || out.At100 != float64(end+T) || out.SumKAt100 != float64(2*(end+T)) {
			t.Errorf("%s ramp %v: at +20%% %v, at +100%% %v; want %d and %d", c.run, c.ramp, out.At20, out.At100, end+T/5, end+T)
		}
		if !slices.Equal(out.Detected, []int{64 * 20}) || out.Switches != 7 || out.Name != c.run {
			t.Errorf("%s: detected %v, %d switches, name %q", c.run, out.Detected, out.Switches, out.Name)
		}
		if last := out.Curve[len(out.Curve)-1]; math.Abs(last.Seconds-float64(len(f.steps))*1e-3) > 1e-12 {
			t.Errorf("%s: %v s of learning after %d steps of 1 ms", c.run, last.Seconds, len(f.steps))
		}
	}
	f := &fakeDrift{fail: errors.New("boom")}
	if _, err := driveDrift(t.Context(), DriftConfig{Points: T, Batch: 64}, "defaults", false, f); err == nil || err.Error() != "boom" || f.closed != 1 {
		t.Errorf("a failing step: %v, closed %d times; want its error, and the learner closed", err, f.closed)
	}
}
