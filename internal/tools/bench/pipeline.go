package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/streamkpca/streamkpca/configs"
	"github.com/streamkpca/streamkpca/features"
	"github.com/streamkpca/streamkpca/ingest"
	"github.com/streamkpca/streamkpca/internal/devstack"
	"github.com/streamkpca/streamkpca/online"
	"github.com/streamkpca/streamkpca/output"
	"github.com/streamkpca/streamkpca/pipeline"
)

// PipelineConfig configures RunPipeline. Zero values mean the default.
type PipelineConfig struct {
	// Dims to measure. Default: 1, 64, 784.
	Dims []int
	// Points per dimension, a multiple of Batch. Default: 40,960.
	Points int
	// K, Batch and MaxFeatures of the model. Defaults: 3 (the service's),
	// 512, 32,768.
	K, Batch, MaxFeatures int
	// Dir holds the brokers' and snapshots' data. Required.
	Dir string
	// Format of the messages: json (default) or f64le (raw little-endian
	// float64s: no text to parse).
	Format string
	// Memory feeds the service from an in-memory source instead of the
	// embedded Kafka broker (NATS stays embedded): the service's own
	// overhead, without a broker sharing the cores.
	Memory bool
	// Output turns output.topic on, written to an in-memory producer:
	// every message scored by the version served, as well as learned.
	Output bool
	// Replay is the service's learner.replay (0: the service's default;
	// -1: off): revisits taken while the backlog drains are steps the
	// learner alone does not take.
	Replay float64
	// Runs: learner-then-service pairs per d, run one after the other so
	// that both see the same machine; rates and overhead are medians.
	// Default: 3.
	Runs int
}

// PipelineRow compares the service with the learner alone at one d.
type PipelineRow struct {
	D      int `json:"d"`
	Points int `json:"points"`
	// Steady-state rates after the first batch (which sizes the model and,
	// for the service, follows the consumer group's join).
	LearnerPointsPerSec float64 `json:"learner_points_per_second"`
	ServicePointsPerSec float64 `json:"service_points_per_second"`
	// Overhead is learner rate / service rate − 1: what the service adds
	// (the median over the runs of each pair's ratio).
	Overhead float64 `json:"overhead"`
	// Overheads are the runs' own, in order.
	Overheads []float64 `json:"overheads"`
	// LearnerCPUMicros and ServiceCPUMicros are the process's CPU time
	// (user + system, every goroutine: with Kafka, the in-process broker's
	// too; NATS's always) per point over the same steady state, and
	// CPUOverhead = service / learner − 1 (medians over the runs): what
	// the service costs in work, whatever the scheduling of 2 cores made
	// of it in wall time. Zero where the CPU time cannot be read.
	LearnerCPUMicros float64   `json:"learner_cpu_us_per_point"`
	ServiceCPUMicros float64   `json:"service_cpu_us_per_point"`
	CPUOverhead      float64   `json:"cpu_overhead"`
	CPUOverheads     []float64 `json:"cpu_overheads"`
	// Steps the learner alone and the service took for the points (the
	// service's last run): more steps than points/batch mean partial
	// batches, each adding a feature block.
	LearnerSteps uint64 `json:"learner_steps"`
	ServiceSteps uint64 `json:"service_steps"`
	// ServiceRevisited is the rows the service revisited by then
	// (learner.replay; not counted in ServiceSteps).
	ServiceRevisited uint64 `json:"service_revisited"`
	// StartSeconds is the service's time from Run to its first learned
	// batch (group join, first fetch).
	StartSeconds float64 `json:"start_seconds"`
}

func (c *PipelineConfig) setDefaults() {
	orDefault(&c.Format, "json")
	if len(c.Dims) == 0 {
		c.Dims = []int{1, 64, 784}
	}
	orDefault(&c.K, 3)
	orDefault(&c.Batch, 512)
	orDefault(&c.Points, 80*c.Batch)
	c.Points -= c.Points % c.Batch
	orDefault(&c.MaxFeatures, 32768)
	orDefault(&c.Runs, 3)
}

