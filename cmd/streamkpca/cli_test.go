package main

import (
	"context"
	"errors"
	"flag"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/streamkpca/streamkpca/internal/tools/benchcli"
	"github.com/streamkpca/streamkpca/internal/tools/demo"
	"github.com/streamkpca/streamkpca/internal/tools/filecli"
)

// captureStdout runs f with os.Stdout redirected to a file and returns
// what it printed.
func captureStdout(t *testing.T, f func() error) string {
	t.Helper()
	return capture(t, &os.Stdout, f)
}

// capture runs f with *stream redirected to a file and returns what f
// wrote to it.
func capture(t *testing.T, stream **os.File, f func() error) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "out")
	fh, _ := os.Create(p)
	old := *stream
	*stream = fh
	err := f()
	*stream = old
	fh.Close()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	return string(b)
}

// Defect: `demo --http 127.0.0.1:PORT` on a busy port silently served on
// another port. A port the user names is used or refused.
func TestDemoRefusesBusyNamedPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	err = demo.Run(context.Background(), []string{"--http", ln.Addr().String(), "--duration", "1s"})
	if err == nil || !strings.Contains(err.Error(), "--http "+ln.Addr().String()) {
		t.Fatalf("demo on a busy named port: %v, want an error naming --http", err)
	}
}

// `streamkpca version` names the Go version, the SIMD level and the BLAS.
func TestVersion(t *testing.T) {
	v := buildInfo()
	if v.Go != runtime.Version() || v.BLAS == "" || v.Module != "github.com/streamkpca/streamkpca" {
		t.Errorf("version %+v", v)
	}
	if v.SIMD != "avx512" && v.SIMD != "avx2" && v.SIMD != "go" {
		t.Errorf("simd %q", v.SIMD)
	}
}

// Defects: `synth -h` said unknown data set "-h"; fit without --k and
// project without --model failed with the library's words.
func TestCLIHelpAndRequiredFlags(t *testing.T) {
	if err := cmdSynth([]string{"-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("synth -h: %v, want help", err)
	}
	if err := filecli.Std().Fit(context.Background(), []string{"--input", "x.csv"}); err == nil || !strings.Contains(err.Error(), "--k is required") {
		t.Errorf("fit without --k: %v", err)
	}
	if err := filecli.Std().Project([]string{"--input", "x.csv"}); err == nil || !strings.Contains(err.Error(), "--model is required") {
		t.Errorf("project without --model: %v", err)
	}
}

// TestCLIConventions: the first hour's surprises (issue of 2026-11-26),
// each of which failed before: help for every verb and sub-verb, errors
// in the flags' terms, 1-based columns checked, a warning when k is more
// than the data supports.
func TestCLIConventions(t *testing.T) {
	dir := t.TempDir()
	csv := filepath.Join(dir, "d.csv")
	if err := os.WriteFile(csv, []byte("a,b,c\n1,2,0\n2,1,1\n0,3,0\n3,0,1\n1,1,0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	errOf := func(f func() error) string {
		if err := f(); err != nil {
			return err.Error()
		}
		return ""
	}
	// bench -h and plot -h print their lists and succeed.
	if out := captureStdout(t, func() error { return benchcli.Run(context.Background(), []string{"-h"}) }); !strings.Contains(out, "keepup") || !strings.Contains(out, "cluster") || !strings.Contains(out, "fit") {
		t.Errorf("bench -h printed %q", out)
	}
	if out := captureStdout(t, func() error { return cmdPlot([]string{"-h"}) }); !strings.Contains(out, "scatter") {
		t.Errorf("plot -h printed %q", out)
	}
	// help fit prints fit's flags, and --k shows no default (it is required).
	os.Args = []string{"streamkpca", "help", "fit"}
	help := capture(t, &os.Stderr, func() error { main(); return nil })
	if !strings.Contains(help, "-max-epochs") || !strings.Contains(help, "components to learn (required)") || strings.Contains(help, "(required) (default 3)") {
		t.Errorf("help fit printed:\n%s", help)
	}
	if err := filecli.Std().Fit(context.Background(), []string{"--input", csv, "--cols", "1-2", "--k", "2", "--out", filepath.Join(dir, "m.skpca"), "--epochs", "1"}); err != nil {
		t.Fatal(err)
	}
	// --label-col is 1-based as --cols and checked: column 4 of 3 is refused
	// (before, 0-based, --label-col 3 silently drew a wrong plot).
	if got := errOf(func() error {
		return cmdPlot([]string{"scatter", "--model", filepath.Join(dir, "m.skpca"), "--input", csv, "--label-col", "4", "--out", filepath.Join(dir, "s.png")})
	}); !strings.Contains(got, "--label-col 4: the rows have 3 columns") {
		t.Errorf("plot scatter --label-col 4 on 3 columns: %q", got)
	}
	if got := errOf(func() error {
		return cmdPlot([]string{"scatter", "--model", filepath.Join(dir, "m.skpca"), "--input", csv, "--label-col", "3", "--out", filepath.Join(dir, "s.png")})
	}); got != "" {
		t.Errorf("plot scatter --label-col 3 (the third of 3 columns): %q", got)
	}
}

// Issue 61: `run -h` listed only --config and --set. It now lists every
// setting --set and the file take, with its default (the generated
// example configuration).
func TestRunHelpListsTheSettings(t *testing.T) {
	os.Args = []string{"streamkpca", "run", "-h"}
	help := capture(t, &os.Stderr, func() error { main(); return nil })
	for _, want := range []string{"-set", "learner:", "max_features: 32768", "offset_out_of_range: earliest", "dead_letter_spill_bytes"} {
		if !strings.Contains(help, want) {
			t.Errorf("run -h does not say %q", want)
		}
	}
}
