package bench

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/streamkpca/streamkpca/internal/blasimpl"
	"github.com/streamkpca/streamkpca/internal/devstack"
	"github.com/streamkpca/streamkpca/internal/mnist"
	"github.com/streamkpca/streamkpca/online"
	"gonum.org/v1/gonum/mat"
)

// TestGEMMCeilingAndBLASLabel: the GEMM ceiling of a step is a time in
// both precisions, and this build's BLAS is named (gonum's, with no
// kernel family, unless built with -tags openblas).
func TestGEMMCeilingAndBLASLabel(t *testing.T) {
	for _, f32 := range []bool{false, true} {
		if s := gemmCeiling(8, 64, 2, 16, 3, f32); !(s > 0) || s > 1 {
			t.Errorf("float32 %v: %v s for a 16×8·8×64 product", f32, s)
		}
	}
	want := blasimpl.Name
	if c := blasimpl.CoreName(); c != "" {
		want += " (" + c + ")"
	}
	if BLASLabel() != want {
		t.Errorf("BLAS %q, want %q", BLASLabel(), want)
	}
}

// TestModelClusterSkipsMeasuredGroups: only the lone learner's rows with
// a measured step are bases; group sizes double up to upTo; a group of
// one costs the base step (efficiency 1).
func TestModelClusterSkipsMeasuredGroups(t *testing.T) {
	rows := []ClusterRow{
		{D: 8, Members: 0, Features: 100, K: 1, Batch: 10, StepSec: 0}, // not measured
		{D: 16, Members: 2, Features: 100, K: 1, Batch: 10, StepSec: 1},
		{D: 32, Members: 0, Features: 100, K: 1, Batch: 10, StepSec: 0.5},
	}
	got := ModelCluster(rows, 5, 1e9, 0)
	if len(got) != 6 {
		t.Fatalf("%d rows, want sizes 1, 2, 4 of d = 32 for 2 exchanges: %+v", len(got), got)
	}
	for _, r := range got {
		if r.D != 32 || r.Instances > 4 {
			t.Errorf("%+v: want d = 32 and at most 4 instances", r)
		}
		if r.Instances == 1 && (r.StepSec != 0.5 || r.Efficiency != 1 || r.PointsPerSec != 20) {
			t.Errorf("one instance: %+v, want the base step, efficiency 1, 20 points/s", r)
		}
	}
}

// TestServiceConfigByHand: the configuration of a service of `bench
// cluster --service` is a valid one that reads the topic and group of its
// d and group size, f64le rows of d values, in cluster mode for a group,
// with neither load shedding nor a challenger, a block no larger than
// the budget, and its own snapshot directory.
func TestServiceConfigByHand(t *testing.T) {
	stack, err := devstack.Start(devstack.Options{Dir: t.TempDir(), Topics: map[string]int32{"bench-d8-n2": 2}})
	if err != nil {
		t.Fatal(err)
	}
	defer stack.Close()
	cfg := ClusterConfig{Features: 256, K: 3, Batch: 64, Workers: 1, Dir: t.TempDir()}
	a, b, lone := serviceConfig(stack, cfg, 8, 2, 0), serviceConfig(stack, cfg, 8, 2, 1), serviceConfig(stack, cfg, 8, 0, 0)
	for _, c := range []struct {
		name string
		err  error
	}{{"member 0", a.Validate()}, {"member 1", b.Validate()}, {"lone", lone.Validate()}} {
		if c.err != nil {
			t.Errorf("%s: %v", c.name, c.err)
		}
	}
	if a.Kafka.Topic != "bench-d8-n2" || a.Kafka.Group != a.Kafka.Topic || a.Kafka.Format != "f64le" || a.Kafka.Dim != 8 || !a.Cluster.Enabled || lone.Cluster.Enabled {
		t.Errorf("member 0: topic %s, group %s, %s of %d, cluster %v (lone: %v)", a.Kafka.Topic, a.Kafka.Group, a.Kafka.Format, a.Kafka.Dim, a.Cluster.Enabled, lone.Cluster.Enabled)
	}
	if a.Learner.Forget != "off" || a.Learner.LoadShedding != "off" || a.Learner.Block > 256 || a.Learner.K != 3 || a.Learner.Bandwidth != 8 {
		t.Errorf("learner %+v: want forget and load shedding off, a block ≤ 256, k 3, bandwidth d", a.Learner)
	}
	if a.Snapshot.Dir == b.Snapshot.Dir || a.Snapshot.Dir == lone.Snapshot.Dir {
		t.Errorf("snapshot dirs %s, %s, %s: want one each", a.Snapshot.Dir, b.Snapshot.Dir, lone.Snapshot.Dir)
	}
}

