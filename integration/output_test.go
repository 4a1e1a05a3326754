package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/streamkpca/streamkpca/internal/testkit"
)

// outputRecords reads every record of topic's partition 0 and returns
// them by source offset: each offset's values in the order stored.
func outputRecords(t *testing.T, broker, topic string) map[int64][]string {
	t.Helper()
	out := map[int64][]string{}
	for _, m := range testkit.ReadPartition(t, broker, topic, 0) {
		var src int64 = -1
		for _, h := range m.Headers {
			if h.Key == "source-offset" {
				src, _ = strconv.ParseInt(string(h.Value), 10, 64)
			}
		}
		if src < 0 {
			t.Fatalf("record at %d without source-offset", m.Offset)
		}
		out[src] = append(out[src], string(m.Value))
	}
	return out
}

// TestOutputTopicProcess (issue 60): a real `streamkpca run` with
// output.topic, killed with SIGKILL mid-stream and started again: every
// source offset has a record on the output topic, and every record
// written by both lives has the same bytes in both.
func TestOutputTopicProcess(t *testing.T) {
	longOnly(t)
	s := startStack(t, map[string]int32{"scored": 1, "scored.out": 1})
	writeSine(t, s.Brokers(), "scored", 6000, 0)
	dir := t.TempDir()
	logf, err := os.Create(filepath.Join(dir, "child.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	c := newChild(t, buildBinary(t), dir, func(port int) string {
		return fmt.Sprintf(`model: scored
kafka: {brokers: [%[1]q], topic: scored, group: scored, session_timeout: 1s, rebalance_timeout: 2s}
learner: {k: 3, bandwidth: 1, max_features: 1024, budget: fixed, linger: 300ms, batch: 256}
snapshot: {dir: %[2]q, every_batches: 4, every: 1h}
output: {topic: scored.out, novelty_window: 1000}
nats: {url: %[3]q}
http: {addr: "127.0.0.1:%[4]d"}
log: {level: info, format: json}
`, s.Brokers()[0], filepath.Join(dir, "snapshots"), s.NATSURL(), port)
	}, logf)
	c.start()
	waitFor(t, 2*time.Minute, "the first life writing records", func() bool {
		return scrape(c.port, "streamkpca_output_records_total") >= 2500
	})
	c.kill()
	first := outputRecords(t, s.Brokers()[0], "scored.out")
	writeSine(t, s.Brokers(), "scored", 2000, 6000)
	c.start()
	waitFor(t, 2*time.Minute, "the second life writing every record", func() bool {
		return scrape(c.port, "streamkpca_samples_learned_total") > 0 && len(outputRecords(t, s.Brokers()[0], "scored.out")) == 8000
	})
	if err := c.stop(); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
	all := outputRecords(t, s.Brokers()[0], "scored.out")
	again := 0
	for o := int64(0); o < 8000; o++ {
		vs := all[o]
		if len(vs) == 0 {
			t.Fatalf("no record for offset %d", o)
		}
		for _, v := range vs[1:] {
			if v != vs[0] {
				t.Fatalf("offset %d written twice with different bytes:\n %s\n %s", o, vs[0], v)
			}
		}
		if len(vs) > 1 {
			again++
		}
	}
	if len(first) == 0 || again == 0 {
		t.Logf("no record written twice (the kill fell on a snapshot): %d in the first life", len(first))
	}
	t.Logf("%d offsets written by the first life, %d written again by the second, byte for byte", len(first), again)
}
