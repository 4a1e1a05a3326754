package online

import (
	"fmt"
	"math"
	"reflect"

	"github.com/streamkpca/streamkpca/snapshot"
)

// # Following gradual change: a challenger
//
// The change detector (see monitor) sees a level drop of the held-out
// score: an abrupt change. A gradual one — a mix of the stream's sources
// shifting over tens of thousands of points — moves the score too slowly
// for it, and worse, Score (the share of the variance the functions
// capture, normalised by the coefficients' norms) rises through it on
// MNIST while the model decays (`streamkpca bench drift --case
// mnist-ramp`). With Forget = follow (the default) a one-view learner
// that is assessed also runs a challenger: a learner of the same
// settings with an eighth of the feature budget, started on the stream
// as it is now and restarted every followLife steps. Both score the same
// held-out rows, a window of followWindow at a time, by FitScore (which
// ranks a fresh model above a stale one, in the same bench); when the
// challenger wins followWins windows in a row by more than followMargin,
// it replaces the model (Switches counts it): the model adopts its
// blocks, coefficients and schedule, keeps its own budget (new blocks
// join again one a step) and its versions go on. On a stationary stream
// the young, smaller challenger loses and is restarted: nothing changes.
//
// The cost: the challenger learns every batch at an eighth of the
// budget (about an eighth more per step, less while the model is still
// growing) and each window scores followWindow points twice against
// their kernel matrix (followWindow²·d kernel evaluations, once, and two
// eigendecompositions of order followWindow³), about one step's work a
// window. A challenger lives at least followLife steps and until it has
// been compared in followLifeWindows windows.
//
// In a group (package cluster) the members step as one model: the
// group's rank 0 runs the challenger on its own rows and held-out rows
// (Challenge, TeachChallenger) and, when it wins, sends its snapshot
// (ChallengerSnapshot) with the step; every member Adopts those bytes
// after the step and the group stays one model. Where a one-view
// learner has no challenger: landmark features, the covariance solver,
// learners that are never assessed (fit), Forget detect or off. Two-view
// learners run one of their own (followpair.go).

// Following's settings, chosen on `streamkpca bench drift --case
// mnist-ramp` and `--case mnist-stationary`, seeds 1–3 (docs/results.md):
// a window of 256 rows with a margin of 0.005 followed the ramp later
// and worse; a margin of 0.005 at 128 rows switched more often on the
// ramp without following it better.
const (
	// followBudgetShare: the challenger's feature budget is this share of
	// the model's (at least one block).
	followBudgetShare = 8
	// followStart: the first challenger starts once the model has taken
	// this many steps; followLife: a challenger that has not won by this
	// age is restarted on the stream as it is then.
	followStart, followLife = 8, 24
	// followLifeWindows: nor before it has been compared in this many
	// windows (a group's rank 0, or small batches, fill a window in
	// more steps than 4).
	followLifeWindows = 4
	// followMinAge: a challenger is compared only from this age on.
	followMinAge = 4
	// followWindow: held-out rows per comparison (4 batches of 512 at
	// learner.holdout 16).
	followWindow = 128
	// followWins windows in a row, each won by log(fit_c/fit_m) >
	// followMargin, make the challenger the model.
	followWins   = 2
	followMargin = 0.008
)

// follower is the challenger's state (see above).
type follower struct {
	ch  *KPCA
	win []float64 // the window's held-out rows, raw
	duel
}

// duel is a challenger's standing against the model, for one view and
// two (TwoView's pairFollower).
type duel struct {
	rows     int     // held-out rows in the comparison window so far
	wins     int     // windows in a row the challenger won
	compared int     // windows the challenger was compared in
	fit, chf float64 // the last window's scores: the model's, the challenger's
}

// judge records a full window's scores of the model (fit) and of a
// challenger of age steps, and reports whether the challenger has now
// won followWins windows in a row by more than margin (advantage) where
// the caller's paired test trusts the lead (trusted). Windows a score
// cannot be computed on (NaN) and those of a challenger younger than
// followMinAge count as lost and are not compared.
func (d *duel) judge(fit, chf float64, age uint64, margin float64, trusted bool) bool {
	d.rows = 0
	if !math.IsNaN(fit) && !math.IsNaN(chf) {
		d.fit, d.chf = fit, chf
	}
	if age < followMinAge || math.IsNaN(fit) || math.IsNaN(chf) {
		d.wins = 0
		return false
	}
	d.compared++
	if advantage(fit, chf) > margin && trusted {
		d.wins++
	} else {
		d.wins = 0
	}
	return d.wins >= followWins
}

// advantage is the challenger's lead over the model by their window
// scores: log(chf/fit) when both are positive (FitScore, held-out
// correlations of a model that has any), else the difference (a model
// whose functions do not correlate on the window loses to any challenger
// whose functions do).
func advantage(fit, chf float64) float64 {
	if fit > 0 && chf > 0 {
		return math.Log(chf / fit)
	}
	return chf - fit
}

