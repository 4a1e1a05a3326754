package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/streamkpca/streamkpca/internal/devstack"
	"github.com/streamkpca/streamkpca/internal/synth"
	"github.com/streamkpca/streamkpca/snapshot"
)

// TestSIGKILLWhileShedding: the service is killed with SIGKILL twice
// while it sheds load (learner.load_shedding: a stream produced at 3,000
// messages/s to a service whose target load, 0.02, the stream alone
// passes), then restarted and stopped gracefully once the stream has
// ended. Exactly once: the stored snapshot's samples seen plus the
// messages it shed are the messages produced, and some were shed.
func TestSIGKILLWhileShedding(t *testing.T) {
	longOnly(t)
	s := startStack(t, map[string]int32{"shedkill": 2})
	const n, rate = 180_000, 3000.0
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	produced := make(chan error, 1)
	go func() {
		produced <- devstack.Produce(ctx, devstack.HermiteJSON(synth.Hermite1D(), 7),
			devstack.ProduceOptions{Brokers: s.Brokers(), Topic: "shedkill", N: n, Rate: rate})
	}()
	c, dir := soloChild(t, s, "shedkill", "k: 3, bandwidth: 1, max_features: 4096, linger: 300ms, target_load: 0.02")
	for i := range 2 {
		c.start()
		waitFor(t, 50*time.Second, fmt.Sprintf("kill %d: the child shedding load", i+1), func() bool {
			return scrape(c.port, "streamkpca_messages_shed_total") > 0 && scrape(c.port, "streamkpca_learned_fraction") < 1
		})
		time.Sleep(time.Duration(700*(i+1)) * time.Millisecond) // mid-batch, mid-snapshot: anywhere
		c.kill()
	}
	c.start()
	select {
	case err := <-produced:
		if err != nil {
			t.Fatalf("produce: %v", err)
		}
	case <-time.After(3 * time.Minute):
		t.Fatal("the stream was not produced within 3 minutes")
	}
	store := &snapshot.Store{Dir: filepath.Join(dir, "snapshots"), Model: "shedkill"}
	covered := func() uint64 {
		snap, _, err := store.Latest()
		if err != nil {
			return 0
		}
		return snap.Header.SamplesSeen + snap.Header.Diagnostics.Shed
	}
	waitFor(t, 3*time.Minute, "the restarted child covering the whole stream", func() bool { return covered() >= n })
	if err := c.stop(); err != nil {
		t.Errorf("graceful stop: %v", err)
	}
	snap, _, err := store.Latest()
	if err != nil {
		t.Fatal(err)
	}
	h := snap.Header
	t.Logf("after 2 SIGKILLs while shedding: samples_seen %d + shed %d = %d of %d messages", h.SamplesSeen, h.Diagnostics.Shed, h.SamplesSeen+h.Diagnostics.Shed, n)
	if h.Diagnostics.Shed == 0 {
		t.Error("the stored model counts no message shed")
	}
	if got := h.SamplesSeen + h.Diagnostics.Shed; got != n {
		b, _ := os.ReadFile(filepath.Join(dir, "child.log"))
		t.Errorf("samples_seen %d + shed %d = %d, want exactly %d: each message learned or shed, once\n%s", h.SamplesSeen, h.Diagnostics.Shed, got, n, b[max(0, len(b)-3000):])
	}
}
