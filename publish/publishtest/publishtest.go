// Package publishtest is the conformance suite of publish.Backend: the
// rules of versions (docs/api.md) that the Publisher, LatestFrom and
// WatchFrom keep must hold over every backend, NATS JetStream and memory
// alike — a model reset to a new incarnation, a poisoned latest pointer,
// pins, pruning, readers that join late.
package publishtest

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/rs/zerolog"

	"github.com/streamkpca/streamkpca/publish"
	"github.com/streamkpca/streamkpca/snapshot"
)

// Harness says how to reach a backend under test.
type Harness struct {
	// New makes a fresh, empty store and returns a function that opens a
	// new handle on it (a writer's when create is true, a reader's
	// otherwise), as separate processes would.
	New func(t *testing.T) func(create bool) publish.Backend
	// Golden is a snapshot file to publish (at every version, with its
	// step and incarnation changed).
	Golden string
}

// Run runs the suite.
func Run(t *testing.T, h Harness) {
	t.Run("Reset", func(t *testing.T) { reset(t, h) })
	t.Run("PoisonedPointer", func(t *testing.T) { poisoned(t, h) })
	t.Run("Pins", func(t *testing.T) { pins(t, h) })
	t.Run("LateReader", func(t *testing.T) { lateReader(t, h) })
	t.Run("SwapKey", func(t *testing.T) { swapKey(t, h) })
	t.Run("Lease", func(t *testing.T) { lease(t, h) })
	t.Run("Objects", func(t *testing.T) { objects(t, h) })
}

// objects: the object store takes and gives streams. A put reads its
// reader to the end however little each read returns, and a get gives
// the same bytes back however little is asked at a time, then io.EOF; a
// put of a stored name replaces the object; a put whose reader fails
// returns the reader's error and stores nothing (the object before it
// stays); a name never stored is ErrNotFound. Objects span several
// chunks of a chunked store (NATS: 128 KiB).
func objects(t *testing.T, h Harness) {
	f := newFixture(t, h)
	w, r := f.open(true), f.open(false)
	meta := map[string]string{"incarnation": "objects", "version": "1"}
	first, second := pattern(300<<10, 1), pattern(200<<10, 2)
	if err := w.PutObject(f.ctx, "o/1", meta, iotest.HalfReader(bytes.NewReader(first))); err != nil {
		t.Fatalf("put: %v", err)
	}
	if got, err := readAll(f.ctx, r, "o/1"); err != nil || !bytes.Equal(got, first) {
		t.Fatalf("get: %d bytes (%v), want the %d put", len(got), err, len(first))
	}
	if err := w.PutObject(f.ctx, "o/1", meta, bytes.NewReader(second)); err != nil {
		t.Fatalf("put again: %v", err)
	}
	errReader := errors.New("the reader failed")
	failing := func() io.Reader {
		return io.MultiReader(bytes.NewReader(first[:150<<10]), iotest.ErrReader(errReader))
	}
	if err := w.PutObject(f.ctx, "o/1", meta, failing()); !errors.Is(err, errReader) {
		t.Fatalf("a put whose reader fails over a stored object: %v, want the reader's error", err)
	}
	if err := w.PutObject(f.ctx, "o/2", meta, failing()); !errors.Is(err, errReader) {
		t.Fatalf("a put whose reader fails: %v, want the reader's error", err)
	}
	if got, err := readAll(f.ctx, r, "o/1"); err != nil || !bytes.Equal(got, second) {
		t.Fatalf("get after a replacing put and a failed one: %d bytes (%v), want the %d of the replacing put", len(got), err, len(second))
	}
	if _, err := r.GetObject(f.ctx, "o/2"); !errors.Is(err, publish.ErrNotFound) {
		t.Fatalf("get of an object whose only put failed: %v, want ErrNotFound", err)
	}
	if got, want := f.stored(), []string{"objects/1"}; !slices.Equal(got, want) {
		t.Fatalf("listed %v, want %v", got, want)
	}
}

// pattern is n bytes that differ with seed and along their length.
func pattern(n int, seed byte) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i*31+i>>9) ^ seed
	}
	return p
}