// restored is the duel a snapshot's challenger state records.
func restored(c *snapshot.Challenger) duel {
	return duel{rows: c.Rows, wins: c.Wins, compared: c.Compared, fit: c.Fit, chf: c.ChallengerFit}
}

// state is the duel's part of a snapshot's challenger state; Model is
// left to the caller.
func (d *duel) state() *snapshot.Challenger {
	return &snapshot.Challenger{Wins: d.wins, Compared: d.compared, Rows: d.rows, Fit: d.fit, ChallengerFit: d.chf}
}

// following reports whether l runs a challenger when assessed.
func (l *KPCA) following() bool {
	return l.cfg.Forget == ForgetFollow && !l.lazy && !l.fm.Landmarks && l.cfg.Solver != SolverCovariance
}

// Switches returns how many times a challenger replaced the model.
func (p *progress) Switches() uint64 { return p.switches }

// FitScores returns the last comparison window's fit scores (FitScore)
// of the model and of the challenger; zeros before the first.
func (l *KPCA) FitScores() (model, challenger float64) { return l.fol.fit, l.fol.chf }

// dropChallenger ends the challenger and its window.
func (l *KPCA) dropChallenger() {
	if l.fol.ch != nil {
		l.fol.ch.Close()
	}
	l.fol.ch, l.fol.duel = nil, duel{}
	l.fol.win = l.fol.win[:0]
}

// newChallenger returns a learner of l's settings with followBudgetShare
// of its budget and its bandwidth, nil if it cannot be made.
func (l *KPCA) newChallenger() *KPCA {
	c := l.cfg
	b := l.fm.BlockSize
	c.MaxFeatures = challengerBudget(l.cfg.MaxFeatures, b)
	c.BlockSize = b
	c.Kernel = l.fm.Kernel
	c.Forget = ForgetOff
	ch, err := New(c)
	if err != nil {
		return nil
	}
	ch.quickInit = true
	return ch
}

// challengerState is the follower's part of a snapshot (format v4): the
// challenger's own snapshot and the comparison window, appended to the
// model's learner state; nil without a challenger.
func (l *KPCA) challengerState() (*snapshot.Challenger, []float64) {
	ch := l.fol.ch
	if ch == nil || len(ch.seeds) == 0 {
		return nil, nil // a challenger is made and taught in one step: it has blocks between steps
	}
	cs := ch.Snapshot()
	h := cs.Header
	state := make([]float64, 0, len(l.fol.win)+len(cs.Coef[0])+len(cs.State))
	state = append(append(append(state, l.fol.win...), cs.Coef[0]...), cs.State...)
	c := l.fol.state()
	c.Model = &h
	return c, state
}

// restoreChallenger continues the challenger of a snapshot (see
// challengerState): the challenger restored with the model's runtime
// settings, the comparison window and the wins so far, so that the
// restored learner switches where the one that went on would.
func (l *KPCA) restoreChallenger(c *snapshot.Challenger, window []float64, chSnap *snapshot.Snapshot) error {
	rt := l.cfg
	rt.Forget = ForgetOff
	ch, err := Restore(chSnap, rt)
	if err != nil {
		return fmt.Errorf("challenger: %w", err)
	}
	ch.quickInit = true
	l.fol = follower{ch: ch, win: append(l.fol.win[:0], window...), duel: restored(c)}
	return nil
}

// challengerBudget is the feature budget of a challenger beside a model
// of budget features: followBudgetShare of it in whole blocks of b, at
// least one.
func challengerBudget(features, b int) int {
	return max(b, features/followBudgetShare/b*b)
}

// challengerStep teaches the challenger the batch the model has just
// learned, restarting it when it is past followLife and has been
// compared in followLifeWindows windows.
func (l *KPCA) challengerStep(x []float64, rows int) {
	ch := l.fol.ch
	if ch == nil {
		return
	}
	if ch.t >= followLife && l.fol.compared >= followLifeWindows {
		l.dropChallenger()
		l.fol.ch = l.newChallenger()
		ch = l.fol.ch
		if ch == nil {
			return
		}
	}
	if err := ch.update(x, rows); err != nil && ch.t == 0 {
		l.dropChallenger() // it cannot start on this batch: the next assessment starts another
	}
}

// followAssess adds held-out rows x to the comparison window and, when
// it is full, scores the model and the challenger on it; it reports
// whether the challenger replaced the model.
func (l *KPCA) followAssess(x []float64, rows int) bool {
	if !l.Challenge(x, rows) {
		return false
	}
	l.promote()
	return true
}

