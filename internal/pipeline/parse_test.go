package pipeline

import (
	"context"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/streamkpca/streamkpca/ingest"
)

// TestParseAheadOrderAndBudget: messages come out parsed and in order,
// parse errors travel with their message, and the stage holds no more
// than its byte budget while the loop releases nothing.
func TestParseAheadOrderAndBudget(t *testing.T) {
	in := make(chan ingest.Message, 16)
	for i := range 10 {
		v := []byte("[" + strconv.Itoa(i) + ",1,2]")
		if i == 3 {
			v = []byte("[3,oops]")
		}
		in <- ingest.Message{Partition: 0, Offset: int64(i), Value: v}
	}
	close(in)
	out := make(chan parsed, 16)
	// Each good message holds 7 bytes of text + 24 of values: the budget
	// of 70 holds two.
	const budget = 70
	sem := semaphore.NewWeighted(budget)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		parseAhead(ctx, ingest.Decoder{Format: ingest.FormatJSON}, in, out, sem, budget)
		close(done)
	}()
	for deadline := time.Now().Add(5 * time.Second); len(out) < 2 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // time for a third, which must not come
	if n := len(out); n != 2 {
		t.Fatalf("%d messages parsed ahead with nothing released, want the 2 the budget holds", n)
	}
	for i := range 10 {
		var pm parsed
		select {
		case pm = <-out:
		case <-time.After(5 * time.Second):
			t.Fatalf("message %d never came", i)
		}
		sem.Release(pm.n)
		if pm.m.Offset != int64(i) {
			t.Fatalf("message %d came as offset %d: out of order", i, pm.m.Offset)
		}
		if i == 3 {
			if ingest.Reason(pm.err) != ingest.ReasonMalformed {
				t.Errorf("bad message: %v, want a malformed parse error", pm.err)
			}
			continue
		}
		if pm.err != nil || len(pm.x) != 3 || pm.x[0] != float64(i) {
			t.Errorf("message %d: %v, %v", i, pm.x, pm.err)
		}
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the stage did not return when its input closed")
	}
}
