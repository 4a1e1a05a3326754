package integration

import (
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/streamkpca/streamkpca/internal/devstack"
	"github.com/streamkpca/streamkpca/internal/synth"
	"github.com/streamkpca/streamkpca/internal/testkit"
	"github.com/streamkpca/streamkpca/snapshot"
)

// faultNet is testkit's FaultNet with what a Kafka cluster behind it
// needs: real maps a proxied broker's advertised address to its own.
type faultNet struct {
	*testkit.FaultNet
	mu   sync.Mutex
	real map[string]string
}

func newFaultNet() *faultNet { return &faultNet{FaultNet: testkit.NewFaultNet()} }

// advertised is a listener that tells Kafka clients another address (a
// proxy's) than the one it listens on: the broker puts Addr in its
// metadata, so every connection a client opens goes through the proxy.
type advertised struct {
	net.Listener
	addr net.Addr
}

func (a advertised) Addr() net.Addr { return a.addr }

// kafkaThrough returns a kfake option that puts every broker behind a
// proxy of f, and the proxies (one per broker, in start order).
func (f *faultNet) kafkaThrough(t *testing.T) (kfake.Opt, *[]*toxiproxy.Proxy) {
	var mu sync.Mutex
	var proxies []*toxiproxy.Proxy
	return kfake.ListenFn(func(network, _ string) (net.Listener, error) {
		ln, err := net.Listen(network, "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		p := f.Proxy(t, ln.Addr().String())
		addr, err := net.ResolveTCPAddr("tcp", p.Listen)
		if err != nil {
			ln.Close()
			return nil, err
		}
		mu.Lock()
		proxies = append(proxies, p)
		mu.Unlock()
		f.mu.Lock()
		if f.real == nil {
			f.real = map[string]string{}
		}
		f.real[p.Listen] = ln.Addr().String()
		f.mu.Unlock()
		return advertised{ln, addr}, nil
	}), &proxies
}

// direct is a kafka-go transport that reaches the brokers kafkaThrough
// proxies around their proxies: a producer beside the partitioned
// service.
func (f *faultNet) direct() *kafka.Transport {
	var d net.Dialer
	return &kafka.Transport{Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		f.mu.Lock()
		if r, ok := f.real[addr]; ok {
			addr = r
		}
		f.mu.Unlock()
		return d.DialContext(ctx, network, addr)
	}}
}

