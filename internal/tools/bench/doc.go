// Package bench holds the long experiments behind `streamkpca bench`:
// streams with an independent truth, the learner and the methods a user
// could pick instead, run side by side and scored the same way.
//
// # Invariants
//
// Every method sees the same points in the same order; the learner runs
// with its defaults unless a caller sets a field; times exclude scoring.
package bench
