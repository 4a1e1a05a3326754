package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
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
	pub, err := snapshot.Decode(objectBytes(t, mem, n.Object))
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

// TestOneOwnerPerModelName: two services given one model name (their own
// snapshot dirs and streams, one store). The first owns the name; the
// second learns and snapshots but stands by: it publishes nothing, says
// who owns the name (status, metric), and a reader watching the model
// sees one incarnation. When the owner crashes (no release), the second
// takes over within the lease's TTL and the reader moves once, for good.
func TestOneOwnerPerModelName(t *testing.T) {
	mem := publish.NewMemBackend()
	c1, c2 := testConfig(t), testConfig(t)
	c1.NATS.LeaseTTL, c2.NATS.LeaseTTL = time.Second, time.Second
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var incs []string // the incarnation of every delivery, in order
	go publish.WatchFrom(ctx, mem, publish.Config{Model: c1.Model}, func(m *snapshot.Model, n publish.Notice) {
		mu.Lock()
		incs = append(incs, n.Incarnation)
		mu.Unlock()
	})
	src1, src2 := ingest.NewMemSource("v", 64), ingest.NewMemSource("v", 64)
	src1.Produce(0, points(1280, 1, 31)...)
	src2.Produce(0, points(1280, 1, 32)...)
	h1 := startLoop(t, c1, src1, &ingest.MemDeadLetter{}, func(o *Options) { o.Publish = mem })
	waitUntil(t, "the first service publishing", func() bool { return h1.p.Status().Published >= 2 })
	h2 := startLoop(t, c2, src2, &ingest.MemDeadLetter{}, func(o *Options) { o.Publish = mem })
	h2.waitConsumed(1280)
	waitUntil(t, "the second service snapshotting", func() bool { return h2.p.Status().Version >= 8 })
	time.Sleep(1500 * time.Millisecond) // longer than the TTL: the owner's renewals keep it
	st := h2.p.Status()
	if st.Published != 0 || !strings.Contains(st.StandingBy, latest(t, c1).Header.Incarnation) {
		t.Fatalf("the second service published %d and stands by for %q; want 0, standing by for %s", st.Published, st.StandingBy, latest(t, c1).Header.Incarnation)
	}
	if got := testutil.ToFloat64(h2.p.met.LeaseHeld); got != 0 {
		t.Errorf("streamkpca_lease_held of the second service = %v, want 0", got)
	}
	inc1, inc2 := latest(t, c1).Header.Incarnation, latest(t, c2).Header.Incarnation
	if objs, _ := mem.ListObjects(ctx); len(objs) == 0 || slices.ContainsFunc(objs, func(o publish.ObjectInfo) bool { return strings.Contains(o.Name, inc2) }) {
		t.Fatalf("stored objects %v: want the owner's only", objs)
	}
	h1.p.Kill() // a crash: the lease is not released, it lapses
	<-h1.exited
	killed := time.Now()
	waitUntil(t, "the second service taking over", func() bool {
		_, n, err := publish.LatestFrom(ctx, mem, publish.Config{Model: c1.Model})
		return err == nil && n.Incarnation == inc2
	})
	t.Logf("the standby's newest version is the latest %.2f s after the owner was killed (nats.lease_ttl %v; renewals every third of it)", time.Since(killed).Seconds(), c2.NATS.LeaseTTL)
	if got := testutil.ToFloat64(h2.p.met.LeaseHeld); got != 1 {
		t.Errorf("streamkpca_lease_held after the takeover = %v, want 1", got)
	}
	waitUntil(t, "the reader moving to the new owner", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(incs) > 0 && incs[len(incs)-1] == inc2
	})
	mu.Lock()
	defer mu.Unlock()
	switches := 0
	for i := 1; i < len(incs); i++ {
		if incs[i] != incs[i-1] {
			switches++
		}
	}
	if incs[0] != inc1 || switches != 1 {
		t.Fatalf("the reader was delivered incarnations %v: want %s then %s, one switch", incs, inc1, inc2)
	}
}

