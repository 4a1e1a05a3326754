package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/streamkpca/streamkpca/cluster"
	"github.com/streamkpca/streamkpca/features"
	"github.com/streamkpca/streamkpca/internal/testkit"
	"github.com/streamkpca/streamkpca/online"
	"github.com/streamkpca/streamkpca/publish"
)

// TestProjectByHand: project is (x − mean)·a, and a NaN in the product
// (an infinite input) is served as 0.
func TestProjectByHand(t *testing.T) {
	x := []float64{1, 2, 3, 4, math.Inf(1), 0}
	mean := []float64{1, 1}
	a := mat.NewDense(2, 2, []float64{1, 2, 3, 4}) // rows: input coordinates
	dst := make([]float64, 6)
	project(dst, x, 3, 2, mean, a, 2)
	// (0, 1)·a = (3, 4); (2, 3)·a = (11, 16); (Inf, −1)·a = (Inf − 3, Inf − 4)
	want := []float64{3, 4, 11, 16, math.Inf(1), math.Inf(1)}
	for i := range want {
		if dst[i] != want[i] {
			t.Fatalf("project: %v, want %v", dst, want)
		}
	}
	x[4] = math.NaN()
	project(dst, x, 3, 2, mean, a, 2)
	if dst[4] != 0 || dst[5] != 0 {
		t.Errorf("a NaN input projects to %v, want 0", dst[4:])
	}
	c, m := centredDense([]float64{1, 10, 3, 20}, 2, 2)
	if m[0] != 2 || m[1] != 15 || c.At(0, 0) != -1 || c.At(1, 1) != 5 {
		t.Errorf("centredDense: mean %v, rows %v", m, mat.Formatted(c))
	}
}

// sleepyGatherer is a group of one whose rounds take wait.
type sleepyGatherer struct{ wait time.Duration }

func (s sleepyGatherer) AllGather(_ context.Context, _ uint64, p []byte) ([][]byte, error) {
	time.Sleep(s.wait)
	return [][]byte{p}, nil
}

func (s sleepyGatherer) AllToAll(_ context.Context, _ uint64, parts [][]byte) ([][]byte, error) {
	time.Sleep(s.wait)
	return parts, nil
}

func (sleepyGatherer) Size() int { return 1 }
func (sleepyGatherer) Rank() int { return 0 }

// TestTimedGathererCountsTheRounds: the time in both kinds of round is
// summed (each at least its sleep), and the payloads pass unchanged.
func TestTimedGathererCountsTheRounds(t *testing.T) {
	g := &timedGatherer{Gatherer: sleepyGatherer{wait: 20 * time.Millisecond}}
	out, err := g.AllGather(t.Context(), 0, []byte("a"))
	if err != nil || len(out) != 1 || string(out[0]) != "a" {
		t.Fatalf("AllGather: %q, %v", out, err)
	}
	if _, err := g.AllToAll(t.Context(), 1, [][]byte{[]byte("b")}); err != nil {
		t.Fatal(err)
	}
	if g.in < 40*time.Millisecond {
		t.Errorf("%v in two rounds of at least 20 ms each", g.in)
	}
	if partsName(cluster.AllGatherParts) != "all-gather" || partsName(cluster.ReduceScatter) != "reduce-scatter" {
		t.Error("partsName")
	}
}

// TestFullBudgetDrawsTheWholeBudget: the cluster benchmark's start model
// holds the whole feature budget (so every timed step costs a long-run
// step), learned from 64 points and then 16 a block.
func TestFullBudgetDrawsTheWholeBudget(t *testing.T) {
	const block, budget, d = 128, 1024, 5
	lc := online.Config{Model: "bench", K: 2, BlockSize: block, MaxFeatures: budget, Kernel: features.Kernel{Family: features.Gaussian, Bandwidth: 2}}
	s, err := fullBudget(lc, d)
	if err != nil {
		t.Fatal(err)
	}
	h := s.Header
	if got := h.Features(); got != budget {
		t.Errorf("%d features, want the budget %d", got, budget)
	}
	// One block a step: 64 points for the first, 16 for each of the
	// other budget/block − 1.
	if want := uint64(64 + 16*(budget/block-1)); h.SamplesSeen != want || h.Step != budget/block || h.Views[0].Dim != d {
		t.Errorf("%d samples at dimension %d, want %d at %d", h.SamplesSeen, h.Views[0].Dim, want, d)
	}
}

