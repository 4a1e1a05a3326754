package integration

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/streamkpca/streamkpca/internal/devstack"
	"github.com/streamkpca/streamkpca/internal/synth"
	"github.com/streamkpca/streamkpca/snapshot"
)

// TestSlowDownloadsInAMemoryCgroup: issue 58's slow readers, as a
// process. `streamkpca run` in a 256 MiB memory cgroup publishes
// versions of about 6 MiB (k = 64, 12,288 features: what a 256 MiB container holds at that k, TestFitFeatures); 40 readers, with
// the token, each download one of the newest stored versions
// (GET …/versions/{v}/snapshot) through a 32 KiB receive buffer at about
// 320 KB/s, so each request is held for tens of seconds. Before the
// versions held were bounded, each request held its own copy for up to
// the 60 s write timeout: 40 × 6 MiB is nearly all the cgroup has, and
// the service was OOM-killed (40 readers of 15 MiB versions took a
// service from 351 to 971 MiB). Now: no OOM kill, every reader
// answered — the whole version, whose
// SHA-256 is the one the version list states, or 503 with Retry-After —
// and the stream learned to its end while they read.
func TestSlowDownloadsInAMemoryCgroup(t *testing.T) {
	memlimitOnly(t)
	const limit = 256 << 20
	const readers, n = 40, 36_000
	const token = "slow-readers-token"
	cg := newMemCgroup(t, limit)
	s := startStack(t, map[string]int32{"slowdl": 1})
	bin := buildBinary(t)
	dir, logf := childDir(t)
	c := newChild(t, bin, dir, func(port int) string {
		return fmt.Sprintf(`model: slowdl
kafka: {brokers: [%q], topic: slowdl}
snapshot: {dir: %q, every_batches: 2, keep: 8}
nats: {url: %q}
http: {addr: "127.0.0.1:%d", token: %q}
learner: {k: 64, max_features: 12288, budget: fixed, load_shedding: "off"}
log: {format: json}
`, s.Brokers()[0], filepath.Join(dir, "snapshots"), s.NATSURL(), port, token)
	}, logf)
	cg.enter(c)
	c.start()
	// The service's resident memory throughout, for the log: the
	// runtime's soft limit (90% of the cgroup's) lets garbage fill the
	// heap up to it, so what is asserted is that nothing is killed.
	var peakRSS float64
	sampled := make(chan struct{})
	stopSampling := make(chan struct{})
	go func() {
		defer close(sampled)
		for tick := time.NewTicker(250 * time.Millisecond); ; {
			select {
			case <-stopSampling:
				tick.Stop()
				return
			case <-tick.C:
				peakRSS = max(peakRSS, scrape(c.port, "process_resident_memory_bytes"))
			}
		}
	}()

	prodErr := make(chan error, 1)
	go func() {
		prodErr <- devstack.Produce(context.Background(), devstack.HermiteJSON(synth.Hermite16(), 3),
			devstack.ProduceOptions{Brokers: s.Brokers(), Topic: "slowdl", N: n, Rate: 300})
	}()
	base := fmt.Sprintf("http://127.0.0.1:%d/v1/models/slowdl", c.port)
	get := func(cl *http.Client, url string) (*http.Response, error) {
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		return cl.Do(req)
	}
	type info struct {
		Version uint64 `json:"version"`
		Size    int    `json:"size"`
		SHA256  string `json:"sha256"`
	}
	// Wait for five stored versions of the full budget.
	var versions []info
	for deadline := time.Now().Add(4 * time.Minute); ; time.Sleep(time.Second) {
		if time.Now().After(deadline) {
			t.Fatalf("fewer than 5 stored versions of 6 MiB after 4 minutes: %v\n%s", versions, tailFile(t, logf.Name()))
		}
		if !c.running() || c.exited() {
			t.Fatalf("the service exited before the readers (oom kills in the cgroup: %d)\n%s",
				cg.kills(t), tailFile(t, logf.Name()))
		}
		resp, err := get(http.DefaultClient, base+"/versions")
		if err != nil {
			continue
		}
		var list struct{ Versions []info }
		err = json.NewDecoder(resp.Body).Decode(&list)
		resp.Body.Close()
		versions = versions[:0]
		for _, v := range list.Versions {
			if err == nil && v.Size > 6<<20 {
				versions = append(versions, v)
			}
		}
		if len(versions) >= 5 {
			versions = versions[:5]
			break
		}
	}
	// Readers whose kernel receive buffer is small, so that the service,
	// not the socket, holds what they have not read.
	dialer := &net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 32<<10)
		})
		if err != nil {
			return err
		}
		return serr
	}}
	slow := &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext, DisableKeepAlives: true}, Timeout: 3 * time.Minute}
	var (
		mu                  sync.Mutex
		whole, refused, bad int
		problems            []string
	)
	var wg sync.WaitGroup
	for i := range readers {
		v := versions[i%len(versions)]
		wg.Go(func() {
			resp, err := get(slow, fmt.Sprintf("%s/versions/%d/snapshot", base, v.Version))
			if err != nil {
				mu.Lock()
				bad++
				problems = append(problems, fmt.Sprintf("reader %d: %v", i, err))
				mu.Unlock()
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") != "" {
				io.Copy(io.Discard, resp.Body)
				mu.Lock()
				refused++
				mu.Unlock()
				return
			}
			h := sha256.New()
			buf := make([]byte, 32<<10)
			var got int
			for {
				m, err := resp.Body.Read(buf)
				h.Write(buf[:m])
				got += m
				if err != nil {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			mu.Lock()
			defer mu.Unlock()
			if resp.StatusCode != http.StatusOK || got != v.Size || hex.EncodeToString(h.Sum(nil)) != v.SHA256 {
				bad++
				problems = append(problems, fmt.Sprintf("reader %d: status %d, %d of %d bytes, digest matches %v", i, resp.StatusCode, got, v.Size, hex.EncodeToString(h.Sum(nil)) == v.SHA256))
				return
			}
			whole++
		})
	}
	wg.Wait()
	close(stopSampling)
	<-sampled
	if err := <-prodErr; err != nil {
		t.Fatal(err)
	}
	store := &snapshot.Store{Dir: filepath.Join(dir, "snapshots"), Model: "slowdl"}
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(2 * time.Second) {
		if !c.running() || c.exited() {
			t.Fatalf("the service exited under the memory limit (oom kills in the cgroup: %d)\n%s",
				cg.kills(t), tailFile(t, logf.Name()))
		}
		if snap, _, err := store.Latest(); err == nil && snap.Header.SamplesSeen+snap.Header.Diagnostics.Shed == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no snapshot covering the %d messages 3 minutes after the readers\n%s", n, tailFile(t, logf.Name()))
		}
	}
	if err := c.stop(); err != nil {
		t.Fatalf("the service did not stop cleanly: %v\n%s", err, tailFile(t, logf.Name()))
	}
	kills := cg.kills(t)
	t.Logf("%d readers of 5 versions of %.1f MiB under a %d MiB limit: %d whole, %d refused with Retry-After, %d bad; the service's resident memory at most %.0f MiB, oom kills %d",
		readers, float64(versions[0].Size)/(1<<20), limit>>20, whole, refused, bad, peakRSS/(1<<20), kills)
	if kills != 0 {
		t.Errorf("%d OOM kills in the cgroup", kills)
	}
	if bad != 0 || whole == 0 {
		t.Errorf("%d readers got a broken answer, %d a whole version: %v", bad, whole, problems)
	}
}
