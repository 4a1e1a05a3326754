package pipeline

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/streamkpca/streamkpca/ingest"
)

// TestParseAheadOrderAndBudget: messages come out parsed and in order, in
// slices of at most a fetch, parse errors travel with their message, and
// the stage holds no more than its byte budget while the loop releases
// nothing; it returns when its context ends.
func TestParseAheadOrderAndBudget(t *testing.T) {
	src := ingest.NewMemSource("p", 16)
	for i := range 10 {
		v := []byte("[" + strconv.Itoa(i) + ",1,2]")
		if i == 3 {
			v = []byte("[3,oops]")
		}
		src.Produce(0, v)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go src.Run(ctx, func(string, int) (int64, bool) { return 0, false })
	out := make(chan []parsed, 16)
	// Each good message holds 7 bytes of text + 24 of values: the budget
	// of 70 holds two.
	const budget = 70
	sem := semaphore.NewWeighted(budget)
	var ahead atomic.Int64
	done := make(chan struct{})
	go func() {
		parseAhead(ctx, ingest.Decoder{Format: ingest.FormatJSON}, src, out, sem, budget, 4, &ahead)
		close(done)
	}()
	for deadline := time.Now().Add(5 * time.Second); ahead.Load() < 2 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // time for a third, which must not come
	if n := ahead.Load(); n != 2 {
		t.Fatalf("%d messages parsed ahead with nothing released, want the 2 the budget holds", n)
	}
	for i := 0; i < 10; {
		var ps []parsed
		select {
		case ps = <-out:
		case <-time.After(5 * time.Second):
			t.Fatalf("message %d never came", i)
		}
		if len(ps) == 0 || len(ps) > 4 {
			t.Fatalf("a slice of %d messages from fetches of at most 4", len(ps))
		}
		for _, pm := range ps {
			sem.Release(pm.n)
			ahead.Add(-1)
			if pm.m.Offset != int64(i) {
				t.Fatalf("message %d came as offset %d: out of order", i, pm.m.Offset)
			}
			if i == 3 {
				if ingest.Reason(pm.err) != ingest.ReasonMalformed {
					t.Errorf("bad message: %v, want a malformed parse error", pm.err)
				}
			} else if pm.err != nil || len(pm.x) != 3 || pm.x[0] != float64(i) {
				t.Errorf("message %d: %v, %v", i, pm.x, pm.err)
			}
			i++
		}
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the stage did not return when its context ended")
	}
}
