package transport

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/streamkpca/streamkpca/internal/testkit"
)

// TestRosterFindsTheGeneration: members that start at different moments
// all find the members of their generation with partitions (not the one
// without, nor an older generation's), once the topic's partitions are
// covered; until then Uncovered says which are missing.
func TestRosterFindsTheGeneration(t *testing.T) {
	nc := testkit.NATS(t, nil)
	stale, err := StartRoster(nc, "", "m", Announcement{Generation: 6, Member: "old", Partitions: []int{2}})
	if err != nil {
		t.Fatal(err)
	}
	defer stale.Stop()
	a, err := StartRoster(nc, "", "m", Announcement{Generation: 7, Member: "a", Partitions: []int{0, 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	time.Sleep(300 * time.Millisecond) // "old" and "a" have announced at least once
	if got := a.Uncovered(3); !slices.Equal(got, []int{2}) {
		t.Errorf("uncovered %v, want [2] (generation 6's announcement does not count)", got)
	}
	var wg sync.WaitGroup
	got := make([][]string, 3)
	rosters := []*Roster{a}
	for _, an := range []Announcement{{Generation: 7, Member: "c"}, {Generation: 7, Member: "b", Partitions: []int{2}}} {
		r, err := StartRoster(nc, "", "m", an)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Stop()
		rosters = append(rosters, r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i, r := range rosters {
		wg.Go(func() {
			var err error
			if got[i], err = r.Wait(ctx, 3); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for i, g := range got {
		if !slices.Equal(g, []string{"a", "b"}) {
			t.Errorf("roster %d: members %v, want [a b]", i, g)
		}
	}
}

// A model name or prefix that is not one NATS subject token is refused
// before anything is subscribed.
func TestRosterRefusesBadNames(t *testing.T) {
	nc := testkit.NATS(t, nil)
	for _, model := range []string{"", "a.b", "a b", "a*", "a>"} {
		if r, err := StartRoster(nc, "", model, Announcement{Generation: 1, Member: "a"}); err == nil {
			r.Stop()
			t.Errorf("model %q accepted", model)
		}
	}
}

// What is not an announcement of this generation covers nothing: junk,
// an announcement without a member, another generation's, partitions
// outside the topic, and a second announcement of a member already seen
// (its first stands).
func TestRosterCountsOnlyItsGenerationsAnnouncements(t *testing.T) {
	nc := testkit.NATS(t, nil)
	r, err := StartRoster(nc, "p", "m", Announcement{Generation: 3, Member: "a", Partitions: []int{0}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	subj := "p.m.cluster.roster"
	pub := func(b string) {
		if err := nc.Publish(subj, []byte(b)); err != nil {
			t.Fatal(err)
		}
	}
	pub("not json")
	pub(`{"generation":3,"member":"","partitions":[1]}`)
	pub(`{"generation":2,"member":"b","partitions":[1]}`)
	pub(`{"generation":3,"member":"c","partitions":[-1,7]}`)
	pub(`{"generation":3,"member":"c","partitions":[1]}`) // c was seen: its first announcement stands
	pub(`{"generation":3,"member":"a","partitions":[1]}`) // nor can this member's be replaced
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // delivered to the subscriber
	if got := r.Uncovered(2); !slices.Equal(got, []int{1}) {
		t.Fatalf("uncovered %v, want [1]", got)
	}
	pub(`{"generation":3,"member":"d","partitions":[1]}`)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	members, err := r.Wait(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	// c announced partitions outside the topic only: a member with
	// partitions, which Wait lists, though it covers none of 0 … 1.
	if !slices.Equal(members, []string{"a", "c", "d"}) {
		t.Errorf("members %v, want [a c d]", members)
	}
}

// Wait ends with its context while partitions stay uncovered, naming
// the generation, and Stop stops the announcements (twice is harmless).
func TestRosterWaitEndsAndStopStops(t *testing.T) {
	nc := testkit.NATS(t, nil)
	r, err := StartRoster(nc, "", "m", Announcement{Generation: 9, Member: "a", Partitions: []int{0}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := r.Wait(ctx, 2); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "generation 9") {
		t.Errorf("Wait: %v, want the deadline, naming generation 9", err)
	}
	heard := make(chan struct{}, 100)
	sub, err := nc.Subscribe("streamkpca.m.cluster.roster", func(*nats.Msg) { heard <- struct{}{} })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	select {
	case <-heard:
	case <-time.After(5 * time.Second):
		t.Fatal("no announcement heard before Stop")
	}
	r.Stop()
	r.Stop()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // what was sent before Stop is delivered
	for len(heard) > 0 {
		<-heard
	}
	select {
	case <-heard:
		t.Error("an announcement after Stop")
	case <-time.After(3 * rosterEvery):
	}
}
