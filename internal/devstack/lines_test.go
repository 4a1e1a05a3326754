package devstack

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLines: produce's file reader keeps every non-blank line, in order,
// including lines longer than a default scanner buffer (64 KiB).
func TestLines(t *testing.T) {
	long := "[" + strings.Repeat("0.5,", 40000) + "1]"
	p := filepath.Join(t.TempDir(), "m.jsonl")
	if err := os.WriteFile(p, []byte("[1,2]\n\n  \n"+long+"\n[3,4]"), 0o600); err != nil {
		t.Fatal(err)
	}
	lines, err := Lines(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 3 || string(lines[0]) != "[1,2]" || string(lines[1]) != long || string(lines[2]) != "[3,4]" {
		t.Errorf("%d lines: %.20q…", len(lines), lines)
	}
	if _, err := Lines(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("a missing file read without error")
	}
}
