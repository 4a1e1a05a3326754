package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/streamkpca/streamkpca/configs"
	"github.com/streamkpca/streamkpca/internal/cliflag"
	"github.com/streamkpca/streamkpca/publish"
	"github.com/streamkpca/streamkpca/snapshot"
)

// watchLine is one line `streamkpca watch` prints per version: its
// notice (docs/api.md) and the projections of --points with it, one row
// per point.
type watchLine struct {
	publish.Notice
	Projections [][]float64 `json:"projections,omitempty"`
}

// cmdWatch is `streamkpca watch`: follows a model's versions on NATS
// (publish.Watch: the served version, then each new one, a pin, a new
// incarnation) and prints one JSON line per version, so that subscribing
// needs no other tool.
func cmdWatch(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("watch", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: streamkpca watch --model NAME [--nats URL] [--points '[[0.5]]'] [--versions N]\n\nFollows a model's versions on NATS and prints one JSON line per version\n(model, incarnation, version, samples, features, quality; with --points, their\nprojections). Stops after --versions versions, or on Ctrl-C.\n\nFlags:")
		fs.PrintDefaults()
	}
	var nc configs.NATS
	fs.StringVar(&nc.URL, "nats", "nats://127.0.0.1:4222", "NATS server URL(s), comma-separated")
	model := fs.String("model", "", "model name (required)")
	fs.StringVar(&nc.Prefix, "prefix", "streamkpca", "subject prefix (nats.prefix)")
	fs.StringVar(&nc.CredsFile, "creds-file", "", "NATS credentials file")
	fs.StringVar(&nc.TokenFile, "token-file", "", "file holding a NATS token")
	fs.StringVar(&nc.NKeyFile, "nkey-file", "", "NATS nkey seed file")
	points := fs.String("points", "", "points to project with each version, as JSON: [[0.5],[1.5]]")
	versions := fs.Int("versions", 0, "stop after this many versions (0: until Ctrl-C)")
	if err := cliflag.Parse(fs, args); err != nil {
		return err
	}
	if *model == "" {
		return errors.New("--model is required: the model name the service publishes (its `model` setting)")
	}
	var pts [][]float64
	if *points != "" {
		if err := json.Unmarshal([]byte(*points), &pts); err != nil || len(pts) == 0 {
			return fmt.Errorf("--points %q: want a JSON array of points, e.g. [[0.5],[1.5]]", *points)
		}
	}
	log := zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr, NoColor: true}).Level(zerolog.WarnLevel).With().Timestamp().Logger()
	cc, err := nc.ConnectConfig()
	if err != nil {
		return err
	}
	conn, err := publish.Connect(cc, log)
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	quiet := time.AfterFunc(watchQuiet, func() {
		fmt.Fprintf(watchNotes, "streamkpca watch: no version of model %q on %s after %v; still waiting (is --model the service's `model` setting, --nats its server and --prefix its nats.prefix? a new model publishes its first version after its first batch)\n", *model, conn.ConnectedUrlRedacted(), watchQuiet)
	})
	defer quiet.Stop()
	return watch(ctx, conn, publish.Config{Prefix: nc.Prefix, Model: *model, OnSkip: func(n publish.Notice, err error) {
		log.Warn().Err(err).Uint64("version", n.Version).Msg("passing over a version that cannot be fetched")
	}}, pts, *versions, os.Stdout, func() { quiet.Stop(); stop() }, quiet.Stop)
}

// watchQuiet is how long watch waits for a first version before it says
// on watchNotes that it is waiting, and for what (variables for tests).
var (
	watchQuiet           = 10 * time.Second
	watchNotes io.Writer = os.Stderr
)

// watch prints a JSON line per version Watch delivers (with pts
// projected), calling stop after n versions (0: never) and delivered at
// the first.
func watch(ctx context.Context, nc *nats.Conn, cfg publish.Config, pts [][]float64, n int, w io.Writer, stop func(), delivered ...func() bool) error {
	enc := json.NewEncoder(w)
	seen := 0
	var printErr error
	err := publish.Watch(ctx, nc, cfg, func(m *snapshot.Model, no publish.Notice) {
		for _, f := range delivered {
			f()
		}
		line := watchLine{Notice: no}
		for _, p := range pts {
			proj, err := m.Project(nil, p)
			if err != nil {
				printErr = fmt.Errorf("project %v with version %d: %w", p, no.Version, err)
				stop()
				return
			}
			line.Projections = append(line.Projections, proj)
		}
		if err := enc.Encode(line); err != nil {
			printErr = err
			stop()
			return
		}
		if seen++; n > 0 && seen >= n {
			stop()
		}
	})
	if printErr != nil {
		return printErr
	}
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
