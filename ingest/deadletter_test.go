package ingest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

func header(t *testing.T, hs []struct{ k, v string }, key string) string {
	t.Helper()
	for _, h := range hs {
		if h.k == key {
			return h.v
		}
	}
	return ""
}

// Defect: a message near the broker's size limit could not be
// dead-lettered at all (its copy plus headers exceeded the limit). Its
// truncated copy says so, with the original size and hash.
func TestDeadLetterMessageTruncatesNearTheLimit(t *testing.T) {
	value := bytes.Repeat([]byte("9,"), 600_000) // 1.2 MB
	rec := DeadLetterRecord{Msg: Message{Topic: "v", Partition: 3, Offset: 42, Value: value}, Reason: ReasonOversized, Error: "too big"}
	m := DeadLetterMessage(rec, DefaultDeadLetterMaxBytes)
	var hs []struct{ k, v string }
	size := len(m.Key) + len(m.Value)
	for _, h := range m.Headers {
		hs = append(hs, struct{ k, v string }{h.Key, string(h.Value)})
		size += len(h.Key) + len(h.Value)
	}
	if size > 1<<20 {
		t.Errorf("dead letter of %d bytes exceeds the 1 MiB broker default", size)
	}
	sum := sha256.Sum256(value)
	for k, want := range map[string]string{
		"truncated": "true", "original-size": strconv.Itoa(len(value)), "original-sha256": hex.EncodeToString(sum[:]),
		"reason": ReasonOversized, "source-partition": "3", "source-offset": "42", "source-topic": "v",
	} {
		if got := header(t, hs, k); got != want {
			t.Errorf("header %s = %q, want %q", k, got, want)
		}
	}
	if !bytes.Equal(m.Value, value[:len(m.Value)]) {
		t.Error("the truncated value is not a prefix of the original")
	}
	small := DeadLetterMessage(DeadLetterRecord{Msg: Message{Value: []byte("1,2")}, Reason: ReasonDimension, Error: "x"}, DefaultDeadLetterMaxBytes)
	if string(small.Value) != "1,2" || len(small.Headers) != 10 { // 5 of the service's, 5 in Connect's names
		t.Errorf("a small dead letter was changed: %q with %d headers", small.Value, len(small.Headers))
	}
}