// Challenge is the comparison half of following for a model that steps
// in a group (package cluster), where one member runs the challenger on
// its own rows and the group adopts it as one: it adds held-out rows x
// to the comparison window (starting a challenger when there is none and
// the model is old enough) and, when the window is full, scores the
// model and the challenger on it. It reports whether the challenger has
// now won followWins windows in a row: the caller then sends
// ChallengerSnapshot to every member, and each Adopts it at the same
// step. A learner on its own does all of this in Assess and Update.
func (l *KPCA) Challenge(x []float64, rows int) bool {
	if !l.following() || l.t < followStart {
		return false
	}
	if l.fol.ch == nil {
		l.fol.ch = l.newChallenger()
		l.fol.duel, l.fol.win = duel{}, l.fol.win[:0]
		return false
	}
	d := l.fm.Dim
	take := min(rows, followWindow-l.fol.rows)
	l.fol.win = append(l.fol.win, x[:take*d]...)
	l.fol.rows += take
	if l.fol.rows < followWindow {
		return false
	}
	fit, chf := fitScores(l, l.fol.ch, l.fol.win, l.fol.rows)
	l.fol.win = l.fol.win[:0]
	return l.fol.judge(fit, chf, l.fol.ch.t, followMargin, true)
}

// TeachChallenger teaches the challenger (see Challenge) a batch the
// model has learned; Update does it for a learner on its own.
func (l *KPCA) TeachChallenger(x []float64, rows int) { l.challengerStep(x, rows) }

// DropChallenger ends the challenger and its comparison window: the
// members of a group that do not run it (package cluster).
func (l *KPCA) DropChallenger() { l.dropChallenger() }

// ChallengerSnapshot returns the challenger's own snapshot (its blocks,
// coefficients and solver state), nil without one.
func (l *KPCA) ChallengerSnapshot() *snapshot.Snapshot {
	if l.fol.ch == nil || len(l.fol.ch.seeds) == 0 {
		return nil
	}
	return l.fol.ch.Snapshot()
}

// Adopt makes the challenger of snapshot ch (ChallengerSnapshot of a
// learner of the same model) the model, as a switch does (Switches
// counts it): the members of a group adopt the same bytes at the same
// step and stay one model. ch must be a one-view random-feature model of
// l's algorithm, k, dimension, kernel and block size.
func (l *KPCA) Adopt(ch *snapshot.Snapshot) error {
	rt := l.cfg
	rt.Forget = ForgetOff
	c, err := Restore(ch, rt)
	if err != nil {
		return fmt.Errorf("online: adopt a challenger: %w", err)
	}
	if c.cfg.Algorithm != l.cfg.Algorithm || c.cfg.K != l.cfg.K || c.fm.Dim != l.fm.Dim || !reflect.DeepEqual(c.fm.Kernel, l.fm.Kernel) ||
		c.fm.BlockSize != l.fm.BlockSize || c.fm.Landmarks || c.cfg.Solver != l.cfg.Solver || c.fm.Structured != l.fm.Structured {
		c.Close()
		return fmt.Errorf("online: adopt a challenger: %w: it is not a challenger of this model (algorithm, k, dimension, kernel, block size, solver or frequencies differ)", snapshot.ErrHeader)
	}
	if l.t == 0 {
		c.Close()
		return fmt.Errorf("online: adopt a challenger: the model has not started")
	}
	c.quickInit = true
	l.dropChallenger()
	l.fol.ch = c
	l.promote()
	return nil
}

// fitScores is FitScore of two learners on the same rows, sharing the
// kernel matrix and its eigenvalues.
func fitScores(a, b *KPCA, x []float64, rows int) (float64, float64) {
	k := a.cfg.K
	if len(a.seeds) == 0 || len(b.seeds) == 0 || rows <= k {
		return math.NaN(), math.NaN()
	}
	km := a.windowKernel(x, rows)
	lam, ok := topEigenvalues(km, k)
	if !ok {
		return math.NaN(), math.NaN()
	}
	return subspaceFitWith(km, a.valuesOn(x, rows), lam), subspaceFitWith(km, b.valuesOn(x, rows), lam)
}

// promote makes the challenger the model: l adopts its blocks,
// coefficients, solver state and schedule (its age becomes the model's),
// keeps its own budget, step count and samples (versions go on), and
// starts a new reference for the change detector.
func (l *KPCA) promote() {
	c := l.fol.ch
	l.fol.ch = nil
	l.dropChallenger()
	maxBlock, hold, maxF := l.maxBlock, l.hold, l.cfg.MaxFeatures
	l.view.close()
	if l.cov != nil {
		l.cov.ws.Close()
	}
	l.view, c.view = c.view, view{}
	l.maxBlock, l.hold = maxBlock, hold
	l.sub, l.cov = c.sub, c.cov
	c.sub, c.cov = nil, nil
	if l.sub != nil {
		l.sub.reserve(maxF)
	}
	l.lambda0, l.mrun = c.lambda0, c.mrun
	l.restart = l.t - min(c.t, l.t)
	l.backoff = c.backoff
	l.reset = false
	l.raisedAt = l.t
	l.mon.restart()
	l.switches++
	c.Close()
}
