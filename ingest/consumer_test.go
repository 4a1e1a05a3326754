package ingest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"

	"github.com/streamkpca/streamkpca/internal/logbuf"
)

// Defect: without brokers the consumer logged two warnings a second
// forever and never said what was unreachable. Now one line per attempt,
// naming the brokers, with the wait doubling from 1 s: at most 3 attempts
// (1 + 2 + 4 s) in a 6 s window.
func TestConsumerBacksOffWithoutBrokers(t *testing.T) {
	var buf logbuf.Buffer
	log := zerolog.New(&buf).Level(zerolog.WarnLevel)
	c, err := NewConsumer(ConsumerConfig{Brokers: []string{"127.0.0.1:1"}, Topic: "t", Logger: &log})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
	defer cancel()
	c.Run(ctx, func(string, int) (int64, bool) { return 0, false })
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) < 1 || len(lines) > 3 {
		t.Fatalf("%d warnings in 6 s, want 1 to 3:\n%s", len(lines), buf.String())
	}
	for _, l := range lines {
		if !strings.Contains(l, "127.0.0.1:1") || !strings.Contains(l, "retry_in") {
			t.Errorf("warning does not name the brokers and the wait: %s", l)
		}
	}
}

// TestRebalanceDropsRevokedLag: after a rebalance the lag covers only the
// partitions this member owns. Before, the last lag of a revoked
// partition stayed in the sum (and another member counted it too).
func TestRebalanceDropsRevokedLag(t *testing.T) {
	c := &Consumer{lag: map[int]int64{0: 5, 1: 7, 2: 9, 3: 11}, queue: newByteQueue(8, 1<<20)}
	if got := c.Lag(); got != 32 {
		t.Fatalf("lag %d before the rebalance, want 32", got)
	}
	c.keepLags([]int{0, 2})
	if got := c.Lag(); got != 14 {
		t.Errorf("lag %d after partitions 1 and 3 were revoked, want 14 (5 + 9)", got)
	}
	if got := c.PartitionLags(); len(got) != 2 || got[0] != 5 || got[2] != 9 {
		t.Errorf("partition lags %v, want map[0:5 2:9]", got)
	}
}

// TestUnreachableSince: the first failure (a join or a fetch) starts the
// clock, later ones keep it and update the reason, a success stops it.
func TestUnreachableSince(t *testing.T) {
	c := &Consumer{lag: map[int]int64{}, queue: newByteQueue(8, 1<<20)}
	if since, _ := c.Unreachable(); !since.IsZero() {
		t.Fatal("unreachable before any failure")
	}
	c.reachable(errors.New("first"))
	first, _ := c.Unreachable()
	time.Sleep(2 * time.Millisecond)
	c.reachable(errors.New("second"))
	since, err := c.Unreachable()
	if first.IsZero() || !since.Equal(first) || err == nil || err.Error() != "second" {
		t.Errorf("after two failures: since %v (first %v), %v; want the first's time and the second's reason", since, first, err)
	}
	c.reachable(nil)
	if since, err := c.Unreachable(); !since.IsZero() || err != nil {
		t.Errorf("after a success: %v, %v; want reachable", since, err)
	}
}

// TestAnsweredJoin: a join the coordinator refused (an evicted member
// after SIGSTOP/SIGCONT gets UNKNOWN_MEMBER_ID) is told apart from
// brokers that cannot be reached, which alone are logged and reported
// (readyz) as unreachable.
func TestAnsweredJoin(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{kafka.UnknownMemberId, true},
		{fmt.Errorf("join: %w", kafka.RebalanceInProgress), true},
		{&net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}, false},
		{io.EOF, false},
		{context.DeadlineExceeded, false},
	} {
		if got := answeredJoin(c.err); got != c.want {
			t.Errorf("answeredJoin(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
