package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/streamkpca/streamkpca/internal/devstack"
	"github.com/streamkpca/streamkpca/publish"
	"github.com/streamkpca/streamkpca/snapshot"
)

// TestResetKeepsReadersFollowing is issue 33's reset with two services
// over the embedded brokers: a first life publishes versions (nats.keep 3)
// and stops; a second life of the same model starts with an empty
// snapshot.dir while NATS keeps the first's versions. Before incarnations
// pruning deleted the version just published, the latest key named a
// missing object and a Watch started in the first life stayed on its last
// version forever. Now the Watch follows the new incarnation, Latest
// returns its newest version, and the store holds it.
func TestResetKeepsReadersFollowing(t *testing.T) {
	s := startStack(t, map[string]int32{"reset": 1, "reset2": 1})
	produceHermite(t, s, "reset", 1000, 1)
	cfg := config(s, "reset", t.TempDir())
	cfg.Learner.Batch, cfg.Snapshot.EveryBatches, cfg.NATS.Keep = 50, 1, 3
	first := start(t, cfg)
	waitFor(t, time.Minute, "the first life learning every message and publishing", func() bool {
		st := first.p.Status()
		return st.Samples == 1000 && st.Published != 0 && st.Published == st.Version
	})
	pcfg := publish.Config{Model: cfg.Model, Keep: 3}
	var mu sync.Mutex
	var got publish.Notice
	wctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go publish.Watch(wctx, connect(t, s), pcfg, func(_ *snapshot.Model, n publish.Notice) { mu.Lock(); got = n; mu.Unlock() })
	var firstV uint64
	waitFor(t, 30*time.Second, "the watch at the first life's newest version", func() bool {
		mu.Lock()
		defer mu.Unlock()
		firstV = got.Version
		return firstV != 0 && firstV == first.p.Status().Published
	})
	mu.Lock()
	firstInc := got.Incarnation
	mu.Unlock()
	first.graceful(t)

	// The same model with no local history, here on a topic of its own
	// (a new topic or group, or kafka.start: latest, in the field): its
	// versions start again low.
	cfg.Snapshot.Dir = filepath.Join(t.TempDir(), "snapshots")
	cfg.Kafka.Topic, cfg.Kafka.Group = "reset2", "it-reset2"
	produceHermite(t, s, "reset2", 300, 2)
	second := start(t, cfg)
	defer second.graceful(t)
	waitFor(t, time.Minute, "the second life learning its messages and publishing", func() bool {
		st := second.p.Status()
		return st.Samples == 300 && st.Published != 0 && st.Published == st.Version
	})
	var secondV uint64
	waitFor(t, 30*time.Second, "the watch following the new incarnation", func() bool {
		mu.Lock()
		defer mu.Unlock()
		secondV = got.Version
		return got.Incarnation != firstInc && got.Incarnation != "" && secondV == second.p.Status().Published
	})
	if secondV >= firstV {
		t.Fatalf("the second life is at version %d, the first was at %d: the test needs lower versions", secondV, firstV)
	}
	mu.Lock()
	secondInc := got.Incarnation
	mu.Unlock()
	n := latestAt(t, s, pcfg, secondInc, func() uint64 { return second.p.Status().Published })
	if n.Version >= firstV {
		t.Errorf("Latest after the reset: version %d, not below the first life's %d", n.Version, firstV)
	}
	ctx, cancelL := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelL()
	js, _ := jetstream.New(connect(t, s))
	obs, err := js.ObjectStore(ctx, "streamkpca-snapshots")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := obs.GetInfo(ctx, n.Object); err != nil {
		t.Errorf("the newest version %d is not in the store after the reset: %v", secondV, err)
	}
}

