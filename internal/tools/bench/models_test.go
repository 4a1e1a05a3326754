package bench

import (
	"math"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/streamkpca/streamkpca/online"
)

// TestModelClusterByHand: the modelled step of n instances is one
// instance's step plus the rounds' latency plus the busiest link's bytes
// (a part of P = 8·features·k bytes; through one server a reduce-scatter
// carries 2(n−1)P in 3 rounds, an all-gather n(n−1)P in 2), worked out
// here for one row: T = 0.1 s, 1,000 features, k = 10 (P = 80,000 B),
// batch 512, a 1 GB/s link and 0.5 ms rounds.
func TestModelClusterByHand(t *testing.T) {
	rows := []ClusterRow{{D: 64, Members: 0, Features: 1000, K: 10, Batch: 512, StepSec: 0.1},
		{D: 64, Members: 2, Features: 1000, K: 10, Batch: 512, StepSec: 0.2}} // a measured group: not a base
	got := ModelCluster(rows, 4, 1e9, 5e-4)
	want := map[string]map[int]float64{ // step seconds
		"reduce-scatter": {1: 0.1, 2: 0.1 + 3*5e-4 + 2*1*80000/1e9, 4: 0.1 + 3*5e-4 + 2*3*80000/1e9},
		"all-gather":     {1: 0.1, 2: 0.1 + 2*5e-4 + 2*1*80000/1e9, 4: 0.1 + 2*5e-4 + 4*3*80000/1e9},
	}
	if len(got) != 6 {
		t.Fatalf("%d rows, want 3 group sizes (1, 2, 4) × 2 exchanges: %+v", len(got), got)
	}
	for _, r := range got {
		w, ok := want[r.Exchange][r.Instances]
		if !ok || math.Abs(r.StepSec-w) > 1e-15 || math.Abs(r.Efficiency-0.1/w) > 1e-12 ||
			math.Abs(r.PointsPerSec-float64(r.Instances*512)/w) > 1e-9 || r.D != 64 {
			t.Errorf("%+v: want a step of %v s", r, w)
		}
	}
}

// TestRotationIsOrthogonal: the drift cases' changes are rotations:
// none before T, the switch's Q (QᵀQ = I) at once after it, and on a ramp
// a turn in the planes (0,1), (2,3), … that reaches a quarter at 2T and
// stays there (so coordinate 0 goes to coordinate 1).
func TestRotationIsOrthogonal(t *testing.T) {
	const T = 100
	sw := newRotation(DriftConfig{Case: "switch", Points: T, Seed: 1}, 4)
	ramp := newRotation(DriftConfig{Case: "ramp", Points: T, Seed: 1}, 4)
	if sw.at(T-1) != nil || ramp.at(T-1) != nil || newRotation(DriftConfig{Case: "stationary", Points: T}, 4).at(5*T) != nil {
		t.Error("a rotation before T, or on the stationary case")
	}
	var qtq mat.Dense
	qtq.Mul(sw.at(T).T(), sw.at(T))
	if !mat.EqualApprox(&qtq, identity(4), 1e-13) {
		t.Errorf("QᵀQ = %v", mat.Formatted(&qtq))
	}
	for n, angle := range map[int]float64{T: 0, T + T/2: math.Pi / 4, 2 * T: math.Pi / 2, 3 * T: math.Pi / 2} {
		r := ramp.at(n)
		if math.Abs(r.At(0, 0)-math.Cos(angle)) > 1e-15 || math.Abs(r.At(1, 0)-math.Sin(angle)) > 1e-15 || math.Abs(r.At(3, 2)-math.Sin(angle)) > 1e-15 {
			t.Errorf("ramp at %d: %v, want a turn of %v", n, mat.Formatted(r), angle)
		}
	}
	x := []float64{1, 0, 0, 0, 0, 0, 1, 0}
	ramp.apply(ramp.at(2*T), x, 2)
	if math.Abs(x[1]-1) > 1e-15 || math.Abs(x[0]) > 1e-15 || math.Abs(x[7]-1) > 1e-15 {
		t.Errorf("a quarter turn of e0 and e2: %v, want e1 and e3", x)
	}
}

// TestHoldoutKeepsTheHeldOutRows: holdout keeps exactly the rows
// online.HeldOut names, in order, whole.
func TestHoldoutKeepsTheHeldOutRows(t *testing.T) {
	const rows, d, every = 200, 3, 16
	x := make([]float64, rows*d)
	for i := range x {
		x[i] = float64(i)
	}
	got := holdout(nil, x, rows, d, 1000, every)
	var want []float64
	for i := range rows {
		if online.HeldOut(1000+uint64(i), every) {
			want = append(want, float64(i*d), float64(i*d+1), float64(i*d+2))
		}
	}
	if len(want) == 0 || len(got) != len(want) {
		t.Fatalf("%d values held out, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("value %d: %v, want %v", i, got[i], want[i])
		}
	}
}

func identity(n int) *mat.Dense {
	m := mat.NewDense(n, n, nil)
	for i := range n {
		m.Set(i, i, 1)
	}
	return m
}
