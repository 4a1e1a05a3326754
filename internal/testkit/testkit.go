// Package testkit holds what several packages' tests share: an embedded
// NATS server with JetStream, the golden snapshot at chosen versions, a
// wait for a condition.
package testkit

import (
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/streamkpca/streamkpca/internal/devstack"
	"github.com/streamkpca/streamkpca/snapshot"
)

// NATS starts an embedded NATS server with JetStream (opt, if set,
// applied to its options) for t and returns a connection to it; both are
// closed with the test.
func NATS(t testing.TB, opt func(*server.Options)) *nats.Conn {
	t.Helper()
	stack, err := devstack.StartNATSOnly(t.TempDir(), opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stack.Close)
	nc, err := nats.Connect(stack.NATSURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// Golden loads snapshot/testdata/golden.skpca (from a package directory
// beside snapshot/) with its step set to v, and its bytes.
func Golden(t testing.TB, v uint64) (*snapshot.Snapshot, []byte) {
	t.Helper()
	s, _, err := snapshot.Load("../snapshot/testdata/golden.skpca")
	if err != nil {
		t.Fatal(err)
	}
	s.Header.Step = v
	data, err := s.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return s, data
}

// GoldenStore is a snapshot store in a temporary directory holding the
// golden model at versions.
func GoldenStore(t testing.TB, versions ...uint64) *snapshot.Store {
	t.Helper()
	store := &snapshot.Store{Dir: t.TempDir(), Model: "golden"}
	for _, v := range versions {
		s, _ := Golden(t, v)
		if _, _, err := store.Save(s); err != nil {
			t.Fatal(err)
		}
	}
	return store
}

// WaitFor polls cond every 10 ms and fails t after 20 s.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
