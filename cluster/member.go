package cluster

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	"github.com/streamkpca/streamkpca/online"
	"github.com/streamkpca/streamkpca/snapshot"
)

// Gatherer is the exchange a Member steps through (transport.Exchange over
// NATS; MemGroup in memory). Rounds increase from call to call, whichever
// of the two a round is, and every member makes the same call for a
// round. An error means the round failed for this member; others may
// have completed it.
type Gatherer interface {
	// AllGather: every member contributes one payload and receives every
	// member's, in rank order.
	AllGather(ctx context.Context, round uint64, payload []byte) ([][]byte, error)
	// AllToAll: every member sends parts[j] to member j (len(parts) is
	// Size(); its own part stays here) and receives, in rank order, the
	// part every member addressed to it. The halves of a reduce-scatter.
	AllToAll(ctx context.Context, round uint64, parts [][]byte) ([][]byte, error)
	// Size is the number of members; Rank this member's index.
	Size() int
	Rank() int
}

// PartsExchange is how the members sum a step's gradient parts
// (features·k numbers each). Both add the same numbers in the same order,
// so the learners are the same bits either way.
type PartsExchange int

const (
	// ReduceScatter: every member sends slice j of its part to member j
	// (AllToAll), member j adds the slices it received in rank order and
	// sends the sum to every member (AllGather). Per member and step about
	// 2·P bytes go out and come in (P a part's size) whatever the group's
	// size, and each member adds P numbers instead of n·P.
	ReduceScatter PartsExchange = iota
	// AllGatherParts: every member sends its whole part to every member
	// (AllGather) and each adds all n: one round, but (n−1)·P bytes in
	// per member and n(n−1)·P through the server a step.
	AllGatherParts
)

var (
	// ErrMismatch: the members were not configured for the same model.
	ErrMismatch = errors.New("cluster: members configured for different models")
	// ErrRefused (with ErrMismatch, in a *RefusedError): this member's
	// model settings differ from the group's; it cannot join any
	// generation until they are changed.
	ErrRefused = errors.New("cluster: refused by the group")
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
	// shed counts the messages the members shed (load shedding) among
	// those next covers, the group's; shedOut this member's not yet in
	// it (Shed), sent with its next step.
	shed, shedOut uint64
	// hold and want are this member's growth vote for its next steps
	// (Pace).
	hold bool
	want int

	mom, total online.Moments
	part, grad online.Partial
	out        enc
	x          []float64 // the first step's union batch

	// Parts is how a step's gradient parts are summed; the same on every
	// member. Default: ReduceScatter.
	Parts      PartsExchange
	outs       []enc     // AllToAll's parts, one per member
	flat, red  []float64 // this member's part flattened; its reduced slice
	sl         []float64 // a member's slice or sum as decoded (reduceMySlice, joinSums)
	sent, recv int64     // payload bytes handed to and received from the Gatherer

	// Held-out rows for the next step's score (HoldOut), their component
	// scores, and the union's.
	heldX            []float64
	heldRows         int
	scores, allScore []float64
	// adopt is the challenger the group's rank 0 sent with this step,
	// which every member makes the model after the step
	// (online/follow.go).
	adopt *snapshot.Snapshot

	// Confirmed, when set, is called within Step once every member is
	// known to hold the learner's current state (the previous step's),
	// before the step changes it, with the offsets that state covers: the
	// point to take a snapshot every member agrees on. The learner must
	// not be changed. shed is the messages the group shed among those
	// next covers (see Shed).
	Confirmed func(l *online.KPCA, next Offsets, shed uint64)
}

// Shed tells the member that n more messages among those its next Step's
// offsets cover were shed by this instance (load shedding: covered, not
// learned). The group adds every member's count into its own, which its
// snapshots carry (Diagnostics.Shed) with the offsets: learned plus shed
// is every message the offsets cover. A step that does not advance the
// offsets (aborted, or with nothing anywhere) keeps the count for the
// next; a Rejoin drops it, as the rows it goes with are read again.
func (m *Member) Shed(n uint64) { m.shedOut += n }

