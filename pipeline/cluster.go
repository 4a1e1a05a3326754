package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/streamkpca/streamkpca/cluster"
	"github.com/streamkpca/streamkpca/configs"
	"github.com/streamkpca/streamkpca/features"
	"github.com/streamkpca/streamkpca/ingest"
	"github.com/streamkpca/streamkpca/online"
	"github.com/streamkpca/streamkpca/snapshot"
	"github.com/streamkpca/streamkpca/transport"
)

// Cluster mode (cluster.enabled): the instances of the consumer group
// learn one model (package cluster). Per generation of the group:
//
//  1. The consumer calls onAssign before reading its partitions; the loop
//     takes the event (rejoin): it drops the rows of earlier generations,
//     finds the generation's members (transport.Roster), opens the
//     generation's transport.Exchange and rejoins the group's model, whose
//     offsets become where every partition is read from.
//  2. Each learn is a cluster step (cluster.Member.Step) with this
//     member's rows and the offsets after them; a member without rows
//     steps every learner.linger, so that the others never wait longer.
//  3. Snapshots hold the state every member has reached (Member.Confirmed)
//     with the union of the offsets; every member keeps its own, the
//     lowest-ranked one publishes them and commits the offsets. When the
//     cadence asks for a snapshot, the next step takes the state before
//     it (confirmed by that step's round) and the snapshot after the step
//     persists it: one step behind, and never ahead of the group.
//  4. A failed step (a member gone) leaves this member idle until the next
//     generation: the consumer group rebalances when the gone member's
//     session ends; when no member left (a round lost), this member forces
//     a rebalance.
type clusterState struct {
	learner *clusterLearner
	events  chan genEvent
	ex      *transport.Exchange
	gen     int32
	ready   bool // a member of the current generation's model
	rank0   bool
	mine    map[int]bool // this generation's partitions
	// confirmed is a state every member holds, as a snapshot, taken when
	// one is due (a snapshot costs a copy of the model: it is not taken
	// every step); saved is the step of the last one persisted.
	confirmed *snapshot.Snapshot
	saved     uint64
	due       bool
}

// genEvent is a generation handed from the consumer to the loop; done
// returns the rejoin's outcome to the consumer.
type genEvent struct {
	ctx  context.Context
	a    ingest.Assignment
	done chan error
}

// groupSource is what cluster mode needs of the consumer.
type groupSource interface {
	Partitions(ctx context.Context) (int, error)
	Rebalance() error
	StepAside(ready func(context.Context) error) error
}

