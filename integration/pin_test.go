package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/streamkpca/streamkpca/publish"
	"github.com/streamkpca/streamkpca/snapshot"
)

// An operator pins an older version over HTTP: queries answer with it, a
// NATS Watch client follows it, and after a restart the service serves it
// again (the pin lives in the NATS KV store).
func TestPinFollowedAndRestored(t *testing.T) {
	s := startStack(t, map[string]int32{"pin": 1})
	produceHermite(t, s, "pin", 20_000, 1)
	dir := t.TempDir()
	cfg := config(s, "pin", dir)
	cfg.HTTP.Token = "op-token"
	cfg.Snapshot.EveryBatches = 5
	r := start(t, cfg)
	waitFor(t, time.Minute, "every message learned", func() bool { return r.p.Status().Samples == 20_000 })
	// Idle: the last partial batch learned, snapshotted and published, so
	// no new snapshot prunes the version pinned below.
	waitFor(t, time.Minute, "the newest version published", func() bool {
		st := r.p.Status()
		return st.Published != 0 && st.Published == st.Version && st.Samples == 20_000
	})
	st := snapshot.Store{Dir: cfg.Snapshot.Dir, Model: cfg.Model}
	vs, err := st.Versions()
	if err != nil || len(vs) < 2 {
		t.Fatalf("versions %v: %v", vs, err)
	}
	old := vs[1] // the second newest: older than what is served, and kept
	var watched atomic.Uint64
	wctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go publish.Watch(wctx, connect(t, s), publish.Config{Model: cfg.Model}, func(m *snapshot.Model, n publish.Notice) { watched.Store(n.Version) })
	waitFor(t, 30*time.Second, "the watcher at the newest version", func() bool { return watched.Load() == r.p.Status().Published })

	call := func(addr, method, path, body string) (int, string) {
		req, _ := http.NewRequest(method, "http://"+addr+"/v1/models/"+cfg.Model+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer op-token")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if code, body := call(r.p.HTTPAddr(), "PUT", "/pin", fmt.Sprintf(`{"version":%d}`, old)); code != 200 {
		t.Fatalf("pin: %d %s", code, body)
	}
	waitFor(t, 30*time.Second, "the watcher at the pinned version", func() bool { return watched.Load() == old })
	r.graceful(t)

	r2 := start(t, cfg)
	defer r2.graceful(t)
	if code, body := call(r2.p.HTTPAddr(), "GET", "", ""); code != 200 || !strings.Contains(body, fmt.Sprintf(`"version":%d,`, old)) {
		t.Errorf("after a restart: %d %.80s, want version %d served", code, body, old)
	}
	if code, body := call(r2.p.HTTPAddr(), "DELETE", "/pin", ""); code != 200 {
		t.Fatalf("unpin: %d %s", code, body)
	}
	waitFor(t, 30*time.Second, "the watcher back at the newest version", func() bool { return watched.Load() > old })
}
