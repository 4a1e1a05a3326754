package pipeline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/streamkpca/streamkpca/ingest"
	"github.com/streamkpca/streamkpca/online"
	"github.com/streamkpca/streamkpca/publish"
	"github.com/streamkpca/streamkpca/snapshot"
)

// loop is the state of the learning loop (owned by Run's goroutine).
type loop struct {
	p      *Pipeline
	batch  []float64
	batchY []float64
	rows   int
	// heldX, heldY: the batch's held-out rows (learner.holdout), also in
	// batch, scored before the batch is learned.
	heldX, heldY []float64
	heldRows     int
	// pace sets the fraction of the stream learned (load shedding) and
	// whether the model may grow; holding: growth is held now.
	pace    *pace
	holding bool
	// growing: the budget has grown past learner.max_features
	// (learner.budget: stream); capped: it reached learner.max_model_bytes.
	growing, capped bool
	sinceSnap       int
	lastSnap        time.Time
	lastCut         *snapshot.Snapshot
	// model is the newest served Model, whose blocks the next one reuses.
	model *snapshot.Model
	// held: the pending rows could not start the model; they stay
	// pending until more data makes them learnable. heldAt: the rows of
	// the last attempt (the next waits for a batch more).
	held   bool
	heldAt int
	// fatal: the configuration cannot learn this stream; Run stops.
	fatal error
	// behind: the pace said last that the loop falls behind whatever it
	// sheds (status.Behind).
	behind bool
	// linger is Run's timer for partial batches.
	linger *time.Timer
	// run is Run's context: its end is the stop signal.
	run context.Context
	// enq bounds a dead letter's wait for room in the queue: it ends at
	// the stop signal or Kill.
	enq context.Context
	// pre holds the first messages while the stream's dimension is
	// undecided (deciding); decided: it no longer is.
	pre     []ingest.Parsed
	decided bool
	// hints watches for a stream refused for one reason (hint.go).
	hints badHints
	// replay: the window of recent learned rows the loop revisits while
	// the stream leaves it idle (online.Window; nil: off); revised: a
	// revisit changed the model since the last snapshot.
	replay  *online.Window
	revised bool
}

// outcome feeds the hint watch one handled message (reason "" when
// good), logging a new hint and keeping it for /readyz and the status
// page.
func (l *loop) outcome(reason string, value []byte) {
	p := l.p
	hint, done := l.hints.seen(reason, value, p.cfg.Kafka.Format)
	if !done {
		return
	}
	p.mu.Lock()
	was := p.led.status.Hint
	p.led.status.Hint = hint
	p.mu.Unlock()
	if hint != "" && hint != was {
		p.log.Warn().Str("topic", p.cfg.Kafka.Topic).Msg(hint)
	}
}

// deciding reports whether m waits in pre for the stream's dimension to
// be decided: with kafka.dim unset and no model, one instance, the first
// batch's most common dimension is the stream's (decide), so a stray
// first message of another dimension is dead-lettered instead of fixing
// the dimension for the whole good stream.
func (l *loop) deciding(m ingest.Parsed) bool {
	p := l.p
	if l.decided {
		return false
	}
	if p.in.adm.Decided() || l.model != nil || p.clu != nil {
		l.decided = true
		return false
	}
	l.pre = append(l.pre, m) // all, in order: handle takes offsets in order
	return true
}

// decide fixes the stream's dimension as the most common among the
// messages in pre (ingest.Admission.Decide) and returns them, to be
// handled in order.
func (l *loop) decide() []ingest.Parsed {
	pre := l.pre
	l.pre, l.decided = nil, true
	best, voters, with := l.p.in.adm.Decide(len(pre), func(i int) ([]float64, []float64, error) { return pre[i].X, pre[i].Y, pre[i].Err })
	if voters > 0 && with < voters {
		l.p.log.Warn().Int("dimension", best).Int("of", voters).Int("with_it", with).
			Msg("the first batch's messages differ in dimension: the most common is the stream's (set kafka.dim to fix it); the others are dead-lettered")
	}
	return pre
}

