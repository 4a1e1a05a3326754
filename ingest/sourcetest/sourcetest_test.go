package sourcetest_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/streamkpca/streamkpca/ingest"
	"github.com/streamkpca/streamkpca/ingest/sourcetest"
	"github.com/streamkpca/streamkpca/internal/testkit"
)

// offByOne reports every message one offset past where it is.
type offByOne struct{ *ingest.MemSource }

func (o offByOne) Fetch(ctx context.Context, max int) (ingest.Batch, error) {
	b, err := o.MemSource.Fetch(ctx, max)
	for i := range b.Messages {
		b.Messages[i].Offset++
	}
	return b, err
}

// hasty answers its first Fetch at once, with an empty batch and no
// error.
type hasty struct {
	*ingest.MemSource
	fetched *atomic.Bool
}

func (h hasty) Fetch(ctx context.Context, max int) (ingest.Batch, error) {
	if !h.fetched.Swap(true) {
		return ingest.Batch{}, nil
	}
	return h.MemSource.Fetch(ctx, max)
}

// stubborn keeps fetching after its context ends.
type stubborn struct{ *ingest.MemSource }

func (s stubborn) Fetch(ctx context.Context, max int) (ingest.Batch, error) {
	b, err := s.MemSource.Fetch(ctx, max)
	if ctx.Err() != nil {
		err = nil
	}
	return b, err
}

// doubling counts every waiting message twice.
type doubling struct{ *ingest.MemSource }

func (d doubling) Lag() int64 { return 2 * d.MemSource.Lag() }

// locking holds its lock while it asks the model for its first offset,
// and Lag takes it: the lock-order deadlock the suite's
// AsksForOffsetsWithoutItsLocks guards against. (Only the first: each
// such call waits out the suite's 10 s, and one shows the deadlock.)
type locking struct {
	*ingest.MemSource
	mu    *sync.Mutex
	asked *atomic.Bool
}

func (l locking) Run(ctx context.Context, next ingest.OffsetFunc) error {
	return l.MemSource.Run(ctx, func(topic string, p int) (int64, bool) {
		if !l.asked.Swap(true) {
			l.mu.Lock()
			defer l.mu.Unlock()
		}
		return next(topic, p)
	})
}

func (l locking) Lag() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.MemSource.Lag()
}

// greedy returns up to twice the messages a Fetch asks for.
type greedy struct{ *ingest.MemSource }

func (g greedy) Fetch(ctx context.Context, max int) (ingest.Batch, error) {
	return g.MemSource.Fetch(ctx, 2*max)
}

// anonymous delivers messages without their topic.
type anonymous struct{ *ingest.MemSource }

func (a anonymous) Fetch(ctx context.Context, max int) (ingest.Batch, error) {
	b, err := a.MemSource.Fetch(ctx, max)
	for i := range b.Messages {
		b.Messages[i].Topic = ""
	}
	return b, err
}

// forgetful asks the model for its offsets and starts every partition
// from the beginning all the same.
type forgetful struct{ *ingest.MemSource }

func (f forgetful) Run(ctx context.Context, next ingest.OffsetFunc) error {
	return f.MemSource.Run(ctx, func(topic string, p int) (int64, bool) {
		next(topic, p)
		return 0, false
	})
}

// TestTheSuiteCanFail: a source that breaks one promise of ingest.Source
// fails the subtest of that promise (and those that rely on it), and
// passes the others.
func TestTheSuiteCanFail(t *testing.T) {
	broken := map[string]func(*ingest.MemSource) ingest.Source{
		"off-by-one": func(s *ingest.MemSource) ingest.Source { return offByOne{s} },
		"hasty":      func(s *ingest.MemSource) ingest.Source { return hasty{s, new(atomic.Bool)} },
		"stubborn":   func(s *ingest.MemSource) ingest.Source { return stubborn{s} },
		"doubling":   func(s *ingest.MemSource) ingest.Source { return doubling{s} },
		"locking":    func(s *ingest.MemSource) ingest.Source { return locking{s, new(sync.Mutex), new(atomic.Bool)} },
		"greedy":     func(s *ingest.MemSource) ingest.Source { return greedy{s} },
		"anonymous":  func(s *ingest.MemSource) ingest.Source { return anonymous{s} },
		"forgetful":  func(s *ingest.MemSource) ingest.Source { return forgetful{s} },
	}
	for name, wrap := range broken {
		if testkit.InChild("SOURCETEST_BROKEN=" + name) {
			sourcetest.Run(t, func(t *testing.T, topic string) (ingest.Source, func(int, ...[]byte)) {
				s := ingest.NewMemSource(topic, 8)
				return wrap(s), func(p int, v ...[]byte) { s.Produce(p, v...) }
			})
			return
		}
	}
	all := []string{"DeliversEveryMessageInOrder", "StartsAtTheModelsOffsets", "LagCountsQueuedMessages",
		"AsksForOffsetsWithoutItsLocks", "FetchReturnsBatchesWithTheirOffsets", "FetchEndsWithItsContext"}
	for name, fails := range map[string][]string{
		// Every offset wrong: the order, the start and each batch's end.
		"off-by-one": {"DeliversEveryMessageInOrder", "StartsAtTheModelsOffsets", "FetchReturnsBatchesWithTheirOffsets"},
		// The first Fetch of each source: an empty batch, then nothing
		// wrong (the suites that take messages skip it).
		"hasty":    {"FetchReturnsBatchesWithTheirOffsets", "FetchEndsWithItsContext"},
		"stubborn": {"FetchEndsWithItsContext"},
		// (A lag that never reaches the count fails too, only after the
		// suite's minute.)
		"doubling": {"LagCountsQueuedMessages"},
		// Lag answers once next returns: the suite waits 10 s for it.
		"locking": {"AsksForOffsetsWithoutItsLocks"},
		// The suite's other takes ask for no more than are left.
		"greedy":    {"FetchReturnsBatchesWithTheirOffsets"},
		"anonymous": {"DeliversEveryMessageInOrder"},
		"forgetful": {"StartsAtTheModelsOffsets"},
	} {
		testkit.ChildFails(t, "SOURCETEST_BROKEN="+name, all, fails)
	}
}
