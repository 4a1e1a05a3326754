package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/streamkpca/streamkpca/internal/devstack"
	"github.com/streamkpca/streamkpca/internal/synth"
)

// TestClusterRefusesAnOddInstance: two `streamkpca run` children learn in
// cluster mode (4 partitions, 2,000 messages); a third joins the consumer
// group with learner.k 4 instead of 3. It exits non-zero with an error
// naming learner.k and both values; the two others learn 2,000 more
// messages within 30 s of the last being produced. (Before, every member
// failed each generation on the mismatch, the odd one kept running and
// the group learned nothing more.)
func TestClusterRefusesAnOddInstance(t *testing.T) {
	longOnly(t)
	const topic, n = "codd", 2000
	s := startStack(t, map[string]int32{topic: 4})
	bin := buildBinary(t)
	dir := t.TempDir()
	outs := map[*child]*bytes.Buffer{}
	start := func(i, k int) *child {
		out := &bytes.Buffer{}
		c := startChild(t, bin, dir, func(port int) string {
			return fmt.Sprintf(`model: hermite
kafka: {brokers: [%q], topic: %s, group: codd, session_timeout: 2s, rebalance_timeout: 3s}
learner: {k: %d, bandwidth: 1, block: 128, max_features: 2048, linger: 300ms}
snapshot: {dir: %q, every_batches: 4, every: 1s}
nats: {url: %q}
http: {addr: "127.0.0.1:%d"}
log: {level: info, format: json}
cluster: {enabled: true, step_timeout: 10s}
`, s.Brokers()[0], topic, k, filepath.Join(dir, fmt.Sprint(i)), s.NATSURL(), port)
		}, out)
		outs[c] = out
		return c
	}
	produce := func(seed uint64) {
		t.Helper()
		if err := devstack.Produce(context.Background(), devstack.HermiteJSON(synth.Hermite1D(), seed),
			devstack.ProduceOptions{Brokers: s.Brokers(), Topic: topic, N: n, Rate: 2000}); err != nil {
			t.Fatal(err)
		}
	}
	good := []*child{start(0, 3), start(1, 3)}
	both := func(want int64) func() bool {
		return func() bool {
			for _, c := range good {
				if got, _ := servedSamples(c.port); got != want {
					return false
				}
			}
			return true
		}
	}
	produce(1)
	waitFor(t, 2*time.Minute, "both instances serving the first 2,000 messages", both(n))
	odd := start(2, 4)
	exited := make(chan error, 1)
	go func() { exited <- odd.wait() }()
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() == 0 {
			t.Errorf("the odd instance exited with %v, want a non-zero status", err)
		}
		if !strings.Contains(outs[odd].String(), "learner.k is 4 here, 3 in the group") {
			t.Errorf("the odd instance's output does not name learner.k and both values:\n%s", tail(outs[odd].String(), 3000))
		}
		t.Logf("the odd instance: %v; its last words: %s", err, tail(outs[odd].String(), 800))
	case <-time.After(2 * time.Minute):
		t.Fatalf("the odd instance still runs after 2 min:\n%s", tail(outs[odd].String(), 3000))
	}
	produce(2)
	produced := time.Now()
	waitFor(t, 30*time.Second, "both instances serving all 4,000 messages within 30 s of the last", both(2*n))
	t.Logf("all 4,000 messages served %.1f s after the last was produced", time.Since(produced).Seconds())
	for _, c := range good {
		if err := c.stop(); err != nil {
			t.Errorf("graceful stop of the instance on port %d: %v\n%s", c.port, err, tail(outs[c].String(), 2000))
		}
	}
}

// tail is the last n bytes of s.
func tail(s string, n int) string { return s[max(0, len(s)-n):] }