// maxHeldBatches bounds the rows held while the model cannot start, in
// batches (and at least a block and a batch, which a landmark model
// needs to start): past it the model cannot start from this stream's
// first rows (a constant stream without learner.bandwidth) and Run stops
// with that error, nothing committed.
const maxHeldBatches = 8

// holdRows is how many rows the loop holds at most while the model
// cannot start.
func (l *loop) holdRows() int {
	c := l.p.cfg.Learner
	return max(maxHeldBatches*c.Batch, c.Block+c.Batch)
}

// full reports whether the loop must not take more messages.
func (l *loop) full() bool { return l.held && l.rows >= l.holdRows() }

// due reports whether the pending rows are to be learned now: a full
// batch, and while the model cannot start, a batch more than the last
// attempt had (each attempt costs the median trick's O(512²·d)), or all
// the rows it may hold.
func (l *loop) due() bool {
	b := l.p.cfg.Learner.Batch
	return l.rows >= b && (!l.held || l.rows >= l.heldAt+b || l.rows >= l.holdRows())
}

// handle decodes one message into the batch or dead-letters it. It reports
// whether the message started a new partial batch.
func (l *loop) handle(ctx context.Context, pm ingest.Parsed) bool {
	p := l.p
	m := pm.Msg
	if !p.coord().takes(pm.Generation, m.Partition) {
		p.met.Duplicates.Inc()
		return false
	}
	p.mu.Lock()
	next, seen := p.led.consumed[m.Partition]
	if pm.Rewind && seen && m.Offset < next {
		// The consumer found the partition past its end (a topic
		// created again) and reads it from its first offset: new
		// messages, not duplicates.
		p.log.Info().Int("partition", m.Partition).Int64("from", m.Offset).Int64("was", next).Msg("kafka: the partition is read again from its first offset; its offsets name new messages")
		p.led.shed.rewind(m.Partition)
		seen = false
	}
	if seen && m.Offset < next {
		p.mu.Unlock()
		p.met.Duplicates.Inc()
		return false
	}
	p.led.consumed[m.Partition] = m.Offset + 1
	p.led.status.Consumed++
	p.mu.Unlock()
	x, y, err := p.in.adm.Admit(pm.X, pm.Y, pm.Err)
	if err != nil {
		// A full queue (the topic refusing writes, the spill full) waits
		// until the stop or Kill, not past them: the stop's final
		// snapshot then waits for the dead letters, and is not stored
		// while they are not, so a restart reads these messages again.
		ectx := ctx
		if l.enq != nil {
			ectx = l.enq
		}
		reason, qerr := p.in.adm.Refuse(ectx, m, err)
		p.met.BadMessages.WithLabelValues(reason).Inc()
		p.mu.Lock()
		p.led.status.Bad++
		if p.led.status.BadByReason == nil {
			p.led.status.BadByReason = map[string]uint64{}
		}
		p.led.status.BadByReason[reason]++
		p.mu.Unlock()
		p.log.Warn().Str("reason", reason).Int("partition", m.Partition).Int64("offset", m.Offset).Err(err).Msg("bad message dead-lettered")
		l.outcome(reason, m.Value)
		if qerr != nil {
			p.met.DeadLetterErrs.Inc()
			p.log.Error().Err(qerr).Int("partition", m.Partition).Int64("offset", m.Offset).Msg("dead letter not queued (shutting down); the message is counted and logged")
		}
		return false
	}
	n0, m0 := len(l.batch), len(l.batchY)
	l.batch, l.batchY = append(l.batch, x...), append(l.batchY, y...)
	l.outcome("", nil)
	l.scoreLater(m, l.batch[n0:], l.batchY[m0:])
	defer l.scoreIfMany()
	key := online.HoldoutKey(m.Partition, m.Offset)
	if !l.pace.keep(key) {
		// Shed to keep up: covered by the offsets, not learned.
		l.batch, l.batchY = l.batch[:n0], l.batchY[:m0]
		p.coord().shed()
		p.met.Shed.Inc()
		p.mu.Lock()
		p.led.status.Shed++
		p.led.shed.shed(m.Partition, m.Offset)
		p.mu.Unlock()
		return false
	}
	if online.HeldOut(key, p.cfg.Learner.Holdout) {
		l.heldX, l.heldY = append(l.heldX, l.batch[n0:]...), append(l.heldY, l.batchY[m0:]...)
		l.heldRows++
	}
	l.scoreInBatch(l.rows)
	l.rows++
	return l.rows == 1
}

