package ingest

import (
	"context"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kfakeTopic returns an in-process broker whose topic has partitions and
// n one-byte messages (0, 1, …), spread round-robin.
func kfakeTopic(t *testing.T, topic string, partitions int32, n int) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	w := &kafka.Writer{Addr: kafka.TCP(c.ListenAddrs()...), Topic: topic, BatchTimeout: time.Millisecond, RequiredAcks: kafka.RequireAll, Balancer: &kafka.RoundRobin{}}
	defer w.Close()
	for i := range n {
		if err := w.WriteMessages(context.Background(), kafka.Message{Value: []byte{byte(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// Defect: the consumer's fetches carried a 250 ms wait, which kafka-go
// makes the response's read deadline while asking the broker to hold an
// idle fetch for 3/4 of it: a broker answering fetches 62 ms later than
// that (a loaded broker, a link across regions) was never read, and the
// partition stalled for good. Here every fetch is answered 400 ms late;
// all messages must still arrive.
func TestConsumerReadsFromASlowBroker(t *testing.T) {
	const n = 20
	c := kfakeTopic(t, "slow", 1, n)
	c.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		time.Sleep(400 * time.Millisecond)
		return nil, nil, false // then answered as usual
	})

	cons, err := NewConsumer(ConsumerConfig{Brokers: c.ListenAddrs(), Topic: "slow", GroupID: "g"})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		cons.Run(ctx, func(string, int) (int64, bool) { return 0, false })
	}()
	got := 0
	for got < n && ctx.Err() == nil {
		b, err := cons.Fetch(ctx, n-got)
		if err != nil {
			break
		}
		got += len(b.Messages)
	}
	cancel()
	<-done
	if got != n {
		t.Fatalf("%d of %d messages read from a broker answering fetches 400 ms late", got, n)
	}
}
