package online

import (
	"math/rand/v2"
	"slices"
	"time"

	"github.com/streamkpca/streamkpca/features"
)

// ThroughputResult is one measurement of the DSGD step.
type ThroughputResult struct {
	D, Features, K, Batch int
	// StepSeconds are the timed steps, sorted.
	StepSeconds []float64
}

// Median returns the median step time in seconds.
func (r ThroughputResult) Median() float64 { return r.StepSeconds[len(r.StepSeconds)/2] }

// GEMMFlops counts the multiply-adds of the step's two products, x·Ω and
// Φ·α (2·b·features·(d + k)): the work a GEMM would do for the same shapes.
func (r ThroughputResult) GEMMFlops() float64 {
	return 2 * float64(r.Batch) * float64(r.Features) * float64(r.D+r.K)
}

// MeasureStep times steps of a learner holding the given number of
// Gaussian features (coefficients random, revisiting so the count stays
// fixed; k columns, none learned beyond them: Config.Oversample), on
// standard normal data: the setup of BenchmarkUpdate. rt
// supplies BlockSize, Workers, Precision, Compute, Frequencies, CacheBytes
// and KeepBytes.
func MeasureStep(d, nf, k, b, steps int, rt Config) (ThroughputResult, error) {
	rng := rand.New(rand.NewPCG(1, 1))
	x := make([]float64, b*d)
	for i := range x {
		x[i] = rng.NormFloat64()
	}
	l, err := New(Config{K: k, Oversample: -1, MaxFeatures: nf, BlockSize: rt.BlockSize, Workers: rt.Workers, Precision: rt.Precision, Compute: rt.Compute, Frequencies: rt.Frequencies,
		CacheBytes: rt.CacheBytes, KeepBytes: rt.KeepBytes, Kernel: features.Kernel{Family: features.Gaussian, Bandwidth: float64(d)}})
	if err != nil {
		return ThroughputResult{}, err
	}
	defer l.Close()
	if err := l.Update(x, b); err != nil {
		return ThroughputResult{}, err
	}
	for j := len(l.seeds); j < nf/l.cfg.BlockSize; j++ {
		l.seeds = append(l.seeds, l.fm.BlockSeed(l.seedBase, j))
		for i := 0; i < l.cfg.BlockSize*k; i++ {
			l.coef = append(l.coef, 1e-3*rng.NormFloat64())
		}
	}
	l.Update(x, b) // warm the cache
	res := ThroughputResult{D: d, Features: l.Features(), K: k, Batch: b}
	for i := 0; i < steps; i++ {
		t0 := time.Now()
		l.Update(x, b)
		res.StepSeconds = append(res.StepSeconds, time.Since(t0).Seconds())
	}
	slices.Sort(res.StepSeconds)
	return res, nil
}
