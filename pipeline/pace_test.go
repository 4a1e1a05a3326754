package pipeline

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/streamkpca/streamkpca/online"
)

// simulate runs a loop that learns with cost c seconds per learned row
// against a stream of lambda messages per second for dur, in batches of
// b learned rows, and returns the final backlog and fraction. It is the
// queue the service is: messages arrive at lambda, the loop reads them
// (a message costs nothing to read, a learned one c) and learns the
// fraction pace keeps.
func simulate(p *pace, c, lambda float64, b int, dur time.Duration) (backlog, frac float64) {
	t0 := time.Unix(0, 0)
	var now, consumed float64
	arrived := func() float64 { return lambda * now }
	for now < dur.Seconds() {
		// One batch: read messages until b are kept, at the current f.
		f := p.frac
		read := float64(b) / f
		if avail := arrived() - consumed; read > avail+float64(b) {
			// Waiting for data: the loop idles until enough arrive.
			now += (read - avail) / lambda
		}
		learn := float64(b) * c
		now += learn
		consumed += read
		backlog = math.Max(0, arrived()-consumed)
		if backlog == 0 {
			consumed = arrived()
		}
		p.observe(b, learn, int64(consumed), int64(backlog), t0.Add(time.Duration(now*float64(time.Second))))
	}
	return backlog, p.frac
}

// TestPaceKeepsLagBounded: a stream 1.5× faster than the learner (the
// issue's 15,000 messages/s against a service that learns 10,000) ends
// with a backlog of under two seconds of stream, learning about u/1.5 of
// it; a stream the learner can follow is learned in full.
func TestPaceKeepsLagBounded(t *testing.T) {
	const c = 1.0 / 10000 // 10,000 rows/s
	p := newPace(false, 0.8, 1, 0)
	backlog, f := simulate(p, c, 15000, 512, 150*time.Second)
	if backlog > 2*15000 {
		t.Fatalf("backlog %.0f after 150 s at 15,000/s, want under 2 s of stream", backlog)
	}
	if want := 0.8 * 10000 / 15000; math.Abs(f-want) > 0.05 {
		t.Fatalf("learned fraction %.3f, want about %.3f (u·capacity/rate)", f, want)
	}
	p = newPace(false, 0.8, 1, 0)
	if _, f := simulate(p, c, 6000, 512, 150*time.Second); f != 1 {
		t.Fatalf("a stream at 60%% of the learner's capacity: fraction %.3f, want 1", f)
	}
	// Without shedding the same stream's backlog grows by 5,000 a second.
	p = newPace(true, 0.8, 1, 0)
	if backlog, _ := simulate(p, c, 15000, 512, 150*time.Second); backlog < 600000 {
		t.Fatalf("load_shedding off: backlog %.0f, want it to grow (the learner is slower than the stream)", backlog)
	}
}

// TestPaceDoesNotShedAStaticBacklog: a topic filled before the service
// started (nothing arriving) is read in full whatever its size.
func TestPaceDoesNotShedAStaticBacklog(t *testing.T) {
	p := newPace(false, 0.8, 1, 0)
	t0 := time.Unix(0, 0)
	backlog := int64(10_000_000)
	var consumed int64
	for i := range 1000 {
		consumed += 512
		backlog -= 512
		if f := p.observe(512, 0.05, consumed, backlog, t0.Add(time.Duration(i)*50*time.Millisecond)); f != 1 {
			t.Fatalf("batch %d: fraction %.3f on a backlog that is not growing", i, f)
		}
	}
}

// TestShedSubsetIsDeterministic: keep chooses by the message's key alone
// (a restart at the same fraction learns the same messages), the share
// kept matches the fraction, and it is independent of the held-out
// slice.
func TestShedSubsetIsDeterministic(t *testing.T) {
	p := newPace(false, 0.8, 0.3, 0)
	q := newPace(false, 0.8, 0.3, 0)
	var kept, heldKept, held int
	const n = 200000
	for i := range n {
		key := online.HoldoutKey(i%4, int64(i/4))
		k := p.keep(key)
		if k != q.keep(key) {
			t.Fatal("two paces at one fraction disagree")
		}
		if k {
			kept++
		}
		if online.HeldOut(key, 16) {
			held++
			if k {
				heldKept++
			}
		}
	}
	if share := float64(kept) / n; math.Abs(share-0.3) > 0.01 {
		t.Fatalf("kept %.4f of the messages at fraction 0.3", share)
	}
	if share := float64(heldKept) / float64(held); math.Abs(share-0.3) > 0.03 {
		t.Fatalf("kept %.4f of the held-out messages: shedding is correlated with the held-out slice", share)
	}
}

