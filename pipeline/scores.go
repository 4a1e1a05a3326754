package pipeline

import (
	"context"
	"errors"
	"math"
	"runtime"
	"sync"
	"time"

	"github.com/streamkpca/streamkpca/ingest"
	"github.com/streamkpca/streamkpca/online"
	"github.com/streamkpca/streamkpca/output"
	"github.com/streamkpca/streamkpca/snapshot"
)

// scores is the output edge's state on the loop (output.topic; package
// output): the good messages handled since the last write, their records
// once scored, and the held-out residuals' window that each version's
// novelty reference is cut from. Owned by the loop; downSince and lastErr
// are p.mu's (/readyz).
type scores struct {
	prod output.Producer
	// held keeps the last held-out rows (raw, in memory only: never in a
	// model), from which each version's novelty reference is made; ref is
	// the newest reference, whose newest residuals stand in for rows held
	// is still short of (after a restart).
	held *rowRing
	ref  []float64
	// x holds the rows waiting to be scored (row-major, the model's
	// dimension), meta their sources in the same order; y the y rows
	// of those that have one (two-view models), in the same order.
	x, y []float64
	meta []scoreMeta
	// pend: records scored and not yet stored, pendNovel how many of them
	// are novel; lastRecords and lastNovel: the counts at the last cut.
	pend                   []output.Message
	pendNovel              uint64
	lastRecords, lastNovel uint64
	// proj, res: Score's scratch.
	proj, res []float64
	// centred: the served model cannot give residuals (said once).
	centred bool
	// fast: the last step's rows scored from its features (fastProj,
	// fastRes), for the queued messages whose row is set.
	fast              bool
	fastProj, fastRes []float64
	slowIdx           []int
	slowX             []float64
	// fromStep counts the records scored from a step's features (tests).
	fromStep uint64
	// slowRows, slowSec: the rows scored from scratch and the loop's
	// seconds it took, since load shedding last took them (pace.scored).
	slowRows int
	slowSec  float64

	downSince time.Time
	lastErr   error
	lastLog   time.Time
}

type scoreMeta struct {
	src  output.Source
	key  []byte
	held bool
	// hasY: the message has a y row (in scores.y).
	hasY bool
	// row is the message's row in the loop's batch, -1 when it is not
	// there (shed): the batch's rows are scored from the features the
	// learner computes for its step (fast), the others from scratch.
	row int
}

// newScores returns the output edge's loop state, its window holding the
// restored version's reference (nil prod: no output).
func newScores(prod output.Producer, window int, restored *snapshot.Model) *scores {
	if prod == nil {
		return nil
	}
	s := &scores{prod: prod, held: &rowRing{cap: window}}
	if restored != nil && restored.Header().Novelty != nil {
		s.ref = restored.Header().Novelty.Residuals
	}
	return s
}

// rowRing keeps the last cap rows (of one dimension), oldest first.
type rowRing struct {
	cap, d, n, start int
	buf              []float64
}

func (r *rowRing) push(x []float64) {
	if r.d == 0 {
		r.d, r.buf = len(x), make([]float64, r.cap*len(x))
	}
	i := (r.start + r.n) % r.cap
	if r.n == r.cap {
		r.start = (r.start + 1) % r.cap
	} else {
		r.n++
	}
	copy(r.buf[i*r.d:(i+1)*r.d], x)
}

// rows returns the rows, oldest first, in one slice.
func (r *rowRing) rows() []float64 {
	out := make([]float64, 0, r.n*r.d)
	for i := 0; i < r.n; i++ {
		j := (r.start + i) % r.cap
		out = append(out, r.buf[j*r.d:(j+1)*r.d]...)
	}
	return out
}

