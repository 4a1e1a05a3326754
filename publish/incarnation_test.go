package publish

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/streamkpca/streamkpca/snapshot"
)

// goldenAt is the golden model at version v of incarnation inc.
func goldenAt(t *testing.T, inc string, v uint64) (*snapshot.Snapshot, []byte) {
	t.Helper()
	s, _ := golden(t, v)
	s.Header.Incarnation = inc
	data, err := s.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return s, data
}

// publisherFixture: an embedded NATS server, a context that ends with the
// test, model "golden" keeping 3 versions, and its publisher.
func publisherFixture(t *testing.T) (*nats.Conn, context.Context, Config, *Publisher) {
	t.Helper()
	nc := natsServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	cfg := Config{Model: "golden", Keep: 3}
	pub, err := NewPublisher(nc, cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	return nc, ctx, cfg, pub
}

// watched collects what a Watch delivers.
type watched struct {
	mu   sync.Mutex
	got  []Notice
	skip []Notice
}

func (w *watched) last() (Notice, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.got) == 0 {
		return Notice{}, false
	}
	return w.got[len(w.got)-1], true
}

func startWatch(t *testing.T, ctx context.Context, nc *nats.Conn, cfg Config) *watched {
	t.Helper()
	w := &watched{}
	cfg.OnSkip = func(n Notice, err error) {
		w.mu.Lock()
		w.skip = append(w.skip, n)
		w.mu.Unlock()
	}
	go func() {
		_ = Watch(ctx, nc, cfg, func(_ *snapshot.Model, n Notice) {
			w.mu.Lock()
			w.got = append(w.got, n)
			w.mu.Unlock()
		})
	}()
	return w
}

// TestResetWithNATSHistory: a model publishes versions 1…20 (keep 3),
// then starts again without local history (a new incarnation) at
// versions 1…6. Before incarnations, pruning sorted by version deleted
// the version just published (the store held 18, 19, 20 and Latest
// failed with "object not found"), and a Watch stayed on 20. Now the
// store holds the new incarnation's newest versions, Latest returns
// version 6 of it, and a Watch started before the reset follows it.
func TestResetWithNATSHistory(t *testing.T) {
	nc, ctx, cfg, pub := publisherFixture(t)
	for v := uint64(1); v <= 20; v++ {
		s, data := goldenAt(t, "first", v)
		if _, err := pub.Publish(ctx, s, data); err != nil {
			t.Fatal(err)
		}
	}
	w := startWatch(t, ctx, nc, cfg)
	waitFor(t, "the watch at version 20", func() bool { n, ok := w.last(); return ok && n.Version == 20 })

	pub2, err := NewPublisher(nc, cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	for v := uint64(1); v <= 6; v++ {
		s, data := goldenAt(t, "second", v)
		if _, err := pub2.Publish(ctx, s, data); err != nil {
			t.Fatal(err)
		}
	}
	m, n, err := Latest(ctx, nc, cfg)
	if err != nil {
		t.Fatalf("Latest after the reset: %v", err)
	}
	if n.Version != 6 || n.Incarnation != "second" || m.Header().Version() != 6 {
		t.Errorf("Latest after the reset: version %d of %q, want 6 of \"second\"", n.Version, n.Incarnation)
	}
	waitFor(t, "the watch at version 6 of the new incarnation", func() bool {
		n, ok := w.last()
		return ok && n.Version == 6 && n.Incarnation == "second"
	})
	js, _ := jetstream.New(nc)
	obs, err := js.ObjectStore(ctx, "streamkpca-snapshots")
	if err != nil {
		t.Fatal(err)
	}
	lst, err := obs.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range lst {
		names = append(names, o.Metadata[metaIncarnation]+"/"+o.Metadata[metaVersion])
	}
	slices.Sort(names)
	if want := []string{"second/4", "second/5", "second/6"}; !slices.Equal(names, want) {
		t.Errorf("stored after the reset: %v, want %v (the old incarnation superseded, the newest kept)", names, want)
	}
}

// TestPoisonedPointerDoesNotFreezeWatch: one bad write to the latest key
// (version 2⁶⁴−1, naming a missing object). Before, Watch recorded the
// version before fetching it, and every later real version looked older:
// running Watch clients froze. Now the pointer is skipped with a reason
// and the next real version is delivered; Latest falls back to the
// newest stored version that can be fetched.
func TestPoisonedPointerDoesNotFreezeWatch(t *testing.T) {
	nc, ctx, cfg, pub := publisherFixture(t)
	publish := func(v uint64) {
		s, data := goldenAt(t, "inc", v)
		if _, err := pub.Publish(ctx, s, data); err != nil {
			t.Fatal(err)
		}
	}
	for v := uint64(1); v <= 4; v++ {
		publish(v)
	}
	w := startWatch(t, ctx, nc, cfg)
	waitFor(t, "the watch at version 4", func() bool { n, ok := w.last(); return ok && n.Version == 4 })

	js, _ := jetstream.New(nc)
	kv, err := js.KeyValue(ctx, "streamkpca-latest")
	if err != nil {
		t.Fatal(err)
	}
	bad, _ := json.Marshal(Notice{Model: "golden", Incarnation: "inc", Version: 1<<64 - 1, Object: "golden/missing", SHA256: "00"})
	if _, err := kv.Put(ctx, "golden", bad); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the poisoned pointer reported", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return len(w.skip) > 0
	})
	m, n, err := Latest(ctx, nc, cfg)
	if err != nil || n.Version != 4 || m == nil {
		t.Errorf("Latest with a poisoned pointer: version %d, %v; want the newest fetchable, 4", n.Version, err)
	}
	publish(5)
	waitFor(t, "the watch at version 5 after the poisoned pointer", func() bool { n, ok := w.last(); return ok && n.Version == 5 })
}
