package ingest

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/streamkpca/streamkpca/internal/logbuf"
)

// TestConsumerOnAssignAndRebalance: with OnAssign, a generation's
// partitions are read only after it returns (from the offsets the model
// gives then), every batch says which generation read it, and Rebalance
// makes the consumer a new member in a new generation.
func TestConsumerOnAssignAndRebalance(t *testing.T) {
	c := kfakeTopic(t, "t", 2, 10)
	assigned := make(chan Assignment, 4)
	release := make(chan struct{})
	next := int64(3) // set by the "model" while OnAssign runs
	cfg := ConsumerConfig{Brokers: c.ListenAddrs(), Topic: "t", GroupID: "g",
		OnAssign: func(ctx context.Context, a Assignment) error {
			assigned <- a
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}}
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	cfg.Logger = &log
	cons, err := NewConsumer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		cons.Run(ctx, func(string, int) (int64, bool) { return next, true })
	}()
	wait := func() Assignment {
		t.Helper()
		select {
		case a := <-assigned:
			return a
		case <-ctx.Done():
			t.Fatal("no generation within a minute")
			return Assignment{}
		}
	}
	a1 := wait()
	if !slices.Equal(a1.Partitions, []int{0, 1}) || a1.Member == "" {
		t.Fatalf("first assignment %+v, want both partitions and a member id", a1)
	}
	if n, err := cons.Partitions(ctx); err != nil || n != 2 {
		t.Fatalf("Partitions: %d, %v; want 2", n, err)
	}
	short, stop := context.WithTimeout(ctx, 500*time.Millisecond)
	if b, err := cons.Fetch(short, 10); err == nil {
		t.Fatalf("read %d messages before OnAssign returned", len(b.Messages))
	}
	stop()
	release <- struct{}{}
	got := 0
	for got < 4 { // offsets 3 and 4 of each partition
		b, err := cons.Fetch(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		if b.Generation != a1.Generation {
			t.Fatalf("a batch of generation %d, want %d", b.Generation, a1.Generation)
		}
		for _, m := range b.Messages {
			if m.Offset < 3 {
				t.Fatalf("partition %d read from offset %d, the model said 3", m.Partition, m.Offset)
			}
		}
		got += len(b.Messages)
	}
	if err := cons.Rebalance(); err != nil {
		t.Fatal(err)
	}
	a2 := wait()
	if a2.Generation == a1.Generation || a2.Member == a1.Member {
		t.Errorf("after Rebalance: generation %d member %q, before %d %q; want both new", a2.Generation, a2.Member, a1.Generation, a1.Member)
	}
	close(release)
	cancel()
	<-done
}

// TestWarnsOfAMissingTopic: a topic that does not exist gets a warning
// naming it (before: the group waited in silence, like an empty stream).
func TestWarnsOfAMissingTopic(t *testing.T) {
	c := kfakeTopic(t, "present", 1, 1)
	var buf logbuf.Buffer
	log := zerolog.New(&buf)
	cons, err := NewConsumer(ConsumerConfig{Brokers: c.ListenAddrs(), Topic: "absent", GroupID: "g", Logger: &log})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); cons.Run(ctx, func(string, int) (int64, bool) { return 0, false }) }()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(buf.String(), "the topic does not exist") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-done
	if l := buf.String(); !strings.Contains(l, "the topic does not exist") || !strings.Contains(l, `"topic":"absent"`) {
		t.Errorf("no warning for the missing topic:\n%s", l)
	}
}
