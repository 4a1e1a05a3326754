package serve

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/streamkpca/streamkpca/internal/testkit"
	"github.com/streamkpca/streamkpca/snapshot"

	"github.com/streamkpca/streamkpca/publish"
)

// TestSlowBodiesDoNotStarveProjection: 8 clients announce 100,000-byte
// bodies and send a byte now and then. Before, each took a projection
// slot before its body was read, and with 4 slots another client's
// normal projection got no answer until the slow bodies timed out. Now
// bodies are received before a slot is taken: the normal request is
// answered while every slow client is still sending (their body timeout
// is 30 s here, the normal request's client gives up after 10).
func TestSlowBodiesDoNotStarveProjection(t *testing.T) {
	var cur Current
	s, data := testkit.Golden(t, 1)
	m, _ := snapshot.NewModel(s, snapshot.ModelOptions{})
	cur.Set(m, data)
	srv := httptest.NewServer(HTTPHandler("golden", &cur, Limits{MaxConcurrent: 4, BodyTimeout: 30 * time.Second}, VersionOptions{}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	stop := make(chan struct{})
	defer close(stop)
	for range 8 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "POST /v1/models/golden/project HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{")
		go func() {
			for {
				select {
				case <-stop:
					return
				case <-time.After(200 * time.Millisecond):
					if _, err := c.Write([]byte(" ")); err != nil {
						return
					}
				}
			}
		}()
	}
	time.Sleep(300 * time.Millisecond) // the slow requests are in the handler
	cl := &http.Client{Timeout: 10 * time.Second}
	t0 := time.Now()
	res, err := cl.Post(srv.URL+"/v1/models/golden/project", "application/json", strings.NewReader(`{"vectors":[[1,2]]}`))
	if err != nil {
		t.Fatalf("a normal projection under 8 slow bodies: %v", err)
	}
	t.Logf("a normal projection under 8 slow bodies answered in %v", time.Since(t0))
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Errorf("a normal projection under 8 slow bodies: %d %s", res.StatusCode, b)
	}
}

// TestHTTPErrorsInTheUsersTerms: an escaped slash is not a path
// separator (before: "GET is not allowed here; use GET", a 405), and the
// 404 for a missing version does not show the server's snapshot.dir.
func TestHTTPErrorsInTheUsersTerms(t *testing.T) {
	var cur Current
	store := testkit.GoldenStore(t, 3)
	h := HTTPHandler("golden", &cur, Limits{}, VersionOptions{Versions: publish.NewStoreVersions(store)})
	get := func(path string) (int, string) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
		return w.Code, w.Body.String()
	}
	if code, body := get("/v1/models/golden%2Fsnapshot"); code != 404 {
		t.Errorf("GET /v1/models/golden%%2Fsnapshot: %d %s, want 404", code, body)
	}
	if code, body := get("/v1/models/golden/versions/999/snapshot"); code != 404 || strings.Contains(body, store.Dir) {
		t.Errorf("GET a missing version: %d %s; want a 404 without the directory %s", code, body, store.Dir)
	}
	if code, body := get("/v1/models/golden/versions/3/snapshot"); code != 200 {
		t.Errorf("GET version 3: %d %s", code, body)
	}
}

// TestProjectNamesNaN: a client whose JSON encoder writes NaN or Infinity
// (Python's json.dumps does) is told that, not handed the parser's
// "invalid character 'N'".
func TestProjectNamesNaN(t *testing.T) {
	for _, body := range []string{`{"vectors": [[0.5, NaN]]}`, `{"vectors": [[1, 2], [Infinity, 0]]}`, `{"vectors": [[-Infinity, 0]]}`} {
		_, err := decodeProject([]byte(body), 10)
		if err == nil || !strings.Contains(err.Error(), "NaN or Infinity") {
			t.Errorf("%s: %v; want an error naming NaN or Infinity", body, err)
		}
	}
	if _, err := decodeProject([]byte(`{"vectors": [[0.5, nope]]}`), 10); err == nil || strings.Contains(err.Error(), "NaN") {
		t.Errorf("a malformed vector without NaN: %v; want the parser's error", err)
	}
}
