package bench

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/streamkpca/streamkpca/features"
	"github.com/streamkpca/streamkpca/internal/mnist"
	"github.com/streamkpca/streamkpca/internal/synth"
	"github.com/streamkpca/streamkpca/online"
)

// pairDrift streams pairs of MNIST half-images (left and right 14
// columns, 392 pixels each) for kcca: digits 0–4, then the share of 5–9
// rising evenly over T points, then T points of 5–9 (case kcca-ramp), or
// every digit throughout (kcca-stationary, where the two "halves" of
// the stream hold every digit). The measure at every checkpoint is the
// paper's MNIST measure, S_k, the sum of the k canonical correlations
// between the model's projections of 500 held-out pairs of the classes
// in force (synth.CanonicalCorrelations).
type pairDrift struct {
	classMix
	rng            *rand.Rand
	trainX, trainY [2][]float64
	testX, testY   [2][]float64
	kx, ky         features.Kernel
}

// pairDriftTrain and pairDriftTest are each class half's training and
// held-out pairs.
const pairDriftTrain, pairDriftTest = 4000, 500

func newPairDrift(cfg DriftConfig) (*pairDrift, error) {
	if cfg.MNIST.Len() == 0 {
		return nil, fmt.Errorf("bench: drift case %s needs the MNIST images (--mnist DIR)", cfg.Case)
	}
	set := cfg.MNIST.Shuffle(rand.New(rand.NewPCG(cfg.Seed, 1)))
	const d = mnist.Pixels / 2
	left, right := set.Halves()
	s := &pairDrift{classMix: classMix{t: cfg.Points, ramp: cfg.Case == "kcca-ramp"}, rng: rand.New(rand.NewPCG(cfg.Seed, 2))}
	var ax, ay [2][]float64
	for i, lab := range set.Labels {
		h := 0
		if lab >= 5 {
			h = 1
		}
		if !s.ramp {
			h = i % 2 // kcca-stationary: both halves hold every digit
		}
		ax[h] = append(ax[h], left[i*d:(i+1)*d]...)
		ay[h] = append(ay[h], right[i*d:(i+1)*d]...)
	}
	for h := range 2 {
		if len(ax[h]) < (pairDriftTrain+pairDriftTest)*d {
			return nil, fmt.Errorf("bench: %d pairs of half %d, need %d", len(ax[h])/d, h, pairDriftTrain+pairDriftTest)
		}
		s.trainX[h], s.trainY[h] = ax[h][:pairDriftTrain*d], ay[h][:pairDriftTrain*d]
		s.testX[h], s.testY[h] = ax[h][pairDriftTrain*d:(pairDriftTrain+pairDriftTest)*d], ay[h][pairDriftTrain*d:(pairDriftTrain+pairDriftTest)*d]
	}
	// One bandwidth per view for every learner (the median trick on the
	// first half), so that the runs differ only in what they learned.
	s.kx = features.Kernel{Family: features.Gaussian, Bandwidth: online.MedianDistance(s.trainX[0], 512, d, 512)}
	s.ky = features.Kernel{Family: features.Gaussian, Bandwidth: online.MedianDistance(s.trainY[0], 512, d, 512)}
	return s, nil
}

func (s *pairDrift) sample(x, y []float64, rows, n int) {
	const d = mnist.Pixels / 2
	for r := range rows {
		h := s.pick(s.rng, n)
		i := s.rng.IntN(pairDriftTrain)
		copy(x[r*d:(r+1)*d], s.trainX[h][i*d:(i+1)*d])
		copy(y[r*d:(r+1)*d], s.trainY[h][i*d:(i+1)*d])
	}
}

// sumK is l's held-out S_k on the half in force at n.
func (s *pairDrift) sumK(l *online.TwoView, n, k int) float64 {
	h := s.half(n)
	u, v := make([]float64, pairDriftTest*k), make([]float64, pairDriftTest*k)
	l.EvalTo(0, u, s.testX[h], pairDriftTest)
	l.EvalTo(1, v, s.testY[h], pairDriftTest)
	return synth.Sum(synth.CanonicalCorrelations(mat.NewDense(pairDriftTest, k, u), mat.NewDense(pairDriftTest, k, v)))
}

// newPairDriftLearner is a kcca run's learner on a new pairDrift.
func newPairDriftLearner(cfg DriftConfig, run string) (driftLearner, error) {
	st, err := newPairDrift(cfg)
	if err != nil {
		return nil, err
	}
	lcfg := cfg.Learner
	lcfg.Model, lcfg.Algorithm, lcfg.K, lcfg.Seed = "drift", online.AlgKCCA, cfg.K, cfg.Seed
	lcfg.Kernel, lcfg.KernelY = st.kx, st.ky
	const d = mnist.Pixels / 2
	return &pairDriftLearner{learnerSlot: learnerSlot[*online.TwoView]{cfg: cfg, lcfg: runForget(lcfg, run), make: online.NewTwoView}, st: st, x: make([]float64, cfg.Batch*d), y: make([]float64, cfg.Batch*d)}, nil
}

// pairDriftLearner is a kcca run's learner on a pairDrift stream.
type pairDriftLearner struct {
	learnerSlot[*online.TwoView]
	st           *pairDrift
	x, y, hx, hy []float64
}

func (d *pairDriftLearner) step(n, b int) (bool, time.Duration, error) {
	const dim = mnist.Pixels / 2
	x, y := d.x[:b*dim], d.y[:b*dim]
	d.st.sample(x, y, b, n)
	d.hx = holdout(d.hx[:0], x, b, dim, uint64(n), d.cfg.Holdout)
	d.hy = holdout(d.hy[:0], y, b, dim, uint64(n), d.cfg.Holdout)
	t0 := time.Now()
	changed, err := d.l.Assess(d.hx, d.hy, len(d.hx)/dim)
	if err != nil {
		return false, time.Since(t0), err
	}
	err = d.l.Update(x, y, b)
	if errors.Is(err, online.ErrDiverged) {
		err = nil // refused and counted by the learner
	}
	return changed, time.Since(t0), err
}

func (d *pairDriftLearner) point(n int) DriftPoint {
	l := d.l
	p := DriftPoint{Features: l.Features(), Changes: l.Changes(), Switches: l.Switches(), SumK: d.st.sumK(l, n, d.cfg.K)}
	if q := l.Quality(); q != nil {
		p.Quality = q.Score
	}
	return p
}
