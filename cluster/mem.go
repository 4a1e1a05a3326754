package cluster

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// MemGroup is an in-memory Gatherer for n members of one process (tests,
// benchmarks): Member(i) is rank i. A member that does not contribute to a
// round within the timeout is gone for the others, as over NATS.
type MemGroup struct {
	mu      sync.Mutex
	cond    *sync.Cond
	n       int
	timeout time.Duration
	rounds  map[uint64][][][]byte
	taken   map[uint64]int
}

// NewMemGroup returns a group of n members whose rounds time out after
// timeout.
func NewMemGroup(n int, timeout time.Duration) *MemGroup {
	g := &MemGroup{n: n, timeout: timeout, rounds: map[uint64][][][]byte{}, taken: map[uint64]int{}}
	g.cond = sync.NewCond(&g.mu)
	return g
}

// Member returns rank i's Gatherer.
func (g *MemGroup) Member(i int) Gatherer { return &memMember{g: g, rank: i} }

type memMember struct {
	g    *MemGroup
	rank int
}

func (m *memMember) Size() int { return m.g.n }
func (m *memMember) Rank() int { return m.rank }

// AllGather waits for every member's payload of round.
func (m *memMember) AllGather(ctx context.Context, round uint64, payload []byte) ([][]byte, error) {
	p := slices.Clone(payload)
	if p == nil {
		p = []byte{}
	}
	parts := make([][]byte, m.g.n)
	for j := range parts {
		parts[j] = p
	}
	return m.exchange(ctx, round, parts)
}

// AllToAll waits for every member's part for this one of round.
func (m *memMember) AllToAll(ctx context.Context, round uint64, parts [][]byte) ([][]byte, error) {
	if len(parts) != m.g.n {
		return nil, fmt.Errorf("cluster: in-memory round %d: %d parts for %d members", round, len(parts), m.g.n)
	}
	own := make([][]byte, m.g.n)
	for j, p := range parts {
		if own[j] = slices.Clone(p); own[j] == nil {
			own[j] = []byte{}
		}
	}
	return m.exchange(ctx, round, own)
}

// exchange files this member's parts of round (parts[j] for member j)
// and returns, in rank order, every member's part for this one.
func (m *memMember) exchange(ctx context.Context, round uint64, parts [][]byte) ([][]byte, error) {
	g := m.g
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	stop := context.AfterFunc(ctx, func() {
		g.mu.Lock()
		g.cond.Broadcast()
		g.mu.Unlock()
	})
	defer stop()
	g.mu.Lock()
	defer g.mu.Unlock()
	all := g.rounds[round]
	if all == nil {
		all = make([][][]byte, g.n)
		g.rounds[round] = all
	}
	all[m.rank] = parts
	g.cond.Broadcast()
	for slices.ContainsFunc(all, func(p [][]byte) bool { return p == nil }) {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("cluster: in-memory round %d: a member did not answer: %w", round, ctx.Err())
		}
		g.cond.Wait()
	}
	out := make([][]byte, g.n)
	for i, p := range all {
		out[i] = p[m.rank]
	}
	if g.taken[round]++; g.taken[round] == g.n {
		delete(g.rounds, round)
		delete(g.taken, round)
	}
	return out, nil
}
