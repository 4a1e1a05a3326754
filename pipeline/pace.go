package pipeline

import (
	"math"
	"time"

	"github.com/streamkpca/streamkpca/internal/splitmix"
)

// pace keeps the loop up with the stream (learner.load_shedding). A
// consumer that learns slower than its topic grows lag without bound
// until Kafka's retention deletes what it never read; pace trades the
// fraction of the stream that is learned for a bounded lag instead.
//
// # The rule
//
// After every batch it updates two exponentially weighted estimates: c,
// the learner's seconds per learned row (the batch's update and scoring,
// wall time), and λ, the stream's arrival rate in messages per second
// (the growth of consumed + lag, over windows of 1 s). With B the backlog
// (consumer lag plus messages read ahead), the fraction of messages to
// learn, once the stream alone needs more than u of the loop (c·λ > u)
// and the backlog has grown over the last ten windows, is
//
//	f* = u / (c · (λ + B/T)),    f = clamp(f*, fMin, 1)
//
// and 1 otherwise, with u the target load (learner.target_load, 0.8 by
// default: the rest of the cores parse, decode and run the brokers'
// clients) and T = 60 s the
// time to drain a backlog in; at f = f* the loop reads (λ + B/T)/u
// messages a second, more than arrive, so the backlog drains. f falls
// by at most half and rises by at most 10% an update, so a burst does
// not make it oscillate, and c is measured on batches of at least half
// the largest (a partial batch that the linger timer cuts when little
// is learned costs a step's fixed part over fewer rows: counted, it
// raised c as f fell, and f fell further). The model grows (a new
// feature block a step, up to learner.max_features) only while
// c·λ < ¾·u: a block more makes every
// later step slower, so growth stops with room to spare, before the
// stream would have to be thinned (a larger max_features is then safe:
// the stream decides how much of it is used; a backlog that shrank over
// the last ten windows does not hold growth). Nothing is shed before ten
// windows (10 s) have measured λ and the backlog: a backlog that is not
// growing (a topic filled before the service
// started, a burst) is read in full, however long; only a stream that
// keeps arriving faster than the learner learns is thinned.
//
// # With every message scored (output.topic)
//
// A record is written for every good message, learned or not, so
// shedding thins learning, not scoring. Two more costs are measured
// where they are spent: r, the loop's seconds per record to encode and
// write it, which every message pays, and s, the seconds per message
// scored from scratch, which only a shed one pays (a learned row is
// scored from the features its step computes, inside c). The loop's
// load at fraction f is then λ·(r + f·c + (1 − f)·s), and the fraction
// that fills the target load is
//
//	f* = (u/(λ + B/T) − r − s) / (c − s)
//
// (r = s = 0 without an output topic: the rule above). When learning a
// row costs no more than scoring it from scratch (c ≤ s) shedding saves
// nothing and f = 1; when scoring alone takes more than the target
// load, f is fMin and the lag grows, visibly (/readyz, the lag
// metric): every message is still scored, none skipped. The fraction is
// also re-estimated after each write of records, not only after a
// learned batch, so that at fMin — a learned batch every 256 batches of
// messages — it rises again by 10% a write, within seconds (before, a
// rule that counted scoring but updated only on learned batches stayed
// at its floor for minutes: docs/results.md, "Every message scored").
//
// A message is learned when a hash of its partition and offset falls
// under f (keep): the same messages at the same f after a restart, and
// the held-out slice (a different hash) is unrelated to it. Messages not
// learned are counted (streamkpca_messages_shed_total), never
// dead-lettered, and their offsets are covered by the next snapshot like
// every other: nothing is read twice. Bad messages are dead-lettered
// whatever f is.
//
// This is load shedding as stream processors do it under overload
// (Tatbul et al. 2003, "Load shedding in a data stream manager": drop a
// fraction of the input chosen to keep the system's output timely,
// placed as early as possible), with the drop chosen by a hash so that it
// is deterministic, and the fraction set from a cost model instead of a
// queue threshold because the learner's cost per row is measurable
// exactly. Flink and Kafka Streams do not shed (they backpressure, and
// lag grows in the broker): for a learner, whose model is a statistical
// summary, a uniformly thinned stream is the same distribution.
type pace struct {
	off    bool
	target float64       // u
	window time.Duration // of λ's estimate

	frac float64 // f
	cost float64 // c, seconds per learned row (0: none measured)
	// full is the most rows a batch has had: c is measured on batches of
	// at least half as many. A partial batch, which the linger timer
	// cuts when few messages are learned, costs a step's fixed part over
	// fewer rows; counted, it raised c as f fell, and f fell further.
	full int
	// record is r, the loop's seconds per record written to the output
	// topic, and shed s, per message scored from scratch (output.topic;
	// both 0 without it).
	record, shed float64
	rate         float64 // λ, messages per second
	windows      int     // rate windows measured
	mark         time.Time
	markSeen     float64 // consumed + lag at mark
	// backlogs is the backlog at the last paceWindows+1 window marks:
	// growing says whether the stream is outrunning the loop now.
	backlogs []int64
}

