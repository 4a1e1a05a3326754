package integration

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/streamkpca/streamkpca/snapshot"
)

func buildBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("STREAMKPCA_TEST_BIN"); bin != "" {
		return bin // a binary built elsewhere (an older commit, to A/B a process test)
	}
	bin := filepath.Join(t.TempDir(), "streamkpca")
	out, err := exec.Command("go", "build", "-o", bin, "../cmd/streamkpca").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// scrape returns a metric of the child's /metrics, −1 if unreachable.
func scrape(port int, name string) float64 {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == name {
			v, _ := strconv.ParseFloat(f[1], 64)
			return v
		}
	}
	return -1
}

// TestSIGKILL runs the real binary as a child process (`streamkpca run`)
// and kills it with SIGKILL at 10 random points of a 4-partition stream;
// after the last restart and a graceful SIGTERM, samples_seen equals the
// produced count exactly.
func TestSIGKILL(t *testing.T) {
	longOnly(t)
	s := startStack(t, map[string]int32{"kill": 4})
	const n = 100_000
	produceHermite(t, s, "kill", n, 1)
	c, dir := soloChild(t, s, "kill", "k: 3, bandwidth: 1, max_features: 4096, linger: 300ms")
	port := c.port
	rng := rand.New(rand.NewPCG(1, 1))
	for i := 0; i < 10; i++ {
		c.start()
		target := float64(1000 + rng.IntN(6000))
		waitFor(t, 2*time.Minute, fmt.Sprintf("kill %d: the child learning %.0f samples", i+1, target), func() bool {
			return scrape(port, "streamkpca_samples_learned_total") >= target
		})
		c.kill()
	}
	c.start()
	store := &snapshot.Store{Dir: filepath.Join(dir, "snapshots"), Model: "kill"}
	waitFor(t, 3*time.Minute, "the restarted child covering the whole stream", func() bool {
		snap, _, err := store.Latest()
		return err == nil && snap.Header.SamplesSeen >= n
	})
	if err := c.stop(); err != nil {
		t.Errorf("graceful stop: %v", err)
	}
	snap, _, err := store.Latest()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after 10 SIGKILLs and a restart: samples_seen %d, version %d", snap.Header.SamplesSeen, snap.Header.Version())
	if snap.Header.SamplesSeen != n {
		b, _ := os.ReadFile(filepath.Join(dir, "child.log"))
		t.Errorf("samples_seen %d, want exactly %d\n%s", snap.Header.SamplesSeen, n, b[max(0, len(b)-3000):])
	}
}
