package pipeline

import (
	"encoding/binary"
	"os"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamkpca/streamkpca/ingest"
	"github.com/streamkpca/streamkpca/snapshot"
)

// Defect: a service whose snapshot.dir held snapshots of a newer format
// than it reads (a rollback to an older release) skipped them as invalid
// and started a new model there; the store's retention, which keeps the
// highest versions, then deleted either the new model's snapshots or,
// once its steps passed theirs, the newer release's model. Now the
// service refuses to start, naming the file and what to do; a corrupt
// file alone is still passed over.
func TestNewerFormatInSnapshotDirRefusesToStart(t *testing.T) {
	c := testConfig(t)
	c.Kafka.Dim = 1
	store := &snapshot.Store{Dir: c.Snapshot.Dir, Model: c.Model}
	if err := os.MkdirAll(c.Snapshot.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	newer := make([]byte, 64)
	copy(newer, snapshot.Magic)
	binary.LittleEndian.PutUint32(newer[8:], snapshot.Version+1)
	if err := os.WriteFile(store.Path(1000), newer, 0o644); err != nil {
		t.Fatal(err)
	}
	opts := Options{Config: c, Registry: prometheus.NewRegistry(), Source: ingest.NewMemSource("v", 64), DeadLetters: &ingest.MemDeadLetter{}}
	p, err := New(opts)
	if err == nil {
		p.Close()
		t.Fatal("started a new model beside a snapshot of a newer format")
	}
	if !strings.Contains(err.Error(), store.Path(1000)) || !strings.Contains(err.Error(), "newer") {
		t.Errorf("error %q: want the file named and a newer release asked for", err)
	}
	// A corrupt file (not a newer format) is passed over: a new model
	// starts.
	if err := os.WriteFile(store.Path(1000), []byte("SKPCASNP-truncated"), 0o644); err != nil {
		t.Fatal(err)
	}
	opts.Registry = prometheus.NewRegistry()
	p, err = New(opts)
	if err != nil {
		t.Fatalf("a corrupt file alone: %v", err)
	}
	p.Close()
}
