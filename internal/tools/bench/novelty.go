package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/rs/zerolog"

	"github.com/streamkpca/streamkpca/configs"
	"github.com/streamkpca/streamkpca/ingest"
	"github.com/streamkpca/streamkpca/output"
	"github.com/streamkpca/streamkpca/pipeline"
	"github.com/streamkpca/streamkpca/snapshot"
)

// NoveltyConfig configures RunNovelty.
type NoveltyConfig struct {
	// X holds the stream's rows in order (n×D), Rare which of them belong
	// to the rare class. Required.
	X    []float64
	D    int
	Rare []bool
	// K components. Default: 10.
	K int
	// Bandwidth of the Gaussian kernel; 0: the service's median trick.
	Bandwidth float64
	// Train: the first Train rows are the baselines' training rows; AUC is
	// measured on the rows after them. Default: half the rows.
	Train int
	// Seed is learner.seed. Default: 1.
	Seed uint64
	// Quantile is output.novelty_quantile. Default: 0.99.
	Quantile float64
	// Dir holds the service's snapshots. Required.
	Dir string
}

// NoveltyRow is one scored row of the stream.
type NoveltyRow struct {
	Offset   int64   `json:"offset"`
	Rare     bool    `json:"rare"`
	Residual float64 `json:"residual"` // NaN: no version yet
	Novelty  float64 `json:"novelty"`  // NaN: no reference yet
	Novel    bool    `json:"novel"`
	Version  uint64  `json:"version"`
}

// NoveltyResult is the service's output topic on the stream, scored
// against the rare class.
type NoveltyResult struct {
	Rows, Rare, Train int
	// Bandwidth the service used (its first batch's median trick, or the
	// one given).
	Bandwidth float64 `json:"bandwidth"`
	// AUC is the ROC AUC of the residual for the rare class over the rows
	// after Train; TestRare how many of them are rare.
	AUC      float64 `json:"auc"`
	TestRare int     `json:"test_rare"`
	// AUCNovelty is the same for the records' novelty (the residual's rank
	// within its version's reference), over the rows that have one.
	AUCNovelty float64 `json:"auc_novelty"`
	// NovelShare: the share of the test rows flagged novel among the
	// ordinary ones (the false-alarm rate) and among the rare ones (the
	// recall), at Quantile.
	FalseAlarm, Recall float64
	Quantile           float64
	Seconds            float64
	// Scored holds every row's record, by offset.
	Scored []NoveltyRow `json:"-"`
}

