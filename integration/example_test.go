package integration

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestExampleSubscriber builds examples/subscriber and runs it against the
// embedded brokers while the service learns: it must print 2 versions with
// projections of its own points.
func TestExampleSubscriber(t *testing.T) {
	s := startStack(t, map[string]int32{"ex": 2})
	produceHermite(t, s, "ex", 20_000, 1)
	bin := filepath.Join(t.TempDir(), "subscriber")
	if out, err := exec.Command("go", "build", "-o", bin, "../examples/subscriber").CombinedOutput(); err != nil {
		t.Fatalf("go build examples/subscriber: %v\n%s", err, out)
	}
	r := start(t, config(s, "ex", t.TempDir()))
	waitFor(t, time.Minute, "a published version", func() bool { return r.p.Status().Published > 0 })
	cmd := exec.Command(bin, "--nats", s.NATSURL(), "--model", "hermite", "--versions", "2", "--points", "[[0],[1]]")
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	produceHermite(t, s, "ex", 20_000, 2) // new data: new versions
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		t.Fatal("the subscriber did not see 2 versions in 2 minutes")
	}
	if err != nil {
		t.Fatalf("subscriber: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "version ") || !strings.Contains(lines[1], "[1]→[") {
		t.Errorf("subscriber printed:\n%s", out)
	}
	r.graceful(t)
}
