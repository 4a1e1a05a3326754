package output

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
)

// KafkaConfig configures the Kafka producer.
type KafkaConfig struct {
	// Brokers of the output topic's cluster. Required.
	Brokers []string
	// Topic to write. Required. Created with the broker's defaults when
	// the broker allows it (auto.create.topics.enable).
	Topic string
	// Transport carries TLS and SASL; nil: plain TCP.
	Transport *kafka.Transport
	// BatchBytes bounds one produce request. Default: 16 MiB.
	BatchBytes int64
}

// Validate checks the fields that have no default.
func (c *KafkaConfig) Validate() error {
	if len(c.Brokers) == 0 {
		return errors.New("output: no brokers (set output.brokers or kafka.brokers)")
	}
	if c.Topic == "" {
		return errors.New("output: no topic (output.topic)")
	}
	return nil
}

// Kafka writes records to a topic with kafka-go, acknowledged by every
// in-sync replica. A source partition's records go to one partition of
// the topic (the source partition modulo the topic's partitions), so they
// keep their order.
type Kafka struct {
	w  *kafka.Writer
	tr *kafka.Transport
}

// NewKafka returns a producer for cfg.
func NewKafka(cfg KafkaConfig) (*Kafka, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.BatchBytes == 0 {
		cfg.BatchBytes = 16 << 20
	}
	tr := cfg.Transport
	if tr == nil {
		tr = &kafka.Transport{DialTimeout: 10 * time.Second}
	}
	return &Kafka{tr: tr, w: &kafka.Writer{
		Addr: kafka.TCP(cfg.Brokers...), Topic: cfg.Topic, Transport: tr,
		Balancer: bySource{}, RequiredAcks: kafka.RequireAll, AllowAutoTopicCreation: true,
		BatchTimeout: 5 * time.Millisecond, BatchSize: 10_000, BatchBytes: cfg.BatchBytes,
		MaxAttempts: 3, WriteBackoffMin: 50 * time.Millisecond, WriteBackoffMax: time.Second,
	}}, nil
}

// bySource sends a record to its source partition modulo the topic's
// partitions (the partition travels in the message's WriterData).
type bySource struct{}

func (bySource) Balance(m kafka.Message, partitions ...int) int {
	p, _ := m.WriterData.(int)
	return partitions[p%len(partitions)]
}

// Write writes ms in one call.
func (k *Kafka) Write(ctx context.Context, ms []Message) error {
	if len(ms) == 0 {
		return nil
	}
	km := make([]kafka.Message, len(ms))
	for i, m := range ms {
		h := make([]kafka.Header, len(m.Headers))
		for j, x := range m.Headers {
			h[j] = kafka.Header{Key: x.Key, Value: x.Value}
		}
		km[i] = kafka.Message{Key: m.Key, Value: m.Value, Headers: h, WriterData: m.Partition}
	}
	if err := k.w.WriteMessages(ctx, km...); err != nil {
		return fmt.Errorf("output: write of %d records to %s: %w", len(ms), k.w.Topic, err)
	}
	return nil
}

// Close flushes and closes the writer and its connections.
func (k *Kafka) Close() error {
	err := k.w.Close()
	k.tr.CloseIdleConnections()
	return err
}
