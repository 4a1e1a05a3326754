package main

import (
	"context"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/streamkpca/streamkpca/internal/tools/benchcli"
	"github.com/streamkpca/streamkpca/internal/tools/filecli"
)

// TestPlots renders every plot kind from data and models made here and
// checks each file decodes as a PNG of the requested size.
func TestPlots(t *testing.T) {
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(cmdSynth([]string{"hermite", "--n", "6000", "--out", p("h.csv")}))
	must(filecli.Std().Fit(context.Background(), []string{"--input", p("h.csv"), "--k", "3", "--bandwidth", "1", "--epochs", "3", "--out", p("h.skpca")}))
	must(cmdSynth([]string{"digits", "--n", "1500", "--out", p("d.csv")}))
	must(cmdSynth([]string{"twoview", "--n", "3000", "--out", p("tv.csv")}))
	must(filecli.Std().Fit(context.Background(), []string{"--input", p("tv.csv"), "--algo", "kcca", "--k", "2", "--y-cols", "6", "--epochs", "3", "--out", p("tv.skpca")}))
	// digits: fit on the 64 pixel columns only (the label is column 64).
	must(cmdSynth([]string{"digits", "--n", "1500", "--seed", "2", "--out", p("d2.csv")}))
	noLabel := p("d-nolabel.csv")
	stripLastColumn(t, p("d.csv"), noLabel)
	must(filecli.Std().Fit(context.Background(), []string{"--input", noLabel, "--k", "2", "--epochs", "3", "--out", p("d.skpca")}))
	bench := captureStdout(t, func() error {
		return benchcli.Run(context.Background(), []string{"hermite", "--points", "20000", "--max-features", "2048"})
	})
	os.WriteFile(p("bench.json"), []byte(bench), 0o644)
	compare := captureStdout(t, func() error {
		return benchcli.Run(context.Background(), []string{"compare", "--case", "hermite1", "--points", "6000", "--methods", "dsgd,rff=256,nystrom=64",
			"--dsgd-features", "1024", "--isolate=false", "--table=false"})
	})
	os.WriteFile(p("compare.json"), []byte(compare), 0o644)

	for _, tc := range [][]string{
		{"eigenfunctions", "--model", p("h.skpca")},
		{"convergence", "--bench", p("bench.json")},
		{"compare", "--bench", p("compare.json")},
		{"drift", "--bench", "../../docs/bench-drift.json"},     // `bench drift` of 2026-11-26 (docs/results.md)
		{"cluster", "--bench", "../../docs/bench-cluster.json"}, // `bench cluster` of 2026-11-27 (docs/results.md)
		{"scatter", "--model", p("d.skpca"), "--input", p("d2.csv"), "--label-col", "65"},
		{"correlations", "--model", p("tv.skpca"), "--input", p("tv.csv"), "--y-cols", "6"},
	} {
		out := p(tc[0] + ".png")
		must(cmdPlot(append(tc, "--out", out, "--width", "12", "--height", "8")))
		f, err := os.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: not a PNG: %v", tc[0], err)
		}
		wantW, wantH := 12/2.54*96, 8/2.54*96 // gonum/plot renders PNG at 96 dpi
		b := img.Bounds()
		if math.Abs(float64(b.Dx())-wantW) > 1.5 || math.Abs(float64(b.Dy())-wantH) > 1.5 {
			t.Errorf("%s: %dx%d pixels, want ≈ %.0fx%.0f", tc[0], b.Dx(), b.Dy(), wantW, wantH)
		}
	}
	if err := cmdPlot([]string{"eigenfunctions", "--model", p("tv.skpca"), "--out", p("x.png")}); err == nil {
		t.Error("eigenfunctions of a 6-D two-view model accepted")
	}
}

func stripLastColumn(t *testing.T, in, out string) {
	t.Helper()
	b, _ := os.ReadFile(in)
	var o []byte
	start := 0
	for i, c := range b {
		if c == '\n' {
			line := b[start:i]
			j := len(line) - 1
			for j >= 0 && line[j] != ',' {
				j--
			}
			o = append(append(o, line[:j]...), '\n')
			start = i + 1
		}
	}
	os.WriteFile(out, o, 0o644)
}