// reference returns version m's novelty reference: its residuals on the
// last held-out rows, oldest first — which m learned, as every version
// since they arrived did, so the reference measures the model it ranks
// for — with the newest of the previous reference's in front when fewer
// rows are held than the window (after a restart). nil when there is
// none (a centred model, no rows yet).
func (s *scores) reference(m *snapshot.Model) []float64 {
	var res []float64
	if s.held.n > 0 {
		var err error
		if _, res, err = m.Score(nil, nil, s.held.rows()); err != nil {
			return nil
		}
	}
	if short := s.held.cap - len(res); short > 0 && len(s.ref) > 0 {
		res = append(append([]float64(nil), s.ref[max(0, len(s.ref)-short):]...), res...)
	}
	if len(res) > 0 {
		s.ref = res
	}
	return res
}

// scoreLater queues a good message for its record (before load shedding
// decides whether it is learned: every good message is scored). A full
// batch of them is scored and written at once.
func (l *loop) scoreLater(m ingest.Message, x, y []float64) {
	s := l.p.out
	if s == nil {
		return
	}
	var key []byte
	if len(m.Key) > 0 {
		key = m.Key
	}
	s.x, s.y = append(s.x, x...), append(s.y, y...)
	s.meta = append(s.meta, scoreMeta{src: output.Source{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset}, key: key,
		held: online.HeldOut(online.HoldoutKey(m.Partition, m.Offset), l.p.cfg.Learner.Holdout), hasY: len(y) > 0, row: -1})
	l.p.met.OutPending.Set(float64(len(s.meta) + len(s.pend)))
}

// scoreInBatch marks the message queued last as the batch's row row.
func (l *loop) scoreInBatch(row int) {
	if s := l.p.out; s != nil && len(s.meta) > 0 {
		s.meta[len(s.meta)-1].row = row
	}
}

// scoreIfMany writes the queued messages' records when they pass two
// batches (a loop shedding most of the stream learns rarely).
func (l *loop) scoreIfMany() {
	if s := l.p.out; s != nil && len(s.meta) >= 2*l.p.cfg.Learner.Batch {
		if l.writeScores(l.enq) == nil {
			// Load shedding's fraction from what scoring costs now too:
			// at its floor a learned batch, after which it is otherwise
			// re-estimated, comes once in 256 (see pace).
			l.keepUp(0)
		}
	}
}

// scoreFromStep makes the next step score the batch from its features
// (done is called after the step): where the learner shows them
// (batchFeatures) and the served version's blocks are the learner's
// first, the batch's rows cost no second evaluation.
func (l *loop) scoreFromStep() (done func()) {
	s := l.p.out
	bf, ok := l.p.learner.(batchFeatures)
	if s == nil || !ok || l.model == nil {
		return func() {}
	}
	m := l.model
	k := m.K()
	bf.setBatchHook(func(rows int, seeds []uint64, kept func(j int) []float64) {
		s.fastProj, s.fastRes = grow(s.fastProj, rows*k), grow(s.fastRes, rows)
		s.fast = m.ScoreKept(s.fastProj, s.fastRes, rows, seeds, kept)
	})
	return func() { bf.setBatchHook(nil) }
}

