package pipeline

import (
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/streamkpca/streamkpca/ingest"
	"github.com/streamkpca/streamkpca/internal/logbuf"
)

// TestLogSaysWhereHTTPIs: the log names the address HTTP is served on
// (it said "http":"" before: the address was read before the server
// listened), which matters with a port chosen by the system.
func TestLogSaysWhereHTTPIs(t *testing.T) {
	c := testConfig(t)
	c.HTTP.Addr = "127.0.0.1:0"
	var buf logbuf.Buffer
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
