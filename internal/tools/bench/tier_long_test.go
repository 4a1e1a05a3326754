//go:build long

package bench

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/streamkpca/streamkpca/cluster"
	"github.com/streamkpca/streamkpca/configs"
	"github.com/streamkpca/streamkpca/internal/mnist"
	"github.com/streamkpca/streamkpca/internal/synth"
	"github.com/streamkpca/streamkpca/online"
	"github.com/streamkpca/streamkpca/snapshot"
)

// The long tier's tests of the benchmark drivers: each runs a driver
// end to end on a small configuration (seconds to a minute) and checks
// its figures against what they must be.

// exchangeBytes is what one member of n receives per step from the
// others for parts of p bytes: a reduce-scatter brings n−1 slices of p/n
// to be reduced, then n−1 reduced slices; an all-gather n−1 whole parts.
func exchangeBytes(parts cluster.PartsExchange, n int, p float64) float64 {
	if parts == cluster.AllGatherParts {
		return float64(n-1) * p
	}
	return 2 * float64(n-1) / float64(n) * p
}

// TestClusterTrafficByHand: RunCluster's rows for groups of 1 to 4
// in memory and over NATS, both ways of summing the parts. A member
// hands each payload it sends to the exchange once, so it sends its
// part's P = 8·features·columns bytes a step whatever the group (k and
// the columns learned beyond it), and receives
// exchangeBytes; the few hundred bytes above them are the first round's
// statistics and the messages' headers (3% at most here). Every row has
// the start model's whole budget; the speedup is the rate over the lone
// learner's; neither part of a step exceeds the step.
func TestClusterTrafficByHand(t *testing.T) {
	const features, k = 1024, 2
	p := float64(8 * features * k) // k columns: none beyond k by default (online.Config.Oversample)
	for _, parts := range []cluster.PartsExchange{cluster.ReduceScatter, cluster.AllGatherParts} {
		for _, memory := range []bool{true, false} {
			rows, err := RunCluster(t.Context(), ClusterConfig{Dims: []int{8}, Members: []int{1, 2, 3, 4}, Features: features, K: k, Batch: 64, Steps: 4,
				Dir: t.TempDir(), Memory: memory, Parts: parts})
			if err != nil {
				t.Fatal(err)
			}
			if len(rows) != 5 || rows[0].Members != 0 || rows[0].Speedup != 1 {
				t.Fatalf("rows %+v: want the lone learner (speedup 1) and groups of 1, 2, 3, 4", rows)
			}
			for _, r := range rows[1:] {
				what := fmt.Sprintf("%s, memory %v, %d members", partsName(parts), memory, r.Members)
				recv := exchangeBytes(parts, r.Members, p)
				if r.Exchange != partsName(parts) || r.Features != features || r.PayloadBytes != int(p) {
					t.Errorf("%s: %s, %d features, parts of %d bytes; want %d features, %v bytes", what, r.Exchange, r.Features, r.PayloadBytes, features, p)
				}
				if r.SentBytes < p || r.SentBytes > 1.03*p || r.ReceivedBytes < recv || r.ReceivedBytes > 1.03*recv+1 {
					t.Errorf("%s: sent %v and received %v bytes a step, want %v and %v (+3%%)", what, r.SentBytes, r.ReceivedBytes, p, recv)
				}
				if s := r.PointsPerSec / rows[0].PointsPerSec; math.Abs(r.Speedup-s) > 1e-12*s {
					t.Errorf("%s: speedup %v, want %v", what, r.Speedup, s)
				}
				if !(r.ExchangeSec >= 0 && r.ExchangeSec <= r.StepSec && r.ComputeSec <= r.StepSec) {
					t.Errorf("%s: step %v s, exchange %v s, compute %v s: neither part can exceed the step", what, r.StepSec, r.ExchangeSec, r.ComputeSec)
				}
			}
		}
	}
}

// TestKeepUpBelowCapacity: RunKeepUp at 2,000 messages a second for 4 s
// (a tenth of what the service keeps up with): every message is produced
// and read, none is shed, and the model served after the graceful stop
// is close to the stream's closed-form eigenfunctions.
func TestKeepUpBelowCapacity(t *testing.T) {
	var seen []KeepUpPoint
	res, err := RunKeepUp(t.Context(), KeepUpConfig{Rate: 2000, Duration: 4 * time.Second, Partitions: 2, Every: time.Second, Dir: t.TempDir(),
		Progress: func(p KeepUpPoint) { seen = append(seen, p) }})
	if err != nil {
		t.Fatal(err)
	}
	last := res.Samples[len(res.Samples)-1]
	t.Logf("%d samples; last %+v; error at the end %v", len(res.Samples), last, res.Error)
	if !slices.Equal(seen, res.Samples) {
		t.Errorf("progress saw %d samples, the result holds %d", len(seen), len(res.Samples))
	}
	if last.Produced != 8000 || res.Shed != 0 || res.Stream != "hermite16" || res.Instances != 1 {
		t.Errorf("produced %d, shed %d on stream %s with %d instances; want 8,000, 0, hermite16, 1", last.Produced, res.Shed, res.Stream, res.Instances)
	}
	if res.LagAtEnd > 2000 || last.Lag != res.LagAtEnd {
		t.Errorf("lag at the end %d (last sample %d): more than a second of the stream", res.LagAtEnd, last.Lag)
	}
	if !(res.Error < 0.2) {
		t.Errorf("the served model's subspace error %v after 8,000 points, want < 0.2", res.Error)
	}
}

