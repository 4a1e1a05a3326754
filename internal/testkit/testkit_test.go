package testkit

import (
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// TestNATSGivesJetStream: the connection reaches a server with
// JetStream on, and the options function is applied to it.
func TestNATSGivesJetStream(t *testing.T) {
	applied := false
	nc := NATS(t, func(o *server.Options) { applied = true; o.MaxPayload = 1 << 20 })
	if !applied || nc.MaxPayload() != 1<<20 {
		t.Errorf("options applied %v, max payload %d; want true, 1 MiB", applied, nc.MaxPayload())
	}
	js, err := nc.JetStream()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.AccountInfo(); err != nil {
		t.Errorf("JetStream: %v", err)
	}
}

// TestNATSProcess: the server NATSProcess starts in a child process
// answers with JetStream, and stops with the test (NATSProcess's cleanup
// fails the test if the child does not end cleanly).
func TestNATSProcess(t *testing.T) {
	if ServeNATSProcess(t) {
		return
	}
	nc, err := nats.Connect(NATSProcess(t))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := nc.JetStream()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.AccountInfo(); err != nil {
		t.Errorf("JetStream: %v", err)
	}
}
