package integration

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/streamkpca/streamkpca/snapshot"
)

// writeSine writes n one-value JSON messages to topic.
func writeSine(t *testing.T, brokers []string, topic string, n, from int) {
	t.Helper()
	msgs := make([]kafka.Message, n)
	for i := range msgs {
		msgs[i] = kafka.Message{Value: []byte(fmt.Sprintf("[%g]", 2*math.Sin(float64(from+i))))}
	}
	tr := &kafka.Transport{}
	defer tr.CloseIdleConnections()
	w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: topic, RequiredAcks: kafka.RequireAll, BatchSize: 200, BatchTimeout: 5 * time.Millisecond, Transport: tr}
	defer w.Close()
	if err := w.WriteMessages(context.Background(), msgs...); err != nil {
		t.Fatal(err)
	}
}

// TestRecreatedTopicProcess (issue 58, item 8): a real `streamkpca run`
// learns 3,000 messages and stops; the topic is deleted and created
// again with 1,000 new messages. Before, the restarted child read from
// its snapshot's offset 3,000, past the new topic's end, and never
// learned them: lag 0, no warning. Now it logs the gap, counts it in
// streamkpca_kafka_offset_gaps_total and learns the new topic from its
// first offset; the snapshot then covers the new topic's 1,000 offsets.
func TestRecreatedTopicProcess(t *testing.T) {
	longOnly(t)
	s := startStack(t, map[string]int32{"recreated": 1})
	writeSine(t, s.Brokers(), "recreated", 3000, 0)
	c, dir := soloChild(t, s, "recreated", "k: 3, bandwidth: 1, max_features: 2048, linger: 300ms")
	c.start()
	waitFor(t, 2*time.Minute, "the child learning the first topic", func() bool {
		return scrape(c.port, "streamkpca_samples_learned_total") >= 3000
	})
	if err := c.stop(); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
	store := &snapshot.Store{Dir: filepath.Join(dir, "snapshots"), Model: "recreated"}
	if snap, _, err := store.Latest(); err != nil || snap.Header.Offsets[0].Next != 3000 {
		t.Fatalf("the first run's snapshot: %v", err)
	}

	conn, err := kafka.Dial("tcp", s.Brokers()[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.DeleteTopics("recreated"); err != nil {
		t.Fatal(err)
	}
	if err := conn.CreateTopics(kafka.TopicConfig{Topic: "recreated", NumPartitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	writeSine(t, s.Brokers(), "recreated", 1000, 5000)

	c.start()
	waitFor(t, 2*time.Minute, "the restarted child learning the recreated topic", func() bool {
		return scrape(c.port, "streamkpca_samples_learned_total") >= 1000
	})
	if g := scrape(c.port, `streamkpca_kafka_offset_gaps_total{kind="past_end"}`); g != 1 {
		t.Errorf("streamkpca_kafka_offset_gaps_total{kind=past_end} %v; want 1", g)
	}
	if err := c.stop(); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
	snap, _, err := store.Latest()
	if err != nil {
		t.Fatal(err)
	}
	if snap.Header.SamplesSeen != 4000 || snap.Header.Offsets[0].Next != 1000 {
		t.Errorf("after the recreated topic: %d samples seen, offsets to %d; want 4,000 and 1,000", snap.Header.SamplesSeen, snap.Header.Offsets[0].Next)
	}
}
