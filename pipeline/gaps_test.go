package pipeline

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/streamkpca/streamkpca/configs"
	"github.com/streamkpca/streamkpca/ingest"
)

// kafkaRun is the service on a Kafka topic (kfake, the real wire), until
// stop.
type kafkaRun struct {
	p      *Pipeline
	reg    *prometheus.Registry
	cancel context.CancelFunc
	done   chan error
}

func runOnKafka(t *testing.T, c configs.Config) *kafkaRun {
	t.Helper()
	reg := prometheus.NewRegistry()
	p, err := New(Options{Config: c, Registry: reg, DeadLetters: &ingest.MemDeadLetter{}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &kafkaRun{p: p, reg: reg, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- p.Run(ctx) }()
	t.Cleanup(func() { p.Kill(); cancel() })
	return r
}

// waitSamples waits until the model has learned n samples.
func (r *kafkaRun) waitSamples(t *testing.T, n uint64) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for r.p.Status().Samples < n {
		if time.Now().After(deadline) {
			t.Fatalf("learned %d of %d samples (consumed %d)", r.p.Status().Samples, n, r.p.Status().Consumed)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (r *kafkaRun) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		return err
	case <-time.After(60 * time.Second):
		t.Fatal("Run did not return after its context was cancelled")
		return nil
	}
}

func writeRows(t *testing.T, c *kfake.Cluster, topic string, rows [][]byte) {
	t.Helper()
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	w := &kafka.Writer{Addr: kafka.TCP(c.ListenAddrs()...), Topic: topic, BatchTimeout: time.Millisecond, RequiredAcks: kafka.RequireAll, Transport: tr}
	defer w.Close()
	msgs := make([]kafka.Message, len(rows))
	for i, v := range rows {
		msgs[i] = kafka.Message{Value: v}
	}
	if err := w.WriteMessages(context.Background(), msgs...); err != nil {
		t.Fatal(err)
	}
}

// Defect (issue 58, item 8), through the service: a topic deleted and
// created again while the service was down was read from the snapshot's
// old offset, past the new topic's end, so the new messages below it
// were never learned, with no warning and lag 0. Now the restart finds
// the gap, logs it, counts it, and learns the new topic from its first
// offset; the snapshot's offsets then name the new topic's messages.
// Under kafka.offset_out_of_range: fail it stops instead, naming the
// partition and the setting.
func TestRecreatedTopicIsLearnedAfterARestart(t *testing.T) {
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "v"), kfake.GroupMinSessionTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	c := testConfig(t)
	c.Kafka.Brokers = kc.ListenAddrs()
	c.Kafka.SessionTimeout, c.Kafka.RebalanceTimeout = time.Second, time.Second
	writeRows(t, kc, "v", points(512, 4, 1))
	r := runOnKafka(t, c)
	r.waitSamples(t, 512)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if n := nextOffset(latest(t, c), 0); n != 512 {
		t.Fatalf("first run's snapshot at offset %d; want 512", n)
	}

	conn, err := kafka.Dial("tcp", kc.ListenAddrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.DeleteTopics("v"); err != nil {
		t.Fatal(err)
	}
	if err := conn.CreateTopics(kafka.TopicConfig{Topic: "v", NumPartitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	writeRows(t, kc, "v", points(320, 4, 2))

	fail := c
	fail.Kafka.OffsetOutOfRange = ingest.OutOfRangeFail
	fr := runOnKafka(t, fail)
	select {
	case err := <-fr.done:
		var gap *ingest.OffsetGapError
		if !errors.As(err, &gap) || gap.Gap.Next != 512 || gap.Gap.End != 320 || !strings.Contains(err.Error(), "kafka.offset_out_of_range") {
			t.Fatalf("under fail, Run ended with %v; want the gap at 512 past the end 320, naming the setting", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("under kafka.offset_out_of_range: fail the service did not stop")
	}
	if got := fr.p.Status().Samples; got != 512 {
		t.Errorf("under fail, the model has %d samples; want the 512 of before, nothing new", got)
	}

	r = runOnKafka(t, c)
	r.waitSamples(t, 512+320)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(r.p.met.OffsetGaps.WithLabelValues(ingest.GapPastEnd)); got != 1 {
		t.Errorf("streamkpca_kafka_offset_gaps_total{kind=past_end} %v; want 1", got)
	}
	snap := latest(t, c)
	if n := nextOffset(snap, 0); n != 320 {
		t.Errorf("the snapshot after the recreated topic covers offset %d; want 320 (the new topic's end)", n)
	}
	if snap.Header.SamplesSeen != 512+320 {
		t.Errorf("samples seen %d; want %d", snap.Header.SamplesSeen, 512+320)
	}
}
