package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/streamkpca/streamkpca/snapshot"
)

// TestRebalance: instance A learns a 4-partition topic; instance B joins
// the same group (taking partitions, learning them into its own model) and
// later leaves (A gets them back). A resumes each partition from its own
// consumed offset, not from B's commits, and drops redelivered messages by
// offset, so A's model holds every message exactly once. (Each instance
// learns its own model: one model per consumer group, see README.)
func TestRebalance(t *testing.T) {
	s := startStack(t, map[string]int32{"rb": 4})
	const n = 40_000 / raceScale
	produceHermite(t, s, "rb", n, 1)
	cfgA := config(s, "rb", t.TempDir())
	cfgA.Kafka.SessionTimeout, cfgA.Kafka.RebalanceTimeout = time.Second, 2*time.Second
	a := start(t, cfgA)
	waitFor(t, 2*time.Minute, "A learning", func() bool { return a.p.Status().Samples >= n/4 })
	cfgB := cfgA
	cfgB.Snapshot.Dir = filepath.Join(t.TempDir(), "b")
	cfgB.NATS.Disabled = true
	b := start(t, cfgB)
	waitFor(t, 2*time.Minute, "B taking partitions and learning", func() bool { return b.p.Status().Samples > 0 })
	produceHermite(t, s, "rb", n, 2)
	waitFor(t, 2*time.Minute, "B learning more", func() bool { return b.p.Status().Samples >= 2000 })
	b.graceful(t)
	waitFor(t, 3*time.Minute, "A covering every message", func() bool { return a.p.Status().Samples >= 2*n })
	a.graceful(t)
	snap, _, err := (&snapshot.Store{Dir: cfgA.Snapshot.Dir, Model: "hermite"}).Latest()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("A: samples_seen %d; B learned %d of them into its own model; A dropped %v redelivered messages",
		snap.Header.SamplesSeen, b.p.Status().Samples, metric(a, "streamkpca_duplicate_messages_total"))
	if snap.Header.SamplesSeen != 2*n {
		t.Errorf("A's samples_seen %d, want exactly %d", snap.Header.SamplesSeen, 2*n)
	}
}

// TestBackpressure: a producer far ahead of a slow learner (a child
// process with 32,768 features) leaves a large consumer lag, yet the
// child's resident memory stays bounded: fetched-but-unlearned messages are
// capped by kafka.queue_size.
func TestBackpressure(t *testing.T) {
	s := startStack(t, map[string]int32{"bp": 4})
	const n = 300_000
	produceHermite(t, s, "bp", n, 1)
	bin := buildBinary(t)
	dir := t.TempDir()
	port := freePort(t)
	cfgPath := filepath.Join(dir, "cfg.yaml")
	os.WriteFile(cfgPath, []byte(fmt.Sprintf(`model: bp
kafka: {brokers: [%q], topic: bp, group: bp, queue_size: 1024}
learner: {k: 3, bandwidth: 1, max_features: 32768, workers: 1}
snapshot: {dir: %q}
nats: {disabled: true}
http: {addr: "127.0.0.1:%d"}
log: {level: warn, format: json}
`, s.Brokers()[0], filepath.Join(dir, "snapshots"), port)), 0o644)
	cmd := exec.Command(bin, "run", "--config", cfgPath)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Signal(syscall.SIGKILL); cmd.Wait() }()
	var maxRSS, maxLag float64
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if v := scrape(port, "process_resident_memory_bytes"); v > maxRSS {
			maxRSS = v
		}
		if v := scrape(port, "streamkpca_consumer_lag"); v > maxLag {
			maxLag = v
		}
		if scrape(port, "streamkpca_samples_learned_total") > 100_000 {
			break
		}
		time.Sleep(200 * time.Millisecond) // sampling interval, not synchronisation
	}
	learned := scrape(port, "streamkpca_samples_learned_total")
	t.Logf("learned %.0f of %d; max consumer lag %.0f; max resident memory %.0f MiB", learned, n, maxLag, maxRSS/(1<<20))
	if maxLag < 50_000 {
		t.Errorf("max lag %.0f: the producer was not ahead of the learner, the test proves nothing", maxLag)
	}
	// 300 MiB for the process, its queue and its feature cache, plus the
	// features the subspace solver keeps for one batch between evaluation
	// and gradient: batch × max_features float64s (128 MiB here), counted
	// twice because the collector lets the heap reach twice what is live
	// (GOGC=100). None of it grows with the lag.
	const kept = 512 * 32768 * 8
	if maxRSS <= 0 || maxRSS > 300<<20+2*kept {
		t.Errorf("resident memory %.0f MiB, want ≤ %d MiB with 290k messages waiting", maxRSS/(1<<20), (300<<20+2*kept)>>20)
	}
}
