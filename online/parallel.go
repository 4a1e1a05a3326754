package online

import (
	"errors"
	"fmt"
)

// Data-parallel steps: one model learned by several members, each from
// its own rows of every step's batch.
//
// The subspace step (see subspace) is a sum over the batch's rows plus
// work on the coefficients alone, so it splits exactly. Every member
// holds the same learner (the same seeds and coefficients: restored from
// one snapshot, or started by Update on one shared first batch); member i
// has the batch X_i of b_i rows. One step over the union X = [X_1; …; X_p],
// b = Σ b_i rows, is three calls and two reductions:
//
//	l.Moments(&mom[i], X_i, b_i)  // H_i = Φ(X_i)·A: b_i, Σh, Σh·hᵀ (k² + k + 1 numbers)
//	total := Σ mom[i]             // Moments.Add in member order
//	l.Partial(&part[i], &total)   // Φ(X_i)ᵀ·(η/b)·H̃_i for every block, and the new one's
//	grad := Σ part[i]             // Partial.Add in member order
//	l.Apply(&total, &grad)        // the step on the union: Update's tail
//
// From the union moments every member forms the same M = Σh·hᵀ/b − h̄·h̄ᵀ
// (h̄ = Σh/b; without centring M = Σh·hᵀ/b), so all take the same
// guard decision, eigenvalue estimates and step size η; the gradient
// through every block is a sum over rows, so summing the members' parts
// is the gradient on the union. Apply then does what Update does after
// its gradient: new block, centre, orthonormalisation.
//
// The result is Update on the union batch up to the order of the sums
// over rows (grouped by member): within rounding of a single learner, and
// the same bits on every member that reduces the same parts in the same
// order. With one member and no centring it is Update, bit for bit. The
// exchange per step is the Moments (k² + k + 1 numbers) and a Partial:
// features·k numbers for the gradient, B·k for the new block, and the
// feature sums (features + B) when centring.
//
// Only the subspace solver with random features takes data-parallel
// steps: landmark blocks are built from a batch's points (which would
// have to be exchanged), and the covariance and Oja solvers are not
// written for it yet. The first step (bandwidth by the median trick,
// standardisation, the first block's exact PCA) reads one batch's points:
// take it with Update on the same batch on every member.

// ErrNotParallel is returned by Moments for a learner that cannot take
// data-parallel steps.
var ErrNotParallel = errors.New("online: data-parallel steps need the subspace solver, random features and a first step")

// Moments are one member's sums over its rows for a data-parallel step,
// or, once added in member order, the union's.
type Moments struct {
	// Rows in the batch.
	Rows int
	// Sum is Σ_rows h (k) and Outer the upper triangle of Σ_rows h·hᵀ
	// (k×k, row-major; the lower triangle is zero), h the functions'
	// values at a row, summed in row order.
	Sum, Outer []float64
}

// Add adds o to m, element by element.
func (m *Moments) Add(o *Moments) {
	m.Rows += o.Rows
	addInto(m.Sum, o.Sum)
	addInto(m.Outer, o.Outer)
}

// Partial is one member's part of a data-parallel step's gradient, or,
// once added in member order, the union's.
type Partial struct {
	// Grad is Φ(X_i)ᵀ·(η/b)·H̃_i for every existing block (blocks·B × k,
	// row-major, like the coefficients): paper Eq. 6 through every block.
	Grad []float64
	// New is the new block's term Φ_new(X_i)ᵀ·(η/b)·H̃_i (B × k); empty
	// when the step revisits a block instead of drawing one.
	New []float64
	// Sums and NewSums are the column sums of the existing and of the
	// new block's features over the rows: only when centring.
	Sums, NewSums []float64
}

// Add adds o to p, element by element.
func (p *Partial) Add(o *Partial) {
	addInto(p.Grad, o.Grad)
	addInto(p.New, o.New)
	addInto(p.Sums, o.Sums)
	addInto(p.NewSums, o.NewSums)
}

func addInto(dst, src []float64) {
	if len(dst) != len(src) {
		panic(fmt.Sprintf("online: adding %d numbers to %d: parts of different steps", len(src), len(dst)))
	}
	for i, v := range src {
		dst[i] += v
	}
}

// resize returns s with length n, reusing its memory when it can.
func resize(s []float64, n int) []float64 {
	if cap(s) < n {
		return make([]float64, n)
	}
	return s[:n]
}

// Moments evaluates the functions on this member's batch x (rows×d) and
// writes the sums the step needs into dst. The batch's features are kept
// (within KeepBytes) for the Partial that must follow. The model does not
// change. ErrInput: a batch Update would refuse; ErrNotParallel: see the
// package's notes on data-parallel steps.
func (l *KPCA) Moments(dst *Moments, x []float64, rows int) error {
	if l.sub == nil || l.cfg.Solver != SolverSubspace || l.fm.Landmarks || len(l.seeds) == 0 {
		return ErrNotParallel
	}
	if err := l.checkBatch(x, rows); err != nil {
		return err
	}
	k := l.cfg.K
	l.view.scratch(rows, k)
	l.pre.Apply(l.xs, x)
	l.ev.EvalKeep(l.h, l.xs, rows, l.seeds, l.coef, k)
	dst.Rows = rows
	dst.Sum, dst.Outer = resize(dst.Sum, k), resize(dst.Outer, k*k)
	colSums(dst.Sum, l.h, rows, k)
	outerUpper(dst.Outer, l.h, rows, k)
	l.parRows = rows
	return nil
}

