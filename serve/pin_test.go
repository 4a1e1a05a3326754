package serve

import (
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/streamkpca/streamkpca/internal/testkit"
	"github.com/streamkpca/streamkpca/snapshot"

	"github.com/streamkpca/streamkpca/publish"
)

// TestConcurrentPinsAgree: pin va, pin vb and unpin, sent at once, 40
// rounds. The service's OnPin writes the NATS pin key (here a variable,
// with the delay a network write has); what is served must always be
// what the key says. Before pins were serialised, a pin's key write and
// its change of the served version could interleave with another's (2
// rounds in 40 disagreed against a real server).
func TestConcurrentPinsAgree(t *testing.T) {
	var cur Current
	store := testkit.GoldenStore(t, 3, 7)
	var mu sync.Mutex
	var key uint64 // the "NATS pin key"
	calls := 0
	opt := VersionOptions{Versions: publish.NewStoreVersions(store), CanPin: true, OnPin: func(m *snapshot.Model, _ []byte) error {
		mu.Lock()
		calls++
		d := time.Duration(calls%3) * time.Millisecond
		mu.Unlock()
		time.Sleep(d) // the request's way to NATS
		mu.Lock()
		if m == nil {
			key = 0
		} else {
			key = m.Header().Version()
		}
		mu.Unlock()
		time.Sleep(d) // and the acknowledgement's way back
		return nil
	}}
	s, data := testkit.Golden(t, 9)
	m, err := snapshot.NewModel(s, snapshot.ModelOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Set(m, data)
	h := HTTPHandler("golden", &cur, Limits{}, opt)
	send := func(method, body string) {
		r := httptest.NewRequest(method, "/v1/models/golden/pin", strings.NewReader(body))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != 200 {
			t.Errorf("%s pin %s: %d %s", method, body, w.Code, w.Body)
		}
	}
	bad := 0
	for round := 0; round < 40; round++ {
		var wg sync.WaitGroup
		for _, req := range [][2]string{{"PUT", `{"version":3}`}, {"PUT", `{"version":7}`}, {"DELETE", ""}} {
			wg.Add(1)
			go func() { defer wg.Done(); send(req[0], req[1]) }()
		}
		wg.Wait()
		mu.Lock()
		if key != cur.Pinned() {
			bad++
		}
		mu.Unlock()
	}
	if bad > 0 {
		t.Errorf("in %d of 40 rounds the served pin differed from the pin key", bad)
	}
}