// TestKeepUpTwoInstances: two services in cluster mode share the stream
// at 2,000 messages a second: when the producer ends they are less than a
// second of it behind (or ahead: the second's joining moves partitions,
// and the group reads some messages again from its offsets) and have
// shed none. The group's model is not scored:
// its snapshots hold what the group confirmed when one was due, and 4 s
// is shorter than the cadence (every 50 batches or 30 s).
func TestKeepUpTwoInstances(t *testing.T) {
	res, err := RunKeepUp(t.Context(), KeepUpConfig{Rate: 2000, Duration: 4 * time.Second, Partitions: 2, Instances: 2, Every: time.Second, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	last := res.Samples[len(res.Samples)-1]
	t.Logf("last %+v", last)
	if res.Instances != 2 || last.Produced != 8000 || res.LagAtEnd > 2000 || res.Shed != 0 || last.Fraction != 1 || last.Learned == 0 {
		t.Errorf("%d instances: produced %d, consumed %d (lag %d), shed %d, learned %d (fraction %v); want 2, 8,000, under a second of the stream behind, 0, some (1)",
			res.Instances, last.Produced, last.Consumed, res.LagAtEnd, res.Shed, last.Learned, last.Fraction)
	}
}

// TestKeepUpImageStream: RunKeepUp on 784-pixel images (CSV) made of two
// latent factors: the served model is scored against exact kernel PCA of
// the images (imageStream's truth, independent of the learner), and
// after eight passes over 400 images it is close to it; the learner's
// frequencies are reported.
func TestKeepUpImageStream(t *testing.T) {
	train, test := latentImages(400, 3, twoFactors), latentImages(100, 4, twoFactors)
	res, err := RunKeepUp(t.Context(), KeepUpConfig{Rate: 800, Duration: 4 * time.Second, Partitions: 1, Every: time.Second, Dir: t.TempDir(),
		Images: train.X, Test: test.X, K: 2})
	if err != nil {
		t.Fatal(err)
	}
	last := res.Samples[len(res.Samples)-1]
	t.Logf("last %+v; error at the end %v; frequencies %s", last, res.Error, res.Frequencies)
	if res.Stream != "mnist" || last.Produced != 3200 || res.Shed != 0 || res.Frequencies == "" {
		t.Errorf("stream %s, produced %d, shed %d, frequencies %q; want mnist, 3,200, 0 and a name", res.Stream, last.Produced, res.Shed, res.Frequencies)
	}
	if !(res.Error < 0.1) {
		t.Errorf("subspace error %v against exact kernel PCA of the images, want < 0.1", res.Error)
	}
	if _, err := RunKeepUp(t.Context(), KeepUpConfig{Duration: time.Second, Dir: t.TempDir(), Images: train.X}); err == nil {
		t.Error("images without held-out images: no error")
	}
}

// TestDriftSwitchHermite: `bench drift --case switch` at T = 10,240 (16-D
// hermite turned by a random orthogonal Q at T). Against the closed form
// of the stream in force:
//   - before the switch every run is near it (error < 0.02);
//   - just after it the model that does not forget is far from it
//     (error > 0.3): its functions are the old distribution's;
//   - the learner restarted at the switch is, T points later, as close as
//     the first learner was after as many points (within 3×; the Gaussian
//     kernel and the frequencies' distribution are invariant to Q, so the
//     two runs are the same problem);
//   - the defaults find the change after T, and never before it.
//
// The learners step at θ₀ = 1: at kpca's default θ₀ = 4 a model of 20
// steps follows the turn by learning alone before the detector is armed
// (60 steps), and the test is of the detector; `bench drift --case
// switch` at T = 102,400 measures the defaults (docs/results.md).
func TestDriftSwitchHermite(t *testing.T) {
	const T = 10240
	res, err := RunDrift(t.Context(), DriftConfig{Case: "switch", Points: T, K: 3, Runs: []string{"forget-off", "restarted", "defaults"},
		Learner: online.Config{Theta0: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Case != "switch" || res.Points != T || len(res.Runs) != 3 {
		t.Fatalf("%s, %d points, %d runs", res.Case, res.Points, len(res.Runs))
	}
	runs := map[string]DriftRun{}
	for _, r := range res.Runs {
		runs[r.Name] = r
		after := r.Curve[20] // T + T/20
		t.Logf("%s: before %.4f, just after %.4f, +20%% %.4f, +100%% %.4f, detected at %v", r.Name, r.Before, after.Error, r.At20, r.At100, r.Detected)
		if len(r.Curve) != 40 || r.Curve[19].Points != T || !(r.Before < 0.02) {
			t.Errorf("%s: %d checkpoints, the 20th at %d, error %v before the switch; want 40, T, < 0.02", r.Name, len(r.Curve), r.Curve[19].Points, r.Before)
		}
	}
	if e := runs["forget-off"].Curve[20].Error; !(e > 0.3) {
		t.Errorf("forget-off just after the switch: error %v, want > 0.3 (the old functions)", e)
	}
	if r := runs["restarted"]; !(r.At100 < 3*r.Before) {
		t.Errorf("restarted: %v after T points of the new stream, %v after as many of the old", r.At100, r.Before)
	}
	det := runs["defaults"].Detected
	if len(det) == 0 || det[0] < T {
		t.Errorf("defaults: changes detected at %v, want one after %d and none before", det, T)
	}
}

// TestDriftStationaryHermite: on a stream that never changes no run
// detects a change or switches models, and the learner that keeps
// learning is closer to the closed form after 2T points than after T.
func TestDriftStationaryHermite(t *testing.T) {
	res, err := RunDrift(t.Context(), DriftConfig{Case: "stationary", Points: 10240, K: 3, Runs: []string{"defaults", "forget-off"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Runs {
		if len(r.Detected) != 0 || r.Switches != 0 || !(r.At100 < r.Before) {
			t.Errorf("%s: detected %v, %d switches, error %v after T and %v after 2T; want none, none, falling", r.Name, r.Detected, r.Switches, r.Before, r.At100)
		}
	}
}

// TestRunCompareMethodsAgainstTheClosedForm: every method of `bench
// compare` on the 1-D hermite stream (8,192 points, k = 3) lands near
// the closed-form eigenfunctions, each row says the size it was given,
// exact kernel PCA uses only its sample's first points, and each row's
// figures agree with its own curve: checkpoints from 2,048 points, the
// j-th at 2,048·10^(j/8) points or after, to the last point, the time to 1e-2 that of the first checkpoint
// at or under it, and (with a budget no run reaches) the error at the
// budget the last one's.
func TestRunCompareMethodsAgainstTheClosedForm(t *testing.T) {
	const points = 8192
	res, err := RunCompare(t.Context(), CompareConfig{Case: "hermite1", Points: points, Budget: time.Hour,
		Methods: []string{"dsgd=4096", "dsgd-landmarks=512", "rff=2048", "nystrom=256", "exact=800"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Case != "hermite1" || res.K != 3 || len(res.Methods) != 5 {
		t.Fatalf("case %s, k %d, %d methods; want hermite1, 3, 5", res.Case, res.K, len(res.Methods))
	}
	want := []struct {
		prefix, of string
		size       int
		bound      float64
	}{
		{"streamkpca (", "features (max)", 4096, 0.01},
		{"streamkpca, landmark blocks", "landmarks (max)", 512, 0.01},
		{"fixed random features", "features", 2048, 0.01},
		{"Nyström", "landmarks", 256, 0.01},
		{"exact kernel PCA", "points (sample)", 800, 0.01},
	}
	for i, m := range res.Methods {
		w := want[i]
		t.Logf("%s: %d %s, error %.2g at %d points", m.Method, m.Size, m.SizeOf, m.ErrorAtEnd, m.Points)
		if !strings.HasPrefix(m.Method, w.prefix) || m.SizeOf != w.of || m.Size != w.size || !(m.ErrorAtEnd < w.bound) {
			t.Errorf("method %d: %s, %d %s, error %v; want %s…, %d %s, error < %v", i, m.Method, m.Size, m.SizeOf, m.ErrorAtEnd, w.prefix, w.size, w.of, w.bound)
		}
		stop := points
		if i == 4 {
			stop = 800
			if m.Notes != "uses the first 800 points only" {
				t.Errorf("exact: notes %q", m.Notes)
			}
		}
		c := m.Curve
		if last := c[len(c)-1]; m.Points != stop || last.Points != stop || m.ErrorAtEnd != last.Error || m.ErrorAtBudget != last.Error || m.Seconds != last.Seconds {
			t.Errorf("%s: %d points, last checkpoint %+v, error at the end %v and at the budget %v", m.Method, m.Points, last, m.ErrorAtEnd, m.ErrorAtBudget)
		}
		to := -1.0
		for j, p := range c {
			if j > 0 && (p.Points <= c[j-1].Points || float64(p.Points) < 2048*math.Pow(10, float64(j)/8)-1 && p.Points != stop) {
				t.Errorf("%s: checkpoint %d at %d points after %d", m.Method, j, p.Points, c[j-1].Points)
			}
			if p.Error <= 1e-2 && to < 0 {
				to = p.Seconds
			}
		}
		if m.To1e2 != to || (stop == points && c[0].Points != 2048) {
			t.Errorf("%s: to 1e-2 in %v s, the curve says %v; first checkpoint at %d", m.Method, m.To1e2, to, c[0].Points)
		}
	}
}

// halvesImages returns n images of two kinds: classes 0–4 are two latent
// factors of one pair of patterns (twoFactors), classes 5–9 of the same
// patterns turned upside down: the same problem (the kernel sees only
// distances) in another plane of pixel space, so that the two halves of
// an MNIST drift case have different kernel eigenfunctions and are
// learned alike.
func halvesImages(n int, seed uint64) mnist.Set {
	first := latentImages(n, seed, twoFactors)
	second := latentImages(n, seed+1, func(r, c int, a, b float64) float64 { return twoFactors(27-r, c, a, b) })
	for i, lab := range first.Labels {
		if lab >= 5 {
			copy(first.X[i*mnist.Pixels:(i+1)*mnist.Pixels], second.X[i*mnist.Pixels:(i+1)*mnist.Pixels])
		}
	}
	return first
}

// TestDriftMNISTSwitch: `bench drift --case mnist` on images whose two
// halves of classes differ (halvesImages), T = 2,560, scored against
// exact kernel PCA of each half's training images: every run is near the
// first half's before the switch; the model that does not forget is far
// from the second half's 128 points after it (0.29 here, 0.0006 before),
// and the learner restarted at the switch is near it T points later.
func TestDriftMNISTSwitch(t *testing.T) {
	const T = 2560
	res, err := RunDrift(t.Context(), DriftConfig{Case: "mnist", MNIST: halvesImages(5200, 11), Points: T, K: 2, Batch: 128,
		Runs: []string{"forget-off", "restarted"}, Learner: online.Config{MaxFeatures: 1024, BlockSize: 128}})
	if err != nil {
		t.Fatal(err)
	}
	off, re := res.Runs[0], res.Runs[1]
	after := off.Curve[20]
	t.Logf("forget-off: before %.4f, just after (%d points) %.4f, +100%% %.4f; restarted +100%% %.4f", off.Before, after.Points, after.Error, off.At100, re.At100)
	if !(off.Before < 0.1) || !(re.Before < 0.1) {
		t.Errorf("before the switch: %v and %v, want < 0.1", off.Before, re.Before)
	}
	if !(after.Error > 0.1) {
		t.Errorf("forget-off 128 points after the switch: %v, want > 0.1 (still mostly the first half's functions)", after.Error)
	}
	if !(re.At100 < 0.05) {
		t.Errorf("restarted, T points after the switch: %v, want < 0.05", re.At100)
	}
	if _, err := RunDrift(t.Context(), DriftConfig{Case: "mnist", MNIST: halvesImages(3000, 1), Points: T}); err == nil || !strings.Contains(err.Error(), "need 2500") {
		t.Errorf("1,500 images a half: %v, want a refusal naming the 2,500 needed", err)
	}
}

// TestClusterProcessesByHand: `bench cluster --processes` with the
// streamkpca binary built from this tree: a lone process and a group of
// two. Every process's model has the whole budget at the end (read from
// its metrics: a challenger that replaced the start model with a smaller
// one after 18 steps made it 4,096 of 8,192 here, and the bytes a step a
// quarter under a part, before the benchmark turned learner.forget off).
// A member of two sends at least its part (P = 8·features·k bytes) to
// NATS a step and receives at least the other's halves of the
// reduce-scatter (P in all; 0.6% more in most runs: headers and the
// roster, and more when a rebalance sends the model to a member in the
// window; up to a step's worth more when a scrape falls mid-step). Before,
// each member's bytes were divided by the first member's steps, scraped a
// moment apart: 3.6% under a part in one run of five. The lone process
// exchanges nothing; the children's CPU time per row times rows a second
// is at most the cores.
func TestClusterProcessesByHand(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "streamkpca")
	build := exec.Command("go", "build", "-o", bin, "../../../cmd/streamkpca")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// Steps of tens of milliseconds: the harness reads the children's
	// metrics every 100 ms.
	const features, k = 8192, 4
	rows, err := RunCluster(t.Context(), ClusterConfig{Dims: []int{64}, Members: []int{1, 2}, Features: features, K: k, Batch: 512, Steps: 20,
		Dir: t.TempDir(), Processes: true, Binary: bin})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].Members != 1 || rows[1].Members != 2 {
		t.Fatalf("rows %+v, want groups of 1 and 2", rows)
	}
	p := float64(8 * features * k) // k columns: none beyond k by default (online.Config.Oversample)
	for _, r := range rows {
		t.Logf("%d processes: %.0f rows/s, sent %.0f and received %.0f bytes a step, %.1f µs CPU a row", r.Members, r.PointsPerSec, r.SentBytes, r.ReceivedBytes, r.CPUMicros)
		if r.Features != features || r.PayloadBytes != int(p) || !(r.PointsPerSec > 0) || !(r.StepSec > 0) {
			t.Errorf("%d processes: %+v", r.Members, r)
		}
		if used := r.PointsPerSec * r.CPUMicros / 1e6; !(used > 0) || used > 1.2*float64(runtime.NumCPU()) {
			t.Errorf("%d processes: %v cores busy on %d", r.Members, used, runtime.NumCPU())
		}
	}
	if one := rows[0]; one.ReceivedBytes > p/2 {
		t.Errorf("a lone process received %v bytes a step from NATS, want well under a part (%v)", one.ReceivedBytes, p)
	}
	// A scrape can fall between a step's count and its last message: one
	// step of 20, 5% (under load a member read 1.7% under a part received).
	if two, recv := rows[1], exchangeBytes(cluster.ReduceScatter, 2, p); two.SentBytes < 0.95*p || two.ReceivedBytes < 0.95*recv {
		t.Errorf("a member of two sent %v and received %v bytes a step, want at least 95%% of %v and %v", two.SentBytes, two.ReceivedBytes, p, recv)
	}
}

// TestRunPipelineOverKafka: RunPipeline's Kafka path (messages produced
// into the embedded broker, the service reading them): the service and
// the learner alone learn every point (2,048, in 8 steps for the learner),
// in both message formats.
func TestRunPipelineOverKafka(t *testing.T) {
	for _, format := range []string{"json", "f64le"} {
		rows, err := RunPipeline(t.Context(), PipelineConfig{Dims: []int{4}, Points: 2048, Batch: 256, MaxFeatures: 2048, Runs: 1, Format: format, Dir: t.TempDir()})
		if err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		r := rows[0]
		t.Logf("%s: learner %.0f points/s, service %.0f in %d steps, start %.2f s", format, r.LearnerPointsPerSec, r.ServicePointsPerSec, r.ServiceSteps, r.StartSeconds)
		if len(rows) != 1 || r.Points != 2048 || r.LearnerSteps != 8 || r.ServiceSteps < 8 || !(r.ServicePointsPerSec > 0) || !(r.StartSeconds > 0) {
			t.Errorf("%s: %+v; want 2,048 points, the learner in 8 steps, the service in 8 or more", format, r)
		}
	}
}

// TestRunPublishEmbedded: `bench publish` with its own embedded server:
// the version fetched back is the size published, and the publish holds
// at least the version (the ratio counts the embedded server's buffers
// too, so only its floor is a fact here; the child-process test bounds
// the ceiling).
func TestRunPublishEmbedded(t *testing.T) {
	const size = 16 << 20
	res, err := RunPublish(t.Context(), PublishConfig{Size: size, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("publish %.2f s at %.2f×, fetch %.2f s at %.2f×", res.PublishSeconds, res.PublishPeakRatio, res.GetSeconds, res.GetPeakRatio)
	if res.Size != size || !res.Embedded || res.PublishPeakRatio < 1 || !(res.GetSeconds > 0) || res.GetPeak == 0 {
		t.Errorf("%+v: want %d bytes through an embedded server, published at 1× or more, fetched", res, size)
	}
}

// TestDriftMNISTStationaryAndRamp: on images of one kind throughout
// (mnist-stationary: both halves hold every class) no run detects a
// change and every run stays near exact kernel PCA; on the ramp between
// the two kinds of halvesImages the model that follows (the defaults)
// ends near the second half's exact kernel PCA.
func TestDriftMNISTStationaryAndRamp(t *testing.T) {
	const T = 2560
	set := halvesImages(5200, 11)
	lc := online.Config{MaxFeatures: 1024, BlockSize: 128}
	still, err := RunDrift(t.Context(), DriftConfig{Case: "mnist-stationary", MNIST: set, Points: T, K: 2, Batch: 128, Runs: []string{"defaults"}, Learner: lc})
	if err != nil {
		t.Fatal(err)
	}
	if r := still.Runs[0]; len(r.Detected) != 0 || r.Switches != 0 || !(r.At100 < 0.1) {
		t.Errorf("mnist-stationary: detected %v, %d switches, error %v at the end; want none, none, < 0.1", r.Detected, r.Switches, r.At100)
	}
	ramp, err := RunDrift(t.Context(), DriftConfig{Case: "mnist-ramp", MNIST: set, Points: T, K: 2, Batch: 128, Runs: []string{"defaults"}, Learner: lc})
	if err != nil {
		t.Fatal(err)
	}
	r := ramp.Runs[0]
	t.Logf("mnist-ramp: before %.4f, +20%% %.4f, +100%% %.4f; %d switches", r.Before, r.At20, r.At100, r.Switches)
	if len(r.Curve) != 60 || r.Curve[59].Points != 3*T || !(r.Before < 0.1) || !(r.At100 < 0.1) {
		t.Errorf("mnist-ramp: %d checkpoints to %d points, error %v before and %v at the end; want 60 to %d, < 0.1 both", len(r.Curve), r.Curve[len(r.Curve)-1].Points, r.Before, r.At100, 3*T)
	}
}

// TestMNISTDriftHalves: the mnist case's stream draws classes 0–4 before
// T and 5–9 from T on (at once; mnist-stationary: either half holds
// every class), and scores against the half in force: exact kernel PCA
// of that half's training images, which its own exact eigenfunctions
// match (error 0) and the other half's do not.
func TestMNISTDriftHalves(t *testing.T) {
	const T = 1000
	set := halvesLabelled(5200)
	s, err := newMNISTDrift(DriftConfig{Case: "mnist", MNIST: set, Points: T, K: 2, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	const d = mnist.Pixels
	x := make([]float64, 64*d)
	for _, c := range []struct{ n, half int }{{0, 0}, {T - 1, 0}, {T, 1}, {5 * T, 1}} {
		s.sample(x, 64, c.n)
		for r := range 64 {
			if got := kindOf(x[r*d : (r+1)*d]); got != c.half {
				t.Fatalf("at %d: row %d is of half %d, want %d", c.n, r, got, c.half)
			}
		}
		if s.half(c.n) != c.half {
			t.Errorf("at %d: the truth of half %d in force", c.n, s.half(c.n))
		}
	}
	// The truth of a half scored by itself: 0.
	for h := range 2 {
		exact := func(dst, _ []float64, _ int) { copy(dst, s.truth[h].RawMatrix().Data) }
		e0, e1 := s.score(exact, 0), s.score(exact, T)
		if h == 0 && (e0 > 1e-9 || e1 < 0.1) || h == 1 && (e1 > 1e-9 || e0 < 0.1) {
			t.Errorf("half %d's truth scores %v before T and %v after", h, e0, e1)
		}
	}
	still, err := newMNISTDrift(DriftConfig{Case: "mnist-stationary", MNIST: set, Points: T, K: 2, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[int]int{}
	still.sample(x, 64, T)
	for r := range 64 {
		kinds[kindOf(x[r*d:(r+1)*d])]++
	}
	if kinds[0] == 0 || kinds[1] == 0 {
		t.Errorf("mnist-stationary after T: kinds %v, want both", kinds)
	}
}

// halvesLabelled is n images whose class says their kind: a constant
// pixel 0 of 0 (classes 0–4) or 1 (5–9) marks them, the rest noise.
func halvesLabelled(n int) mnist.Set {
	rng := rand.New(rand.NewPCG(2, 3))
	set := mnist.Set{X: make([]float64, n*mnist.Pixels), Labels: make([]int, n)}
	for i := range n {
		set.Labels[i] = i % 10
		img := set.X[i*mnist.Pixels : (i+1)*mnist.Pixels]
		for p := range img {
			img[p] = rng.NormFloat64()
		}
		img[0] = 0
		if i%10 >= 5 {
			img[0] = 1
		}
		for p := 1; p < 40; p++ { // a few pixels that set the halves apart
			img[p] += 4 * img[0]
		}
	}
	return set
}

func kindOf(img []float64) int {
	if img[0] == 1 {
		return 1
	}
	return 0
}

// TestRunMNISTWithRandomFeatures: with fixed random features asked for,
// RunMNIST scores a third method, fixed random features + PCA, against
// the same exact kernel PCA; with 4,096 features on the two-factor
// images it is close to it.
func TestRunMNISTWithRandomFeatures(t *testing.T) {
	res, err := RunMNIST(t.Context(), latentImages(700, 1, twoFactors), MNISTConfig{
		MNISTRun: MNISTRun{Train: 512, Test: 128, K: 3, Epochs: 2, Batch: 128, Landmarks: 128, RFFFeatures: 4096},
		Learner:  online.Config{K: 3, MaxFeatures: 1024, BlockSize: 128},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Methods) != 3 {
		t.Fatalf("%d methods, want the learner, Nyström and random features", len(res.Methods))
	}
	rf := res.Methods[2]
	t.Logf("%s: %d %s, error %.3g", rf.Method, rf.Size, rf.SizeOf, rf.Error)
	if rf.Size != 4096 || !(rf.Error < 0.05) {
		t.Errorf("%s: %d %s, error %v; want 4,096 and below 0.05", rf.Method, rf.Size, rf.SizeOf, rf.Error)
	}
}

// TestDriversReportProgress: each driver's Progress sees what its
// result holds, once each: RunCompare every checkpoint of every method,
// RunDrift every checkpoint of every run, RunCluster every row.
func TestDriversReportProgress(t *testing.T) {
	var cps int
	cres, err := RunCompare(t.Context(), CompareConfig{Case: "hermite1", Points: 4096, Methods: []string{"rff=256", "nystrom=64"},
		Progress: func(points, stop int, _, _ float64) {
			if points > stop || stop != 4096 {
				t.Errorf("compare: progress at %d of %d", points, stop)
			}
			cps++
		}})
	if err != nil {
		t.Fatal(err)
	}
	if want := len(cres.Methods[0].Curve) + len(cres.Methods[1].Curve); cps != want {
		t.Errorf("compare: %d progress calls for %d checkpoints", cps, want)
	}
	runs := map[string]int{}
	dres, err := RunDrift(t.Context(), DriftConfig{Case: "stationary", Points: 1280, K: 2, Batch: 64, Runs: []string{"forget-off", "restarted"},
		Learner: online.Config{MaxFeatures: 256, BlockSize: 64},
		Progress: func(run string, _ DriftPoint, total int) {
			if total != 2560 {
				t.Errorf("drift: total %d, want 2T", total)
			}
			runs[run]++
		}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range dres.Runs {
		if runs[r.Name] != len(r.Curve) || len(r.Curve) != 40 {
			t.Errorf("drift %s: %d progress calls, %d checkpoints; want 40 each", r.Name, runs[r.Name], len(r.Curve))
		}
	}
	var rows int
	clu, err := RunCluster(t.Context(), ClusterConfig{Dims: []int{4}, Members: []int{2}, Features: 512, K: 2, Batch: 32, Steps: 2, Dir: t.TempDir(), Memory: true,
		Progress: func(ClusterRow) { rows++ }})
	if err != nil {
		t.Fatal(err)
	}
	if rows != len(clu) || rows != 2 {
		t.Errorf("cluster: %d progress calls for %d rows, want 2", rows, len(clu))
	}
}

// TestRunMNISTCCAWithRandomFeatures: with fixed random features asked
// for, RunMNISTCCA scores kernel CCA on them too; on halves related only
// through even functions they find the relation (S₂ above 1.5 of at most
// 2) where linear CCA does not.
func TestRunMNISTCCAWithRandomFeatures(t *testing.T) {
	res := runEvenHalves(t, MNISTRun{Train: 512, Test: 256, K: 2, Epochs: 2, Batch: 128, RFFFeatures: 1024})
	found := false
	for _, m := range res.Methods {
		t.Logf("%s (%d %s): S_2 %.3f", m.Method, m.Size, m.SizeOf, m.SumK)
		if m.Size == 1024 && strings.HasPrefix(m.Method, "random Fourier features") {
			found = true
			if !(m.SumK > 1.5) {
				t.Errorf("%s: S_2 %v, want above 1.5", m.Method, m.SumK)
			}
		}
	}
	if !found {
		t.Errorf("no random-features row among %d methods", len(res.Methods))
	}
}

// TestDriftKCCAStationary: kcca on pairs whose relation never changes
// (kcca-stationary: both halves of the stream hold every class): no run
// detects a change or switches models, and the relation is learned
// (S_2 above 1.5 at the end).
func TestDriftKCCAStationary(t *testing.T) {
	res, err := RunDrift(t.Context(), DriftConfig{Case: "kcca-stationary", MNIST: mirroredOrNegated(9000), Points: 2560, K: 2, Batch: 256,
		Runs: []string{"defaults"}, Learner: online.Config{MaxFeatures: 256, BlockSize: 128}})
	if err != nil {
		t.Fatal(err)
	}
	r := res.Runs[0]
	t.Logf("S_2 before %.3f, at the end %.3f; detected %v, %d switches", r.SumKBefore, r.SumKAt100, r.Detected, r.Switches)
	if len(r.Detected) != 0 || r.Switches != 0 || !(r.SumKAt100 > 1.5) {
		t.Errorf("detected %v, %d switches, S_2 %v at the end; want none, none, above 1.5", r.Detected, r.Switches, r.SumKAt100)
	}
}

// TestRunPipelineMedianOfRuns: three runs at one d give one row holding
// every run's overhead, its own the median of them.
func TestRunPipelineMedianOfRuns(t *testing.T) {
	rows, err := RunPipeline(t.Context(), PipelineConfig{Dims: []int{4}, Points: 1024, Batch: 256, MaxFeatures: 1024, Runs: 3, Memory: true, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || len(rows[0].Overheads) != 3 {
		t.Fatalf("%d rows, overheads %v; want one row of three runs", len(rows), rows)
	}
	o := slices.Clone(rows[0].Overheads)
	slices.Sort(o)
	if rows[0].Overhead != o[1] {
		t.Errorf("overhead %v, want the median of %v", rows[0].Overhead, rows[0].Overheads)
	}
}

// TestKeepUpFixedBudget: with learner.budget fixed and load shedding
// off the served model never grows past max_features (the service's
// default, 32,768: more than 8,000 points need), learns every message
// but the few left in the last partial batch, and the result names the
// settings it ran with.
func TestKeepUpFixedBudget(t *testing.T) {
	res, err := RunKeepUp(t.Context(), KeepUpConfig{Rate: 2000, Duration: 4 * time.Second, Partitions: 2, Every: time.Second, Dir: t.TempDir(),
		Budget: "fixed", LoadShedding: "off"})
	if err != nil {
		t.Fatal(err)
	}
	last := res.Samples[len(res.Samples)-1]
	if res.Budget != "fixed" || res.LoadShedding != "off" || last.Budget != online.DefaultMaxFeatures || last.Features > last.Budget || res.Shed != 0 {
		t.Errorf("budget %s, shedding %s; last sample %+v, shed %d", res.Budget, res.LoadShedding, last, res.Shed)
	}
	if !(res.Error < 0.2) {
		t.Errorf("subspace error %v at the end", res.Error)
	}
}

// TestRunCompareGrowsTheDefaultBudget: the learner at its defaults (no
// size, no --dsgd-features) starts from the case's budget and may grow
// it within the time budget (online.Growth): its row says so and gives
// the budget reached, at least the case's; a size given keeps it fixed.
func TestRunCompareGrowsTheDefaultBudget(t *testing.T) {
	res, err := RunCompare(t.Context(), CompareConfig{Case: "hermite1", Points: 4096, Budget: time.Minute, Methods: []string{"dsgd", "dsgd=2048"}})
	if err != nil {
		t.Fatal(err)
	}
	grown, fixed := res.Methods[0], res.Methods[1]
	if grown.Size < 65536 || grown.SizeOf != "features (grown from 65536 within the 1m0s budget)" {
		t.Errorf("defaults: %d %s, want the case's 65,536 or more, grown within the budget", grown.Size, grown.SizeOf)
	}
	if fixed.Size != 2048 || fixed.SizeOf != "features (max)" {
		t.Errorf("dsgd=2048: %d %s", fixed.Size, fixed.SizeOf)
	}
}

// TestRunHermite16: the 16-D hermite stream (the shared data's product
// form, k = 5 here) is learned to near its closed form in 30,000 points,
// and the result names the stream it ran.
func TestRunHermite16(t *testing.T) {
	res, err := RunHermite(t.Context(), HermiteConfig{Dims: 16, Points: 30_000, K: 5})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("error %.3g after %d points, %d features", res.SubspaceError, res.Points, res.Features)
	if res.Dims != 16 || res.K != 5 || res.Points != 30_000 || !(res.SubspaceError < 0.02) {
		t.Errorf("dims %d, k %d, %d points, error %v; want 16, 5, 30,000, below 0.02", res.Dims, res.K, res.Points, res.SubspaceError)
	}
}

// TestRunHermiteOtherLearners: GHA, and KPCA with the oja and covariance
// solvers, learn the 1-D hermite stream's closed form too, and the
// result names the algorithm and solver that ran.
func TestRunHermiteOtherLearners(t *testing.T) {
	for _, lc := range []online.Config{
		{Algorithm: online.AlgGHA},
		{Solver: online.SolverOja},
		{Solver: online.SolverCovariance, MaxFeatures: 1024},
	} {
		res, err := RunHermite(t.Context(), HermiteConfig{Points: 20_000, Learner: lc})
		if err != nil {
			t.Fatalf("%+v: %v", lc, err)
		}
		t.Logf("%s/%s: error %.3g", res.Algorithm, res.Solver, res.SubspaceError)
		if lc.Algorithm != "" && res.Algorithm != string(lc.Algorithm) || lc.Solver != "" && res.Solver != string(lc.Solver) {
			t.Errorf("ran %s/%s, asked for %+v", res.Algorithm, res.Solver, lc)
		}
		if !(res.SubspaceError < 0.01) {
			t.Errorf("%s/%s: subspace error %v after 20,000 points, want below 0.01", res.Algorithm, res.Solver, res.SubspaceError)
		}
	}
}

// TestRunFitFileCentred: with Learner.Center both fit and the exact
// solver it is scored against are centred, and fit lands on it (scored
// against the uncentred solver, whose first function is the near-constant
// one a centred model leaves out, it would not).
func TestRunFitFileCentred(t *testing.T) {
	const rows = 900
	h := synth.Hermite16()
	x := make([]float64, rows*h.Dim())
	h.Sample(x, rand.New(rand.NewPCG(4, 4)))
	res, err := RunFitFile(t.Context(), x, rows, h.Dim(), FitFileConfig{Learner: online.Config{K: 3, Seed: 1, Center: true}})
	if err != nil {
		t.Fatal(err)
	}
	if m := res.Methods[0]; !(m.Error < 1e-3) {
		t.Errorf("centred fit against exact centred kernel PCA: subspace error %v, want < 1e-3", m.Error)
	}
}

// TestKeepUpFileStream: RunKeepUp on a data set's rows (the case file of
// bench drift, through the service): with one partition, a long linger,
// a fixed budget and no load shedding every run learns the same full
// batches, so on this stationary stream following (no switch) serves the
// model forgetting off serves, bit for bit; every message is learned,
// and the model is close to exact kernel PCA of the rows (fileDrift's
// truth, independent of the learner).
func TestKeepUpFileStream(t *testing.T) {
	const rows, d = 512, 16
	x := hermite16Rows(rows)
	var errs [2]float64
	for i, forget := range []string{"off", "follow"} {
		res, err := RunKeepUp(t.Context(), KeepUpConfig{Rate: 4000, Duration: 2 * time.Second, Partitions: 1, Every: time.Second, Dir: t.TempDir(),
			Rows: x, Dim: d, K: 3, Seed: 2, Forget: forget, Linger: time.Hour, Budget: "fixed", LoadShedding: "off", Replay: -1})
		if err != nil {
			t.Fatal(err)
		}
		last := res.Samples[len(res.Samples)-1]
		t.Logf("forget %s: last %+v; error %v, switches %d, restarts %d", forget, last, res.Error, res.Switches, res.Restarts)
		if res.Stream != "file" || last.Produced != 7680 || res.Shed != 0 || res.Switches != 0 || res.Seed != 2 || res.Forget != forget {
			t.Errorf("forget %s: stream %s, produced %d, shed %d, switches %d, seed %d; want file, 7,680 (whole batches of 8,000), 0, 0, 2",
				forget, res.Stream, last.Produced, res.Shed, res.Switches, res.Seed)
		}
		if !(res.Error < 0.05) {
			t.Errorf("forget %s: subspace error %v against exact kernel PCA of the rows, want < 0.05", forget, res.Error)
		}
		errs[i] = res.Error
	}
	if errs[0] != errs[1] {
		t.Errorf("errors %v (off) and %v (follow, no switch): want the same model", errs[0], errs[1])
	}
}

// TestReplayReachesTheFloorOfItsFeatures: a stream too short for the
// learner's decaying step (15 batches of a 16-D set, through the
// service) ends well above the floor of its own features; with the time
// the stream leaves spent on revisits (learner.replay: 3) the served
// model comes within 2× of that floor and nearer by a fifth at least
// (bench.RunFloor: exact PCA of the model's own features on the rows, an
// independent solver). Both runs learn every message; the revisits are
// counted apart.
func TestReplayReachesTheFloorOfItsFeatures(t *testing.T) {
	const rows, d = 512, 16
	x := hermite16Rows(rows)
	var gaps [2]float64
	for i, replay := range []float64{-1, 3} {
		model := filepath.Join(t.TempDir(), "m.skpca")
		res, err := RunKeepUp(t.Context(), KeepUpConfig{Rate: 4000, Duration: 2 * time.Second, Partitions: 1, Every: time.Second, Dir: t.TempDir(),
			Rows: x, Dim: d, K: 3, Seed: 2, Forget: "off", Linger: time.Hour, Budget: "fixed", LoadShedding: "off", Replay: replay, SaveModel: model})
		if err != nil {
			t.Fatal(err)
		}
		snap, _, err := snapshot.Load(model)
		if err != nil {
			t.Fatal(err)
		}
		m, err := snapshot.NewModel(snap.Served(), snapshot.ModelOptions{CacheBytes: -1})
		if err != nil {
			t.Fatal(err)
		}
		fl, err := RunFloor(m, x, rows, 0)
		if err != nil {
			t.Fatal(err)
		}
		last := res.Samples[len(res.Samples)-1]
		t.Logf("replay %v: learned %d, revisited %d, features %d; model %.3g, floor %.3g, gap %.2f", replay, last.Learned, res.Revisited, fl.Features, fl.ModelError, fl.FloorError, fl.LearnerGap)
		if last.Learned != 7680 || res.Shed != 0 {
			t.Errorf("replay %v: learned %d, shed %d; want 7,680 and none", replay, last.Learned, res.Shed)
		}
		want := uint64(0)
		if replay > 0 {
			want = 3 * 7680
		}
		if res.Revisited > want {
			t.Errorf("replay %v: %d rows revisited, more than %d", replay, res.Revisited, want)
		}
		gaps[i] = fl.LearnerGap
	}
	// Measured: 2.17 without; with, 1.52–1.55 in three runs of the
	// window's sweeps (1.34–1.35 with the draws with replacement before
	// them, which were 2× worse on MNIST: online.Window).
	if !(gaps[1] <= 2) || !(gaps[1] < 0.8*gaps[0]) {
		t.Errorf("model ÷ the floor of its features: %.2f without replay, %.2f with; want ≤ 2 with, and under 4/5 of without", gaps[0], gaps[1])
	}
}

// hermite16Rows is a fixed sample of rows points of the 16-D hermite
// stream: the file streams of the keep-up tests.
func hermite16Rows(rows int) []float64 {
	h := synth.Hermite16()
	x := make([]float64, rows*h.Dim())
	h.Sample(x, rand.New(rand.NewPCG(7, 7)))
	return x
}

// TestKeepUpRamp: RunKeepUp with Ramp streams bench drift's mnist-ramp
// through the service: before T only classes 0–4, from 2T only 5–9
// (also from RampFrom = 2T, the restarted reference's stream), every
// point learned or shed before the stop, and the +20% figure taken at
// 2.2T or later.
func TestKeepUpRamp(t *testing.T) {
	const T = 512
	set := halvesLabelled(5200)
	c := configs.Config{}
	r, err := rampStream(&c, KeepUpConfig{Ramp: T, MNIST: set, K: 2})
	if err != nil {
		t.Fatal(err)
	}
	kind := func(msg []byte) int {
		if strings.HasPrefix(string(msg), "1,") {
			return 1
		}
		return 0
	}
	for i := range 3 * T {
		if k := kind(r.source(i)); i < T && k != 0 || i >= 2*T && k != 1 {
			t.Fatalf("message %d is of half %d", i, k)
		}
	}
	if c.Kafka.Format != "csv" || c.Kafka.Dim != mnist.Pixels || c.Learner.K != 2 {
		t.Errorf("service settings %s, dim %d, k %d", c.Kafka.Format, c.Kafka.Dim, c.Learner.K)
	}
	for _, from := range []int{0, 2 * T} {
		res, err := RunKeepUp(t.Context(), KeepUpConfig{Rate: 4000, Partitions: 1, Every: 100 * time.Millisecond, Dir: t.TempDir(),
			Ramp: T, RampFrom: from, MNIST: set, K: 2})
		if err != nil {
			t.Fatal(err)
		}
		last := res.Samples[len(res.Samples)-1]
		if res.Stream != "mnist-ramp" || res.Ramp != T || last.Learned+res.Shed != uint64(3*T-from) {
			t.Errorf("from %d: stream %s, ramp %d, %d learned and %d shed of %d", from, res.Stream, res.Ramp, last.Learned, res.Shed, 3*T-from)
		}
		if res.RampAt20At < 22*T/10 || res.RampAt100 < 0 || res.RampAt100 > 1 || res.RampAt20 < 0 || res.RampAt20 > 1 {
			t.Errorf("from %d: +20%% %v at %d, +100%% %v", from, res.RampAt20, res.RampAt20At, res.RampAt100)
		}
	}
}