// RunPipeline measures, for each d, the end-to-end rate of the streaming
// service (`run`: Kafka consumer group, JSON decoding, validation,
// batching, learning, snapshots every 50 batches, publishing on NATS)
// against the embedded brokers, next to the learner alone on the same
// points. The topic is filled before the service starts, so the service
// is never waiting for data.
func RunPipeline(ctx context.Context, cfg PipelineConfig) ([]PipelineRow, error) {
	cfg.setDefaults()
	if cfg.Dir == "" {
		return nil, fmt.Errorf("bench: pipeline needs a data directory")
	}
	var rows []PipelineRow
	for _, d := range cfg.Dims {
		var runs []PipelineRow
		for r := range cfg.Runs {
			row, err := runPipelineDim(ctx, cfg, d, r)
			if err != nil {
				return rows, fmt.Errorf("bench: pipeline d=%d: %w", d, err)
			}
			runs = append(runs, row)
		}
		rows = append(rows, medianRow(runs))
	}
	return rows, nil
}

// medianRow is the runs' medians: rates, start and the per-run overhead.
func medianRow(runs []PipelineRow) PipelineRow {
	med := func(f func(PipelineRow) float64) float64 {
		v := make([]float64, len(runs))
		for i, r := range runs {
			v[i] = f(r)
		}
		slices.Sort(v)
		if n := len(v); n%2 == 0 {
			return (v[n/2-1] + v[n/2]) / 2
		}
		return v[len(v)/2]
	}
	out := runs[len(runs)-1]
	out.LearnerPointsPerSec = med(func(r PipelineRow) float64 { return r.LearnerPointsPerSec })
	out.ServicePointsPerSec = med(func(r PipelineRow) float64 { return r.ServicePointsPerSec })
	out.StartSeconds = med(func(r PipelineRow) float64 { return r.StartSeconds })
	out.Overhead = med(func(r PipelineRow) float64 { return r.Overhead })
	out.LearnerCPUMicros = med(func(r PipelineRow) float64 { return r.LearnerCPUMicros })
	out.ServiceCPUMicros = med(func(r PipelineRow) float64 { return r.ServiceCPUMicros })
	out.CPUOverhead = med(func(r PipelineRow) float64 { return r.CPUOverhead })
	out.Overheads, out.CPUOverheads = nil, nil
	for _, r := range runs {
		out.Overheads = append(out.Overheads, r.Overhead)
		out.CPUOverheads = append(out.CPUOverheads, r.CPUOverhead)
	}
	return out
}

