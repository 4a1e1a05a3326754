package integration

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/streamkpca/streamkpca/snapshot"
)

// TestDeadLetterTopicDownProcess: a real `streamkpca run` process whose
// dead-letter topic refuses every write (the broker answers
// TOPIC_AUTHORIZATION_FAILED, as after an ACL change). The refused dead
// letters go to the spill in snapshot.dir, so snapshots cover the whole
// stream meanwhile (issue 58, item 6: before, no snapshot was stored
// while the topic refused, and the stop could wait on a full queue);
// /readyz names the topic; SIGTERM stops the child at once. Restarted
// once the topic accepts writes, the child sends the spill. Exactly once
// holds: samples_seen is the good messages and every bad one is on
// <topic>.dlq (learned + dead-lettered = produced).
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
	refuseProduce(s, "dlqdown.dlq", func() bool { return !up.Load() }, func() { refused.Add(1) })
	c, dir := soloChild(t, s, "dlqdown", "k: 3, bandwidth: 1, max_features: 2048, linger: 300ms")
	c.start()
	waitFor(t, 2*time.Minute, "the child learning every good message while its dead letters are refused", func() bool {
		return scrape(c.port, "streamkpca_samples_learned_total") >= good
	})
	store := &snapshot.Store{Dir: filepath.Join(dir, "snapshots"), Model: "dlqdown"}
	total := int64(good + nBad)
	waitFor(t, 2*time.Minute, "a snapshot covering the whole stream while the dead-letter topic refuses writes (the spill)", func() bool {
		snap, _, err := store.Latest()
		return err == nil && len(snap.Header.Offsets) == 1 && snap.Header.Offsets[0].Next == total
	})
	if refused.Load() == 0 || scrape(c.port, "streamkpca_dead_letter_errors_total") <= 0 {
		t.Fatalf("the broker refused %d dead-letter writes, the child counted %v failures: the outage did not happen", refused.Load(), scrape(c.port, "streamkpca_dead_letter_errors_total"))
	}
	if n := scrape(c.port, "streamkpca_dead_letters_spilled"); n != float64(nBad) {
		t.Errorf("streamkpca_dead_letters_spilled %v; want %d", n, nBad)
	}
	if resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", c.port)); err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), "dlqdown.dlq") {
			t.Errorf("/readyz says %q; want it to name the dead-letter topic", body)
		}
	}
	began := time.Now()
	if err := c.stop(); err != nil {
		t.Fatalf("graceful stop with the dead-letter topic refusing: %v", err)
	}
	t.Logf("the stop took %v with the dead-letter topic refusing writes", time.Since(began))
	if d := time.Since(began); d > 20*time.Second {
		t.Errorf("the stop took %v", d)
	}
	up.Store(true)
	c.start()
	waitFor(t, 2*time.Minute, "the spill sent once the dead-letter topic accepts writes", func() bool {
		return scrape(c.port, "streamkpca_dead_letters_spilled") == 0 && scrape(c.port, "streamkpca_consumer_lag") == 0
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
