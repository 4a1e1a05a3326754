package testkit

import (
	"os"
	"testing"
)

// TestChildFails: the child of a test that fails one of its subtests on
// purpose is seen to fail exactly that one; a child that passes
// everything is reported (run in a grandchild, whose failure is the
// expected outcome).
func TestChildFails(t *testing.T) {
	switch os.Getenv("TESTKIT_CHILD") {
	case "one-fails":
		t.Run("Good", func(t *testing.T) {})
		t.Run("Bad", func(t *testing.T) { t.Error("broken on purpose") })
		return
	case "none-fails":
		t.Run("Good", func(t *testing.T) {})
		t.Run("Bad", func(t *testing.T) {})
		return
	case "checks-a-passing-child":
		ChildFails(t, "TESTKIT_CHILD=none-fails", []string{"Good", "Bad"}, []string{"Bad"})
		return
	}
	if !InChild("TESTKIT_CHILD=") || InChild("TESTKIT_CHILD=one-fails") {
		t.Fatal("InChild does not read the environment")
	}
	ChildFails(t, "TESTKIT_CHILD=one-fails", []string{"Good", "Bad"}, []string{"Bad"})
	// ChildFails of a child that passes must fail its caller: the
	// grandchild reports it, and so fails.
	ChildFails(t, "TESTKIT_CHILD=checks-a-passing-child", nil, nil)
}