// dropBatch empties the batch and its held-out rows: after it is learned
// or, in cluster mode, given up (the group's offsets say where its rows
// are read again).
func (l *loop) dropBatch() {
	l.batch, l.batchY, l.rows = l.batch[:0], l.batchY[:0], 0
	l.heldX, l.heldY, l.heldRows = l.heldX[:0], l.heldY[:0], 0
}

// consume handles the messages of ms in order while the loop may take
// them, learning each full batch (and snapshotting on the cadence), and
// releases their budget; it returns the messages it did not take.
func (l *loop) consume(work context.Context, ms []ingest.Parsed, sem *semaphore.Weighted, linger *time.Timer) []ingest.Parsed {
	p := l.p
	for i, m := range ms {
		if l.full() || l.fatal != nil {
			return ms[i:]
		}
		if l.deciding(m) { // its budget is released when it is handled, after the decision
			linger.Reset(p.cfg.Learner.Linger)
			if len(l.pre) < p.cfg.Learner.Batch {
				continue
			}
			return l.consume(work, append(l.decide(), ms[i+1:]...), sem, linger)
		}
		sem.Release(m.Bytes)
		p.in.ahead.Add(-1)
		if l.handle(work, m) || l.held {
			linger.Reset(p.cfg.Learner.Linger)
		}
		if l.due() {
			l.learn()
			if !p.coord().idle() { // a cluster member steps every linger, rows or none
				linger.Stop()
			}
			// With output.topic the first version is cut at once: the
			// records before it carry no model.
			if l.sinceSnap >= l.everyBatches() || (p.out != nil && l.model == nil) {
				l.snapshot(false)
			}
		}
	}
	return nil
}

// everyBatches is how many batches a version lasts: snapshot.every_batches,
// or output.every_batches when that is sooner and records are written.
func (l *loop) everyBatches() int {
	n := l.p.cfg.Snapshot.EveryBatches
	if l.p.out != nil {
		n = min(n, l.p.cfg.Output.EveryBatches)
	}
	return n
}

