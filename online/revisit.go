package online

import (
	"slices"

	"github.com/streamkpca/streamkpca/internal/splitmix"
)

// Revisiting rows already learned: the step the service takes with the
// time its stream leaves (learner.replay; the loop in pipeline/loop.go).
//
// The doubly stochastic gradient (the paper's Algorithm 1, update (4))
// is a stochastic approximation of the expected update over the data's
// distribution; a single pass gives it as many steps as the stream has
// batches, and a stream that ends before the decaying step does leaves
// the model above the floor of its own features (UCI digits through the
// service: 6.9× after 42 steps; docs/results.md, "Replay"). A step on
// rows drawn from a window of recent learned rows is one more step of
// the same rule on the same distribution when the stream is stationary;
// the schedule counts it as a step. It adds no feature block: the model
// grows with the stream's steps only, and a revisit refines the
// coefficients of the blocks it has, towards the floor of those features
// (the subspace solver's fixed point is the features' exact PCA).
// Measured, revisits that also added blocks grew a budget that follows
// the stream (learner.budget: stream) past where the stream takes it, and
// each block that joins a converged model moves it: MNIST through the
// service at 400 messages/s ended at 1.07e-3 against exact kernel PCA
// with 47,616 features, against 4.2–4.7e-4 without revisits. Without new
// blocks MNIST is still worse with revisits (5.5e-4, 9.8e-4), which is
// why the service leaves them off by default.

// Revisit learns x (rows×d), rows the model has learned before, as one
// more step of the model alone, on the blocks it has (no block joins):
// following's scouts and challenger do not learn it (they learn the
// stream from their own start, and the rows may be older), and it is not
// counted in SamplesSeen, which counts the stream's samples. Errors are
// Update's.
func (l *KPCA) Revisit(x []float64, rows int) error {
	n, hold := l.samples, l.view.hold
	l.view.hold = true
	err := l.update(x, rows)
	l.samples, l.view.hold = n, hold
	return err
}

// Revisit is KPCA.Revisit for two views: (x, y) pairs learned before,
// one more step of the model alone.
func (l *TwoView) Revisit(x, y []float64, rows int) error {
	n, h0, h1 := l.samples, l.v[0].hold, l.v[1].hold
	l.HoldGrowth(true)
	err := l.update(x, y, rows)
	l.samples, l.v[0].hold, l.v[1].hold = n, h0, h1
	return err
}

// Window: the time a slow stream leaves, spent on more steps
// (learner.replay; the service's loop, pipeline/loop.go).
//
// A single pass gives the learner one step per batch (see Revisit). The
// loop keeps a window of the most recent learned rows — data
// the service holds, never the model, whose snapshots stay seeds plus
// coefficients — and, while no message waits and the stream leaves room,
// learns batches taken from it in sweeps (KPCA.Revisit), up to
// learner.replay revisited rows per learned row.
//
// Why a window of the most recent rows: a row stays in it while the
// next W rows are learned (W its rows), and with revisits paced at ρ per
// learned row the loop revisits ρ·W rows meanwhile — ρ times the window.
// So every row is revisited about ρ times whatever its place in the
// stream (but the first W rows, drawn from a smaller window: more
// often), replay weighs the stream as the stream weighs itself, and a
// changed stream fills the window with its new rows within W rows. A
// uniform reservoir of the whole stream (Vitter's algorithm R) would
// weigh old rows up on a long stream and keep a changed stream's old
// rows forever.
//
// Why sweeps, not draws with replacement: the window is revisited in
// sweeps, each a random order of the rows it holds when the sweep
// starts (random reshuffling; rows that left the window meanwhile are
// passed over), so a row is revisited once a sweep: ρ times, give or
// take one. Drawn with replacement a row is revisited Poisson(ρ) times
// (a standard deviation of √ρ), which re-weighs the rows at random by
// about ±45% at ρ = 3: the model then converges towards the kernel PCA
// of a randomly re-weighted sample rather than the stream's, and where
// the spectrum is flat at k that is a different subspace. Measured with
// the learner alone (MNIST, 4,800 images × 12, 32,768 features, ρ = 3):
// draws with replacement ended at 8.2e-4 against exact kernel PCA,
// sweeps at 3.3e-4, no revisits at 3.0e-4; on UCI digits (40 steps)
// 3.6×, 1.7× and 8.5× the floor of the features (docs/results.md,
// "Replay in sweeps"). Random reshuffling is also the order that makes
// finite-sum SGD converge faster than sampling with replacement
// (Gürbüzbalaban, Ozdaglar & Parrilo, Math. Programming 2021; Safran &
// Shamir, COLT 2020).
//
// Window is that window, and the budget of revisits its rows allow.
type Window struct {
	ratio  float64 // revisited rows per learned row (learner.replay)
	bytes  int64   // the window's room (learner.replay_bytes)
	dx, dy int     // the rows' dimensions, fixed by the first add
	rows   int     // the window's capacity in rows (0: too small, off)
	x, y   []float64
	n      int // rows held (≤ rows)
	// added numbers the rows put in the window since the start: row a is
	// in slot a mod rows, and the window holds rows added−n … added−1.
	added uint64
	// sweep is the current sweep: row numbers in a random order, at the
	// next to draw; sweeps counts the sweeps (the generator's counter).
	sweep  []uint64
	at     int
	sweeps uint64
	// learned, revisited: rows learned from the stream and revisited
	// since the start (Revisited).
	learned, revisited uint64
	seed               uint64
	bx, by             []float64 // the drawn batch
}

