package integration

import (
	"fmt"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/streamkpca/streamkpca/configs"
	"github.com/streamkpca/streamkpca/internal/devstack"
	"github.com/streamkpca/streamkpca/snapshot"
)

// clusterConfig is config() for member i of a cluster-mode group.
func clusterConfig(s *devstack.Stack, topic, dir string) configs.Config {
	c := config(s, topic, dir)
	c.Cluster.Enabled = true
	c.Cluster.StepTimeout = 20 * time.Second
	c.Kafka.SessionTimeout, c.Kafka.RebalanceTimeout = 3*time.Second, 3*time.Second
	c.Learner.Block, c.Learner.MaxFeatures = 128, 2048
	c.SetDefaults()
	return c
}

// settled waits until every member serves a model of n samples (learned,
// or shed to keep up) at one step and reports a group of all of them in
// one generation, checks that the models are the same bit for bit, and
// returns member 0's.
func settled(t *testing.T, rs []*running, n uint64) *snapshot.Model {
	t.Helper()
	waitFor(t, 90*time.Second, "every member serving the model of all samples", func() bool {
		var step uint64
		for i, r := range rs {
			m, _ := r.p.Current().Get()
			if m == nil || m.Header().SamplesSeen+m.Header().Diagnostics.Shed != n { // learned or shed
				return false
			}
			if st := r.p.Status(); st.Members != len(rs) || st.Generation != rs[0].p.Status().Generation {
				return false
			}
			if i == 0 {
				step = m.Header().Step
			} else if m.Header().Step != step {
				return false
			}
		}
		return true
	})
	m0, _ := rs[0].p.Current().Get()
	for i, r := range rs[1:] {
		m, _ := r.p.Current().Get()
		sameCoefficients(t, fmt.Sprintf("member %d", i+1), m.Snapshot().Coef[0], m0.Snapshot().Coef[0])
	}
	return m0
}

// sameCoefficients fails unless got holds want's bits.
func sameCoefficients(t *testing.T, who string, got, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d coefficients, want %d", who, len(got), len(want))
	}
	for i, v := range want {
		if math.Float64bits(got[i]) != math.Float64bits(v) {
			t.Fatalf("%s: coefficient %d is %v, want %v", who, i, got[i], v)
		}
	}
}

// TestClusterModeOneModel: two `run` services in one consumer group with
// cluster.enabled on a 4-partition topic learn one model: both serve the
// same coefficients, bit for bit, whose samples seen are exactly the
// messages produced, and the model is the closed form's. Then a third
// instance joins and one leaves, mid-stream: still one model, every
// message learned once.
func TestClusterModeOneModel(t *testing.T) {
	const topic = "cluster"
	s := startStack(t, map[string]int32{topic: 4})
	dir := t.TempDir()
	a := start(t, clusterConfig(s, topic, filepath.Join(dir, "a")))
	b := start(t, clusterConfig(s, topic, filepath.Join(dir, "b")))
	produceHermite(t, s, topic, 20000, 1)
	m := settled(t, []*running{a, b}, 20000)
	if e := hermiteError(t, m); !(e < 0.05) {
		t.Errorf("subspace error %.3g against the closed form, want < 0.05", e)
	}

	c := start(t, clusterConfig(s, topic, filepath.Join(dir, "c")))
	produceHermite(t, s, topic, 10000, 2)
	a.graceful(t)
	produceHermite(t, s, topic, 10000, 3)
	m = settled(t, []*running{b, c}, 40000)
	if e := hermiteError(t, m); !(e < 0.05) {
		t.Errorf("after the changes: subspace error %.3g against the closed form, want < 0.05", e)
	}
	b.graceful(t)
	c.graceful(t)
}

// TestClusterNATSDownAndBack: the NATS server the group exchanges its
// steps through is shut down mid-stream while both members are learning,
// and started again (same port) after several step timeouts. The members
// stop stepping (no step is applied without every part), keep reading
// nothing past what the group covers, and resume when NATS is back: in
// the end both serve one model, bit for bit, of exactly the messages
// produced, within the closed form's bound.
func TestClusterNATSDownAndBack(t *testing.T) {
	longOnly(t)
	const topic = "clusternats"
	s := startStack(t, map[string]int32{topic: 4})
	dir := t.TempDir()
	cfg := func(name string) configs.Config {
		c := clusterConfig(s, topic, filepath.Join(dir, name))
		c.Cluster.StepTimeout = 3 * time.Second
		return c
	}
	a := startWithLog(t, cfg("a"))
	b := startWithLog(t, cfg("b"))
	produceHermite(t, s, topic, 20000, 1)
	waitFor(t, 90*time.Second, "both members stepping", func() bool {
		return a.p.Status().Samples >= 2048 && b.p.Status().Samples >= 2048
	})
	s.StopNATS()
	down := a.p.Status().Samples
	produceHermite(t, s, topic, 10000, 2)
	time.Sleep(4 * time.Second) // past a step timeout: the round in flight is lost
	// One step may have been completing as the server went: both members'
	// batches.
	if got := a.p.Status().Samples; got > down+uint64(2*cfg("a").Learner.Batch) {
		t.Errorf("member a learned %d samples with NATS down (from %d): a step without the other's part", got, down)
	}
	if err := s.StartNATS(); err != nil {
		t.Fatal(err)
	}
	m := settled(t, []*running{a, b}, 30000)
	if e := hermiteError(t, m); !(e < 0.05) {
		t.Errorf("subspace error %.3g against the closed form, want < 0.05", e)
	}
	a.graceful(t)
	b.graceful(t)
}

// Defect: a cluster member whose group holds an instance without
// cluster.enabled waits for that instance's announcement, past the
// roster's patience on the generation alone: a stop signal did nothing.
// Now the wait ends with the stop, and Run returns.
func TestClusterJoinWaitEndsWithTheStop(t *testing.T) {
	longOnly(t)
	const topic = "clusterstop"
	s := startStack(t, map[string]int32{topic: 2})
	dir := t.TempDir()
	a := start(t, clusterConfig(s, topic, filepath.Join(dir, "a")))
	plain := config(s, topic, filepath.Join(dir, "b"))
	plain.Kafka.SessionTimeout, plain.Kafka.RebalanceTimeout = 3*time.Second, 3*time.Second
	b := start(t, plain) // same group, never announces
	produceHermite(t, s, topic, 2000, 1)
	time.Sleep(15 * time.Second) // past the roster's patience (10 s): a waits on
	a.stop()
	select {
	case <-a.done:
	case <-time.After(40 * time.Second):
		t.Fatal("the cluster member did not stop within 40 s of the stop signal while waiting for members")
	}
	b.graceful(t)
}