// learn feeds the pending batch to the learner.
func (l *loop) learn() {
	p := l.p
	if !p.coord().stepNow(l.rows) {
		return
	}
	if p.coord().idle() {
		defer l.linger.Reset(p.cfg.Learner.Linger)
	}
	// Test, then train: the batch's records are scored by the version
	// served (which never learned these rows; from the features the
	// step computes, where it shows them) and stored before any
	// snapshot covers them — here, before the next batch (until the stop
	// signal: then the final snapshot waits for them, within
	// shutdown_timeout).
	t0 := time.Now()
	l.assess()
	done := l.scoreFromStep()
	err := p.learner.update(l.batch, l.batchY, l.rows)
	done()
	took := time.Since(t0)
	l.writeScores(l.enq)
	p.met.BatchSeconds.Observe(took.Seconds())
	if err != nil && p.coord().failed(l, err) {
		return
	}
	if errors.Is(err, online.ErrConfig) {
		// No data can fix it (a linear kernel with k > d, say): stop,
		// with nothing committed, rather than consume and learn nothing.
		l.fatal = err
		return
	}
	if err != nil && !errors.Is(err, online.ErrDiverged) && p.learner.step() == 0 {
		// The model cannot start from these rows yet (one lone point or
		// all points equal: the median trick finds no bandwidth; fewer
		// rows than a landmark block). Keep them, uncommitted, and retry
		// with more: no sample is skipped. With all the rows it may hold
		// it never will: stop, nothing committed, and say why.
		if l.rows >= l.holdRows() {
			l.fatal = fmt.Errorf("pipeline: the model cannot start from the stream's first %d rows: %w; nothing is committed (set learner.bandwidth for a stream this uniform)", l.rows, err)
			return
		}
		if !l.held {
			p.log.Warn().Err(err).Int("rows", l.rows).Msg("cannot start the model from the rows so far; keeping them and waiting for more data (set learner.bandwidth if the stream really is this uniform)")
		}
		l.held, l.heldAt = true, l.rows
		return
	}
	l.held = false
	p.met.Samples.Add(float64(l.rows))
	switch {
	case err == nil && l.rows > 0: // a cluster member's step may have none
		p.met.Batches.Inc()
		l.replay.Add(l.batch, l.batchY, l.rows)
	case err == nil:
	case errors.Is(err, online.ErrDiverged):
		p.met.Rejected.Inc()
		p.log.Warn().Err(err).Msg("batch rejected by the divergence guard; step size lowered")
	default:
		// Validated upstream; an error here is a bug.
		p.log.Error().Err(err).Int("rows", l.rows).Msg("batch not learned")
	}
	p.mu.Lock()
	p.coord().covered(p, p.led.learned)
	p.led.status.Samples, p.led.status.Step, p.led.status.Features = p.learner.samplesSeen(), p.learner.step(), p.learner.features()
	p.led.status.Bandwidth, p.led.status.Budget = p.learner.bandwidth(), p.learner.budget()
	samples := p.led.status.Samples
	p.mu.Unlock()
	lag := p.lag() // not under p.mu: a source's Lag may take the loop's lock (TestStatusDoesNotHoldTheLockAcrossLag)
	p.mu.Lock()
	p.recordRate(time.Now(), samples, lag)
	p.mu.Unlock()
	p.met.Features.Set(float64(p.learner.features()))
	p.met.Budget.Set(float64(p.learner.budget()))
	if err == nil {
		l.keepUp(took)
	}
	l.dropBatch()
	l.sinceSnap++
	p.coord().stepped(l)
}

// keepUp updates the fraction of the stream learned after a batch that
// took took to learn (see pace), holds the learner's growth while the
// stream leaves no room for it, and says when shedding and growth start
// and stop.
func (l *loop) keepUp(took time.Duration) {
	p := l.p
	if l.pace == nil || l.pace.off {
		return
	}
	backlog := p.lag()
	p.mu.Lock()
	seen := int64(p.led.status.Consumed)
	before := p.led.status.LearnedFraction
	p.mu.Unlock()
	f := l.pace.observe(p.coord().capacity(l.rows, p.cfg.Learner.Batch), took.Seconds(), seen, backlog, time.Now())
	p.met.LearnedFraction.Set(f)
	p.mu.Lock()
	p.led.status.LearnedFraction = f
	p.mu.Unlock()
	switch {
	case f < 1 && before >= 1:
		p.log.Warn().Float64("learned_fraction", f).Float64("stream_msgs_per_s", l.pace.rate).Float64("learner_s_per_msg", l.pace.cost).
			Float64("record_s_per_msg", l.pace.record).Float64("shed_score_s_per_msg", l.pace.shed).
			Int64("backlog", backlog).Int("features", p.learner.features()).
			Msg("the stream is faster than the learner: learning a fraction of its messages (the rest are covered, not learned) to keep lag bounded (learner.load_shedding)")
	case f >= 1 && before < 1:
		p.log.Info().Int64("backlog", backlog).Msg("keeping up again: learning every message")
	}
	if behind := l.pace.behind(); behind != l.behind {
		l.behind = behind
		p.mu.Lock()
		p.led.status.Behind = behind
		p.mu.Unlock()
		if behind {
			p.met.Behind.Set(1)
			p.log.Error().Float64("learned_fraction", f).Float64("stream_msgs_per_s", l.pace.rate).Int64("backlog", backlog).
				Float64("record_s_per_msg", l.pace.record).Float64("shed_score_s_per_msg", l.pace.shed).
				Msg("falling behind the stream whatever is shed: every message is still read and scored, and the lag grows (add partitions and instances, or lower learner.max_features; output.topic scores every message)")
		} else {
			p.met.Behind.Set(0)
			p.log.Info().Int64("backlog", backlog).Msg("no longer falling behind the stream")
		}
	}
	// The model's growth follows the stream: held while the stream leaves
	// no room, the budget raised while it leaves the learner idle
	// (learner.budget). In a group a member does not hold or raise alone:
	// it votes (clusterLearner.holdGrowth, raiseBudget), and the group
	// holds while any member holds and raises to the least any member
	// asks, at the same step on every member (cluster.Member.Pace).
	if hold := !l.pace.grow(); hold != l.holding {
		l.holding = hold
		p.learner.holdGrowth(hold)
		if hold {
			p.log.Info().Int("features", p.learner.features()).Float64("stream_msgs_per_s", l.pace.rate).
				Msg("the model stops growing: more features would make steps too slow for the stream (learner.max_features is the ceiling, the stream the limit)")
		} else {
			p.log.Info().Int("features", p.learner.features()).Msg("the stream leaves room again: the model grows")
		}
	}
	l.growBudget()
}

