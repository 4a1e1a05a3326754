package integration

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/streamkpca/streamkpca/configs"
	"github.com/streamkpca/streamkpca/internal/devstack"
	"github.com/streamkpca/streamkpca/publish"
	"github.com/streamkpca/streamkpca/snapshot"
)

// TestSplitBrainOneOwner is issue 43's split brain over the embedded
// brokers: two services given one model name and one NATS (their own
// snapshot dirs, groups and topics). Before the lease, the latest pointer
// switched incarnation back and forth and the two overwrote and pruned
// each other's objects. Now the first owns the name; the second learns
// but stands by (status, no NATS query service, nothing stored) and a
// Watch sees one incarnation; when the owner stops cleanly (releasing
// the lease) the second takes over and the Watch moves once.
func TestSplitBrainOneOwner(t *testing.T) {
	s, cfg1, cfg2 := twoServices(t, "twin", 2000)
	first := start(t, cfg1)
	waitFor(t, time.Minute, "the first service publishing", func() bool { return first.p.Status().Published != 0 })

	var mu sync.Mutex
	var incs []string
	wctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go publish.Watch(wctx, connect(t, s), publish.Config{Model: "twin"}, func(_ *snapshot.Model, n publish.Notice) {
		mu.Lock()
		if len(incs) == 0 || incs[len(incs)-1] != n.Incarnation {
			incs = append(incs, n.Incarnation)
		}
		mu.Unlock()
	})
	second := start(t, cfg2)
	defer second.graceful(t)
	waitFor(t, time.Minute, "the second service learning its stream and snapshotting", func() bool {
		st := second.p.Status()
		return st.Samples == 2000 && st.Version != 0
	})
	time.Sleep(3 * time.Second) // past the lease's TTL: the owner's renewals hold it
	st := second.p.Status()
	if st.Published != 0 || st.StandingBy == "" {
		t.Fatalf("the second service published version %d, standing by %q: want nothing published, standing by", st.Published, st.StandingBy)
	}
	// The NATS query service answers for the owner only.
	info, err := micro.ControlSubject(micro.InfoVerb, "streamkpca", "")
	if err != nil {
		t.Fatal(err)
	}
	nc := connect(t, s)
	sub, _ := nc.SubscribeSync(nc.NewRespInbox())
	_ = nc.PublishRequest(info, sub.Subject, nil)
	answers := 0
	for {
		if _, err := sub.NextMsg(time.Second); err != nil {
			break
		}
		answers++
	}
	if answers != 1 {
		t.Errorf("%d NATS query services answer for the model, want 1 (the owner's)", answers)
	}
	mu.Lock()
	if len(incs) != 1 {
		t.Errorf("the watch followed incarnations %v while two services ran, want one", incs)
	}
	mu.Unlock()

	first.graceful(t) // releases the name
	waitFor(t, 30*time.Second, "the second service taking over and the watch following", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return second.p.Status().Published != 0 && len(incs) == 2
	})
	if st := second.p.Status(); st.StandingBy != "" {
		t.Errorf("after the takeover the status still says standing by %q", st.StandingBy)
	}
	ctx, cancelL := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelL()
	_, n, err := publish.Latest(ctx, nc, publish.Config{Model: "twin"})
	if err != nil || n.Incarnation != incs[1] || !strings.Contains(n.Object, n.Incarnation) {
		t.Fatalf("Latest after the takeover: %+v, %v; want the second's incarnation %s in its object name", n, err, incs[1])
	}
}

// TestStandbyStopsWithoutWaitingForTheLease: a standby (another service
// owns the model name) stopped gracefully ends when its final snapshot
// is on disk: it has nothing to publish. Before, its publish loop waited
// for the next lease renewal and tried again until the stop's deadline,
// so every stop of a standby took the whole shutdown_timeout (30 s by
// default, Kubernetes' grace period: the pod was killed before HTTP, dead
// letters and NATS were closed). Here shutdown_timeout is 10 minutes and
// the stop must end within graceful's 60 s.
func TestStandbyStopsWithoutWaitingForTheLease(t *testing.T) {
	_, cfg1, cfg2 := twoServices(t, "owned", 500)
	cfg2.ShutdownTimeout = 10 * time.Minute
	owner := start(t, cfg1)
	defer owner.graceful(t)
	waitFor(t, time.Minute, "the owner publishing", func() bool { return owner.p.Status().Published != 0 })
	standby := start(t, cfg2)
	waitFor(t, time.Minute, "the standby learning and standing by", func() bool {
		st := standby.p.Status()
		return st.Samples == 500 && st.Version != 0 && st.StandingBy != ""
	})
	t0 := time.Now()
	standby.graceful(t)
	t.Logf("the standby stopped in %v (shutdown_timeout %v)", time.Since(t0).Round(time.Millisecond), cfg2.ShutdownTimeout)
}

// twoServices starts the embedded brokers with topics <model>1 and
// <model>2 of n messages each and returns two services' configurations
// for one model name (their own snapshot dirs, topics and groups; a
// snapshot every batch of 50, a lease of 2 s).
func twoServices(t *testing.T, model string, n int) (*devstack.Stack, configs.Config, configs.Config) {
	t.Helper()
	t1, t2 := model+"1", model+"2"
	s := startStack(t, map[string]int32{t1: 1, t2: 1})
	produceHermite(t, s, t1, n, 1)
	produceHermite(t, s, t2, n, 2)
	cfg1 := config(s, t1, t.TempDir())
	cfg1.Model, cfg1.Learner.Batch, cfg1.Snapshot.EveryBatches, cfg1.NATS.LeaseTTL = model, 50, 1, 2*time.Second
	cfg2 := cfg1
	cfg2.Snapshot.Dir, cfg2.Kafka.Topic, cfg2.Kafka.Group = t.TempDir(), t2, "it-"+t2
	return s, cfg1, cfg2
}
