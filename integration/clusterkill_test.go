package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/streamkpca/streamkpca/internal/devstack"
	"github.com/streamkpca/streamkpca/internal/synth"
	"github.com/streamkpca/streamkpca/snapshot"
)

// servedSamples is what the model a child serves over HTTP has
// considered: its samples seen plus the messages its group shed to keep
// up (load shedding), every message its offsets cover; −1 if it serves
// none (or is down).
func servedSamples(port int) (considered, step int64) {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/v1/models/hermite", port))
	if err != nil {
		return -1, -1
	}
	defer resp.Body.Close()
	var info struct {
		Header struct {
			SamplesSeen int64 `json:"samples_seen"`
			Step        int64 `json:"step"`
			Diagnostics struct {
				Shed int64 `json:"shed"`
			} `json:"diagnostics"`
		} `json:"header"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&info) != nil {
		return -1, -1
	}
	return info.Header.SamplesSeen + info.Header.Diagnostics.Shed, info.Header.Step
}

// TestClusterSIGKILL runs three `streamkpca run` children with
// cluster.enabled in one consumer group on a 4-partition stream produced
// while they learn, and kills one of them with SIGKILL three times at
// random moments (restarting it each time: it rejoins as a new member).
// The survivors' step fails when the killed member's session ends, the
// group rebalances and goes on from its state. At the end every member
// serves and stores the same model, bit for bit, whose samples seen are
// exactly the messages produced, and which is the closed form's. A member
// may shed load (a busy machine, a rebalance's backlog): then samples
// seen plus the group's shed count are the messages produced.
func TestClusterSIGKILL(t *testing.T) {
	longOnly(t)
	const topic, n = "ckill", 40_000
	s := startStack(t, map[string]int32{topic: 4})
	bin := buildBinary(t)
	dir := t.TempDir()
	logf, err := os.Create(filepath.Join(dir, "children.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	children := make([]*child, 3)
	snaps := make([]string, 3)
	for i := range children {
		snaps[i] = filepath.Join(dir, fmt.Sprint(i), "snapshots")
		children[i] = startChild(t, bin, dir, func(port int) string {
			return fmt.Sprintf(`model: hermite
kafka: {brokers: [%q], topic: %s, group: ckill, session_timeout: 2s, rebalance_timeout: 3s}
learner: {k: 3, bandwidth: 1, block: 128, max_features: 2048, linger: 300ms}
snapshot: {dir: %q, every_batches: 4, every: 1s}
nats: {url: %q}
http: {addr: "127.0.0.1:%d"}
log: {level: info, format: json}
cluster: {enabled: true, step_timeout: 10s}
`, s.Brokers()[0], topic, snaps[i], s.NATSURL(), port)
		}, logf)
	}
	produced := make(chan error, 1)
	go func() {
		produced <- devstack.Produce(context.Background(), devstack.HermiteJSON(synth.Hermite1D(), 1),
			devstack.ProduceOptions{Brokers: s.Brokers(), Topic: topic, N: n, Rate: 2000})
	}()
	rng := rand.New(rand.NewPCG(1, 1))
	for k := range 3 {
		time.Sleep(time.Duration(2000+rng.IntN(3000)) * time.Millisecond) // a random moment of the stream
		c := children[rng.IntN(len(children))]
		c.kill()
		t.Logf("kill %d: child on port %d", k+1, c.port)
		c.start()
	}
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			for _, c := range children {
				s, st := servedSamples(c.port)
				t.Logf("child on port %d serves samples %d at step %d", c.port, s, st)
			}
			b, _ := os.ReadFile(logf.Name())
			os.WriteFile("/tmp/children.log", b, 0o644)
		}
	}()
	waitFor(t, 3*time.Minute, "every member serving the model of every message, at one step", func() bool {
		s0, st0 := servedSamples(children[0].port)
		for _, c := range children[1:] {
			if s, st := servedSamples(c.port); s != s0 || st != st0 {
				return false
			}
		}
		return s0 == n
	})
	for _, c := range children {
		c.cmd.Process.Signal(syscall.SIGTERM) // all at once: the group ends together
	}
	for _, c := range children {
		if err := c.wait(); err != nil {
			t.Errorf("graceful stop of the child on port %d: %v", c.port, err)
		}
	}
	var ref *snapshot.Snapshot
	for i := range children {
		snap, _, err := (&snapshot.Store{Dir: snaps[i], Model: "hermite"}).Latest()
		if err != nil {
			t.Fatalf("child %d: %v", i, err)
		}
		if got := snap.Header.SamplesSeen + snap.Header.Diagnostics.Shed; got != n {
			b, _ := os.ReadFile(logf.Name())
			t.Fatalf("child %d stored samples_seen %d + shed %d = %d, want exactly %d\n%s", i, snap.Header.SamplesSeen, snap.Header.Diagnostics.Shed, got, n, b[max(0, len(b)-4000):])
		}
		if ref == nil {
			ref = snap
			continue
		}
		sameCoefficients(t, fmt.Sprintf("child %d's stored model", i), snap.Coef[0], ref.Coef[0])
	}
	m, err := snapshot.NewModel(ref, snapshot.ModelOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e := hermiteError(t, m)
	t.Logf("after 3 SIGKILLs: samples_seen %d, shed %d, at step %d on every member; subspace error %.3g", ref.Header.SamplesSeen, ref.Header.Diagnostics.Shed, ref.Header.Step, e)
	if !(e < 0.05) {
		t.Errorf("subspace error %.3g against the closed form, want < 0.05", e)
	}
}