// TestClusterBaselineRow: the lone learner's row starts from the model
// it is given (its whole budget), has speedup 1 and no exchange (its
// compute is its step), and CPU per point times points a second is at
// most the cores.
func TestClusterBaselineRow(t *testing.T) {
	lc := online.Config{Model: "bench", K: 2, BlockSize: 128, MaxFeatures: 512, Kernel: gaussian(4), Forget: online.ForgetOff}
	start, err := fullBudget(lc, 4)
	if err != nil {
		t.Fatal(err)
	}
	r, err := clusterBaseline(lc, start, 4, ClusterConfig{Batch: 64, Steps: 5})
	if err != nil {
		t.Fatal(err)
	}
	if r.Features != 512 || r.Speedup != 1 || r.ComputeSec != r.StepSec || r.ExchangeSec != 0 || !(r.PointsPerSec > 0) || r.Batch != 64 {
		t.Errorf("%+v: want 512 features, speedup 1, compute = step, no exchange", r)
	}
	if used := r.PointsPerSec * r.CPUMicros / 1e6; used > 1.5*float64(runtime.NumCPU()) {
		t.Errorf("%v cores busy", used)
	}
}

// TestPairDriftStream: kcca-ramp's pairs are the left and right halves
// of one image, of classes 0–4 before T and 5–9 from 2T (here marked by
// the sign of the right half: mirrored or negated, as in
// TestDriftKCCACase); each view has its own bandwidth (the median trick
// on its half).
func TestPairDriftStream(t *testing.T) {
	const n, T = 9000, 1000
	set := mirroredOrNegated(n)
	s, err := newPairDrift(DriftConfig{Case: "kcca-ramp", MNIST: set, Points: T, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	const d = mnist.Pixels / 2
	x, y := make([]float64, 32*d), make([]float64, 32*d)
	for _, c := range []struct{ n, sign int }{{0, 1}, {T - 1, 1}, {2 * T, -1}, {3 * T, -1}} {
		s.sample(x, y, 32, c.n)
		for r := range 32 {
			// pixel (row 3, column 2) of the left half and its mirror,
			// column 11 of the right half
			l, rr := x[r*d+3*14+2], y[r*d+3*14+11]
			if math.Abs(rr-float64(c.sign)*l) > 1e-12 {
				t.Fatalf("at %d, pair %d: left %v, right %v; want the right %+d× the left", c.n, r, l, rr, c.sign)
			}
		}
	}
	if !(s.kx.Bandwidth > 0) || !(s.ky.Bandwidth > 0) {
		t.Errorf("bandwidths %v and %v", s.kx.Bandwidth, s.ky.Bandwidth)
	}
	if _, err := newPairDrift(DriftConfig{Case: "kcca-ramp", MNIST: mirroredOrNegated(4000), Points: T}); err == nil {
		t.Error("4,000 images (2,000 a half, 4,500 needed): no error")
	}
}

// mirroredOrNegated is n images whose right half is the left one
// mirrored (classes 0–4) or mirrored and negated (5–9).
func mirroredOrNegated(n int) mnist.Set {
	set := mnist.Set{X: make([]float64, n*mnist.Pixels), Labels: make([]int, n)}
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range n {
		lab := i % 10
		set.Labels[i] = lab
		img := set.X[i*mnist.Pixels : (i+1)*mnist.Pixels]
		a, b := rng.NormFloat64(), rng.NormFloat64()
		for r := range 28 {
			for c := range 14 {
				v := a*math.Sin(float64(r+c)/5) + b*math.Cos(float64(r*c)/40) + 0.1*rng.NormFloat64()
				img[r*28+c] = v
				if lab < 5 {
					img[r*28+27-c] = v
				} else {
					img[r*28+27-c] = -v
				}
			}
		}
	}
	return set
}

// TestLagFigures: keep-up's figures by hand. Samples every 30 s at
// 1,000 messages a second with the lag at 0, 500, 2,000, 2,600 and 3,200:
// at 60 s 2,000, at the end 3,200, growing 1,200 in 60 s: 20 a second,
// 2% of the stream. A run shorter than 60 s has no figure at 60 s and no
// growth.
func TestLagFigures(t *testing.T) {
	var s []KeepUpPoint
	for i, lag := range []int64{0, 500, 2000, 2600, 3200} {
		s = append(s, KeepUpPoint{Seconds: float64(30 * i), Lag: lag})
	}
	at60, end, growth := lagFigures(s, 1000)
	if at60 != 2000 || end != 3200 || math.Abs(growth-0.02) > 1e-15 {
		t.Errorf("lag %d at 60 s, %d at the end, growth %v; want 2,000, 3,200, 0.02", at60, end, growth)
	}
	at60, end, growth = lagFigures(s[:2], 1000)
	if at60 != 0 || end != 500 || growth != 0 {
		t.Errorf("a 30 s run: %d, %d, %v; want 0, 500, 0", at60, end, growth)
	}
	at60, end, growth = lagFigures(s[:3], 1000)
	if at60 != 2000 || end != 2000 || growth != 0 {
		t.Errorf("a run ending at 60 s: %d, %d, %v; want 2,000, 2,000, 0", at60, end, growth)
	}
}

// TestRunKCCAWithOja: kcca with the oja solver learns the same even
// relation (its held-out sum well above linear CCA's).
func TestRunKCCAWithOja(t *testing.T) {
	res, err := RunKCCA(t.Context(), KCCAConfig{Points: 4096, Solver: online.SolverOja})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("oja: held-out sum %.3f, linear CCA %.3f", res.SumK, res.LinearCCASumK)
	if !(res.SumK > res.LinearCCASumK+0.5) {
		t.Errorf("kernel CCA (oja) %v, linear CCA %v; want kernel CCA ahead by more than 0.5", res.SumK, res.LinearCCASumK)
	}
}

// TestRunThroughputVariants: the float32 step and the i.i.d. and
// orthogonal frequencies are what the rows say they are, each with the
// flop count 2·b·features·(d+k) over its median step, and Progress sees
// every row.
func TestRunThroughputVariants(t *testing.T) {
	for _, c := range []ThroughputConfig{
		{Precision: "float32", Frequencies: "iid"},
		{Precision: "float64", Frequencies: "orthogonal"},
	} {
		var seen []ThroughputRow
		c.Dims, c.Features, c.K, c.Batch, c.Runs = []int{8, 16}, 1024, 2, 64, 3
		c.Progress = func(r ThroughputRow) { seen = append(seen, r) }
		rows, err := RunThroughput(c)
		if err != nil {
			t.Fatalf("%s %s: %v", c.Precision, c.Frequencies, err)
		}
		if len(rows) != 2 || len(seen) != 2 {
			t.Fatalf("%s %s: %d rows, %d reported", c.Precision, c.Frequencies, len(rows), len(seen))
		}
		for i, r := range rows {
			flops := 2 * 64 * float64(r.Features) * float64(r.D+2)
			if r.Precision != c.Precision || r.Frequencies != c.Frequencies || r.D != c.Dims[i] || seen[i] != r ||
				rel(r.StepGFLOPS, flops/r.StepMedianSec/1e9) > 1e-9 {
				t.Errorf("%s %s: row %+v", c.Precision, c.Frequencies, r)
			}
		}
	}
}

// TestHermiteDriftScoresTheTurningTruth: on the gradual cases (rotate,
// ramp) the stream's own eigenfunctions, composed with the turn in
// force, score 0 at every point of the turn, and the two cases turn
// alike: a quarter turn at 2T, half of it at 1.5T.
func TestHermiteDriftScoresTheTurningTruth(t *testing.T) {
	const T, k = 1000, 3
	for _, c := range []string{"rotate", "ramp"} {
		s := newHermiteDrift(DriftConfig{Case: c, Points: T, K: k, Seed: 2})
		d := s.dim()
		for _, n := range []int{T + T/4, T + T/2, 2 * T, 3 * T} {
			r := s.rot.at(n)
			own := func(dst, x []float64, rows int) {
				var m mat.Dense
				m.Mul(mat.NewDense(rows, d, x), r)
				copy(dst, s.h.Eigenfunctions(m.RawMatrix().Data, rows, k).RawMatrix().Data)
			}
			if e := s.score(own, n); e > 1e-9 {
				t.Errorf("%s at %d: the stream's own eigenfunctions score %v, want 0", c, n, e)
			}
			want := math.Pi / 2 * math.Min(1, float64(n-T)/T)
			if math.Abs(r.At(0, 0)-math.Cos(want)) > 1e-15 {
				t.Errorf("%s at %d: a turn of %v, want %v", c, n, math.Acos(r.At(0, 0)), want)
			}
		}
	}
}

// failingGatherer fails every round.
type failingGatherer struct{ sleepyGatherer }

func (failingGatherer) AllGather(context.Context, uint64, []byte) ([][]byte, error) {
	return nil, errors.New("lost")
}

// TestTimedGathererPassesErrorsOn: a failed round's error comes back
// unchanged (the member decides what it means), its time counted.
func TestTimedGathererPassesErrorsOn(t *testing.T) {
	g := &timedGatherer{Gatherer: failingGatherer{}}
	if _, err := g.AllGather(t.Context(), 0, nil); err == nil || err.Error() != "lost" {
		t.Errorf("AllGather: %v, want the round's error", err)
	}
	if g.in <= 0 {
		t.Errorf("%v counted for the failed round", g.in)
	}
}

// TestOrDefault: a zero value takes the default, any other is kept.
func TestOrDefault(t *testing.T) {
	a, b, c, d := 0, 7, "", "x"
	orDefault(&a, 5)
	orDefault(&b, 5)
	orDefault(&c, "auto")
	orDefault(&d, "auto")
	if a != 5 || b != 7 || c != "auto" || d != "x" {
		t.Errorf("%d %d %q %q, want 5 7 auto x", a, b, c, d)
	}
}

// TestHermiteDriftSamplesTheRotatedStream: after the switch the stream's
// rows have covariance Q·diag(s²)·Qᵀ (s the hermite scales, Q the
// switch's rotation), before it diag(s²): checked on 40,000 rows, within
// a few standard errors.
func TestHermiteDriftSamplesTheRotatedStream(t *testing.T) {
	const T, rows = 1000, 40000
	s := newHermiteDrift(DriftConfig{Case: "switch", Points: T, K: 2, Seed: 3})
	d := s.dim()
	diag := mat.NewDiagDense(d, nil)
	for i, v := range s.h.S {
		diag.SetDiag(i, v*v)
	}
	var rotated mat.Dense
	q := s.rot.at(T)
	rotated.Product(q, diag, q.T())
	for _, c := range []struct {
		n    int
		want mat.Matrix
	}{{0, diag}, {T, &rotated}} {
		x := make([]float64, rows*d)
		for r := 0; r < rows; r += 500 {
			s.sample(x[r*d:(r+500)*d], 500, c.n)
		}
		var cov mat.SymDense
		cov.SymOuterK(1.0/rows, mat.NewDense(rows, d, x).T())
		for i := range d {
			for j := range d {
				if got, want := cov.At(i, j), c.want.At(i, j); math.Abs(got-want) > 0.03 {
					t.Fatalf("at %d: covariance (%d, %d) %v, want %v", c.n, i, j, got, want)
				}
			}
		}
	}
}

// TestPrintCompareTableWithoutIdle: an in-process run (no idle child)
// has no idle RSS in its title.
func TestPrintCompareTableWithoutIdle(t *testing.T) {
	var w strings.Builder
	PrintCompareTable(&w, CompareResult{About: "toy", Points: 10, BudgetSeconds: 1, Methods: []CompareMethod{{Method: "m", To1e2: -1, To1e3: -1, ErrorAtBudget: 0.5}}})
	if first := strings.Split(w.String(), "\n")[1]; first != "toy — 10 points, budget 1 s" {
		t.Errorf("title %q", first)
	}
}
