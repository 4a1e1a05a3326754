package integration

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/streamkpca/streamkpca/snapshot"
)

// TestRebalance: instance A learns a 4-partition topic; instance B joins
// the same group (taking partitions, learning them into its own model) and
// later leaves (A gets them back). A resumes each partition from its own
// consumed offset, not from B's commits, and drops redelivered messages by
// offset, so A's model holds every message exactly once. (Each instance
// learns its own model: one model per consumer group, see docs/operations.md.)
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
	// Learned or shed (a busy machine makes the loop shed: counts that
	// include the shed messages are what the test controls).
	waitFor(t, 3*time.Minute, "A covering every message", func() bool { st := a.p.Status(); return st.Samples+st.Shed >= 2*n })
	a.graceful(t)
	snap, _, err := (&snapshot.Store{Dir: cfgA.Snapshot.Dir, Model: "hermite"}).Latest()
	if err != nil {
		t.Fatal(err)
	}
	shed := snap.Header.Diagnostics.Shed
	t.Logf("A: samples_seen %d, shed %d; B learned %d of them into its own model; A dropped %v redelivered messages",
		snap.Header.SamplesSeen, shed, b.p.Status().Samples, metric(a, "streamkpca_duplicate_messages_total"))
	if snap.Header.SamplesSeen+shed != 2*n {
		t.Errorf("A's samples_seen %d + shed %d = %d, want exactly %d", snap.Header.SamplesSeen, shed, snap.Header.SamplesSeen+shed, 2*n)
	}
}

// TestBackpressure: a stream far ahead of a slow learner (300,000
// messages produced before a child process with 32,768 features starts)
// leaves a large consumer lag, yet what waits in memory stays bounded by
// the configuration, not by the lag:
//   - the fetched-but-unlearned bytes (streamkpca_queue_bytes, the queue's
//     own count) never exceed kafka.queue_bytes, here 64 KiB, about 3,000
//     of these messages, well under queue_size;
//   - the live heap does not grow with the lag: once the feature budget is
//     full (64 steps, 32,768 samples), the collector's heap target
//     (go_memstats_next_gc_bytes, twice the heap live after the last
//     collection) while the next 60,000 messages are learned is within
//     10% (plus 16 MiB) of what it was over the 20,000 before;
//   - resident memory stays within that target plus 64 MiB for the
//     runtime and the binary (between collections the heap fills with
//     parsing's garbage up to the target, so resident memory climbs
//     towards it and stays: that climb is the collector's pacing, not
//     growth).
//
// Each compares the process with its own configuration and with itself,
// so the test holds on any machine; the only clock is a generous time
// limit for learning 120,000 messages. The learner runs without a
// challenger (forget: detect): a challenger is restarted every 24 steps
// and its kept batch features (up to 16 MiB here, bounded by its
// eighth of the budget, not by the lag) come and go with it, which moved
// the heap target between the two windows by about as much as the
// test's margin (60 → 79–82 MiB against a bound of 84, on the code
// before and after the challenger went into snapshots; a busy CI run
// crossed it at 85). Nor does it learn columns beyond k (oversample:
// -1): with them the heap target's spread between runs (69–100 MiB)
// crossed the margin in one CI run of three.
func TestBackpressure(t *testing.T) {
	longOnly(t)
	s := startStack(t, map[string]int32{"bp": 4})
	const n, queueBytes = 300_000, 64 << 10
	produceHermite(t, s, "bp", n, 1)
	bin := buildBinary(t)
	dir := t.TempDir()
	c := startChild(t, bin, dir, func(port int) string {
		return fmt.Sprintf(`model: bp
kafka: {brokers: [%q], topic: bp, group: bp, queue_size: 65536, queue_bytes: %d}
learner: {k: 3, oversample: -1, bandwidth: 1, max_features: 32768, workers: 1, forget: detect}
snapshot: {dir: %q}
nats: {disabled: true}
http: {addr: "127.0.0.1:%d"}
log: {level: warn, format: json}
`, s.Brokers()[0], queueBytes, filepath.Join(dir, "snapshots"), port)
	}, nil)
	port := c.port
	var early, late, lateRSS, maxQueue, maxLag float64
	deadline := time.Now().Add(5 * time.Minute) // a limit for a stuck child, not a measurement
	learned := 0.0
	for learned < 120_000 {
		if time.Now().After(deadline) {
			t.Fatalf("learned %.0f of 120,000 messages in 5 minutes", learned)
		}
		target := scrape(port, "go_memstats_next_gc_bytes")
		switch {
		case learned >= 60_000:
			late = max(late, target)
			lateRSS = max(lateRSS, scrape(port, "process_resident_memory_bytes"))
		case learned >= 40_000:
			early = max(early, target)
		}
		maxQueue = max(maxQueue, scrape(port, "streamkpca_queue_bytes"))
		maxLag = max(maxLag, scrape(port, "streamkpca_consumer_lag"))
		learned = scrape(port, "streamkpca_samples_learned_total")
		time.Sleep(100 * time.Millisecond) // sampling interval, not synchronisation
	}
	t.Logf("learned %.0f of %d; max consumer lag %.0f; max queued bytes %.0f of %d; heap target %.0f MiB with 40,000–60,000 learned, %.0f MiB after; peak resident memory after %.0f MiB",
		learned, n, maxLag, maxQueue, queueBytes, early/(1<<20), late/(1<<20), lateRSS/(1<<20))
	if maxLag < 150_000 {
		t.Errorf("max lag %.0f: the stream was not far ahead of the learner, the test proves nothing", maxLag)
	}
	if maxQueue <= 0 || maxQueue > queueBytes {
		t.Errorf("queued bytes peaked at %.0f, want within (0, %d]", maxQueue, queueBytes)
	}
	if early <= 0 || late <= 0 || late > 1.1*early+16<<20 {
		t.Errorf("the heap target grew from %.0f MiB to %.0f MiB while the lag stayed above %.0f", early/(1<<20), late/(1<<20), n-learned)
	}
	if lateRSS <= 0 || lateRSS > late+64<<20 {
		t.Errorf("resident memory %.0f MiB, want within the heap target %.0f MiB + 64 MiB", lateRSS/(1<<20), late/(1<<20))
	}
}