// growing reports whether the backlog grew over the last span windows
// (span ≤ paceWindows). λ alone cannot say it: while the fetchers wait
// for the loop (a full queue), the reported lag is the lag at their last
// fetch, so consumed + lag rises with the loop's own pace even on a topic
// that nothing is written to.
func (p *pace) growing(span int) bool {
	n := len(p.backlogs)
	return n > span && p.backlogs[n-1] > p.backlogs[n-1-span]
}

// draining reports whether the backlog shrank over the last span
// windows: the loop is reading a backlog that nothing adds to fast
// enough, whatever λ says.
func (p *pace) draining(span int) bool {
	n := len(p.backlogs)
	return n > span && p.backlogs[n-1] < p.backlogs[n-1-span]
}

// Pace settings (see pace).
const (
	paceGrow = 0.75 // of the target load: the most at which the model grows
	paceRoom = 0.4  // of the target load: under it the budget grows (learner.budget: stream)
	// paceCaughtUp, paceCaughtUpMin: the backlog under which the loop counts
	// as caught up with its stream (the budget grows only then).
	paceCaughtUp    = 2 * time.Second
	paceCaughtUpMin = 1024
	paceDrain       = 60 * time.Second
	paceWindow      = time.Second
	paceWindows     = 10 // before any message is shed
	paceMin         = 1.0 / 256
	paceRise        = 1.1
	paceFall        = 0.5
	paceAlpha       = 0.3
	// paceScoreAlpha weighs r and s, measured at every write of records
	// (several a second): about the last 20 writes.
	paceScoreAlpha = 0.05
	paceClip       = 3
)

// newPace returns a pace that starts at fraction frac (a restored
// snapshot's; 1 for a new model), measuring λ over windows of window
// (0: paceWindow, 1 s).
func newPace(off bool, target, frac float64, window time.Duration) *pace {
	if !(frac > 0) || frac > 1 {
		frac = 1
	}
	if window <= 0 {
		window = paceWindow
	}
	return &pace{off: off, target: target, frac: frac, window: window}
}

// keep reports whether the message with key (online.HoldoutKey) is
// learned at the current fraction (a nil pace keeps every message).
func (p *pace) keep(key uint64) bool {
	if p == nil || p.off || p.frac >= 1 {
		return true
	}
	return float64(splitmix.Mix(key^shedStream)>>11)/(1<<53) < p.frac
}

// grow reports whether the model may add feature blocks: the stream
// leaves room for a larger model (or has not been measured yet).
func (p *pace) grow() bool {
	if p == nil || p.off || p.cost == 0 || p.windows == 0 {
		return true
	}
	return p.frac >= 1 && ((p.cost+p.record)*p.rate < paceGrow*p.target || p.draining(paceWindows))
}

// room reports whether the stream leaves the learner so idle that the
// feature budget may grow past learner.max_features (learner.budget:
// stream): measured over paceWindows windows, every message learned, the
// backlog small (caught up) and not growing, and a step's cost per
// message times the rate
// under paceRoom of the target load. The model then grows until a step
// costs that much, well before growth is held (paceGrow).
func (p *pace) room() bool {
	if p == nil || p.off || p.cost == 0 || p.windows < paceWindows {
		return false
	}
	// Caught up, too: reading a backlog that nothing adds to (a topic
	// filled before the start) looks like a slow stream by its rate, but
	// the learner is busy all the time (TestBackpressure: the heap grew
	// fivefold with the budget while 180,000 messages waited).
	caughtUp := p.backlogs[len(p.backlogs)-1] <= int64(paceCaughtUp.Seconds()*p.rate)+paceCaughtUpMin
	return p.frac >= 1 && caughtUp && (p.cost+p.record)*p.rate < paceRoom*p.target && !p.growing(paceWindows)
}