// growBudget raises the feature budget by a block when the model has
// reached it and the stream leaves the learner idle (learner.budget:
// stream; see pace.room), up to learner.max_model_bytes.
func (l *loop) growBudget() {
	p := l.p
	if p.cfg.Learner.Budget != "stream" || l.holding || l.capped || p.learner.features() < p.learner.budget() || !l.pace.room() {
		return
	}
	n, ok := p.learner.raiseBudget(p.cfg.Learner.MaxModelBytes, p.cfg.Learner.Batch)
	p.met.Budget.Set(float64(n))
	switch {
	case !ok:
		l.capped = true
		p.log.Info().Int("budget", n).Int64("max_model_bytes", p.cfg.Learner.MaxModelBytes).
			Msg("the feature budget stops growing: learner.max_model_bytes reached (or the learner keeps a fixed budget)")
	case !l.growing:
		l.growing = true
		p.log.Info().Int("budget", n).Float64("stream_msgs_per_s", l.pace.rate).Float64("learner_s_per_msg", l.pace.cost).
			Float64("record_s_per_msg", l.pace.record).Float64("shed_score_s_per_msg", l.pace.shed).
			Msg("the stream leaves the learner idle: the feature budget grows past learner.max_features (learner.budget: stream)")
	}
}

// assess scores the served model on the batch's held-out rows before the
// batch is learned: the quality figure, and the change detector that
// restarts the model (learner.forget). The rows are scored once: a batch
// that is not learned now keeps them for learning, not for scoring.
func (l *loop) assess() {
	p := l.p
	if l.heldRows == 0 {
		return
	}
	switchesBefore, rollbacksBefore := p.learner.following()
	changed, err := p.learner.assess(l.heldX, l.heldY, l.heldRows)
	switches, rollbacks := p.learner.following()
	switched, withdrawn := switches > switchesBefore, rollbacks > rollbacksBefore
	if switched {
		changed = false // a challenger replaced the model: not a detected change
	}
	l.heldX, l.heldY, l.heldRows = l.heldX[:0], l.heldY[:0], 0
	if err != nil {
		// Validated upstream, like update's rows; an error here is a bug,
		// and the rows are learned all the same.
		p.log.Error().Err(err).Msg("held-out rows not scored")
		return
	}
	q := p.learner.quality()
	if q != nil {
		p.met.Quality.Set(q.Score)
		if q.Fit > 0 && q.Challenger > 0 { // between tests there is no figure: the gauges keep the last
			p.met.Fit.Set(q.Fit)
			p.met.FitChallenger.Set(q.Challenger)
			p.met.Evidence.Set(q.Evidence)
		}
	}
	p.mu.Lock()
	candidateBefore := p.led.status.Quality != nil && p.led.status.Quality.Candidate
	p.led.status.Quality = q
	if changed {
		p.led.status.Changes++
	}
	p.led.status.Switches, p.led.status.Rollbacks = switches, rollbacks
	p.mu.Unlock()
	if q != nil && q.Candidate && !candidateBefore && !switched {
		p.log.Info().Uint64("step", p.learner.step()).Float64("level", q.Level).
			Msg("following: a challenger learned on the recent stream fits it better than a learner of the same size that learned all of it; a candidate of the model's budget starts on the stream and replaces the model if a test at this level finds it better (learner.forget: follow)")
	}
	if switched {
		p.met.Switches.Inc()
		p.log.Info().Uint64("step", p.learner.step()).Uint64("switches", switches).
			Msg("the stream has moved: a learner on its recent points fits the held-out points better than the model by a test at learner.follow_alpha and replaces it (learner.forget: follow; detect or off keeps the model)")
	}
	if withdrawn {
		p.met.Rollbacks.Inc()
		p.log.Info().Uint64("step", p.learner.step()).Uint64("rollbacks", rollbacks).
			Msg("following: the candidate did not fit the held-out points better than the model in time and is withdrawn; the model stays served (learner.forget: follow)")
	}
	if switched || changed && p.cfg.Learner.Forget != string(online.ForgetOff) && !p.learner.challengesOnChange() {
		l.replay.Clear() // the model is new: the rows before are not its stream's
	}
	if changed {
		p.met.Changes.Inc()
		ev := p.log.Warn().Uint64("step", p.learner.step())
		if q != nil {
			ev = ev.Float64("quality", q.Score)
		}
		switch {
		case p.cfg.Learner.Forget == string(online.ForgetOff):
			ev.Msg("the stream changed: the held-out score dropped (learner.forget is off: the model is kept)")
		case p.learner.challengesOnChange():
			ev.Msg("the stream changed: the held-out score dropped; a challenger starts on the pairs from here and replaces the model if it fits them better (learner.forget: detect restarts the model instead)")
		default:
			ev.Msg("the stream changed: the held-out score dropped; the model restarts with this batch (learner.forget: off keeps it)")
		}
	}
}

