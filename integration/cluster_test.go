package integration

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/streamkpca/streamkpca/cluster"
	"github.com/streamkpca/streamkpca/internal/synth"
	"github.com/streamkpca/streamkpca/online"
	"github.com/streamkpca/streamkpca/transport"
)

// TestClusterOverNATS: three members, each on its own NATS connection,
// learn one model through transport.Exchange (payloads of about 100 KB a
// step, in chunks of 16 KiB): the same bits on every member, within 1e-12
// of one learner's Update on the union batches. Then one member's
// connection dies mid-stream: the survivors' step fails, and the next
// generation (survivors plus a new member) goes on from the group's
// state, every learned sample counted once.
func TestClusterOverNATS(t *testing.T) {
	s := startStack(t, nil)
	h := synth.Hermite16()
	d := h.Dim()
	x := make([]float64, 30000*d)
	rng := rand.New(rand.NewPCG(1, 1))
	for i := 0; i < 30000; i++ {
		h.Sample(x[i*d:(i+1)*d], rng)
	}
	cfg := online.Config{Model: "m", K: 4, BlockSize: 64, MaxFeatures: 1024, Center: true, Workers: 1}
	pos, learned := 0, []int{}

	conns := make([]*nats.Conn, 4)
	for i := range conns {
		nc, err := nats.Connect(s.NATSURL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		conns[i] = nc
	}
	// generation makes the members' Exchanges of one generation; ids[i]
	// is member i's id and conns[who[i]] its connection.
	generation := func(gen int64, ids []string, who []int, timeout time.Duration) []*transport.Exchange {
		ex := make([]*transport.Exchange, len(ids))
		for i, id := range ids {
			e, err := transport.NewExchange(conns[who[i]], transport.ExchangeConfig{Model: "m", Generation: gen, Members: ids, Self: id, Timeout: timeout, ChunkBytes: 16 << 10})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = e.Close() })
			ex[i] = e
		}
		return ex
	}
	// steps runs one step per share on members (nil: absent), returning
	// the errors; the rows are taken in member order.
	steps := func(members []*cluster.Member, shares [][]int) [][]error {
		var all [][]error
		for _, share := range shares {
			errs := make([]error, len(members))
			var wg sync.WaitGroup
			total := 0
			for i, m := range members {
				lo := pos + total
				total += share[i]
				if m == nil {
					continue
				}
				wg.Go(func() {
					next := cluster.Offsets{"t": {i: int64(lo + share[i])}}
					errs[i] = m.Step(context.Background(), x[lo*d:(lo+share[i])*d], share[i], next)
				})
			}
			wg.Wait()
			pos += total
			learned = append(learned, total)
			all = append(all, errs)
		}
		return all
	}
	check := func(errs [][]error) {
		t.Helper()
		for s, es := range errs {
			for i, err := range es {
				if err != nil {
					t.Fatalf("step %d, member %d: %v", s, i, err)
				}
			}
		}
	}
	join := func(ex []*transport.Exchange, members []*cluster.Member) []*cluster.Member {
		t.Helper()
		var wg sync.WaitGroup
		errs := make([]error, len(ex))
		out := make([]*cluster.Member, len(ex))
		for i, e := range ex {
			wg.Go(func() {
				if i < len(members) && members[i] != nil {
					out[i], errs[i] = members[i], members[i].Rejoin(context.Background(), e)
					return
				}
				out[i], errs[i] = cluster.Join(context.Background(), e, cfg, nil)
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("member %d: %v", i, err)
			}
		}
		return out
	}

	ids := []string{"a", "b", "c"}
	// A short timeout: the failed step below waits for it.
	members := join(generation(1, ids, []int{0, 1, 2}, 3*time.Second), nil)
	for _, m := range members {
		t.Cleanup(m.Close)
	}
	check(steps(members, [][]int{{200, 100, 100}, {300, 200, 100}, {300, 200, 100}, {0, 300, 300}, {300, 200, 100}, {300, 200, 100}}))

	// c's connection dies: a and b fail the next step (its rows are read
	// again in the next generation: the pos rewind).
	members[2].Close()
	conns[2].Close()
	failed := steps([]*cluster.Member{members[0], members[1], nil}, [][]int{{100, 100, 100}})
	pos -= 300
	learned = learned[:len(learned)-1]
	for i, err := range failed[0][:2] {
		if err == nil {
			t.Fatalf("member %d stepped without c", i)
		}
	}
	// The next generation: a, b and a new member d.
	ids = []string{"a", "b", "d"}
	members = join(generation(2, ids, []int{0, 1, 3}, time.Minute), []*cluster.Member{members[0], members[1]})
	t.Cleanup(members[2].Close)
	check(steps(members, [][]int{{300, 200, 100}, {300, 200, 100}, {100, 100, 400}}))

	ref, err := online.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	p := 0
	for _, n := range learned {
		if err := ref.Update(x[p*d:(p+n)*d], n); err != nil {
			t.Fatal(err)
		}
		p += n
	}
	want := ref.Snapshot()
	for i, m := range members {
		got := m.Snapshot()
		if got.Header.SamplesSeen != uint64(pos) {
			t.Errorf("member %d: %d samples seen, %d learned", i, got.Header.SamplesSeen, pos)
		}
		if i > 0 {
			sameCoefficients(t, fmt.Sprintf("member %d", i), got.Coef[0], members[0].Snapshot().Coef[0])
		}
		var diff, norm float64
		for c, v := range want.Coef[0] {
			diff += (got.Coef[0][c] - v) * (got.Coef[0][c] - v)
			norm += v * v
		}
		if rel := math.Sqrt(diff / norm); !(rel <= 1e-12) {
			t.Errorf("member %d: %.3g from Update on the union batches, want ≤ 1e-12", i, rel)
		}
	}
}