// Pace gives this member's vote on the group's growth, sent with each
// step until changed (load shedding and learner.budget: stream, as one
// instance decides them from its own stream): hold, more feature blocks
// would make steps too slow for this member's partitions; budget, the
// feature budget it would raise the model to (no more than the current
// budget: no raise). At each step the group holds growth if any member
// holds it, and raises the budget to the least any member wants when
// that is above the current one: the members hold one model, so its
// growth follows the slowest member's stream (online.KPCA.HoldGrowth,
// RaiseBudget, applied on every member at the same step).
func (m *Member) Pace(hold bool, budget int) { m.hold, m.want = hold, budget }

// fingerprint identifies the model a config defines: the hash of its
// settings (everything but the runtime settings).
func fingerprint(c online.Config) [32]byte { return sha256.Sum256([]byte(settings(c))) }

// Difference is one model setting on which a member differs from its
// group: Field names online.Config's field (Kernel.Bandwidth for a
// field of a field).
type Difference struct {
	Field, Here, Group string
}

// RefusedError is Rejoin's error on a member whose model settings differ
// from the group's (errors.Is ErrRefused and ErrMismatch): the group is
// the settings most members hold (on a tie, those of the member at the
// most advanced step, then of the lowest rank). Retrying cannot help.
type RefusedError struct {
	Differences []Difference
}

func (e *RefusedError) Error() string {
	var b strings.Builder
	b.WriteString("cluster: refused by the group: this instance's model settings differ from the other members'")
	for i, d := range e.Differences {
		sep := ", "
		if i == 0 {
			sep = ": "
		}
		fmt.Fprintf(&b, "%s%s is %s here, %s in the group", sep, d.Field, d.Here, d.Group)
	}
	return b.String()
}

func (e *RefusedError) Is(target error) bool { return target == ErrRefused || target == ErrMismatch }

// settings describes the model c defines, one "Field=value" line per
// setting of online.Config but the runtime ones (values as %v writes
// them: floats exactly, slices whole): what fingerprint hashes, and what
// names the differences between members.
func settings(c online.Config) string {
	var b strings.Builder
	var walk func(prefix string, v reflect.Value)
	walk = func(prefix string, v reflect.Value) {
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if online.Runtime(f) {
				continue
			}
			if f.Type.Kind() == reflect.Struct {
				walk(prefix+f.Name+".", v.Field(i))
				continue
			}
			fmt.Fprintf(&b, "%s%s=%v\n", prefix, f.Name, v.Field(i).Interface())
		}
	}
	walk("", reflect.ValueOf(c))
	return b.String()
}

// differences lists the settings on which here differs from group (both
// as settings writes them).
func differences(here, group string) []Difference {
	parse := func(s string) (map[string]string, []string) {
		m, order := map[string]string{}, []string(nil)
		for line := range strings.Lines(s) {
			k, v, _ := strings.Cut(strings.TrimSuffix(line, "\n"), "=")
			m[k] = v
			order = append(order, k)
		}
		return m, order
	}
	h, order := parse(here)
	g, gorder := parse(group)
	var out []Difference
	for _, k := range order {
		if gv, ok := g[k]; !ok || gv != h[k] {
			if !ok {
				gv = "(unknown to the group's version)"
			}
			out = append(out, Difference{Field: k, Here: h[k], Group: gv})
		}
	}
	for _, k := range gorder {
		if _, ok := h[k]; !ok {
			out = append(out, Difference{Field: k, Here: "(unknown to this version)", Group: g[k]})
		}
	}
	if len(out) == 0 && here != group {
		// The same fields, written otherwise (a field twice, another
		// order): only a member that is not this code writes that.
		out = append(out, Difference{Field: "(the settings' description)", Here: strconv.Quote(here), Group: strconv.Quote(group)})
	}
	return out
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
		m.l, m.next, m.shed = l, OffsetsOf(local.Header.Offsets), local.Header.Diagnostics.Shed
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
	m.g, m.round, m.broken, m.shedOut = g, 0, true, 0
	var step uint64
	m.out.start(kindStatus)
	m.out.b = append(m.out.b, m.fp[:]...)
	m.out.str(settings(m.cfg))
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
	if err := m.sameModels(all); err != nil {
		return err
	}
	sender, top := -1, uint64(0)
	behind := false
	for i, p := range all {
		d, _ := open(p)
		d.take(32)
		d.str()
		has, st := d.u8(), d.u64()
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
		m.l, m.next, m.shed = l, OffsetsOf(snap.Header.Offsets), snap.Header.Diagnostics.Shed
	}
	m.broken = false
	return nil
}