// snapshot persists the model (if it changed), serves it, hands it to the
// publisher and commits the offsets it covers.
func (l *loop) snapshot(final bool) {
	p := l.p
	if p.learner.step() == 0 || (l.sinceSnap == 0 && !l.revised && !final) {
		return
	}
	if l.sinceSnap == 0 && l.lastCut != nil && l.lastCut.Header.Step == p.learner.step() {
		l.revised = false
		return // nothing new since the last snapshot
	}
	// No snapshot covers a message whose record is not stored.
	octx, cancel := l.enq, context.CancelFunc(func() {})
	if final || octx == nil {
		octx, cancel = p.stopContext(30 * time.Second)
	}
	err := l.writeScores(octx)
	cancel()
	if err != nil {
		p.met.SnapshotErrors.Inc()
		p.log.Error().Err(err).Str("output.topic", p.cfg.Output.Topic).Msg("records not stored on the output topic; snapshot postponed (a restart reads their messages again)")
		return
	}
	snap, ok := p.coord().cut(l)
	if !ok || !l.storable(final) {
		return
	}
	if p.out != nil {
		// The version's novelty reference: its own residuals on the last
		// held-out rows.
		if m, err := snapshot.NewModel(snap.Served(), snapshot.ModelOptions{Reuse: l.model, Shared: p.learner.generated(), CacheBytes: p.mem.servedCache}); err == nil {
			if ref := p.out.reference(m); ref != nil {
				snap.Header.Novelty = &snapshot.Novelty{Residuals: ref}
			}
		}
	}
	path, data, ok := l.persist(snap)
	if !ok {
		return
	}
	l.serve(snap, data)
	p.log.Info().Str("file", path).Uint64("version", snap.Header.Version()).Uint64("samples_seen", snap.Header.SamplesSeen).
		Int("features", snap.Header.Features()).Floats64("eigenvalues", snap.Header.Diagnostics.Eigenvalues).Msg("snapshot persisted")
	if !p.coord().leads() {
		return // in a group, the lowest-ranked member publishes and commits
	}
	l.handOff(snap, data)
}

