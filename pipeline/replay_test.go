package pipeline

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/streamkpca/streamkpca/ingest"
)

// TestReplayLearnsWhileTheStreamIsIdle: a stream that arrives and stops
// leaves the loop idle; it revisits learner.replay rows per learned row
// from its window, no more, and the counts say so: the samples learned
// (status, /metrics, the snapshot) are the stream's, the steps are the
// stream's batches and the revisits', the revisited rows are in their own
// metric. With learner.replay -1 nothing is revisited.
func TestReplayLearnsWhileTheStreamIsIdle(t *testing.T) {
	const n, b = 1280, 64
	for _, replay := range []float64{2, -1} {
		c := testConfig(t)
		c.Kafka.Dim = 4
		c.Learner.Batch, c.Learner.Bandwidth, c.Learner.Replay = b, 2, replay
		src := ingest.NewMemSource("v", 64)
		h := startLoop(t, c, src, &ingest.MemDeadLetter{})
		src.Produce(0, points(n, 4, 3)...)
		h.waitConsumed(n)
		want := uint64(0)
		if replay > 0 {
			want = uint64(replay * n)
		}
		waitUntil(t, "the revisits", func() bool { return h.p.Status().Revisited >= want && h.p.Status().Samples == n })
		time.Sleep(100 * time.Millisecond) // room for a revisit past the bound, if the loop took one
		st := h.p.Status()
		if st.Revisited != want || st.Samples != n {
			t.Errorf("replay %v: revisited %d, samples %d; want %d and %d", replay, st.Revisited, st.Samples, want, n)
		}
		if got := testutil.ToFloat64(h.p.met.Revisited); got != float64(want) {
			t.Errorf("replay %v: streamkpca_replayed_rows_total %v, want %d", replay, got, want)
		}
		if got := testutil.ToFloat64(h.p.met.Samples); got != n {
			t.Errorf("replay %v: streamkpca_samples_learned_total %v, want %d", replay, got, n)
		}
		if replay > 0 {
			rec := httptest.NewRecorder()
			h.p.statusPage(time.Now()).ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
			if page := rec.Body.String(); !strings.Contains(page, fmt.Sprintf("%d rows learned again", want)) {
				t.Errorf("the status page does not say how many rows were revisited")
			}
		}
		snap := h.stop()
		if snap.Header.SamplesSeen != n || snap.Header.Step != (n+want)/b {
			t.Errorf("replay %v: the final snapshot has %d samples and %d steps, want %d and %d", replay, snap.Header.SamplesSeen, snap.Header.Step, n, (n+want)/b)
		}
	}
}

// TestReplayWaitsForTheBacklog: a backlog (a restart after an outage) is
// learned before any revisit: while more than a batch of messages waits
// in the source, the loop revisits nothing, even when parsing leaves it
// idle for a moment; once the backlog is learned it revisits as before.
func TestReplayWaitsForTheBacklog(t *testing.T) {
	const b, n = 64, 64 * 200
	c := testConfig(t)
	c.Kafka.Dim = 4
	c.Learner.Batch, c.Learner.Bandwidth, c.Learner.Replay = b, 2, 3
	src := ingest.NewMemSource("v", b)
	src.Produce(0, points(n, 4, 5)...)
	h := startLoop(t, c, src, &ingest.MemDeadLetter{})
	var early, seen uint64 // revisits while more than two batches waited; status reads then
	for st := h.p.Status(); st.Samples < n-2*b; st = h.p.Status() {
		if st.Revisited > early {
			early = st.Revisited
		}
		seen++
		time.Sleep(200 * time.Microsecond)
	}
	if early != 0 {
		t.Errorf("%d rows revisited while the backlog drained (%d status reads)", early, seen)
	}
	waitUntil(t, "revisits once the backlog is learned", func() bool { return h.p.Status().Revisited > 0 })
}
