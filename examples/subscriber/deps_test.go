package main

import (
	"os/exec"
	"regexp"
	"testing"
)

// TestSubscriberDeps: a client that only follows a model's versions
// compiles none of the service's consumer or learner: no kafka-go, no
// ingest, no online, no configs (publish takes its own small config).
func TestSubscriberDeps(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	bad := regexp.MustCompile(`(?m)^.*(segmentio/kafka-go|streamkpca/ingest|streamkpca/online|streamkpca/configs)$`)
	if m := bad.FindAllString(string(out), -1); len(m) > 0 {
		t.Errorf("the subscriber compiles %v", m)
	}
}
