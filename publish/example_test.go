package publish_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/streamkpca/streamkpca/publish"
	"github.com/streamkpca/streamkpca/snapshot"
)

// ExampleWatch follows the model a service publishes: Watch hands over a
// ready snapshot.Model for the served version, then for every newer one.
// Here an embedded NATS server with JetStream stands in for the cluster
// and the service's side is a Publisher of the golden snapshot, whose
// projection of (1, −1) testdata/golden_projections.json records.
func ExampleWatch() {
	dir, _ := os.MkdirTemp("", "watch")
	defer os.RemoveAll(dir)
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true, JetStream: true, StoreDir: dir})
	if err != nil {
		fmt.Println(err)
		return
	}
	ns.Start()
	defer ns.Shutdown()
	if !ns.ReadyForConnections(10e9) {
		fmt.Println("nats-server not ready")
		return
	}
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer nc.Close()

	// The service's side: publish version 7 of a model.
	cfg := publish.Config{Model: "golden"}
	pub, err := publish.NewPublisher(nc, cfg, zerolog.Nop())
	if err != nil {
		fmt.Println(err)
		return
	}
	snap, _, err := snapshot.Load(filepath.Join("..", "snapshot", "testdata", "golden.skpca"))
	if err != nil {
		fmt.Println(err)
		return
	}
	snap.Header.Model, snap.Header.Step = "golden", 7
	data, _ := snap.MarshalBinary()
	if _, err := pub.Publish(context.Background(), snap, data); err != nil {
		fmt.Println(err)
		return
	}

	// A client's side: watch, project a point with each version it gets.
	ctx, cancel := context.WithCancel(context.Background())
	err = publish.Watch(ctx, nc, cfg, func(m *snapshot.Model, n publish.Notice) {
		p, _ := m.Project(nil, []float64{1, -1})
		fmt.Printf("version %d, %d components: %.6f\n", n.Version, m.Header().K, p)
		cancel() // one version is enough here
	})
	fmt.Println(err)
	// Output:
	// version 7, 2 components: [-3.769053 0.274297]
	// context canceled
}
