package testkit

import (
	"context"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// ReadPartition returns every message of a topic's partition on broker,
// from offset 0 to its end as the partition's leader reports it when
// called; a broker that does not answer within 10 s fails the test.
func ReadPartition(t testing.TB, broker, topic string, partition int) []kafka.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := kafka.DialLeader(ctx, "tcp", broker, topic, partition)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	last, err := conn.ReadLastOffset()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Seek(0, kafka.SeekAbsolute); err != nil {
		t.Fatal(err)
	}
	var out []kafka.Message
	for off := int64(0); off < last; {
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		m, err := conn.ReadMessage(1 << 20)
		if err != nil {
			t.Fatal(err)
		}
		off = m.Offset + 1
		out = append(out, m)
	}
	return out
}
