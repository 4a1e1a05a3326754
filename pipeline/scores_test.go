package pipeline

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/streamkpca/streamkpca/internal/testkit"

	"github.com/streamkpca/streamkpca/configs"
	"github.com/streamkpca/streamkpca/features"
	"github.com/streamkpca/streamkpca/ingest"
	"github.com/streamkpca/streamkpca/output"
	"github.com/streamkpca/streamkpca/snapshot"
)

// outputConfig is testConfig with output.topic on, every version kept
// and versions cut by batches only (snapshot.every an hour).
func outputConfig(t *testing.T) configs.Config {
	c := testConfig(t)
	c.Output.Topic, c.Output.NoveltyWindow, c.Output.NoveltyQuantile = "scores", 64, 0.9
	c.Snapshot.Keep, c.Snapshot.Every = 10000, time.Hour
	return c
}

// fixedBudget makes c's model its full size after two steps: residuals
// then stay comparable from version to version (a model whose blocks
// still join leaves each new block's share of a point unexplained at
// first, so its residuals rise with its age).
func fixedBudget(c configs.Config) configs.Config {
	c.Learner.MaxFeatures, c.Learner.Budget = 128, "fixed"
	return c
}

// outRecord is a record's value decoded.
type outRecord struct {
	Source struct {
		Topic     string
		Partition int
		Offset    int64
	}
	Model *struct {
		Incarnation string
		Version     uint64
	}
	Projection []float64
	Residual   *float64
	Novelty    *float64
	Novel      bool
}

func decodeRecords(t *testing.T, ms []output.Message) []outRecord {
	t.Helper()
	out := make([]outRecord, len(ms))
	for i, m := range ms {
		if err := json.Unmarshal(m.Value, &out[i]); err != nil {
			t.Fatalf("record %d: %v: %s", i, err, m.Value)
		}
	}
	return out
}

// versionModel is the served model of the stored version, loaded once
// into models.
func versionModel(t *testing.T, st snapshot.Store, models map[uint64]*snapshot.Model, version uint64) *snapshot.Model {
	t.Helper()
	if m := models[version]; m != nil {
		return m
	}
	s, _, err := snapshot.Load(st.Path(version))
	if err != nil {
		t.Fatalf("a record names version %d: %v", version, err)
	}
	m, err := snapshot.NewModel(s.Served(), snapshot.ModelOptions{})
	if err != nil {
		t.Fatal(err)
	}
	models[version] = m
	return m
}

// csvValues parses a points() message.
func csvValues(t *testing.T, b []byte) []float64 {
	var x []float64
	for _, f := range strings.Split(string(b), ",") {
		v, err := strconv.ParseFloat(f, 64)
		if err != nil {
			t.Fatal(err)
		}
		x = append(x, v)
	}
	return x
}

