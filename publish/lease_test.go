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
