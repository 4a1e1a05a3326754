package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLossyNetwork (issue 45): a cluster-mode group of two members, the
// brokers and a reader whose every connection crosses a loopback that
// drops packets for real: integration/lossy.sh runs this test in a
// network namespace of its own whose loopback drops 1% of the packets
// (nftables) and says so in STREAMKPCA_LOSS; the members' NATS links also
// pass through proxies with 50 ± 10 ms of latency each way and 100 Mb/s.
// Two minutes of stream; the group ends with one model, bit for bit on
// both members, of exactly the messages produced, and the reader on the
// newest version. Outside lossy.sh (it needs root to make the namespace)
// the test says so and skips.
func TestLossyNetwork(t *testing.T) {
	longOnly(t)
	loss := os.Getenv("STREAMKPCA_LOSS")
	if loss == "" {
		t.Skip("needs a loopback that drops packets: run integration/lossy.sh (root: a network namespace with an nftables rule)")
	}
	t.Logf("loopback: %s of the packets dropped", loss)
	const topic = "lossy"
	s := startStack(t, map[string]int32{topic: 4})
	dir := t.TempDir()
	w := watch(t, s.NATSURL(), "hermite")
	fn := newFaultNet()
	var members []*running
	for _, name := range []string{"a", "b"} {
		px := fn.proxy(t, strings.TrimPrefix(s.NATSURL(), "nats://"))
		degrade(t, px, 50, 10, 12500)
		c := clusterConfig(s, topic, filepath.Join(dir, name))
		c.NATS.URL = "nats://" + px.Listen
		members = append(members, startWithLog(t, c))
	}
	start := time.Now()
	produced := 0
	for i := 1; time.Since(start) < 2*time.Minute; i++ {
		produceHermite(t, s, topic, 2000, uint64(i))
		produced += 2000
		time.Sleep(2 * time.Second)
	}
	m := settled(t, members, uint64(produced))
	t.Logf("2 min with %s of the packets dropped and 50 ± 10 ms to NATS: %d messages, step %d, generation %d; one model on both members %.1f s after the stream stopped",
		loss, produced, m.Header().Step, members[0].p.Status().Generation, time.Since(start).Seconds()-120)
	if e := hermiteError(t, m); !(e < 0.05) {
		t.Errorf("subspace error %.3g against the closed form, want < 0.05", e)
	}
	members[0].graceful(t)
	members[1].graceful(t)
	w.onNewest(t, members...)
}
