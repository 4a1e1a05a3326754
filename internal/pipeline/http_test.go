package pipeline

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/streamkpca/streamkpca/ingest"
)

// lockedBuffer is a log sink safe to read while Run writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestLogSaysWhereHTTPIs: the log names the address HTTP is served on
// (it said "http":"" before: the address was read before the server
// listened), which matters with a port chosen by the system.
func TestLogSaysWhereHTTPIs(t *testing.T) {
	c := testConfig(t)
	c.HTTP.Addr = "127.0.0.1:0"
	var buf lockedBuffer
	log := zerolog.New(&buf)
	h := startLoop(t, c, ingest.NewMemSource("v", 16), &ingest.MemDeadLetter{}, func(o *Options) { o.Logger = &log })
	deadline := time.Now().Add(10 * time.Second)
	for h.p.HTTPAddr() == "" && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // polling for the listener
	}
	addr := h.p.HTTPAddr()
	if addr == "" || !strings.Contains(buf.String(), `"http":"`+addr+`"`) {
		t.Errorf("serving on %q; the log does not say so:\n%s", addr, buf.String())
	}
}
