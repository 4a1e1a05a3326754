package publish

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/streamkpca/streamkpca/internal/testkit"
	"github.com/streamkpca/streamkpca/snapshot"
)

// clock is a settable clock for leases.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// TestLeaseOneOwner: of two services given one model name, the first
// owns it; the second is refused, publishes nothing and says who owns
// it, while the owner renews; once the owner stops renewing for its TTL
// (measured on the contender's clock) the contender takes over, and the
// old owner, back from a freeze, is refused at its next publish
// (fencing: its renewal's compare-and-swap fails) and writes nothing.
func TestLeaseOneOwner(t *testing.T) {
	ctx := context.Background()
	b := NewMemBackend()
	ca, cb := &clock{t: time.Unix(1000, 0)}, &clock{t: time.Unix(5000, 0)} // clocks need not agree
	pa, _ := NewPublisherOn(b, Config{Model: "m", Keep: 3}, zerolog.Nop())
	pb, _ := NewPublisherOn(b, Config{Model: "m", Keep: 3}, zerolog.Nop())
	ttl := 10 * time.Second
	la, err := pa.Own(Owner{ID: "inc-a", Host: "h1", PID: 1, TTL: ttl}, ca.now)
	if err != nil {
		t.Fatal(err)
	}
	lb, _ := pb.Own(Owner{ID: "inc-b", Host: "h2", PID: 2, TTL: ttl}, cb.now)
	snapA, dataA := goldenAt(t, "inc-a", 1)
	snapB, dataB := goldenAt(t, "inc-b", 1)
	if _, err := pa.Publish(ctx, snapA, dataA); err != nil {
		t.Fatalf("the first service's publish: %v", err)
	}
	// The owner renews every few seconds; the contender is refused all along.
	for i := range 6 {
		_, err := pb.Publish(ctx, snapB, dataB)
		var no *NotOwnerError
		if !errors.As(err, &no) || !errors.Is(err, ErrNotOwner) || no.Owner.ID != "inc-a" || no.Owner.Host != "h1" {
			t.Fatalf("round %d: the second service's publish returned %v, want a NotOwnerError naming inc-a on h1", i, err)
		}
		if lb.Held() {
			t.Fatal("the contender says it holds the lease")
		}
		ca.add(4 * time.Second)
		cb.add(4 * time.Second)
		if err := la.Hold(ctx); err != nil {
			t.Fatalf("round %d: the owner's renewal: %v", i, err)
		}
	}
	if objs, _ := b.ListObjects(ctx); len(objs) != 1 || objs[0].Metadata[metaIncarnation] != "inc-a" {
		t.Fatalf("stored objects %+v: want only the owner's version", objs)
	}
	// The owner freezes: not renewed for the TTL on the contender's clock
	// from when it first saw that renewal.
	if err := lb.Hold(ctx); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("the contender took a lease just renewed: %v", err)
	}
	cb.add(ttl - time.Second)
	if err := lb.Hold(ctx); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("the contender took a lease renewed %v ago (ttl %v): %v", ttl-time.Second, ttl, err)
	}
	cb.add(2 * time.Second)
	if _, err := pb.Publish(ctx, snapB, dataB); err != nil {
		t.Fatalf("the contender's publish after the owner's lease lapsed: %v", err)
	}
	// The old owner wakes up: its clock says its lease is young, but the
	// key's revision moved: refused, nothing written.
	snapA2, dataA2 := goldenAt(t, "inc-a", 2)
	if _, err := pa.Publish(ctx, snapA2, dataA2); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("the old owner's publish after losing its lease: %v, want ErrNotOwner", err)
	}
	if la.Held() {
		t.Error("the old owner still says it holds the lease")
	}
	if err := la.Release(ctx); err != nil {
		t.Errorf("releasing a lost lease: %v", err)
	}
	v, _ := b.GetKey(ctx, "m")
	var got Notice
	if err := json.Unmarshal(v, &got); err != nil || got.Incarnation != "inc-b" || got.Version != 1 || got.Object != ObjectName("m", "inc-b", 1) {
		t.Fatalf("latest names %+v (%v), want inc-b's version 1", got, err)
	}
	// Two incarnations' version 1 are two objects: neither overwrote the other.
	if ObjectName("m", "inc-a", 1) == ObjectName("m", "inc-b", 1) {
		t.Fatal("two incarnations share an object name")
	}
	if err := pa.Pin(ctx, mustModel(t, snapA), dataA); !errors.Is(err, ErrNotOwner) {
		t.Errorf("a pin by the service that lost the name: %v, want ErrNotOwner", err)
	}
	// A clean stop releases the name: a successor takes it at once.
	if err := lb.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := la.Hold(ctx); err != nil {
		t.Errorf("taking a released lease: %v", err)
	}
}

