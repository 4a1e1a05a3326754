package cliflag

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"
)

// Issue 61: `fit --imput` printed a 103-line usage dump and exited 1.
// Now a bad flag is one line naming the flag meant, a *UsageError (exit
// 2); -h still prints the usage.
func TestABadFlagNamesTheOneMeant(t *testing.T) {
	fs := flag.NewFlagSet("fit", flag.ContinueOnError)
	var out bytes.Buffer
	fs.SetOutput(&out)
	fs.String("input", "", "the file")
	fs.String("model", "", "where to write it")
	fs.Int("k", 5, "components")
	err := Parse(fs, []string{"--imput", "x.csv"})
	var ue *UsageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "did you mean --input?") || !strings.Contains(err.Error(), "streamkpca fit -h") {
		t.Fatalf("Parse: %v; want a UsageError suggesting --input", err)
	}
	if out.Len() != 0 {
		t.Errorf("a bad flag printed %d bytes of usage", out.Len())
	}
	if err := Parse(fs, []string{"--zzzzzz"}); err == nil || strings.Contains(err.Error(), "did you mean") {
		t.Errorf("a flag like none: %v; want no suggestion", err)
	}
	if err := Parse(fs, []string{"-h"}); !errors.Is(err, flag.ErrHelp) || !strings.Contains(out.String(), "-input") {
		t.Errorf("-h: %v, printed %q; want the usage", err, out.String())
	}
}

func TestNearest(t *testing.T) {
	verbs := []string{"fit", "project", "inspect", "run", "demo", "produce", "watch", "bench", "plot", "synth", "version"}
	for in, want := range map[string]string{"fti": "fit", "projet": "project", "rn": "run", "dmeo": "demo", "wach": "watch", "xyz": "", "benchmark": ""} {
		if got := Nearest(in, verbs); got != want {
			t.Errorf("Nearest(%q) = %q; want %q", in, got, want)
		}
	}
}