// checkMoments returns ErrInput for moments that are not a step's.
func (l *KPCA) checkMoments(total *Moments) error {
	k := l.cfg.K
	if total.Rows < 1 || len(total.Sum) != k || len(total.Outer) != k*k {
		return fmt.Errorf("%w: moments of %d rows, %d sums and %d products for k = %d", ErrInput, total.Rows, len(total.Sum), len(total.Outer), k)
	}
	return nil
}

// fromMoments forms h̄ and M from the union's moments (checked by
// checkMoments) and reports whether the divergence guard passes.
func (l *KPCA) fromMoments(total *Moments) bool {
	b := float64(total.Rows)
	for q, v := range total.Sum {
		l.hbar[q] = v / b
	}
	copy(l.m, total.Outer)
	var c []float64
	if l.cfg.Center {
		c = l.hbar
	}
	return l.finishM(b, c)
}

// Partial writes this member's part of the step's gradient into dst, from
// the union's moments total and the batch of the last Moments. The model
// does not change. It returns ErrDiverged when the guard refuses the
// union batch (every member then gets it; Apply counts the refusal).
func (l *KPCA) Partial(dst *Partial, total *Moments) error {
	rows := l.parRows
	if rows == 0 {
		return fmt.Errorf("%w: Partial without Moments", ErrInput)
	}
	l.parRows = 0
	defer l.ev.Release()
	if err := l.checkMoments(total); err != nil {
		return err
	}
	if !l.fromMoments(total) {
		return fmt.Errorf("%w: step %d: the union batch's M fails the guard", ErrDiverged, l.t)
	}
	k, nb, s := l.cfg.K, l.cfg.BlockSize, l.sub
	copy(s.eigNext, s.eig)
	l.subspaceEstimates(s.eigNext, false)
	scale := l.subspaceStep(s.eigNext) / float64(total.Rows)
	dst.Grad = resize(dst.Grad, len(l.coef))
	dst.Sums = dst.Sums[:0]
	var sums []float64
	if l.center != nil {
		subtractRow(l.h, l.hbar, rows, k)
		dst.Sums = resize(dst.Sums, len(l.seeds)*nb)
		sums = dst.Sums
	}
	l.ev.GradSums(dst.Grad, l.h, k, scale, sums)
	dst.New, dst.NewSums = dst.New[:0], dst.NewSums[:0]
	if j, seed, revisit := l.next(l.age(), rows); !revisit {
		l.blockTerm(rows, k, j, seed, scale, l.h)
		dst.New = append(dst.New, l.newc...)
		if l.center != nil {
			dst.NewSums = resize(dst.NewSums, nb)
			colSums(dst.NewSums, l.phi, rows, nb)
		}
	}
	return nil
}

// Apply takes the step on the union batch: total is the members' Moments
// and grad their Partials, each added in member order. Every member that
// applies the same numbers ends with the same bits. ErrDiverged: the
// guard refused the batch (counted, step size halved, as in Update); grad
// is then not read, so members whose Partial returned ErrDiverged pass an
// empty one.
func (l *KPCA) Apply(total *Moments, grad *Partial) error {
	if l.sub == nil || len(l.seeds) == 0 {
		return ErrNotParallel
	}
	if err := l.checkMoments(total); err != nil {
		return err
	}
	if !l.fromMoments(total) {
		return l.reject(total.Rows) // grad is not read: Partial refused it too
	}
	k, nb, s := l.cfg.K, l.cfg.BlockSize, l.sub
	j, seed, revisit := l.next(l.t, total.Rows)
	centred := l.center != nil
	switch {
	case len(grad.Grad) != len(l.coef):
		return fmt.Errorf("%w: a gradient of %d numbers for %d coefficients", ErrInput, len(grad.Grad), len(l.coef))
	case revisit != (len(grad.New) == 0) || !revisit && len(grad.New) != nb*k:
		return fmt.Errorf("%w: a new block of %d numbers at step %d (revisiting: %v)", ErrInput, len(grad.New), l.t, revisit)
	case centred && (len(grad.Sums) != len(l.seeds)*nb || !revisit && len(grad.NewSums) != nb):
		return fmt.Errorf("%w: feature sums of %d and %d numbers for a centring step", ErrInput, len(grad.Sums), len(grad.NewSums))
	}
	l.subspaceEstimates(s.eig, true)
	b := float64(total.Rows)
	var mean []float64
	if centred {
		mean = s.mean[:len(grad.Sums)]
		for f, v := range grad.Sums {
			mean[f] = v / b
		}
		for f, v := range grad.NewSums {
			s.newMean[f] = v / b
		}
	}
	if !revisit {
		copy(l.newc, grad.New)
	}
	return l.subspaceApply(total.Rows, grad.Grad, mean, j, seed, revisit)
}
