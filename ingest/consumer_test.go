package ingest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

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
