package pipeline

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: every
// Run, with its fetchers, publisher, committer and HTTP server, must end
// with it, whatever the path (graceful stop, Kill, errors). The one
// exception is nats.go's (see integration/helpers_test.go): a goroutine of
// its JetStream client that can stay blocked after an Object Store put.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/nats-io/nats.go/jetstream.(*jetStream).resetPendingAcksOnReconnect"))
}
