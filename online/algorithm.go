package online

// algorithm is what distinguishes one Algorithm from the others, in one
// place: the learners (KPCA, TwoView), Config's defaults and checks and
// the score's meaning read it instead of comparing names. A new
// algorithm is a constant, an entry here and, if it learns by a rule of
// its own, that rule.
type algorithm struct {
	// twoView: it learns from (x, y) pairs (NewTwoView).
	twoView bool
	// targetY: its y is a scalar target sliced into indicators under the
	// linear map (ksir), not a view with a kernel.
	targetY bool
	// correlated: a two-view algorithm whose functions have unit
	// variance (kcca, ksir): its new-block term is η·Φᵀ(Ṽ − ŨW)/b (no
	// shrinking), its first block a regularised CCA, its score held-out
	// correlations; otherwise (ksvd) α ← α(I − ηW), the SVD of the
	// cross-covariance and held-out covariances.
	correlated bool
	// hebbian: the one-view shrink uses the lower-triangular part of M
	// (gha, Sec. 5.1) rather than M (kpca).
	hebbian bool
	// solvers are the update rules it takes, its default first (with
	// random features; one-view learners with landmark features default
	// to the covariance solver).
	solvers []Solver
	// landmarks: it takes landmark features.
	landmarks bool
	// chooseRidge: with the covariance solver and no ridge configured, it
	// chooses its ridge on held-out pairs (ridge.go).
	chooseRidge bool
	// score says, for people, what its held-out score measures.
	score string
}

// algorithms holds every Algorithm's description (Algorithms lists them).
var algorithms = map[Algorithm]algorithm{
	AlgKPCA: {solvers: []Solver{SolverSubspace, SolverCovariance, SolverOja}, landmarks: true,
		score: "share of the kernel's variance the k components capture"},
	AlgGHA: {hebbian: true, solvers: []Solver{SolverSubspace, SolverCovariance, SolverOja}, landmarks: true,
		score: "share of the kernel's variance the k components capture"},
	AlgKSVD: {twoView: true, solvers: []Solver{SolverOja}, landmarks: true,
		score: "sum of the k held-out singular values"},
	AlgKCCA: {twoView: true, correlated: true, solvers: []Solver{SolverCovariance, SolverOja}, landmarks: true, chooseRidge: true,
		score: "sum of the k held-out correlations"},
	AlgKSIR: {twoView: true, targetY: true, correlated: true, solvers: []Solver{SolverOja},
		score: "sum of the k held-out correlations"},
}

// spec is a's description (kpca's for "", the default); the zero
// description for a name Validate refuses.
func (a Algorithm) spec() algorithm {
	if a == "" {
		a = AlgKPCA
	}
	return algorithms[a]
}

// Solvers returns the update rules a takes, its default (with random
// features) first.
func (a Algorithm) Solvers() []Solver { return a.spec().solvers }

// TakesLandmarks reports whether a takes landmark features.
func (a Algorithm) TakesLandmarks() bool { return a.spec().landmarks }

// algorithmsWhere lists the algorithms whose description has has, in
// Algorithms' order (for messages that name them).
func algorithmsWhere(has func(algorithm) bool) []Algorithm {
	var out []Algorithm
	for _, a := range Algorithms {
		if has(algorithms[a]) {
			out = append(out, a)
		}
	}
	return out
}
