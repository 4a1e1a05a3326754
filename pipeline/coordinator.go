package pipeline

import (
	"errors"

	"github.com/streamkpca/streamkpca/cluster"
	"github.com/streamkpca/streamkpca/online"
	"github.com/streamkpca/streamkpca/snapshot"
)

// coordinator owns what differs between one instance and a group of
// instances learning one model (cluster mode): which messages a step may
// take, when a step runs, what a step covers, which state a snapshot
// persists, and who publishes and commits. The loop asks it and has no
// branch of its own for either: solo is one instance, clusterState a
// member of a group (cluster.go).
type coordinator interface {
	// takes reports whether a message read in generation gen from
	// partition may join the batch.
	takes(gen int32, partition int) bool
	// stepNow reports whether a step may run with rows pending rows.
	stepNow(rows int) bool
	// idle: a step runs every learner.linger even without rows.
	idle() bool
	// failed handles a step's error; true: the step is over for the loop,
	// nothing was learned (the coordinator kept or dropped the rows).
	failed(l *loop, err error) bool
	// covered sets learned to the offsets the learner's state covers
	// after a step (p.mu held).
	covered(p *Pipeline, learned map[int]int64)
	// stepped is told of every step taken.
	stepped(l *loop)
	// cut returns the state to persist, its offsets in the header; false:
	// none is ready.
	cut(l *loop) (*snapshot.Snapshot, bool)
	// leads: this instance publishes and commits.
	leads() bool
	// learnsAtStop: a graceful stop learns the partial batch first.
	learnsAtStop() bool
	// capacity is the rows a step of rows rows could have taken in the
	// same time: load shedding's cost per row is the step's time over it.
	capacity(rows, batch int) int
	// shed is told of a message shed (load shedding): covered by the
	// offsets, not learned.
	shed()
	// generations are the consumer group's generations to join (nil:
	// none).
	generations() chan genEvent
	// close releases what the coordinator holds.
	close()
}

// solo is one instance: it takes every message, steps when it has rows,
// and persists, publishes and commits its own learner's state.
type solo struct{}

func (solo) takes(int32, int) bool    { return true }
func (solo) stepNow(rows int) bool    { return rows > 0 }
func (solo) idle() bool               { return false }
func (solo) failed(*loop, error) bool { return false }
func (solo) stepped(*loop)            {}
func (solo) leads() bool              { return true }
func (solo) learnsAtStop() bool       { return true }

// capacity: one instance's step costs about in proportion to its rows.
func (solo) capacity(rows, _ int) int { return rows }

// shed: one instance counts its shed messages itself (cut).
func (solo) shed()                      {}
func (solo) generations() chan genEvent { return nil }
func (solo) close()                     {}
func (solo) covered(p *Pipeline, learned map[int]int64) {
	for k, v := range p.led.consumed {
		learned[k] = v
	}
}

// cut is the learner's snapshot with the offsets it covers: those learned
// through, or, with no rows pending, those consumed (trailing
// dead-lettered messages are covered too), and the fraction learned.
func (solo) cut(l *loop) (*snapshot.Snapshot, bool) {
	p := l.p
	snap := p.learner.snapshot()
	p.mu.Lock()
	defer p.mu.Unlock()
	if f := p.led.status.LearnedFraction; f < 1 {
		snap.Header.Diagnostics.LearnedFraction = f
	}
	offs := p.led.learned
	if l.rows == 0 {
		offs = p.led.consumed
	}
	// Only the shed messages these offsets cover: a restart reads the
	// others again.
	snap.Header.Diagnostics.Shed = p.led.shed.cover(offs)
	for part, next := range offs {
		snap.Header.Offsets = append(snap.Header.Offsets, snapshot.Offset{Topic: p.cfg.Kafka.Topic, Partition: part, Next: next})
	}
	sortOffsets(snap.Header.Offsets)
	return snap, true
}

// The cluster coordinator: clusterState (cluster.go holds its joining).

func (c *clusterState) takes(gen int32, partition int) bool {
	// Read in an earlier generation (or for one this member did not
	// join): the group's offsets say where it is read again.
	return c.ready && gen == c.gen && c.mine[partition]
}

// stepNow: a member steps with the group, rows or none; a member of no
// generation has none (takes refuses them).
func (c *clusterState) stepNow(int) bool { return c.ready }
func (c *clusterState) idle() bool       { return true }

func (c *clusterState) failed(l *loop, err error) bool {
	switch {
	case errors.Is(err, cluster.ErrAborted):
		// Another member's batch was refused: nobody learned; these rows
		// go into the next step.
		l.p.log.Warn().Err(err).Msg("cluster: step aborted by another member; the rows stay for the next")
		return true
	case errors.Is(err, online.ErrDiverged), errors.Is(err, cluster.ErrFirstStep), errors.Is(err, online.ErrInput):
		return false
	default:
		l.clusterStepFailed(err)
		return true
	}
}

// covered: what the group's model has learned through, on this member's
// topic (every member's partitions).
func (c *clusterState) covered(p *Pipeline, learned map[int]int64) {
	for k, v := range c.learner.m.Next()[p.cfg.Kafka.Topic] {
		learned[k] = v
	}
}

// stepped: the next step's round confirms this state; when a snapshot
// will be due, take it there, so that the snapshot after that step, on
// the cadence, has it.
func (c *clusterState) stepped(l *loop) {
	if l.sinceSnap+1 >= l.p.cfg.Snapshot.EveryBatches {
		c.due = true
	}
}

// cut: the newest state every member holds, with the group's offsets;
// taken at the next step's round (which confirms the state before it)
// and persisted by the snapshot after that step.
func (c *clusterState) cut(*loop) (*snapshot.Snapshot, bool) {
	snap := c.confirmed
	if snap == nil || snap.Header.Step <= c.saved {
		c.due = true
		return nil, false
	}
	c.saved, c.due = snap.Header.Step, false
	return snap, true
}

// leads: the lowest-ranked member publishes and commits.
func (c *clusterState) leads() bool { return c.rank0 }

// learnsAtStop: a member does not step alone: its rows are not covered
// and are read again by the group.
func (c *clusterState) learnsAtStop() bool { return false }

// capacity: a member's step takes as long as the group's, whatever its
// own rows, and could have taken a whole batch: the cost of a row is the
// step's time over the batch, not over the rows this member had (with
// those, a member that keeps up with a slow partition would see a step's
// time per row its stream fills exactly, and shed).
func (c *clusterState) capacity(rows, batch int) int { return max(rows, batch) }

// shed: the group counts what its members shed among the offsets its
// state covers (cluster.Member.Shed), so that a snapshot's samples plus
// shed are every message its offsets cover.
func (c *clusterState) shed() { c.learner.shed++ }

func (c *clusterState) generations() chan genEvent { return c.events }

func (c *clusterState) close() {
	if c.ex != nil {
		_ = c.ex.Close()
	}
}
