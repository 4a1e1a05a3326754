package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/streamkpca/streamkpca/internal/testkit"
	"github.com/streamkpca/streamkpca/publish"
	"github.com/streamkpca/streamkpca/snapshot"
)

// TestSubscriberProjectsThePublishedModel runs the example as a user
// would, against a NATS server where the golden model is published, and
// checks what it prints against the golden projections of the same
// points (snapshot/testdata/golden_projections.json, recorded when the
// format was written).
func TestSubscriberProjectsThePublishedModel(t *testing.T) {
	nc := testkit.NATS(t, nil)
	snap, _, err := snapshot.Load(filepath.Join("..", "..", "snapshot", "testdata", "golden.skpca"))
	if err != nil {
		t.Fatal(err)
	}
	snap.Header.Step = 3
	data, err := snap.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	pub, err := publish.NewPublisher(nc, publish.Config{Model: "golden"}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n, err := pub.Publish(ctx, snap, data)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "go", "run", ".", "--nats", nc.ConnectedUrl(), "--model", "golden",
		"--versions", "1", "--points", "[[0,0],[1,-1],[2.5,0.25]]")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("subscriber: %v\n%s", err, out)
	}
	var want []float64
	j, err := os.ReadFile(filepath.Join("..", "..", "snapshot", "testdata", "golden_projections.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(j, &want); err != nil {
		t.Fatal(err)
	}
	line := fmt.Sprintf("version %d (%d samples, %d features):", n.Version, n.SamplesSeen, n.Features)
	for i, p := range [][]float64{{0, 0}, {1, -1}, {2.5, 0.25}} {
		line += fmt.Sprintf(" %v→%.4f", p, want[2*i:2*i+2])
	}
	if got := regexp.MustCompile(`(?m)^version .*$`).FindString(string(out)); strings.TrimSpace(got) != line {
		t.Errorf("printed\n%s\nwant\n%s", got, line)
	}
}