// TestOutputScoresEveryGoodMessage: one record per good message of two
// partitions, none for the bad ones, in offset order per partition; each
// record's projection, residual and novelty are what the version it names
// gives for the message (snapshot.Model.Score and Novelty, from the file
// the store kept); only the messages before the first version have no
// model; the held-out residuals became the versions' references.
func TestOutputScoresEveryGoodMessage(t *testing.T) {
	c := fixedBudget(outputConfig(t))
	// k = 2 columns only: with the default oversample (2 more) d = 3
	// inputs are fewer than the columns, and the learner keeps no batch
	// features for the records' fast path (online's keepBytes), which
	// this test counts.
	c.Learner.Oversample = -1
	src := ingest.NewMemSource("v", 64)
	msgs := [2][][]byte{points(1700, 3, 1), points(1500, 3, 2)}
	msgs[0][10] = []byte("1,2") // bad: wrong dimension
	msgs[1][300] = []byte("1,x,3")
	src.Produce(0, msgs[0]...)
	src.Produce(1, msgs[1]...)
	prod := &output.Memory{}
	h := startLoop(t, c, src, &ingest.MemDeadLetter{}, func(o *Options) { o.Output = prod })
	h.waitConsumed(3200)
	testkit.WaitFor(t, "every record stored", func() bool { return len(prod.Messages()) == 3198 })
	// The status page says what was written and plots the novelty rate.
	w := httptest.NewRecorder()
	h.p.statusPage(time.Now())(w, httptest.NewRequest("GET", "/", nil))
	page := w.Body.String()
	if !strings.Contains(page, "<code>scores</code>: 3198 records written") || !strings.Contains(page, `aria-label="share of records novel per version`) {
		t.Errorf("the status page does not show the output topic and its novelty rate:\n%s", page)
	}
	h.stop()
	// Most records came from the steps' own features (the rest: the first
	// batch's, before a version, and any queued while no step ran); each
	// is checked against the version's file below, from scratch.
	if n := h.p.out.fromStep; n < 2500 {
		t.Errorf("%d records scored from the steps' features", n)
	}
	recs := decodeRecords(t, prod.Messages())
	if len(recs) != 3198 {
		t.Fatalf("%d records, want 3198 (3,200 messages, 2 bad)", len(recs))
	}
	st := snapshot.Store{Dir: c.Snapshot.Dir, Model: c.Model}
	models := map[uint64]*snapshot.Model{}
	next := map[int]int64{}
	noModel, withRef, novel, fullRanked, fullNovel := 0, 0, 0, 0, 0
	for i, r := range recs {
		p, o := r.Source.Partition, r.Source.Offset
		if o < next[p] {
			t.Fatalf("record %d: partition %d offset %d after %d", i, p, o, next[p])
		}
		if (p == 0 && o == 10) || (p == 1 && o == 300) {
			t.Fatalf("a record for the bad message %d/%d", p, o)
		}
		next[p] = o + 1
		if r.Model == nil {
			noModel++
			if r.Projection != nil || r.Residual != nil {
				t.Fatalf("record %d without a model has numbers", i)
			}
			continue
		}
		m := versionModel(t, st, models, r.Model.Version)
		x := csvValues(t, msgs[p][o])
		proj, res, err := m.Score(nil, nil, x)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(proj) != fmt.Sprint(r.Projection) || r.Residual == nil || *r.Residual != res[0] {
			t.Fatalf("record %d (%d/%d, version %d): projection %v residual %v; the version gives %v %v", i, p, o, r.Model.Version, r.Projection, r.Residual, proj, res[0])
		}
		q, ok := m.Novelty(res[0])
		switch {
		case ok && (r.Novelty == nil || *r.Novelty != q || r.Novel != (q >= 0.9)):
			t.Fatalf("record %d: novelty %v novel %v; the version gives %v", i, r.Novelty, r.Novel, q)
		case !ok && r.Novelty != nil:
			t.Fatalf("record %d: novelty %v from a version without a reference", i, *r.Novelty)
		case ok:
			withRef++
		}
		if r.Novel {
			novel++
		}
		if ok && len(m.Header().Novelty.Residuals) == c.Output.NoveltyWindow {
			fullRanked++
			if r.Novel {
				fullNovel++
			}
		}
	}
	if noModel == 0 || noModel > c.Learner.Batch {
		t.Errorf("%d records without a model: want the first batch's at most (%d)", noModel, c.Learner.Batch)
	}
	if withRef < 600 {
		t.Errorf("%d records ranked against a reference: the held-out residuals did not reach the versions", withRef)
	}
	// An unchanging stream and a model of fixed size: once a version's
	// reference is full (64 residuals of held-out rows the model had
	// not learned), at most 1 − q = 0.1 of its records are novel, up to
	// the noise of a 64-row reference (a flag rate per version is about
	// Beta(6.5, 58.5): sd 0.036; over five or more versions about 0.016).
	if fullRanked < 500 {
		t.Fatalf("%d records ranked against a full reference", fullRanked)
	}
	if share := float64(fullNovel) / float64(fullRanked); share > 0.1+3*0.016 {
		t.Errorf("%.3f of the records novel at q = 0.9 on an unchanging stream (bound 0.1)", share)
	}
	t.Logf("%d records, %d without a model, %d ranked (%.3f novel), %d against a full reference (%.3f novel), %d versions",
		len(recs), noModel, withRef, float64(novel)/float64(withRef), fullRanked, float64(fullNovel)/float64(max(fullRanked, 1)), len(models))
}

