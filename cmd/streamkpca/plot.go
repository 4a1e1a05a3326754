package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	gplot "gonum.org/v1/plot"

	"github.com/streamkpca/streamkpca/internal/cliflag"
	"github.com/streamkpca/streamkpca/internal/tools/plot"
)

const plotUsage = `usage: streamkpca plot <kind> [flags]

kinds:
  eigenfunctions --model M.skpca [--s 1]          learned vs closed-form eigenfunctions (1-D hermite models; paper Fig. 2)
  convergence    --bench bench.json               subspace error vs points, log-log, with a 1/t line (paper Fig. 1)
  compare        --bench compare.json             each method's error vs compute seconds, log-log (bench compare)
  drift          --bench drift.json               each learner's error vs points around a change (bench drift)
  cluster        --bench cluster.json             a group's rate per instance against its size, modelled and measured (bench cluster)
  scatter        --model M.skpca --input FILE [--label-col N]   first two projections of the rows (paper Fig. 4)
  correlations   --model M.skpca --input FILE --y-cols N        held-out canonical correlations per component (KCCA)
every kind takes --out FILE.png (default <kind>.png), --width and --height in cm.`

func cmdPlot(args []string) error {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, plotUsage)
		return errors.New("plot: name the kind of picture (the kinds are listed above)")
	}
	if isHelp(args[0]) {
		fmt.Println(plotUsage)
		return nil
	}
	kind := args[0]
	fs := flag.NewFlagSet("plot "+kind, flag.ContinueOnError)
	out := fs.String("out", kind+".png", "PNG file to write")
	width := fs.Float64("width", 16, "width in cm")
	height := fs.Float64("height", 10, "height in cm")
	model := fs.String("model", "", "snapshot file")
	input := fs.String("input", "", "data file (csv, jsonl, f32le, f64le)")
	benchFile := fs.String("bench", "", "JSON written by `streamkpca bench hermite` (convergence), `bench compare` (compare), `bench drift` (drift) or `bench cluster` (cluster)")
	labelCol := fs.Int("label-col", 0, "scatter: column of the input holding a class label, 1-based as --cols (excluded from the vector); 0: none")
	yCols := fs.Int("y-cols", 0, "correlations: the last N columns are y")
	s := fs.Float64("s", 1, "eigenfunctions: standard deviation of the hermite stream")
	if err := cliflag.Parse(fs, args[1:]); err != nil {
		return err
	}
	var p *gplot.Plot
	var err error
	switch kind {
	case "eigenfunctions":
		p, err = plot.Eigenfunctions(*model, *s)
	case "convergence":
		p, err = plot.Convergence(*benchFile)
	case "compare":
		p, err = plot.Compare(*benchFile)
	case "drift":
		p, err = plot.Drift(*benchFile)
	case "cluster":
		p, err = plot.Cluster(*benchFile)
	case "scatter":
		if *labelCol < 0 {
			return fmt.Errorf("--label-col %d: columns count from 1 (0: no label column)", *labelCol)
		}
		p, err = plot.Scatter(*model, *input, *labelCol-1)
	case "correlations":
		p, err = plot.Correlations(*model, *input, *yCols)
	default:
		return fmt.Errorf("unknown plot %q\n%s", kind, plotUsage)
	}
	if err != nil {
		return err
	}
	if err := plot.Save(p, *width, *height, *out); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "wrote %s\n", *out)
	return nil
}