// score turns the queued messages into records with the served version
// (the one served when they were handled: versions change only after
// writeScores), then keeps the held-out rows for the next version's
// reference: a row is never in the reference it is ranked against.
func (l *loop) score() {
	p, s := l.p, l.p.out
	n := len(s.meta)
	if n == 0 {
		return
	}
	m := l.model
	var res []float64
	k := 0
	if m != nil {
		k = m.K()
		s.proj, s.res = grow(s.proj, n*k), grow(s.res, n)
		res = s.res
		// The batch's rows from the step's features, the others (shed,
		// or queued while no step could show them) from scratch.
		s.slowIdx, s.slowX = s.slowIdx[:0], s.slowX[:0]
		d := len(s.x) / n
		for i, mt := range s.meta {
			if s.fast && mt.row >= 0 && mt.row < len(s.fastRes) {
				copy(s.proj[i*k:(i+1)*k], s.fastProj[mt.row*k:(mt.row+1)*k])
				res[i] = s.fastRes[mt.row]
				s.fromStep++
				continue
			}
			s.slowIdx = append(s.slowIdx, i)
			s.slowX = append(s.slowX, s.x[i*d:(i+1)*d]...)
		}
		if len(s.slowIdx) > 0 {
			t0 := time.Now()
			proj, r, err := s.scoreRows(m, s.slowX, l.p.cfg.Learner.Workers)
			s.slowRows, s.slowSec = s.slowRows+len(s.slowIdx), s.slowSec+time.Since(t0).Seconds()
			if errors.Is(err, snapshot.ErrCentred) {
				if !s.centred {
					p.log.Warn().Str("output.topic", p.cfg.Output.Topic).Msg("the model is centred (learner.center, or a two-view model without uncentered: true): records carry projections, with residual and novelty null")
					s.centred = true
				}
				res = nil
				proj, err = m.Project(nil, s.x)
				s.slowIdx = s.slowIdx[:0]
				for i := range s.meta {
					s.slowIdx = append(s.slowIdx, i)
				}
			}
			if err != nil {
				// Validated rows; an error is a bug: say so, write the
				// records without numbers rather than lose them.
				p.log.Error().Err(err).Msg("output: scoring failed; records without a model")
				m = nil
			} else {
				for a, i := range s.slowIdx {
					copy(s.proj[i*k:(i+1)*k], proj[a*k:(a+1)*k])
					if res != nil {
						res[i] = r[a]
					}
				}
			}
		}
	}
	projY := s.projectY(m)
	iy := 0
	for i, mt := range s.meta {
		r := output.Record{Source: mt.src, Key: mt.key, Residual: math.NaN(), Novelty: math.NaN()}
		if m != nil {
			r.HasModel, r.Incarnation, r.Version = true, m.Header().Incarnation, m.Header().Version()
			r.Projection = s.proj[i*k : (i+1)*k]
			if mt.hasY && projY != nil {
				r.ProjectionY = projY[iy*k : (iy+1)*k]
			}
			if res != nil {
				r.Residual = res[i]
				if q, ok := m.Novelty(res[i]); ok {
					r.Novelty, r.Novel = q, q >= p.cfg.Output.NoveltyQuantile
				}
			}
		}
		if mt.hasY {
			iy++
		}
		s.pend = append(s.pend, r.Encode())
		if r.Novel {
			s.pendNovel++
		}
	}
	if d := len(s.x) / n; d > 0 {
		for i, mt := range s.meta {
			if mt.held {
				s.held.push(s.x[i*d : (i+1)*d])
			}
		}
	}
	s.x, s.y, s.meta, s.fast = s.x[:0], s.y[:0], s.meta[:0], false
}

