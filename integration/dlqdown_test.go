package integration

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/streamkpca/streamkpca/snapshot"
)

// TestDeadLetterTopicDownProcess: a real `streamkpca run` process whose
// dead-letter topic refuses every write for its first 30 s (the broker
// answers TOPIC_AUTHORIZATION_FAILED, as after an ACL change), then
// accepts them. Exactly once holds: the snapshot after the stream covers
// every offset, samples_seen is the good messages and every bad one is
// on <topic>.dlq (learned + dead-lettered = produced); while the topic
// refused, the failures were counted.
func TestDeadLetterTopicDownProcess(t *testing.T) {
	longOnly(t)
	s := startStack(t, map[string]int32{"dlqdown": 1, "dlqdown.dlq": 1})
	const good, every = 6000, 30 // one bad message after every 30th good one
	var msgs []kafka.Message
	nBad := 0
	for i := range good {
		msgs = append(msgs, kafka.Message{Value: []byte(fmt.Sprintf("[%g]", math.Sin(float64(i))*2))})
		if i%every == every-1 {
			msgs = append(msgs, kafka.Message{Value: []byte("not a vector")})
			nBad++
		}
	}
	tr := &kafka.Transport{}
	w := &kafka.Writer{Addr: kafka.TCP(s.Brokers()...), Topic: "dlqdown", RequiredAcks: kafka.RequireAll, BatchSize: 200, BatchTimeout: 5 * time.Millisecond, Transport: tr}
	if err := w.WriteMessages(context.Background(), msgs...); err != nil {
		t.Fatal(err)
	}
	w.Close()
	tr.CloseIdleConnections()

	// From here on the broker refuses produce requests to the dead-letter
	// topic until up is set.
	var up atomic.Bool
	var refused atomic.Int64
	s.Kafka.ControlKey(int16(kmsg.Produce), func(r kmsg.Request) (kmsg.Response, error, bool) {
		s.Kafka.KeepControl()
		req := r.(*kmsg.ProduceRequest)
		if up.Load() || len(req.Topics) == 0 || req.Topics[0].Topic != "dlqdown.dlq" {
			return nil, nil, false
		}
		refused.Add(1)
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, 29 // TOPIC_AUTHORIZATION_FAILED
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	c, dir := soloChild(t, s, "dlqdown", "k: 3, bandwidth: 1, max_features: 2048, linger: 300ms")
	c.start()
	waitFor(t, 2*time.Minute, "the child learning every good message while its dead letters are refused", func() bool {
		return scrape(c.port, "streamkpca_samples_learned_total") >= good
	})
	time.Sleep(30 * time.Second) // the outage: 30 s in all, most of it after learning
	store := &snapshot.Store{Dir: filepath.Join(dir, "snapshots"), Model: "dlqdown"}
	if snap, _, err := store.Latest(); err == nil {
		for _, o := range snap.Header.Offsets {
			if o.Next > every { // the first bad message is at offset every
				t.Fatalf("a snapshot covers offset %d while the dead-letter topic refused every write", o.Next-1)
			}
		}
	}
	if refused.Load() == 0 || scrape(c.port, "streamkpca_dead_letter_errors_total") <= 0 {
		t.Fatalf("the broker refused %d dead-letter writes, the child counted %v failures: the outage did not happen", refused.Load(), scrape(c.port, "streamkpca_dead_letter_errors_total"))
	}
	up.Store(true)
	total := int64(good + nBad)
	waitFor(t, 2*time.Minute, "a snapshot covering the whole stream once the dead-letter topic accepts writes", func() bool {
		snap, _, err := store.Latest()
		return err == nil && len(snap.Header.Offsets) == 1 && snap.Header.Offsets[0].Next == total
	})
	if err := c.stop(); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
	snap, _, err := store.Latest()
	if err != nil {
		t.Fatal(err)
	}
	if got := snap.Header.SamplesSeen; got != good {
		t.Errorf("samples_seen %d, want %d", got, good)
	}
	headers, _ := deadLetters(t, s, "dlqdown.dlq", nBad)
	for off := range headers {
		if (off+1)%(every+1) != 0 {
			t.Errorf("offset %d on the dead-letter topic is a good message", off)
		}
	}
	if len(headers) != nBad {
		t.Errorf("%d distinct bad messages on the dead-letter topic, want %d", len(headers), nBad)
	}
}
