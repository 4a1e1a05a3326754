package transport

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/streamkpca/streamkpca/cluster"
	"github.com/streamkpca/streamkpca/cluster/gathertest"

	"github.com/streamkpca/streamkpca/internal/testkit"
)

// exchanges returns n members' Exchanges of one generation, each on its
// own connection, in rank order; member ids are given out of order.
func exchanges(t *testing.T, n int, timeout time.Duration, chunk int) []*Exchange {
	t.Helper()
	url := testkit.NATS(t, nil).ConnectedUrl()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("member-%d", n-1-i)
	}
	out := make([]*Exchange, n)
	for _, id := range ids {
		nc, err := nats.Connect(url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		e, err := NewExchange(nc, ExchangeConfig{Model: "m", Generation: 7, Members: ids, Self: id, Timeout: timeout, ChunkBytes: chunk})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.Close() })
		if out[e.Rank()] != nil {
			t.Fatalf("rank %d given twice", e.Rank())
		}
		out[e.Rank()] = e
	}
	return out
}

// TestExchangeConformance: the Exchange passes the Gatherer suite, with
// chunks of 64 KiB so that the suite's 3 MB payloads travel in 46.
func TestExchangeConformance(t *testing.T) {
	gathertest.Run(t, func(t *testing.T, n int, timeout time.Duration) []cluster.Gatherer {
		var out []cluster.Gatherer
		for _, e := range exchanges(t, n, timeout, 64<<10) {
			out = append(out, e)
		}
		return out
	})
}