// readAll reads the object name through b a byte at a time, to the end.
func readAll(ctx context.Context, b publish.Backend, name string) ([]byte, error) {
	rc, err := b.GetObject(ctx, name)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(iotest.OneByteReader(rc))
}

// swapKey: the compare-and-swap the lease is built on. A create
// (revision 0) succeeds on an unset or deleted key only; a swap at a
// stale revision is refused with ErrConflict, from any handle.
func swapKey(t *testing.T, h Harness) {
	f := newFixture(t, h)
	a, b := f.open(true), f.open(true)
	if err := a.PutKey(f.ctx, "other", []byte("x")); err != nil {
		t.Fatal(err)
	}
	r1, err := a.SwapKey(f.ctx, "k", []byte("1"), 0)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if _, err := b.SwapKey(f.ctx, "k", []byte("2"), 0); !errors.Is(err, publish.ErrConflict) {
		t.Fatalf("a second create of the key: %v, want ErrConflict", err)
	}
	v, rev, err := b.GetKeyRevision(f.ctx, "k")
	if err != nil || string(v) != "1" || rev != r1 {
		t.Fatalf("GetKeyRevision: %q %d %v, want \"1\" %d", v, rev, err, r1)
	}
	r2, err := b.SwapKey(f.ctx, "k", []byte("3"), r1)
	if err != nil || r2 == r1 {
		t.Fatalf("swap at the current revision: %d %v", r2, err)
	}
	if _, err := a.SwapKey(f.ctx, "k", []byte("4"), r1); !errors.Is(err, publish.ErrConflict) {
		t.Fatalf("swap at a stale revision: %v, want ErrConflict", err)
	}
	if err := a.DeleteKey(f.ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.GetKeyRevision(f.ctx, "k"); !errors.Is(err, publish.ErrNotFound) {
		t.Fatalf("GetKeyRevision of a deleted key: %v, want ErrNotFound", err)
	}
	if _, err := b.SwapKey(f.ctx, "k", []byte("5"), 0); err != nil {
		t.Fatalf("create after a delete: %v", err)
	}
}

// lease: two publishers of one model name through separate handles:
// the second is refused while the first renews, and publishes nothing.
func lease(t *testing.T, h Harness) {
	f := newFixture(t, h)
	second := f.publisher()
	if _, err := f.pub.Own(publish.Owner{ID: "a", TTL: time.Minute}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := second.Own(publish.Owner{ID: "b", TTL: time.Minute}, nil); err != nil {
		t.Fatal(err)
	}
	f.publish(f.pub, "a", 1, 2)
	s, data := f.at("b", 5)
	if _, err := second.Publish(f.ctx, s, data); !errors.Is(err, publish.ErrNotOwner) {
		t.Fatalf("the second owner's publish: %v, want ErrNotOwner", err)
	}
	f.publish(f.pub, "a", 3, 3)
	if got, want := f.stored(), []string{"a/1", "a/2", "a/3"}; !slices.Equal(got, want) {
		t.Fatalf("stored %v, want %v (nothing of the refused service)", got, want)
	}
}

const model = "golden"

// fixture is one store, its publisher keeping 3 versions, and a context
// that ends with the test.
type fixture struct {
	t    *testing.T
	h    Harness
	open func(create bool) publish.Backend
	ctx  context.Context
	cfg  publish.Config
	pub  *publish.Publisher
}

func newFixture(t *testing.T, h Harness) *fixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	f := &fixture{t: t, h: h, open: h.New(t), ctx: ctx, cfg: publish.Config{Model: model, Keep: 3}}
	f.pub = f.publisher()
	return f
}

func (f *fixture) publisher() *publish.Publisher {
	pub, err := publish.NewPublisherOn(f.open(true), f.cfg, zerolog.Nop())
	if err != nil {
		f.t.Fatal(err)
	}
	return pub
}

// at is the golden model at version v of incarnation inc, and its bytes.
func (f *fixture) at(inc string, v uint64) (*snapshot.Snapshot, []byte) {
	f.t.Helper()
	s, _, err := snapshot.Load(f.h.Golden)
	if err != nil {
		f.t.Fatal(err)
	}
	s.Header.Step, s.Header.Incarnation = v, inc
	data, err := s.MarshalBinary()
	if err != nil {
		f.t.Fatal(err)
	}
	return s, data
}

// publish publishes versions from…to of incarnation inc through pub.
func (f *fixture) publish(pub *publish.Publisher, inc string, from, to uint64) {
	f.t.Helper()
	for v := from; v <= to; v++ {
		s, data := f.at(inc, v)
		if _, err := pub.Publish(f.ctx, s, data); err != nil {
			f.t.Fatalf("publish version %d of %q: %v", v, inc, err)
		}
	}
}

// stored lists the stored versions as "incarnation/version", sorted.
func (f *fixture) stored() []string {
	f.t.Helper()
	lst, err := f.open(false).ListObjects(f.ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	var names []string
	for _, o := range lst {
		names = append(names, o.Metadata["incarnation"]+"/"+o.Metadata["version"])
	}
	slices.Sort(names)
	return names
}

// watched is what a WatchFrom delivered and passed over.
type watched struct {
	mu   sync.Mutex
	got  []publish.Notice
	skip []error
	end  error // what WatchFrom returned, once it has
}

func (w *watched) last() (publish.Notice, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.got) == 0 {
		return publish.Notice{}, false
	}
	return w.got[len(w.got)-1], true
}

func (w *watched) all() []publish.Notice {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.got)
}