func runPipelineDim(ctx context.Context, cfg PipelineConfig, d, run int) (PipelineRow, error) {
	row := PipelineRow{D: d, Points: cfg.Points}
	rng := rand.New(rand.NewPCG(uint64(d), 11))
	x := make([]float64, cfg.Points*d)
	for i := range x {
		x[i] = rng.NormFloat64()
	}
	bw := online.MedianDistance(x, cfg.Batch, d, 512)

	// CPU profile samples carry the phase they belong to (go tool pprof
	// -tags, -tagfocus=phase=service): goroutines inherit the labels of
	// the goroutine that starts them, so the learner's workers, the
	// embedded brokers (phase brokers) and the service's goroutines are
	// labelled with their phase; setup is the messages' making.
	defer pprof.SetGoroutineLabels(ctx)
	// The learner alone.
	pprof.SetGoroutineLabels(pprof.WithLabels(ctx, pprof.Labels("phase", "learner")))
	l, err := online.New(online.Config{K: cfg.K, MaxFeatures: cfg.MaxFeatures, Kernel: gaussian(bw)})
	if err != nil {
		return row, err
	}
	var t0 time.Time
	var cpu0 float64
	for i := 0; i < cfg.Points; i += cfg.Batch {
		if i == cfg.Batch {
			t0, cpu0 = time.Now(), cpuNow()
		}
		if err := l.Update(x[i*d:(i+cfg.Batch)*d], cfg.Batch); err != nil {
			l.Close()
			return row, err
		}
	}
	row.LearnerPointsPerSec = float64(cfg.Points-cfg.Batch) / time.Since(t0).Seconds()
	row.LearnerCPUMicros = perPoint(cpuNow()-cpu0, cfg.Points-cfg.Batch)
	row.LearnerSteps = l.Step()
	l.Close()

	// The service, with the topic filled first.
	pprof.SetGoroutineLabels(pprof.WithLabels(ctx, pprof.Labels("phase", "brokers")))
	const topic = "bench"
	dir := filepath.Join(cfg.Dir, "d"+strconv.Itoa(d)+"-"+strconv.Itoa(run))
	stack, err := devstack.Start(devstack.Options{Dir: dir, Topics: map[string]int32{topic: 1}})
	if err != nil {
		return row, err
	}
	defer stack.Close()
	pprof.SetGoroutineLabels(pprof.WithLabels(ctx, pprof.Labels("phase", "setup")))
	message := func(i int) []byte { return encodeRow(cfg.Format, x[i*d:(i+1)*d]) }
	opt := pipeline.Options{}
	if cfg.Memory {
		src := ingest.NewMemSource(topic, 4096)
		for i := range cfg.Points {
			src.Produce(0, message(i))
		}
		opt.Source, opt.DeadLetters = src, &ingest.MemDeadLetter{}
	} else if err := devstack.Produce(ctx, message, devstack.ProduceOptions{Brokers: stack.Brokers(), Topic: topic, N: cfg.Points}); err != nil {
		return row, err
	}
	var c configs.Config
	c.Model = "bench"
	c.Kafka.Brokers, c.Kafka.Topic = stack.Brokers(), topic
	c.NATS.URL = stack.NATSURL()
	c.Learner.K, c.Learner.Bandwidth, c.Learner.MaxFeatures, c.Learner.Batch = cfg.K, bw, cfg.MaxFeatures, cfg.Batch
	c.Snapshot.Dir = filepath.Join(dir, "snapshots")
	c.Learner.Replay = cfg.Replay
	if cfg.Format == "f64le" {
		c.Kafka.Format, c.Kafka.Dim = "f64le", d
	}
	c.HTTP.Addr = "off"
	if cfg.Output {
		c.Output.Topic = topic + ".scores"
		opt.Output = &output.Memory{}
	}
	c.SetDefaults()
	log := zerolog.Nop()
	opt.Config, opt.Logger = c, &log
	p, err := pipeline.New(opt)
	if err != nil {
		return row, err
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	start := time.Now()
	pprof.SetGoroutineLabels(pprof.WithLabels(ctx, pprof.Labels("phase", "service")))
	go func() { done <- p.Run(runCtx) }()
	pprof.SetGoroutineLabels(pprof.WithLabels(ctx, pprof.Labels("phase", "wait")))
	// wait returns the status in which n samples were first seen learned.
	wait := func(n uint64) (pipeline.Status, error) {
		for {
			st := p.Status()
			if st.Samples >= n {
				return st, nil
			}
			select {
			case err := <-done:
				return st, fmt.Errorf("the service stopped: %v", err)
			case <-ctx.Done():
				return st, ctx.Err()
			case <-time.After(time.Millisecond):
			}
		}
	}
	if _, err := wait(uint64(cfg.Batch)); err != nil {
		return row, err
	}
	t0, cpu0 = time.Now(), cpuNow()
	row.StartSeconds = t0.Sub(start).Seconds()
	st, err := wait(uint64(cfg.Points))
	if err != nil {
		return row, err
	}
	row.ServicePointsPerSec = float64(cfg.Points-cfg.Batch) / time.Since(t0).Seconds()
	row.ServiceCPUMicros = perPoint(cpuNow()-cpu0, cfg.Points-cfg.Batch)
	if row.LearnerCPUMicros > 0 {
		row.CPUOverhead = row.ServiceCPUMicros/row.LearnerCPUMicros - 1
	}
	// The stream's steps: a revisit (learner.replay) is a step of
	// Batch rows too, and one may come once the backlog is learned,
	// before this goroutine looks.
	row.ServiceSteps, row.ServiceRevisited = st.Step-st.Revisited/uint64(cfg.Batch), st.Revisited
	row.Overhead = row.LearnerPointsPerSec/row.ServicePointsPerSec - 1
	stop()
	if err := <-done; err != nil {
		return row, err
	}
	return row, nil
}

// cpuNow is the CPU time (user + system) this process has used so far,
// in seconds (0 where it cannot be read).
func cpuNow() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	sec := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return sec(ru.Utime) + sec(ru.Stime)
}

// perPoint is CPU seconds over n points, in microseconds (0 for none).
func perPoint(sec float64, n int) float64 {
	if sec <= 0 || n <= 0 {
		return 0
	}
	return 1e6 * sec / float64(n)
}

func gaussian(bw float64) features.Kernel {
	return features.Kernel{Family: features.Gaussian, Bandwidth: bw}
}

// encodeRow is one message holding row: a JSON array, or raw
// little-endian float64s for format f64le.
func encodeRow(format string, row []float64) []byte {
	if format == "f64le" {
		b := make([]byte, 0, 8*len(row))
		for _, v := range row {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
		}
		return b
	}
	b := append(make([]byte, 0, 24*len(row)), '[')
	for j, v := range row {
		if j > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendFloat(b, v, 'g', -1, 64)
	}
	return append(b, ']')
}
