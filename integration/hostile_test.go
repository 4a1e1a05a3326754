package integration

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/streamkpca/streamkpca/ingest"
	"github.com/streamkpca/streamkpca/internal/memwatch"
	"github.com/streamkpca/streamkpca/snapshot"
)

// TestHostileStream mixes every class of hostile input into one real
// Kafka stream: a poison first message, a flood of bad messages, huge
// values, 140 KB vectors of the wrong width and messages near the broker's
// size limit. Checked exactly: samples_seen is the good messages, every
// bad one is on the dead-letter topic with its reason (the near-limit ones
// truncated, saying so), the heap stays under the stated bound, and the
// model is bit for bit the one learned from the good messages alone.
func TestHostileStream(t *testing.T) {
	s := startStack(t, map[string]int32{"hostile": 1, "clean": 1})
	const good = 3000
	var msgs [][]byte
	want := map[int64]string{}
	bad := func(reason string, m []byte) {
		want[int64(len(msgs))] = reason
		msgs = append(msgs, m)
	}
	var goodMsgs [][]byte
	bad(ingest.ReasonDimension, []byte("[1e300, 2, 3, 4, 5]")) // poison first: would fix d = 5; the first batch decides d = 1, and it is refused for that
	wide := "[" + strings.Repeat("0.123456789,", 19_999) + "0.5]"
	nearLimit := "[" + strings.Repeat("1,", 519_990) + "1]" // ≈ 1,040,000 bytes
	for i := range good {
		switch {
		case i == 1000:
			for range 2000 {
				bad(ingest.ReasonDimension, []byte("[1, 2]"))
			}
		case i%100 == 50:
			bad(ingest.ReasonOutOfRange, []byte("[1e308]"))
		case i%300 == 150:
			bad(ingest.ReasonDimension, []byte(wide))
		case i%1000 == 700:
			bad(ingest.ReasonDimension, []byte(nearLimit))
		}
		m := []byte(fmt.Sprintf("[%g]", math.Sin(float64(i))*2))
		msgs = append(msgs, m)
		goodMsgs = append(goodMsgs, m)
	}
	produce := func(topic string, ms [][]byte) {
		tr := &kafka.Transport{}
		defer tr.CloseIdleConnections()
		w := &kafka.Writer{Addr: kafka.TCP(s.Brokers()...), Topic: topic, RequiredAcks: kafka.RequireAll,
			BatchSize: 100, BatchBytes: 2 << 20, BatchTimeout: 5 * time.Millisecond, Transport: tr}
		defer w.Close()
		for lo := 0; lo < len(ms); lo += 100 {
			batch := make([]kafka.Message, 0, 100)
			for _, m := range ms[lo:min(lo+100, len(ms))] {
				batch = append(batch, kafka.Message{Value: m})
			}
			if err := w.WriteMessages(context.Background(), batch...); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce("hostile", msgs)
	produce("clean", goodMsgs)
	total := len(msgs)
	msgs, goodMsgs = nil, nil

	learn := func(topic string, n int, peak *uint64) *snapshot.Snapshot {
		cfg := config(s, topic, t.TempDir())
		cfg.NATS.Disabled = true
		cfg.Learner.Linger = time.Hour // batches cut by size only: both streams cut alike
		cfg.Learner.Replay = -1        // revisits come with the time the stream leaves: the two runs' would differ
		cfg.Kafka.QueueBytes = 16 << 20
		r := start(t, cfg)
		var stopWatch func() uint64
		if peak != nil {
			stopWatch = memwatch.Start(20 * time.Millisecond)
		}
		waitFor(t, 3*time.Minute, "every message consumed", func() bool { return r.p.Status().Consumed == uint64(n) })
		r.graceful(t)
		if stopWatch != nil {
			*peak = stopWatch()
		}
		snap, _, err := (&snapshot.Store{Dir: cfg.Snapshot.Dir, Model: cfg.Model}).Latest()
		if err != nil {
			t.Fatal(err)
		}
		return snap
	}
	runtime.GC()
	var peak uint64
	hostile := learn("hostile", total, &peak)
	clean := learn("clean", good, nil)

	if hostile.Header.SamplesSeen != good || clean.Header.SamplesSeen != good {
		t.Fatalf("samples_seen %d (hostile) and %d (clean), want %d", hostile.Header.SamplesSeen, clean.Header.SamplesSeen, good)
	}
	if len(hostile.Coef[0]) != len(clean.Coef[0]) {
		t.Fatalf("%d coefficients (hostile) vs %d (clean)", len(hostile.Coef[0]), len(clean.Coef[0]))
	}
	for i, v := range clean.Coef[0] {
		if math.Float64bits(hostile.Coef[0][i]) != math.Float64bits(v) {
			t.Fatalf("coefficient %d: %v (hostile) vs %v (clean): the bad messages changed the model", i, hostile.Coef[0][i], v)
		}
	}
	// The stated bound: kafka.queue_bytes (16 MiB here) + the dead-letter
	// queue's 16 MiB + per partition one fetch of max_message_bytes and the
	// reader's 16 messages (≈ 18 MiB) + the features kept for one batch
	// (512 × 8,192 × 8 = 32 MiB), with room for the collector (GOGC=100
	// lets the heap reach twice what is live) and the test's brokers.
	const bound = 2*(16+16+18+32)<<20 + 128<<20
	t.Logf("peak heap in use %d MiB (bound %d MiB)", peak>>20, bound>>20)
	if peak > bound {
		t.Errorf("peak heap in use %d MiB, over the bound %d MiB", peak>>20, bound>>20)
	}

	headers, sizes := deadLetters(t, s, "hostile.dlq", len(want))
	got := map[int64]string{}
	truncated := 0
	for off, h := range headers {
		got[off] = h["reason"]
		if h["truncated"] == "true" {
			truncated++
			if h["original-size"] != strconv.Itoa(len(nearLimit)) || sizes[off] != ingest.DefaultDeadLetterMaxBytes {
				t.Errorf("truncated dead letter: original-size %s, %d bytes kept", h["original-size"], sizes[off])
			}
		}
	}
	for off, reason := range want {
		if got[off] != reason {
			t.Errorf("offset %d: dead-lettered as %q, want %q", off, got[off], reason)
		}
	}
	if truncated != 3 {
		t.Errorf("%d truncated dead letters, want the 3 near-limit messages", truncated)
	}
}
