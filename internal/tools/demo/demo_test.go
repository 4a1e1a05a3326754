package demo

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/streamkpca/streamkpca/internal/devstack"
	"github.com/streamkpca/streamkpca/pipeline"
	"github.com/streamkpca/streamkpca/snapshot"
)

// runDemo runs the demo with args and returns what it printed.
func runDemo(t *testing.T, args ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "out")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdout
	os.Stdout = f
	err = Run(context.Background(), args)
	os.Stdout = old
	f.Close()
	b, _ := os.ReadFile(p)
	if err != nil {
		t.Fatalf("demo %v: %v\n%s", args, err, b)
	}
	return string(b)
}

// Defect: a demo restarted with --dir produced its whole stream again on
// top of the first run's, and its first rate divided every restored
// sample by the seconds since the restart. Now the topic ends with
// exactly --points messages, the rest of the same sequence, and the rate
// counts this run's samples only.
func TestDemoResumesFromItsDirectory(t *testing.T) {
	dir := t.TempDir()
	runDemo(t, "--dir", dir, "--points", "3000", "--rate", "0", "--then-rate", "0", "--duration", "4s", "--http", "127.0.0.1:0")
	out := runDemo(t, "--dir", dir, "--points", "5000", "--rate", "0", "--then-rate", "0", "--duration", "4s", "--http", "127.0.0.1:0")
	if !strings.Contains(out, "the topic holds 3000 points of an earlier run") || !strings.Contains(out, "producing the remaining 2000") {
		t.Errorf("the restarted demo does not say it resumes:\n%s", out)
	}
	if !strings.Contains(out, "done: 5000 samples learned") {
		t.Errorf("the restarted demo did not end with exactly 5000 samples learned:\n%s", out)
	}
	// No progress line may claim more points per second than it learned
	// in this run: 5,000 less what the first run had learned (all 3,000
	// on an idle machine, fewer on a busy one), in 2 s or more.
	restored := 3000
	if m := regexp.MustCompile(`the model has learned (\d+)`).FindStringSubmatch(out); m != nil {
		restored, _ = strconv.Atoi(m[1])
	}
	for _, m := range regexp.MustCompile(`(\d+) pts/s`).FindAllStringSubmatch(out, -1) {
		if r, _ := strconv.Atoi(m[1]); r > (5000-restored)/2 {
			t.Errorf("a progress line says %d pts/s, more than the %d points this run learned in 2 s: it counts the restored samples\n%s", r, 5000-restored, out)
		}
	}
	st, err := devstack.Start(devstack.Options{Dir: dir, Topics: map[string]int32{"hermite": 4}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if n, err := st.Messages(context.Background(), "hermite"); err != nil || n != 5000 {
		t.Errorf("the topic holds %d messages (%v), want 5000", n, err)
	}
}

// Defect (issue 44): the demo's stream ended after --points (about 400 s
// at the defaults), after which a watcher or follower saw no new
// version. Now it goes on at --then-rate in whole batches until the demo
// stops: more than --points are learned, past the first stream's end.
func TestDemoStreamGoesOn(t *testing.T) {
	dir := t.TempDir()
	out := runDemo(t, "--dir", dir, "--points", "1000", "--rate", "0", "--then-rate", "400", "--duration", "10s", "--http", "127.0.0.1:0")
	if !strings.Contains(out, "400 a second from now on") {
		t.Errorf("the demo does not say its stream goes on:\n%s", out)
	}
	m := regexp.MustCompile(`done: (\d+) samples learned`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no final line:\n%s", out)
	}
	// A whole batch (512) at least after the first 1,000: the first burst
	// is sent at once, the next 1.28 s later.
	if n, _ := strconv.Atoi(m[1]); n < 1000+512 {
		t.Errorf("%d samples learned: the stream stopped after --points 1000\n%s", n, out)
	}
	if strings.Contains(out, "the stream has ended") {
		t.Errorf("the demo says its stream ended:\n%s", out)
	}
}

// TestDemoLearnsTheClosedForm: the demo's progress lines report the served
// model's subspace error against the hermite stream's closed-form
// eigenfunctions (synth); after 20,000 points (and a trickle, so that
// every tick prints a line) it is below 1e-2: 1.5e-4 on an idle machine.
func TestDemoLearnsTheClosedForm(t *testing.T) {
	out := runDemo(t, "--points", "20000", "--rate", "0", "--then-rate", "400", "--duration", "8s", "--http", "127.0.0.1:0",
		"--nats-port", "0", "--kafka-port", "0")
	var errs []float64
	for _, m := range regexp.MustCompile(`error (\d\.\d+e[-+]\d+)`).FindAllStringSubmatch(out, -1) {
		v, _ := strconv.ParseFloat(m[1], 64)
		errs = append(errs, v)
	}
	if len(errs) == 0 {
		t.Fatalf("no progress line with an error:\n%s", out)
	}
	t.Logf("error figures %v", errs)
	// At the stop the final version is persisted and published.
	if m := regexp.MustCompile(`version (\d+) persisted, version (\d+) published`).FindStringSubmatch(out); m == nil || m[1] != m[2] || m[1] == "0" {
		t.Errorf("final line %q: want one version, persisted and published", m)
	}
	if last := errs[len(errs)-1]; !(last < 1e-2) {
		t.Errorf("subspace error %v after 20,000 points (figures %v), want < 1e-2\n%s", last, errs, out)
	}
}

// TestTakenPorts: a port the user set that is taken stops the demo with
// an error naming the flag; a default that is taken gives way to a free
// port.
func TestTakenPorts(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	taken := ln.Addr().String()
	addr := taken
	if err := freeOr("http", &addr, "127.0.0.1:0", true); err == nil || !strings.Contains(err.Error(), "--http "+taken) {
		t.Errorf("explicit taken port: %v, want an error naming --http %s", err, taken)
	}
	if err := freeOr("http", &addr, "127.0.0.1:0", false); err != nil || addr != "127.0.0.1:0" {
		t.Errorf("default taken port: %v, address %s; want the fallback", err, addr)
	}
	if err := Run(context.Background(), []string{"--http", taken}); err == nil || !strings.Contains(err.Error(), "--http") {
		t.Errorf("demo --http %s (taken): %v", taken, err)
	}
	if err := Run(context.Background(), []string{"--points", "many"}); err == nil {
		t.Error("demo --points many: no error")
	}
	for addr, want := range map[string]int{"127.0.0.1:0": 0, "127.0.0.1:4222": 4222, "[::1]:9092": 9092, "nonsense": 0} {
		if got := port(addr); got != want {
			t.Errorf("port(%q) = %d, want %d", addr, got, want)
		}
	}
}

// stdoutOf returns what fn prints.
func stdoutOf(t *testing.T, fn func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdout
	os.Stdout = w
	fn()
	os.Stdout = old
	w.Close()
	b, _ := io.ReadAll(r)
	return string(b)
}

// TestFlagsAndLines: the defaults the README's commands rely on (ports
// 8080, 4222 and 9092, 2,000,000 points at 5,000/s then 50/s); the end
// of the stream said once, finally; a progress line's rate counts only
// this run's samples, and says when load is shed.
func TestFlagsAndLines(t *testing.T) {
	o, err := parseFlags([]string{"--points", "10"})
	if err != nil || o.httpAddr != "127.0.0.1:8080" || o.natsPort != 4222 || o.kafkaPort != 9092 || o.rate != 5000 ||
		o.thenRate != 50 || o.points != 10 || !o.set["points"] || o.set["rate"] {
		t.Fatalf("flags %+v, %v", o, err)
	}
	d := &demo{o: options{thenRate: 0}, first: 10, start: 1000}
	if out := stdoutOf(t, func() {
		if !d.producerDone(context.Background(), nil) {
			t.Error("the stream without --then-rate did not end")
		}
	}); out != "producer: all 10 points sent\n" {
		t.Errorf("end of the stream: %q", out)
	}
	d.trickling = true
	if out := stdoutOf(t, func() { d.producerDone(context.Background(), nil) }); out != "" {
		t.Errorf("the trickle's end printed %q", out)
	}
	s := pipeline.Status{Samples: 3000, Features: 512, Lag: 7, Version: 4, Published: 3, LearnedFraction: 0.5,
		Quality: &snapshot.Quality{Score: 0.75}, Eigenvalues: []float64{0.6, 0.2}}
	out := stdoutOf(t, func() { d.progressLine(s, 4, "1.00e-03") })
	for _, want := range []string{"samples      3000", "    500 pts/s", "lag       7", "version     4 (published     3)",
		"error 1.00e-03", "eig [0.600 0.200]", "held-out share 0.750", "learning 50% of the stream to keep up"} {
		if !strings.Contains(out, want) {
			t.Errorf("progress line %q lacks %q", out, want)
		}
	}
}