// TestLeaseRaceOneWinner: several contenders for a lapsed lease, at
// once: exactly one holds it.
func TestLeaseRaceOneWinner(t *testing.T) {
	ctx := context.Background()
	b := NewMemBackend()
	c := &clock{t: time.Unix(0, 0)}
	old, _ := NewLease(b, "m", Owner{ID: "old", TTL: time.Second}, c.now)
	if err := old.Hold(ctx); err != nil {
		t.Fatal(err)
	}
	var ls []*Lease
	for i := range 8 {
		l, _ := NewLease(b, "m", Owner{ID: string(rune('a' + i)), TTL: time.Second}, c.now)
		if err := l.Hold(ctx); !errors.Is(err, ErrNotOwner) {
			t.Fatalf("contender %d took a live lease: %v", i, err)
		}
		ls = append(ls, l)
	}
	c.add(2 * time.Second)
	var wg sync.WaitGroup
	for _, l := range ls {
		wg.Add(1)
		go func() { defer wg.Done(); _ = l.Hold(ctx) }()
	}
	wg.Wait()
	held := 0
	for _, l := range ls {
		if l.Held() {
			held++
		}
	}
	if held != 1 {
		t.Fatalf("%d contenders hold the lapsed lease, want 1", held)
	}
}

func goldenAt(t *testing.T, inc string, v uint64) (*snapshot.Snapshot, []byte) {
	t.Helper()
	s, _ := testkit.Golden(t, v)
	s.Header.Incarnation = inc
	data, err := s.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return s, data
}

