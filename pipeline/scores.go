package pipeline

import (
	"context"
	"errors"
	"math"
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
	win  *output.Window
	// x holds the rows waiting to be scored (row-major, the model's
	// dimension), meta their sources in the same order.
	x    []float64
	meta []scoreMeta
	// pend: records scored and not yet stored.
	pend []output.Message
	// proj, res: Score's scratch.
	proj, res []float64
	// centred: the served model cannot give residuals (said once).
	centred bool

	downSince time.Time
	lastErr   error
	lastLog   time.Time
}

type scoreMeta struct {
	src  output.Source
	key  []byte
	held bool
}

// newScores returns the output edge's loop state, its window holding the
// restored version's reference (nil prod: no output).
func newScores(prod output.Producer, window int, restored *snapshot.Model) *scores {
	if prod == nil {
		return nil
	}
	var ref []float64
	if restored != nil && restored.Header().Novelty != nil {
		ref = restored.Header().Novelty.Residuals
	}
	return &scores{prod: prod, win: output.NewWindow(window, ref)}
}

// scoreLater queues a good message for its record (before load shedding
// decides whether it is learned: every good message is scored). A full
// batch of them is scored and written at once.
func (l *loop) scoreLater(m ingest.Message, x []float64) {
	s := l.p.out
	if s == nil {
		return
	}
	var key []byte
	if len(m.Key) > 0 {
		key = m.Key
	}
	s.x = append(s.x, x...)
	s.meta = append(s.meta, scoreMeta{src: output.Source{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset}, key: key,
		held: online.HeldOut(online.HoldoutKey(m.Partition, m.Offset), l.p.cfg.Learner.Holdout)})
	l.p.met.OutPending.Set(float64(len(s.meta) + len(s.pend)))
	if len(s.meta) >= l.p.cfg.Learner.Batch {
		l.writeScores(l.enq)
	}
}

// score turns the queued messages into records with the served version
// (the one served when they were handled: versions change only after
// writeScores), then adds the held-out rows' residuals to the window: a
// row is never in the reference it is ranked against.
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
		var err error
		s.proj, s.res = grow(s.proj, n*k), grow(s.res, n)
		_, res, err = m.Score(s.proj, s.res, s.x)
		if errors.Is(err, snapshot.ErrCentred) {
			if !s.centred {
				p.log.Warn().Str("output.topic", p.cfg.Output.Topic).Msg("the model is centred (learner.center, or a two-view model without uncentered: true): records carry projections, with residual and novelty null")
				s.centred = true
			}
			if _, err = m.Project(s.proj, s.x); err != nil {
				p.log.Error().Err(err).Msg("output: projection failed; records without a model")
				m = nil
			}
		} else if err != nil {
			// Validated rows; an error is a bug: say so, write the
			// records without numbers rather than lose them.
			p.log.Error().Err(err).Msg("output: scoring failed; records without a model")
			m = nil
		}
	}
	for i, mt := range s.meta {
		r := output.Record{Source: mt.src, Key: mt.key, Residual: math.NaN(), Novelty: math.NaN()}
		if m != nil {
			r.HasModel, r.Incarnation, r.Version = true, m.Header().Incarnation, m.Header().Version()
			r.Projection = s.proj[i*k : (i+1)*k]
			if res != nil {
				r.Residual = res[i]
				if q, ok := m.Novelty(res[i]); ok {
					r.Novelty, r.Novel = q, q >= p.cfg.Output.NoveltyQuantile
				}
			}
		}
		s.pend = append(s.pend, r.Encode())
		if r.Novel {
			p.met.OutNovel.Inc()
		}
	}
	if res != nil {
		for i, mt := range s.meta {
			if mt.held {
				s.win.Push(res[i])
			}
		}
	}
	s.x, s.meta = s.x[:0], s.meta[:0]
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
	for len(s.pend) > 0 {
		err := s.prod.Write(ctx, s.pend)
		if err == nil {
			p.met.OutRecords.Add(float64(len(s.pend)))
			s.pend = s.pend[:0]
			p.met.OutPending.Set(0)
			p.mu.Lock()
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
