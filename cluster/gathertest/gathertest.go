// Package gathertest is the conformance suite of cluster.Gatherer: the
// in-memory MemGroup and transport.Exchange over NATS pass the same tests.
package gathertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/streamkpca/streamkpca/cluster"
)

// NewGroup returns the Gatherers of n members of one new group, whose
// rounds time out after timeout.
type NewGroup func(t *testing.T, n int, timeout time.Duration) []cluster.Gatherer

// payload is member rank's deterministic payload of round, of size bytes.
func payload(round uint64, rank, size int) []byte {
	p := make([]byte, size)
	for i := range p {
		p[i] = byte(uint64(i)*31 + round*7 + uint64(rank)*13)
	}
	return p
}

// Run runs the suite.
func Run(t *testing.T, newGroup NewGroup) {
	t.Run("RankOrder", func(t *testing.T) { rankOrder(t, newGroup) })
	t.Run("AllToAll", func(t *testing.T) { allToAll(t, newGroup) })
	t.Run("MemberGone", func(t *testing.T) { memberGone(t, newGroup) })
	t.Run("Cancel", func(t *testing.T) { cancel(t, newGroup) })
}

// rankOrder: every member gets every member's payload of each round, in
// rank order, whatever its size (empty, small, several megabytes).
func rankOrder(t *testing.T, newGroup NewGroup) {
	const n = 3
	g := newGroup(t, n, time.Minute)
	ranks := map[int]bool{}
	for _, m := range g {
		if m.Size() != n {
			t.Fatalf("Size %d, want %d", m.Size(), n)
		}
		ranks[m.Rank()] = true
	}
	if len(ranks) != n {
		t.Fatalf("ranks %v, want 0…%d once each", ranks, n-1)
	}
	sizes := []int{0, 1, 10_000, 3_000_000}
	size := func(round uint64, rank int) int { return sizes[(int(round)+rank)%len(sizes)] }
	errs := make([]error, n)
	var wg sync.WaitGroup
	for _, m := range g {
		wg.Go(func() {
			for r := range uint64(6) {
				all, err := m.AllGather(context.Background(), r, payload(r, m.Rank(), size(r, m.Rank())))
				if err != nil {
					errs[m.Rank()] = err
					return
				}
				if len(all) != n {
					errs[m.Rank()] = fmt.Errorf("round %d: %d payloads", r, len(all))
					return
				}
				for i, p := range all {
					if !bytes.Equal(p, payload(r, i, size(r, i))) {
						errs[m.Rank()] = fmt.Errorf("round %d: payload %d has %d bytes, not member %d's %d", r, i, len(p), i, size(r, i))
						return
					}
				}
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("member %d: %v", i, err)
		}
	}
}

// allToAll: rounds of AllToAll between AllGathers (a reduce-scatter's
// rhythm): every member gets, in rank order, the part each member
// addressed to it and no other, whatever its size.
func allToAll(t *testing.T, newGroup NewGroup) {
	const n = 4
	g := newGroup(t, n, time.Minute)
	sizes := []int{0, 7, 20_000, 2_500_000}
	// part is from's part for to in round r.
	part := func(r uint64, from, to int) []byte {
		return payload(r, from*n+to, sizes[(int(r)+from+2*to)%len(sizes)])
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for _, m := range g {
		wg.Go(func() {
			me := m.Rank()
			for r := range uint64(6) {
				if r%2 == 0 {
					if _, err := m.AllGather(context.Background(), r, payload(r, me, 10)); err != nil {
						errs[me] = fmt.Errorf("round %d: %w", r, err)
						return
					}
					continue
				}
				parts := make([][]byte, n)
				for j := range parts {
					parts[j] = part(r, me, j)
				}
				got, err := m.AllToAll(context.Background(), r, parts)
				if err != nil {
					errs[me] = fmt.Errorf("round %d: %w", r, err)
					return
				}
				if len(got) != n {
					errs[me] = fmt.Errorf("round %d: %d parts", r, len(got))
					return
				}
				for i, p := range got {
					if !bytes.Equal(p, part(r, i, me)) {
						errs[me] = fmt.Errorf("round %d: part from member %d has %d bytes, not its part for this member (%d)", r, i, len(p), len(part(r, i, me)))
						return
					}
				}
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("member %d: %v", i, err)
		}
	}
}

// memberGone: a member that does not take part in a round makes the
// round fail on the others once the timeout passes.
func memberGone(t *testing.T, newGroup NewGroup) {
	const n = 3
	g := newGroup(t, n, 500*time.Millisecond)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for _, m := range g {
		wg.Go(func() {
			if _, err := m.AllGather(context.Background(), 0, payload(0, m.Rank(), 100)); err != nil {
				errs[m.Rank()] = fmt.Errorf("round 0: %w", err)
				return
			}
			if m.Rank() == n-1 {
				return // gone
			}
			if _, err := m.AllGather(context.Background(), 1, payload(1, m.Rank(), 100)); err == nil {
				errs[m.Rank()] = errors.New("round 1 completed without the last member")
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("member %d: %v", i, err)
		}
	}
}

// cancel: a round ends with its context's error.
func cancel(t *testing.T, newGroup NewGroup) {
	g := newGroup(t, 2, time.Minute)
	ctx, stop := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, stop)
	if _, err := g[0].AllGather(ctx, 0, []byte("alone")); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled round: %v, want context.Canceled", err)
	}
}
