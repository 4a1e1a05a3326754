package bench

import (
	"context"
	"math"
	"testing"
)

// RunHermite learns the hermite stream: scored against the closed-form
// eigenfunctions its error falls well below a random subspace's (1 for
// k = 3 by the measure's definition) within 20,000 points, at
// checkpoints 10^⅛ apart from 1,000 points, the last one at the end.
func TestRunHermiteLearnsTheClosedForm(t *testing.T) {
	var seen []CurvePoint
	res, err := RunHermite(context.Background(), HermiteConfig{Points: 20_000, Progress: func(c CurvePoint, total int) {
		if total != 20_000 {
			t.Errorf("progress total %d, want 20,000", total)
		}
		seen = append(seen, c)
	}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Dims != 1 || res.K != 3 || res.Batch != 512 || res.Block != 128 || res.MaxFeatures != 65536 {
		t.Errorf("defaults: dims %d k %d batch %d block %d max features %d; want 1, 3, 512, 128, 65,536",
			res.Dims, res.K, res.Batch, res.Block, res.MaxFeatures)
	}
	if len(seen) != len(res.Curve) {
		t.Errorf("progress called %d times for %d checkpoints", len(seen), len(res.Curve))
	}
	// 1,000·10^(j/8) rounded up to the next batch end: 1,024, 1,536,
	// 2,048, …; the next checkpoint past each is at least 10^⅛ further.
	if res.Curve[0].Points != 1024 {
		t.Errorf("first checkpoint at %d points, want 1,024 (the first batch end past 1,000)", res.Curve[0].Points)
	}
	for i := 1; i < len(res.Curve)-1; i++ {
		if r := float64(res.Curve[i].Points) / 1000; math.Log10(r)*8 < float64(i)-1e-9 {
			t.Errorf("checkpoint %d at %d points, before 1,000·10^(%d/8)", i, res.Curve[i].Points, i)
		}
	}
	last := res.Curve[len(res.Curve)-1]
	if last.Points != 20_000 || res.Points != 20_000 || res.SubspaceError != last.Error || res.Features != last.Features {
		t.Errorf("the result (%d points, error %v, %d features) is not the last checkpoint %+v", res.Points, res.SubspaceError, res.Features, last)
	}
	t.Logf("subspace error %.3g after 1,024 points, %.3g after 20,000", res.Curve[0].Error, res.SubspaceError)
	if !(res.SubspaceError < 1e-3) || !(res.SubspaceError < res.Curve[0].Error/4) {
		t.Errorf("subspace error %v after 20,000 points (%v after 1,024); want below 1e-3 and a quarter of the first", res.SubspaceError, res.Curve[0].Error)
	}
	if !(res.PointsPerSecond > 0) || math.Abs(res.PointsPerSecond*res.Seconds-20_000) > 1e-6*20_000 {
		t.Errorf("%v points a second over %v s, want 20,000 points in all", res.PointsPerSecond, res.Seconds)
	}
}

// Dimensions other than the two hermite streams are refused, and a
// cancelled context ends the run with its error.
func TestRunHermiteRefuses(t *testing.T) {
	if _, err := RunHermite(context.Background(), HermiteConfig{Dims: 2, Points: 1000}); err == nil {
		t.Error("dims 2 accepted")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := RunHermite(ctx, HermiteConfig{Points: 1000}); err != context.Canceled {
		t.Errorf("a cancelled run returned %v, want context.Canceled", err)
	}
}

// RunThroughput's rows: the step's flop count 2·b·features·(d+k) over
// its median time, the points a second b over it, and the ratio of the
// step's rate to the GEMMs' (the same flops), for each dimension asked.
func TestRunThroughputRows(t *testing.T) {
	rows, err := RunThroughput(ThroughputConfig{Dims: []int{3, 8}, Features: 1024, K: 2, Batch: 64, Block: 128, Runs: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].D != 3 || rows[1].D != 8 {
		t.Fatalf("rows for %v, want d = 3 and 8", rows)
	}
	for _, r := range rows {
		if r.Features != 1024 || r.K != 2 || r.Batch != 64 || r.Block != 128 || r.Precision != "float64" || r.Compute != "exact" || r.Frequencies != "auto" {
			t.Errorf("row %+v: not the shape asked for, with the defaults", r)
		}
		flops := 2.0 * 64 * 1024 * float64(r.D+2)
		if rel(r.StepGFLOPS, flops/r.StepMedianSec/1e9) > 1e-12 || rel(r.GEMMGFLOPS, flops/r.GEMMMedianSec/1e9) > 1e-12 {
			t.Errorf("d = %d: %v and %v GFLOP/s, want 2·b·features·(d+k) = %v flops over %v s and %v s", r.D, r.StepGFLOPS, r.GEMMGFLOPS, flops, r.StepMedianSec, r.GEMMMedianSec)
		}
		if rel(r.PointsPerSecond, 64/r.StepMedianSec) > 1e-12 || rel(r.Ratio, r.GEMMMedianSec/r.StepMedianSec) > 1e-12 {
			t.Errorf("d = %d: %v points/s and ratio %v, want b over the step's median and the GEMMs' time over the step's", r.D, r.PointsPerSecond, r.Ratio)
		}
	}
}

func rel(a, b float64) float64 { return math.Abs(a-b) / math.Abs(b) }