// TestResetWithRunProcesses is the same reset with two `streamkpca run`
// processes (the real binary, its config file, SIGTERM between the
// lives): the Watch this test holds across both follows the second
// life's incarnation to its newest version, and Latest returns it.
func TestResetWithRunProcesses(t *testing.T) {
	longOnly(t)
	s := startStack(t, map[string]int32{"life1": 1, "life2": 1})
	produceHermite(t, s, "life1", 1000, 1)
	produceHermite(t, s, "life2", 300, 2)
	bin := buildBinary(t)
	life := func(topic string) (*child, int) {
		dir := t.TempDir()
		c := startChild(t, bin, dir, func(port int) string {
			return fmt.Sprintf(`model: reset
kafka: {brokers: [%q], topic: %s, group: %s}
learner: {k: 3, bandwidth: 1, max_features: 4096, batch: 50, linger: 200ms}
snapshot: {dir: %q, every_batches: 1}
nats: {url: %q, keep: 3}
http: {addr: "127.0.0.1:%d"}
log: {level: warn, format: json}
`, s.Brokers()[0], topic, topic, filepath.Join(dir, "snapshots"), s.NATSURL(), port)
		}, os.Stderr)
		return c, c.port
	}
	stop := func(c *child) {
		if err := c.stop(); err != nil {
			t.Errorf("graceful stop: %v", err)
		}
	}
	// published: the version the child says it published once it has
	// learned all n messages and published its newest.
	published := func(port int, n float64) func() bool {
		return func() bool {
			return scrape(port, "streamkpca_samples_learned_total") == n &&
				scrape(port, "streamkpca_published_version") > 0 &&
				scrape(port, "streamkpca_published_version") == scrape(port, "streamkpca_model_version")
		}
	}
	first, port1 := life("life1")
	waitFor(t, 2*time.Minute, "the first life learning and publishing", published(port1, 1000))
	pcfg := publish.Config{Model: "reset"}
	var mu sync.Mutex
	var got publish.Notice
	wctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go publish.Watch(wctx, connect(t, s), pcfg, func(_ *snapshot.Model, n publish.Notice) { mu.Lock(); got = n; mu.Unlock() })
	// The newest version is read again at every poll: the snapshot of the
	// last batch can still be on its way when the counters first agree
	// (CI once saw the watch deliver a version newer than one read once).
	waitFor(t, 30*time.Second, "the watch at the first life's newest version", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return got.Version > 0 && float64(got.Version) == scrape(port1, "streamkpca_published_version")
	})
	mu.Lock()
	firstInc, firstV := got.Incarnation, got.Version
	mu.Unlock()
	stop(first)

	second, port2 := life("life2") // the same model, an empty snapshot.dir
	waitFor(t, 2*time.Minute, "the second life learning and publishing", published(port2, 300))
	secondV := uint64(scrape(port2, "streamkpca_published_version"))
	waitFor(t, 30*time.Second, "the watch following the second life", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return got.Version == secondV && got.Incarnation != firstInc && got.Incarnation != ""
	})
	if secondV >= firstV {
		t.Errorf("the second life is at version %d, the first was at %d: the test needs lower versions", secondV, firstV)
	}
	mu.Lock()
	secondInc := got.Incarnation
	mu.Unlock()
	latestAt(t, s, pcfg, secondInc, func() uint64 { return uint64(scrape(port2, "streamkpca_published_version")) })
	stop(second)
}

// latestAt polls publish.Latest until it names incarnation inc at the
// version newest says the service published (read again at every poll:
// the service may publish its last batch's snapshot after a check that
// found the counters agreeing), and returns that notice; it fails the
// test after 10 s.
func latestAt(t *testing.T, s *devstack.Stack, pcfg publish.Config, inc string, newest func() uint64) publish.Notice {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	nc := connect(t, s)
	var n publish.Notice
	var err error
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, n, err = publish.Latest(ctx, nc, pcfg)
		want := newest()
		if err == nil && n.Incarnation == inc && n.Version == want {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("Latest after the reset: %s version %d, %v; want %s version %d", n.Incarnation, n.Version, err, inc, want)
		}
	}
}
