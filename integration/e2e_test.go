package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/streamkpca/streamkpca/features"
	"github.com/streamkpca/streamkpca/internal/devstack"
	"github.com/streamkpca/streamkpca/online"
	"github.com/streamkpca/streamkpca/publish"
	"github.com/streamkpca/streamkpca/serve"
	"github.com/streamkpca/streamkpca/snapshot"
)

// streamN is the stream length: 200,000 points (50,000 under -race).
const streamN = 200_000 / raceScale

// TestLearnsPublishesAndServes: 200,000 hermite points in a 4-partition
// topic are learned; a Watch subscriber sees ≥ 3 versions in increasing
// order, the last with samples_seen = 200,000 exactly and subspace error
// ≤ 1e-2 vs the closed form; NATS and HTTP queries return exactly
// Model.Project of the version they name.
func TestLearnsPublishesAndServes(t *testing.T) {
	s := startStack(t, map[string]int32{"hermite": 4})
	produceHermite(t, s, "hermite", streamN, 1)
	cfg := config(s, "hermite", t.TempDir())

	nc := connect(t, s)
	type seen struct {
		version, samples uint64
		m                *snapshot.Model
	}
	var mu sync.Mutex
	var versions []seen
	wctx, wcancel := context.WithCancel(context.Background())
	watchDone := make(chan error, 1)
	go func() {
		watchDone <- publish.Watch(wctx, nc, publish.Config{Model: "hermite"}, func(m *snapshot.Model, n publish.Notice) {
			mu.Lock()
			versions = append(versions, seen{n.Version, m.Header().SamplesSeen, m})
			mu.Unlock()
		})
	}()
	defer func() { wcancel(); <-watchDone }()

	r := start(t, cfg)
	waitFor(t, 5*time.Minute, "all samples learned", func() bool { return r.p.Status().Samples == streamN })
	waitFor(t, time.Minute, "a watched version covering all samples", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(versions) > 0 && versions[len(versions)-1].samples == streamN
	})

	// Queries, while the service runs, against the served version.
	m, _ := r.p.Current().Get()
	points := [][]float64{{0}, {0.5}, {-1.25}, {2}}
	var flat []float64
	for _, p := range points {
		flat = append(flat, p...)
	}
	want, err := m.Project(nil, flat)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(serve.ProjectRequest{Vectors: points})
	check := func(via string, raw []byte) {
		var resp serve.ProjectResponse
		if err := json.Unmarshal(raw, &resp); err != nil {
			t.Fatalf("%s: %v: %s", via, err, raw)
		}
		if resp.Version != m.Header().Version() {
			t.Errorf("%s: version %d, served %d", via, resp.Version, m.Header().Version())
		}
		var got []float64
		for _, p := range resp.Projections {
			got = append(got, p...)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: projections %v, Model.Project %v", via, got, want)
		}
	}
	msg, err := nc.Request("streamkpca.hermite.project", body, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	check("NATS", msg.Data)
	hr, err := http.Post("http://"+r.p.HTTPAddr()+"/v1/models/hermite/project", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(hr.Body)
	hr.Body.Close()
	check("HTTP", raw)
	// Malformed queries get a 4xx JSON error.
	hr, _ = http.Post("http://"+r.p.HTTPAddr()+"/v1/models/hermite/project", "application/json", strings.NewReader(`{"vectors":[[1,2]]}`))
	raw, _ = io.ReadAll(hr.Body)
	hr.Body.Close()
	if hr.StatusCode != http.StatusBadRequest || !strings.Contains(string(raw), `"error"`) {
		t.Errorf("wrong-dimension query: %d %s", hr.StatusCode, raw)
	}

	// The status page shows the live state and the eigenvalue chart.
	hr, err = http.Get("http://" + r.p.HTTPAddr() + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(hr.Body)
	hr.Body.Close()
	for _, want := range []string{"<code>hermite</code>", "samples learned", fmt.Sprintf("<td>%d</td>", streamN), "<svg", "<polyline", "http-equiv=\"refresh\""} {
		if !strings.Contains(string(page), want) {
			t.Errorf("status page lacks %q", want)
		}
	}

	r.graceful(t)
	mu.Lock()
	defer mu.Unlock()
	if len(versions) < 3 {
		t.Fatalf("watched %d versions, want ≥ 3", len(versions))
	}
	for i := 1; i < len(versions); i++ {
		if versions[i].version <= versions[i-1].version {
			t.Errorf("versions out of order: %d then %d", versions[i-1].version, versions[i].version)
		}
	}
	last := versions[len(versions)-1]
	if last.samples != streamN {
		t.Errorf("last watched version has samples_seen %d, want %d", last.samples, streamN)
	}
	e := hermiteError(t, last.m)
	t.Logf("watched %d versions; last %d: subspace error %.3g", len(versions), last.version, e)
	if e > 1e-2 {
		t.Errorf("subspace error %.3g > 1e-2", e)
	}
}

// TestCrashRestartExactlyOnce kills the service (no final snapshot) three
// times mid-stream and restarts it on the same snapshot directory and
// group: in the end samples_seen equals the produced count exactly.
func TestCrashRestartExactlyOnce(t *testing.T) {
	s := startStack(t, map[string]int32{"crash": 4})
	produceHermite(t, s, "crash", streamN, 2)
	cfg := config(s, "crash", t.TempDir())
	var lastVersion uint64
	for _, at := range []uint64{30_000 / raceScale, 80_000 / raceScale, 140_000 / raceScale} {
		r := start(t, cfg)
		waitFor(t, 5*time.Minute, fmt.Sprintf("%d samples and a new snapshot", at), func() bool {
			st := r.p.Status()
			return st.Samples >= at && st.Version > lastVersion
		})
		st := r.p.Status()
		lastVersion = st.Version
		r.kill(t)
		t.Logf("killed at %d samples (last snapshot version %d)", st.Samples, st.Version)
	}
	r := start(t, cfg)
	waitFor(t, 5*time.Minute, "all samples learned", func() bool { return r.p.Status().Samples >= streamN })
	r.graceful(t)
	st := &snapshot.Store{Dir: cfg.Snapshot.Dir, Model: cfg.Model}
	snap, _, err := st.Latest()
	if err != nil {
		t.Fatal(err)
	}
	if snap.Header.SamplesSeen != streamN {
		t.Errorf("samples_seen %d after 3 crashes, want exactly %d", snap.Header.SamplesSeen, streamN)
	}
	var covered int64
	for _, o := range snap.Header.Offsets {
		covered += o.Next
	}
	if covered != streamN {
		t.Errorf("offsets cover %d messages, want %d", covered, streamN)
	}
	m, _ := snapshot.NewModel(snap, snapshot.ModelOptions{})
	if e := hermiteError(t, m); e > 1e-2 {
		t.Errorf("subspace error %.3g > 1e-2 after restarts", e)
	}
}

// TestBadMessagesDeadLettered mixes 1% malformed messages (bad JSON, wrong
// dimension, non-finite, empty, oversized) into a single-partition stream:
// each lands on the dead-letter topic with its reason, the metric counts
// them by reason, and the model is bit for bit the one learned from the
// clean stream alone.
func TestBadMessagesDeadLettered(t *testing.T) {
	s := startStack(t, map[string]int32{"mixed": 1})
	const clean = 30_000 / raceScale
	kinds := []struct{ reason, payload string }{
		{"malformed", `[0.5,`},
		{"dimension", `[0.5, 1.5]`},
		{"non_finite", `[1e999]`},
		{"empty", ``},
		{"oversized", "[" + strings.Repeat("0.000000000001,", 200) + "0]"},
	}
	src := devstack.HermiteJSON(hermite1D(), 5)
	var cleanVals []float64
	var msgs [][]byte
	wantReason := map[int64]string{}
	for i := 0; len(cleanVals) < clean; i++ {
		if i%100 == 50 {
			k := kinds[(i/100)%len(kinds)]
			wantReason[int64(len(msgs))] = k.reason
			msgs = append(msgs, []byte(k.payload))
			continue
		}
		b := src(i)
		var v []float64
		json.Unmarshal(b, &v)
		cleanVals = append(cleanVals, v...)
		msgs = append(msgs, b)
	}
	err := devstack.Produce(context.Background(), func(i int) []byte { return msgs[i] },
		devstack.ProduceOptions{Brokers: s.Brokers(), Topic: "mixed", N: len(msgs)})
	if err != nil {
		t.Fatal(err)
	}
	cfg := config(s, "mixed", t.TempDir())
	cfg.Kafka.MaxMessageBytes = 1000
	cfg.Learner.Linger = time.Hour // only full batches, then the rest at shutdown
	cfg.Learner.Replay = -1        // the reference learns the batches once each: no revisits
	r := start(t, cfg)
	waitFor(t, 5*time.Minute, "every message consumed", func() bool { return r.p.Status().Consumed == uint64(len(msgs)) })
	r.graceful(t)

	// The model equals a learner fed the clean stream in the same batches.
	ref, err := online.New(online.Config{Model: "hermite", K: 3, Kernel: features.Kernel{Family: features.Gaussian, Bandwidth: 1}, MaxFeatures: 8192})
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	for i := 0; i < clean; i += 512 {
		n := min(512, clean-i)
		if err := ref.Update(cleanVals[i:i+n], n); err != nil {
			t.Fatal(err)
		}
	}
	snap, _, err := (&snapshot.Store{Dir: cfg.Snapshot.Dir, Model: cfg.Model}).Latest()
	if err != nil {
		t.Fatal(err)
	}
	want := ref.Snapshot()
	if !slices.Equal(snap.Coef[0], want.Coef[0]) || !slices.Equal(snap.Header.Seeds, want.Header.Seeds) {
		t.Error("model learned with bad messages mixed in differs from the clean-stream model")
	}
	if snap.Header.SamplesSeen != clean {
		t.Errorf("samples_seen %d, want %d", snap.Header.SamplesSeen, clean)
	}

	// Every bad message is on the dead-letter topic with its reason.
	headers, _ := deadLetters(t, s, "mixed.dlq", len(wantReason))
	got := map[int64]string{}
	for off, h := range headers {
		got[off] = h["reason"]
		if h["source-topic"] != "mixed" || h["source-partition"] != "0" {
			t.Errorf("dead letter headers %v", h)
		}
	}
	counts := map[string]float64{}
	for off, reason := range wantReason {
		if got[off] != reason {
			t.Errorf("offset %d: dead-lettered with reason %q, want %q", off, got[off], reason)
		}
		counts[reason]++
	}
	mf, _ := r.reg.Gather()
	for _, f := range mf {
		if f.GetName() != "streamkpca_bad_messages_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			reason := m.GetLabel()[0].GetValue()
			if m.GetCounter().GetValue() != counts[reason] {
				t.Errorf("metric bad_messages{reason=%q} = %v, want %v", reason, m.GetCounter().GetValue(), counts[reason])
			}
		}
	}
}