// TestOutputAfterACrashRepeatsRecordsByteForByte: a service killed
// mid-stream (no final snapshot) and started again writes a record for
// every message, and every message with records from both lives has the
// same bytes in both.
func TestOutputAfterACrashRepeatsRecordsByteForByte(t *testing.T) {
	c := outputConfig(t)
	src := ingest.NewMemSource("v", 64)
	msgs := points(1600, 3, 9)
	src.Produce(0, msgs[:900]...)
	first := &output.Memory{}
	h := startLoop(t, c, src, &ingest.MemDeadLetter{}, func(o *Options) { o.Output = first })
	h.waitConsumed(900)
	deadline := time.Now().Add(30 * time.Second)
	for h.p.Status().Version < 3 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	h.p.Kill()
	<-h.done
	src.Produce(0, msgs[900:]...)
	second := &output.Memory{}
	h2 := startLoop(t, c, src, &ingest.MemDeadLetter{}, func(o *Options) { o.Output = second })
	h2.waitConsumed(1600 - uint64(nextOffset(latest(t, c), 0)))
	h2.stop()
	got := map[int64][]byte{}
	for _, m := range first.Messages() {
		got[offsetOf(t, m)] = m.Value
	}
	repeated := 0
	for _, m := range second.Messages() {
		o := offsetOf(t, m)
		if b, ok := got[o]; ok {
			repeated++
			if string(b) != string(m.Value) {
				t.Fatalf("offset %d written twice with different bytes:\n %s\n %s", o, b, m.Value)
			}
		}
		got[o] = m.Value
	}
	for o := int64(0); o < 1600; o++ {
		if _, ok := got[o]; !ok {
			t.Fatalf("no record for offset %d", o)
		}
	}
	if len(got) != 1600 {
		t.Fatalf("%d offsets with records, want 1600", len(got))
	}
	t.Logf("%d records written by both lives, identical", repeated)
}

