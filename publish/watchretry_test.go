package publish

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/streamkpca/streamkpca/internal/testkit"
	"github.com/streamkpca/streamkpca/snapshot"
)

// Defect (suspected in a red CI run of TestNATSClusterServerLoss, where a
// reader stayed on an older version after a stream leader's loss): a
// fetch of the newest version that met a passing fault was reported and
// never tried again, so the reader stayed on the version before until a
// newer one was published — forever, on a model that had stopped. Now the
// fetch is tried again with a backoff.
func TestWatchRetriesAFailedFetch(t *testing.T) {
	b := NewMemBackend()
	cfg := Config{Model: "golden"}
	pub, err := NewPublisherOn(b, cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	s, data := testkit.Golden(t, 7)
	if _, err := pub.Publish(context.Background(), s, data); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	failures := 2 // the first two fetches meet a fault
	b.SetFail(func(method string) error {
		mu.Lock()
		defer mu.Unlock()
		if method == "GetObject" && failures > 0 {
			failures--
			return errors.New("no response from stream")
		}
		return nil
	})
	var skips int
	cfg.OnSkip = func(Notice, error) { mu.Lock(); skips++; mu.Unlock() }
	got := make(chan uint64, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go WatchFrom(ctx, b, cfg, func(m *snapshot.Model, n Notice) { got <- n.Version })
	select {
	case v := <-got:
		if v != 7 {
			t.Fatalf("delivered version %d, want 7", v)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the newest version was not delivered within 10 s of two failed fetches")
	}
	mu.Lock()
	defer mu.Unlock()
	if skips != 2 {
		t.Errorf("%d fetches reported as skipped, want 2", skips)
	}
}