// sameModels checks the members' statuses for one model: the group's
// settings are those most members hold (on a tie, those of the member at
// the most advanced step, then of the lowest rank). A member with other
// settings gets a *RefusedError: it must leave. The others get
// ErrMismatch naming it: the generation cannot step, and the next one,
// without it, can.
func (m *Member) sameModels(all [][]byte) error {
	type status struct {
		fp       [32]byte
		settings string
		has      bool
		step     uint64
	}
	st := make([]status, len(all))
	count := map[[32]byte]int{}
	for i, p := range all {
		d, _ := open(p)
		d.take(32) // the sender's fingerprint: recomputed, not trusted
		st[i].settings = d.str()
		st[i].fp = sha256.Sum256([]byte(st[i].settings))
		st[i].has, st[i].step = d.u8() != 0, d.u64()
		d.u64()
		if err := d.end(); err != nil {
			return fmt.Errorf("cluster: member %d's status: %w", i, err)
		}
		count[st[i].fp]++
	}
	if len(count) == 1 {
		return nil
	}
	group := -1 // the member whose settings are the group's
	for i, s := range st {
		better := group < 0
		if !better {
			g := st[group]
			switch {
			case count[s.fp] != count[g.fp]:
				better = count[s.fp] > count[g.fp]
			case s.has != g.has:
				better = s.has
			default:
				better = s.step > g.step
			}
		}
		if better {
			group = i
		}
	}
	g := st[group]
	if me := st[m.g.Rank()]; me.fp != g.fp {
		return &RefusedError{Differences: differences(me.settings, g.settings)}
	}
	for i, s := range st {
		if s.fp != g.fp {
			diff := differences(s.settings, g.settings)
			return fmt.Errorf("%w: member %d's model settings differ from the group's (%s is %s there, %s here); it is refused and this generation waits for the next, without it",
				ErrMismatch, i, diff[0].Field, diff[0].Here, diff[0].Group)
		}
	}
	return nil
}

// gather runs one round with m.out as this member's payload and checks
// that every payload is of kind (or an abort).
func (m *Member) gather(ctx context.Context, kind byte) ([][]byte, error) {
	r := m.round
	m.round++
	all, err := m.g.AllGather(ctx, r, m.out.b)
	m.sent += int64(len(m.out.b))
	return m.check(r, kind, all, err)
}

// scatter runs one AllToAll round with m.outs[j] for member j and checks
// that every part received is of kind (or an abort).
func (m *Member) scatter(ctx context.Context, kind byte) ([][]byte, error) {
	r := m.round
	m.round++
	parts := make([][]byte, len(m.outs))
	for j := range m.outs {
		parts[j] = m.outs[j].b
		if j != m.g.Rank() {
			m.sent += int64(len(parts[j]))
		}
	}
	all, err := m.g.AllToAll(ctx, r, parts)
	return m.check(r, kind, all, err)
}

