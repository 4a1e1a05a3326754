package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/streamkpca/streamkpca/ingest"
	"github.com/streamkpca/streamkpca/publish"
	"github.com/streamkpca/streamkpca/snapshot"
)

// waitUntil polls cond every 5 ms for up to 60 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestPublishPathWithoutAServer: the run loop's publish path over the
// in-memory backend. While the store refuses writes, learning and local
// snapshots go on, failures are counted, nothing is published; once it
// accepts them, the newest persisted version is published (superseding
// the ones that failed), its notice is announced, and what is stored is
// the published form: the subspace solver's running average, learner
// state, is in the local snapshot and not in the published bytes.
func TestPublishPathWithoutAServer(t *testing.T) {
	c := testConfig(t)
	mem := publish.NewMemBackend()
	notices := mem.Notices()
	var down atomic.Bool
	down.Store(true)
	mem.SetFail(func(method string) error {
		if down.Load() && method == "PutObject" {
			return errors.New("the store is unreachable")
		}
		return nil
	})
	src := ingest.NewMemSource("v", 64)
	src.Produce(0, points(640, 1, 21)...)
	h := startLoop(t, c, src, &ingest.MemDeadLetter{}, func(o *Options) { o.Publish = mem })
	h.waitConsumed(640)
	waitUntil(t, "snapshots persisted and publishes failing", func() bool {
		return h.p.Status().Version >= 2 && testutil.ToFloat64(h.p.met.PublishErrors) >= 1
	})
	if _, _, err := publish.LatestFrom(context.Background(), mem, publish.Config{Model: c.Model}); !errors.Is(err, publish.ErrNoModel) {
		t.Fatalf("Latest while the store refuses writes: %v, want ErrNoModel", err)
	}
	down.Store(false)
	var n publish.Notice
	var m *snapshot.Model
	waitUntil(t, "the newest persisted version published", func() bool {
		var err error
		m, n, err = publish.LatestFrom(context.Background(), mem, publish.Config{Model: c.Model})
		return err == nil && n.Version == h.p.Status().Version
	})
	select {
	case b := <-notices:
		if !strings.Contains(string(b), fmt.Sprintf(`"version":%d,`, n.Version)) {
			t.Errorf("the first notice announced %s, want version %d (the newest, superseding the failed ones)", b, n.Version)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no notice announced")
	}
	local, _, err := snapshot.Load((&snapshot.Store{Dir: c.Snapshot.Dir, Model: c.Model}).Path(n.Version))
	if err != nil {
		t.Fatal(err)
	}
	data, err := mem.GetObject(context.Background(), n.Object)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := snapshot.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if local.Header.Averaged == nil || pub.Header.Averaged != nil || pub.State != nil {
		t.Errorf("learner state: local averaged %v, published averaged %v, published state %d numbers; want it only locally",
			local.Header.Averaged != nil, pub.Header.Averaged != nil, len(pub.State))
	}
	if m.Header().SamplesSeen != local.Header.SamplesSeen {
		t.Errorf("published version %d has %d samples, the local one %d", n.Version, m.Header().SamplesSeen, local.Header.SamplesSeen)
	}
}

// TestPinSurvivesARestart: a pin set over HTTP is in the store's pin key
// (what Watch clients follow), and a service restarted on the same
// snapshot.dir and store serves the pinned version, not the newest.
func TestPinSurvivesARestart(t *testing.T) {
	c := testConfig(t)
	c.HTTP.Addr, c.HTTP.Token = "127.0.0.1:0", "s3cret"
	mem := publish.NewMemBackend()
	src := ingest.NewMemSource("v", 64)
	src.Produce(0, points(1280, 1, 22)...)
	h := startLoop(t, c, src, &ingest.MemDeadLetter{}, func(o *Options) { o.Publish = mem })
	h.waitConsumed(1280)
	waitUntil(t, "8 versions and HTTP", func() bool { return h.p.Status().Version >= 8 && h.p.HTTPAddr() != "" })
	stored, err := (&snapshot.Store{Dir: c.Snapshot.Dir, Model: c.Model}).Versions()
	if err != nil || len(stored) < 2 {
		t.Fatalf("stored versions %v (%v)", stored, err)
	}
	pinned := stored[0] // the oldest in snapshot.dir
	req, _ := http.NewRequest("PUT", "http://"+h.p.HTTPAddr()+"/v1/models/loop/pin", strings.NewReader(fmt.Sprintf(`{"version":%d}`, pinned)))
	req.Header.Set("Authorization", "Bearer s3cret")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("pin version %d: %d %s", pinned, res.StatusCode, body)
	}
	pub, err := publish.NewPublisherOn(mem, publish.Config{Model: c.Model}, h.p.log)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := pub.PinnedVersion(context.Background()); err != nil || v != pinned {
		t.Fatalf("the store's pin names %d (%v), want %d", v, err, pinned)
	}
	newest := h.stop().Header.Version()
	h2 := startLoop(t, c, src, &ingest.MemDeadLetter{}, func(o *Options) { o.Publish = mem })
	waitUntil(t, "the restarted service serving", func() bool { return testutil.ToFloat64(h2.p.met.Served) != 0 })
	if got := testutil.ToFloat64(h2.p.met.Served); got != float64(pinned) {
		t.Errorf("after a restart the service serves version %v, want the pinned %d (the newest is %d)", got, pinned, newest)
	}
}