// onAssign is the consumer's ingest.ConsumerConfig.OnAssign in cluster
// mode: the loop rejoins before the partitions are read.
func (p *Pipeline) onAssign(ctx context.Context, a ingest.Assignment) error {
	ev := genEvent{ctx: ctx, a: a, done: make(chan error, 1)}
	select {
	case p.clu.events <- ev:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-ev.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// clusterLearner is the loop's learner in cluster mode: the group's
// model, through its cluster.Member.
type clusterLearner struct {
	cfg   online.Config
	local *snapshot.Snapshot // restored at start, until the first Join
	m     *cluster.Member
	// stepCtx ends with the generation; next returns this member's
	// offsets after the rows of the step.
	stepCtx context.Context
	next    func() cluster.Offsets
	// stored, before a step, stores this member's dead letters (the
	// topic or the spill): the step's offsets cover them, and the group's
	// snapshot and commit (by another member, maybe) must never cover a
	// dead letter only this member's memory holds.
	stored func(context.Context) error
	// changed: a step found a change of the stream, not yet reported.
	changed bool
	// shed: messages this member shed since its last step, for the
	// member to count in the group's (cluster.Member.Shed).
	shed uint64
	// hold and want are this member's vote on the group's growth
	// (cluster.Member.Pace), sent with each step.
	hold bool
	want int
}

var errNotMember = errors.New("pipeline: not a member of the current generation")

// rosterPatience is how long a generation's members may take to announce
// themselves before the log says which partitions nobody has announced.
const rosterPatience = 10 * time.Second

func (c *clusterLearner) kpca() *online.KPCA {
	if c.m == nil {
		return nil
	}
	return c.m.Learner()
}

func (c *clusterLearner) update(x, _ []float64, rows int) error {
	if c.m == nil || c.stepCtx == nil {
		return errNotMember
	}
	var before uint64
	if l := c.kpca(); l != nil {
		before = l.Changes()
	}
	if c.stored != nil {
		if err := c.stored(c.stepCtx); err != nil {
			return fmt.Errorf("pipeline: this member's dead letters are not stored, so it cannot step (kafka.dead_letter_topic, kafka.dead_letter_spill_bytes): %w", err)
		}
	}
	c.m.Shed(c.shed)
	c.shed = 0
	c.m.Pace(c.hold, c.want)
	err := c.m.Step(c.stepCtx, x, rows, c.next())
	if l := c.kpca(); l != nil && l.Changes() > before {
		c.changed = true
	}
	return err
}

func (c *clusterLearner) snapshot() *snapshot.Snapshot {
	if c.m != nil {
		return c.m.Snapshot()
	}
	return c.local
}

func (c *clusterLearner) generated() []features.Generated {
	if l := c.kpca(); l != nil {
		return l.Generated()
	}
	return nil
}

func (c *clusterLearner) header() *snapshot.Header {
	if c.local != nil {
		return &c.local.Header
	}
	return nil
}

// either is what the member's learner says (from) or, before the group's
// first step, what the local snapshot's header says (or), else zero.
func either[T any](c *clusterLearner, from func(*online.KPCA) T, or func(*snapshot.Header) T) T {
	if l := c.kpca(); l != nil {
		return from(l)
	}
	if h := c.header(); h != nil {
		return or(h)
	}
	var zero T
	return zero
}

func (c *clusterLearner) samplesSeen() uint64 {
	return either(c, (*online.KPCA).SamplesSeen, func(h *snapshot.Header) uint64 { return h.SamplesSeen })
}

func (c *clusterLearner) step() uint64 {
	return either(c, (*online.KPCA).Step, func(h *snapshot.Header) uint64 { return h.Step })
}

func (c *clusterLearner) features() int {
	return either(c, (*online.KPCA).Features, (*snapshot.Header).Features)
}

func (c *clusterLearner) dims() (int, int) {
	return either(c, (*online.KPCA).Dim, func(h *snapshot.Header) int { return h.Views[0].Dim }), 0
}

func (c *clusterLearner) bandwidth() float64 {
	if l := c.kpca(); l != nil {
		return l.Kernel().Bandwidth
	}
	return 0
}

// assess hands the held-out rows to the member: the group's next step
// scores them with every member's (cluster.Member.HoldOut), so the score
// and a change found are the group's, and a change restarts every
// member at the same step. It reports a change the last step found.
func (c *clusterLearner) assess(x, _ []float64, rows int) (bool, error) {
	if c.m != nil {
		c.m.HoldOut(x, rows)
	}
	changed := c.changed
	c.changed = false
	return changed, nil
}

func (c *clusterLearner) quality() *snapshot.Quality {
	if l := c.kpca(); l != nil {
		return l.Quality()
	}
	return nil
}

// holdGrowth and raiseBudget are this member's vote on the group's
// growth, from its own stream (see pace): the group holds growth while
// any member would, and raises the budget to the least any member wants
// (cluster.Member.Pace), at the same step on every member. The budget is
// the group's model's.
func (c *clusterLearner) holdGrowth(hold bool) { c.hold = hold }

func (c *clusterLearner) budget() int {
	return either(c, (*online.KPCA).MaxFeatures, func(h *snapshot.Header) int { return h.MaxFeatures })
}

// raiseBudget asks the group for a block more, unless what the learner
// holds would pass maxBytes or the model cannot grow (as oneView's); the
// budget rises at the group's next step if every member asks.
func (c *clusterLearner) raiseBudget(maxBytes int64, rows int) (int, bool) {
	n := c.budget()
	l := c.kpca()
	if l == nil || !l.Grows() {
		return n, false
	}
	next, ok := nextBudget(l, maxBytes, rows)
	if !ok {
		return n, false
	}
	c.want = next
	return n, true
}

func (c *clusterLearner) twoView() bool            { return false }
func (c *clusterLearner) challengesOnChange() bool { return false }
func (c *clusterLearner) following() (uint64, uint64) {
	return either(c, (*online.KPCA).Switches, func(h *snapshot.Header) uint64 { return h.Diagnostics.Switches }),
		either(c, (*online.KPCA).Rollbacks, func(h *snapshot.Header) uint64 { return h.Diagnostics.Rollbacks })
}
func (c *clusterLearner) checkInput(x, _ []float64) error { return c.cfg.Kernel.CheckInput(x) }
func (c *clusterLearner) close() {
	if c.m != nil {
		c.m.Close()
	}
}

// rejoin makes this instance a member of ev's generation (see
// clusterState) and tells the consumer where to read.
func (l *loop) rejoin(ev genEvent) {
	p, c := l.p, l.p.clu
	cl := p.learner.(*clusterLearner)
	c.ready, cl.stepCtx = false, nil
	p.setMembers(0, ev.a.Generation)
	if c.ex != nil { // the previous generation's
		_ = c.ex.Close()
		c.ex = nil
	}
	// Rows of earlier generations: the group's offsets say where they are
	// read again, by whichever member has their partition now.
	l.dropBatch()
	l.held = false
	err := l.join(ev, cl)
	var refused *cluster.RefusedError
	switch {
	case errors.As(err, &refused):
		// Other settings than the group's: no generation can take this
		// instance. Run stops, so that it leaves the consumer group and
		// the others learn on without it.
		l.fatal = refusal(refused)
	case err != nil && l.run != nil && l.run.Err() != nil:
		p.log.Info().Int32("generation", ev.a.Generation).Msg("cluster: stopping while joining")
	case err != nil && ev.ctx.Err() != nil:
		p.log.Info().Err(err).Int32("generation", ev.a.Generation).Msg("cluster: the generation ended while joining; joining the next")
	case err != nil:
		p.log.Warn().Err(err).Int32("generation", ev.a.Generation).Msg("cluster: could not join the generation; waiting for the next")
	}
	ev.done <- err
}

// refusal is the error Run stops with when the group refused this
// instance: the differing settings by the names of the configuration.
func refusal(e *cluster.RefusedError) error {
	var b strings.Builder
	for i, d := range e.Differences {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s is %s here, %s in the group", configs.OnlineKey(d.Field), d.Here, d.Group)
	}
	return fmt.Errorf("%w: %s; every instance of a consumer group in cluster mode must have the same model settings: change this instance's to the group's (or give it its own kafka.group and model)", cluster.ErrRefused, b.String())
}

func (l *loop) join(ev genEvent, cl *clusterLearner) error {
	p, c := l.p, l.p.clu
	// The waits for the members: the generation's context, ended also by
	// a stop or a kill, so that a join waiting for members that never
	// announce does not hold up a stop.
	waits, cancel := context.WithCancel(ev.ctx)
	defer cancel()
	if l.run != nil {
		defer context.AfterFunc(l.run, cancel)()
	}
	go func() {
		select {
		case <-p.life.kill:
			cancel()
		case <-waits.Done():
		}
	}()
	r, members, err := p.roster(waits, ev)
	if r != nil {
		// Announcing goes on until every member has joined (the
		// rejoin's first round waits for all of them).
		defer r.Stop()
	}
	if err != nil {
		return err
	}
	c.gen = ev.a.Generation
	c.mine = map[int]bool{}
	for _, part := range ev.a.Partitions {
		c.mine[part] = true
	}
	if !slices.Contains(members, ev.a.Member) {
		p.log.Info().Int32("generation", ev.a.Generation).Strs("members", members).Msg("cluster: no partitions for this instance in this generation; idle")
		return nil
	}
	ex, err := transport.NewExchange(p.pub.nc, transport.ExchangeConfig{Prefix: p.cfg.NATS.Prefix, Model: p.cfg.Model,
		Generation: int64(ev.a.Generation), Members: members, Self: ev.a.Member, Timeout: p.cfg.Cluster.StepTimeout})
	if err != nil {
		return err
	}
	if cl.m == nil {
		cl.m, err = cluster.Join(ev.ctx, ex, cl.cfg, cl.local)
		if err == nil {
			cl.local = nil
			cl.m.Confirmed = p.onConfirmed
		}
	} else {
		err = cl.m.Rejoin(ev.ctx, ex)
	}
	if err != nil {
		_ = ex.Close()
		return fmt.Errorf("cluster: rejoin generation %d: %w", ev.a.Generation, err)
	}
	c.ex, c.ready, c.rank0 = ex, true, ex.Rank() == 0
	cl.stepCtx = ev.ctx
	next := cl.m.Next()[p.cfg.Kafka.Topic]
	p.mu.Lock()
	p.led.consumed, p.led.learned = map[int]int64{}, map[int]int64{}
	for part, off := range next {
		p.led.consumed[part], p.led.learned[part] = off, off
	}
	p.led.status.Samples, p.led.status.Step, p.led.status.Features = cl.samplesSeen(), cl.step(), cl.features()
	p.mu.Unlock()
	p.setMembers(len(members), ev.a.Generation)
	if l.linger != nil {
		l.linger.Reset(p.cfg.Learner.Linger) // step even without rows
	}
	p.log.Info().Int32("generation", ev.a.Generation).Strs("members", members).Int("rank", ex.Rank()).
		Uint64("step", cl.step()).Ints("partitions", ev.a.Partitions).Msg("cluster: joined the group's model")
	return nil
}

// roster announces this member's partitions of generation ev and
// returns, once the announcements cover the topic's partitions, the
// members with partitions (sorted) and the roster, which announces until
// its Stop; waits bounds the wait. A group whose partitions stay
// uncovered for rosterPatience is told what to check, and waited for.
func (p *Pipeline) roster(waits context.Context, ev genEvent) (*transport.Roster, []string, error) {
	n, err := p.in.src.(groupSource).Partitions(waits)
	if err != nil {
		return nil, nil, err
	}
	r, err := transport.StartRoster(p.pub.nc, p.cfg.NATS.Prefix, p.cfg.Model, transport.Announcement{Generation: ev.a.Generation, Member: ev.a.Member, Partitions: ev.a.Partitions})
	if err != nil {
		return nil, nil, err
	}
	wait, cancelWait := context.WithTimeout(waits, rosterPatience)
	members, err := r.Wait(wait, n)
	cancelWait()
	if err != nil && waits.Err() == nil {
		// An instance of the group without cluster.enabled (or with
		// another nats.prefix or model name) never announces itself.
		p.log.Warn().Ints("partitions", r.Uncovered(n)).Str("group", p.cfg.Kafka.Group).Int32("generation", ev.a.Generation).
			Msg("cluster: no instance has announced these partitions; is every instance of the group running with cluster.enabled and the same nats.prefix and model? Still waiting")
		members, err = r.Wait(waits, n)
	}
	return r, members, err
}

// onConfirmed is the member's cluster.Member.Confirmed: k's state is
// held by every member and covers next, of which the group shed shed
// messages. It is taken as a snapshot only when the loop wants one (due)
// and it is newer than the last persisted.
func (p *Pipeline) onConfirmed(k *online.KPCA, next cluster.Offsets, shed uint64) {
	c := p.clu
	if !c.due || k.Step() <= c.saved {
		return
	}
	s := k.Snapshot()
	s.Header.Offsets = next.List()
	s.Header.Diagnostics.Shed = shed
	c.confirmed, c.due = s, false
}

// myOffsets is this member's next offsets for the step: those of its
// partitions, dead-lettered messages included.
func (p *Pipeline) myOffsets() cluster.Offsets {
	o := cluster.Offsets{}
	p.mu.Lock()
	defer p.mu.Unlock()
	for part, next := range p.led.consumed {
		if p.clu.mine[part] {
			if o[p.cfg.Kafka.Topic] == nil {
				o[p.cfg.Kafka.Topic] = map[int]int64{}
			}
			o[p.cfg.Kafka.Topic][part] = next
		}
	}
	return o
}

// setMembers reports the group this instance steps with (Status.Members,
// the streamkpca_cluster_members gauge).
func (p *Pipeline) setMembers(n int, gen int32) {
	p.mu.Lock()
	p.led.status.Members, p.led.status.Generation = n, gen
	p.mu.Unlock()
	p.met.Members.Set(float64(n))
}

// clusterStepFailed leaves this member idle after a failed step until the
// next generation, forcing one when the current is still on.
func (l *loop) clusterStepFailed(err error) {
	p, cl := l.p, l.p.learner.(*clusterLearner)
	ctx := cl.stepCtx
	p.clu.ready, cl.stepCtx = false, nil
	p.setMembers(0, p.clu.gen)
	l.dropBatch()
	if ctx != nil && ctx.Err() != nil {
		p.log.Info().Err(err).Msg("cluster: the generation ended during a step; rejoining in the next")
		return
	}
	if p.pub.nc != nil && p.pub.nc.FlushTimeout(natsProbe) != nil {
		// The fault is on this side: NATS does not answer this member
		// (a partition, a stale connection). Rejoining would only make
		// a generation the others cannot step in either; leaving gives
		// them this member's partitions until NATS answers again.
		p.log.Warn().Err(err).Msg("cluster: a step failed and NATS does not answer this member; leaving the consumer group so that the others go on, rejoining once NATS answers")
		p.met.ClusterAside.Inc()
		if err := p.in.src.(groupSource).StepAside(p.natsAnswers); err != nil {
			p.log.Error().Err(err).Msg("cluster: could not leave the consumer group")
		}
		return
	}
	p.log.Warn().Err(err).Msg("cluster: a step failed (a member gone or a round lost); rejoining the group")
	p.life.owned.Go(func() {
		if err := p.in.src.(groupSource).Rebalance(); err != nil {
			p.log.Error().Err(err).Msg("cluster: could not rejoin the consumer group")
		}
	})
}

// natsProbe bounds the round trip (a PING answered by a PONG) that tells
// a member whether NATS answers it.
const natsProbe = 2 * time.Second

// natsAnswers returns once a round trip to NATS succeeds (polled every
// second), or with ctx's error.
func (p *Pipeline) natsAnswers(ctx context.Context) error {
	for {
		if p.pub.nc.FlushTimeout(natsProbe) == nil {
			p.log.Info().Msg("cluster: NATS answers this member again; rejoining the consumer group")
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}