// storable reports whether a snapshot may be stored now: the dead
// letters of the messages its offsets cover are stored and the snapshot
// directory is locked. Otherwise it is postponed, counted and said.
func (l *loop) storable(final bool) bool {
	p := l.p
	// The offsets cover dead-lettered messages: their writes must be
	// stored before the snapshot says so. While the dead-letter topic
	// refuses them the queue retries and snapshots wait (learning goes
	// on; a restart re-reads from the last snapshot, bad messages too).
	if !final && p.deadLetters().Failing() {
		p.met.SnapshotErrors.Inc()
		p.log.Warn().Msg("dead-letter topic refusing writes; snapshot postponed until the dead letters are stored")
		return false
	}
	fctx, cancel := p.stopContext(30 * time.Second) // the stop's deadline, when stopping
	err := p.deadLetters().Flush(fctx)
	cancel()
	if err != nil {
		p.met.SnapshotErrors.Inc()
		p.log.Error().Err(err).Msg("dead letters not flushed; snapshot postponed")
		return false
	}
	if p.dir.lock == nil { // the directory could not be locked at start
		lock, err := p.dir.store.Lock()
		if err != nil {
			p.met.SnapshotErrors.Inc()
			p.log.Error().Err(err).Msg("snapshot directory not locked; snapshot postponed, learning continues")
			return false
		}
		p.locked(lock)
	}
	return true
}

// persist writes snap to the store and returns its file and the bytes
// to serve and publish (learner state left out); false when either
// failed (counted and logged; the next snapshot retries).
func (l *loop) persist(snap *snapshot.Snapshot) (string, []byte, bool) {
	p := l.p
	path, data, err := p.dir.store.Save(snap)
	l.lastSnap = time.Now()
	if err != nil {
		p.met.SnapshotErrors.Inc()
		p.log.Error().Err(err).Msg("snapshot write failed; learning continues and the next snapshot retries")
		return "", nil, false
	}
	l.sinceSnap, l.revised = 0, false
	l.lastCut = snap
	if data, err = publish.PublishedBytes(snap, data); err != nil {
		p.met.SnapshotErrors.Inc()
		p.log.Error().Err(err).Msg("snapshot persisted but not encoded for serving; the next snapshot retries")
		return "", nil, false
	}
	return path, data, true
}

// serve makes a persisted snapshot the served model (HTTP and NATS
// queries) and updates the metrics, the status page and its history.
func (l *loop) serve(snap *snapshot.Snapshot, data []byte) {
	p := l.p
	p.met.Snapshots.Inc()
	p.met.Version.Set(float64(snap.Header.Version()))
	for i, e := range snap.Header.Diagnostics.Eigenvalues {
		p.met.Eigenvalues.WithLabelValues(strconv.Itoa(i)).Set(e)
	}
	// The served model shares the learner's generated blocks, and the
	// previous version's: a block is generated here, on the loop, only
	// when neither holds it (after a restart, say), and held once.
	m, err := snapshot.NewModel(snap.Served(), snapshot.ModelOptions{Reuse: l.model, Shared: p.learner.generated(), CacheBytes: p.mem.servedCache})
	if err == nil {
		p.pub.cur.Set(m, data)
		l.model = m
	} else {
		// Persisted (and published below) but not served: say so, with
		// the version still served.
		served := uint64(0)
		if old, _ := p.pub.cur.Get(); old != nil {
			served = old.Header().Version()
		}
		p.log.Error().Err(err).Uint64("version", snap.Header.Version()).Uint64("served_version", served).
			Msg("the new version cannot be served (its model does not build); HTTP and NATS queries keep the previous one")
	}
	eig := snap.Header.Diagnostics.Eigenvalues
	p.mu.Lock()
	p.led.status.Version, p.led.status.LastSnapshot, p.led.status.Eigenvalues = snap.Header.Version(), l.lastSnap, eig
	p.led.status.Restart = snap.Header.Schedule.Restart
	if len(eig) > 0 {
		hp := historyPoint{Samples: snap.Header.SamplesSeen, Eigenvalues: eig}
		if o := p.out; o != nil && p.led.status.OutRecords > o.lastRecords {
			hp.Records = p.led.status.OutRecords - o.lastRecords
			hp.Novel = float64(p.led.status.OutNovel-o.lastNovel) / float64(hp.Records)
			o.lastRecords, o.lastNovel = p.led.status.OutRecords, p.led.status.OutNovel
		}
		p.led.history = append(p.led.history, hp)
		if len(p.led.history) > historyLen {
			p.led.history = p.led.history[len(p.led.history)-historyLen:]
		}
	}
	p.mu.Unlock()
}