func mustModel(t *testing.T, s *snapshot.Snapshot) *snapshot.Model {
	t.Helper()
	m, err := snapshot.NewModel(s, snapshot.ModelOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestFrozenOwnerWritesNothing: an owner frozen right after the renewal
// Put makes before it moves the pointer (a GC pause, a VM stall), while a
// standby takes the lapsed lease over and publishes three versions,
// writes nothing when it resumes: its pointer write is a compare-and-set
// on the revision it last wrote, which the new owner's writes moved, so
// it is refused (ErrNotOwner), the pointer keeps naming the new owner's
// newest version and no version of the new owner is pruned. Before, the
// pointer write was unconditional: it went back to the old incarnation,
// and the resumed owner's prune deleted the new owner's versions.
func TestFrozenOwnerWritesNothing(t *testing.T) {
	ctx := context.Background()
	b := NewMemBackend()
	ca, cb := &clock{t: time.Unix(1000, 0)}, &clock{t: time.Unix(5000, 0)}
	pa, _ := NewPublisherOn(b, Config{Model: "m", Keep: 2}, zerolog.Nop())
	pb, _ := NewPublisherOn(b, Config{Model: "m", Keep: 2}, zerolog.Nop())
	ttl := 10 * time.Second
	if _, err := pa.Own(Owner{ID: "inc-a", Host: "h1", PID: 1, TTL: ttl}, ca.now); err != nil {
		t.Fatal(err)
	}
	lb, _ := pb.Own(Owner{ID: "inc-b", Host: "h2", PID: 2, TTL: ttl}, cb.now)
	snapA, dataA := goldenAt(t, "inc-a", 1)
	if _, err := pa.Publish(ctx, snapA, dataA); err != nil {
		t.Fatal(err)
	}
	froze := false
	pa.beforePoint = func() {
		if froze {
			return
		}
		froze = true
		// Frozen past the TTL: the standby, which saw the renewal, takes
		// the lease over and publishes.
		if err := lb.Hold(ctx); !errors.Is(err, ErrNotOwner) {
			t.Fatalf("the standby took a lease just renewed: %v", err)
		}
		cb.add(ttl + time.Second)
		for v := uint64(1); v <= 3; v++ {
			s, d := goldenAt(t, "inc-b", v)
			if _, err := pb.Publish(ctx, s, d); err != nil {
				t.Fatalf("the new owner's publish of version %d: %v", v, err)
			}
		}
	}
	snapA2, dataA2 := goldenAt(t, "inc-a", 2)
	if _, err := pa.Publish(ctx, snapA2, dataA2); !errors.Is(err, ErrNotOwner) {
		t.Errorf("the resumed owner's publish: %v, want ErrNotOwner", err)
	}
	if !froze {
		t.Fatal("the owner never reached its pointer write")
	}
	v, _ := b.GetKey(ctx, "m")
	var got Notice
	if err := json.Unmarshal(v, &got); err != nil || got.Incarnation != "inc-b" || got.Version != 3 {
		t.Errorf("the pointer names %s version %d (%v), want inc-b's version 3", got.Incarnation, got.Version, err)
	}
	objs, _ := b.ListObjects(ctx)
	var newOwner int
	for _, o := range objs {
		if o.Metadata[metaIncarnation] == "inc-b" {
			newOwner++
		}
	}
	// Keep 2: the new owner's own prune keeps its two newest.
	if newOwner < 2 {
		t.Errorf("%d of the new owner's versions are left (%+v); the resumed owner pruned them", newOwner, objs)
	}
}

// TestLeaseRefusesACopiedDirectory: a service started on a copy of
// another's snapshot.dir (a restored backup, a cloned volume) has the
// same incarnation, the lease's owner ID. While the original renews, the
// copy is refused as another owner, with an error that says the
// directory was copied, and writes nothing; a restart on the original
// directory (same ID, same directory) takes its own lease back at once,
// as before. Before, the ID alone made an owner, so both held the lease
// and both published the incarnation's versions (41 each in 55 s, and
// readers passed over versions whose bytes did not match).
func TestLeaseRefusesACopiedDirectory(t *testing.T) {
	ctx := context.Background()
	b := NewMemBackend()
	c := &clock{t: time.Unix(1000, 0)}
	ttl := 10 * time.Second
	orig, _ := NewPublisherOn(b, Config{Model: "m", Keep: 3}, zerolog.Nop())
	copied, _ := NewPublisherOn(b, Config{Model: "m", Keep: 3}, zerolog.Nop())
	lo, _ := orig.Own(Owner{ID: "inc-a", Host: "h1", PID: 1, Dir: "h1:/data:dev=1:ino=10", TTL: ttl}, c.now)
	lc, _ := copied.Own(Owner{ID: "inc-a", Host: "h2", PID: 2, Dir: "h2:/data:dev=7:ino=99", TTL: ttl}, c.now)
	snap, data := goldenAt(t, "inc-a", 1)
	if _, err := orig.Publish(ctx, snap, data); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		snap2, data2 := goldenAt(t, "inc-a", uint64(2+i))
		_, err := copied.Publish(ctx, snap2, data2)
		var no *NotOwnerError
		if !errors.As(err, &no) || !no.Copy || no.Owner.Dir != "h1:/data:dev=1:ino=10" {
			t.Fatalf("round %d: the copy's publish returned %v, want a NotOwnerError saying the directory was copied", i, err)
		}
		if lc.Held() {
			t.Fatal("the copy holds the lease")
		}
		c.add(4 * time.Second)
		if err := lo.Hold(ctx); err != nil {
			t.Fatalf("round %d: the original's renewal: %v", i, err)
		}
	}
	if objs, _ := b.ListObjects(ctx); len(objs) != 1 {
		t.Errorf("%d objects stored, want the original's one", len(objs))
	}
	// A restart of the original on its own directory: a new process, the
	// same ID and directory, takes the lease back at once.
	restarted, _ := NewPublisherOn(b, Config{Model: "m", Keep: 3}, zerolog.Nop())
	lr, _ := restarted.Own(Owner{ID: "inc-a", Host: "h1", PID: 3, Dir: "h1:/data:dev=1:ino=10", TTL: ttl}, c.now)
	if err := lr.Hold(ctx); err != nil {
		t.Errorf("a restart on the same directory: %v, want the lease at once", err)
	}
}

// stuckBackend is a backend whose lease reads never return, whatever
// their context (a NATS call lost with its connection).
type stuckBackend struct {
	*MemBackend
	stuck chan struct{}
}

func (b *stuckBackend) GetKeyRevision(ctx context.Context, key string) ([]byte, uint64, error) {
	<-b.stuck
	return b.MemBackend.GetKeyRevision(ctx, key)
}

// TestLeaseReleaseIsBoundedByItsContext: a renewal stuck in a network
// call that never returns (and ignores its context) does not hold up the
// release the graceful stop makes: the release gives up when its own
// context ends. Before, the lease's mutex was held across the call and
// the release waited for it forever, and so did the stop.
func TestLeaseReleaseIsBoundedByItsContext(t *testing.T) {
	b := &stuckBackend{MemBackend: NewMemBackend(), stuck: make(chan struct{})}
	defer close(b.stuck)
	l, err := NewLease(b, "m", Owner{ID: "inc-a", TTL: time.Minute}, nil)
	if err != nil {
		t.Fatal(err)
	}
	go l.Hold(context.Background()) // stuck in GetKeyRevision
	time.Sleep(50 * time.Millisecond)
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		done <- l.Release(ctx)
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("release beside a stuck renewal: %v, want its context's deadline", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the release waited for a renewal stuck in the network: a graceful stop would never end")
	}
	if l.Held() {
		t.Error("a lease never renewed says it is held")
	}
}