// Flush returns only once every record enqueued before it is written, and
// records are written in order and in batches.
func TestDeadLetterQueueFlushAndOrder(t *testing.T) {
	w := &MemDeadLetter{Delay: time.Millisecond}
	q := NewDeadLetterQueue(w, 64, 1<<20, nil, nil)
	ctx := context.Background()
	for i := range 1000 {
		if err := q.Enqueue(ctx, DeadLetterRecord{Msg: Message{Offset: int64(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	recs, writes := w.Records()
	if len(recs) != 1000 {
		t.Fatalf("%d records written before Flush returned, want 1000", len(recs))
	}
	for i, r := range recs {
		if r.Msg.Offset != int64(i) {
			t.Fatalf("record %d has offset %d", i, r.Msg.Offset)
		}
	}
	if writes >= 1000 {
		t.Errorf("%d writes for 1000 records", writes)
	}
	if err := q.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// Defect: a failed dead-letter write was only counted, and the flush
// that precedes a snapshot then succeeded, so the snapshot's offsets
// covered messages neither learned nor dead-lettered. A failing writer
// now reports each failure and the queue writes the batch again until it
// is stored; a flush waits for that (or its deadline, an error) and
// Failing says so meanwhile.
func TestDeadLetterQueueRetriesUntilStored(t *testing.T) {
	w := &MemDeadLetter{Fail: errors.New("down")}
	var failed atomic.Int64
	q := NewDeadLetterQueue(w, 8, 1<<20, nil, func(recs []DeadLetterRecord, err error) { failed.Add(int64(len(recs))) })
	ctx := context.Background()
	go func() {
		for i := range 100 {
			q.Enqueue(ctx, DeadLetterRecord{Reason: strconv.Itoa(i)})
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for failed.Load() < 3 || !q.Failing() {
		if time.Now().After(deadline) {
			t.Fatalf("no failures reported (%d)", failed.Load())
		}
		time.Sleep(time.Millisecond)
	}
	fctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	if err := q.Flush(fctx); err == nil {
		t.Fatal("Flush returned nil while the dead-letter topic refuses writes")
	}
	cancel()
	w.SetFail(nil)
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for {
		if recs, _ := w.Records(); len(recs) == 100 {
			break
		}
		if cctx.Err() != nil {
			t.Fatal("the dead letters were not all stored after the writer recovered")
		}
		time.Sleep(time.Millisecond)
	}
	if err := q.Close(cctx); err != nil {
		t.Fatal(err)
	}
	recs, _ := w.Records()
	for i, r := range recs {
		if r.Reason != strconv.Itoa(i) {
			t.Fatalf("record %d is %q: every dead letter stored once, in order", i, r.Reason)
		}
	}
	if q.Failing() {
		t.Error("Failing after the writes succeeded")
	}
}

// Defect: the queue between fetching and learning was bounded in messages
// only (4,096 messages of 140 KB took 2.2 GB). It is bounded in bytes too.
func TestByteQueueBoundsBytes(t *testing.T) {
	q := newByteQueue(1000, 10_000)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	put := make(chan int, 100)
	go func() {
		for i := range 100 {
			if q.put(ctx, Message{Offset: int64(i), Value: make([]byte, 3000)}, 0, false) != nil {
				return
			}
			put <- i
		}
	}()
	// Three values of 3,000 bytes fit in 10,000; the fourth waits.
	deadline := time.Now().Add(10 * time.Second)
	for len(put) < 3 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	if n := len(put); n != 3 {
		t.Fatalf("%d messages of 3,000 bytes queued under a 10,000-byte bound, want 3", n)
	}
	if q.len() != 3 || q.heldBytes() != 9000 {
		t.Errorf("len %d, %d bytes held; want 3 and 9,000", q.len(), q.heldBytes())
	}
	for i := 0; i < 100; {
		tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		ms, _, _, err := q.take(tctx, 4)
		cancel()
		if err != nil {
			t.Fatalf("message %d never arrived", i)
		}
		if len(ms) > 4 {
			t.Fatalf("take(4) returned %d messages", len(ms))
		}
		for _, m := range ms {
			if m.Offset != int64(i) {
				t.Fatalf("message %d has offset %d", i, m.Offset)
			}
			i++
		}
	}
	for deadline := time.Now().Add(10 * time.Second); q.heldBytes() != 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if q.heldBytes() != 0 {
		t.Errorf("%d bytes held with every message taken, want 0", q.heldBytes())
	}
	// A value larger than the whole bound still passes, alone, counted
	// as the bound.
	go func() { q.put(ctx, Message{Value: make([]byte, 50_000)}, 0, false) }()
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, _, _, err := q.take(tctx, 1); err != nil {
		t.Fatal("a message larger than the byte bound was never delivered")
	}
}

// TestQueueBatchesOneGeneration: a take never mixes messages read in two
// generations of the group (a cluster member drops the older ones after a
// rebalance), and the message that ends a take starts the next.
func TestQueueBatchesOneGeneration(t *testing.T) {
	q := newByteQueue(16, 1<<20)
	ctx := context.Background()
	for i, gen := range []int32{1, 1, 2, 2, 2, 3} {
		if err := q.put(ctx, Message{Offset: int64(i), Value: []byte("v")}, gen, false); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for range 3 {
		ms, gen, _, err := q.take(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("gen %d: %d from %d", gen, len(ms), ms[0].Offset))
	}
	if want := []string{"gen 1: 2 from 0", "gen 2: 3 from 2", "gen 3: 1 from 5"}; !slices.Equal(got, want) {
		t.Errorf("takes %v, want %v", got, want)
	}
	if q.len() != 0 || q.heldBytes() != 0 {
		t.Errorf("%d messages and %d bytes left", q.len(), q.heldBytes())
	}
}

// The queue is bounded in bytes: with the writer stuck, records wait for
// room instead of piling up (4,096 near-limit values would be 4 GiB).
func TestDeadLetterQueueBoundsBytes(t *testing.T) {
	w := &MemDeadLetter{Delay: time.Hour}
	q := NewDeadLetterQueue(w, 4096, 10_000, nil, nil)
	defer q.stop()
	rec := DeadLetterRecord{Msg: Message{Value: make([]byte, 3000)}}
	ctx := context.Background()
	// Bytes are released once written; the writer is stuck, so three
	// records fit in 10,000 bytes and the fourth waits.
	queued := 0
	for range 10 {
		cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		err := q.Enqueue(cctx, rec)
		cancel()
		if err != nil {
			break
		}
		queued++
	}
	if queued != 3 {
		t.Errorf("%d records of 3,000 bytes queued under a 10,000-byte bound, want 3", queued)
	}
}

// Issue 61: the dead letters carry Kafka Connect's header names beside
// the service's own, so that tools written for Connect's dead-letter
// topics read them (values as Connect writes them: decimal strings).
func TestDeadLetterHeadersInConnectsNames(t *testing.T) {
	m := DeadLetterMessage(DeadLetterRecord{Msg: Message{Topic: "vectors", Partition: 3, Offset: 1234, Value: []byte("x")}, Reason: ReasonMalformed, Error: "json: want an array"}, 1<<20)
	got := map[string]string{}
	for _, h := range m.Headers {
		got[h.Key] = string(h.Value)
	}
	want := map[string]string{
		"__connect.errors.topic": "vectors", "__connect.errors.partition": "3", "__connect.errors.offset": "1234",
		"__connect.errors.exception.class.name": "streamkpca.ingest.BadMessageError.malformed",
		"__connect.errors.exception.message":    "json: want an array",
		"reason":                                "malformed", "source-offset": "1234",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("header %s = %q; want %q", k, got[k], v)
		}
	}
}
