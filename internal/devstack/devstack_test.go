package devstack

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/streamkpca/streamkpca/internal/synth"
)

// TestStackKeepsItsDataAcrossRestarts: what the demo and the fault tests
// rely on: messages produced are counted by Messages (the count written,
// not read back from the code under test), and Kafka's messages and
// JetStream's keys survive a stop and start at the same addresses.
func TestStackKeepsItsDataAcrossRestarts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := Start(Options{Dir: t.TempDir(), Topics: map[string]int32{"v": 3}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var progress []int
	err = Produce(ctx, HermiteJSON(synth.Hermite1D(), 1), ProduceOptions{Brokers: s.Brokers(), Topic: "v", N: 250, Chunk: 100,
		Progress: func(n int) { progress = append(progress, n) }})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(progress, []int{100, 200, 250}) {
		t.Errorf("progress %v, want a call per chunk of 100: [100 200 250]", progress)
	}
	if n, err := s.Messages(ctx, "v"); n != 250 || err != nil {
		t.Fatalf("Messages = %d, %v; want 250", n, err)
	}
	nc, err := nats.Connect(s.NATSURL())
	if err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "b"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "k", []byte("kept")); err != nil {
		t.Fatal(err)
	}
	nc.Close()

	brokers, url := s.Brokers(), s.NATSURL()
	s.StopKafka()
	s.StopNATS()
	if err := s.StartKafka(); err != nil {
		t.Fatal(err)
	}
	if err := s.StartNATS(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.Brokers(), brokers) || s.NATSURL() != url {
		t.Errorf("restarted at %v %s, want %v %s", s.Brokers(), s.NATSURL(), brokers, url)
	}
	if n, err := s.Messages(ctx, "v"); n != 250 || err != nil {
		t.Errorf("Messages after a restart = %d, %v; want 250", n, err)
	}
	nc, err = nats.Connect(s.NATSURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ = jetstream.New(nc)
	kv, err = js.KeyValue(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	if e, err := kv.Get(ctx, "k"); err != nil || string(e.Value()) != "kept" {
		t.Errorf("key after a restart: %v", err)
	}
}

// TestHermiteJSONHasTheStreamsMoments: the demo's source is the hermite
// stream (coordinate i ~ N(0, s_i²), synth's definition) written as JSON
// arrays, the same bytes for a seed on every run.
func TestHermiteJSONHasTheStreamsMoments(t *testing.T) {
	h := synth.Hermite{S: []float64{1, 0.5, 2}, L: 1}
	a, b, c := HermiteJSON(h, 7), HermiteJSON(h, 7), HermiteJSON(h, 8)
	const n = 20000
	var sum, sq [3]float64
	differ := false
	for i := range n {
		m := a(i)
		if string(m) != string(b(i)) {
			t.Fatalf("message %d differs between two sources of seed 7", i)
		}
		differ = differ || string(m) != string(c(i))
		var x []float64
		if err := json.Unmarshal(m, &x); err != nil || len(x) != 3 {
			t.Fatalf("message %d %s: %v", i, m, err)
		}
		for j, v := range x {
			sum[j] += v
			sq[j] += v * v
		}
	}
	if !differ {
		t.Error("seeds 7 and 8 gave the same stream")
	}
	for j, s := range h.S {
		mean, v := sum[j]/n, sq[j]/n-(sum[j]/n)*(sum[j]/n)
		// Five standard errors: of the mean s/√n, of the variance s²√(2/n).
		if math.Abs(mean) > 5*s/math.Sqrt(n) || math.Abs(v-s*s) > 5*s*s*math.Sqrt(2.0/n) {
			t.Errorf("coordinate %d: mean %.4f, variance %.4f; want 0 and %.4f", j, mean, v, s*s)
		}
	}
}

// TestProduceKeepsItsRate: at Rate r, N messages take at least N/r (less
// one chunk's worth, sent at once at the start), so a slow demo producer
// is slow; with N negative it produces until its context ends and then
// returns nil.
func TestProduceKeepsItsRate(t *testing.T) {
	s, err := Start(Options{Dir: t.TempDir(), Topics: map[string]int32{"v": 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	src := func(int) []byte { return []byte("[1]") }
	start := time.Now()
	if err := Produce(context.Background(), src, ProduceOptions{Brokers: s.Brokers(), Topic: "v", N: 60, Rate: 100}); err != nil {
		t.Fatal(err)
	}
	// Chunks of a second of the rate (60 here, at most 100): one write, then
	// the wait until message 60 is due at 0.6 s.
	if el := time.Since(start); el < 550*time.Millisecond {
		t.Errorf("60 messages at 100/s took %v, want ≥ 0.6 s", el)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if err := Produce(ctx, src, ProduceOptions{Brokers: s.Brokers(), Topic: "v", N: -1, Rate: 50}); err != nil {
		t.Errorf("endless produce ended by its context: %v, want nil", err)
	}
	n, err := s.Messages(context.Background(), "v")
	if err != nil || n < 61 || n > 60+50 {
		t.Errorf("Messages = %d, %v; want 60 and then up to half a second at 50/s", n, err)
	}
	err = Produce(context.Background(), src, ProduceOptions{Brokers: []string{"127.0.0.1:1"}, Topic: "v", N: 1})
	if err == nil || !strings.Contains(err.Error(), "produce to v") {
		t.Errorf("produce to no broker: %v, want an error naming the topic", err)
	}
}

// TestNATSClusterElectsAgain: three routed servers elect a JetStream meta
// leader; when it stops, the other two elect another; restarted, it
// rejoins at its address. URLs(i) lists server i first.
func TestNATSClusterElectsAgain(t *testing.T) {
	if _, err := StartNATSCluster(t.TempDir(), 0); err == nil {
		t.Error("a cluster of no servers started")
	}
	c, err := StartNATSCluster(t.TempDir(), 3)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if u := strings.Split(c.URLs(1), ","); len(u) != 3 || u[0] != c.URL(1) || u[1] != c.URL(2) || u[2] != c.URL(0) {
		t.Errorf("URLs(1) = %v", u)
	}
	old := c.MetaLeader()
	if old < 0 {
		t.Fatal("no meta leader after start")
	}
	// Ready means every server is a peer of the meta group: with one
	// missing, stopping the leader leaves no quorum.
	if peers := c.Servers[old].JetStreamClusterPeers(); len(peers) != 3 {
		t.Fatalf("the meta leader counts peers %v after WaitReady, want all 3", peers)
	}
	c.Stop(old)
	waitUntil(t, "a new meta leader", func() bool { l := c.MetaLeader(); return l >= 0 && l != old })
	if err := c.Restart(old); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitReady(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(c.URL(old))
	if err != nil {
		t.Fatal(errors.Join(err, errors.New("the restarted server is not at its address")))
	}
	nc.Close()
}

// TestStartOptions: a stack with no Dir removes its own temporary one at
// Close and leaves a given one; KafkaBrokers spreads a topic's partitions
// over several brokers and Messages still counts them all; NATSOptions
// reach the server (a token it then requires).
func TestStartOptions(t *testing.T) {
	own, err := Start(Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir := own.Dir()
	own.Close()
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("own temp dir %s after Close: %v, want removed", dir, err)
	}
	given := t.TempDir()
	s, err := Start(Options{Dir: given, KafkaBrokers: 3, Topics: map[string]int32{"v": 6},
		NATSOptions: func(o *server.Options) { o.Authorization = "tok" }})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Brokers()) != 3 {
		t.Errorf("brokers %v, want 3", s.Brokers())
	}
	ctx := context.Background()
	if err := Produce(ctx, HermiteJSON(synth.Hermite1D(), 2), ProduceOptions{Brokers: s.Brokers(), Topic: "v", N: 120}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Messages(ctx, "v"); n != 120 || err != nil {
		t.Errorf("Messages over 6 partitions on 3 brokers = %d, %v; want 120", n, err)
	}
	if nc, err := nats.Connect(s.NATSURL()); err == nil {
		nc.Close()
		t.Error("connected without the token the options set")
	}
	nc, err := nats.Connect(s.NATSURL(), nats.Token("tok"))
	if err != nil {
		t.Errorf("with the token: %v", err)
	} else {
		nc.Close()
	}
	s.Close()
	if _, err := os.Stat(given); err != nil {
		t.Errorf("given dir after Close: %v, want kept", err)
	}
}

// TestNATSClusterKeepsAReplicatedBucket: a bucket with three replicas
// has a stream leader; with that server stopped another leads and the
// value is still read, through the URL list, from the servers left.
func TestNATSClusterKeepsAReplicatedBucket(t *testing.T) {
	c, err := StartNATSCluster(t.TempDir(), 3)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nc, err := nats.Connect(c.URLs(0))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "b", Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "k", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	lead := c.StreamLeader("KV_b")
	if lead < 0 || c.StreamLeader("KV_none") != -1 {
		t.Fatalf("stream leader %d (and %d for no stream)", lead, c.StreamLeader("KV_none"))
	}
	c.Stop(lead)
	waitUntil(t, "a new stream leader", func() bool { l := c.StreamLeader("KV_b"); return l >= 0 && l != lead })
	waitUntil(t, "the value read from the servers left", func() bool {
		e, err := kv.Get(ctx, "k")
		return err == nil && string(e.Value()) == "v1"
	})
}

// waitUntil polls cond for up to 30 s (testkit's WaitFor; testkit imports
// this package).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 30 s", what)
		}
	}
}
