package benchcli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/streamkpca/streamkpca/internal/cliflag"
	"github.com/streamkpca/streamkpca/internal/tools/bench"
)

// benchPipeline is `streamkpca bench pipeline`: the streaming service end
// to end against the embedded brokers, next to the learner alone
// (internal/tools/bench).
func benchPipeline(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench pipeline", flag.ContinueOnError)
	ds := fs.String("d", "1,64,784", "input dimensions, comma-separated")
	var cfg bench.PipelineConfig
	fs.IntVar(&cfg.Points, "points", 40960, "points per dimension (a multiple of --batch)")
	fs.BoolVar(&cfg.Memory, "memory", false, "feed the service from memory instead of the embedded Kafka broker (its own overhead, no broker sharing the cores)")
	fs.BoolVar(&cfg.Output, "output", false, "the service writes every message's scores (output.topic) to an in-memory producer: what scoring costs")
	fs.StringVar(&cfg.Format, "format", "json", "message format: json or f64le (raw float64s, nothing to parse)")
	fs.IntVar(&cfg.K, "k", 3, "components")
	fs.IntVar(&cfg.Batch, "batch", 512, "mini-batch")
	fs.IntVar(&cfg.MaxFeatures, "max-features", 32768, "feature budget")
	fs.Float64Var(&cfg.Replay, "replay", 0, "the service's learner.replay (default: the service's; -1: off)")
	fs.IntVar(&cfg.Runs, "runs", 3, "learner-then-service pairs per d; rates and overhead are their medians")
	stop, err := parseProfiled(fs, args)
	if err != nil {
		return err
	}
	defer stop()
	dims, err := parseDims(*ds)
	if err != nil {
		return err
	}
	cfg.Dims = dims
	dir, err := os.MkdirTemp("", "streamkpca-bench-pipeline-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfg.Dir = dir
	rows, err := bench.RunPipeline(ctx, cfg)
	for _, r := range rows {
		fmt.Fprintf(os.Stderr, "d=%d: learner %.0f points/s, service %.0f points/s, overhead %+.1f%% (median of %d runs: %+.1f%%; start %.1fs); CPU per point %.0f µs vs %.0f µs, %+.1f%% (%+.1f%%)\n",
			r.D, r.LearnerPointsPerSec, r.ServicePointsPerSec, 100*r.Overhead, len(r.Overheads), pct(r.Overheads), r.StartSeconds,
			r.ServiceCPUMicros, r.LearnerCPUMicros, 100*r.CPUOverhead, pct(r.CPUOverheads))
	}
	if err != nil {
		return err
	}
	enc := json.NewEncoder(stdout())
	enc.SetIndent("", "  ")
	return enc.Encode(rows)
}

// pct scales fractions to percent.
func pct(v []float64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = 100 * x
	}
	return out
}

// parseProfiled adds --cpuprofile to fs, parses args and starts the CPU
// profile the flag asks for; stop ends it (a no-op without the flag).
func parseProfiled(fs *flag.FlagSet, args []string) (stop func(), err error) {
	path := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file (go tool pprof)")
	if err := cliflag.Parse(fs, args); err != nil {
		return nil, err
	}
	if *path == "" {
		return func() {}, nil
	}
	f, err := os.Create(*path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
