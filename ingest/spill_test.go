package ingest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// Defect (issue 58, item 6): a dead-letter topic that refuses writes
// (an ACL, a missing topic) held every batch in memory, retried forever,
// and the service's snapshots waited for it: no durable progress, and a
// full queue blocked the loop. Now the refused batches go to a bounded
// spill file: a flush completes once they are there, the queue is not
// Failing, and the spill survives a close and a restart, whose queue
// sends it when the topic takes writes again — every record, with its
// reason and headers.
func TestDeadLetterSpillTakesWhatTheTopicRefuses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.dead-letters")
	sp, err := OpenSpill(path, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	w := &MemDeadLetter{Fail: errors.New("TOPIC_AUTHORIZATION_FAILED")}
	q := NewDeadLetterQueue(w, 8, 1<<20, sp, nil)
	ctx := context.Background()
	for i := range 100 {
		rec := DeadLetterRecord{Msg: Message{Partition: 1, Offset: int64(i), Value: []byte("bad " + strconv.Itoa(i)), Headers: []kafka.Header{{Key: "h", Value: []byte{byte(i)}}}},
			Reason: "malformed", Error: "row " + strconv.Itoa(i)}
		ectx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if err := q.Enqueue(ectx, rec); err != nil {
			t.Fatalf("enqueue %d blocked while the topic refuses writes: %v", i, err)
		}
		cancel()
	}
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	if err := q.Flush(fctx); err != nil {
		t.Fatalf("flush with the topic refusing and room in the spill: %v", err)
	}
	cancel()
	if q.Failing() {
		t.Error("Failing with every record spilled: snapshots would wait")
	}
	if n, _ := q.Spilled(); n != 100 {
		t.Errorf("%d records spilled; want 100", n)
	}
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	q.Close(cctx)
	cancel()

	sp2, err := OpenSpill(path, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := sp2.Len(); n != 100 {
		t.Fatalf("the spill holds %d records after a restart; want 100", n)
	}
	w2 := &MemDeadLetter{}
	q2 := NewDeadLetterQueue(w2, 8, 1<<20, sp2, nil)
	defer q2.Close(ctx)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if recs, _ := w2.Records(); len(recs) == 100 {
			seen := map[int64]bool{}
			for _, r := range recs {
				i := r.Msg.Offset
				if r.Reason != "malformed" || r.Error != "row "+strconv.FormatInt(i, 10) || string(r.Msg.Value) != "bad "+strconv.FormatInt(i, 10) ||
					len(r.Msg.Headers) != 1 || r.Msg.Headers[0].Value[0] != byte(i) || r.Msg.Partition != 1 {
					t.Fatalf("record %d came back as %+v", i, r)
				}
				seen[i] = true
			}
			if len(seen) != 100 {
				t.Fatalf("%d distinct records of 100", len(seen))
			}
			break
		}
		if time.Now().After(deadline) {
			recs, _ := w2.Records()
			t.Fatalf("%d of 100 spilled records sent after the restart", len(recs))
		}
		time.Sleep(5 * time.Millisecond)
	}
	for n, _ := q2.Spilled(); n != 0; n, _ = q2.Spilled() {
		if time.Now().After(deadline) {
			t.Fatalf("the spill still counts %d records once sent", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("the spill file is still there once sent: %v", err)
	}
}

// A full spill takes nothing more: the queue retries as before and
// Failing says so (snapshots wait); nothing is dropped.
func TestAFullSpillFallsBackToRetrying(t *testing.T) {
	sp, err := OpenSpill(filepath.Join(t.TempDir(), "m.dead-letters"), 300)
	if err != nil {
		t.Fatal(err)
	}
	w := &MemDeadLetter{Fail: errors.New("down")}
	q := NewDeadLetterQueue(w, 8, 1<<20, sp, nil)
	defer q.Close(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for i := range 20 {
			q.Enqueue(ctx, DeadLetterRecord{Msg: Message{Offset: int64(i), Value: make([]byte, 100)}, Reason: "malformed"})
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !q.Failing() {
		if time.Now().After(deadline) {
			t.Fatal("a full spill: the queue does not say Failing")
		}
		time.Sleep(time.Millisecond)
	}
	w.SetFail(nil)
	for {
		recs, _ := w.Records()
		if n, _ := q.Spilled(); len(recs) == 20 && n == 0 {
			break
		}
		if time.Now().After(deadline) {
			n, _ := q.Spilled()
			t.Fatalf("%d of 20 records stored, %d still spilled", len(recs), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
