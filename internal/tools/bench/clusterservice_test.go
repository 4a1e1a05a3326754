package bench

import (
	"context"
	"runtime"
	"testing"
)

// TestClusterServiceRuns: `bench cluster --service` on a tiny model runs
// the service alone and a group of two, both from the shared start model
// (its whole feature budget: not a new model grown from the stream), and
// times steps of the formed group. After 40 steps the model still has the
// whole budget: with the service's default learner.forget a challenger
// replaced it with one of 512 features before the timing ended.
func TestClusterServiceRuns(t *testing.T) {
	// Steps of a few milliseconds: slow enough for the harness to see
	// them (it polls every millisecond), fast enough for a unit test.
	cfg := ClusterConfig{Dims: []int{64}, Members: []int{2}, Features: 1024, K: 2, Batch: 256, Steps: 40, Dir: t.TempDir(), Service: true}
	rows, err := RunCluster(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].Members != 0 || rows[1].Members != 2 {
		t.Fatalf("rows %+v, want the service alone and a group of 2", rows)
	}
	for _, r := range rows {
		if r.Features != cfg.Features || !(r.PointsPerSec > 0) || !(r.StepSec > 0) {
			t.Errorf("members %d: %d features (want the start model's %d), %v points/s, %v s a step", r.Members, r.Features, cfg.Features, r.PointsPerSec, r.StepSec)
		}
		// CPU time per point times points a second is the CPU seconds
		// used a second: above zero, and at most the machine's cores.
		if used := r.PointsPerSec * r.CPUMicros / 1e6; !(used > 0) || used > 1.1*float64(runtime.NumCPU()) {
			t.Errorf("members %d: %v µs CPU a point at %v points/s is %v cores busy on a %d-core machine", r.Members, r.CPUMicros, r.PointsPerSec, used, runtime.NumCPU())
		}
	}
	if rows[0].Speedup != 1 {
		t.Errorf("the service alone has speedup %v, want 1", rows[0].Speedup)
	}
}
