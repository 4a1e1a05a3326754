// Package integration holds end-to-end tests of streamkpca over real-protocol
// brokers started in-process (kfake for Kafka, nats-server for NATS).
package integration

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"
	"go.uber.org/goleak"
	"gonum.org/v1/gonum/mat"

	"github.com/streamkpca/streamkpca/configs"
	"github.com/streamkpca/streamkpca/ingest"
	"github.com/streamkpca/streamkpca/internal/devstack"
	"github.com/streamkpca/streamkpca/internal/synth"
	"github.com/streamkpca/streamkpca/pipeline"
	"github.com/streamkpca/streamkpca/snapshot"
)

func startStack(t *testing.T, topics map[string]int32) *devstack.Stack {
	t.Helper()
	noLeaks(t) // runs last: after the brokers are closed
	s, err := devstack.Start(devstack.Options{Dir: t.TempDir(), Topics: topics})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// noLeaks checks, once the test and its cleanups before it are done, that
// no goroutine started during the test outlives it (go.uber.org/goleak):
// every pipeline, consumer, dead-letter writer, publisher and NATS client
// of the test has stopped. Connections take a moment to close: it polls
// for up to 30 s.
//
// One goroutine of nats.go is ignored, by name: ObjectStore.Put starts
// jetstream's resetPendingAcksOnReconnect, which reads its status channel
// under a lock, while Put's deferred cleanup clears that channel. When the
// cleanup wins (rare; seen once under -race), the goroutine waits on a nil
// channel for good. That is nats.go v1.55.0's own race, not something the
// service can close (the README's Status lists it).
func noLeaks(t *testing.T) {
	t.Helper()
	before := goleak.IgnoreCurrent()
	natsRace := goleak.IgnoreTopFunction("github.com/nats-io/nats.go/jetstream.(*jetStream).resetPendingAcksOnReconnect")
	t.Cleanup(func() {
		var err error
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
			if err = goleak.Find(before, natsRace); err == nil {
				return
			}
			time.Sleep(100 * time.Millisecond) // polling for connections to close
		}
		t.Errorf("goroutines outlived the test: %v", err)
	})
}

// config returns a service config for the stack: hermite model, k = 3,
// bandwidth 1 (the stream's own), 8,192 features to keep tests quick.
func config(s *devstack.Stack, topic, dir string) configs.Config {
	var c configs.Config
	c.Model = "hermite"
	c.Kafka.Brokers, c.Kafka.Topic, c.Kafka.Group = s.Brokers(), topic, "it-"+topic
	c.NATS.URL = s.NATSURL()
	c.Learner.K, c.Learner.Bandwidth, c.Learner.MaxFeatures = 3, 1, 8192
	c.Learner.Linger = 300 * time.Millisecond
	c.Snapshot.Dir = filepath.Join(dir, "snapshots")
	c.Snapshot.EveryBatches, c.Snapshot.Every = 40, time.Second
	c.HTTP.Addr = "127.0.0.1:0"
	c.SetDefaults()
	return c
}

type running struct {
	p        *pipeline.Pipeline
	restored pipeline.Status // status right after New, before Run
	reg      *prometheus.Registry
	done     chan error
	stop     context.CancelFunc
}

func start(t *testing.T, c configs.Config) *running {
	t.Helper()
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	reg := prometheus.NewRegistry()
	p, err := pipeline.New(pipeline.Options{Config: c, Logger: &log, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{p: p, reg: reg, done: make(chan error, 1), stop: cancel}
	go func() { r.done <- p.Run(ctx) }()
	waitFor(t, 10*time.Second, "HTTP server up", func() bool { return p.HTTPAddr() != "" })
	return r
}

// graceful stops the pipeline with a final snapshot.
func (r *running) graceful(t *testing.T) {
	t.Helper()
	r.stop()
	select {
	case err := <-r.done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("pipeline did not stop within 60s")
	}
}

// kill stops the pipeline as a crash would: no final snapshot.
func (r *running) kill(t *testing.T) {
	t.Helper()
	r.p.Kill()
	select {
	case <-r.done:
	case <-time.After(60 * time.Second):
		t.Fatal("pipeline did not die within 60s")
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func produceHermite(t *testing.T, s *devstack.Stack, topic string, n int, seed uint64) {
	t.Helper()
	err := devstack.Produce(context.Background(), devstack.HermiteJSON(synth.Hermite1D(), seed),
		devstack.ProduceOptions{Brokers: s.Brokers(), Topic: topic, N: n})
	if err != nil {
		t.Fatal(err)
	}
}

// hermiteError is the subspace error of a model vs the closed form on 2,000
// held-out points.
func hermiteError(t *testing.T, m *snapshot.Model) float64 {
	t.Helper()
	h := synth.Hermite1D()
	x := make([]float64, 2000)
	h.Sample(x, rand.New(rand.NewPCG(1, 1)))
	out, err := m.Project(nil, x)
	if err != nil {
		t.Fatal(err)
	}
	return synth.SubspaceError(mat.NewDense(2000, 3, out), h.Eigenfunctions(x, 2000, 3))
}

func connect(t *testing.T, s *devstack.Stack) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(s.NATSURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func hermite1D() synth.Hermite { return synth.Hermite1D() }

type pipelineConfig = configs.Config

type natsOptions = server.Options

func startStackWith(t *testing.T, topics map[string]int32, natsOpt func(*server.Options)) *devstack.Stack {
	t.Helper()
	s, err := devstack.Start(devstack.Options{Dir: t.TempDir(), Topics: topics, NATSOptions: natsOpt})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// deadLetters reads n messages from a dead-letter topic: each one's
// headers by source offset, and its value's length. The reader's wait is
// ingest.DefaultFetchMaxWait: kafka-go makes it the deadline of a fetch's
// answer, and at 100 ms (a 25 ms margin) a loaded CI machine answering a
// 4 MiB fetch more slowly read nothing for a minute.
func deadLetters(t *testing.T, s *devstack.Stack, topic string, n int) (map[int64]map[string]string, map[int64]int) {
	t.Helper()
	rd := kafka.NewReader(kafka.ReaderConfig{Brokers: s.Brokers(), Topic: topic, Partition: 0, MaxWait: ingest.DefaultFetchMaxWait, MaxBytes: 4 << 20,
		ErrorLogger: kafka.LoggerFunc(func(f string, a ...any) { t.Logf("dead-letter reader: "+f, a...) })})
	defer rd.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	headers, sizes := map[int64]map[string]string{}, map[int64]int{}
	for len(headers) < n {
		m, err := rd.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("dead-letter topic %s: %d of %d read: %v", topic, len(headers), n, err)
		}
		h := map[string]string{}
		for _, x := range m.Headers {
			h[x.Key] = string(x.Value)
		}
		off, _ := strconv.ParseInt(h["source-offset"], 10, 64)
		headers[off], sizes[off] = h, len(m.Value)
	}
	return headers, sizes
}