// WindowMaxRows bounds the window in rows whatever its bytes allow: at
// d = 16 the default 32 MiB would hold 262,144 rows, minutes of a slow
// stream, and a window that long follows a change that much later.
const WindowMaxRows = 8192

// NewWindow makes a window of bytes room (at most WindowMaxRows rows)
// that allows ratio revisited rows per learned row, its draws
// deterministic given seed; ratio ≤ 0 or no room: nil, off (a nil
// Window's methods do nothing and Due is false).
func NewWindow(ratio float64, bytes int64, seed uint64) *Window {
	if !(ratio > 0) || bytes <= 0 {
		return nil
	}
	return &Window{ratio: ratio, bytes: bytes, seed: seed}
}

// Add puts a learned batch's rows (x rows×dx, y rows×dy or nil) in the
// window, the oldest out when it is full, and counts them as learned.
func (r *Window) Add(x, y []float64, rows int) {
	if r == nil || rows == 0 {
		return
	}
	if r.x == nil {
		r.dx, r.dy = len(x)/rows, len(y)/rows
		// A row costs its values and its place in a sweep.
		r.rows = int(min(int64(WindowMaxRows), r.bytes/int64(8*(r.dx+r.dy+1))))
		r.x, r.y = make([]float64, r.rows*r.dx), make([]float64, r.rows*r.dy)
		r.sweep = make([]uint64, 0, r.rows)
	}
	r.learned += uint64(rows)
	if r.rows == 0 || len(x) != rows*r.dx || len(y) != rows*r.dy {
		return
	}
	for i := range rows {
		slot := int(r.added % uint64(r.rows))
		copy(r.x[slot*r.dx:(slot+1)*r.dx], x[i*r.dx:(i+1)*r.dx])
		copy(r.y[slot*r.dy:(slot+1)*r.dy], y[i*r.dy:(i+1)*r.dy])
		r.added++
		r.n = min(r.n+1, r.rows)
	}
}

// Clear empties the window: the model restarted or a challenger replaced
// it, and the rows before are not its stream's.
func (r *Window) Clear() {
	if r != nil {
		r.n, r.sweep, r.at = 0, r.sweep[:0], 0
	}
}

// Due reports whether a batch of b rows may be revisited: the window
// holds rows and the revisits so far leave room under ratio per learned
// row.
func (r *Window) Due(b int) bool {
	return r != nil && r.n > 0 && float64(r.revisited)+float64(b) <= r.ratio*float64(r.learned)
}

// Draw returns the next b rows of the window's sweeps (deterministic
// given the seed and the draws before; a sweep that ends within the
// batch is followed by the next) and counts them as revisited; the
// slices are the window's until the next Draw. Call it only when Due.
func (r *Window) Draw(b int) (x, y []float64) {
	r.bx, r.by = slices.Grow(r.bx[:0], b*r.dx)[:b*r.dx], slices.Grow(r.by[:0], b*r.dy)[:b*r.dy]
	r.revisited += uint64(b)
	oldest := r.added - uint64(r.n)
	for i := range b {
		for r.at < len(r.sweep) && r.sweep[r.at] < oldest {
			r.at++ // left the window since the sweep started
		}
		if r.at == len(r.sweep) {
			r.newSweep(oldest)
		}
		slot := int(r.sweep[r.at] % uint64(r.rows))
		r.at++
		copy(r.bx[i*r.dx:(i+1)*r.dx], r.x[slot*r.dx:(slot+1)*r.dx])
		copy(r.by[i*r.dy:(i+1)*r.dy], r.y[slot*r.dy:(slot+1)*r.dy])
	}
	return r.bx, r.by
}

// newSweep starts a sweep of the rows held, oldest … added−1, in a
// random order (Fisher–Yates with SplitMix64 draws).
func (r *Window) newSweep(oldest uint64) {
	r.sweep, r.at = r.sweep[:0], 0
	for a := oldest; a < r.added; a++ {
		r.sweep = append(r.sweep, a)
	}
	r.sweeps++
	base := splitmix.Mix(r.seed ^ r.sweeps)
	for i := len(r.sweep) - 1; i > 0; i-- {
		j := int(splitmix.Mix(base+uint64(i)) % uint64(i+1))
		r.sweep[i], r.sweep[j] = r.sweep[j], r.sweep[i]
	}
}

// Revisited returns the rows drawn so far.
func (r *Window) Revisited() uint64 {
	if r == nil {
		return 0
	}
	return r.revisited
}
