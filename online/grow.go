package online

import (
	"time"
)

// Growth is the feature budget of an offline run (fit, bench): the
// paper's doubly stochastic growth, a new block every step (Alg. 1), goes
// on past Config.MaxFeatures for as long as a wall-clock limit and a
// memory bound can pay for the larger model. The service's budget is set
// by its stream instead (learner.budget: stream); an offline run has no
// stream to wait for, only a time limit.
//
// After each step that fills the budget, it is raised by one block of B
// when
//
//   - memory: the model's coefficients and their working copies at the
//     larger budget, 32·k bytes a feature, stay within MaxBytes; and
//   - time: the time left pays for as many more steps at the larger
//     budget F' as it has blocks: left ≥ c·F'²/B, where c is a step's
//     measured seconds per feature (an average of the recent steps).
//
// A step's cost grows with the features, so growing one block a step to F
// takes about c·F²/(2B); the rule stops when a third of the limit has
// gone into growing, F ≈ √(2·B·T/(3c)), and leaves the rest to learning
// at that size: every block then gets at least as many steps after its
// arrival as the model has blocks. kpca and gha with random features only
// (RaiseBudget's limits).
type Growth struct {
	// Limit is the run's wall-clock budget; 0 turns growth off.
	Limit time.Duration
	// MaxBytes bounds the coefficients (32·k bytes a feature). Default:
	// 1 GiB (the service's learner.max_model_bytes).
	MaxBytes int64

	start   time.Time
	perFeat float64          // seconds a step per feature, exponentially averaged
	raised  int              // blocks added past the configured budget
	now     func() time.Time // tests: a clock of their own
}

// DefaultGrowthBytes is Growth's default memory bound.
const DefaultGrowthBytes = 1 << 30

// Step records a step of l that took d (measured by the caller around
// Update) and raises l's budget by a block when the rule above allows.
// It returns the budget.
func (g *Growth) Step(l *KPCA, d time.Duration) int {
	if g.Limit <= 0 || l.Step() == 0 {
		return l.MaxFeatures()
	}
	clock := g.now
	if clock == nil {
		clock = time.Now
	}
	now := clock()
	if g.start.IsZero() {
		g.start = now.Add(-d)
	}
	f := l.Features()
	if f > 0 {
		c := d.Seconds() / float64(f)
		if g.perFeat == 0 {
			g.perFeat = c
		} else {
			g.perFeat += 0.2 * (c - g.perFeat)
		}
	}
	budget := l.MaxFeatures()
	if f < budget {
		return budget // still filling
	}
	maxBytes := g.MaxBytes
	if maxBytes <= 0 {
		maxBytes = DefaultGrowthBytes
	}
	cfg := l.Config()
	next := budget + cfg.BlockSize
	if int64(next)*int64(32*cfg.K) > maxBytes {
		return budget
	}
	left := g.Limit - now.Sub(g.start)
	if left.Seconds() < g.perFeat*float64(next)*float64(next)/float64(cfg.BlockSize) {
		return budget
	}
	if got := l.RaiseBudget(next); got > budget {
		g.raised++
		return got
	}
	return budget
}

// Raised is the number of blocks Step added past the configured budget.
func (g *Growth) Raised() int { return g.raised }