// scoreRows is m.Score of rows x spread over up to workers goroutines
// (0: GOMAXPROCS) in runs of whole tiles of rows: a message the learner
// did not learn (shed) is scored from scratch, and on the loop's
// goroutine alone that cost twice a learned row's on two cores, whose
// features the learner's workers evaluate in parallel. Each row's
// numbers do not depend on the rows beside it (Model.Score), so the
// split changes no bit.
func (s *scores) scoreRows(m *snapshot.Model, x []float64, workers int) ([]float64, []float64, error) {
	d := m.Dim(0)
	rows := len(x) / max(d, 1)
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	per := (rows + workers - 1) / workers
	per = (per + scoreTile - 1) / scoreTile * scoreTile
	if workers == 1 || rows <= scoreTile || per >= rows {
		return m.Score(nil, nil, x)
	}
	k := m.K()
	proj, res := make([]float64, rows*k), make([]float64, rows)
	var wg sync.WaitGroup
	errs := make([]error, (rows+per-1)/per)
	for i := range errs {
		r0, r1 := i*per, min(rows, (i+1)*per)
		wg.Go(func() { _, _, errs[i] = m.Score(proj[r0*k:r1*k], res[r0:r1], x[r0*d:r1*d]) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, nil, err
		}
	}
	return proj, res, nil
}

// scoreTile: the runs scoreRows splits rows into are multiples of it
// (the feature kernels' tile of rows).
const scoreTile = 64

// projectY is the y view's projections of the queued y rows by two-view
// model m (what a project request with "view": "y" answers), nil when m
// has no y view to project (one view, a KSIR target) or there are none.
func (s *scores) projectY(m *snapshot.Model) []float64 {
	if m == nil || len(s.y) == 0 || m.Views() < 2 || len(m.Header().Views[1].Slices) > 0 {
		return nil
	}
	p, err := m.ProjectView(1, nil, s.y)
	if err != nil {
		return nil // validated rows: not expected; the records keep their x numbers
	}
	return p
}

func grow(b []float64, n int) []float64 {
	if cap(b) < n {
		return make([]float64, n)
	}
	return b[:n]
}

// writeScores scores what is queued and writes every pending record,
// retrying with a back-off until they are stored or ctx ends (the stop
// signal, Kill, the stop's deadline): learning waits meanwhile, so the
// records of at most a batch are held. nil when nothing is pending.
func (l *loop) writeScores(ctx context.Context) error {
	p, s := l.p, l.p.out
	if s == nil {
		return nil
	}
	t0 := time.Now()
	l.score()
	if ctx == nil { // a loop outside Run (tests): bounded by nothing but the run's context
		ctx = context.Background()
		if l.run != nil {
			ctx = l.run
		}
	}
	if ctx.Err() != nil && len(s.pend) > 0 {
		return ctx.Err() // the stop: the final snapshot writes them within its deadline
	}
	back := 100 * time.Millisecond
	for tries := 0; len(s.pend) > 0; tries++ {
		err := s.prod.Write(ctx, s.pend)
		if err == nil {
			if tries == 0 {
				// What scoring costs the loop (load shedding): a record's
				// encoding and write, and a shed message's scoring.
				l.pace.scored(len(s.pend), time.Since(t0).Seconds()-s.slowSec, s.slowRows, s.slowSec)
			}
			s.slowRows, s.slowSec = 0, 0
			p.met.OutRecords.Add(float64(len(s.pend)))
			p.met.OutNovel.Add(float64(s.pendNovel))
			p.met.OutPending.Set(0)
			p.mu.Lock()
			p.led.status.OutRecords += uint64(len(s.pend))
			p.led.status.OutNovel += s.pendNovel
			s.pend, s.pendNovel = s.pend[:0], 0
			if !s.downSince.IsZero() {
				p.log.Info().Str("output.topic", p.cfg.Output.Topic).Dur("after", time.Since(s.downSince)).Msg("output topic writable again; learning goes on")
			}
			s.downSince, s.lastErr = time.Time{}, nil
			p.mu.Unlock()
			return nil
		}
		p.met.OutErrors.Inc()
		p.mu.Lock()
		if s.downSince.IsZero() {
			s.downSince = time.Now()
		}
		s.lastErr = err
		p.mu.Unlock()
		if time.Since(s.lastLog) >= 30*time.Second {
			s.lastLog = time.Now()
			p.log.Error().Err(err).Int("records", len(s.pend)).Str("output.topic", p.cfg.Output.Topic).Strs("output.brokers", p.cfg.Output.Brokers).
				Msg("records not stored on the output topic; learning waits and they are written again until stored (check the topic exists and this service may write to it)")
		}
		if ctx.Err() != nil {
			return err
		}
		t := time.NewTimer(back)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
		back = min(2*back, 5*time.Second)
	}
	return nil
}

// outputDown reports since when records have failed to be stored, and
// the last error (zero while they are stored).
func (p *Pipeline) outputDown() (time.Time, error) {
	if p.out == nil {
		return time.Time{}, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.downSince, p.out.lastErr
}
