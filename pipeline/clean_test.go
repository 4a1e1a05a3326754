package pipeline

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamkpca/streamkpca/ingest"
)

// TestStartRemovesLeftoverTempFiles: a temporary file a crash left
// mid-write in snapshot.dir (".tmp-*.skpca") is removed when the service
// starts and holds the directory's lock; a finished snapshot file is
// kept. Before, snapshot.Store.Clean had no caller since the lock
// change, and a planted temp file survived every start.
func TestStartRemovesLeftoverTempFiles(t *testing.T) {
	c := testConfig(t)
	tmp := filepath.Join(c.Snapshot.Dir, ".tmp-123456.skpca")
	keep := filepath.Join(c.Snapshot.Dir, "unrelated.txt")
	for _, f := range []string{tmp, keep} {
		if err := os.WriteFile(f, []byte("half a snapshot"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p, err := New(Options{Config: c, Registry: prometheus.NewRegistry(), Source: ingest.NewMemSource("v", 64), DeadLetters: &ingest.MemDeadLetter{}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Errorf("the leftover temp file is still there after start (%v)", err)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Errorf("a file that is not a temp snapshot was removed: %v", err)
	}
}