// TestPaceStopsGrowthBeforeShedding: a model whose step cost grows with
// its blocks (c = blocks × 1 µs a row) on a stream of 10,000 messages/s
// grows while the stream leaves room and stops at c·λ ≈ ¾·u = 0.6, i.e.
// about 60 blocks (a few more: it grows during the first second, before
// λ is measured), well inside a ceiling of 512, without ever shedding;
// on a stream of 1,000 a second (c·λ = 0.51 at 512 blocks) it grows to
// the ceiling.
func TestPaceStopsGrowthBeforeShedding(t *testing.T) {
	for _, tc := range []struct {
		lambda    float64
		lo, hi    int
		wantFrac  float64
		maxBlocks int
	}{{10000, 50, 70, 1, 512}, {1000, 512, 512, 1, 512}} {
		p := newPace(false, 0.8, 1, 0)
		blocks := 1
		t0 := time.Unix(0, 0)
		var now, consumed float64
		for now < 300 {
			c := float64(blocks) * 1e-6
			f := p.frac
			read := 512 / f
			if avail := tc.lambda*now - consumed; read > avail {
				now += (read - avail) / tc.lambda
			}
			now += 512 * c
			consumed += read
			backlog := math.Max(0, tc.lambda*now-consumed)
			p.observe(512, 512*c, int64(consumed), int64(backlog), t0.Add(time.Duration(now*float64(time.Second))))
			if p.frac < 1 {
				t.Fatalf("λ %.0f: shed (fraction %.3f) at %d blocks: growth must stop before the stream needs thinning", tc.lambda, p.frac, blocks)
			}
			if p.grow() && blocks < tc.maxBlocks {
				blocks++
			}
		}
		if blocks < tc.lo || blocks > tc.hi {
			t.Fatalf("λ %.0f: the model grew to %d blocks, want %d–%d", tc.lambda, blocks, tc.lo, tc.hi)
		}
	}
}

// TestPaceStaleLagIsNoStream: on a topic filled before the start, the
// fetchers wait for the loop (a full queue of 100,000: ten seconds of the
// loop) and the lag they report is the lag at their last fetch, so
// consumed + lag rises with the loop's pace between fetches, as if a
// stream arrived. The backlog only shrinks, so nothing is shed, and once
// ten windows show it shrinking growth is not held either. (On λ alone
// the pace held growth here for good.)
func TestPaceStaleLagIsNoStream(t *testing.T) {
	p := newPace(false, 0.8, 1, 0)
	t0 := time.Unix(0, 0)
	const total, queue, c = 2_000_000, 100_000, 1e-4 // the loop learns 10,000 rows/s
	var now float64
	var consumed int64
	for consumed < total-queue {
		consumed += 512
		now += 512 * c
		fetched := min(total, (consumed/queue+1)*queue)
		backlog := int64(total - fetched)
		if f := p.observe(512, 512*c, consumed, backlog, t0.Add(time.Duration(now*float64(time.Second)))); f != 1 {
			t.Fatalf("at %d of %d messages (%.0f s): fraction %.3f on a backlog nothing is added to", consumed, total, now, f)
		}
		if now > 2*paceWindows && !p.grow() {
			t.Fatalf("at %d messages (%.0f s): growth held on a draining backlog", consumed, now)
		}
	}
}

