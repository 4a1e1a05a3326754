package publish

import (
	"context"
	"testing"

	"github.com/rs/zerolog"

	"github.com/streamkpca/streamkpca/internal/testkit"
	"github.com/streamkpca/streamkpca/snapshot"
)

// TestStoreUsageCountsWhatWasPublished: the usage a publisher reports is
// the bytes of the versions it keeps (the lengths of what was published,
// counted here, not read back): exactly, in memory; within the object
// store's per-object metadata and chunk headers, on NATS. A backend
// without a usage report says so (false), not zero.
func TestStoreUsageCountsWhatWasPublished(t *testing.T) {
	ctx := context.Background()
	mem := NewMemBackend()
	mem.MaxBytes = 1 << 30
	nb, err := NewNATSBackend(testkit.NATS(t, nil), Config{Model: "golden"}, true)
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string]Backend{"memory": mem, "nats": nb} {
		pub, err := NewPublisherOn(b, Config{Model: "golden", Keep: 2}, zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		var kept []int
		for v := uint64(1); v <= 3; v++ {
			s, data := testkit.Golden(t, v)
			if _, err := pub.Publish(ctx, s, data); err != nil {
				t.Fatal(err)
			}
			kept = append(kept, len(data))
		}
		want := uint64(kept[1] + kept[2]) // Keep: 2
		u, ok, err := pub.StoreUsage(ctx)
		if err != nil || !ok {
			t.Fatalf("%s: StoreUsage: %v, %v", name, ok, err)
		}
		switch name {
		case "memory":
			if u.Bytes != want || u.MaxBytes != 1<<30 {
				t.Errorf("memory: usage %+v, want %d bytes of %d", u, want, 1<<30)
			}
		case "nats":
			if u.Bytes < want || u.Bytes > want+4096 || u.MaxBytes != -1 {
				t.Errorf("nats: usage %+v, want %d bytes (+ metadata) and no limit (-1)", u, want)
			}
		}
	}
	if _, ok, err := (&Publisher{b: struct{ Backend }{mem}}).StoreUsage(ctx); ok || err != nil {
		t.Errorf("a backend with no report: %v, %v; want false, nil", ok, err)
	}
}

// TestUnpinFollowsTheNewestEvenWhenOlder: a pin may name a version above
// the newest (a model pinned from elsewhere); after Unpin every Watch
// serves the newest again, though its version is lower than the one it
// served (the docs: Unpin lets every Watch follow the newest version).
func TestUnpinFollowsTheNewestEvenWhenOlder(t *testing.T) {
	ctx := context.Background()
	b := NewMemBackend()
	cfg := Config{Model: "golden"}
	pub, err := NewPublisherOn(b, cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	s9, data9 := testkit.Golden(t, 9)
	if _, err := pub.Publish(ctx, s9, data9); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	seen := watchVersions(wctx, b, cfg)
	testkit.WaitFor(t, "the newest version", seen(9))
	s15, data15 := testkit.Golden(t, 15)
	m15, err := snapshot.NewModel(s15, snapshot.ModelOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.Pin(ctx, m15, data15); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the pinned version", seen(9, 15))
	if v, err := pub.PinnedVersion(ctx); v != 15 || err != nil {
		t.Errorf("PinnedVersion = %d, %v; want 15", v, err)
	}
	if err := pub.Unpin(ctx); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the newest version, older than the pin", seen(9, 15, 9))
	if v, err := pub.PinnedVersion(ctx); v != 0 || err != nil {
		t.Errorf("PinnedVersion after Unpin = %d, %v; want 0", v, err)
	}
}
