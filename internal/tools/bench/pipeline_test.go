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