// TestPaceRoomOnlyWhenCaughtUp: the budget may grow (room) on a slow
// stream the loop has caught up with, never while it reads a backlog that
// nothing adds to (a topic filled before the start: its arrival rate
// looks like zero, but the learner is busy all the time; before, the
// budget grew there and TestBackpressure's heap grew fivefold).
func TestPaceRoomOnlyWhenCaughtUp(t *testing.T) {
	t0 := time.Unix(0, 0)
	p := newPace(false, 0.8, 1, 0)
	backlog := int64(10_000_000)
	var consumed int64
	for i := range 1000 {
		consumed += 512
		backlog -= 512
		p.observe(512, 0.05, consumed, backlog, t0.Add(time.Duration(i)*50*time.Millisecond))
		if p.room() {
			t.Fatalf("batch %d: room to grow while %d messages wait", i, backlog)
		}
	}
	// A slow stream (1,000/s against a learner of 10,000/s), caught up.
	p = newPace(false, 0.8, 1, 0)
	simulate(p, 1.0/10000, 1000, 512, 60*time.Second)
	if !p.room() {
		t.Errorf("no room on a stream at 10%% of the learner's capacity, caught up (rate %.0f, cost %.2g)", p.rate, p.cost)
	}
}

// TestClusterMemberStopsSheddingWhenItKeepsUp: a cluster member's step
// takes the group's time, 1 s here, whatever its own rows. With a slow
// partition (100 messages/s) it takes 100 rows a step and keeps up (no
// backlog); after a shedding episode (fraction 0.5) its fraction must
// return to 1. Costed per row it had (1 s / 100 rows: the stream fills
// each step exactly, c·λ = 1 > u) it would shed a fifth of its stream for
// good; costed per row of the batch a step could take (the cluster
// coordinator's capacity), c·λ = 100/512 and it learns every message.
func TestClusterMemberStopsSheddingWhenItKeepsUp(t *testing.T) {
	const batch, rate = 512, 100
	run := func(capacity func(rows, batch int) int) float64 {
		p := newPace(false, 0.8, 0.5, 0)
		t0 := time.Unix(0, 0)
		var seen int64
		var f float64
		for s := 1; s <= 120; s++ {
			seen += rate
			f = p.observe(capacity(rate, batch), 1, seen, 0, t0.Add(time.Duration(s)*time.Second))
		}
		return f
	}
	var c clusterState
	if f := run(c.capacity); f != 1 {
		t.Errorf("a member keeping up: learned fraction %.3f after 120 steps, want 1", f)
	}
	if f := run(solo{}.capacity); !(f < 1) {
		t.Errorf("costed per row it had: fraction %.3f; the test no longer shows the difference", f)
	}
}

// simulateScored is simulate with every message scored (output.topic):
// the loop reads the stream in writes of 2b messages (scoreIfMany), each
// costing r a record and s a message it does not learn (scored from
// scratch); the learned ones gather into batches of b that cost c a row
// (their scoring inside). It returns the final backlog, the fraction,
// and the share of the loop's time spent working over the last half.
func simulateScored(p *pace, c, s, r, lambda float64, b int, dur time.Duration) (backlog, frac, busy float64) {
	t0 := time.Unix(0, 0)
	var now, consumed, pending, work, span float64
	half := dur.Seconds() / 2
	at := func() time.Time { return t0.Add(time.Duration(now * float64(time.Second))) }
	for now < dur.Seconds() {
		m := float64(2 * b)
		if avail := lambda*now - consumed; avail < m {
			wait := (m - avail) / lambda
			if now > half {
				span += wait
			}
			now += wait
		}
		f := p.frac
		shed := (1 - f) * m
		cost := m*r + shed*s
		pending += f * m
		learned := 0.0
		for pending >= float64(b) {
			pending -= float64(b)
			learned += float64(b)
		}
		cost += learned * c
		if now > half {
			work += cost
			span += cost
		}
		now += cost
		consumed += m
		backlog = math.Max(0, lambda*now-consumed)
		if learned > 0 {
			p.observe(b, float64(b)*c, int64(consumed), int64(backlog), at())
		}
		p.scored(int(m), m*r, int(shed), shed*s)
		p.observe(0, 0, int64(consumed), int64(backlog), at())
	}
	return backlog, p.frac, work / span
}

