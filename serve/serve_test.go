package serve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/streamkpca/streamkpca/features"
	"github.com/streamkpca/streamkpca/internal/memwatch"
	"github.com/streamkpca/streamkpca/internal/testkit"
	"github.com/streamkpca/streamkpca/publish"
	"github.com/streamkpca/streamkpca/snapshot"
)

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
	s, data := testkit.Golden(t, 7)
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
	s2, _ := testkit.Golden(t, 7)
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
	nc := testkit.NATS(t, nil)
	var cur Current
	store := testkit.GoldenStore(t, 4, 9)
	svc, err := NewService(nc, publish.Config{Model: "golden"}, &cur, Limits{}, VersionOptions{Versions: publish.NewStoreVersions(store), CanPin: true})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	msg, err := nc.Request("streamkpca.golden.project", []byte(`{"vectors":[[1,2]]}`), 5*time.Second)
	if err != nil || msg.Header.Get("Nats-Service-Error-Code") != "503" {
		t.Errorf("no model yet: %v %v", err, msg.Header)
	}
	s, data := testkit.Golden(t, 9)
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
	if len(si.Endpoints) != 6 {
		t.Errorf("%d endpoints, want 6", len(si.Endpoints))
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
	nc := testkit.NATS(t, nil)
	var cur Current
	store := testkit.GoldenStore(t, 4)
	s, data := testkit.Golden(t, 4)
	m, _ := snapshot.NewModel(s, snapshot.ModelOptions{})
	cur.Set(m, data)
	svc, err := NewService(nc, publish.Config{Model: "golden"}, &cur, Limits{}, VersionOptions{Versions: publish.NewStoreVersions(store)})
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
	s, data := testkit.Golden(t, 1)
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
	s, _ := testkit.Golden(t, 1)
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
	if raceDetector {
		// Measured in the quick tier, without the race detector: under
		// it sync.Pool keeps nothing, and a CI run exceeded the bound
		// by 4 MiB (292 against 288) where it holds with room otherwise.
		t.Skip("a heap bound: not measurable under the race detector (run without -race)")
	}
	var cur Current
	s, data := testkit.Golden(t, 1)
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
