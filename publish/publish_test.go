package publish

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/streamkpca/streamkpca/internal/testkit"
	"github.com/streamkpca/streamkpca/snapshot"
)

func TestPublishWatchLatest(t *testing.T) {
	nc := testkit.NATS(t, nil)
	cfg := Config{Model: "golden", Keep: 2}
	pub, err := NewPublisher(nc, cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Notices on the updates subject.
	notices := make(chan Notice, 10)
	sub, _ := nc.Subscribe("streamkpca.golden.updates", func(m *nats.Msg) {
		var n Notice
		json.Unmarshal(m.Data, &n)
		notices <- n
	})
	defer sub.Unsubscribe()
	for v := uint64(1); v <= 3; v++ {
		s, data := testkit.Golden(t, v)
		// The held-out score and the changes detected travel with the
		// notice.
		s.Header.Diagnostics.Quality = &snapshot.Quality{Score: 0.5 + float64(v)/10, Components: []float64{0.5, float64(v) / 10}, Points: 1024}
		s.Header.Diagnostics.Changes = v - 1
		if _, err := pub.Publish(ctx, s, data); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var got []uint64
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- Watch(wctx, nc, cfg, func(m *snapshot.Model, n Notice) {
			mu.Lock()
			got = append(got, n.Version)
			mu.Unlock()
		})
	}()
	// The watcher starts with the current version…
	testkit.WaitFor(t, "the current version", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 1 })
	for v := uint64(4); v <= 5; v++ {
		s, data := testkit.Golden(t, v)
		if _, err := pub.Publish(ctx, s, data); err != nil {
			t.Fatal(err)
		}
	}
	// …then sees every newer one in order.
	testkit.WaitFor(t, "versions 4 and 5", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 3 })
	cancel()
	if err := <-done; err != context.Canceled {
		t.Errorf("Watch returned %v, want context.Canceled", err)
	}
	if fmt.Sprint(got) != "[3 4 5]" {
		t.Errorf("watched versions %v, want [3 4 5]", got)
	}
	m, n, err := Latest(ctx, nc, cfg)
	if err != nil || n.Version != 5 || m.Header().Version() != 5 {
		t.Fatalf("Latest = %v %v", n.Version, err)
	}
	for i := 1; i <= 5; i++ {
		select {
		case n := <-notices:
			if n.Version != uint64(i) || n.Object != ObjectName("golden", "", uint64(i)) || len(n.SHA256) != 64 {
				t.Errorf("notice %d: %+v", i, n)
			}
			if i <= 3 && (n.Quality == nil || n.Quality.Score != 0.5+float64(i)/10 || n.Changes != uint64(i-1)) {
				t.Errorf("notice %d: quality %+v, changes %d; want the snapshot's", i, n.Quality, n.Changes)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("notice %d not received", i)
		}
	}
	// Retention: only the newest Keep = 2 objects remain.
	lst, _ := pub.b.ListObjects(ctx)
	if len(lst) != 2 {
		t.Errorf("object store holds %d versions, want 2", len(lst))
	}
}

