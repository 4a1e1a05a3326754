package bench

import (
	"slices"
	"testing"
)

// TestMedianRow: a d's row is the median of its runs for every rate and
// overhead, wall time and CPU time alike, with each run's overheads kept
// in order.
func TestMedianRow(t *testing.T) {
	runs := []PipelineRow{
		{LearnerPointsPerSec: 100, ServicePointsPerSec: 70, Overhead: 0.3, LearnerCPUMicros: 10, ServiceCPUMicros: 10.5, CPUOverhead: 0.05},
		{LearnerPointsPerSec: 120, ServicePointsPerSec: 90, Overhead: 0.1, LearnerCPUMicros: 12, ServiceCPUMicros: 13.8, CPUOverhead: 0.15},
		{LearnerPointsPerSec: 110, ServicePointsPerSec: 80, Overhead: 0.2, LearnerCPUMicros: 11, ServiceCPUMicros: 12.1, CPUOverhead: 0.10},
	}
	got := medianRow(runs)
	if got.LearnerPointsPerSec != 110 || got.ServicePointsPerSec != 80 || got.Overhead != 0.2 {
		t.Errorf("rates %v, %v and overhead %v, want the medians 110, 80 and 0.2", got.LearnerPointsPerSec, got.ServicePointsPerSec, got.Overhead)
	}
	if got.LearnerCPUMicros != 11 || got.ServiceCPUMicros != 12.1 || got.CPUOverhead != 0.10 {
		t.Errorf("CPU per point %v, %v and overhead %v, want the medians 11, 12.1 and 0.10", got.LearnerCPUMicros, got.ServiceCPUMicros, got.CPUOverhead)
	}
	if !slices.Equal(got.Overheads, []float64{0.3, 0.1, 0.2}) || !slices.Equal(got.CPUOverheads, []float64{0.05, 0.15, 0.10}) {
		t.Errorf("per-run overheads %v and %v, want them in run order", got.Overheads, got.CPUOverheads)
	}
}

// RunPipeline runs the service end to end (here fed from memory; the
// Kafka path is the integration tests') beside the learner alone on the
// same points: both learn every point, the learner alone in exactly
// points/batch steps (the points are a multiple of the batch), and the
// overhead is the learner's rate over the service's, less one.
func TestRunPipelineLearnsEveryPoint(t *testing.T) {
	for _, memory := range []bool{true} {
		rows, err := RunPipeline(t.Context(), PipelineConfig{Dims: []int{4}, Points: 2100, Batch: 256, MaxFeatures: 2048, Runs: 1, Memory: memory, Dir: t.TempDir()})
		if err != nil {
			t.Fatalf("memory %v: %v", memory, err)
		}
		if len(rows) != 1 {
			t.Fatalf("memory %v: %d rows, want one for d = 4", memory, len(rows))
		}
		r := rows[0]
		t.Logf("memory %v: learner %.0f points/s in %d steps, service %.0f in %d, overhead %.2f, start %.2f s", memory,
			r.LearnerPointsPerSec, r.LearnerSteps, r.ServicePointsPerSec, r.ServiceSteps, r.Overhead, r.StartSeconds)
		if r.D != 4 || r.Points != 2048 || r.LearnerSteps != 8 || r.ServiceSteps < 8 {
			t.Errorf("memory %v: d %d, %d points, steps %d and %d; want 4, 2,048 (2,100 rounded down to a batch), 8 and at least 8",
				memory, r.D, r.Points, r.LearnerSteps, r.ServiceSteps)
		}
		if !(r.ServicePointsPerSec > 0) || rel(r.Overhead, r.LearnerPointsPerSec/r.ServicePointsPerSec-1) > 1e-9 || len(r.Overheads) != 1 {
			t.Errorf("memory %v: overhead %v (runs %v), want learner %v over service %v, less one", memory, r.Overhead, r.Overheads, r.LearnerPointsPerSec, r.ServicePointsPerSec)
		}
	}
	if _, err := RunPipeline(t.Context(), PipelineConfig{Dims: []int{4}}); err == nil {
		t.Error("a run without a data directory accepted")
	}
}
