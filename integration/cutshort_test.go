package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/streamkpca/streamkpca/internal/devstack"
	"github.com/streamkpca/streamkpca/internal/synth"
	"github.com/streamkpca/streamkpca/internal/testkit"
)

// TestCutShortPublishesInAFullStore: issue 58's interrupted publishes,
// as processes. `streamkpca run` publishes versions of about 1 MiB (k =
// 16, 8,192 features) to a nats-server whose JetStream storage holds 4
// MiB, through a link of 512 KB/s, so that a put takes about 2 s; it is
// SIGKILLed six times a second into a put, and each kill leaves the
// chunks its put had sent that no object names. Before, nothing
// collected them: the store filled, every publish failed at its lease
// renewal (itself a write to the full store) before the step that makes
// room, and nothing was published again. Now the last service, on the
// same link, publishes five new versions.
func TestCutShortPublishesInAFullStore(t *testing.T) {
	longOnly(t)
	s := startStackWith(t, map[string]int32{"cutshort": 1}, func(o *server.Options) { o.JetStreamMaxStore = 4 << 20 })
	fn := testkit.NewFaultNet()
	p := fn.Proxy(t, strings.TrimPrefix(s.NATSURL(), "nats://"))
	testkit.Toxic(t, p, "bandwidth", "bandwidth", `"rate":512`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go devstack.Produce(ctx, devstack.HermiteJSON(synth.Hermite16(), 5),
		devstack.ProduceOptions{Brokers: s.Brokers(), Topic: "cutshort", N: 1 << 30, Rate: 400})
	bin := buildBinary(t)
	dir, logf := childDir(t)
	start := func() *child {
		c := newChild(t, bin, dir, func(port int) string {
			return fmt.Sprintf(`model: cutshort
kafka: {brokers: [%q], topic: cutshort}
learner: {k: 16, max_features: 8192, budget: fixed}
snapshot: {dir: %q, every_batches: 1}
nats: {url: "nats://%s", lease_ttl: 2s}
http: {addr: "127.0.0.1:%d"}
log: {level: info, format: json}
`, s.Brokers()[0], filepath.Join(dir, "snapshots"), p.Listen, port)
		}, logf)
		c.start()
		return c
	}
	// waitPublished waits until the child has published n versions since
	// it started, and returns how long that took.
	waitPublished := func(c *child, n float64, limit time.Duration) bool {
		for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			if !c.running() || c.exited() {
				t.Fatalf("the service exited\n%s", tailFile(t, logf.Name()))
			}
			if scrape(c.port, "streamkpca_publishes_total") >= n {
				return true
			}
		}
		return false
	}
	for i := range 6 {
		c := start()
		if !waitPublished(c, 1, 3*time.Minute) {
			t.Fatalf("kill %d: the service published nothing in 3 minutes\n%s", i, tailFile(t, logf.Name()))
		}
		time.Sleep(time.Second) // a second into the next put: versions follow one another
		c.kill()
	}
	c := start()
	ok := waitPublished(c, 5, 3*time.Minute)
	errs := scrape(c.port, "streamkpca_publish_errors_total")
	pubs := scrape(c.port, "streamkpca_publishes_total")
	if err := c.stop(); err != nil {
		t.Errorf("the last service did not stop cleanly: %v", err)
	}
	t.Logf("after 6 services killed mid-put into a 4 MiB store: the last published %.0f versions, %.0f publish errors", pubs, errs)
	if !ok {
		t.Fatalf("the last service published %.0f versions in 3 minutes (%.0f errors); want 5\n%s", pubs, errs, tailFile(t, logf.Name()))
	}
}
