package publish

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/streamkpca/streamkpca/internal/testkit"
)

// Offers made before the loop runs leave only the newest pending: after
// Final, Run publishes that one version and ends.
func TestDistributorPublishesTheNewestOfferAndEnds(t *testing.T) {
	b := NewMemBackend()
	var mu sync.Mutex
	var published []uint64
	var owned []bool
	d, err := NewDistributor(goldenPublisher(t, b, 3), DistributorConfig{Owner: Owner{ID: "a", TTL: time.Minute}}, zerolog.Nop(), Hooks{
		Published: func(n Notice) { mu.Lock(); published = append(published, n.Version); mu.Unlock() },
		Ownership: func(held, first bool) { mu.Lock(); owned = append(owned, held, first); mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	if !d.Renew(context.Background()) {
		t.Fatal("a lone service did not take the lease")
	}
	for v := uint64(1); v <= 5; v++ {
		s, data := testkit.Golden(t, v)
		d.Offer(s, data)
	}
	d.Final()
	d.Final() // twice is fine
	done := make(chan struct{})
	go func() { d.Run(context.Background()); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("Run did not end after Final")
	}
	if !d.Wait(context.Background()) {
		t.Fatal("Wait")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(published) != 1 || published[0] != 5 {
		t.Fatalf("published %v, want [5]: a newer offer supersedes a pending one", published)
	}
	if len(owned) != 2 || !owned[0] || !owned[1] {
		t.Fatalf("ownership events %v, want one: held, first", owned)
	}
	if _, n, err := LatestFrom(context.Background(), b, Config{Model: "golden"}); err != nil || n.Version != 5 {
		t.Fatalf("latest %d (%v), want 5", n.Version, err)
	}
	if since, err := d.Down(); !since.IsZero() || err != nil {
		t.Fatalf("down since %v (%v) after a publish", since, err)
	}
}

// A standby (another live owner holds the name) publishes nothing, says
// who owns the name, and its Run ends at Final without waiting for the
// lease.
func TestDistributorStandbyEndsAtFinal(t *testing.T) {
	b := NewMemBackend()
	owner, err := NewDistributor(goldenPublisher(t, b, 3), DistributorConfig{Owner: Owner{ID: "a", Host: "h1", TTL: time.Minute}}, zerolog.Nop(), Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	if !owner.Renew(context.Background()) {
		t.Fatal("the first service did not take the lease")
	}
	var held []bool
	var mu sync.Mutex
	d, err := NewDistributor(goldenPublisher(t, b, 3), DistributorConfig{Owner: Owner{ID: "b", Host: "h2", TTL: time.Minute}}, zerolog.Nop(), Hooks{
		Published: func(Notice) { t.Error("a standby published") },
		Ownership: func(h, _ bool) { mu.Lock(); held = append(held, h); mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	if d.Renew(context.Background()) {
		t.Fatal("a second service took a held lease")
	}
	if o := d.StandingBy(); o == nil || o.ID != "a" || o.Host != "h1" {
		t.Fatalf("standing by for %+v, want a on h1", o)
	}
	s, data := testkit.Golden(t, 1)
	d.Offer(s, data)
	done := make(chan struct{})
	go func() { d.Run(context.Background()); close(done) }()
	time.Sleep(50 * time.Millisecond) // let it try (and stand by)
	start := time.Now()
	d.Final()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("a standby's Run did not end at Final")
	}
	t.Logf("ended %v after Final", time.Since(start))
	mu.Lock()
	defer mu.Unlock()
	if len(held) != 1 || held[0] {
		t.Fatalf("ownership events %v, want one: lost", held)
	}
	if _, _, err := LatestFrom(context.Background(), b, Config{Model: "golden"}); err == nil {
		t.Fatal("a version was published by nobody's lease")
	}
}