// hangOn makes every call of method on mem hang until release
// (ignoring its context, as a store that stops answering does); wait
// fails the test unless a call of it began within 60 s.
func hangOn(t *testing.T, mem *publish.MemBackend, method string) (wait func(what string), release func()) {
	hang, hung := make(chan struct{}), make(chan struct{}, 1)
	mem.SetFail(func(m string) error {
		if m == method {
			select {
			case hung <- struct{}{}:
			default:
			}
			<-hang
		}
		return nil
	})
	wait = func(what string) {
		t.Helper()
		select {
		case <-hung:
		case <-time.After(60 * time.Second):
			t.Fatalf("no %s started", what)
		}
	}
	return wait, func() { close(hang) }
}

// TestStopDoesNotWaitForAHungPublish: a publish call that never returns
// (a store that ignores its context) holds up a graceful stop only
// until shutdown_timeout, not the publish's own 15 s deadline and grace.
func TestStopDoesNotWaitForAHungPublish(t *testing.T) {
	c := testConfig(t)
	c.ShutdownTimeout = time.Second
	mem := publish.NewMemBackend()
	hung, release := hangOn(t, mem, "PutObject")
	defer release() // before startLoop's cleanup
	src := ingest.NewMemSource("v", 64)
	src.Produce(0, points(640, 1, 23)...)
	h := startLoop(t, c, src, &ingest.MemDeadLetter{}, func(o *Options) { o.Publish = mem })
	hung("a publish")
	start := time.Now()
	h.cancel()
	select {
	case <-h.exited:
	case <-time.After(3*publish.Grace + publish.Timeout):
		t.Fatal("Run did not return")
	}
	if took := time.Since(start); took >= publish.Timeout {
		t.Fatalf("the stop took %v with shutdown_timeout %v: it waited for the hung publish (deadline %v)", took.Round(time.Millisecond), c.ShutdownTimeout, publish.Timeout)
	}
}

// TestStatusShowsTheStoreLimits: after a publish the status page says how
// full the object store is against its limit (here a bucket of 8 MiB
// holding the versions the store lists).
func TestStatusShowsTheStoreLimits(t *testing.T) {
	c := testConfig(t)
	c.HTTP.Addr = "127.0.0.1:0"
	mem := publish.NewMemBackend()
	mem.MaxBytes = 8 << 20
	src := ingest.NewMemSource("v", 64)
	src.Produce(0, points(640, 1, 24)...)
	h := startLoop(t, c, src, &ingest.MemDeadLetter{}, func(o *Options) { o.Publish = mem })
	h.waitConsumed(640)
	waitUntil(t, "a publish and HTTP", func() bool { return h.p.Status().Published != 0 && h.p.Status().Store != nil && h.p.HTTPAddr() != "" })
	objs, _ := mem.ListObjects(context.Background())
	var stored int
	for _, o := range objs {
		stored += len(objectBytes(t, mem, o.Name))
	}
	if u := h.p.Status().Store; u.MaxBytes != 8<<20 || u.Bytes == 0 || u.Bytes > uint64(stored) {
		t.Fatalf("store usage %+v; the store holds %d bytes of an 8 MiB limit", u, stored)
	}
	res, err := http.Get("http://" + h.p.HTTPAddr() + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !strings.Contains(string(body), "of 8.0 MiB (the bucket&#39;s limit)") && !strings.Contains(string(body), "of 8.0 MiB (the bucket's limit)") {
		t.Fatalf("the status page does not show the store's limit:\n%s", body)
	}
}

// TestPublishedOnceThePointerMoves (the NATS partition of
// integration's TestPartitionedService): a version is published, for the
// status page, the metric and the loop, when the model's key points at it
// and its notice is announced. Pruning old versions comes after and is
// best effort. Defect: the status waited for the prune too, so a store
// that stopped answering after the pointer moved left the status on the
// previous version for the publish's whole deadline — and, past it, the
// loop counted the version as failed and published it again.
func TestPublishedOnceThePointerMoves(t *testing.T) {
	c := testConfig(t)
	mem := publish.NewMemBackend()
	hung, release := hangOn(t, mem, "ListObjects") // the prune's first call
	defer release()                                // before startLoop's cleanup
	src := ingest.NewMemSource("v", 64)
	src.Produce(0, points(640, 1, 25)...)
	h := startLoop(t, c, src, &ingest.MemDeadLetter{}, func(o *Options) { o.Publish = mem })
	hung("a prune")
	// The pointer moved before the prune began: the status says so well
	// inside the publish's deadline (publish.Timeout), not after it.
	deadline := time.Now().Add(publish.Timeout / 2)
	for h.p.Status().Published == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("status: published version 0 %v after the prune hung, though the key points at a version", publish.Timeout/2)
		}
		time.Sleep(5 * time.Millisecond)
	}
	key, err := mem.GetKey(context.Background(), c.Model)
	if err != nil {
		t.Fatal(err)
	}
	var n publish.Notice
	if err := json.Unmarshal(key, &n); err != nil {
		t.Fatal(err)
	}
	if got := h.p.Status().Published; got > n.Version || got == 0 {
		t.Fatalf("status: published %d; the key points at version %d", got, n.Version)
	}
	if got := testutil.ToFloat64(h.p.met.PublishErrors); got != 0 {
		t.Fatalf("%v publish errors counted for a hung prune", got)
	}
}

