package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/streamkpca/streamkpca/internal/devstack"
	"github.com/streamkpca/streamkpca/publish"
	"github.com/streamkpca/streamkpca/snapshot"
)

// TestWatchPrintsVersions: `streamkpca watch` follows a model on NATS and
// prints a JSON line per version, with the points' projections equal to
// the snapshot's own, so that subscribing needs no other tool.
func TestWatchPrintsVersions(t *testing.T) {
	stack, err := devstack.StartNATSOnly(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stack.Close()
	nc, err := nats.Connect(stack.NATSURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := publish.Config{Model: "golden"}
	pub, err := publish.NewPublisher(nc, cfg, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	snap, _, err := snapshot.Load("../../snapshot/testdata/golden.skpca")
	if err != nil {
		t.Fatal(err)
	}
	publishAt := func(v uint64) {
		snap.Header.Step = v
		data, err := snap.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pub.Publish(ctx, snap, data); err != nil {
			t.Fatal(err)
		}
	}
	publishAt(3)
	var out bytes.Buffer
	done := make(chan error, 1)
	wctx, stop := context.WithCancel(ctx)
	go func() { done <- watch(wctx, nc, cfg, [][]float64{{0.5, 1}}, 2, &out, stop) }()
	time.Sleep(200 * time.Millisecond)
	publishAt(4)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("printed %d lines, want 2:\n%s", len(lines), out.String())
	}
	m, _ := snapshot.NewModel(snap, snapshot.ModelOptions{})
	want, _ := m.Project(nil, []float64{0.5, 1})
	for i, l := range lines {
		var w watchLine
		if err := json.Unmarshal([]byte(l), &w); err != nil || w.Version != uint64(3+i) || w.Model != "golden" ||
			len(w.Projections) != 1 || w.Projections[0][0] != want[0] || w.Projections[0][1] != want[1] {
			t.Errorf("line %d: %s (%v); want version %d, projections %v", i, l, err, 3+i, want)
		}
	}
}

// TestWatchSaysWhatItWaitsFor: pointed at a model nothing publishes,
// watch says after a while that it is still waiting and what to check
// (it printed nothing, for as long as it ran).
func TestWatchSaysWhatItWaitsFor(t *testing.T) {
	stack, err := devstack.StartNATSOnly(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stack.Close()
	var notes bytes.Buffer
	watchQuiet, watchNotes = 100*time.Millisecond, &notes
	defer func() { watchQuiet, watchNotes = 10*time.Second, io.Writer(os.Stderr) }()
	ctx, cancel := context.WithCancel(context.Background())
	defer time.AfterFunc(time.Second, cancel).Stop() // a Ctrl-C after a second
	if err := cmdWatch(ctx, []string{"--nats", stack.NATSURL(), "--model", "nosuch"}); err != nil {
		t.Fatalf("watch: %v", err)
	}
	if !strings.Contains(notes.String(), `no version of model "nosuch"`) || !strings.Contains(notes.String(), "--model") {
		t.Fatalf("watch said %q; want it to say it waits for a first version of nosuch and what to check", notes.String())
	}
}