// RunNovelty streams cfg.X through the service (in-memory source,
// nothing shed) with output.topic on, and scores the records' residuals
// against cfg.Rare.
func RunNovelty(ctx context.Context, cfg NoveltyConfig) (NoveltyResult, error) {
	n := len(cfg.Rare)
	if cfg.D <= 0 || len(cfg.X) != n*cfg.D || n == 0 {
		return NoveltyResult{}, fmt.Errorf("bench novelty: %d values for %d rows of %d", len(cfg.X), n, cfg.D)
	}
	orDefault(&cfg.K, 10)
	orDefault(&cfg.Seed, 1)
	orDefault(&cfg.Quantile, 0.99)
	orDefault(&cfg.Train, n/2)
	src := ingest.NewMemSource("novelty", 4096)
	for i := range n {
		src.Produce(0, encodeRow("f64le", cfg.X[i*cfg.D:(i+1)*cfg.D]))
	}
	var c configs.Config
	c.Model = "novelty"
	c.Kafka.Brokers, c.Kafka.Topic, c.Kafka.Format, c.Kafka.Dim = []string{"127.0.0.1:1"}, "novelty", "f64le", cfg.D
	c.NATS.Disabled, c.HTTP.Addr = true, "off"
	c.Learner.K, c.Learner.Bandwidth, c.Learner.Seed = cfg.K, cfg.Bandwidth, cfg.Seed
	c.Learner.LoadShedding, c.Learner.Budget = "off", "fixed" // nothing shed, no growth by the clock: figures by seed
	c.Output.Topic, c.Output.NoveltyQuantile = "novelty.scores", cfg.Quantile
	c.Snapshot.Dir, c.Snapshot.Keep = filepath.Join(cfg.Dir, "snapshots"), 2
	c.SetDefaults()
	log := zerolog.Nop()
	prod := &output.Memory{}
	p, err := pipeline.New(pipeline.Options{Config: c, Logger: &log, Source: src, DeadLetters: &ingest.MemDeadLetter{}, Output: prod})
	if err != nil {
		return NoveltyResult{}, err
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	t0 := time.Now()
	go func() { done <- p.Run(runCtx) }()
	for len(prod.Messages()) < n {
		select {
		case err := <-done:
			return NoveltyResult{}, fmt.Errorf("bench novelty: the service stopped: %v", err)
		case <-ctx.Done():
			return NoveltyResult{}, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	secs := time.Since(t0).Seconds()
	stop()
	if err := <-done; err != nil {
		return NoveltyResult{}, err
	}
	res := NoveltyResult{Rows: n, Train: cfg.Train, Quantile: cfg.Quantile, Seconds: secs}
	rows := make([]NoveltyRow, n)
	seen := make([]bool, n)
	for _, m := range prod.Messages() {
		var r struct {
			Source            struct{ Offset int64 }
			Model             *struct{ Version uint64 }
			Residual, Novelty *float64
			Novel             bool
		}
		if err := json.Unmarshal(m.Value, &r); err != nil {
			return res, err
		}
		o := r.Source.Offset
		if o < 0 || o >= int64(n) || seen[o] {
			continue // a record written again: the same bytes
		}
		seen[o] = true
		row := NoveltyRow{Offset: o, Rare: cfg.Rare[o], Residual: nan(r.Residual), Novelty: nan(r.Novelty), Novel: r.Novel}
		if r.Model != nil {
			row.Version = r.Model.Version
		}
		rows[o] = row
	}
	res.Scored = rows
	for _, r := range cfg.Rare {
		if r {
			res.Rare++
		}
	}
	var pos, neg, npos, nneg []float64
	flagged, ordinary := 0, 0
	for _, r := range rows[min(cfg.Train, n):] {
		if r.Residual != r.Residual { // NaN
			continue
		}
		if r.Novelty == r.Novelty {
			if r.Rare {
				npos = append(npos, r.Novelty)
			} else {
				nneg = append(nneg, r.Novelty)
			}
		}
		if r.Rare {
			pos = append(pos, r.Residual)
			if r.Novel {
				res.Recall++
			}
		} else {
			neg = append(neg, r.Residual)
			ordinary++
			if r.Novel {
				flagged++
			}
		}
	}
	res.TestRare = len(pos)
	res.AUC = rocAUC(pos, neg)
	res.AUCNovelty = rocAUC(npos, nneg)
	if len(pos) > 0 {
		res.Recall /= float64(len(pos))
	}
	if ordinary > 0 {
		res.FalseAlarm = float64(flagged) / float64(ordinary)
	}
	st := snapshot.Store{Dir: c.Snapshot.Dir, Model: c.Model}
	if snap, _, err := st.Latest(); err == nil {
		res.Bandwidth = snap.Header.Views[0].Kernel.Bandwidth
	}
	return res, nil
}

func nan(p *float64) float64 {
	if p == nil {
		return math.NaN()
	}
	return *p
}

// rocAUC is the area under the ROC curve of scores pos (the rare class)
// against neg: the probability that a rare row scores above an ordinary
// one, ties counting half (the Mann–Whitney statistic).
func rocAUC(pos, neg []float64) float64 {
	if len(pos) == 0 || len(neg) == 0 {
		return math.NaN()
	}
	type sc struct {
		v   float64
		pos bool
	}
	all := make([]sc, 0, len(pos)+len(neg))
	for _, v := range pos {
		all = append(all, sc{v, true})
	}
	for _, v := range neg {
		all = append(all, sc{v, false})
	}
	slices.SortFunc(all, func(a, b sc) int {
		switch {
		case a.v < b.v:
			return -1
		case a.v > b.v:
			return 1
		}
		return 0
	})
	// Ranks with ties averaged; the rare rows' rank sum.
	sum := 0.0
	for i := 0; i < len(all); {
		j := i
		for j < len(all) && all[j].v == all[i].v {
			j++
		}
		rank := float64(i+j+1) / 2 // 1-based average rank of i..j-1
		for q := i; q < j; q++ {
			if all[q].pos {
				sum += rank
			}
		}
		i = j
	}
	np, nn := float64(len(pos)), float64(len(neg))
	return (sum - np*(np+1)/2) / (np * nn)
}

// NoveltyCSV is the rows as CSV: offset, rare (0/1), residual, novelty,
// novel (0/1), version.
func NoveltyCSV(rows []NoveltyRow) []byte {
	b := []byte("offset,rare,residual,novelty,novel,version\n")
	for _, r := range rows {
		b = strconv.AppendInt(b, r.Offset, 10)
		b = append(b, ',')
		b = strconv.AppendBool(b, r.Rare)
		b = append(b, ',')
		b = strconv.AppendFloat(b, r.Residual, 'g', -1, 64)
		b = append(b, ',')
		b = strconv.AppendFloat(b, r.Novelty, 'g', -1, 64)
		b = append(b, ',')
		b = strconv.AppendBool(b, r.Novel)
		b = append(b, ',')
		b = strconv.AppendUint(b, r.Version, 10)
		b = append(b, '\n')
	}
	return b
}

// RareStream builds a stream from labelled rows (n×d): every row whose
// label is not rare, in an order shuffled by rng, with rows of the rare
// label drawn without replacement and inserted at random places, share
// of the stream (at most as many as there are). It returns the rows and
// which are rare.
func RareStream(x []float64, d int, labels []int, rare int, share float64, rng *rand.Rand) ([]float64, []bool) {
	var common, few []int
	for i, l := range labels {
		if l == rare {
			few = append(few, i)
		} else {
			common = append(common, i)
		}
	}
	rng.Shuffle(len(common), func(i, j int) { common[i], common[j] = common[j], common[i] })
	rng.Shuffle(len(few), func(i, j int) { few[i], few[j] = few[j], few[i] })
	nr := min(len(few), int(math.Round(share/(1-share)*float64(len(common)))))
	order := append([]int(nil), common...)
	isRare := make([]bool, 0, len(common)+nr)
	for range common {
		isRare = append(isRare, false)
	}
	for _, r := range few[:nr] {
		at := rng.IntN(len(order) + 1)
		order = slices.Insert(order, at, r)
		isRare = slices.Insert(isRare, at, true)
	}
	out := make([]float64, 0, len(order)*d)
	for _, i := range order {
		out = append(out, x[i*d:(i+1)*d]...)
	}
	return out, isRare
}