// handOff gives a persisted snapshot to the publisher (replacing an
// unpublished older one: only the newest matters) and commits the
// offsets it covers to Kafka (a hint for tooling: the snapshot is the
// record).
func (l *loop) handOff(snap *snapshot.Snapshot, data []byte) {
	p := l.p
	p.pub.dist.Offer(snap.Served(), data)
	commit := map[int]int64{}
	for _, o := range snap.Header.Offsets {
		if o.Topic == p.cfg.Kafka.Topic {
			commit[o.Partition] = o.Next
		}
	}
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.in.src.Commit(cctx, map[string]map[int]int64{p.cfg.Kafka.Topic: commit}); err != nil {
		p.log.Debug().Err(err).Msg("offset commit (a hint for tooling) failed")
	}
}

func sortOffsets(o []snapshot.Offset) {
	slices.SortFunc(o, func(a, b snapshot.Offset) int { return cmp.Compare(a.Partition, b.Partition) })
}

// replayDue reports whether the loop may revisit a batch now: replay is
// on (newLoop: only for a revisiter), the model has started and holds no
// pending rows it cannot start from, and the stream leaves room —
// nothing shed, growth not held, the backlog not growing (pace), and
// less than a batch behind (a backlog, after a restart or an outage, is
// learned first: while it drains, parsing can fall behind the learner
// for a moment, and a revisit then would delay the stream). The caller
// checks that no parsed message waits.
func (l *loop) replayDue() bool {
	b := l.p.cfg.Learner.Batch
	if l.held || l.fatal != nil || !l.replay.Due(b) {
		return false
	}
	if pc := l.pace; pc != nil && !pc.off && (pc.frac < 1 || l.holding || pc.growing(paceWindows)) {
		return false
	}
	return l.p.lag() < int64(b)
}

// revisit learns one batch drawn from the window (learner.replay).
func (l *loop) revisit() {
	p, r := l.p, l.replay
	b := p.cfg.Learner.Batch
	x, y := r.Draw(b)
	t0 := time.Now()
	err := p.learner.(revisiter).revisit(x, y, b)
	p.met.ReplaySeconds.Add(time.Since(t0).Seconds())
	switch {
	case err == nil:
		p.met.Revisited.Add(float64(b))
		l.revised = true
	case errors.Is(err, online.ErrDiverged):
		p.met.Rejected.Inc()
		p.log.Warn().Err(err).Msg("a revisited batch was rejected by the divergence guard; step size lowered")
	default:
		// The rows were learned before: an error here is a bug. Replay
		// stops; learning goes on.
		l.replay = nil
		p.log.Error().Err(err).Msg("revisiting learned rows failed; replay is off until the next start (learner.replay)")
		return
	}
	p.mu.Lock()
	p.led.status.Step, p.led.status.Features, p.led.status.Revisited = p.learner.step(), p.learner.features(), r.Revisited()
	p.mu.Unlock()
	p.met.Features.Set(float64(p.learner.features()))
}
