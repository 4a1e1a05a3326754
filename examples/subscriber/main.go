// Command subscriber watches a streamkpca model on NATS and projects its
// own points with every new version, locally: it imports only the snapshot
// and publish packages, and needs nothing from the learner.
//
//	go run ./examples/subscriber --nats nats://127.0.0.1:4222 --model hermite --points '[[0],[0.5],[1.5]]'
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"

	"github.com/nats-io/nats.go"

	"github.com/streamkpca/streamkpca/publish"
	"github.com/streamkpca/streamkpca/snapshot"
)

func main() {
	url := flag.String("nats", nats.DefaultURL, "NATS server URL")
	model := flag.String("model", "hermite", "model name")
	prefix := flag.String("prefix", "streamkpca", "subject prefix")
	points := flag.String("points", "[[0],[0.5],[1.5]]", "JSON array of vectors to project")
	versions := flag.Int("versions", 0, "exit after this many versions (0: until Ctrl-C)")
	flag.Parse()

	var vecs [][]float64
	if err := json.Unmarshal([]byte(*points), &vecs); err != nil || len(vecs) == 0 {
		log.Fatalf("--points: want a JSON array of vectors: %v", err)
	}
	var flat []float64
	for _, v := range vecs {
		flat = append(flat, v...)
	}
	nc, err := nats.Connect(*url, nats.MaxReconnects(-1))
	if err != nil {
		log.Fatalf("connect to %s: %v", *url, err)
	}
	defer nc.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	seen := 0
	cfg := publish.Config{Prefix: *prefix, Model: *model, OnSkip: func(n publish.Notice, err error) {
		log.Printf("passing over version %d (incarnation %q): %v", n.Version, n.Incarnation, err)
	}}
	err = publish.Watch(ctx, nc, cfg, func(m *snapshot.Model, n publish.Notice) {
		proj, err := m.Project(nil, flat)
		if err != nil {
			log.Printf("version %d: %v", n.Version, err)
			return
		}
		k := m.K()
		fmt.Printf("version %d (%d samples, %d features):", n.Version, n.SamplesSeen, n.Features)
		for i := range vecs {
			fmt.Printf(" %v→%.4f", vecs[i], proj[i*k:(i+1)*k])
		}
		fmt.Println()
		if seen++; *versions > 0 && seen >= *versions {
			stop()
		}
	})
	if err != nil && ctx.Err() == nil {
		log.Fatal(err)
	}
}