// readyz is the status code of the service's /readyz and its body.
func readyz(t *testing.T, r *running) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + r.p.HTTPAddr() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestPartitionedService (issue 45): one service whose connections to
// NATS and to Kafka pass through fault proxies, partitioned from each in
// turn (no byte crosses, nothing is reset: what a cut link or a firewall
// dropping packets looks like). Cut off from NATS for 30 s it learns on
// and snapshots locally, and once the link heals it publishes its newest
// snapshot, which a reader on the other side follows. Cut off from Kafka
// for 35 s (past the 30 s after which /readyz gives up on the brokers)
// /readyz answers 503 naming Kafka while the model is still served; once
// healed it learns the rest and is ready again. In the end every message
// is learned exactly once and the snapshot's offsets cover the topic.
func TestPartitionedService(t *testing.T) {
	longOnly(t)
	const topic = "parted"
	fn := newFaultNet()
	kopt, kproxies := fn.kafkaThrough(t)
	noLeaks(t)
	s, err := devstack.Start(devstack.Options{Dir: t.TempDir(), Topics: map[string]int32{topic: 2}, KafkaOptions: []kfake.Opt{kopt}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	natsProxy := fn.Proxy(t, strings.TrimPrefix(s.NATSURL(), "nats://"))
	cfg := config(s, topic, t.TempDir())
	cfg.NATS.URL = "nats://" + natsProxy.Listen
	cfg.Snapshot.EveryBatches, cfg.NATS.LeaseTTL = 5, 3*time.Second
	r := startWithLog(t, cfg)
	w := watch(t, s.NATSURL(), "hermite")
	const chunk = 10000
	produceHermite(t, s, topic, chunk, 1)
	waitFor(t, 2*time.Minute, "the first chunk learned and published", func() bool {
		st := r.p.Status()
		return st.Samples == chunk && st.Published != 0
	})

	// NATS partitioned for 30 s.
	heal := testkit.Partition(t, natsProxy)
	cut := time.Now()
	time.Sleep(time.Second) // a publish on the wire as the link was cut may complete
	before := r.p.Status()
	produceHermite(t, s, topic, chunk, 2)
	waitFor(t, 2*time.Minute, "learning and snapshots while cut off from NATS", func() bool {
		st := r.p.Status()
		return st.Samples == 2*chunk && st.Version > before.Published
	})
	for time.Since(cut) < 30*time.Second {
		st := r.p.Status()
		t.Logf("%.1fs published %d version %d nats %q", time.Since(cut).Seconds(), st.Published, st.Version, st.NATSServer)
		time.Sleep(2 * time.Second)
	}
	if st := r.p.Status(); st.Published > before.Published {
		t.Errorf("published version %d while cut off from NATS (before: %d)", st.Published, before.Published)
	}
	heal()
	healed := time.Now()
	local := r.p.Status().Version
	waitFor(t, 3*time.Minute, "the newest snapshot published once the link healed, and the reader on it", func() bool {
		n, _ := w.newest()
		return r.p.Status().Published >= local && n.Version >= local
	})
	t.Logf("NATS partition of 30 s: newest version published and followed %.1f s after the heal", time.Since(healed).Seconds())

	// Kafka partitioned for 35 s (every broker's proxy).
	var healK []func()
	for _, p := range *kproxies {
		healK = append(healK, testkit.Partition(t, p))
	}
	cut = time.Now()
	// Straight to the brokers, beside the partition: the service cannot see these.
	tr := fn.direct()
	err = devstack.Produce(context.Background(), devstack.HermiteJSON(synth.Hermite1D(), 3),
		devstack.ProduceOptions{Brokers: s.Brokers(), Topic: topic, N: chunk, Transport: tr})
	tr.CloseIdleConnections()
	if err != nil {
		t.Fatal(err)
	}
	if st := r.p.Status(); st.Lag == 0 {
		t.Logf("lag reported while cut off from Kafka: %d (the consumer's last high watermark predates the messages)", st.Lag)
	}
	waitFor(t, time.Minute, "/readyz answering 503 for Kafka", func() bool {
		code, body := readyz(t, r)
		return code == http.StatusServiceUnavailable && strings.Contains(body, "kafka")
	})
	notReady := time.Since(cut)
	if code, body := readyz(t, r); !strings.Contains(body, "served") {
		t.Errorf("/readyz %d %q: want it to say the model is still served", code, body)
	}
	if st := r.p.Status(); st.Samples != 2*chunk {
		t.Errorf("learned %d while cut off from Kafka, want %d", st.Samples, 2*chunk)
	}
	time.Sleep(35*time.Second - time.Since(cut))
	for _, h := range healK {
		h()
	}
	healed = time.Now()
	waitFor(t, 3*time.Minute, "the rest learned once the link to Kafka healed, and ready again", func() bool {
		code, _ := readyz(t, r)
		return r.p.Status().Samples == 3*chunk && code == http.StatusOK
	})
	t.Logf("Kafka partition of 35 s: /readyz 503 after %.1f s; all learned and ready %.1f s after the heal", notReady.Seconds(), time.Since(healed).Seconds())
	r.graceful(t)
	snap, _, err := (&snapshot.Store{Dir: cfg.Snapshot.Dir, Model: cfg.Model}).Latest()
	if err != nil {
		t.Fatal(err)
	}
	if got := snap.Header.SamplesSeen + snap.Header.Diagnostics.Shed; got != 3*chunk {
		t.Errorf("learned %d + shed %d, produced %d", snap.Header.SamplesSeen, snap.Header.Diagnostics.Shed, 3*chunk)
	}
	var next int64
	for _, o := range snap.Header.Offsets {
		next += o.Next
	}
	if next != 3*chunk {
		t.Errorf("offsets cover %d of %d messages", next, 3*chunk)
	}
	if _, incs := w.newest(); incs != 1 {
		t.Errorf("the reader followed %d incarnations", incs)
	}
}

// TestPartitionedMember (issue 45): a cluster-mode group of two members
// on one NATS server, member b's connection through a fault proxy. b is
// cut off from NATS for 30 s while the stream flows: the group's steps
// fail, the member that can still reach NATS goes on with b's
// partitions, and when the link heals b rejoins. In the end both serve
// one model of exactly the messages produced.
func TestPartitionedMember(t *testing.T) {
	longOnly(t)
	const topic = "partedmember"
	s := startStack(t, map[string]int32{topic: 4})
	fn := newFaultNet()
	px := fn.Proxy(t, strings.TrimPrefix(s.NATSURL(), "nats://"))
	dir := t.TempDir()
	ca := clusterConfig(s, topic, filepath.Join(dir, "a"))
	ca.Cluster.StepTimeout = 3 * time.Second
	cb := ca
	cb.Snapshot.Dir, cb.NATS.URL = filepath.Join(dir, "b", "snapshots"), "nats://"+px.Listen
	a := startWithLog(t, ca)
	b := startWithLog(t, cb)
	w := watch(t, s.NATSURL(), ca.Model)
	produceHermite(t, s, topic, 10000, 1)
	settled(t, []*running{a, b}, 10000)
	heal := testkit.Partition(t, px)
	cut := time.Now()
	before := a.p.Status().Samples
	produceHermite(t, s, topic, 10000, 2)
	waitFor(t, 2*time.Minute, "member a learning without b", func() bool {
		st := a.p.Status()
		return st.Samples > before && st.Members == 1
	})
	t.Logf("member a stepping alone %.1f s after b was cut off from NATS", time.Since(cut).Seconds())
	for time.Since(cut) < 30*time.Second {
		t.Logf("%.0fs: a %d members %d samples; b %d members %d samples", time.Since(cut).Seconds(),
			a.p.Status().Members, a.p.Status().Samples, b.p.Status().Members, b.p.Status().Samples)
		time.Sleep(10 * time.Second)
	}
	heal()
	healed := time.Now()
	produceHermite(t, s, topic, 10000, 3)
	settled(t, []*running{a, b}, 30000)
	t.Logf("b back in the group, one model, %.1f s after the heal", time.Since(healed).Seconds())
	a.graceful(t)
	b.graceful(t)
	w.onNewest(t, a, b)
}

// TestDegradedNetwork (issue 45): a cluster-mode group of two members
// whose every NATS connection (the exchange of the group's steps, the
// roster, publishing) crosses a WAN-like link for two minutes: 50 ms of
// latency with 10 ms of jitter each way and 100 Mb/s (12,500 KB/s) of
// bandwidth, while the stream flows. (A TCP proxy cannot drop packets:
// TCP's retransmissions turn loss into delay, which the jitter stands
// for.) The group steps on through it and ends with one model, bit for
// bit on both members, of exactly the messages produced.
func TestDegradedNetwork(t *testing.T) {
	longOnly(t)
	wanPair(t, "wan", "50 ± 10 ms and 100 Mb/s")
}

// wanPair runs a cluster-mode pair whose NATS links pass through proxies
// at 50 ± 10 ms and 100 Mb/s, and a reader, on topic for two minutes of
// stream (2,000 messages every 2 s); both members must end with one
// model, bit for bit, of exactly the messages produced, within the
// closed form's bound, and the reader on the newest version. what names
// the network in the log line.
func wanPair(t *testing.T, topic, what string) {
	t.Helper()
	s := startStack(t, map[string]int32{topic: 4})
	fn := newFaultNet()
	dir := t.TempDir()
	var members []*running
	w := watch(t, s.NATSURL(), "hermite")
	for _, name := range []string{"a", "b"} {
		px := fn.Proxy(t, strings.TrimPrefix(s.NATSURL(), "nats://"))
		testkit.Degrade(t, px, 50, 10, 12500)
		c := clusterConfig(s, topic, filepath.Join(dir, name))
		c.NATS.URL = "nats://" + px.Listen
		members = append(members, startWithLog(t, c))
	}
	start := time.Now()
	produced := 0
	for i := 1; time.Since(start) < 2*time.Minute; i++ {
		produceHermite(t, s, topic, 2000, uint64(i))
		produced += 2000
		time.Sleep(2 * time.Second)
	}
	m := settled(t, members, uint64(produced))
	t.Logf("2 min over %s: %d messages, step %d, generation %d; one model on both members %.1f s after the stream stopped",
		what, produced, m.Header().Step, members[0].p.Status().Generation, time.Since(start).Seconds()-120)
	if e := hermiteError(t, m); !(e < 0.05) {
		t.Errorf("subspace error %.3g against the closed form, want < 0.05", e)
	}
	members[0].graceful(t)
	members[1].graceful(t)
	w.onNewest(t, members...)
}
