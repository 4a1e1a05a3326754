package pipeline

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
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

// unreachableSource is a source whose brokers have been unreachable since
// a time the test sets (zero: reachable).
type unreachableSource struct {
	*ingest.MemSource
	mu    sync.Mutex
	since time.Time
}

func (s *unreachableSource) Unreachable() (time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.since, errors.New("dial tcp: connection refused")
}

// TestReadinessReflectsTheBrokers: /readyz is 503 before a model version
// is served, 200 once one is (saying so when the loop falls behind its
// stream whatever it sheds), and 503 again, saying why, once the brokers
// have been unreachable for 30 s (before: 200 for as long as a model was
// served, with Kafka down). /healthz stays 200: the process is alive.
func TestReadinessReflectsTheBrokers(t *testing.T) {
	c := testConfig(t)
	c.HTTP.Addr = "127.0.0.1:0"
	c.Kafka.Dim = 1
	src := &unreachableSource{MemSource: ingest.NewMemSource("v", 1024)}
	h := startLoop(t, c, src.MemSource, &ingest.MemDeadLetter{}, func(o *Options) { o.Source = src })
	deadline := time.Now().Add(10 * time.Second)
	for h.p.HTTPAddr() == "" && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if code, _ := h.get("/readyz"); code != 503 {
		t.Errorf("/readyz before a model: %d, want 503", code)
	}
	src.Produce(0, points(300, 1, 5)...)
	h.waitConsumed(300)
	for code, _ := h.get("/readyz"); code != 200; code, _ = h.get("/readyz") {
		if time.Now().After(deadline.Add(20 * time.Second)) {
			t.Fatal("/readyz never 200 with a model served")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Falling behind whatever is shed: still ready, saying so.
	h.p.mu.Lock()
	h.p.led.status.Behind = true
	h.p.mu.Unlock()
	if code, body := h.get("/readyz"); code != 200 || !strings.Contains(body, "falling behind kafka.topic") {
		t.Errorf("/readyz falling behind: %d %q, want 200 saying so", code, body)
	}
	h.p.mu.Lock()
	h.p.led.status.Behind = false
	h.p.mu.Unlock()
	src.mu.Lock()
	src.since = time.Now().Add(-10 * time.Second)
	src.mu.Unlock()
	if code, _ := h.get("/readyz"); code != 200 {
		t.Errorf("/readyz after 10 s without brokers: %d, want 200 (a rebalance or restart is that short)", code)
	}
	src.mu.Lock()
	src.since = time.Now().Add(-time.Minute)
	src.mu.Unlock()
	if code, body := h.get("/readyz"); code != 503 || !strings.Contains(body, "kafka unreachable for 60 s") {
		t.Errorf("/readyz after a minute without brokers: %d %q, want 503 saying so", code, body)
	}
	if code, _ := h.get("/healthz"); code != 200 {
		t.Errorf("/healthz: %d, want 200", code)
	}
}

// downSource is a stream whose brokers have been unreachable for a minute.
type downSource struct{ *ingest.MemSource }

func (downSource) Unreachable() (time.Time, error) {
	return time.Now().Add(-time.Minute), errors.New("dial tcp 127.0.0.1:1: connection refused")
}

// TestReadyzNamesKafka: before the first version, /readyz says why: the
// brokers it cannot reach (they used to go unnamed: "no model version
// yet" for as long as Kafka was down), or, with Kafka up, that it waits
// for the first batch from the topic.
func TestReadyzNamesKafka(t *testing.T) {
	for _, c := range []struct {
		src  ingest.Source
		want string
	}{
		{downSource{ingest.NewMemSource("v", 1)}, "kafka unreachable for 60 s (dial tcp 127.0.0.1:1: connection refused)"},
		{ingest.NewMemSource("v", 1), "waiting for the first batch"},
	} {
		cfg := testConfig(t)
		cfg.HTTP.Addr = "127.0.0.1:0"
		h := startLoop(t, cfg, ingest.NewMemSource("v", 1), &ingest.MemDeadLetter{}, func(o *Options) { o.Source = c.src })
		waitUntil(t, "HTTP", func() bool { return h.p.HTTPAddr() != "" })
		if code, body := h.get("/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, c.want) {
			t.Errorf("/readyz: %d %q; want 503 saying %q", code, body, c.want)
		}
	}
}

// get fetches path from the service's HTTP server: the status code and
// the body.
func (h *harness) get(path string) (int, string) {
	h.t.Helper()
	res, err := http.Get("http://" + h.p.HTTPAddr() + path)
	if err != nil {
		h.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}
