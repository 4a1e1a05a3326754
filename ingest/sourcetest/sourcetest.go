// Package sourcetest is the conformance suite every ingest.Source passes:
// the Kafka consumer group (against an in-process broker, in package
// integration) and the in-memory fake the run loop's unit tests use.
package sourcetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/streamkpca/streamkpca/ingest"
)

// Factory returns a new, empty source of topic, and a function that
// appends values to a partition (which must exist for the source; the
// suite uses partitions 0 and 1).
type Factory func(t *testing.T, topic string) (ingest.Source, func(partition int, values ...[]byte))

// Run runs every conformance test against sources from f.
func Run(t *testing.T, f Factory) {
	t.Run("DeliversEveryMessageInOrder", func(t *testing.T) { deliversInOrder(t, f) })
	t.Run("StartsAtTheModelsOffsets", func(t *testing.T) { startsAtOffsets(t, f) })
	t.Run("LagCountsQueuedMessages", func(t *testing.T) { lagCounts(t, f) })
	t.Run("AsksForOffsetsWithoutItsLocks", func(t *testing.T) { asksWithoutLocks(t, f) })
	t.Run("FetchReturnsBatchesWithTheirOffsets", func(t *testing.T) { fetchBatches(t, f) })
	t.Run("FetchEndsWithItsContext", func(t *testing.T) { fetchEnds(t, f) })
}

// fetchBatches: Fetch never returns more than max messages nor an empty
// batch, and a batch's Next is, per partition, one past its last offset.
func fetchBatches(t *testing.T, f Factory) {
	src, produce := f(t, "batches")
	produce(0, values("a", 40)...)
	produce(1, values("b", 40)...)
	run(t, src, none)
	got := 0
	deadline := time.Now().Add(60 * time.Second)
	for got < 80 {
		if time.Now().After(deadline) {
			t.Fatalf("fetched %d of 80 messages", got)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		b, err := src.Fetch(ctx, 7)
		cancel()
		if err != nil {
			continue
		}
		if len(b.Messages) == 0 || len(b.Messages) > 7 {
			t.Fatalf("Fetch(7) returned %d messages", len(b.Messages))
		}
		want := map[int]int64{}
		for _, m := range b.Messages {
			want[m.Partition] = m.Offset + 1
		}
		if fmt.Sprint(want) != fmt.Sprint(b.Next) {
			t.Fatalf("batch offsets %v, its messages end at %v", b.Next, want)
		}
		got += len(b.Messages)
	}
}

// fetchEnds: a Fetch with nothing to return ends when its context does.
func fetchEnds(t *testing.T, f Factory) {
	src, _ := f(t, "empty")
	run(t, src, none)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := src.Fetch(ctx, 10)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Fetch on an empty source returned without a message or an error")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Fetch outlived its context by 30 s")
	}
}

// asksWithoutLocks: the run loop answers next under its own lock and
// calls Lag under it too (its status), so a Source must not hold a lock
// that Lag takes while it calls next: that is a lock-order deadlock
// between the two (it hung the loop's tests once). Here next calls Lag
// itself and must get an answer.
func asksWithoutLocks(t *testing.T, f Factory) {
	src, produce := f(t, "locks")
	produce(0, values("a", 3)...)
	lagAnswered := make(chan bool, 8)
	next := func(string, int) (int64, bool) {
		got := make(chan struct{})
		go func() { src.Lag(); close(got) }()
		select {
		case <-got:
			lagAnswered <- true
		case <-time.After(10 * time.Second):
			lagAnswered <- false
		}
		return 0, false
	}
	run(t, src, next)
	take(t, src, 3)
	select {
	case ok := <-lagAnswered:
		if !ok {
			t.Fatal("Lag blocked while the source was asking for an offset: it holds a lock Lag needs across next")
		}
	case <-time.After(60 * time.Second):
		t.Fatal("next was never called")
	}
}

func values(prefix string, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = []byte(fmt.Sprintf("%s-%d", prefix, i))
	}
	return out
}

func run(t *testing.T, src ingest.Source, next ingest.OffsetFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); src.Run(ctx, next) }()
	t.Cleanup(func() {
		cancel()
		<-done
		src.Close()
	})
}

// take reads n messages or fails after a generous deadline.
func take(t *testing.T, src ingest.Source, n int) []ingest.Message {
	t.Helper()
	out := make([]ingest.Message, 0, n)
	deadline := time.After(60 * time.Second)
	for len(out) < n {
		select {
		case <-deadline:
			t.Fatalf("received %d of %d messages", len(out), n)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		b, err := src.Fetch(ctx, n-len(out))
		cancel()
		if err == nil {
			out = append(out, b.Messages...)
		}
	}
	return out
}

func none(string, int) (int64, bool) { return 0, false }

func deliversInOrder(t *testing.T, f Factory) {
	src, produce := f(t, "order")
	produce(0, values("a", 50)...)
	produce(1, values("b", 30)...)
	run(t, src, none)
	next := map[int]int64{}
	for _, m := range take(t, src, 80) {
		want := fmt.Sprintf("%s-%d", map[int]string{0: "a", 1: "b"}[m.Partition], next[m.Partition])
		if m.Offset != next[m.Partition] || string(m.Value) != want || m.Topic != "order" {
			t.Fatalf("partition %d: got offset %d %q topic %q, want offset %d %q", m.Partition, m.Offset, m.Value, m.Topic, next[m.Partition], want)
		}
		next[m.Partition]++
	}
	produce(0, []byte("a-50"))
	if m := take(t, src, 1)[0]; m.Partition != 0 || m.Offset != 50 {
		t.Fatalf("a message produced while running: partition %d offset %d, want 0 and 50", m.Partition, m.Offset)
	}
}

func startsAtOffsets(t *testing.T, f Factory) {
	src, produce := f(t, "offsets")
	produce(0, values("a", 20)...)
	produce(1, values("b", 20)...)
	run(t, src, func(topic string, p int) (int64, bool) {
		if topic == "offsets" && p == 0 {
			return 15, true
		}
		return 0, false // partition 1: from the start position (earliest)
	})
	got := map[int][]int64{}
	for _, m := range take(t, src, 25) {
		got[m.Partition] = append(got[m.Partition], m.Offset)
	}
	if len(got[0]) != 5 || got[0][0] != 15 {
		t.Errorf("partition 0 delivered offsets %v, want 15…19", got[0])
	}
	if len(got[1]) != 20 || got[1][0] != 0 {
		t.Errorf("partition 1 delivered offsets %v, want 0…19", got[1])
	}
}

func lagCounts(t *testing.T, f Factory) {
	src, produce := f(t, "lag")
	produce(0, values("a", 100)...)
	run(t, src, none)
	// Nothing taken: once fetching has started, the lag counts the
	// waiting messages (queued ones included), give or take the one a
	// fetcher holds while it waits for room; never more than there are.
	deadline := time.Now().Add(60 * time.Second)
	waitLag := func(what string, done func(int64) bool) {
		for {
			l := src.Lag()
			switch {
			case l > 100 || l < 0:
				t.Fatalf("lag %d %s: 100 messages were produced", l, what)
			case done(l):
				return
			case time.Now().After(deadline):
				t.Fatalf("lag %d %s", l, what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitLag("with 100 messages waiting", func(l int64) bool { return l >= 99 })
	take(t, src, 100)
	waitLag("with every message taken", func(l int64) bool { return l == 0 })
}
