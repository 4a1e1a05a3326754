package cluster

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/streamkpca/streamkpca/online"
	"github.com/streamkpca/streamkpca/snapshot"
)

// Gatherer is the exchange a Member steps through (publish.Exchange over
// NATS; MemGroup in memory): every member contributes one payload a round
// and receives every member's, in rank order. Rounds increase from call
// to call. An error means the round failed for this member; others may
// have completed it.
type Gatherer interface {
	AllGather(ctx context.Context, round uint64, payload []byte) ([][]byte, error)
	// Size is the number of members; Rank this member's index.
	Size() int
	Rank() int
}

var (
	// ErrMismatch: the members were not configured for the same model.
	ErrMismatch = errors.New("cluster: members configured for different models")
	// ErrAborted: a member could not take the step (its reason follows);
	// no member applied it.
	ErrAborted = errors.New("cluster: a member aborted the step")
	// ErrRejoin: a step failed on this member; it must Rejoin with the
	// next generation's Gatherer before stepping again.
	ErrRejoin = errors.New("cluster: the member left its generation; rejoin before stepping")
)

// Member is one instance's side of a model learned by a group: it holds
// the learner, which every member of the group holds bit for bit, and
// takes the group's steps through a Gatherer.
type Member struct {
	g      Gatherer
	cfg    online.Config
	fp     [32]byte
	l      *online.KPCA
	next   Offsets // what the model has learned through, the union over the members
	round  uint64
	broken bool

	mom, total online.Moments
	part, grad online.Partial
	out        enc
	x          []float64 // the first step's union batch

	// Confirmed, when set, is called within Step once every member is
	// known to hold the learner's current state (the previous step's),
	// before the step changes it, with the offsets that state covers: the
	// point to take a snapshot every member agrees on. The learner must
	// not be changed.
	Confirmed func(l *online.KPCA, next Offsets)
}

// fingerprint identifies the model a config defines: everything but the
// runtime settings.
func fingerprint(c online.Config) [32]byte {
	c.Workers, c.CacheBytes, c.KeepBytes = 0, 0, 0
	return sha256.Sum256(fmt.Appendf(nil, "%#v", c))
}

