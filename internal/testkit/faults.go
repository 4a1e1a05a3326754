package testkit

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// FaultNet puts Shopify's toxiproxy (the library, in-process) between a
// client and a server: every connection through one of its proxies can
// be slowed, throttled or cut off (partitioned) while the test runs.
type FaultNet struct {
	srv *toxiproxy.ApiServer
	mu  sync.Mutex
	n   int
}

// NewFaultNet returns a FaultNet with no proxies.
func NewFaultNet() *FaultNet {
	return &FaultNet{srv: toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())}
}

// Proxy starts a proxy on a free loopback port to upstream (host:port);
// the test's cleanup stops it.
func (f *FaultNet) Proxy(t testing.TB, upstream string) *toxiproxy.Proxy {
	t.Helper()
	f.mu.Lock()
	f.n++
	name := fmt.Sprintf("p%d", f.n)
	f.mu.Unlock()
	p := toxiproxy.NewProxy(f.srv, name, "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p
}

// Toxic adds a toxic to both directions of p's connections (a name per
// direction: name-up, name-down).
func Toxic(t testing.TB, p *toxiproxy.Proxy, name, kind, attrs string) {
	t.Helper()
	for _, dir := range []string{"upstream", "downstream"} {
		js := fmt.Sprintf(`{"name":%q,"type":%q,"stream":%q,"toxicity":1,"attributes":{%s}}`, name+"-"+dir, kind, dir, attrs)
		if _, err := p.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
			t.Fatalf("toxic %s: %v", js, err)
		}
	}
}

// RemoveToxic removes what Toxic added under name.
func RemoveToxic(t testing.TB, p *toxiproxy.Proxy, name string) {
	t.Helper()
	for _, dir := range []string{"upstream", "downstream"} {
		if err := p.Toxics.RemoveToxic(t.Context(), name+"-"+dir); err != nil {
			t.Fatalf("remove toxic %s: %v", name, err)
		}
	}
}

// Partition cuts p off as a network partition does: no byte crosses in
// either direction, nothing is closed or reset, and what was sent
// meanwhile is held (the sender's writes block once the proxy's buffers
// and the socket's are full, as TCP's do) and delivered when heal ends
// it, on the same connections — on the connections open now and those
// opened meanwhile. It is a latency toxic of a day: toxiproxy's timeout
// toxic, which drops the bytes and closes every connection when it is
// removed, would end a partition with a reset that a real one does not
// have (TestFaultNetDoesWhatItSays).
func Partition(t testing.TB, p *toxiproxy.Proxy) (heal func()) {
	t.Helper()
	Toxic(t, p, "partition", "latency", `"latency":86400000`)
	return func() { RemoveToxic(t, p, "partition") }
}

// Degrade gives p's connections a WAN's latency (ms, with jitter) and
// bandwidth (KB/s) in each direction.
func Degrade(t testing.TB, p *toxiproxy.Proxy, latencyMs, jitterMs, rateKBs int) {
	t.Helper()
	Toxic(t, p, "latency", "latency", fmt.Sprintf(`"latency":%d,"jitter":%d`, latencyMs, jitterMs))
	Toxic(t, p, "bandwidth", "bandwidth", fmt.Sprintf(`"rate":%d`, rateKBs))
}
