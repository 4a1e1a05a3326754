package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/streamkpca/streamkpca/snapshot"
)

// TestServiceModes runs the service with learner.precision: float32 and
// with learner.compute: blas. The snapshot records the mode, the model
// meets the hermite bound of the default mode's tests, and a restart
// whose config asks for the default keeps the snapshot's mode (the model
// is defined by its snapshot) and goes on learning from its offsets.
func TestServiceModes(t *testing.T) {
	longOnly(t)
	n := int64(40_000 / raceScale)
	for _, mode := range []struct{ precision, compute string }{{"float32", "exact"}, {"float64", "blas"}} {
		t.Run(mode.precision+"-"+mode.compute, func(t *testing.T) {
			topic := fmt.Sprintf("modes-%s-%s", mode.precision, mode.compute)
			s := startStack(t, map[string]int32{topic: 2})
			produceHermite(t, s, topic, int(n), 3)
			cfg := config(s, topic, t.TempDir())
			cfg.Learner.Precision, cfg.Learner.Compute = mode.precision, mode.compute
			r := start(t, cfg)
			waitFor(t, 3*time.Minute, "half the stream learned", func() bool { return r.p.Status().Samples >= uint64(n/2) })
			r.graceful(t)

			cfg.Learner.Precision, cfg.Learner.Compute = "float64", "exact"
			warned := &counter{sub: "keeps the precision and compute mode"}
			r = startWithLog(t, cfg, warned)
			waitFor(t, 3*time.Minute, "the whole stream learned", func() bool { return r.p.Status().Samples >= uint64(n) })
			r.graceful(t)
			if warned.n.Load() != 1 {
				t.Errorf("the restart logged the mode warning %d times, want once", warned.n.Load())
			}

			snap, _, err := (&snapshot.Store{Dir: cfg.Snapshot.Dir, Model: cfg.Model}).Latest()
			if err != nil {
				t.Fatal(err)
			}
			v := snap.Header.Views[0]
			if v.Float32() != (mode.precision == "float32") || v.BLAS() != (mode.compute == "blas") {
				t.Errorf("snapshot records precision %q compute %q, want the first run's %s/%s", v.Precision, v.Compute, mode.precision, mode.compute)
			}
			if snap.Header.SamplesSeen != uint64(n) {
				t.Errorf("samples_seen %d, want exactly %d", snap.Header.SamplesSeen, n)
			}
			m, err := snapshot.NewModel(snap, snapshot.ModelOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if e := hermiteError(t, m); e > 1e-2 {
				t.Errorf("subspace error %.3g > 1e-2", e)
			}
		})
	}
}