func (w *watched) skipped() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.skip)
}

// watch starts a reader's WatchFrom until the test ends.
func (f *fixture) watch() *watched {
	w := &watched{}
	cfg := f.cfg
	cfg.OnSkip = func(_ publish.Notice, err error) {
		w.mu.Lock()
		w.skip = append(w.skip, err)
		w.mu.Unlock()
	}
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := publish.WatchFrom(ctx, f.open(false), cfg, func(m *snapshot.Model, n publish.Notice) {
			if m == nil || m.Header().Version() != n.Version {
				f.t.Errorf("a watch delivered notice %d with model %v", n.Version, m)
			}
			w.mu.Lock()
			w.got = append(w.got, n)
			w.mu.Unlock()
		})
		w.mu.Lock()
		w.end = fmt.Errorf("the watch ended: %w", err)
		w.mu.Unlock()
	}()
	f.t.Cleanup(func() { cancel(); <-done })
	return w
}

// waitFor waits up to 20 s for cond; on a time-out the test fails with
// what and what state says.
func (f *fixture) waitFor(what string, cond func() bool, state ...func() string) {
	f.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			var says []string
			for _, s := range state {
				says = append(says, s())
			}
			f.t.Fatalf("timed out waiting for %s %v", what, says)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (f *fixture) watchAt(w *watched, inc string, v uint64) {
	f.t.Helper()
	f.waitFor(fmt.Sprintf("the watch at version %d of %q", v, inc), func() bool {
		n, ok := w.last()
		return ok && n.Version == v && n.Incarnation == inc
	}, w.String)
}

// String says what the watch delivered, passed over and returned.
func (w *watched) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	vs := make([]string, len(w.got))
	for i, n := range w.got {
		vs[i] = fmt.Sprintf("%s/%d", n.Incarnation, n.Version)
	}
	return fmt.Sprintf("(delivered %v; passed over %v; %v)", vs, w.skip, cmp.Or(w.end, error(errRunning)))
}

var errRunning = errors.New("the watch still runs")

// reset: a model publishes versions 1…20 (keep 3), then starts again
// without local history (a new incarnation) at versions 1…6. The store
// holds the new incarnation's newest 3 (pruning never deletes the version
// just published; the old incarnation is superseded), Latest returns
// version 6 of it, and a watch started before the reset follows it.
func reset(t *testing.T, h Harness) {
	f := newFixture(t, h)
	f.publish(f.pub, "first", 1, 20)
	w := f.watch()
	f.watchAt(w, "first", 20)
	second := f.publisher()
	f.publish(second, "second", 1, 6)
	m, n, err := publish.LatestFrom(f.ctx, f.open(false), f.cfg)
	if err != nil {
		t.Fatalf("Latest after the reset: %v", err)
	}
	if n.Version != 6 || n.Incarnation != "second" || m.Header().Version() != 6 {
		t.Errorf("Latest after the reset: version %d of %q, want 6 of \"second\"", n.Version, n.Incarnation)
	}
	f.watchAt(w, "second", 6)
	if got, want := f.stored(), []string{"second/4", "second/5", "second/6"}; !slices.Equal(got, want) {
		t.Errorf("stored after the reset: %v, want %v", got, want)
	}
}

