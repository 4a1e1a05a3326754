package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/streamkpca/streamkpca/configs"
	"github.com/streamkpca/streamkpca/internal/devstack"
	"github.com/streamkpca/streamkpca/publish"
	"github.com/streamkpca/streamkpca/snapshot"
)

// startNATSCluster starts n embedded nats-servers joined by routes, with
// JetStream on each; the test's cleanup stops them.
func startNATSCluster(t *testing.T, n int) *devstack.NATSCluster {
	t.Helper()
	c, err := devstack.StartNATSCluster(t.TempDir(), n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// connectTo opens a client connection to urls (comma-separated) that
// the test's cleanup closes.
func connectTo(t *testing.T, urls string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(urls, nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// serverOf is the index of the cluster's server at url, or -1.
func serverOf(c *devstack.NATSCluster, url string) int {
	for i := range c.Servers {
		if c.URL(i) == url {
			return i
		}
	}
	return -1
}

// watcher follows a model with publish.Watch on its own connection to a
// NATS cluster, recording the incarnations and the newest version it
// was handed.
type watcher struct {
	mu    sync.Mutex
	incs  map[string]bool
	last  publish.Notice
	count int
}

func watch(t *testing.T, urls, model string) *watcher {
	t.Helper()
	nc, err := nats.Connect(urls, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	w := &watcher{incs: map[string]bool{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil { // a watch ended by a lost stream leader is started again, as a reader would
			err := publish.Watch(ctx, nc, publish.Config{Model: model}, func(_ *snapshot.Model, n publish.Notice) {
				w.mu.Lock()
				w.incs[n.Incarnation] = true
				w.last = n
				w.count++
				w.mu.Unlock()
			})
			if ctx.Err() == nil {
				t.Logf("watch ended (%v); watching again", err)
				time.Sleep(200 * time.Millisecond)
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done; nc.Close() })
	return w
}

func (w *watcher) newest() (publish.Notice, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last, len(w.incs)
}

// onNewest waits, once the services rs have stopped, until the reader
// holds the newest version any of them published, and checks that it
// followed one incarnation.
func (w *watcher) onNewest(t *testing.T, rs ...*running) {
	t.Helper()
	var final uint64
	for _, r := range rs {
		final = max(final, r.p.Status().Published)
	}
	if final == 0 {
		t.Fatal("nothing was published")
	}
	waitFor(t, 2*time.Minute, fmt.Sprintf("the reader on the newest version published (%d)", final), func() bool {
		n, _ := w.newest()
		return n.Version == final
	})
	if _, incs := w.newest(); incs != 1 {
		t.Errorf("the reader followed %d incarnations, want 1", incs)
	}
}

// TestNATSClusterServerLoss (issue 45): a cluster-mode group of two
// members and a reader on a NATS cluster of three servers (routes,
// JetStream, the buckets at replicas 3), each connected to its own
// server first. The server one member uses is killed mid-stream; later
// the server leading the snapshot bucket's stream too. Each time the
// members reconnect to another server of nats.url, the group's exchange
// goes on, versions are published, and the reader follows: in the end
// both members serve one model, bit for bit, of exactly the messages
// produced, and the reader holds the newest published version, of one
// incarnation.
func TestNATSClusterServerLoss(t *testing.T) {
	longOnly(t)
	const topic = "natscluster"
	s := startStack(t, map[string]int32{topic: 4})
	nc3 := startNATSCluster(t, 3)
	dir := t.TempDir()
	cfg := func(name string, first int) configs.Config {
		c := clusterConfig(s, topic, filepath.Join(dir, name))
		c.NATS.URL, c.NATS.Replicas = nc3.URLs(first), 3
		c.Cluster.StepTimeout = 5 * time.Second
		c.Snapshot.EveryBatches = 4
		return c
	}
	a := startWithLog(t, cfg("a", 0))
	b := startWithLog(t, cfg("b", 1))
	w := watch(t, nc3.URLs(2), "hermite")
	produceHermite(t, s, topic, 20000, 1)
	settled(t, []*running{a, b}, 20000)
	for _, r := range []*running{a, b} {
		st := r.p.Status()
		t.Logf("before the loss: samples %d step %d version %d published %d generation %d members %d nats %q", st.Samples, st.Step, st.Version, st.Published, st.Generation, st.Members, st.NATSServer)
	}
	waitFor(t, time.Minute, "the reader following the group's first versions", func() bool {
		n, _ := w.newest()
		return n.Version != 0
	})

	// The buckets live on all three servers (nats.replicas: 3).
	js, err := jetstream.New(connectTo(t, nc3.URLs(2)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	obs, err := js.ObjectStore(ctx, publish.DefaultObjectBucket)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, publish.DefaultKVBucket)
	if err != nil {
		t.Fatal(err)
	}
	os, err := obs.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ks, err := kv.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if os.Replicas() != 3 || ks.Config().Replicas != 3 {
		t.Fatalf("bucket replicas: objects %d, pointers %d; want 3 (nats.replicas)", os.Replicas(), ks.Config().Replicas)
	}

	// Kill the server member a is connected to.
	victim := serverOf(nc3, a.p.Status().NATSServer)
	if victim < 0 {
		t.Fatalf("member a reports NATS server %q, none of the cluster's", a.p.Status().NATSServer)
	}
	t.Logf("killing NATS server %d, member a's", victim)
	before, _ := w.newest() // the reader's version as the server goes
	nc3.Stop(victim)
	lost := time.Now()
	produceHermite(t, s, topic, 10000, 2)
	settled(t, []*running{a, b}, 30000)
	for _, r := range []*running{a, b} {
		st := r.p.Status()
		t.Logf("after the loss: samples %d step %d version %d published %d generation %d members %d nats %q", st.Samples, st.Step, st.Version, st.Published, st.Generation, st.Members, st.NATSServer)
	}
	if got := serverOf(nc3, a.p.Status().NATSServer); got == victim || got < 0 {
		t.Errorf("member a reports NATS server %q after server %d went", a.p.Status().NATSServer, victim)
	}
	for n, _ := w.newest(); n.Version <= before.Version; n, _ = w.newest() {
		if time.Since(lost) > 2*time.Minute {
			t.Fatalf("no version after the server's loss reached the reader in 2 minutes: reader on %d; members published %d and %d (versions %d, %d)",
				n.Version, a.p.Status().Published, b.p.Status().Published, a.p.Status().Version, b.p.Status().Version)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("a version after the server's loss reached the reader %.1f s after it", time.Since(lost).Seconds())
	if err := nc3.Restart(victim); err != nil {
		t.Fatal(err)
	}
	if err := nc3.WaitReady(time.Minute); err != nil {
		t.Fatal(err)
	}

	// Kill the server leading the snapshot bucket's stream.
	leader := nc3.StreamLeader("OBJ_" + publish.DefaultObjectBucket)
	if leader < 0 {
		t.Fatal("no server leads the snapshot bucket's stream")
	}
	t.Logf("killing NATS server %d, the snapshot bucket's stream leader", leader)
	nc3.Stop(leader)
	produceHermite(t, s, topic, 10000, 3)
	settled(t, []*running{a, b}, 40000)
	// And back: the restarted server catches up on the buckets.
	if err := nc3.Restart(leader); err != nil {
		t.Fatal(err)
	}
	produceHermite(t, s, topic, 5000, 4)
	m := settled(t, []*running{a, b}, 45000)
	if err := nc3.WaitReady(time.Minute); err != nil {
		t.Fatal(err)
	}
	if e := hermiteError(t, m); !(e < 0.05) {
		t.Errorf("subspace error %.3g against the closed form, want < 0.05", e)
	}
	a.graceful(t)
	b.graceful(t)
	final := max(a.p.Status().Published, b.p.Status().Published)
	waitFor(t, 2*time.Minute, "the reader on the group's final version", func() bool {
		n, _ := w.newest()
		return n.Version == final
	})
	n, incs := w.newest()
	if incs != 1 {
		t.Errorf("the reader followed %d incarnations, want 1", incs)
	}
	if final < before.Version+2 {
		t.Errorf("final version %d: too few versions published after the losses (first loss at %d)", final, before.Version)
	}
	t.Logf("reader on version %d of %s; members' last published %d / %d", n.Version, n.Incarnation, a.p.Status().Published, b.p.Status().Published)
}

// TestKafkaBrokerLoss (issue 45): a service and a cluster-mode pair on a
// Kafka cluster of three brokers, a topic of six partitions whose leaders
// spread over them. Mid-stream every partition's leader moves (an
// election), one partition moves by hand, and then a broker is removed
// for good (its listener closed; its partitions led elsewhere): kafka-go
// finds the new leaders and coordinators from the remaining brokers of
// kafka.brokers. In the end each consumer group has learned (or shed)
// every message exactly once, its snapshot's offsets cover the topic's
// end, and nothing was dead-lettered.
func TestKafkaBrokerLoss(t *testing.T) {
	longOnly(t)
	const topic, parts = "brokers", 6
	noLeaks(t)
	s, err := devstack.Start(devstack.Options{Dir: t.TempDir(), Topics: map[string]int32{topic: parts}, KafkaBrokers: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if n := len(s.Brokers()); n != 3 {
		t.Fatalf("%d brokers, want 3", n)
	}
	dir := t.TempDir()
	solo := config(s, topic, filepath.Join(dir, "solo"))
	solo.Kafka.Group = "it-brokers-solo"
	one := startWithLog(t, solo)
	wSolo, wPair := watch(t, s.NATSURL(), solo.Model), watch(t, s.NATSURL(), "pair")
	pair := make([]*running, 2)
	for i, name := range []string{"a", "b"} {
		pair[i] = startWithLog(t, pairConfig(s, topic, filepath.Join(dir, name)))
	}
	const chunk = 10000
	produced := 0
	produce := func() { produceHermite(t, s, topic, chunk, uint64(produced+1)); produced += chunk }
	produce()
	waitFor(t, 2*time.Minute, "every consumer learning", func() bool {
		return one.p.Status().Samples > 0 && pair[0].p.Status().Samples > 0
	})
	s.Kafka.ShufflePartitionLeaders()
	produce()
	if err := s.Kafka.MoveTopicPartition(topic, 0, (s.Kafka.LeaderFor(topic, 0)+1)%3); err != nil {
		t.Fatal(err)
	}
	produce()
	gone := s.Kafka.LeaderFor(topic, 1)
	t.Logf("removing broker %d (partition 1's leader; group coordinators: solo %d, pair %d)", gone,
		s.Kafka.CoordinatorFor(solo.Kafka.Group), s.Kafka.CoordinatorFor("it-brokers-pair"))
	if err := s.Kafka.RemoveNode(gone); err != nil {
		t.Fatal(err)
	}
	produce()
	for p := int32(0); p < parts; p++ {
		if l := s.Kafka.LeaderFor(topic, p); l == gone || l < 0 {
			t.Fatalf("partition %d led by broker %d after broker %d was removed", p, l, gone)
		}
	}
	settled(t, pair, uint64(produced))
	waitFor(t, 3*time.Minute, "the service learning every message", func() bool {
		st := one.p.Status()
		return st.Samples+st.Shed >= uint64(produced)
	})
	one.graceful(t)
	pair[0].graceful(t)
	pair[1].graceful(t)
	check := func(who string, c configs.Config) {
		snap, _, err := (&snapshot.Store{Dir: c.Snapshot.Dir, Model: c.Model}).Latest()
		if err != nil {
			t.Fatalf("%s: %v", who, err)
		}
		if got := snap.Header.SamplesSeen + snap.Header.Diagnostics.Shed; got != uint64(produced) {
			t.Errorf("%s: learned %d + shed %d = %d, produced %d", who, snap.Header.SamplesSeen, snap.Header.Diagnostics.Shed, got, produced)
		}
		var next int64
		for _, o := range snap.Header.Offsets {
			next += o.Next
		}
		if next != int64(produced) {
			t.Errorf("%s: offsets cover %d of %d messages", who, next, produced)
		}
	}
	wSolo.onNewest(t, one)
	wPair.onNewest(t, pair...)
	check("service", solo)
	check("pair member a", pairConfig(s, topic, filepath.Join(dir, "a")))
	if one.p.Status().Bad != 0 {
		t.Errorf("%d messages dead-lettered", one.p.Status().Bad)
	}
}

func pairConfig(s *devstack.Stack, topic, dir string) configs.Config {
	c := clusterConfig(s, topic, dir)
	c.Kafka.Group, c.Model = "it-brokers-pair", "pair"
	return c
}

// Defect (found by TestKafkaBrokerLoss's log): a cluster member's clean
// stop released the model name's lease, which the group's members hold
// together, while the rest of the group ran on: a standby service of
// another incarnation took the name at its next renewal and the group,
// still learning, stood by. Now a member leaving keeps the group's lease;
// the members still running renew it, and the standby stays a standby.
func TestClusterMemberStopKeepsTheGroupsName(t *testing.T) {
	const topic, other = "grp", "grpstandby"
	s := startStack(t, map[string]int32{topic: 4, other: 1})
	dir := t.TempDir()
	cfg := func(name string) configs.Config {
		c := clusterConfig(s, topic, filepath.Join(dir, name))
		c.Model, c.NATS.LeaseTTL, c.Snapshot.EveryBatches = "grp", 2*time.Second, 2
		return c
	}
	a := startWithLog(t, cfg("a"))
	b := startWithLog(t, cfg("b"))
	produceHermite(t, s, topic, 8000, 1)
	settled(t, []*running{a, b}, 8000)
	waitFor(t, time.Minute, "the group publishing", func() bool {
		return a.p.Status().Published+b.p.Status().Published != 0
	})
	sc := config(s, other, filepath.Join(dir, "standby"))
	sc.Model, sc.NATS.LeaseTTL = "grp", 2*time.Second
	standby := startWithLog(t, sc)
	defer standby.graceful(t)
	produceHermite(t, s, other, 2000, 2)
	waitFor(t, time.Minute, "the standby learning", func() bool { return standby.p.Status().Samples == 2000 })
	if standby.p.Status().StandingBy == "" {
		t.Fatal("the second service does not stand by while the group owns the name")
	}
	a.graceful(t)
	produceHermite(t, s, topic, 4000, 3)
	before := b.p.Status().Published
	time.Sleep(3 * sc.NATS.LeaseTTL) // renewals of both: the standby's every ⅔ s
	if st := standby.p.Status(); st.StandingBy == "" || st.Published != 0 {
		t.Fatalf("after one member of the group stopped, the standby took the name (published %d)", st.Published)
	}
	waitFor(t, time.Minute, "the rest of the group publishing on", func() bool { return b.p.Status().Published > before })
	b.graceful(t)
}
