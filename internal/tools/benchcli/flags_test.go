package benchcli

import (
	"compress/gzip"
	"context"
	"flag"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/streamkpca/streamkpca/internal/tools/bench"
	"github.com/streamkpca/streamkpca/online"
)

// TestCPUProfileIsAProfile: --cpuprofile writes what go tool pprof reads
// (a gzip stream, non-empty once inflated) and stop closes it; a path
// that cannot be created is refused naming the flag.
func TestCPUProfileIsAProfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.pprof")
	stop, err := parseProfiled(flag.NewFlagSet("p", flag.ContinueOnError), []string{"--cpuprofile", path})
	if err != nil {
		t.Fatal(err)
	}
	x := 0.0
	for i := range 20_000_000 { // something to sample
		x += math.Sqrt(float64(i))
	}
	stop()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("the profile is not gzip (%v): go tool pprof could not read it", err)
	}
	if b, err := io.ReadAll(zr); err != nil || len(b) == 0 {
		t.Fatalf("the profile inflates to %d bytes (%v) after %g", len(b), err, x)
	}
	stop, err = parseProfiled(flag.NewFlagSet("p", flag.ContinueOnError), nil)
	if err != nil {
		t.Fatal(err)
	}
	stop() // without the flag: nothing started, nothing to stop
	_, err = parseProfiled(flag.NewFlagSet("p", flag.ContinueOnError), []string{"--cpuprofile", filepath.Join(t.TempDir(), "no", "such", "dir", "cpu")})
	if err == nil || !strings.Contains(err.Error(), "--cpuprofile") {
		t.Fatalf("an uncreatable profile path: %v, want an error naming --cpuprofile", err)
	}
}

// TestMNISTLearnerFlagsSetTheConfig: each learner flag of `bench mnist`
// lands in its online.Config field, and none given leaves the zero
// Config (the learner's defaults, what a new user runs).
func TestMNISTLearnerFlagsSetTheConfig(t *testing.T) {
	fs := flag.NewFlagSet("m", flag.ContinueOnError)
	c := mnistLearnerFlags(fs)
	if err := fs.Parse(nil); err != nil || !reflect.DeepEqual(*c, online.Config{}) {
		t.Fatalf("no flags: %+v (%v), want the zero Config", *c, err)
	}
	fs = flag.NewFlagSet("m", flag.ContinueOnError)
	c = mnistLearnerFlags(fs)
	err := fs.Parse([]string{"--solver", "covariance", "--theta0", "2.5", "--theta1", "0.5", "--average", "-1", "--block", "256",
		"--frequencies", "orthogonal", "--features", "landmarks", "--center", "--max-features", "4096", "--ridge", "1e-3"})
	if err != nil {
		t.Fatal(err)
	}
	want := online.Config{Solver: "covariance", Theta0: 2.5, Theta1: 0.5, Average: -1, BlockSize: 256,
		Frequencies: "orthogonal", Features: "landmarks", Center: true, MaxFeatures: 4096, Ridge: 1e-3}
	if !reflect.DeepEqual(*c, want) {
		t.Fatalf("flags gave %+v, want %+v", *c, want)
	}
	fs = flag.NewFlagSet("m", flag.ContinueOnError)
	var r bench.MNISTRun
	mnistRunFlags(fs, &r, bench.MNISTCCADefaults, "pairs")
	if err := fs.Parse([]string{"--train", "7"}); err != nil {
		t.Fatal(err)
	}
	if want := bench.MNISTCCADefaults; r.Train != 7 || r.Test != want.Test || r.K != want.K || r.Landmarks != want.Landmarks {
		t.Fatalf("run flags %+v: want --train 7 and the kcca defaults %+v otherwise", r, want)
	}
}

// TestBenchMNISTRefusals: an unknown task and a missing or empty data
// directory are refused, each saying what to give.
func TestBenchMNISTRefusals(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"mnist", "--task", "pca"}, `unknown task "pca": kpca or kcca`},
		{[]string{"mnist"}, "--mnist is required"},
		{[]string{"mnist", "--task", "kcca"}, "--mnist is required"},
		{[]string{"mnist", "--task=kcca", "--mnist", filepath.Join(os.TempDir(), "no-such-mnist-dir")}, "no-such-mnist-dir"},
	} {
		if err := Run(context.Background(), tc.args); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("bench %v: %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}