// TestReadToEndCountsTheBytes: the fetch of `bench publish` reads the
// object to its end and counts it; a name never stored is
// publish.ErrNotFound.
func TestReadToEndCountsTheBytes(t *testing.T) {
	b := publish.NewMemBackend()
	body := bytes.Repeat([]byte("0123456789"), 100_001)
	if err := b.PutObject(t.Context(), "v1", nil, bytes.NewReader(body)); err != nil {
		t.Fatal(err)
	}
	if n, err := readToEnd(t.Context(), b, "v1"); err != nil || n != int64(len(body)) {
		t.Errorf("read %d bytes (%v), want %d", n, err, len(body))
	}
	if _, err := readToEnd(t.Context(), b, "v2"); !errors.Is(err, publish.ErrNotFound) {
		t.Errorf("a missing name: %v, want ErrNotFound", err)
	}
}

// TestPrintCompareTableByHand: the table as a reader sees it, written out by
// hand: "not reached" for −1, two decimals below a second, a dash for
// no model within the budget, and the idle RSS when there is one.
func TestPrintCompareTableByHand(t *testing.T) {
	var w strings.Builder
	PrintCompareTable(&w, CompareResult{About: "toy", Points: 1000, BudgetSeconds: 30, IdleRSSMiB: 12, Methods: []CompareMethod{
		{Method: "a", Size: 4096, SizeOf: "features", To1e2: 0.5, To1e3: -1, ErrorAtBudget: math.NaN(), ErrorAtEnd: 0.00123, Seconds: 12.34, PeakMiB: 7.4, PeakOf: "heap"},
		{Method: "bb", Size: 2, SizeOf: "x", To1e2: 3, To1e3: 25.55, ErrorAtBudget: 0.5, ErrorAtEnd: 0.25, Seconds: 1, PeakMiB: 100, PeakOf: "RSS"},
	}})
	want := "\ntoy — 1000 points, budget 30 s, idle RSS 12 MiB\n" +
		"method  size           s to 1e-2  s to 1e-3    error at budget  error at end  seconds  peak MiB\n" +
		"a       4096 features  0.50       not reached  —                0.0012        12.3     7 (heap)\n" +
		"bb      2 x            3.0        25.6         0.5              0.25          1.0      100 (RSS)\n"
	if w.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", w.String(), want)
	}
}

// TestChildMetricsReadsUnlabelledSamples: a child's scrape keeps the
// unlabelled samples asked for and nothing else (not a labelled series
// of the same name, a comment or a sample not asked for).
func TestChildMetricsReadsUnlabelledSamples(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "# HELP a_total A.\n# TYPE a_total counter\na_total 42\n"+
			"b{x=\"1\"} 7\nb 3.5e+06\nc 1\nd NaN-ish\n")
	}))
	srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	defer srv.Close()
	c := &child{port: l.Addr().(*net.TCPAddr).Port}
	got, err := c.metrics(t.Context(), "a_total", "b", "d", "e")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["a_total"] != 42 || got["b"] != 3.5e6 {
		t.Errorf("scraped %v, want a_total 42 and b 3.5e6 only", got)
	}
	p, err := freeLoopbackPort()
	if err != nil {
		t.Fatal(err)
	}
	free, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
	if err != nil {
		t.Fatalf("the free port %d cannot be listened on: %v", p, err)
	}
	free.Close()
}

// TestPeakHeapSeesAnAllocation: the sampled peak heap of `bench compare`
// sees 64 MiB held for a few samples, and not much more.
func TestPeakHeapSeesAnAllocation(t *testing.T) {
	p := startPeakHeap()
	buf := make([]float64, 8<<20) // 64 MiB
	for i := range buf {
		buf[i] = float64(i)
	}
	time.Sleep(50 * time.Millisecond)
	peak := float64(p.stop()) / (1 << 20)
	if buf[len(buf)-1] == 0 || peak < 63 || peak > 80 {
		t.Errorf("peak %.1f MiB above the start with 64 MiB held", peak)
	}
}

// childEnv makes a child of this test binary play a part instead of
// running its test.
const childEnv = "BENCH_TEST_CHILD"

