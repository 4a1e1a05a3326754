package integration

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/streamkpca/streamkpca/internal/devstack"
)

// child is one `streamkpca run` process of a test: its configuration
// file, its HTTP port and where its output goes. start may be called
// again after kill or stop (a restart with the same configuration); a
// child still running when the test ends is killed.
type child struct {
	t    *testing.T
	bin  string
	cfg  string
	port int
	out  io.Writer
	cmd  *exec.Cmd
	// prefix, if set, runs the child through it: prefix..., bin, run,
	// --config, file (a shell that moves itself into a cgroup first).
	prefix []string
}

// newChild writes the configuration config(port) for a free port into
// dir and returns the child, not started. out receives its standard
// output and error (nil: discarded).
func newChild(t *testing.T, bin, dir string, config func(port int) string, out io.Writer) *child {
	t.Helper()
	c := &child{t: t, bin: bin, port: freePort(t), out: out}
	f, err := os.CreateTemp(dir, "cfg*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(config(c.port)); err != nil {
		t.Fatal(err)
	}
	c.cfg = f.Name()
	t.Cleanup(func() {
		if c.running() {
			c.cmd.Process.Kill()
			c.cmd.Wait()
		}
	})
	return c
}

// startChild is newChild then start.
func startChild(t *testing.T, bin, dir string, config func(port int) string, out io.Writer) *child {
	c := newChild(t, bin, dir, config, out)
	c.start()
	return c
}

// start runs `streamkpca run --config` on the child's configuration.
func (c *child) start() {
	c.t.Helper()
	args := append(append([]string(nil), c.prefix...), c.bin, "run", "--config", c.cfg)
	c.cmd = exec.Command(args[0], args[1:]...)
	// The service refuses STREAMKPCA_ variables it does not know: the
	// tests' own switches (STREAMKPCA_TEST_*) stay with the test.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "STREAMKPCA_TEST_") {
			c.cmd.Env = append(c.cmd.Env, kv)
		}
	}
	c.cmd.Stdout, c.cmd.Stderr = c.out, c.out
	if err := c.cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
}

func (c *child) running() bool { return c.cmd != nil && c.cmd.ProcessState == nil }

// kill ends the child with SIGKILL: no final snapshot, no commit.
func (c *child) kill() {
	c.cmd.Process.Signal(syscall.SIGKILL)
	c.cmd.Wait()
}

// stop ends the child with SIGTERM, a graceful stop, and returns how it
// exited.
func (c *child) stop() error {
	c.cmd.Process.Signal(syscall.SIGTERM)
	return c.cmd.Wait()
}

// wait returns once the child has exited by itself, with how.
func (c *child) wait() error { return c.cmd.Wait() }

// childDir is a test's directory for a child's files and the log file
// in it (dir/child.log) that the child's output goes to, closed when the
// test ends.
func childDir(t *testing.T) (dir string, log *os.File) {
	t.Helper()
	dir = t.TempDir()
	log, err := os.Create(filepath.Join(dir, "child.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	return dir, log
}

// soloChild is a one-instance `streamkpca run` child on topic, consumer
// group and model name, with the learner settings learner (a YAML flow
// map's insides), its snapshots in dir/snapshots and its JSON log in
// dir/child.log; not started.
func soloChild(t *testing.T, s *devstack.Stack, name, learner string) (c *child, dir string) {
	t.Helper()
	bin := buildBinary(t)
	dir, logf := childDir(t)
	return newChild(t, bin, dir, func(port int) string {
		return fmt.Sprintf(`model: %[1]s
kafka: {brokers: [%[2]q], topic: %[1]s, group: %[1]s, session_timeout: 1s, rebalance_timeout: 2s}
learner: {%[3]s}
snapshot: {dir: %[4]q, every_batches: 8, every: 1s}
nats: {url: %[5]q}
http: {addr: "127.0.0.1:%[6]d"}
log: {level: info, format: json}
`, name, s.Brokers()[0], learner, filepath.Join(dir, "snapshots"), s.NATSURL(), port)
	}, logf), dir
}