// Watch follows the served version: a pin to an older version, then the
// newest again after unpinning.
func TestWatchFollowsPin(t *testing.T) {
	nc := testkit.NATS(t, nil)
	cfg := Config{Model: "golden"}
	pub, err := NewPublisher(nc, cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	models := map[uint64][]byte{}
	for _, v := range []uint64{4, 9} {
		s, data := testkit.Golden(t, v)
		if _, err := pub.Publish(ctx, s, data); err != nil {
			t.Fatal(err)
		}
		models[v] = data
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	reader, err := NewNATSBackend(nc, cfg, false) // what Watch reads through
	if err != nil {
		t.Fatal(err)
	}
	seen := watchVersions(wctx, reader, cfg)
	testkit.WaitFor(t, "the newest version", seen(9))
	s4, _ := testkit.Golden(t, 4)
	m4, _ := snapshot.NewModel(s4, snapshot.ModelOptions{})
	if err := pub.Pin(ctx, m4, models[4]); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the pinned version", seen(9, 4))
	s10, data10 := testkit.Golden(t, 10)
	if _, err := pub.Publish(ctx, s10, data10); err != nil { // learning goes on while pinned
		t.Fatal(err)
	}
	if err := pub.Unpin(ctx); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the newest version after unpinning", seen(9, 4, 10))
	// A Watch started while pinned starts at the pinned version.
	if err := pub.Pin(ctx, m4, models[4]); err != nil {
		t.Fatal(err)
	}
	var first atomic.Uint64
	go Watch(wctx, nc, cfg, func(m *snapshot.Model, n Notice) { first.CompareAndSwap(0, n.Version) })
	testkit.WaitFor(t, "a new watcher's first version", func() bool { return first.Load() != 0 })
	if first.Load() != 4 {
		t.Errorf("a watcher started while pinned to 4 began at %d", first.Load())
	}
}

// watchVersions follows b with WatchFrom until ctx ends; the function it
// returns reports whether the versions delivered so far are want.
func watchVersions(ctx context.Context, b Backend, cfg Config) (seen func(want ...uint64) func() bool) {
	var mu sync.Mutex
	var got []uint64
	go WatchFrom(ctx, b, cfg, func(_ *snapshot.Model, n Notice) {
		mu.Lock()
		got = append(got, n.Version)
		mu.Unlock()
	})
	return func(want ...uint64) func() bool {
		return func() bool { mu.Lock(); defer mu.Unlock(); return slices.Equal(got, want) }
	}
}

// TestPublishedBytesLeaveLearnerStateOut: whatever learner state a stored
// snapshot holds — the change detector's alone included, as an oja or a
// two-view learner writes it — its published form holds none of it (the
// form snapshot.Served defines).
func TestPublishedBytesLeaveLearnerStateOut(t *testing.T) {
	s, data := testkit.Golden(t, 3)
	s.Header.Detector = &snapshot.Detector{Batches: 4, Points: 64, Mean: 0.7, Var: 0.01}
	withState, err := s.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	got, err := PublishedBytes(s, withState)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("published bytes of a snapshot with detector state: %d bytes, want the %d of the model without it", len(got), len(data))
	}
}

// closingBackend is a MemBackend whose key watch ends at once.
type closingBackend struct{ *MemBackend }

func (closingBackend) WatchKeys(ctx context.Context, keys []string) (<-chan KeyUpdate, error) {
	ch := make(chan KeyUpdate)
	close(ch)
	return ch, nil
}

// TestWatchReportsAClosedWatch: a key watch that ends while the caller's
// context is live is an error Watch returns (ErrWatchClosed), not a
// silent nil that a reader such as `streamkpca watch` takes for a clean
// stop.
func TestWatchReportsAClosedWatch(t *testing.T) {
	err := WatchFrom(context.Background(), closingBackend{NewMemBackend()}, Config{Model: "golden"}, func(*snapshot.Model, Notice) {})
	if !errors.Is(err, ErrWatchClosed) {
		t.Fatalf("Watch returned %v, want ErrWatchClosed", err)
	}
}

// Defect: with the JetStream store full (say after an operator purge
// filled it again with the service's own nats.keep versions) publishing
// failed for good: old versions were pruned only after a successful put.
// Now a put the store has no room for deletes the oldest version no
// reader needs (never the one the latest pointer names, never the pinned
// one) and tries again: every version is published.
func TestPublishPrunesToFit(t *testing.T) {
	b := NewMemBackend()
	_, one := testkit.Golden(t, 1)
	b.MaxBytes = 3*len(one) + len(one)/2 // room for three versions
	pub := goldenPublisher(t, b, 5)
	ctx := context.Background()
	for v := uint64(1); v <= 8; v++ {
		s, data := testkit.Golden(t, v)
		if v == 4 { // pin version 2 while 3 is the newest
			m, d := testkit.Golden(t, 2)
			mm, _ := snapshot.NewModel(m, snapshot.ModelOptions{})
			if err := pub.Pin(ctx, mm, d); err != nil {
				t.Fatalf("pin 2: %v", err)
			}
		}
		if _, err := pub.Publish(ctx, s, data); err != nil {
			t.Fatalf("publish %d into a full store: %v", v, err)
		}
	}
	m, n, err := LatestFrom(ctx, b, Config{Model: "golden"})
	if err != nil || n.Version != 8 || m.Header().Version() != 8 {
		t.Fatalf("latest: version %d (%v), want 8", n.Version, err)
	}
	if names := storedNames(t, b); !slices.Contains(names, ObjectName("golden", "", 2)) || !slices.Contains(names, ObjectName("golden", "", 8)) || len(names) > 3 {
		t.Errorf("stored %v: want the pinned version 2 and the newest 8, within room for three", names)
	}
}

// TestPublishPrunesToFitNATS: as TestPublishPrunesToFit against a real
// nats-server whose JetStream storage (max_file_store) is used up: the
// server's "insufficient resources" is read as ErrStoreFull and every
// version is still published.
func TestPublishPrunesToFitNATS(t *testing.T) {
	nc := testkit.NATS(t, func(o *server.Options) { o.JetStreamMaxStore = 96 << 10 })
	pub, err := NewPublisher(nc, Config{Model: "golden", Keep: 1000}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	full := false
	for v := uint64(1); v <= 300; v++ {
		s, data := testkit.Golden(t, v)
		if _, err := pub.Publish(ctx, s, data); err != nil {
			t.Fatalf("publish %d: %v", v, err)
		}
		if lst, _ := pub.b.ListObjects(ctx); len(lst) < int(v) {
			full = true
		}
	}
	if !full {
		t.Fatal("300 versions fit in the store: the test never filled it")
	}
	if _, n, err := Latest(ctx, nc, Config{Model: "golden"}); err != nil || n.Version != 300 {
		t.Fatalf("latest: version %d (%v), want 300", n.Version, err)
	}
	// An operator purges the object store's stream (issue 43: the service
	// then filled the store with its own versions again and stuck, 25
	// versions behind the one it served): every later version is
	// published and is the latest.
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, "OBJ_"+DefaultObjectBucket)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	for v := uint64(301); v <= 500; v++ {
		s, data := testkit.Golden(t, v)
		if _, err := pub.Publish(ctx, s, data); err != nil {
			t.Fatalf("publish %d after the purge: %v", v, err)
		}
		if _, n, err := Latest(ctx, nc, Config{Model: "golden"}); err != nil || n.Version != v {
			t.Fatalf("after the purge, latest is version %d (%v) once %d is published", n.Version, err, v)
		}
	}
}

// Defect: every GET …/versions (and its NATS request) read, re-encoded
// and hashed every stored snapshot. List now reads a version once, and
// again only when its file changes; the figures are the same.
func TestVersionsListReadsEachVersionOnce(t *testing.T) {
	store := testkit.GoldenStore(t, 1, 2, 3)
	vs := NewStoreVersions(store)
	first, err := vs.List()
	if err != nil || len(first) != 3 || vs.reads != 3 {
		t.Fatalf("first list: %d versions (%v), %d files read; want 3, 3", len(first), err, vs.reads)
	}
	again, _ := vs.List()
	if !slices.Equal(again, first) || vs.reads != 3 {
		t.Fatalf("second list: %d files read (want none more), same figures %v", vs.reads-3, slices.Equal(again, first))
	}
	s, _ := testkit.Golden(t, 4)
	if _, _, err := store.Save(s); err != nil {
		t.Fatal(err)
	}
	after, _ := vs.List()
	if len(after) != 4 || vs.reads != 4 {
		t.Fatalf("after a new version: %d versions, %d files read; want 4 and 4", len(after), vs.reads)
	}
	// The figures of a read version are its published bytes' own.
	_, data, err := vs.Load(4)
	i := slices.IndexFunc(after, func(v VersionInfo) bool { return v.Version == 4 })
	if err != nil || i < 0 || after[i].Size != len(data) {
		t.Fatalf("version 4: listed at %d, load %d bytes (%v)", i, len(data), err)
	}
}

// Defect: a pin wrote its version's object, then the pin key; a publish
// whose prune ran between the two read no pin and deleted the version
// just restored, so watchers skipped the pinned version while HTTP served
// it. A pin and a prune are now ordered: the pinned version stays.
func TestPinIsNotPrunedUnderIt(t *testing.T) {
	b := NewMemBackend()
	pub := goldenPublisher(t, b, 2)
	ctx := context.Background()
	publishGolden(t, 4, pub.Publish) // version 1 is pruned by the time of the pin
	published := make(chan error, 1)
	var first atomic.Bool
	b.Fail = func(method string) error {
		// The first PutKey is the pin's: its object is stored, its key not
		// yet. A publish runs meanwhile (its own PutKey passes through).
		if method == "PutKey" && first.CompareAndSwap(false, true) {
			go func() {
				s, data := testkit.Golden(t, 5)
				_, err := pub.Publish(ctx, s, data)
				published <- err
			}()
			time.Sleep(200 * time.Millisecond) // the publish and its prune, if nothing orders them
		}
		return nil
	}
	s1, d1 := testkit.Golden(t, 1)
	m1, _ := snapshot.NewModel(s1, snapshot.ModelOptions{})
	if err := pub.Pin(ctx, m1, d1); err != nil {
		t.Fatal(err)
	}
	if err := <-published; err != nil {
		t.Fatal(err)
	}
	b.Fail = nil
	if _, err := getAll(b, ObjectName("golden", "", 1)); err != nil {
		t.Fatalf("the pinned version 1: %v", err)
	}
}

// TestPutThenPrune: Put publishes (the key names the version) and
// deletes nothing; Prune then leaves the newest Keep.
func TestPutThenPrune(t *testing.T) {
	b := NewMemBackend()
	pub := goldenPublisher(t, b, 2)
	n := publishGolden(t, 4, func(ctx context.Context, s *snapshot.Snapshot, data []byte) (Notice, error) {
		n, err := pub.Put(ctx, s, data)
		if _, latest, lerr := LatestFrom(ctx, b, Config{Model: "golden"}); err == nil && (lerr != nil || latest.Version != n.Version) {
			t.Fatalf("after put %d the key names version %d (%v)", n.Version, latest.Version, lerr)
		}
		return n, err
	})
	if got := storedNames(t, b); len(got) != 4 {
		t.Fatalf("stored after four puts: %v, want all four", got)
	}
	pub.Prune(context.Background(), n)
	if got, want := storedNames(t, b), []string{ObjectName("golden", "", 3), ObjectName("golden", "", 4)}; !slices.Equal(got, want) {
		t.Fatalf("stored after the prune: %v, want %v", got, want)
	}
}

// goldenPublisher returns a publisher of the model "golden" on b that
// keeps keep versions.
func goldenPublisher(t *testing.T, b Backend, keep int) *Publisher {
	t.Helper()
	pub, err := NewPublisherOn(b, Config{Model: "golden", Keep: keep}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

// publishGolden hands the golden versions 1 to last to publish (a
// publisher's Publish or Put) in order and returns the last notice.
func publishGolden(t *testing.T, last uint64, publish func(context.Context, *snapshot.Snapshot, []byte) (Notice, error)) Notice {
	t.Helper()
	var n Notice
	for v := uint64(1); v <= last; v++ {
		s, data := testkit.Golden(t, v)
		var err error
		if n, err = publish(context.Background(), s, data); err != nil {
			t.Fatalf("version %d: %v", v, err)
		}
	}
	return n
}

// storedNames lists the names of b's objects, sorted.
func storedNames(t *testing.T, b Backend) []string {
	t.Helper()
	lst, err := b.ListObjects(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range lst {
		names = append(names, o.Name)
	}
	slices.Sort(names)
	return names
}

// Defect (issue 58, item 3): with the store full, every publish failed at
// its lease renewal — itself a write to the full store — before the put
// that makes room, so no old version was ever deleted and nothing was
// published again (79 errors in 60 s). Now a renewal refused for room
// makes room while the lease is still held: every version is published.
func TestALeaseRenewalMakesRoomInAFullStore(t *testing.T) {
	b := NewMemBackend()
	_, one := testkit.Golden(t, 1)
	b.MaxBytes, b.KeysShareRoom = 3*len(one)+64, true // three versions fill it: no key write fits
	pub := goldenPublisher(t, b, 1000)                // pruning by count never makes room
	if _, err := pub.Own(Owner{ID: "inc-a", TTL: time.Minute}, nil); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for v := uint64(1); v <= 8; v++ {
		s, data := testkit.Golden(t, v)
		if _, err := pub.Publish(ctx, s, data); err != nil {
			t.Fatalf("publish %d into a store whose keys share its room: %v", v, err)
		}
	}
	if _, n, err := LatestFrom(ctx, b, Config{Model: "golden"}); err != nil || n.Version != 8 {
		t.Fatalf("latest: version %d (%v), want 8", n.Version, err)
	}
}
