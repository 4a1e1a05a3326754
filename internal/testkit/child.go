package testkit

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/streamkpca/streamkpca/internal/devstack"
)

// InChild reports whether this process is the child ChildFails started
// for t's test with env (a NAME=value pair); the test then runs its suite
// against the broken implementation env names, and nothing else.
func InChild(env string) bool {
	name, value, _ := strings.Cut(env, "=")
	return os.Getenv(name) == value
}

// ChildFails runs t's test again in a child process of this test binary
// with env set, where the test runs a conformance suite against an
// implementation broken on purpose, and checks that the suite can fail:
// the child fails, exactly the subtests in fail fail, and the others of
// all pass (a suite that passes a broken implementation, or fails it
// for a reason that is not the break, fails here).
func ChildFails(t *testing.T, env string, all, fail []string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), env)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Errorf("%s: the suite passed an implementation broken on purpose:\n%s", env, out)
		return
	}
	for _, sub := range all {
		failed := strings.Contains(string(out), "--- FAIL: "+t.Name()+"/"+sub+" ")
		passed := strings.Contains(string(out), "--- PASS: "+t.Name()+"/"+sub+" ")
		if want := slices.Contains(fail, sub); failed != want || !failed && !passed {
			t.Errorf("%s: subtest %s failed %v passed %v, want it to fail: %v\n%s", env, sub, failed, passed, want, out)
		}
	}
}

// natsChild is the variable that makes a child of NATSProcess serve
// NATS.
const natsChild = "TESTKIT_NATS_PROCESS"

// NATSProcess starts an embedded NATS server with JetStream in a child
// process of this test binary and returns its URL; the child ends with
// the test. t's test must begin with `if testkit.ServeNATSProcess(t) {
// return }`: the child runs it again, and serves there. A test that
// measures its own process's memory uses it, so that the server's
// buffers are not counted.
func NATSProcess(t *testing.T) string {
	t.Helper()
	cmd, stdin, stdout := StartChild(t, natsChild+"=1")
	t.Cleanup(func() {
		stdin.Close() // the child's signal to stop
		if err := cmd.Wait(); err != nil {
			t.Errorf("the NATS child process: %v", err)
		}
	})
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		if url, ok := strings.CutPrefix(lines.Text(), natsChild+"="); ok {
			go func() { _, _ = io.Copy(io.Discard, stdout) }()
			return url
		}
	}
	t.Fatalf("the NATS child process ended without naming its server: %v", lines.Err())
	return ""
}

// ServeNATSProcess, in the child NATSProcess started, serves an
// embedded NATS server with JetStream until the parent closes its
// stdin, and returns true; elsewhere it returns false at once.
func ServeNATSProcess(t *testing.T) bool {
	if !InChild(natsChild + "=1") {
		return false
	}
	stack, err := devstack.StartNATSOnly(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stack.Close()
	fmt.Printf("%s=%s\n", natsChild, stack.NATSURL())
	_, _ = io.Copy(io.Discard, os.Stdin)
	return true
}

// StartChild starts t's test again in a child process of this test
// binary with env (a NAME=value pair) set, its stderr this process's,
// and returns it with its stdin and stdout: the test, seeing env, plays
// its part there (closing stdin is the usual signal to end). The caller
// waits for it.
func StartChild(t *testing.T, env string) (*exec.Cmd, io.WriteCloser, io.ReadCloser) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, stdin, stdout
}
