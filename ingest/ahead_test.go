package ingest

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sync/semaphore"
)

// TestAheadOrderAndBudget: messages come out parsed and in order, in
// slices of at most a fetch, parse errors travel with their message, and
// the stage holds no more than its byte budget while the loop releases
// nothing; it returns when its context ends.
func TestAheadOrderAndBudget(t *testing.T) {
	src := NewMemSource("p", 16)
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
	out := make(chan []Parsed, 16)
	// Each good message holds 7 bytes of text + 24 of values: the budget
	// of 70 holds two.
	const budget = 70
	sem := semaphore.NewWeighted(budget)
	var ahead atomic.Int64
	done := make(chan struct{})
	go func() {
		Ahead{Source: src, Decoder: Decoder{Format: FormatJSON}, Log: zerolog.Nop(), Max: 4, Budget: sem, Bytes: budget, Pending: &ahead}.Run(ctx, out)
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
		var ps []Parsed
		select {
		case ps = <-out:
		case <-time.After(5 * time.Second):
			t.Fatalf("message %d never came", i)
		}
		if len(ps) == 0 || len(ps) > 4 {
			t.Fatalf("a slice of %d messages from fetches of at most 4", len(ps))
		}
		for _, pm := range ps {
			sem.Release(pm.Bytes)
			ahead.Add(-1)
			if pm.Msg.Offset != int64(i) {
				t.Fatalf("message %d came as offset %d: out of order", i, pm.Msg.Offset)
			}
			if i == 3 {
				if Reason(pm.Err) != ReasonMalformed {
					t.Errorf("bad message: %v, want a malformed parse error", pm.Err)
				}
			} else if pm.Err != nil || len(pm.X) != 3 || pm.X[0] != float64(i) {
				t.Errorf("message %d: %v, %v", i, pm.X, pm.Err)
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

// failingSource is a source whose Fetch fails until ok is set.
type failingSource struct {
	*MemSource
	calls atomic.Int64
	ok    atomic.Bool
}

func (s *failingSource) Fetch(ctx context.Context, max int) (Batch, error) {
	s.calls.Add(1)
	if !s.ok.Load() {
		return Batch{}, errors.New("broker unreachable")
	}
	return s.MemSource.Fetch(ctx, max)
}

// TestAheadBacksOffAFailingFetch: a Fetch that fails (not for the
// context) is logged once and retried with a doubling back-off, its unit
// in the field's name. Before, it was retried in a tight loop with no log:
// millions of calls a second, a core busy, nothing said.
func TestAheadBacksOffAFailingFetch(t *testing.T) {
	src := &failingSource{MemSource: NewMemSource("p", 16)}
	src.Produce(0, []byte("[1,2]"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go src.Run(ctx, func(string, int) (int64, bool) { return 0, false })
	var logs bytes.Buffer
	out := make(chan []Parsed, 4)
	var ahead atomic.Int64
	go Ahead{Source: src, Decoder: Decoder{Format: FormatJSON}, Log: zerolog.New(&logs), Max: 4, Budget: semaphore.NewWeighted(1 << 20), Bytes: 1 << 20, Pending: &ahead}.Run(ctx, out)
	time.Sleep(time.Second) // 100 + 200 + 400 ms of back-off: 4 calls
	if n := src.calls.Load(); n > 10 {
		t.Errorf("%d fetches in a second while the source fails: want a back-off", n)
	}
	src.ok.Store(true)
	select {
	case ps := <-out:
		if len(ps) != 1 {
			t.Errorf("%d messages after the source recovered, want 1", len(ps))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("nothing fetched after the source recovered")
	}
	l := logs.String()
	if strings.Count(l, "fetching from the source failed") != 1 || !strings.Contains(l, `"retry_in_ms":100`) || !strings.Contains(l, "works again") {
		t.Errorf("logs: want one warning with retry_in_ms, then one recovery line:\n%s", l)
	}
}