// TestChildCPUMatchesTheKernel: a child's CPU time read from
// /proc/<pid>/stat while it runs (here a child of this test binary that
// spins for 300 ms, then waits) is what the kernel reports for it once it
// has ended, within the clock tick.
func TestChildCPUMatchesTheKernel(t *testing.T) {
	if os.Getenv(childEnv) == "spin" {
		// 0.3 s of its own CPU, not of wall time: on a busy machine a
		// wall-clock spin got 0.08 s of CPU and the test failed.
		for selfCPU() < 0.3 {
		}
		fmt.Println("spun")
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}
	cmd, stdin, stdout := testkit.StartChild(t, childEnv+"=spin")
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "spun\n" {
		t.Fatalf("the child said %q (%v)", line, err)
	}
	got, err := (&child{cmd: cmd}).cpu()
	stdin.Close()
	if werr := cmd.Wait(); werr != nil || err != nil {
		t.Fatalf("cpu: %v; the child: %v", err, werr)
	}
	kernel := (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
	if got < 0.25 || math.Abs(got-kernel) > 0.03 {
		t.Errorf("cpu() read %.3f s while the child waited; the kernel reports %.3f s at its end (it spun 0.3 s of CPU)", got, kernel)
	}
}

// selfCPU is this process's user and system CPU time so far, in seconds.
func selfCPU() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return math.Inf(1)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// TestCompareIsolatedMeasuresEachChild: CompareIsolated runs the idle
// child and then one child per method (children of this test binary that
// hold as many MiB as their method's size, and print a result with their
// peak RSS, as RunCompare does), keeps the methods in order, and gives
// each its peak RSS above the idle child's: the MiB it held, whatever
// this process holds (the kernel's figure for a child counted this
// process's RSS at the fork: 400 MiB in a run of the package's tests, so
// every method read 0). A child that fails names its method.
func TestCompareIsolatedMeasuresEachChild(t *testing.T) {
	if os.Getenv(childEnv) == "compare" {
		args := flag.Args()
		i := slices.Index(args, "--methods")
		name, size, _ := strings.Cut(args[i+1], "=")
		if name == "fail" {
			os.Exit(3)
		}
		if name == "exact" { // the idle child: say how it was run
			_ = os.WriteFile(os.Getenv(childEnv+"_IDLE"), []byte(strings.Join(args, " ")), 0o600)
		}
		mib, _ := strconv.Atoi(size)
		held := make([]byte, mib<<20)
		for j := range held {
			held[j] = 1
		}
		b, _ := json.Marshal(CompareResult{Case: "toy", Methods: []CompareMethod{{Method: args[i+1], Size: int(held[len(held)-1])}}, PeakRSSMiB: processPeakRSS()})
		fmt.Printf("%s\n", b)
		os.Exit(0)
	}
	ballast := make([]byte, 160<<20) // this process larger than any child
	for i := range ballast {
		ballast[i] = 1
	}
	t.Setenv(childEnv, "compare")
	idleArgs := filepath.Join(t.TempDir(), "idle")
	t.Setenv(childEnv+"_IDLE", idleArgs)
	argv := []string{os.Args[0], "-test.run=^" + t.Name() + "$", "-test.count=1", "--", "--case", "toy"}
	res, err := CompareIsolated(t.Context(), argv, []string{"held=96", "held=32"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Case != "toy" || len(res.Methods) != 2 || res.IdleRSSMiB <= 0 {
		t.Fatalf("%+v: want the toy case, two methods and the idle child's RSS", res)
	}
	t.Logf("idle child %.1f MiB; methods %.1f and %.1f MiB above it", res.IdleRSSMiB, res.Methods[0].PeakMiB, res.Methods[1].PeakMiB)
	// The idle child runs the caller's flags, then a trivial method.
	if b, err := os.ReadFile(idleArgs); err != nil || string(b) != "--case toy --methods exact=1 --k 1 --points 1 --isolate=false --table=false" {
		t.Errorf("the idle child ran with %q (%v)", b, err)
	}
	for i, want := range []float64{96, 32} {
		m := res.Methods[i]
		if m.Method != fmt.Sprintf("held=%.0f", want) || m.PeakOf != "RSS above idle" || math.Abs(m.PeakMiB-want) > 8 {
			t.Errorf("method %d: %s at %.1f MiB (%s), want held=%.0f at about %.0f", i, m.Method, m.PeakMiB, m.PeakOf, want, want)
		}
	}
	if _, err := CompareIsolated(t.Context(), argv, []string{"held=1", "fail"}); err == nil || !strings.Contains(err.Error(), "method fail") {
		t.Errorf("a failing child: %v, want an error naming its method", err)
	}
	runtime.KeepAlive(ballast)
}
