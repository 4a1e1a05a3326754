// Package online implements kernel component analysis learned by doubly
// stochastic gradients (DSGD; paper Sec. 3–5): every mini-batch of data draws
// a new block of random features from a seed, evaluates the current
// functions on the batch, appends coefficients for the new block and shrinks
// the old ones. A model is a list of block seeds plus coefficients; it stores
// no data.
//
// # One core, several rules
//
// KPCA (one view: KPCA, GHA) and TwoView (KSVD, KCCA, KSIR) are thin
// configurations of one core: a view (view.go) holds a feature map, the
// blocks drawn so far (seeds, or landmark blocks) and their coefficients,
// and draws, revisits and evaluates them, computes the new-block term
// η·Φ_j(X)ᵀ·R/b for whatever R the rule supplies (H̃ for KPCA, the
// residual of Alg. 3–4 for the two-view rules) and commits it; progress
// counts steps, samples and refused batches and keeps the guard's step
// back-off; decay is the θ₀/(1+θ₁t) schedule every rule scales. What
// differs between the learners is only the rule: the matrix M or W the
// batch forms, how the old coefficients move (shrink, orthonormalise, or
// the covariance solve) and the divergence guard's threshold.
//
// # Two update rules for KPCA and GHA
//
// Config.Solver picks one. The default, SolverSubspace, applies the
// gradient term below through every block (not only the new one) and
// orthonormalises all coefficients instead of shrinking them: stochastic
// orthogonal iteration, whose step is not bound by η·λ_max ≤ 1 and so
// needs no tuning when the eigengaps below a dominant component are small
// (see the subspace type for the equations). What it serves (EvalTo,
// Snapshot) is the running average of its iterates, Config.Average, which
// fluctuates less than the last iterate on a stream. SolverOja is the paper's rule,
// described in the rest of this comment. Both share the initialisation,
// the median trick, centring's conventions, the divergence guard and the
// invariants at the end.
//
// # The covariance solver: KCCA's default, and KPCA's with landmarks
//
// The two-view learners (TwoView) run the paper's Alg. 3–4 rules. KCCA
// defaults to SolverCovariance instead: the same blocks up to a fixed
// budget, then running covariances of their features and, every few
// steps, regularised CCA solved in their span (see the covariance type).
// Its directions do not move at a rate bound by their feature variance,
// which is what keeps Alg. 4 from the canonical directions of real data;
// its state is the m² statistics, kept in the snapshot for restarts.
//
// KPCA and GHA take the same solver (SolverCovariance; their default
// with landmark blocks): the top-k eigenvectors of the covariance of a
// fixed budget of features, by warm-started subspace iteration every step
// (see solvePCA). With landmark blocks this is Nyström kernel PCA,
// streamed: the statistics hold every point once, the batches that built
// the landmarks too, so after one pass it is exact kernel PCA under the
// blocks' averaged Nyström kernel. With random features it is PCA of a
// fixed set of random features, whose floor (about 1/features) the
// default subspace solver, whose features keep growing, goes below.
//
// # The paper's mini-batch update (Eq. 9, Alg. 1–2; SolverOja)
//
// For a batch X (b×d), existing blocks j with features Φ_j(X) (b×B) and
// coefficients α_j (B×k):
//
//	H = Σ_j Φ_j(X)·α_j                     (b×k, Alg. 2)
//	H̃ = H − 1·h̄ᵀ  if centring, else H      (h̄ = column means of H)
//	M = H̃ᵀH̃/b                              (k×k)
//	α_j ← α_j·(I − η_t·M)   for every existing j        (KPCA, Eq. 9)
//	α_j ← α_j·(I − η_t·UT[M])                          (GHA, Sec. 5.1, Eq. 10)
//	α_new = η_t·Φ_new(X)ᵀ·H̃/b                          (new block)
//
// where UT[·] zeroes the strictly lower triangle. Once MaxFeatures is
// reached, no block is appended: block (t mod blocks) receives the α_new term
// instead (paper Sec. 6.1, "revisit").
//
// # Step size (SolverOja; the subspace solver's is η_t = θ₀/(1+θ₁t)/(n·λ̂_k))
//
// η_t = min(θ₀/(1 + θ₁·t), 1)·g/λ̂, paper Sec. 6.1's schedule made unitless:
// λ̂ is a running estimate of the top eigenvalue of the covariance operator
// (the larger of the initial block's top eigenvalue and the top eigenvalue of
// an exponential average of M), so η_t·λ̂ = θ₀/(1+θ₁t) whatever the scale
// of the kernel, capped at 1 (past it the factor 1 − η·λ_max of the update
// turns negative and the iteration oscillates or explodes); g (initially 1)
// is halved every time the divergence guard rejects a batch.
//
// Tuning: θ₀ sets the early step (0.5 by default; the cap makes anything
// above 1 equivalent to 1 at first). θ₁ sets how fast it decays: the error
// falls like O(1/t) once θ₀/θ₁ exceeds ≈ λ₁/(λ_k − λ_{k+1}), the inverse
// relative eigengap. A slow plateau means θ₁ too large or θ₀ too small; a
// noisy floor that does not fall means θ₁ too small.
//
// # Initialisation
//
// H = 0 is a fixed point of the update, so the first block is not drawn at
// zero: on the first batch, α₀ is set to the top-k eigenvectors of that
// block's (centred, if centring) feature covariance Φ₀ᵀΦ₀/b — a tiny exact
// kernel PCA in the block's B features. The functions then start with unit
// RKHS norm and M ≈ diag(top eigenvalues), the scale the update expects. The
// first batch also fixes the bandwidth by the median trick (median pairwise
// distance) when none is configured, and the standardisation statistics when
// standardisation is on.
//
// # Centring
//
// Off by default for KPCA/GHA (the paper's uncentred operator and its closed
// form). When on, the batch means are removed before M and the new-block term
// (this is the centred covariance operator's stochastic gradient), and an
// exponential average of h̄ (rate max(1/t, 0.01)) is recorded in the snapshot
// and subtracted from every projection.
//
// # Divergence guard
//
// A batch whose H is not finite, or whose tr(M) exceeds 1e3·k·λ̂, is rejected
// before any coefficient changes: the model is never corrupted, the step is
// halved for the batches that follow, and [ErrDiverged] is returned.
//
// # Held-out score and forgetting
//
// Assess scores the served model on points it has not learned yet (the
// caller learns them afterwards): for kpca and gha the share of each
// point's kernel variance the k functions capture, h(x)ᵀG⁻¹h(x)/k(x,x)
// with G = n·AᵀA; for the two-view learners the held-out correlations
// (kcca, ksir) or singular values (ksvd) of the pairs of functions (see
// quality.go). Quality reports it and every snapshot carries it
// (Diagnostics.Quality). A one-sided CUSUM on its batch means detects a
// drop; unless Config.Forget is off the model then restarts with the
// next Update (Forget): blocks, coefficients and statistics go and the
// next batch initialises block 0 as a new model's first batch does, the
// step counter and the samples seen go on, and Schedule.Restart records
// the step, from which the step size, the running estimates and the
// averaging window count (so a restored learner continues bit for bit).
// HeldOut chooses held-out points by a hash of a key, so a restart holds
// out the same ones.
//
// # Invariants
//
//   - Deterministic: same config, seed and batches ⇒ bit-identical
//     coefficients, whatever the number of workers.
//   - Update does not allocate in steady state (coefficient storage is reserved
//     up to MaxFeatures on the first step).
package online