// TestExchangeIgnoresStrayMessages: junk, chunks of another round, a
// member that does not exist or claims to be this one, and duplicates do
// not complete or corrupt a round; the round still completes with the
// members' payloads.
func TestExchangeIgnoresStrayMessages(t *testing.T) {
	ex := exchanges(t, 2, time.Minute, 1024)
	a, b := ex[0], ex[1]
	junk := func(round uint64, from, part, parts uint32, total uint64, body string) []byte {
		h := make([]byte, exchangeHeader)
		copy(h, exchangeMagic[:])
		putHeader(h, round, total, from, part, parts)
		return append(h, body...)
	}
	for _, msg := range [][]byte{
		[]byte("not a chunk"),
		junk(5, 1, 0, 1, 3, "far"), // a round no member can be at yet
		junk(0, 9, 0, 1, 3, "who"), // no such member
		junk(0, 0, 0, 1, 3, "me!"), // claims to be a, on b's subject
		junk(0, 1, 2, 1, 3, "bad"), // part past parts
		junk(0, 1, 0, 2, 1, "xx"),  // a chunk longer than the total
		junk(0, 1, 0, 2, 9, "yy"),  // half of a payload b does not send: replaced by b's
	} {
		if err := b.nc.Publish(a.Subject()+".1", msg); err != nil { // on b's subject
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() {
		all, err := b.AllGather(context.Background(), 0, []byte("from b"))
		if err == nil && string(all[0]) != "from a" {
			err = fmt.Errorf("b got %q from a", all[0])
		}
		done <- err
	}()
	all, err := a.AllGather(context.Background(), 0, []byte("from a"))
	if err != nil {
		t.Fatal(err)
	}
	if string(all[1]) != "from b" {
		t.Errorf("a got %q from b, want %q", all[1], "from b")
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if a.Dropped() != 7 {
		t.Errorf("%d stray messages dropped, want 7", a.Dropped())
	}
}

// TestExchangeGoneNamesTheMember: the error of a round a member missed
// says which.
func TestExchangeGoneNamesTheMember(t *testing.T) {
	ex := exchanges(t, 2, 300*time.Millisecond, 0)
	_, err := ex[0].AllGather(context.Background(), 0, []byte("x"))
	var gone *GoneError
	if !errors.As(err, &gone) || !errors.Is(err, ErrMemberGone) || len(gone.Missing) != 1 || gone.Missing[0] != "member-1" {
		t.Fatalf("%v, want a GoneError naming member-1", err)
	}
	if _, err := ex[0].AllGather(context.Background(), 0, nil); err == nil {
		t.Error("a round repeated after it failed was accepted")
	}
}

func TestNewExchangeRefusesBadConfigs(t *testing.T) {
	nc := testkit.NATS(t, nil)
	for _, c := range []ExchangeConfig{
		{Model: "a.b", Members: []string{"x"}, Self: "x"},
		{Model: "m", Members: []string{"x"}, Self: "y"},
		{Model: "m", Members: []string{"x", "x"}, Self: "x"},
		{Model: "m", Members: []string{"x"}, Self: "x", Generation: -1},
		{Model: "m", Members: []string{"x"}, Self: "x", ChunkBytes: 10},
		{Model: "m", Members: []string{"x"}, Self: "x", Timeout: -time.Second},
	} {
		if e, err := NewExchange(nc, c); err == nil {
			_ = e.Close()
			t.Errorf("%+v accepted", c)
		}
	}
}

// TestExchangeLateMember: a member that subscribes after the others have
// sent the first round still gets it (it is sent again until the second
// round completes), and the group goes on.
func TestExchangeLateMember(t *testing.T) {
	url := testkit.NATS(t, nil).ConnectedUrl()
	ids := []string{"a", "b"}
	open := func(id string) *Exchange {
		nc, err := nats.Connect(url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		e, err := NewExchange(nc, ExchangeConfig{Model: "m", Members: ids, Self: id, Timeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.Close() })
		return e
	}
	a := open("a")
	done := make(chan error, 1)
	go func() {
		for r := range uint64(3) {
			if _, err := a.AllGather(context.Background(), r, []byte{byte(r)}); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	time.Sleep(300 * time.Millisecond) // a's first round is out before b exists
	b := open("b")
	for r := range uint64(3) {
		all, err := b.AllGather(context.Background(), r, []byte{byte(r)})
		if err != nil {
			t.Fatalf("b, round %d: %v", r, err)
		}
		if len(all[0]) != 1 || all[0][0] != byte(r) {
			t.Fatalf("b, round %d: a's payload %v", r, all[0])
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// Defect: a 32-byte chunk claiming a payload of 2³⁰ bytes in 2³⁰ parts
// passed the checks and made the receiver allocate 2³⁰ part slots (24
// GiB). A chunk whose parts are not what the members' chunk size gives
// for its total is dropped before anything is allocated for it.
func TestExchangeBoundsWhatAChunkAllocates(t *testing.T) {
	ex := exchanges(t, 2, time.Minute, 1024)
	a, b := ex[0], ex[1]
	h := make([]byte, exchangeHeader)
	copy(h, exchangeMagic[:])
	putHeader(h, 0, maxExchangePayload, 1, 0, maxExchangePayload)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if err := b.nc.Publish(a.Subject()+".1", h); err != nil {
		t.Fatal(err)
	}
	// Chunks are filed as a round runs: run one.
	done := make(chan error, 1)
	go func() {
		_, err := b.AllGather(context.Background(), 0, []byte("from b"))
		done <- err
	}()
	if _, err := a.AllGather(context.Background(), 0, []byte("from a")); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if a.Dropped() != 1 {
		t.Errorf("%d chunks dropped, want 1", a.Dropped())
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
		t.Fatalf("one 32-byte chunk made the receiver allocate %d MiB", grew>>20)
	}
}

// Defect (found by `bench cluster --processes`): a group of one member
// sent its whole part to NATS every round (2.6 MB a step at the default
// budget) for nobody to read. A lone member's rounds send nothing and
// return its own payload.
func TestExchangeOfOneSendsNothing(t *testing.T) {
	e := exchanges(t, 1, time.Second, 64<<10)[0]
	spy, err := nats.Connect(e.nc.ConnectedUrl())
	if err != nil {
		t.Fatal(err)
	}
	defer spy.Close()
	sub, err := spy.SubscribeSync(e.Subject() + ".>")
	if err != nil {
		t.Fatal(err)
	}
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}
	payload := make([]byte, 200<<10)
	got, err := e.AllGather(context.Background(), 0, payload)
	if err != nil || len(got) != 1 || len(got[0]) != len(payload) {
		t.Fatalf("AllGather of one: %d payloads, %v", len(got), err)
	}
	got, err = e.AllToAll(context.Background(), 1, [][]byte{payload})
	if err != nil || len(got) != 1 || len(got[0]) != len(payload) {
		t.Fatalf("AllToAll of one: %d payloads, %v", len(got), err)
	}
	got, err = e.AllGather(context.Background(), 2, payload)
	if err != nil || len(got) != 1 {
		t.Fatalf("AllGather of one: %d payloads, %v", len(got), err)
	}
	if err := e.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if msg, err := sub.NextMsg(200 * time.Millisecond); err == nil {
		t.Fatalf("a group of one sent %d bytes on %s", len(msg.Data), msg.Subject)
	}
}
