package publish_test

import (
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/streamkpca/streamkpca/internal/devstack"
	"github.com/streamkpca/streamkpca/publish"
	"github.com/streamkpca/streamkpca/publish/publishtest"
)

const golden = "../snapshot/testdata/golden.skpca"

// TestNATSBackendConformance: the versions' rules over NATS JetStream
// (an embedded server; each handle its own connection, as processes).
func TestNATSBackendConformance(t *testing.T) {
	publishtest.Run(t, publishtest.Harness{Golden: golden, New: func(t *testing.T) func(bool) publish.Backend {
		stack, err := devstack.StartNATSOnly(t.TempDir(), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stack.Close)
		return func(create bool) publish.Backend {
			nc, err := nats.Connect(stack.NATSURL())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(nc.Close)
			b, err := publish.NewNATSBackend(nc, publish.Config{Model: "golden"}, create)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}})
}

// TestMemBackendConformance: the same rules in memory.
func TestMemBackendConformance(t *testing.T) {
	publishtest.Run(t, publishtest.Harness{Golden: golden, New: func(t *testing.T) func(bool) publish.Backend {
		b := publish.NewMemBackend()
		return func(bool) publish.Backend { return b }
	}})
}
