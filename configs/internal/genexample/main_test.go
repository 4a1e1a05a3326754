package main

import (
	"os"
	"testing"

	"github.com/streamkpca/streamkpca/configs"
)

// TestMainWritesTheExample: run where go generate runs it (configs/), it
// writes streamkpca.yaml with exactly configs.Example's bytes.
func TestMainWritesTheExample(t *testing.T) {
	t.Chdir(t.TempDir())
	if err := os.WriteFile("streamkpca.yaml", []byte("stale\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	main()
	got, err := os.ReadFile("streamkpca.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(configs.Example()) || len(got) < 1000 {
		t.Errorf("wrote %d bytes; want configs.Example's %d", len(got), len(configs.Example()))
	}
}
