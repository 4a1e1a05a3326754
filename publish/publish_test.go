package publish

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/rs/zerolog"

	"github.com/streamkpca/streamkpca/features"
	"github.com/streamkpca/streamkpca/internal/devstack"
	"github.com/streamkpca/streamkpca/internal/memwatch"
	"github.com/streamkpca/streamkpca/snapshot"
)

func natsServer(t *testing.T) *nats.Conn { return natsServerWith(t, nil) }

// natsServerWith is an embedded nats-server (with opt applied to its
// options, if set) and a connection to it, both closed with the test.
func natsServerWith(t *testing.T, opt func(*server.Options)) *nats.Conn {
	t.Helper()
	var stack *devstack.Stack
	var err error
	if opt == nil {
		stack, err = devstack.StartNATSOnly(t.TempDir())
	} else {
		stack, err = devstack.Start(devstack.Options{Dir: t.TempDir(), NATSOptions: opt})
	}
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

// golden loads snapshot/testdata/golden.skpca with its step set to v.
func golden(t *testing.T, v uint64) (*snapshot.Snapshot, []byte) {
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

// goldenStore is a snapshot store holding the golden model at versions.
func goldenStore(t *testing.T, versions ...uint64) *snapshot.Store {
	t.Helper()
	store := &snapshot.Store{Dir: t.TempDir(), Model: "golden"}
	for _, v := range versions {
		s, _ := golden(t, v)
		if _, _, err := store.Save(s); err != nil {
			t.Fatal(err)
		}
	}
	return store
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestPublishWatchLatest(t *testing.T) {
	nc := natsServer(t)
	cfg := Config{Model: "golden", Keep: 2}
	pub, err := NewPublisher(nc, cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Notices on the updates subject.
	notices := make(chan Notice, 10)
	sub, _ := nc.Subscribe("streamkpca.golden.updates", func(m *nats.Msg) {
		var n Notice
		json.Unmarshal(m.Data, &n)
		notices <- n
	})
	defer sub.Unsubscribe()
	for v := uint64(1); v <= 3; v++ {
		s, data := golden(t, v)
		// The held-out score and the changes detected travel with the
		// notice.
		s.Header.Diagnostics.Quality = &snapshot.Quality{Score: 0.5 + float64(v)/10, Components: []float64{0.5, float64(v) / 10}, Points: 1024}
		s.Header.Diagnostics.Changes = v - 1
		if _, err := pub.Publish(ctx, s, data); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var got []uint64
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- Watch(wctx, nc, cfg, func(m *snapshot.Model, n Notice) {
			mu.Lock()
			got = append(got, n.Version)
			mu.Unlock()
		})
	}()
	// The watcher starts with the current version…
	waitFor(t, "the current version", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 1 })
	for v := uint64(4); v <= 5; v++ {
		s, data := golden(t, v)
		if _, err := pub.Publish(ctx, s, data); err != nil {
			t.Fatal(err)
		}
	}
	// …then sees every newer one in order.
	waitFor(t, "versions 4 and 5", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 3 })
	cancel()
	if err := <-done; err != context.Canceled {
		t.Errorf("Watch returned %v, want context.Canceled", err)
	}
	if fmt.Sprint(got) != "[3 4 5]" {
		t.Errorf("watched versions %v, want [3 4 5]", got)
	}
	m, n, err := Latest(ctx, nc, cfg)
	if err != nil || n.Version != 5 || m.Header().Version() != 5 {
		t.Fatalf("Latest = %v %v", n.Version, err)
	}
	for i := 1; i <= 5; i++ {
		select {
		case n := <-notices:
			if n.Version != uint64(i) || n.Object != ObjectName("golden", "", uint64(i)) || len(n.SHA256) != 64 {
				t.Errorf("notice %d: %+v", i, n)
			}
			if i <= 3 && (n.Quality == nil || n.Quality.Score != 0.5+float64(i)/10 || n.Changes != uint64(i-1)) {
				t.Errorf("notice %d: quality %+v, changes %d; want the snapshot's", i, n.Quality, n.Changes)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("notice %d not received", i)
		}
	}
	// Retention: only the newest Keep = 2 objects remain.
	lst, _ := pub.b.ListObjects(ctx)
	if len(lst) != 2 {
		t.Errorf("object store holds %d versions, want 2", len(lst))
	}
}

func TestQueries(t *testing.T) {
	var cur Current
	h := HTTPHandler("golden", &cur, Limits{MaxVectors: 3, MaxBytes: 200}, VersionOptions{})
	do := func(method, path, body string, hdr ...string) (int, string, http.Header) {
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		if len(hdr) == 2 {
			r.Header.Set(hdr[0], hdr[1])
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		b, _ := io.ReadAll(w.Result().Body)
		return w.Code, string(b), w.Result().Header
	}
	if code, body, _ := do("POST", "/v1/models/golden/project", `{"vectors":[[1,2]]}`); code != 503 || !strings.Contains(body, "error") {
		t.Errorf("no model: %d %s", code, body)
	}
	s, data := golden(t, 7)
	m, _ := snapshot.NewModel(s, snapshot.ModelOptions{})
	cur.Set(m, data)
	want, _ := m.Project(nil, []float64{1, 2})
	code, body, _ := do("POST", "/v1/models/golden/project", `{"vectors":[[1,2]]}`)
	var resp ProjectResponse
	json.Unmarshal([]byte(body), &resp)
	if code != 200 || resp.Version != 7 || resp.Projections[0][0] != want[0] || resp.Projections[0][1] != want[1] {
		t.Errorf("project: %d %s, want %v", code, body, want)
	}
	for _, tc := range []struct {
		body string
		code int
	}{
		{`{"vectors":[[1,2],[1,2],[1,2],[1,2]]}`, 400}, // over MaxVectors
		{`{"vectors":[[1]]}`, 400},                     // wrong dimension
		{`{"vectors":[]}`, 400},
		{`{"vectors":[[1,2]],"view":"y"}`, 400}, // no second view
		{`{"vectors":[[1,2]],"extra":1}`, 400},  // unknown field
		{`not json`, 400},
		{`{"vectors":[[1,2]]}{"vectors":[[1,2]]}`, 400},             // a second document
		{`{"vectors":[[1,2]],"vectors":[[1,2]]}`, 400},              // a field twice
		{`{"vectors":[[` + strings.Repeat("1,", 200) + `2]]}`, 413}, // over MaxBytes
	} {
		if code, body, _ := do("POST", "/v1/models/golden/project", tc.body); code != tc.code || !strings.Contains(body, `"error"`) || strings.Contains(body, "publish.") {
			t.Errorf("%.40s: %d %s, want %d with a JSON error naming no Go type", tc.body, code, body, tc.code)
		}
	}
	etag7 := fmt.Sprintf(`".7.%08x"`, crc32.Checksum(data[:len(data)-4], crc32.MakeTable(crc32.Castagnoli)))
	code, body, hdr := do("GET", "/v1/models/golden/snapshot", "")
	if code != 200 || body != string(data) || hdr.Get("ETag") != etag7 {
		t.Errorf("snapshot: %d, etag %q, want %q", code, hdr.Get("ETag"), etag7)
	}
	if code, _, _ := do("GET", "/v1/models/golden/snapshot", "", "If-None-Match", etag7); code != 304 {
		t.Errorf("If-None-Match: %d, want 304", code)
	}
	// The same version of a new incarnation (a reset) is other bytes: a
	// client holding the old one's ETag gets the new model, not a 304.
	s2, _ := golden(t, 7)
	s2.Header.Incarnation = "reset"
	data2, err := s2.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	m2, _ := snapshot.NewModel(s2, snapshot.ModelOptions{})
	cur.Set(m2, data2)
	if code, body, hdr := do("GET", "/v1/models/golden/snapshot", "", "If-None-Match", etag7); code != 200 || body != string(data2) || hdr.Get("ETag") == etag7 {
		t.Errorf("a new incarnation at the same version: %d, etag %q (the old one's %q)", code, hdr.Get("ETag"), etag7)
	}
	cur.Set(m, data)
	if code, body, _ := do("GET", "/v1/models/golden", ""); code != 200 || !strings.Contains(body, `"version":7`) {
		t.Errorf("info: %d %s", code, body)
	}
	if code, _, _ := do("GET", "/v1/models/other", ""); code != 404 {
		t.Errorf("unknown model: %d, want 404", code)
	}
	// Defects: wrong methods answered 404; /v1/models was a 404.
	for path, allow := range map[string]string{"/v1/models/golden/project": "POST", "/v1/models/golden": "GET", "/v1/models/golden/snapshot": "GET"} {
		method := "GET"
		if allow == "GET" {
			method = "DELETE"
		}
		if code, _, hdr := do(method, path, ""); code != 405 || hdr.Get("Allow") != allow {
			t.Errorf("%s %s: %d Allow %q, want 405 Allow %s", method, path, code, hdr.Get("Allow"), allow)
		}
	}
	if code, body, _ := do("GET", "/v1/models", ""); code != 200 || !strings.Contains(body, `{"model":"golden","version":7,"ready":true}`) {
		t.Errorf("list models: %d %s", code, body)
	}
}

// TestServiceOverNATS: the micro service answers project and info, and
// errors carry a code.
func TestServiceOverNATS(t *testing.T) {
	nc := natsServer(t)
	var cur Current
	store := goldenStore(t, 4, 9)
	svc, err := NewService(nc, Config{Model: "golden"}, &cur, Limits{}, VersionOptions{Versions: NewStoreVersions(store), CanPin: true})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	msg, err := nc.Request("streamkpca.golden.project", []byte(`{"vectors":[[1,2]]}`), 5*time.Second)
	if err != nil || msg.Header.Get("Nats-Service-Error-Code") != "503" {
		t.Errorf("no model yet: %v %v", err, msg.Header)
	}
	s, data := golden(t, 9)
	m, _ := snapshot.NewModel(s, snapshot.ModelOptions{})
	cur.Set(m, data)
	msg, err = nc.Request("streamkpca.golden.project", []byte(`{"vectors":[[1,2]]}`), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var resp ProjectResponse
	if err := json.Unmarshal(msg.Data, &resp); err != nil || resp.Version != 9 || len(resp.Projections) != 1 {
		t.Errorf("project over NATS: %s", msg.Data)
	}
	msg, _ = nc.Request("streamkpca.golden.project", []byte(`{"vectors":[[1]]}`), 5*time.Second)
	if msg.Header.Get("Nats-Service-Error-Code") != "400" {
		t.Errorf("bad request over NATS: header %v body %s", msg.Header, msg.Data)
	}
	msg, _ = nc.Request("streamkpca.golden.info", nil, 5*time.Second)
	if !strings.Contains(string(msg.Data), `"version":9`) {
		t.Errorf("info over NATS: %s", msg.Data)
	}
	// Each endpoint describes its request and reply (nats micro info).
	info, err := nc.Request("$SRV.INFO.streamkpca", nil, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var si micro.Info
	json.Unmarshal(info.Data, &si)
	if len(si.Endpoints) != 5 {
		t.Errorf("%d endpoints, want 5", len(si.Endpoints))
	}
	for _, e := range si.Endpoints {
		if e.Metadata["request"] == "" || e.Metadata["response"] == "" || e.Metadata["errors"] == "" {
			t.Errorf("endpoint %s has no schema in its metadata: %v", e.Name, e.Metadata)
		}
	}
	// Versions over NATS: listed, projected with, pinned and unpinned.
	msg, _ = nc.Request("streamkpca.golden.versions", nil, 5*time.Second)
	if !strings.Contains(string(msg.Data), `"version":4`) || !strings.Contains(string(msg.Data), `"pinned":0`) {
		t.Errorf("versions over NATS: %s", msg.Data)
	}
	msg, _ = nc.Request("streamkpca.golden.project", []byte(`{"vectors":[[1,2]],"version":4}`), 5*time.Second)
	if json.Unmarshal(msg.Data, &resp); resp.Version != 4 {
		t.Errorf("project with version 4 over NATS: %s", msg.Data)
	}
	msg, _ = nc.Request("streamkpca.golden.project", []byte(`{"vectors":[[1,2]],"version":5}`), 5*time.Second)
	if msg.Header.Get("Nats-Service-Error-Code") != "404" {
		t.Errorf("project with a missing version over NATS: %v %s", msg.Header, msg.Data)
	}
	msg, _ = nc.Request("streamkpca.golden.pin", []byte(`{"version":4}`), 5*time.Second)
	if string(msg.Data) != `{"pinned":4}` || cur.Pinned() != 4 {
		t.Errorf("pin over NATS: %s", msg.Data)
	}
	msg, _ = nc.Request("streamkpca.golden.info", nil, 5*time.Second)
	if !strings.Contains(string(msg.Data), `"version":4`) {
		t.Errorf("info while pinned to 4: %.60s", msg.Data)
	}
	nc.Request("streamkpca.golden.pin", []byte(`{"version":0}`), 5*time.Second)
	if cur.Pinned() != 0 {
		t.Error("unpin over NATS did not unpin")
	}
}

// Pinning over NATS is refused unless enabled (nats.allow_pin).
func TestNATSPinNeedsAllowPin(t *testing.T) {
	nc := natsServer(t)
	var cur Current
	store := goldenStore(t, 4)
	s, data := golden(t, 4)
	m, _ := snapshot.NewModel(s, snapshot.ModelOptions{})
	cur.Set(m, data)
	svc, err := NewService(nc, Config{Model: "golden"}, &cur, Limits{}, VersionOptions{Versions: NewStoreVersions(store)})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	msg, err := nc.Request("streamkpca.golden.pin", []byte(`{"version":4}`), 5*time.Second)
	if err != nil || msg.Header.Get("Nats-Service-Error-Code") != "403" || cur.Pinned() != 0 {
		t.Errorf("pin without allow_pin: %v %v %s", err, msg.Header, msg.Data)
	}
}

// Defect: a request of 2,000,000 one-dimensional vectors fitted under the
// body limit and was decoded whole (~160 MB) before the vector count was
// checked. Decoding now stops at the limit; what it allocates is bounded
// by the accepted vectors, not by the request.
func TestProjectDecodingIsBounded(t *testing.T) {
	var cur Current
	s, data := golden(t, 1)
	m, _ := snapshot.NewModel(s, snapshot.ModelOptions{})
	cur.Set(m, data)
	body := []byte(`{"vectors":[` + strings.Repeat("[1],", 2_000_000) + `[1]]}`)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := Project(&cur, body, Limits{MaxVectors: 10_000, MaxBytes: int64(len(body))})
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "more than 10000 vectors") {
		t.Fatalf("Project: %v, want the vector limit", err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4<<20 {
		t.Errorf("decoding a refused %d-byte request allocated %d bytes, want ≤ 4 MiB", len(body), alloc)
	}
}

// Defect: a projection that is not finite (inputs too large for an
// unbounded kernel) made JSON encoding fail after a 200 status: an empty
// body over HTTP, no reply at all over NATS. It is a 400 with its reason.
func TestNonFiniteProjectionIsAnError(t *testing.T) {
	var cur Current
	s, _ := golden(t, 1)
	s.Header.Views[0].Kernel = features.Kernel{Family: features.Polynomial, Degree: 2, Offset: 1}
	s.Header.Views[0].Preprocess = snapshot.Preprocess{}
	data, err := s.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	m, err := snapshot.NewModel(s, snapshot.ModelOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Set(m, data)
	h := HTTPHandler("golden", &cur, Limits{}, VersionOptions{})
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("POST", "/v1/models/golden/project", strings.NewReader(`{"vectors":[[1e300,1e300]]}`)))
	if w.Code != 400 || !strings.Contains(w.Body.String(), "not finite") {
		t.Errorf("project of huge values: %d %q, want 400 naming the non-finite projection", w.Code, w.Body.String())
	}
}

// Concurrent hostile and valid project requests over loopback HTTP: every
// valid one answered correctly, every hostile one refused, and the heap in
// use stays under the stated bound, MaxReading × MaxBytes +
// MaxConcurrent × (5 × MaxBytes + 8·k·MaxVectors) above the idle heap. (Before: 25 requests of 2,000,000
// vectors at once took resident memory to 4 GB.)
func TestConcurrentProjectMemoryBound(t *testing.T) {
	var cur Current
	s, data := golden(t, 1)
	m, _ := snapshot.NewModel(s, snapshot.ModelOptions{})
	cur.Set(m, data)
	lim := Limits{MaxVectors: 10_000, MaxBytes: 8 << 20, MaxConcurrent: 4}
	srv := httptest.NewServer(HTTPHandler("golden", &cur, lim, VersionOptions{}))
	defer srv.Close()
	hostile := []byte(`{"vectors":[` + strings.Repeat("[1],", 2_000_000-1) + `[1]]}`) // ≈ 8 MB, 2M vectors
	valid := []byte(`{"vectors":[[1,2],[0.5,-1]]}`)
	want, _ := m.Project(nil, []float64{1, 2, 0.5, -1})
	runtime.GC()
	var idle runtime.MemStats
	runtime.ReadMemStats(&idle)
	stopWatch := memwatch.Start(5 * time.Millisecond)
	var wg sync.WaitGroup
	errs := make(chan string, 50)
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := valid
			if i%2 == 0 {
				body = hostile
			}
			res, err := http.Post(srv.URL+"/v1/models/golden/project", "application/json", bytes.NewReader(body))
			if err != nil {
				errs <- err.Error()
				return
			}
			defer res.Body.Close()
			b, _ := io.ReadAll(res.Body)
			if i%2 == 0 {
				// Refused: too many vectors (400), or, when the machine is
				// slow (the race detector), not read in time (408).
				if res.StatusCode != 400 && res.StatusCode != 408 {
					errs <- fmt.Sprintf("hostile request: %d", res.StatusCode)
				}
				return
			}
			var pr ProjectResponse
			if json.Unmarshal(b, &pr); res.StatusCode != 200 || len(pr.Projections) != 2 ||
				pr.Projections[0][0] != want[0] || pr.Projections[1][1] != want[3] {
				errs <- fmt.Sprintf("valid request: %d %s", res.StatusCode, b)
			}
		}()
	}
	wg.Wait()
	peak := stopWatch()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	lim.setDefaults()
	bound := uint64(lim.MaxReading)*uint64(lim.MaxBytes) + uint64(lim.MaxConcurrent)*(5*uint64(lim.MaxBytes)+8*uint64(m.K())*uint64(lim.MaxVectors))
	grew := peak - min(peak, idle.HeapInuse)
	t.Logf("heap in use grew by %d MiB at most (bound %d MiB)", grew>>20, bound>>20)
	if grew > bound {
		t.Errorf("heap in use grew by %d MiB, over the stated bound of %d MiB", grew>>20, bound>>20)
	}
}

// Watch follows the served version: a pin to an older version, then the
// newest again after unpinning.
func TestWatchFollowsPin(t *testing.T) {
	nc := natsServer(t)
	cfg := Config{Model: "golden"}
	pub, err := NewPublisher(nc, cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	models := map[uint64][]byte{}
	for _, v := range []uint64{4, 9} {
		s, data := golden(t, v)
		if _, err := pub.Publish(ctx, s, data); err != nil {
			t.Fatal(err)
		}
		models[v] = data
	}
	var mu sync.Mutex
	var got []uint64
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go Watch(wctx, nc, cfg, func(m *snapshot.Model, n Notice) {
		mu.Lock()
		got = append(got, n.Version)
		mu.Unlock()
	})
	seen := func(want ...uint64) func() bool {
		return func() bool { mu.Lock(); defer mu.Unlock(); return slices.Equal(got, want) }
	}
	waitFor(t, "the newest version", seen(9))
	s4, _ := golden(t, 4)
	m4, _ := snapshot.NewModel(s4, snapshot.ModelOptions{})
	if err := pub.Pin(ctx, m4, models[4]); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the pinned version", seen(9, 4))
	s10, data10 := golden(t, 10)
	if _, err := pub.Publish(ctx, s10, data10); err != nil { // learning goes on while pinned
		t.Fatal(err)
	}
	if err := pub.Unpin(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the newest version after unpinning", seen(9, 4, 10))
	// A Watch started while pinned starts at the pinned version.
	if err := pub.Pin(ctx, m4, models[4]); err != nil {
		t.Fatal(err)
	}
	var first atomic.Uint64
	go Watch(wctx, nc, cfg, func(m *snapshot.Model, n Notice) { first.CompareAndSwap(0, n.Version) })
	waitFor(t, "a new watcher's first version", func() bool { return first.Load() != 0 })
	if first.Load() != 4 {
		t.Errorf("a watcher started while pinned to 4 began at %d", first.Load())
	}
}

// TestPublishedBytesLeaveLearnerStateOut: whatever learner state a stored
// snapshot holds — the change detector's alone included, as an oja or a
// two-view learner writes it — its published form holds none of it (the
// form snapshot.Served defines).
func TestPublishedBytesLeaveLearnerStateOut(t *testing.T) {
	s, data := golden(t, 3)
	s.Header.Detector = &snapshot.Detector{Batches: 4, Points: 64, Mean: 0.7, Var: 0.01}
	withState, err := s.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	got, err := PublishedBytes(s, withState)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("published bytes of a snapshot with detector state: %d bytes, want the %d of the model without it", len(got), len(data))
	}
}

// closingBackend is a MemBackend whose key watch ends at once.
type closingBackend struct{ *MemBackend }

func (closingBackend) WatchKeys(ctx context.Context, keys []string) (<-chan KeyUpdate, error) {
	ch := make(chan KeyUpdate)
	close(ch)
	return ch, nil
}

// TestWatchReportsAClosedWatch: a key watch that ends while the caller's
// context is live is an error Watch returns (ErrWatchClosed), not a
// silent nil that a reader such as `streamkpca watch` takes for a clean
// stop.
func TestWatchReportsAClosedWatch(t *testing.T) {
	err := WatchFrom(context.Background(), closingBackend{NewMemBackend()}, Config{Model: "golden"}, func(*snapshot.Model, Notice) {})
	if !errors.Is(err, ErrWatchClosed) {
		t.Fatalf("Watch returned %v, want ErrWatchClosed", err)
	}
}

// Defect: with the JetStream store full (say after an operator purge
// filled it again with the service's own nats.keep versions) publishing
// failed for good: old versions were pruned only after a successful put.
// Now a put the store has no room for deletes the oldest version no
// reader needs (never the one the latest pointer names, never the pinned
// one) and tries again: every version is published.
func TestPublishPrunesToFit(t *testing.T) {
	b := NewMemBackend()
	_, one := golden(t, 1)
	b.MaxBytes = 3*len(one) + len(one)/2 // room for three versions
	pub, err := NewPublisherOn(b, Config{Model: "golden", Keep: 5}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for v := uint64(1); v <= 8; v++ {
		s, data := golden(t, v)
		if v == 4 { // pin version 2 while 3 is the newest
			m, d := golden(t, 2)
			mm, _ := snapshot.NewModel(m, snapshot.ModelOptions{})
			if err := pub.Pin(ctx, mm, d); err != nil {
				t.Fatalf("pin 2: %v", err)
			}
		}
		if _, err := pub.Publish(ctx, s, data); err != nil {
			t.Fatalf("publish %d into a full store: %v", v, err)
		}
	}
	m, n, err := LatestFrom(ctx, b, Config{Model: "golden"})
	if err != nil || n.Version != 8 || m.Header().Version() != 8 {
		t.Fatalf("latest: version %d (%v), want 8", n.Version, err)
	}
	lst, _ := b.ListObjects(ctx)
	var names []string
	for _, o := range lst {
		names = append(names, o.Name)
	}
	if !slices.Contains(names, ObjectName("golden", "", 2)) || !slices.Contains(names, ObjectName("golden", "", 8)) || len(names) > 3 {
		t.Errorf("stored %v: want the pinned version 2 and the newest 8, within room for three", names)
	}
}

// TestPublishPrunesToFitNATS: as TestPublishPrunesToFit against a real
// nats-server whose JetStream storage (max_file_store) is used up: the
// server's "insufficient resources" is read as ErrStoreFull and every
// version is still published.
func TestPublishPrunesToFitNATS(t *testing.T) {
	nc := natsServerWith(t, func(o *server.Options) { o.JetStreamMaxStore = 96 << 10 })
	pub, err := NewPublisher(nc, Config{Model: "golden", Keep: 1000}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	full := false
	for v := uint64(1); v <= 300; v++ {
		s, data := golden(t, v)
		if _, err := pub.Publish(ctx, s, data); err != nil {
			t.Fatalf("publish %d: %v", v, err)
		}
		if lst, _ := pub.b.ListObjects(ctx); len(lst) < int(v) {
			full = true
		}
	}
	if !full {
		t.Fatal("300 versions fit in the store: the test never filled it")
	}
	if _, n, err := Latest(ctx, nc, Config{Model: "golden"}); err != nil || n.Version != 300 {
		t.Fatalf("latest: version %d (%v), want 300", n.Version, err)
	}
	// An operator purges the object store's stream (issue 43: the service
	// then filled the store with its own versions again and stuck, 25
	// versions behind the one it served): every later version is
	// published and is the latest.
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, "OBJ_"+DefaultObjectBucket)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	for v := uint64(301); v <= 500; v++ {
		s, data := golden(t, v)
		if _, err := pub.Publish(ctx, s, data); err != nil {
			t.Fatalf("publish %d after the purge: %v", v, err)
		}
		if _, n, err := Latest(ctx, nc, Config{Model: "golden"}); err != nil || n.Version != v {
			t.Fatalf("after the purge, latest is version %d (%v) once %d is published", n.Version, err, v)
		}
	}
}

// Defect: every GET …/versions (and its NATS request) read, re-encoded
// and hashed every stored snapshot. List now reads a version once, and
// again only when its file changes; the figures are the same.
func TestVersionsListReadsEachVersionOnce(t *testing.T) {
	store := goldenStore(t, 1, 2, 3)
	vs := NewStoreVersions(store)
	first, err := vs.List()
	if err != nil || len(first) != 3 || vs.reads != 3 {
		t.Fatalf("first list: %d versions (%v), %d files read; want 3, 3", len(first), err, vs.reads)
	}
	again, _ := vs.List()
	if !slices.Equal(again, first) || vs.reads != 3 {
		t.Fatalf("second list: %d files read (want none more), same figures %v", vs.reads-3, slices.Equal(again, first))
	}
	s, _ := golden(t, 4)
	if _, _, err := store.Save(s); err != nil {
		t.Fatal(err)
	}
	after, _ := vs.List()
	if len(after) != 4 || vs.reads != 4 {
		t.Fatalf("after a new version: %d versions, %d files read; want 4 and 4", len(after), vs.reads)
	}
	// The figures of a read version are its published bytes' own.
	_, data, err := vs.Load(4)
	i := slices.IndexFunc(after, func(v VersionInfo) bool { return v.Version == 4 })
	if err != nil || i < 0 || after[i].Size != len(data) {
		t.Fatalf("version 4: listed at %d, load %d bytes (%v)", i, len(data), err)
	}
}

// Defect: a pin wrote its version's object, then the pin key; a publish
// whose prune ran between the two read no pin and deleted the version
// just restored, so watchers skipped the pinned version while HTTP served
// it. A pin and a prune are now ordered: the pinned version stays.
func TestPinIsNotPrunedUnderIt(t *testing.T) {
	b := NewMemBackend()
	pub, err := NewPublisherOn(b, Config{Model: "golden", Keep: 2}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for v := uint64(1); v <= 4; v++ { // version 1 is pruned by the time of the pin
		s, data := golden(t, v)
		if _, err := pub.Publish(ctx, s, data); err != nil {
			t.Fatal(err)
		}
	}
	published := make(chan error, 1)
	var first atomic.Bool
	b.Fail = func(method string) error {
		// The first PutKey is the pin's: its object is stored, its key not
		// yet. A publish runs meanwhile (its own PutKey passes through).
		if method == "PutKey" && first.CompareAndSwap(false, true) {
			go func() {
				s, data := golden(t, 5)
				_, err := pub.Publish(ctx, s, data)
				published <- err
			}()
			time.Sleep(200 * time.Millisecond) // the publish and its prune, if nothing orders them
		}
		return nil
	}
	s1, d1 := golden(t, 1)
	m1, _ := snapshot.NewModel(s1, snapshot.ModelOptions{})
	if err := pub.Pin(ctx, m1, d1); err != nil {
		t.Fatal(err)
	}
	if err := <-published; err != nil {
		t.Fatal(err)
	}
	b.Fail = nil
	if _, err := b.GetObject(ctx, ObjectName("golden", "", 1)); err != nil {
		t.Fatalf("the pinned version 1: %v", err)
	}
}
