package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"

	"github.com/streamkpca/streamkpca/internal/cliflag"
	"github.com/streamkpca/streamkpca/internal/synth"
)

// cmdSynth writes a synthetic data set as CSV, for trying fit, project and
// plot without data of your own.
func cmdSynth(args []string) error {
	const synthUsage = `usage: streamkpca synth hermite|hermite16|digits|twoview|mixture [--n N] [--seed S] [--out FILE]

Columns of the CSV:
  hermite     1 value (the paper's 1-D stream)
  hermite16   16 values
  digits      64 pixel values, then the digit label (fit --cols 1-64 leaves it out)
  twoview     6 values of view x, then 6 of view y
  mixture     2 values of view x, then 2 of view y`
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintln(os.Stderr, synthUsage)
		if len(args) == 0 {
			return errors.New("a data set is required")
		}
		return flag.ErrHelp
	}
	kind := args[0]
	fs := flag.NewFlagSet("synth "+kind, flag.ContinueOnError)
	n := fs.Int("n", 20000, "rows")
	seed := fs.Uint64("seed", 1, "seed")
	out := fs.String("out", "-", "CSV file, - for stdout")
	if err := cliflag.Parse(fs, args[1:]); err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(*seed, 5))
	var rows [][]float64
	switch kind {
	case "hermite", "hermite16":
		h := synth.Hermite1D()
		if kind == "hermite16" {
			h = synth.Hermite16()
		}
		x := make([]float64, *n*h.Dim())
		h.Sample(x, rng)
		for i := 0; i < *n; i++ {
			rows = append(rows, x[i*h.Dim():(i+1)*h.Dim()])
		}
	case "digits":
		// 64 pixel columns, then the class label (for plot scatter --label-col 65).
		for i := 0; i < *n; i++ {
			class := rng.IntN(10)
			img := synth.DigitsOfClass(rng, class)
			rows = append(rows, append(img, float64(class)))
		}
	case "twoview", "mixture":
		var x, y []float64
		dx, dy := synth.TwoViewDimX, synth.TwoViewDimY
		if kind == "twoview" {
			x, y = synth.TwoView(rng, *n)
		} else {
			x, y = synth.Mixture(rng, *n)
			dx, dy = synth.MixtureDim, synth.MixtureDim
		}
		for i := 0; i < *n; i++ {
			rows = append(rows, append(append([]float64{}, x[i*dx:(i+1)*dx]...), y[i*dy:(i+1)*dy]...))
		}
	default:
		return fmt.Errorf("unknown data set %q (hermite, hermite16, digits, twoview, mixture)", kind)
	}
	f := os.Stdout
	if *out != "-" {
		var err error
		if f, err = os.Create(*out); err != nil {
			return err
		}
		defer f.Close()
	}
	w := bufio.NewWriter(f)
	for _, r := range rows {
		for j, v := range r {
			if j > 0 {
				w.WriteByte(',')
			}
			w.WriteString(strconv.FormatFloat(v, 'g', 8, 64))
		}
		w.WriteByte('\n')
	}
	return w.Flush()
}