// objectBytes reads the object name stored in b whole.
func objectBytes(t *testing.T, b publish.Backend, name string) []byte {
	t.Helper()
	rc, err := b.GetObject(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestPinOfAnotherIncarnationIsNotRestored: the pin key names version v
// of another incarnation (an operator pinned a former life of the
// model); a service restarted on its own snapshot.dir, which holds its
// own version v, serves its newest version, not its own version v: a pin
// names a version of one incarnation. Before, restoring the pin compared
// the version number alone and served its own version v.
func TestPinOfAnotherIncarnationIsNotRestored(t *testing.T) {
	c := testConfig(t)
	mem := publish.NewMemBackend()
	src := ingest.NewMemSource("v", 64)
	src.Produce(0, points(1280, 1, 23)...)
	h := startLoop(t, c, src, &ingest.MemDeadLetter{}, func(o *Options) { o.Publish = mem })
	h.waitConsumed(1280)
	waitUntil(t, "8 versions", func() bool { return h.p.Status().Version >= 8 })
	snap := h.stop()
	newest, own := snap.Header.Version(), snap.Header.Incarnation
	stored, err := (&snapshot.Store{Dir: c.Snapshot.Dir, Model: c.Model}).Versions()
	if err != nil || len(stored) < 2 {
		t.Fatalf("stored versions %v (%v)", stored, err)
	}
	v := stored[len(stored)-1] // the oldest this snapshot.dir holds
	pin, _ := json.Marshal(publish.Notice{Model: c.Model, Incarnation: "another-life", Version: v, Object: publish.ObjectName(c.Model, "another-life", v)})
	if err := mem.PutKey(context.Background(), publish.PinKey(c.Model), pin); err != nil {
		t.Fatal(err)
	}
	h2 := startLoop(t, c, src, &ingest.MemDeadLetter{}, func(o *Options) { o.Publish = mem })
	defer h2.stop()
	waitUntil(t, "the restarted service serving", func() bool { return testutil.ToFloat64(h2.p.met.Served) != 0 })
	if got := testutil.ToFloat64(h2.p.met.Served); got != float64(newest) {
		t.Errorf("with another incarnation's (%s ≠ %s) pin of version %d, the service serves version %v, want its newest %d", "another-life", own, v, got, newest)
	}
}
