package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/streamkpca/streamkpca/configs"
	"github.com/streamkpca/streamkpca/internal/cliflag"
	"github.com/streamkpca/streamkpca/internal/devstack"
	"github.com/streamkpca/streamkpca/internal/progress"
	"github.com/streamkpca/streamkpca/internal/synth"
	"github.com/streamkpca/streamkpca/pipeline"
)

func cmdRun(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	path := fs.String("config", "", "YAML config file (see configs/streamkpca.yaml); STREAMKPCA_* env vars override it")
	var sets setFlags
	fs.Var(&sets, "set", "override a setting by its YAML path, e.g. --set learner.k=5 (repeatable; beats the file and the environment)")
	fs.Usage = func() {
		// The flags, then every setting --set and the file take, with
		// its default and what it does: the generated example config.
		fmt.Fprintf(fs.Output(), "Usage: streamkpca run [--config FILE] [--set path=value]...\n\n")
		fs.PrintDefaults()
		fmt.Fprintf(fs.Output(), "\nSettings (--set path=value, the YAML file, or STREAMKPCA_PATH_NAME), with their defaults:\n\n%s", configs.Example())
	}
	if err := cliflag.Parse(fs, args); err != nil {
		return err
	}
	cfg, err := configs.Load(*path, os.Environ(), sets...)
	if err != nil {
		return err
	}
	log := cfg.Log.Logger(os.Stderr)
	p, err := pipeline.New(pipeline.Options{Config: cfg, Logger: &log})
	if err != nil {
		return err
	}
	log.Info().Msg("streamkpca running; Ctrl-C stops after a final snapshot")
	return p.Run(ctx)
}

func cmdProduce(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("produce", flag.ContinueOnError)
	brokers := fs.String("brokers", "localhost:9092", "Kafka bootstrap brokers, comma-separated")
	topic := fs.String("topic", "vectors", "topic")
	source := fs.String("source", "hermite", "hermite, hermite16, or a file with one message per line (csv or jsonl)")
	n := fs.Int("n", 100000, "messages to produce (synthetic sources)")
	rate := fs.Float64("rate", 0, "messages per second (0 = as fast as possible)")
	seed := fs.Uint64("seed", 1, "seed of synthetic sources")
	if err := cliflag.Parse(fs, args); err != nil {
		return err
	}
	var src devstack.Source
	count := *n
	switch *source {
	case "hermite":
		src = devstack.HermiteJSON(synth.Hermite1D(), *seed)
	case "hermite16":
		src = devstack.HermiteJSON(synth.Hermite16(), *seed)
	default:
		lines, err := devstack.Lines(*source)
		if err != nil {
			return fmt.Errorf("--source: %w", err)
		}
		src, count = func(i int) []byte { return lines[i] }, len(lines)
	}
	pr := progress.New()
	start := time.Now()
	err := devstack.Produce(ctx, src, devstack.ProduceOptions{
		Brokers: strings.Split(*brokers, ","), Topic: *topic, N: count, Rate: *rate,
		Progress: func(i int) {
			pr.Update("%d/%d messages  %.0f/s%s", i, count, float64(i)/time.Since(start).Seconds(), progress.ETA(float64(i), float64(count), time.Since(start)))
		},
	})
	pr.Done()
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "produced %d messages to %s in %.1fs\n", count, *topic, time.Since(start).Seconds())
	return nil
}

// setFlags collects repeated --set path=value flags.
type setFlags []string

func (s *setFlags) String() string     { return strings.Join(*s, " ") }
func (s *setFlags) Set(v string) error { *s = append(*s, v); return nil }
