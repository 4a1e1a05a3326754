package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"testing"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/streamkpca/streamkpca/internal/devstack"
	"github.com/streamkpca/streamkpca/internal/synth"
	"github.com/streamkpca/streamkpca/serve"
	"github.com/streamkpca/streamkpca/snapshot"
)

// TestKCCAStream: a kcca service learns {"x":[...],"y":[...]} pairs of the
// twoview stream from Kafka (a message without y is dead-lettered); the
// served model has both views, its held-out canonical correlations are
// high, and HTTP projections of view y equal Model.ProjectView.
func TestKCCAStream(t *testing.T) {
	s := startStack(t, map[string]int32{"pairs": 2})
	const n = 40_000 // not shortened under -race: KCCA needs the steps, and it is quick
	x, y := synth.TwoView(rand.New(rand.NewPCG(1, 1)), n)
	msgs := make([][]byte, 0, n+1)
	for i := 0; i < n; i++ {
		b, _ := json.Marshal(map[string][]float64{"x": x[i*6 : (i+1)*6], "y": y[i*6 : (i+1)*6]})
		msgs = append(msgs, b)
	}
	msgs = append(msgs, []byte(`[1,2,3,4,5,6]`)) // no y: dead-lettered
	err := devstack.Produce(context.Background(), func(i int) []byte { return msgs[i] },
		devstack.ProduceOptions{Brokers: s.Brokers(), Topic: "pairs", N: len(msgs)})
	if err != nil {
		t.Fatal(err)
	}
	cfg := config(s, "pairs", t.TempDir())
	cfg.Model = "pairs"
	cfg.Learner.Algorithm, cfg.Learner.K, cfg.Learner.Bandwidth = "kcca", 2, 0
	// The covariance solver (kcca's default; cfg holds kpca's defaults), with
	// 512 features per view: its statistics grow as m², 2,048 is slow
	// under -race.
	cfg.Learner.Solver, cfg.Learner.MaxFeatures = "covariance", 512
	r := start(t, cfg)
	waitFor(t, 5*time.Minute, "every message consumed and learned", func() bool {
		st := r.p.Status()
		return st.Consumed == uint64(len(msgs)) && st.Samples == n && st.Bad == 1
	})
	waitFor(t, time.Minute, "a served version covering every pair", func() bool {
		m, _ := r.p.Current().Get()
		return m != nil && m.Header().SamplesSeen == n
	})
	m, _ := r.p.Current().Get()
	if m.Views() != 2 || m.Header().Algorithm != "kcca" {
		t.Fatalf("served model: %d views, algorithm %s", m.Views(), m.Header().Algorithm)
	}
	// The stored snapshot carries the covariance solver's statistics (a
	// restart continues from them); what is served and published does not.
	stored, _, err := (&snapshot.Store{Dir: cfg.Snapshot.Dir, Model: "pairs"}).Latest()
	if err != nil || stored.Header.Covariance == nil || len(stored.State) == 0 {
		t.Errorf("stored snapshot: %v, covariance state %v", err, stored != nil && stored.Header.Covariance != nil)
	}
	if m.Header().Covariance != nil {
		t.Error("the served model carries the learner state")
	}
	resp0, err := http.Get("http://" + r.p.HTTPAddr() + "/v1/models/pairs/snapshot")
	if err != nil {
		t.Fatal(err)
	}
	servedRaw, _ := io.ReadAll(resp0.Body)
	resp0.Body.Close()
	if served, err := snapshot.Decode(servedRaw); err != nil || served.State != nil || served.Header.Covariance != nil {
		t.Errorf("HTTP snapshot: %v; it must leave the learner state out", err)
	}
	hx, hy := synth.TwoView(rand.New(rand.NewPCG(2, 2)), 1000)
	u, _ := m.ProjectView(0, nil, hx)
	v, _ := m.ProjectView(1, nil, hy)
	cc := synth.CanonicalCorrelations(mat.NewDense(1000, 2, u), mat.NewDense(1000, 2, v))
	t.Logf("held-out canonical correlations of the served model: %.3f", cc)
	if synth.Sum(cc) < 1.2 {
		t.Errorf("held-out S_2 = %.3f, want ≥ 1.2 (linear CCA reaches ≈ 0.74 on this stream)", synth.Sum(cc))
	}
	body, _ := json.Marshal(serve.ProjectRequest{Vectors: [][]float64{hy[:6], hy[6:12]}, View: "y"})
	resp, err := http.Post("http://"+r.p.HTTPAddr()+"/v1/models/pairs/project", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var pr serve.ProjectResponse
	json.Unmarshal(raw, &pr)
	want, _ := m.ProjectView(1, nil, hy[:12])
	if got := append(slices.Clone(pr.Projections[0]), pr.Projections[1]...); !slices.Equal(got, want) {
		t.Errorf("HTTP view y projections %v, Model.ProjectView %v (%s)", got, want, raw)
	}
	r.graceful(t)
}
