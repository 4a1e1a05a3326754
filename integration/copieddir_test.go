package integration

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a child's output, safe to read while it writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestCopiedSnapshotDirProcess (issue 58, item 2, as processes): a real
// `streamkpca run` learns and stops; its snapshot.dir is copied (a
// restored backup, a cloned volume) and a second process starts on the
// copy while the first runs again on the original. The copy carries the
// first's incarnation, so both once held the model name's lease and
// published (split brain). Now the copy is told apart by its directory's
// identity: it stands by, says its directory was copied, and only the
// original publishes.
func TestCopiedSnapshotDirProcess(t *testing.T) {
	longOnly(t)
	s := startStack(t, map[string]int32{"copied": 1})
	writeSine(t, s.Brokers(), "copied", 3000, 0)
	const learner = "k: 3, bandwidth: 1, max_features: 2048, linger: 300ms"
	a, dirA := soloChild(t, s, "copied", learner)
	a.start()
	waitFor(t, 2*time.Minute, "the first process learning", func() bool {
		return scrape(a.port, "streamkpca_samples_learned_total") >= 3000 && scrape(a.port, "streamkpca_published_version") > 0
	})
	if err := a.stop(); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
	dirB := t.TempDir()
	if out, err := exec.Command("cp", "-a", filepath.Join(dirA, "snapshots"), filepath.Join(dirB, "snapshots")).CombinedOutput(); err != nil {
		t.Fatalf("copy: %v %s", err, out)
	}
	a.start()
	waitFor(t, time.Minute, "the first process owning the model name again", func() bool { return scrape(a.port, "streamkpca_lease_held") == 1 })
	var logB syncBuffer
	b := startChild(t, buildBinary(t), dirB, func(port int) string {
		return fmt.Sprintf(`model: copied
kafka: {brokers: [%[1]q], topic: copied, group: copied-b, session_timeout: 1s, rebalance_timeout: 2s}
learner: {%[2]s}
snapshot: {dir: %[3]q, every_batches: 8, every: 1s}
nats: {url: %[4]q}
http: {addr: "127.0.0.1:%[5]d"}
log: {level: info, format: json}
`, s.Brokers()[0], learner, filepath.Join(dirB, "snapshots"), s.NATSURL(), port)
	}, &logB)
	waitFor(t, time.Minute, "the copy running", func() bool { return scrape(b.port, "streamkpca_lease_held") >= 0 })
	writeSine(t, s.Brokers(), "copied", 2000, 3000) // both learn: the copy reads in its own group
	time.Sleep(5 * time.Second)
	if held := scrape(b.port, "streamkpca_lease_held"); held != 0 {
		t.Errorf("the process on the copied directory holds the lease (%v): split brain", held)
	}
	if held := scrape(a.port, "streamkpca_lease_held"); held != 1 {
		t.Errorf("the original lost the lease to its copy (%v)", held)
	}
	if pub := scrape(b.port, "streamkpca_publishes_total"); pub > 0 {
		t.Errorf("the copy published %v versions", pub)
	}
	if !strings.Contains(logB.String(), "copied") {
		t.Errorf("the copy's log does not say its directory was copied:\n%s", tail(logB.String(), 2000))
	}
	b.stop()
	a.stop()
}