func offsetOf(t *testing.T, m output.Message) int64 {
	for _, h := range m.Headers {
		if h.Key == "source-offset" {
			o, err := strconv.ParseInt(string(h.Value), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return o
		}
	}
	t.Fatal("a record without source-offset")
	return -1
}

// TestOutputOutageLosesNothing: while the output topic refuses records
// learning waits (no snapshot covers them), /readyz would say so, and
// once it takes them again every message has its record.
func TestOutputOutageLosesNothing(t *testing.T) {
	c := outputConfig(t)
	src := ingest.NewMemSource("v", 64)
	msgs := points(1000, 3, 4)
	src.Produce(0, msgs[:400]...)
	prod := &output.Memory{}
	h := startLoop(t, c, src, &ingest.MemDeadLetter{}, func(o *Options) { o.Output = prod })
	h.waitConsumed(400)
	prod.SetFail(fmt.Errorf("the topic refuses"))
	src.Produce(0, msgs[400:]...)
	deadline := time.Now().Add(30 * time.Second)
	for since, _ := h.p.outputDown(); since.IsZero(); since, _ = h.p.outputDown() {
		if time.Now().After(deadline) {
			t.Fatal("a refusing output topic was never noticed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	learned := h.p.Status().Samples
	stored := len(prod.Messages())
	for testutil.ToFloat64(h.p.met.OutErrors) < 3 { // the loop retries meanwhile
		if time.Now().After(deadline) {
			t.Fatal("the refused records were not written again")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if s := h.p.Status().Samples; s > learned+uint64(c.Learner.Batch) {
		t.Fatalf("learned %d samples while the output topic refused records (was %d)", s, learned)
	}
	if snap := latestOrNil(c); snap != nil && nextOffset(snap, 0) > int64(stored) {
		t.Fatalf("a snapshot covers offset %d; only %d records are stored", nextOffset(snap, 0), stored)
	}
	prod.SetFail(nil)
	h.waitConsumed(1000)
	h.stop()
	seen := map[int64]bool{}
	for _, m := range prod.Messages() {
		seen[offsetOf(t, m)] = true
	}
	for o := int64(0); o < 1000; o++ {
		if !seen[o] {
			t.Fatalf("no record for offset %d", o)
		}
	}
	if v := testutil.ToFloat64(h.p.met.OutRecords); v < 1000 {
		t.Errorf("records counted %v, want ≥ 1000", v)
	}
}

// TestOutputStepFeaturesAreScoresBits: with structured orthogonal
// frequencies (d = 40) and with float32 precision, the records scored from
// the steps' features are the bits the version's file gives from scratch
// (snapshot.Model.Score): the fast path changes no number.
func TestOutputStepFeaturesAreScoresBits(t *testing.T) {
	for _, prec := range []string{"float64", "float32"} {
		t.Run(prec, func(t *testing.T) {
			c := fixedBudget(outputConfig(t))
			c.Learner.Precision = prec
			src := ingest.NewMemSource("v", 64)
			msgs := points(900, 40, 3)
			src.Produce(0, msgs...)
			prod := &output.Memory{}
			h := startLoop(t, c, src, &ingest.MemDeadLetter{}, func(o *Options) { o.Output = prod })
			h.waitConsumed(900)
			testkit.WaitFor(t, "every record stored", func() bool { return len(prod.Messages()) == 900 })
			h.stop()
			if n := h.p.out.fromStep; n < 700 {
				t.Fatalf("%d records scored from the steps' features", n)
			}
			st := snapshot.Store{Dir: c.Snapshot.Dir, Model: c.Model}
			models := map[uint64]*snapshot.Model{}
			checked := 0
			for _, r := range decodeRecords(t, prod.Messages()) {
				if r.Model == nil {
					continue
				}
				m := models[r.Model.Version]
				if m == nil {
					s, _, err := snapshot.Load(st.Path(r.Model.Version))
					if err != nil {
						t.Fatal(err)
					}
					if structured := s.Header.Generator == features.StructuredGeneratorID; structured != (prec == "float64") {
						t.Fatalf("%s: generator %s", prec, s.Header.Generator)
					}
					if m, err = snapshot.NewModel(s.Served(), snapshot.ModelOptions{}); err != nil {
						t.Fatal(err)
					}
					models[r.Model.Version] = m
				}
				proj, res, err := m.Score(nil, nil, csvValues(t, msgs[r.Source.Offset]))
				if err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(proj) != fmt.Sprint(r.Projection) || *r.Residual != res[0] {
					t.Fatalf("offset %d: record %v %v, version %d gives %v %v", r.Source.Offset, r.Projection, *r.Residual, r.Model.Version, proj, res[0])
				}
				checked++
			}
			t.Logf("%s: %d records checked, %d from the steps' features", prec, checked, h.p.out.fromStep)
			// Messages scored from scratch (shed) are spread over workers in
			// runs of rows: each row's numbers are still its own.
			var m *snapshot.Model
			for _, mm := range models {
				m = mm
				break
			}
			var all []float64
			for _, msg := range msgs[:301] {
				all = append(all, csvValues(t, msg)...)
			}
			proj, res, err := (&scores{}).scoreRows(m, all, 3)
			if err != nil {
				t.Fatal(err)
			}
			k := m.K()
			for i := range 301 {
				p1, r1, err := m.Score(nil, nil, all[i*40:(i+1)*40])
				if err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(p1) != fmt.Sprint(proj[i*k:(i+1)*k]) || r1[0] != res[i] {
					t.Fatalf("row %d scored among 301 on 3 workers: %v %v, alone %v %v", i, proj[i*k:(i+1)*k], res[i], p1, r1[0])
				}
			}
		})
	}
}

// TestOutputDownAtTheStop: the output topic refuses every record, then
// the service is stopped: the stop ends (within shutdown_timeout), no
// snapshot covers a message whose record was not stored, and a restart
// with the topic back writes a record for every message.
func TestOutputDownAtTheStop(t *testing.T) {
	c := outputConfig(t)
	c.ShutdownTimeout = 2 * time.Second
	src := ingest.NewMemSource("v", 64)
	msgs := points(1200, 3, 6)
	src.Produce(0, msgs[:600]...)
	prod := &output.Memory{}
	h := startLoop(t, c, src, &ingest.MemDeadLetter{}, func(o *Options) { o.Output = prod })
	h.waitConsumed(600)
	testkit.WaitFor(t, "the first records", func() bool { return len(prod.Messages()) == 600 })
	prod.SetFail(fmt.Errorf("the topic refuses"))
	src.Produce(0, msgs[600:]...)
	testkit.WaitFor(t, "a refused write", func() bool { return testutil.ToFloat64(h.p.met.OutErrors) >= 2 })
	h.stop() // fails the test if the stop does not end
	stored := len(prod.Messages())
	if snap := latestOrNil(c); snap != nil && nextOffset(snap, 0) > int64(stored) {
		t.Fatalf("a snapshot covers offset %d; only %d records are stored", nextOffset(snap, 0), stored)
	}
	// The restart reads the topic afresh (a new consumer session on the
	// same log).
	src2 := ingest.NewMemSource("v", 64)
	src2.Produce(0, msgs...)
	again := &output.Memory{}
	h2 := startLoop(t, c, src2, &ingest.MemDeadLetter{}, func(o *Options) { o.Output = again })
	from := int64(0)
	if snap := latestOrNil(c); snap != nil {
		from = nextOffset(snap, 0)
	}
	h2.waitConsumed(uint64(1200 - from))
	testkit.WaitFor(t, "the rest of the records", func() bool { return int64(len(again.Messages())) == 1200-from })
	h2.stop()
	seen := map[int64]bool{}
	for _, m := range append(prod.Messages(), again.Messages()...) {
		seen[offsetOf(t, m)] = true
	}
	for o := int64(0); o < 1200; o++ {
		if !seen[o] {
			t.Fatalf("no record for offset %d", o)
		}
	}
}

// TestOutputProjectsTheYView: a two-view model's records carry the y
// view's projection of the message's y beside the x view's, what the
// version they name gives for each (snapshot.Model.ProjectView, as a
// project request with "view": "y" answers); residual and novelty are
// null (the model is centred).
func TestOutputProjectsTheYView(t *testing.T) {
	c := fixedBudget(outputConfig(t))
	c.Kafka.Format, c.Learner.Algorithm, c.Learner.Solver = "json", "kcca", "covariance"
	c.Learner.K = 1
	src := ingest.NewMemSource("v", 64)
	xs, ys := make([][]float64, 600), make([][]float64, 600)
	msgs := make([][]byte, 600)
	rows := gaussRows(600, 3, 11)
	for i := range msgs {
		x := rows[3*i : 3*i+3]
		xs[i], ys[i] = x[:2], []float64{x[0] + 0.3*x[2], x[1]}
		msgs[i] = testkit.JSONRow(xs[i], ys[i])
	}
	src.Produce(0, msgs...)
	prod := &output.Memory{}
	h := startLoop(t, c, src, &ingest.MemDeadLetter{}, func(o *Options) { o.Output = prod })
	h.waitConsumed(600)
	testkit.WaitFor(t, "every record stored", func() bool { return len(prod.Messages()) == 600 })
	h.stop()
	type rec struct {
		outRecord
		ProjectionY []float64 `json:"projection_y"`
	}
	st := snapshot.Store{Dir: c.Snapshot.Dir, Model: c.Model}
	checked := 0
	models := map[uint64]*snapshot.Model{}
	for i, m := range prod.Messages() {
		var r rec
		if err := json.Unmarshal(m.Value, &r); err != nil {
			t.Fatal(err)
		}
		if r.Model == nil {
			if r.ProjectionY != nil {
				t.Fatalf("record %d without a model has a y projection", i)
			}
			continue
		}
		v := versionModel(t, st, models, r.Model.Version)
		o := r.Source.Offset
		px, err := v.ProjectView(0, nil, xs[o])
		if err != nil {
			t.Fatal(err)
		}
		py, err := v.ProjectView(1, nil, ys[o])
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(px) != fmt.Sprint(r.Projection) || fmt.Sprint(py) != fmt.Sprint(r.ProjectionY) || r.Residual != nil {
			t.Fatalf("record %d (offset %d, version %d): projection %v, y %v, residual %v; the version gives %v and %v", i, o, r.Model.Version, r.Projection, r.ProjectionY, r.Residual, px, py)
		}
		checked++
	}
	if checked < 500 || len(models) < 2 {
		t.Fatalf("%d records with a model, of %d versions", checked, len(models))
	}
}
