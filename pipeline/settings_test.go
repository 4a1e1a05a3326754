package pipeline

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamkpca/streamkpca/ingest"
)

// TestChangedSettingsRefuseOrReset: a service restarted on a
// snapshot.dir whose model was learned with other settings (here
// learner.k 2 → 3 and learner.seed 1 → 5) refuses to start, naming each
// setting with both values and learner.reset; with learner.reset it
// starts a new model (a new incarnation) and moves the stored snapshots
// to a subdirectory, where the store's retention cannot prune them.
// Before, the old model was served with no word (only the algorithm,
// precision and compute mode were compared).
func TestChangedSettingsRefuseOrReset(t *testing.T) {
	c := testConfig(t)
	src := ingest.NewMemSource("v", 64)
	h := startLoop(t, c, src, &ingest.MemDeadLetter{})
	src.Produce(0, points(512, 4, 1)...)
	h.waitConsumed(512)
	old := h.stop()

	c2 := c
	c2.Learner.K, c2.Learner.Seed = 3, 5
	opt := Options{Config: c2, Registry: prometheus.NewRegistry(), Source: ingest.NewMemSource("v", 64), DeadLetters: &ingest.MemDeadLetter{}}
	p, err := New(opt)
	if err == nil {
		p.Close()
		t.Fatal("a restart with learner.k and learner.seed changed started: the stored model would be served as if nothing changed")
	}
	for _, want := range []string{"learner.k is 3 in the configuration but 2", "learner.seed is 5 in the configuration but 1", "learner.reset"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", err, want)
		}
	}

	c2.Learner.Reset = true
	opt.Config, opt.Registry = c2, prometheus.NewRegistry()
	p, err = New(opt)
	if err != nil {
		t.Fatalf("learner.reset: %v", err)
	}
	defer p.Close()
	if st := p.Status(); st.Version != 0 || st.Samples != 0 {
		t.Errorf("after learner.reset: version %d, %d samples; want a new model", st.Version, st.Samples)
	}
	moved, _ := filepath.Glob(filepath.Join(c.Snapshot.Dir, "replaced-*", "*.skpca"))
	left, _ := filepath.Glob(filepath.Join(c.Snapshot.Dir, "*.skpca"))
	if len(moved) == 0 || len(left) != 0 {
		t.Errorf("after learner.reset: %d snapshots moved aside, %d left in snapshot.dir; want all moved", len(moved), len(left))
	}
	if _, err := os.Stat(moved[len(moved)-1]); err != nil || old.Header.Incarnation == "" {
		t.Errorf("moved snapshot unreadable (%v) or the old model had no incarnation", err)
	}
}