// TestPaceCountsScoring: with every message scored, shedding thins
// learning to fill the target load with scoring counted — a record's
// cost r, which every message pays, and s, scoring a shed message from
// scratch — at f* = (u/λ − r − s)/(c − s). Counting the learner's cost
// alone (before) kept f at u/(cλ) = 0.88 and the loop 98% busy.
func TestPaceCountsScoring(t *testing.T) {
	const c, s, r, lambda = 76e-6, 40e-6, 10e-6, 12000.0
	p := newPace(false, 0.8, 1, 0)
	backlog, f, busy := simulateScored(p, c, s, r, lambda, 512, 150*time.Second)
	want := (0.8/lambda - r - s) / (c - s)
	if math.Abs(f-want) > 0.05 {
		t.Errorf("learned fraction %.3f, want about %.3f", f, want)
	}
	if busy > 0.85 {
		t.Errorf("the loop busy %.2f of the time, want about the target load 0.8", busy)
	}
	if backlog > 2*lambda {
		t.Errorf("backlog %.0f, want under 2 s of stream", backlog)
	}
	// Learning no dearer than scoring from scratch: shedding saves
	// nothing, every message is learned.
	p = newPace(false, 0.8, 1, 0)
	if _, f, _ := simulateScored(p, 30e-6, 40e-6, r, lambda, 512, 60*time.Second); f != 1 {
		t.Errorf("c ≤ s: fraction %.3f, want 1", f)
	}
}

// TestPaceRisesFromItsFloorBetweenLearnedBatches: a fraction at its
// floor learns a batch once in 256; re-estimated after every write of
// records it reaches its level again within seconds, not minutes.
func TestPaceRisesFromItsFloorBetweenLearnedBatches(t *testing.T) {
	const c, s, r, lambda = 76e-6, 40e-6, 10e-6, 12000.0
	p := newPace(false, 0.8, 1, 0)
	simulateScored(p, c, s, r, lambda, 512, 30*time.Second)
	p.frac = paceMin
	_, f, _ := simulateScored(p, c, s, r, lambda, 512, 10*time.Second)
	if want := (0.8/lambda - r - s) / (c - s); f < 0.9*want {
		t.Errorf("10 s after the floor: fraction %.3f, want about %.3f", f, want)
	}
}

// TestPaceSaysWhenItFallsBehind: when scoring every message takes more
// than the loop has, shedding cannot help and the lag grows: behind is
// set — at the floor when learning costs more than scoring (c > s), at
// f = 1 when it does not — and not while the loop keeps up.
func TestPaceSaysWhenItFallsBehind(t *testing.T) {
	for _, c := range []struct {
		name          string
		c, s, r, rate float64
		behind        bool
	}{
		{"keeps up by shedding", 76e-6, 40e-6, 10e-6, 12000, false},
		{"scoring alone too slow", 76e-6, 70e-6, 20e-6, 12000, true},
		{"learning no dearer than scoring, too slow", 30e-6, 40e-6, 10e-6, 30000, true},
		{"a stream it follows", 76e-6, 40e-6, 10e-6, 4000, false},
	} {
		p := newPace(false, 0.8, 1, 0)
		backlog, f, _ := simulateScored(p, c.c, c.s, c.r, c.rate, 512, 60*time.Second)
		if p.behind() != c.behind {
			t.Errorf("%s: behind %v (fraction %.3f, backlog %.0f), want %v", c.name, p.behind(), f, backlog, c.behind)
		}
	}
}

// TestFallingBehindIsVisible: when the pace says the loop falls behind
// whatever it sheds, the status (and so /readyz), the metric say so,
// and they say so no more once it keeps up; /readyz stays 200 (the
// model is served and learns) with the reason.
func TestFallingBehindIsVisible(t *testing.T) {
	p, l := coordinated(t, soloMode)
	l.pace = newPace(false, 0.8, paceMin, 0)
	l.pace.cost, l.pace.shed, l.pace.rate, l.pace.windows = 76e-6, 70e-6, 12000, paceWindows
	for i := range paceWindows + 1 {
		l.pace.backlogs = append(l.pace.backlogs, int64(1000*i))
	}
	l.keepUp(0)
	if !p.Status().Behind || testutil.ToFloat64(p.met.Behind) != 1 {
		t.Fatalf("backlog growing at the floor: status %v, metric %v; want both set", p.Status().Behind, testutil.ToFloat64(p.met.Behind))
	}
	slices.Reverse(l.pace.backlogs)
	l.keepUp(0)
	if p.Status().Behind || testutil.ToFloat64(p.met.Behind) != 0 {
		t.Fatalf("backlog shrinking: status %v, metric %v; want both clear", p.Status().Behind, testutil.ToFloat64(p.met.Behind))
	}
}