// behind reports whether the loop falls behind the stream whatever it
// sheds: measured over paceWindows windows, the backlog grew although f
// is at its floor, or at 1 because learning a row costs no more than
// scoring it (an output topic: every message is scored). The lag then
// grows; the loop says so (log, /readyz, streamkpca_falling_behind).
func (p *pace) behind() bool {
	if p == nil || p.off || p.windows < paceWindows || !p.growing(paceWindows) {
		return false
	}
	return p.frac <= paceMin || (p.cost <= p.shed && (p.cost+p.record)*p.rate > p.target)
}

// scored updates r and s after records records were encoded and
// written in recordSec seconds and shedRows messages were scored from
// scratch in shedSec (see pace: with every message scored). A write
// that had to be retried is not a measure of the cost: the caller
// leaves it out. Each measure counts at most paceClip times the
// estimate: a write the brokers hold for half a second (a GC pause, an
// election) is one stall, not the price of every record, and counted
// in full it swung f to its floor.
func (p *pace) scored(records int, recordSec float64, shedRows int, shedSec float64) {
	if p == nil || p.off {
		return
	}
	ewma := func(v *float64, n int, sec float64) {
		if n <= 0 || !(sec > 0) {
			return
		}
		if x := sec / float64(n); *v == 0 {
			*v = x
		} else {
			*v += paceScoreAlpha * (min(x, paceClip**v) - *v)
		}
	}
	ewma(&p.record, records, recordSec)
	ewma(&p.shed, shedRows, shedSec)
}

// shedStream separates shedding's hash from the held-out slice's
// (online.HeldOut).
const shedStream = 0x5348454444494E47 // "SHEDDING"

// observe updates the estimates after a batch of rows learned in
// learnSec seconds; seen is the messages consumed so far and backlog the
// messages behind them (lag and read-ahead), at now. It returns the new
// fraction.
func (p *pace) observe(rows int, learnSec float64, seen, backlog int64, now time.Time) float64 {
	if p.off {
		return 1
	}
	p.full = max(p.full, rows)
	if rows > 0 && learnSec > 0 && 2*rows >= p.full {
		c := learnSec / float64(rows)
		if p.cost == 0 {
			p.cost = c
		} else {
			p.cost += paceAlpha * (c - p.cost)
		}
	}
	arrived := float64(seen + backlog)
	if p.mark.IsZero() {
		p.mark, p.markSeen = now, arrived
		return p.frac
	}
	if dt := now.Sub(p.mark); dt >= p.window {
		r := math.Max(0, arrived-p.markSeen) / dt.Seconds()
		if p.windows == 0 {
			p.rate = r
		} else {
			p.rate += paceAlpha * (r - p.rate)
		}
		p.windows++
		p.mark, p.markSeen = now, arrived
		p.backlogs = append(p.backlogs, backlog)
		if len(p.backlogs) > paceWindows+1 {
			p.backlogs = append(p.backlogs[:0], p.backlogs[1:]...)
		}
	}
	if p.cost == 0 || p.windows < paceWindows || p.rate == 0 {
		return p.frac
	}
	want := 1.0
	if (p.cost+p.record)*p.rate > p.target && (p.frac < 1 || p.growing(paceWindows)) && p.cost > p.shed {
		// The stream alone outruns the learner: thin it, and drain the
		// backlog too. Every message is still scored: at r a record,
		// and at s from scratch when it is not learned.
		demand := p.rate + float64(backlog)/paceDrain.Seconds()
		want = math.Min(1, math.Max(paceMin, (p.target/demand-p.record-p.shed)/(p.cost-p.shed)))
	}
	p.frac = math.Max(p.frac*paceFall, math.Min(want, p.frac*paceRise))
	return p.frac
}
