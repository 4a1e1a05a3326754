package transport

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

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