// check checks round r's payloads: one per member, each of kind (or an
// abort, which fails the round).
func (m *Member) check(r uint64, kind byte, all [][]byte, err error) ([][]byte, error) {
	if err != nil {
		return nil, m.lost(fmt.Errorf("cluster: round %d: %w", r, err))
	}
	if len(all) != m.g.Size() {
		return nil, m.lost(fmt.Errorf("cluster: round %d: %d payloads from %d members", r, len(all), m.g.Size()))
	}
	for i, p := range all {
		if i != m.g.Rank() {
			m.recv += int64(len(p))
		}
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
	s.Header.Diagnostics.Shed = m.shed
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
	defer m.dropHeld() // scored or not: the next step holds out its own
	if m.broken {
		return ErrRejoin
	}
	if m.l == nil || m.l.Resetting() {
		return m.first(ctx, x, rows, next)
	}
	return m.step(ctx, x, rows, next)
}

// HoldOut gives the next Step rows held-out points x (rows×d, raw; rows of
// the batch it will learn, as the service's held-out slice): the step
// scores the group's model on every member's held-out points before
// learning them, and the union of the scores, in rank order, goes to the
// learner's change detector on every member (online.KPCA.ObserveScores):
// one quality figure for the group, and a change found, and the model
// restarted, on every member at the same step. Call it before Step; the
// points are dropped after it, scored or not.
func (m *Member) HoldOut(x []float64, rows int) {
	m.heldX = append(m.heldX, x...)
	m.heldRows += rows
}

func (m *Member) dropHeld() { m.heldX, m.heldRows = m.heldX[:0], 0 }

// lost marks m out of its generation and returns err.
func (m *Member) lost(err error) error {
	m.broken = true
	return err
}

// ErrFirstStep wraps the learner's error on the first step, which every
// member gets: nothing is learned; step again with more rows.
var ErrFirstStep = errors.New("cluster: the first step")

// first is the first step, and the step after a detected change: every
// member's rows go to every member, and each makes the learner from their
// union with Update (bandwidth, the first block) — or, with a learner
// that restarts (online.KPCA.Forget), learns the union with Update, which
// restarts it from those rows — taking the same bits everywhere.
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
	m.out.u64(m.shedOut)
	all, err := m.gather(ctx, kindFirst)
	if err != nil {
		return err
	}
	m.x = m.x[:0]
	total, dim := 0, 0
	union := Offsets{}
	var shed uint64 // shed by the members whose offsets join the union
	var part []float64
	for i, p := range all {
		dc, _ := open(p)
		r, di := int(dc.u32()), int(dc.u32())
		part = dc.floats(part)
		o := dc.offsets()
		sh := dc.u64()
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
		shed += sh
	}
	if total == 0 {
		return nil // nothing anywhere yet
	}
	if m.l != nil { // a restart: the model learns the union from scratch
		if err := m.l.Update(m.x, total); err != nil && !errors.Is(err, online.ErrDiverged) {
			return m.lost(fmt.Errorf("cluster: the restart on %d rows: %w", total, err))
		} else if err != nil {
			m.advance(union, shed, rows > 0)
			return err
		}
		m.advance(union, shed, rows > 0)
		return nil
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
	m.advance(union, shed, rows > 0)
	return nil
}

// step is a data-parallel step (online.KPCA.Moments, Partial, Apply): two
// rounds.
func (m *Member) step(ctx context.Context, x []float64, rows int, next Offsets) error {
	l := m.l
	challenger, err := m.ownMoments(ctx, x, rows)
	if err != nil {
		return err
	}
	step, samples := l.Step(), l.SamplesSeen()
	m.encodeMoments(step, samples, next, challenger)
	all, err := m.gather(ctx, kindMoments)
	if err != nil {
		return err
	}
	g, err := m.groupMoments(all, step, samples)
	if err != nil {
		return err
	}
	// Every member has the state of the last step: it is the group's.
	if m.Confirmed != nil {
		m.Confirmed(l, m.next, m.shed)
	}
	// The group's held-out score, the same on every member; a change
	// restarts the model on every member, from this step's rows.
	k := l.Config().K // the components served, whose held-out scores the group shares
	if len(m.allScore) > 0 && l.ObserveScores(m.allScore, len(m.allScore)/k) && l.Resetting() {
		return m.first(ctx, x, rows, next)
	}
	// The group's growth, decided from the votes every member has: the
	// same on every member before Partial picks this step's block.
	l.HoldGrowth(g.hold)
	if g.want > uint64(l.MaxFeatures()) && g.want <= math.MaxInt32 {
		l.RaiseBudget(int(g.want))
	}
	if m.total.Rows == 0 {
		m.advance(g.union, g.shed, true)
		return m.adoptChallenger()
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
	has := rows > 0 && !refused
	var summed bool
	if m.Parts == AllGatherParts {
		summed, err = m.allGatherParts(ctx, has)
	} else {
		summed, err = m.reduceScatter(ctx, has)
	}
	if err != nil {
		return err
	}
	grad := &m.grad
	if !summed {
		grad = &online.Partial{} // no parts: the guard refuses before reading it
	}
	err = l.Apply(&m.total, grad)
	if err != nil && !errors.Is(err, online.ErrDiverged) {
		return m.lost(err) // sizes that cannot differ between members
	}
	m.advance(g.union, g.shed, true)
	if m.g.Rank() == 0 && rows > 0 && err == nil {
		l.TeachChallenger(x, rows)
	}
	if aerr := m.adoptChallenger(); aerr != nil {
		return aerr
	}
	return err
}

// encodeMoments writes this member's message of a step's first round
// into m.out: the step and samples it is at, its moments (ownMoments),
// the offsets it covers with this batch (next), its held-out scores, its
// shed count, its growth vote and its challenger's bytes (groupMoments
// reads them in this order).
func (m *Member) encodeMoments(step, samples uint64, next Offsets, challenger []byte) {
	m.out.start(kindMoments)
	m.out.u64(step)
	m.out.u64(samples)
	m.out.u32(uint32(m.mom.Rows))
	m.out.floats(m.mom.Sum)
	m.out.floats(m.mom.Outer)
	m.out.offsets(next)
	m.out.floats(m.scores)
	m.out.u64(m.shedOut)
	m.out.flag(m.hold)
	m.out.u64(uint64(max(m.want, 0)))
	m.out.bytes(challenger)
}

// ownMoments computes this member's part of a step before the exchange:
// its held-out scores (first: Moments keeps the batch's features for
// Partial, and scoring evaluates others), the challenger's snapshot when
// it wins (rank 0 only, which runs the group's challenger on its own rows
// and held-out rows; every member adopts it after the step) and the
// moments of its rows (zeros without rows).
func (m *Member) ownMoments(ctx context.Context, x []float64, rows int) (challenger []byte, err error) {
	l := m.l
	m.scores = m.scores[:0]
	if m.heldRows > 0 {
		if m.scores, err = l.HeldOutScores(m.scores, m.heldX, m.heldRows); err != nil {
			return nil, m.abort(ctx, err)
		}
	}
	if m.g.Rank() == 0 {
		if m.heldRows > 0 && l.Challenge(m.heldX, m.heldRows) {
			if cs := l.ChallengerSnapshot(); cs != nil {
				if challenger, err = cs.MarshalBinary(); err != nil {
					return nil, m.abort(ctx, fmt.Errorf("cluster: encode the challenger: %w", err))
				}
			}
		}
	} else {
		l.DropChallenger()
	}
	if rows > 0 {
		if err := l.Moments(&m.mom, x, rows); err != nil {
			return nil, m.abort(ctx, err)
		}
	} else {
		m.mom.Rows = 0
		c := l.Columns() // the learner's columns: its moments
		m.mom.Sum, m.mom.Outer = zeros(m.mom.Sum, c), zeros(m.mom.Outer, c*c)
	}
	return challenger, nil
}

// groupStep is what the members' moments say of a step beyond the
// summed moments (Member.total) and held-out scores (Member.allScore).
type groupStep struct {
	union Offsets // the offsets the step covers
	shed  uint64  // messages the members shed since their last step
	hold  bool    // a member votes to hold the budget's growth
	want  uint64  // the smallest budget a member asks for
}

// groupMoments reads every member's moments (all, in rank order): it
// checks that they are at this step, sums their moments into m.total,
// gathers their held-out scores into m.allScore and the challenger
// rank 0 sent into m.adopt.
func (m *Member) groupMoments(all [][]byte, step, samples uint64) (groupStep, error) {
	k := m.l.Columns() // the learner's columns: its moments
	m.adopt = nil
	m.allScore = m.allScore[:0]
	m.total.Rows = 0
	m.total.Sum, m.total.Outer = zeros(m.total.Sum, k), zeros(m.total.Outer, k*k)
	g := groupStep{union: Offsets{}, want: math.MaxUint64}
	var mo online.Moments
	var err error
	for i, p := range all {
		d, _ := open(p)
		st, sa := d.u64(), d.u64()
		mo.Rows = int(d.u32())
		mo.Sum, mo.Outer = d.floats(mo.Sum), d.floats(mo.Outer)
		o := d.offsets()
		sc := d.floats(nil)
		g.shed += d.u64()
		g.hold = d.u8() != 0 || g.hold
		g.want = min(g.want, d.u64())
		ch := d.bytes()
		if err := d.end(); err != nil {
			return g, m.lost(fmt.Errorf("cluster: member %d's moments: %w", i, err))
		}
		if len(ch) > 0 {
			if i != 0 {
				return g, m.lost(fmt.Errorf("%w: member %d sent a challenger; only rank 0 runs one", errWire, i))
			}
			if m.adopt, err = snapshot.Decode(ch); err != nil {
				return g, m.lost(fmt.Errorf("cluster: the challenger from member 0: %w", err))
			}
		}
		if sk := m.l.Config().K; len(sc)%sk != 0 { // the components served
			return g, m.lost(fmt.Errorf("%w: member %d sent %d held-out scores for k = %d", errWire, i, len(sc), sk))
		}
		m.allScore = append(m.allScore, sc...)
		if st != step || sa != samples {
			return g, m.lost(fmt.Errorf("cluster: member %d is at step %d (%d samples), this one at %d (%d)", i, st, sa, step, samples))
		}
		if len(mo.Sum) != k || len(mo.Outer) != k*k {
			return g, m.lost(fmt.Errorf("%w: member %d's moments have %d and %d numbers for k = %d", errWire, i, len(mo.Sum), len(mo.Outer), k))
		}
		g.union.Merge(o)
		if mo.Rows > 0 {
			m.total.Add(&mo)
		}
	}
	return g, nil
}

// adoptChallenger makes the challenger received with this step the model
// on this member, as on every other (the same bytes, the same step).
func (m *Member) adoptChallenger() error {
	if m.adopt == nil {
		return nil
	}
	ch := m.adopt
	m.adopt = nil
	if err := m.l.Adopt(ch); err != nil {
		return m.lost(fmt.Errorf("cluster: adopt the challenger from member 0: %w", err)) // the same on every member: the generation fails as one
	}
	return nil
}

// advance moves what the model covers on by a step's union of offsets
// and the messages shed among them; mine: this member's offsets were in
// the union, so its own count is now in the group's.
func (m *Member) advance(union Offsets, shed uint64, mine bool) {
	m.next.Merge(union)
	m.shed += shed
	if mine {
		m.shedOut = 0
	}
}

// allGatherParts sums the step's parts with one AllGather (see
// AllGatherParts); has says this member has a part in m.part. It returns
// whether any member had one, the sum then in m.grad.
func (m *Member) allGatherParts(ctx context.Context, has bool) (bool, error) {
	m.out.start(kindPartial)
	if has {
		m.out.floats(m.part.Grad)
		m.out.floats(m.part.New)
		m.out.floats(m.part.Sums)
		m.out.floats(m.part.NewSums)
	} else {
		for range 4 {
			m.out.floats(nil)
		}
	}
	all, err := m.gather(ctx, kindPartial)
	if err != nil {
		return false, err
	}
	first := true
	var pa online.Partial
	for i, p := range all {
		d, _ := open(p)
		pa.Grad, pa.New = d.floats(pa.Grad), d.floats(pa.New)
		pa.Sums, pa.NewSums = d.floats(pa.Sums), d.floats(pa.NewSums)
		if err := d.end(); err != nil {
			return false, m.lost(fmt.Errorf("cluster: member %d's partial: %w", i, err))
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
			return false, m.lost(fmt.Errorf("%w: member %d's partial has other sizes than the first's", errWire, i))
		}
		m.grad.Add(&pa)
	}
	return !first, nil
}

// partLens are the lengths of a Partial's four arrays, in their order.
type partLens [4]int

func (n partLens) total() int { return n[0] + n[1] + n[2] + n[3] }

// bound is where slice j of n starts in a part of length total.
func bound(j, n, total int) int { return int(int64(j) * int64(total) / int64(n)) }

func (e *enc) lens(n partLens) {
	for _, v := range n {
		e.u32(uint32(v))
	}
}

func (d *dec) lens() partLens {
	var n partLens
	for i := range n {
		n[i] = int(d.u32())
	}
	return n
}

// reduceScatter sums the step's parts in two rounds (see ReduceScatter):
// slice j of the flattened part [Grad, New, Sums, NewSums] goes to member
// j, which adds the slices in rank order, skipping members without a
// part, and sends the sum to every member. Every number is added in the
// order allGatherParts adds it. has says this member has a part in
// m.part. It returns whether any member had one, the sum then in m.grad.
func (m *Member) reduceScatter(ctx context.Context, has bool) (bool, error) {
	n := m.g.Size()
	var lens partLens
	m.flat = m.flat[:0]
	if has {
		lens = partLens{len(m.part.Grad), len(m.part.New), len(m.part.Sums), len(m.part.NewSums)}
		m.flat = append(append(append(append(m.flat, m.part.Grad...), m.part.New...), m.part.Sums...), m.part.NewSums...)
	}
	if len(m.outs) != n {
		m.outs = make([]enc, n)
	}
	for j := range m.outs {
		e := &m.outs[j]
		e.start(kindSlice)
		if !has {
			e.u8(0)
			e.lens(partLens{})
			e.floats(nil)
			continue
		}
		e.u8(1)
		e.lens(lens)
		e.floats(m.flat[bound(j, n, lens.total()):bound(j+1, n, lens.total())])
	}
	all, err := m.scatter(ctx, kindSlice)
	if err != nil {
		return false, err
	}
	want, some, err := m.reduceMySlice(all)
	if err != nil {
		return false, err
	}
	m.out.start(kindReduced)
	m.out.flag(some)
	m.out.lens(want)
	m.out.floats(m.red)
	all, err = m.gather(ctx, kindReduced)
	if err != nil {
		return false, err
	}
	if err := m.joinSums(all, want, some); err != nil || !some {
		return false, err
	}
	f := m.flat
	m.grad.Grad = append(m.grad.Grad[:0], f[:want[0]]...)
	f = f[want[0]:]
	m.grad.New = append(m.grad.New[:0], f[:want[1]]...)
	f = f[want[1]:]
	m.grad.Sums = append(m.grad.Sums[:0], f[:want[2]]...)
	m.grad.NewSums = append(m.grad.NewSums[:0], f[want[2]:]...)
	return true, nil
}

// reduceMySlice adds, in rank order, the slices the members sent this
// member (all, reduceScatter's first round) into m.red, skipping members
// without a part; want is the sizes of the parts, some whether any
// member had one.
func (m *Member) reduceMySlice(all [][]byte) (want partLens, some bool, err error) {
	n, me := m.g.Size(), m.g.Rank()
	m.red = m.red[:0]
	for i, p := range all {
		has, ln, err := m.decodePart(p)
		if err != nil {
			return want, false, m.lost(fmt.Errorf("cluster: member %d's slice: %w", i, err))
		}
		if !has {
			continue
		}
		if some && ln != want || len(m.sl) != bound(me+1, n, ln.total())-bound(me, n, ln.total()) {
			return want, false, m.lost(fmt.Errorf("%w: member %d's slice has other sizes than the others'", errWire, i))
		}
		if !some {
			want, some = ln, true
			m.red = append(m.red, m.sl...)
			continue
		}
		addFloats(m.red, m.sl)
	}
	return want, some, nil
}

// joinSums puts the members' reduced slices (all, reduceScatter's second
// round) together in rank order into m.flat, after checking each agrees
// with what this member reduced (want, some).
func (m *Member) joinSums(all [][]byte, want partLens, some bool) error {
	n := m.g.Size()
	m.flat = m.flat[:0]
	for i, p := range all {
		has, ln, err := m.decodePart(p)
		if err != nil {
			return m.lost(fmt.Errorf("cluster: member %d's sum: %w", i, err))
		}
		if has != some || has && ln != want || len(m.sl) != bound(i+1, n, want.total())-bound(i, n, want.total()) {
			return m.lost(fmt.Errorf("%w: member %d's sum disagrees with the slices this member reduced", errWire, i))
		}
		m.flat = append(m.flat, m.sl...)
	}
	return nil
}

// decodePart reads one member's message of a reduceScatter round (a
// flag for whether it has a part, the part sizes, the floats) into m.sl.
func (m *Member) decodePart(p []byte) (has bool, ln partLens, err error) {
	d, _ := open(p)
	h, ln := d.u8(), d.lens()
	m.sl = d.floats(m.sl)
	return h != 0, ln, d.end()
}

func addFloats(dst, src []float64) {
	for i, v := range src {
		dst[i] += v
	}
}

// Traffic returns the payload bytes this member has handed to its
// Gatherers (an AllGather's payload once, an AllToAll's parts for the
// others) and received from the other members, since it joined.
func (m *Member) Traffic() (sent, received int64) { return m.sent, m.recv }

// zeros returns s with length n, all zero.
func zeros(s []float64, n int) []float64 {
	if cap(s) < n {
		return make([]float64, n)
	}
	s = s[:n]
	clear(s)
	return s
}
