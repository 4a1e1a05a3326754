package bench

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"time"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
	"gonum.org/v1/gonum/mat"

	"github.com/streamkpca/streamkpca/internal/blasimpl"
	"github.com/streamkpca/streamkpca/online"
)

// ThroughputRow is one configuration of RunThroughput (`bench throughput`).
type ThroughputRow struct {
	D               int     `json:"d"`
	Features        int     `json:"features"`
	K               int     `json:"k"`
	Batch           int     `json:"batch"`
	Block           int     `json:"block"`
	StepMedianSec   float64 `json:"step_median_seconds"`
	PointsPerSecond float64 `json:"points_per_second"`
	StepGFLOPS      float64 `json:"step_gflops"`
	GEMMMedianSec   float64 `json:"gemm_median_seconds"`
	GEMMGFLOPS      float64 `json:"gemm_gflops"`
	Ratio           float64 `json:"step_over_gemm"`
	BLAS            string  `json:"blas"`
	Precision       string  `json:"precision"`
	Compute         string  `json:"compute"`
	Frequencies     string  `json:"frequencies"`
}

// ThroughputConfig configures RunThroughput. Zero values mean the default.
type ThroughputConfig struct {
	// Dims to measure. Default: 1, 64, 784.
	Dims []int
	// Features, K, Batch and Block of the step. Defaults: 65,536, 10,
	// 512, online.DefaultBlockSize.
	Features, K, Batch, Block int
	// Runs: timed steps (and GEMMs) per configuration. Default: 5.
	Runs int
	// Precision (float64, float32), Compute (exact, blas) and Frequencies
	// (auto, iid, orthogonal) of the step. Defaults: float64, exact, auto.
	Precision, Compute, Frequencies string
	// KeepBytes is the learner's online.Config.KeepBytes (0: its
	// default; -1: the features are evaluated twice a step).
	KeepBytes int64
	// Progress, if set, is called with every row.
	Progress func(ThroughputRow)
}

// RunThroughput times the DSGD step and, for the same shapes, the two
// plain matrix products x·Ω (b×d by d×features) and Φ·α (b×features by
// features×k) through gonum's BLAS: the GEMM ceiling. Both count
// 2·b·features·(d+k) flops, so step_over_gemm compares like with like (the
// step also evaluates b·features cosines and generates nothing: blocks are
// cached).
func RunThroughput(cfg ThroughputConfig) ([]ThroughputRow, error) {
	if len(cfg.Dims) == 0 {
		cfg.Dims = []int{1, 64, 784}
	}
	orDefault(&cfg.Features, 65536)
	orDefault(&cfg.K, 10)
	orDefault(&cfg.Batch, 512)
	orDefault(&cfg.Block, online.DefaultBlockSize)
	orDefault(&cfg.Runs, 5)
	orDefault(&cfg.Precision, "float64")
	orDefault(&cfg.Compute, "exact")
	orDefault(&cfg.Frequencies, string(online.FrequenciesAuto))
	var rows []ThroughputRow
	for _, d := range cfg.Dims {
		rt := online.Config{BlockSize: cfg.Block, Precision: online.Precision(cfg.Precision), Compute: online.Compute(cfg.Compute), KeepBytes: cfg.KeepBytes,
			Frequencies: online.Frequencies(cfg.Frequencies)}
		if rt.Compute == online.ComputeBLAS {
			// The evaluator's workers each call the BLAS: one BLAS thread
			// each, or the two levels oversubscribe the cores.
			blasimpl.SetThreads(1)
		}
		r, err := online.MeasureStep(d, cfg.Features, cfg.K, cfg.Batch, cfg.Runs, rt)
		blasimpl.SetThreads(runtime.NumCPU())
		if err != nil {
			return rows, err
		}
		g := gemmCeiling(d, cfg.Features, cfg.K, cfg.Batch, cfg.Runs, cfg.Precision == "float32")
		row := ThroughputRow{D: d, Features: r.Features, K: cfg.K, Batch: cfg.Batch, StepMedianSec: r.Median(),
			PointsPerSecond: float64(cfg.Batch) / r.Median(), StepGFLOPS: r.GEMMFlops() / r.Median() / 1e9,
			GEMMMedianSec: g, GEMMGFLOPS: r.GEMMFlops() / g / 1e9, BLAS: BLASLabel(),
			Precision: cfg.Precision, Compute: cfg.Compute, Block: cfg.Block, Frequencies: cfg.Frequencies}
		row.Ratio = row.StepGFLOPS / row.GEMMGFLOPS
		rows = append(rows, row)
		if cfg.Progress != nil {
			cfg.Progress(row)
		}
	}
	return rows, nil
}

// gemmCeiling returns the median time of x·Ω plus Φ·α through blas64 (or
// blas32 for x·Ω when f32, as the float32 step): gonum's pure-Go BLAS, or
// OpenBLAS in the openblas build.
func gemmCeiling(d, nf, k, b, runs int, f32 bool) float64 {
	rng := rand.New(rand.NewPCG(2, 2))
	fill := func(r, c int) *mat.Dense {
		m := mat.NewDense(r, c, nil)
		raw := m.RawMatrix().Data
		for i := range raw {
			raw[i] = rng.NormFloat64()
		}
		return m
	}
	x, om, alpha := fill(b, d), fill(d, nf), fill(nf, k)
	var z, h mat.Dense
	z.Mul(x, om)
	to32 := func(m *mat.Dense) blas32.General {
		r, c := m.Dims()
		g := blas32.General{Rows: r, Cols: c, Stride: c, Data: make([]float32, r*c)}
		for i, v := range m.RawMatrix().Data {
			g.Data[i] = float32(v)
		}
		return g
	}
	x32, om32, z32 := to32(x), to32(om), to32(&z)
	product := func() {
		if f32 {
			blas32.Gemm(blas.NoTrans, blas.NoTrans, 1, x32, om32, 0, z32)
		} else {
			z.Mul(x, om)
		}
		h.Mul(&z, alpha)
	}
	product() // warm up
	var ts []float64
	for i := 0; i < runs; i++ {
		t0 := time.Now()
		product()
		ts = append(ts, time.Since(t0).Seconds())
	}
	slices.Sort(ts)
	return ts[len(ts)/2]
}

// BLASLabel names the BLAS behind gonum in this binary and, for OpenBLAS,
// the kernels it chose for this CPU.
func BLASLabel() string {
	if c := blasimpl.CoreName(); c != "" {
		return blasimpl.Name + " (" + c + ")"
	}
	return blasimpl.Name
}
