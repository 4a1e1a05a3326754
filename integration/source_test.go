package integration

import (
	"context"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/streamkpca/streamkpca/ingest"
	"github.com/streamkpca/streamkpca/ingest/sourcetest"
)

// The Kafka consumer group passes the same conformance suite as the
// in-memory source the run loop's unit tests use.
func TestConsumerConformance(t *testing.T) {
	s := startStack(t, map[string]int32{"order": 2, "offsets": 2, "lag": 2, "batches": 2, "empty": 1})
	sourcetest.Run(t, func(t *testing.T, topic string) (ingest.Source, func(int, ...[]byte)) {
		c, err := ingest.NewConsumer(ingest.ConsumerConfig{Brokers: s.Brokers(), Topic: topic, GroupID: "conf-" + topic,
			QueueSize: 8, SessionTimeout: time.Second, RebalanceTimeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		produce := func(p int, values ...[]byte) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			conn, err := kafka.DialLeader(ctx, "tcp", s.Brokers()[0], topic, p)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			ms := make([]kafka.Message, len(values))
			for i, v := range values {
				ms[i] = kafka.Message{Value: v}
			}
			if _, err := conn.WriteMessages(ms...); err != nil {
				t.Fatal(err)
			}
		}
		return c, produce
	})
}
