package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/streamkpca/streamkpca/publish"
)

// TestFrozenOwnerProcess (issue 58, item 1, as processes): the owner of
// a model name is frozen (SIGSTOP: a GC pause, a VM stall) past its
// lease; a standby takes the partition and the lease over and publishes;
// then the owner resumes (SIGCONT). The resumed owner must write nothing
// over the new owner: the latest pointer keeps naming the new owner's
// incarnation and its versions stay stored. A SIGSTOP at a moment the
// test does not choose rarely lands between the owner's renewal and its
// pointer write, the window where the defect was (a resumed owner moved
// the pointer back for 250–300 ms and pruned the new owner's versions):
// with 9e56aa8's binary this test passes too. The window itself is
// TestFrozenOwnerWritesNothing's (publish, a hook between the two); this
// one guards the whole path through real processes.
func TestFrozenOwnerProcess(t *testing.T) {
	longOnly(t)
	s := startStack(t, map[string]int32{"frozen": 1})
	writeSine(t, s.Brokers(), "frozen", 3000, 0)
	bin := buildBinary(t)
	config := func(dir string) func(int) string {
		return func(port int) string {
			return fmt.Sprintf(`model: frozen
kafka: {brokers: [%[1]q], topic: frozen, group: frozen, session_timeout: 1s, rebalance_timeout: 2s}
learner: {k: 3, bandwidth: 1, max_features: 2048, batch: 100, linger: 200ms}
snapshot: {dir: %[2]q, every_batches: 2, every: 500ms}
nats: {url: %[3]q, lease_ttl: 3s, keep: 3}
http: {addr: "127.0.0.1:%[4]d"}
log: {level: info, format: json}
`, s.Brokers()[0], filepath.Join(dir, "snapshots"), s.NATSURL(), port)
		}
	}
	dirA, dirB := t.TempDir(), t.TempDir()
	a := startChild(t, bin, dirA, config(dirA), nil)
	waitFor(t, 2*time.Minute, "the owner publishing", func() bool { return scrape(a.port, "streamkpca_published_version") > 0 })
	var logB syncBuffer
	b := startChild(t, bin, dirB, config(dirB), &logB)
	waitFor(t, time.Minute, "the standby standing by", func() bool { return scrape(b.port, "streamkpca_lease_held") == 0 })

	a.cmd.Process.Signal(syscall.SIGSTOP)
	writeSine(t, s.Brokers(), "frozen", 3000, 3000)
	deadlineB := time.Now().Add(2 * time.Minute)
	for scrape(b.port, "streamkpca_lease_held") != 1 || scrape(b.port, "streamkpca_publishes_total") < 1 {
		if time.Now().After(deadlineB) {
			t.Fatalf("the standby did not take over and publish: lease %v, publishes %v, samples %v; its log:\n%s", scrape(b.port, "streamkpca_lease_held"),
				scrape(b.port, "streamkpca_publishes_total"), scrape(b.port, "streamkpca_samples_learned_total"), tail(logB.String(), 3000))
		}
		time.Sleep(50 * time.Millisecond)
	}
	nc := connect(t, s)
	ctx := context.Background()
	_, before, err := publish.Latest(ctx, nc, publish.Config{Model: "frozen"})
	if err != nil {
		t.Fatal(err)
	}
	writeSine(t, s.Brokers(), "frozen", 1000, 6000) // the new owner goes on publishing meanwhile
	a.cmd.Process.Signal(syscall.SIGCONT)
	be, err := publish.NewNATSBackend(nc, publish.Config{Model: "frozen"}, false)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		_, n, err := publish.Latest(ctx, nc, publish.Config{Model: "frozen"})
		if err == nil && n.Incarnation != before.Incarnation {
			t.Fatalf("after the frozen owner resumed, the latest pointer names incarnation %q, not the new owner's %q", n.Incarnation, before.Incarnation)
		}
		objs, err := be.ListObjects(ctx)
		if err == nil {
			mine := 0
			for _, o := range objs {
				if strings.Contains(o.Name, before.Incarnation) {
					mine++
				}
			}
			if mine == 0 {
				t.Fatalf("after the frozen owner resumed, none of the new owner's versions is stored (%d objects)", len(objs))
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if held := scrape(a.port, "streamkpca_lease_held"); held == 1 {
		t.Errorf("the resumed owner says it holds the lease")
	}
	a.stop()
	b.stop()
}
