package output_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/streamkpca/streamkpca/internal/testkit"
	"github.com/streamkpca/streamkpca/output"
	"github.com/streamkpca/streamkpca/output/outputtest"
)

// TestKafka runs the conformance suite against a kfake broker (the Kafka
// wire protocol) with a three-partition topic.
func TestKafka(t *testing.T) {
	outputtest.Run(t, func(t *testing.T) (output.Producer, func() []output.Message) {
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "scores"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		p, err := output.NewKafka(output.KafkaConfig{Brokers: c.ListenAddrs(), Topic: "scores"})
		if err != nil {
			t.Fatal(err)
		}
		return p, func() []output.Message { return readAll(t, c.ListenAddrs()[0], "scores", 3) }
	})
}

// readAll reads every partition of topic from its start to its end.
func readAll(t *testing.T, addr, topic string, partitions int) []output.Message {
	var out []output.Message
	for p := range partitions {
		for _, m := range testkit.ReadPartition(t, addr, topic, p) {
			h := make([]output.Header, len(m.Headers))
			for i, x := range m.Headers {
				h[i] = output.Header{Key: x.Key, Value: x.Value}
			}
			out = append(out, output.Message{Key: m.Key, Value: m.Value, Headers: h})
		}
	}
	return out
}