// poisoned: one bad write to the latest pointer (version 2⁶⁴−1, naming a
// missing object) is passed over with a reason: Latest falls back to the
// newest stored version that can be fetched, and a running watch
// delivers the next real version.
func poisoned(t *testing.T, h Harness) {
	f := newFixture(t, h)
	f.publish(f.pub, "inc", 1, 4)
	w := f.watch()
	f.watchAt(w, "inc", 4)
	bad, _ := json.Marshal(publish.Notice{Model: model, Incarnation: "inc", Version: 1<<64 - 1, Object: model + "/missing", SHA256: "00"})
	if err := f.open(true).PutKey(f.ctx, model, bad); err != nil {
		t.Fatal(err)
	}
	f.waitFor("the poisoned pointer reported", func() bool { return w.skipped() > 0 })
	m, n, err := publish.LatestFrom(f.ctx, f.open(false), f.cfg)
	if err != nil || n.Version != 4 || m == nil {
		t.Errorf("Latest with a poisoned pointer: version %d, %v; want the newest fetchable, 4", n.Version, err)
	}
	f.publish(f.pub, "inc", 5, 5)
	f.watchAt(w, "inc", 5)
}

// pins: a pinned older version is what a watch delivers, pruning keeps
// it however old, PinnedVersion names it; Latest still returns the
// newest; after Unpin the watch is back at the newest.
func pins(t *testing.T, h Harness) {
	f := newFixture(t, h)
	f.publish(f.pub, "inc", 1, 5)
	w := f.watch()
	f.watchAt(w, "inc", 5)
	s, data := f.at("inc", 2)
	m, err := snapshot.NewModel(s, snapshot.ModelOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.pub.Pin(f.ctx, m, data); err != nil {
		t.Fatal(err)
	}
	f.watchAt(w, "inc", 2)
	f.publish(f.pub, "inc", 6, 9)
	if v, err := f.pub.PinnedVersion(f.ctx); err != nil || v != 2 {
		t.Errorf("PinnedVersion %d (%v), want 2", v, err)
	}
	if got, want := f.stored(), []string{"inc/2", "inc/7", "inc/8", "inc/9"}; !slices.Equal(got, want) {
		t.Errorf("stored while 2 is pinned: %v, want %v (the pinned version and the newest 3)", got, want)
	}
	if _, n, err := publish.LatestFrom(f.ctx, f.open(false), f.cfg); err != nil || n.Version != 9 {
		t.Errorf("Latest while pinned: version %d (%v), want the newest, 9", n.Version, err)
	}
	if n, _ := w.last(); n.Version != 2 {
		t.Errorf("the watch moved to version %d while 2 is pinned", n.Version)
	}
	if err := f.pub.Unpin(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.watchAt(w, "inc", 9)
	if v, err := f.pub.PinnedVersion(f.ctx); err != nil || v != 0 {
		t.Errorf("PinnedVersion after Unpin: %d (%v), want 0", v, err)
	}
}

// lateReader: a watch that starts after versions were published gets the
// newest at once (not the history), and a watch that starts before the
// first version (before anything exists) gets it once it is published.
func lateReader(t *testing.T, h Harness) {
	f := newFixture(t, h)
	early := f.watch()
	f.publish(f.pub, "inc", 1, 3)
	f.watchAt(early, "inc", 3)
	late := f.watch()
	f.watchAt(late, "inc", 3)
	time.Sleep(50 * time.Millisecond)
	if got := late.all(); len(got) != 1 {
		t.Errorf("a late watch delivered %d versions, want only the newest", len(got))
	}
	if _, _, err := publish.LatestFrom(f.ctx, h.New(t)(false), f.cfg); err == nil {
		t.Errorf("Latest of an empty store: no error")
	}
}
