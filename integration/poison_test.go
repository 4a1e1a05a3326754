package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/streamkpca/streamkpca/internal/devstack"
	"github.com/streamkpca/streamkpca/snapshot"
)

// TestPoisonFirstMessage: with kafka.dim unset, a first message that the
// learner refuses (a negative value for a semigroup kernel, three values
// long) is dead-lettered without fixing the dimension, so every valid 1-D
// message after it is learned: samples_seen counts them all.
func TestPoisonFirstMessage(t *testing.T) {
	s := startStack(t, map[string]int32{"poison": 1})
	const good = 3000
	msgs := [][]byte{[]byte(`[-1, 2, 3]`)}
	for i := 0; i < good; i++ {
		msgs = append(msgs, []byte(fmt.Sprintf("[%g]", 0.1+float64(i%97)/50)))
	}
	err := devstack.Produce(context.Background(), func(i int) []byte { return msgs[i] },
		devstack.ProduceOptions{Brokers: s.Brokers(), Topic: "poison", N: len(msgs)})
	if err != nil {
		t.Fatal(err)
	}
	cfg := config(s, "poison", t.TempDir())
	cfg.Learner.Kernel, cfg.Learner.Beta, cfg.Learner.Bandwidth = "expsemigroup", 1, 0
	cfg.NATS.Disabled = true
	r := start(t, cfg)
	waitFor(t, 2*time.Minute, "every message consumed", func() bool { return r.p.Status().Consumed == uint64(len(msgs)) })
	r.graceful(t)
	snap, _, err := (&snapshot.Store{Dir: cfg.Snapshot.Dir, Model: cfg.Model}).Latest()
	if err != nil {
		t.Fatal(err)
	}
	if snap.Header.SamplesSeen != good || snap.Header.Views[0].Dim != 1 {
		t.Errorf("samples_seen %d with dimension %d, want %d 1-D samples", snap.Header.SamplesSeen, snap.Header.Views[0].Dim, good)
	}
	if bad := r.p.Status().Bad; bad != 1 {
		t.Errorf("%d bad messages, want 1 (the poison one)", bad)
	}
}
