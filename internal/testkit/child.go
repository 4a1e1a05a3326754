package testkit

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
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