// Join makes a member of the group behind g. cfg is the model's
// configuration, the same on every member but for runtime settings;
// local is this instance's newest snapshot of the model (nil: none). The
// group agrees on the most advanced state any member holds and every
// member continues from it (see Rejoin).
func Join(ctx context.Context, g Gatherer, cfg online.Config, local *snapshot.Snapshot) (*Member, error) {
	m := &Member{cfg: cfg, fp: fingerprint(cfg), next: Offsets{}}
	if local != nil {
		l, err := online.Restore(local, cfg)
		if err != nil {
			return nil, fmt.Errorf("cluster: restore the local snapshot: %w", err)
		}
		m.l, m.next = l, OffsetsOf(local.Header.Offsets)
	}
	if err := m.Rejoin(ctx, g); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// Rejoin makes m a member of g's generation, after a failed step or a
// rebalance. Two rounds: every member states the step its learner is at;
// the lowest-ranked member at the largest step sends its state (snapshot
// bytes with the offsets they cover), and every member behind restores
// it. The most advanced state is always one the whole previous
// generation computed (a step is applied only from every member's
// parts), so taking it learns nothing twice and skips nothing; the
// offsets then say where each partition resumes.
func (m *Member) Rejoin(ctx context.Context, g Gatherer) error {
	m.g, m.round, m.broken = g, 0, true
	var step uint64
	m.out.start(kindStatus)
	m.out.b = append(m.out.b, m.fp[:]...)
	if m.l != nil {
		m.out.u8(1)
		step = m.l.Step()
		m.out.u64(step)
		m.out.u64(m.l.SamplesSeen())
	} else {
		m.out.u8(0)
		m.out.u64(0)
		m.out.u64(0)
	}
	all, err := m.gather(ctx, kindStatus)
	if err != nil {
		return err
	}
	sender, top := -1, uint64(0)
	behind := false
	for i, p := range all {
		d, _ := open(p)
		fp := d.take(32)
		has, st := d.u8(), d.u64()
		d.u64()
		if err := d.end(); err != nil {
			return fmt.Errorf("cluster: member %d's status: %w", i, err)
		}
		if [32]byte(fp) != m.fp {
			return fmt.Errorf("%w: member %d's model settings differ from this one's", ErrMismatch, i)
		}
		switch {
		case has == 0:
			behind = true
		case sender < 0 || st > top:
			if sender >= 0 {
				behind = true
			}
			sender, top = i, st
		case st < top:
			behind = true
		}
	}
	if sender < 0 { // nobody has a model: the first step makes one
		m.broken = false
		return nil
	}
	if !behind {
		m.broken = false // every member at the same step: nothing to send
		return nil
	}
	m.out.start(kindState)
	if g.Rank() == sender {
		data, err := m.Snapshot().MarshalBinary()
		if err != nil {
			return fmt.Errorf("cluster: encode the state to send: %w", err)
		}
		m.out.b = append(m.out.b, data...)
	}
	all, err = m.gather(ctx, kindState)
	if err != nil {
		return err
	}
	if m.l == nil || m.l.Step() != top {
		snap, err := snapshot.Decode(all[sender][5:])
		if err != nil {
			return fmt.Errorf("cluster: the state from member %d: %w", sender, err)
		}
		l, err := online.Restore(snap, m.cfg)
		if err != nil {
			return fmt.Errorf("cluster: restore the state from member %d: %w", sender, err)
		}
		m.Close()
		m.l, m.next = l, OffsetsOf(snap.Header.Offsets)
	}
	m.broken = false
	return nil
}

// gather runs one round with m.out as this member's payload and checks
// that every payload is of kind (or an abort).
func (m *Member) gather(ctx context.Context, kind byte) ([][]byte, error) {
	r := m.round
	m.round++
	all, err := m.g.AllGather(ctx, r, m.out.b)
	if err != nil {
		return nil, m.lost(fmt.Errorf("cluster: round %d: %w", r, err))
	}
	if len(all) != m.g.Size() {
		return nil, m.lost(fmt.Errorf("cluster: round %d: %d payloads from %d members", r, len(all), m.g.Size()))
	}
	for i, p := range all {
		d, k := open(p)
		switch {
		case d.err != nil:
			return nil, m.lost(fmt.Errorf("cluster: round %d, member %d: %w", r, i, d.err))
		case k == kindAbort:
			why := d.str()
			return nil, fmt.Errorf("%w: member %d: %s", ErrAborted, i, why)
		case k != kind:
			return nil, m.lost(fmt.Errorf("%w: round %d, member %d: kind %d, want %d", errWire, r, i, k, kind))
		}
	}
	return all, nil
}

// abort tells the group this member cannot take the step, and returns err.
func (m *Member) abort(ctx context.Context, err error) error {
	m.out.start(kindAbort)
	m.out.str(err.Error())
	m.round++
	if _, gerr := m.g.AllGather(ctx, m.round-1, m.out.b); gerr != nil && !errors.Is(gerr, ErrAborted) {
		// Whether the others heard is unknown: out of the group.
		m.broken = true
	}
	return err
}

// Learner returns the group's learner: nil before the first step. Do not
// change it outside Step.
func (m *Member) Learner() *online.KPCA { return m.l }

// Next returns the offsets the learner's state covers.
func (m *Member) Next() Offsets { return m.next }

// Snapshot returns the learner's snapshot with the offsets it covers, or
// nil before the first step.
func (m *Member) Snapshot() *snapshot.Snapshot {
	if m.l == nil {
		return nil
	}
	s := m.l.Snapshot()
	s.Header.Offsets = m.next.List()
	return s
}

// Close releases the learner.
func (m *Member) Close() {
	if m.l != nil {
		m.l.Close()
		m.l = nil
	}
}

// Step takes one step of the group on the union of the members' batches:
// x holds this member's rows (rows×d, rows may be 0) and next the offsets
// after them. Every member calls Step once per step. The result is the
// learner's Update on the union batch (members in rank order; see
// online.KPCA.Moments): every member's learner has the same bits after
// it.
//
// Errors: online.ErrDiverged (the guard refused the union batch; counted
// on every member, as Update counts it, and its offsets are covered);
// online.ErrInput from this member's batch, and ErrAborted on the others
// (no member applied the step, nothing is covered: fix the batch and
// step again); the first step's errors (nothing is learned; step again
// with more rows). Any other error (a member gone, a round lost) leaves
// this member out of the group: Rejoin with the next generation's
// Gatherer, then step again with the batches not yet covered (Next says
// which).
func (m *Member) Step(ctx context.Context, x []float64, rows int, next Offsets) error {
	if m.broken {
		return ErrRejoin
	}
	if m.l == nil {
		return m.first(ctx, x, rows, next)
	}
	return m.step(ctx, x, rows, next)
}

// lost marks m out of its generation and returns err.
func (m *Member) lost(err error) error {
	m.broken = true
	return err
}

// ErrFirstStep wraps the learner's error on the first step, which every
// member gets: nothing is learned; step again with more rows.
var ErrFirstStep = errors.New("cluster: the first step")

// first is the first step: every member's rows go to every member, and
// each makes the learner from their union with Update (bandwidth, the
// first block), which takes the same bits everywhere.
func (m *Member) first(ctx context.Context, x []float64, rows int, next Offsets) error {
	d := 0
	if rows > 0 {
		d = len(x) / rows
	}
	if rows < 0 || rows > 0 && len(x) != rows*d {
		return m.abort(ctx, fmt.Errorf("%w: %d values for %d rows", online.ErrInput, len(x), rows))
	}
	m.out.start(kindFirst)
	m.out.u32(uint32(rows))
	m.out.u32(uint32(d))
	m.out.floats(x)
	m.out.offsets(next)
	all, err := m.gather(ctx, kindFirst)
	if err != nil {
		return err
	}
	m.x = m.x[:0]
	total, dim := 0, 0
	union := Offsets{}
	var part []float64
	for i, p := range all {
		dc, _ := open(p)
		r, di := int(dc.u32()), int(dc.u32())
		part = dc.floats(part)
		o := dc.offsets()
		if err := dc.end(); err != nil {
			return m.lost(fmt.Errorf("cluster: member %d's first batch: %w", i, err))
		}
		if r == 0 {
			continue
		}
		if dim != 0 && di != dim || len(part) != r*di {
			return m.lost(fmt.Errorf("%w: member %d sent %d rows of %d values in the first step (dimension %d)", ErrMismatch, i, r, di, dim))
		}
		dim, total = di, total+r
		m.x = append(m.x, part...)
		union.Merge(o)
	}
	if total == 0 {
		return nil // nothing anywhere yet
	}
	l, err := online.New(m.cfg)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrFirstStep, err)
	}
	if err := l.Update(m.x, total); err != nil {
		l.Close()
		return fmt.Errorf("%w of %d rows: %w", ErrFirstStep, total, err)
	}
	m.l = l
	m.next.Merge(union)
	return nil
}

// step is a data-parallel step (online.KPCA.Moments, Partial, Apply): two
// rounds.
func (m *Member) step(ctx context.Context, x []float64, rows int, next Offsets) error {
	l := m.l
	k := l.Config().K
	if rows > 0 {
		if err := l.Moments(&m.mom, x, rows); err != nil {
			return m.abort(ctx, err)
		}
	} else {
		m.mom.Rows = 0
		m.mom.Sum, m.mom.Outer = zeros(m.mom.Sum, k), zeros(m.mom.Outer, k*k)
	}
	step, samples := l.Step(), l.SamplesSeen()
	m.out.start(kindMoments)
	m.out.u64(step)
	m.out.u64(samples)
	m.out.u32(uint32(m.mom.Rows))
	m.out.floats(m.mom.Sum)
	m.out.floats(m.mom.Outer)
	m.out.offsets(next)
	all, err := m.gather(ctx, kindMoments)
	if err != nil {
		return err
	}
	m.total.Rows = 0
	m.total.Sum, m.total.Outer = zeros(m.total.Sum, k), zeros(m.total.Outer, k*k)
	union := Offsets{}
	var mo online.Moments
	for i, p := range all {
		d, _ := open(p)
		st, sa := d.u64(), d.u64()
		mo.Rows = int(d.u32())
		mo.Sum, mo.Outer = d.floats(mo.Sum), d.floats(mo.Outer)
		o := d.offsets()
		if err := d.end(); err != nil {
			return m.lost(fmt.Errorf("cluster: member %d's moments: %w", i, err))
		}
		if st != step || sa != samples {
			return m.lost(fmt.Errorf("cluster: member %d is at step %d (%d samples), this one at %d (%d)", i, st, sa, step, samples))
		}
		if len(mo.Sum) != k || len(mo.Outer) != k*k {
			return m.lost(fmt.Errorf("%w: member %d's moments have %d and %d numbers for k = %d", errWire, i, len(mo.Sum), len(mo.Outer), k))
		}
		union.Merge(o)
		if mo.Rows > 0 {
			m.total.Add(&mo)
		}
	}
	// Every member has the state of the last step: it is the group's.
	if m.Confirmed != nil {
		m.Confirmed(l, m.next)
	}
	if m.total.Rows == 0 {
		m.next.Merge(union)
		return nil
	}
	// The guard's decision depends on the union's moments only: members
	// whose Partial refuses the batch send an empty part, as members
	// without rows do, and every member's Apply counts the refusal.
	perr := error(nil)
	if rows > 0 {
		perr = l.Partial(&m.part, &m.total)
	}
	refused := errors.Is(perr, online.ErrDiverged)
	if perr != nil && !refused {
		return m.abort(ctx, perr)
	}
	m.out.start(kindPartial)
	if rows > 0 && !refused {
		m.out.floats(m.part.Grad)
		m.out.floats(m.part.New)
		m.out.floats(m.part.Sums)
		m.out.floats(m.part.NewSums)
	} else {
		m.out.floats(nil)
		m.out.floats(nil)
		m.out.floats(nil)
		m.out.floats(nil)
	}
	all, err = m.gather(ctx, kindPartial)
	if err != nil {
		return err
	}
	first := true
	var pa online.Partial
	for i, p := range all {
		d, _ := open(p)
		pa.Grad, pa.New = d.floats(pa.Grad), d.floats(pa.New)
		pa.Sums, pa.NewSums = d.floats(pa.Sums), d.floats(pa.NewSums)
		if err := d.end(); err != nil {
			return m.lost(fmt.Errorf("cluster: member %d's partial: %w", i, err))
		}
		if len(pa.Grad) == 0 {
			continue // a member without rows, or one whose Partial refused the batch
		}
		if first {
			m.grad.Grad = append(m.grad.Grad[:0], pa.Grad...)
			m.grad.New = append(m.grad.New[:0], pa.New...)
			m.grad.Sums = append(m.grad.Sums[:0], pa.Sums...)
			m.grad.NewSums = append(m.grad.NewSums[:0], pa.NewSums...)
			first = false
			continue
		}
		if len(pa.Grad) != len(m.grad.Grad) || len(pa.New) != len(m.grad.New) || len(pa.Sums) != len(m.grad.Sums) || len(pa.NewSums) != len(m.grad.NewSums) {
			return m.lost(fmt.Errorf("%w: member %d's partial has other sizes than member %d's", errWire, i, 0))
		}
		m.grad.Add(&pa)
	}
	grad := &m.grad
	if first {
		grad = &online.Partial{} // no parts: the guard refuses before reading it
	}
	err = l.Apply(&m.total, grad)
	if err != nil && !errors.Is(err, online.ErrDiverged) {
		return m.lost(err) // sizes that cannot differ between members
	}
	m.next.Merge(union)
	return err
}

// zeros returns s with length n, all zero.
func zeros(s []float64, n int) []float64 {
	if cap(s) < n {
		return make([]float64, n)
	}
	s = s[:n]
	clear(s)
	return s
}
