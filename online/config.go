package online

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"

	"github.com/streamkpca/streamkpca/features"
	"github.com/streamkpca/streamkpca/snapshot"
)

// Algorithm names a learner.
type Algorithm string

// Algorithms.
const (
	AlgKPCA Algorithm = "kpca" // Oja-style subspace rule (Alg. 1–2)
	AlgGHA  Algorithm = "gha"  // generalized Hebbian algorithm (Sec. 5.1)
	AlgKSVD Algorithm = "ksvd" // kernel SVD of the cross-covariance (Alg. 3)
	AlgKCCA Algorithm = "kcca" // kernel CCA (Alg. 4)
	AlgKSIR Algorithm = "ksir" // kernel sliced inverse regression (Sec. 5.4)
)

// TwoView reports whether the algorithm learns from (x, y) pairs.
func (a Algorithm) TwoView() bool { return a.spec().twoView }

// ScoreMeaning says, for people, what the algorithm's held-out score
// (snapshot.Quality.Score, Assess) measures.
func (a Algorithm) ScoreMeaning() string { return a.spec().score }

// TargetY reports whether the algorithm's y is a regression target
// (ksir: sliced, no kernel of its own) rather than a second view.
func (a Algorithm) TargetY() bool { return a.spec().targetY }

// Defaults. DefaultTheta0 and DefaultTheta1 are the oja solver's.
const (
	DefaultBlockSize   = 128
	DefaultMaxFeatures = 32768
	// DefaultLandmarkMaxFeatures is MaxFeatures' default with landmark
	// features: eight blocks of 512 landmarks. A landmark block costs
	// about five random-feature blocks to evaluate (the kernel against B
	// points plus a B×B product) and holds its points.
	DefaultLandmarkMaxFeatures = 4096
	DefaultTheta0              = 0.5
	DefaultTheta1              = 0.01
	DefaultSeed                = 1
)

// ErrConfig is returned (wrapped) for an invalid learner configuration.
var ErrConfig = errors.New("online: invalid config")

// Config configures a learner. Zero values mean the default.
//
// A field's `setting` tag says what kind of setting it is, the one
// statement of it every use reads: untagged, it defines the model (a
// restored learner takes it from its snapshot; cluster members must
// agree on it); "runtime", it is this process's resources (Restore takes
// it from its runtime Config, members may differ); "group", it is how
// the model is run, chosen anew at each start (Restore takes it from the
// runtime Config) yet one decision for a cluster's members (they must
// agree on it).
//
// A model setting's `header` tag says where a snapshot keeps it: a path
// of snapshot.Header fields ("Schedule.Theta0"), which Snapshot writes and
// Restore reads for every learner with no other code (see toHeader; a
// ",one-view" or ",two-view" suffix keeps it to that kind of learner);
// "view", the views record it (kernel, dimension, how the features are
// drawn and computed: snapshot.View); "learner", the learner records
// what it runs with in its own terms (the solver's rule, the ridge it
// chose, the averaging window) and its Restore reads that back.
type Config struct {
	// Model is the model's name. Default: "model".
	Model string `header:"Model"`
	// Incarnation is written into every snapshot's header
	// (snapshot.Header.Incarnation); a restored learner keeps its
	// snapshot's.
	Incarnation string `header:"Incarnation"`
	// Algorithm is kpca, gha (New) or ksvd, kcca, ksir (NewTwoView).
	// Default: kpca.
	Algorithm Algorithm `header:"Algorithm"`
	// K is the number of components. Required.
	K int `header:"K"`
	// Oversample is the components kpca with the subspace solver learns
	// beyond K and does not serve. The solver orthonormalises by
	// CholeskyQR, which mixes a column only with those before it, so the
	// first K columns do not depend on the ones beyond them except
	// through the step, η = θ_t/(n·λ̂_{K+p}), which the smaller
	// eigenvalue makes larger: a step θ₀ sets at no cost (the defaults
	// DefaultRandomTheta0; docs/learners.md, "The step, not the
	// columns"). Kept so that models learned with it restore and go on.
	// Default (0) and negative: none. A restored model keeps the columns
	// it learns (KPCA.Columns: K + Oversample).
	Oversample int `header:"Oversample,one-view"`
	// Dim is the input dimension. Default: 0, taken from the first batch.
	Dim int `header:"view"`
	// Kernel is the kernel. Default: gaussian with the bandwidth chosen by
	// the median trick on the first batch (Bandwidth 0).
	Kernel features.Kernel `header:"view"`
	// BlockSize is B, the features drawn per batch. Must be ≥ K.
	// Default: 512 for kpca/gha with the subspace solver and for the
	// covariance solver (DefaultCovarianceBlockSize), 128 otherwise.
	BlockSize int `header:"BlockSize"`
	// MaxFeatures caps the features; past it blocks are revisited in turn.
	// Rounded down to a multiple of BlockSize. Default: 32768.
	MaxFeatures int `header:"MaxFeatures"`
	// Solver is the update rule of kpca and gha: subspace (the default
	// with random features; see SolverSubspace), covariance (the default
	// with landmark features: PCA of the statistics of a fixed feature
	// budget, default 2,048 in blocks of 512; see SolverCovariance) or oja
	// (the paper's rule). The two-view algorithms have their own rule
	// (TwoView); kcca also takes covariance (regularised CCA on the
	// statistics of a fixed feature budget per view, its default).
	Solver Solver `header:"learner"`
	// Ridge is the covariance solver's regularisation, relative to each
	// view's mean feature variance. Default: for kcca 0, chosen by the
	// learner on held-out pairs (see ridge.go), starting from
	// DefaultRidge; for kpca and gha DefaultRidge (1e-2).
	Ridge float64 `header:"learner"`
	// Theta0 and Theta1 set the step η_t = Theta0/(1+Theta1·t)/λ̂; Theta0
	// is unitless. Subspace solver: λ̂ = n·λ̂_k (n blocks, λ̂_k the k-th
	// eigenvalue estimate), defaults 1 and 0.05. Oja solver: λ̂ = λ̂_1,
	// η·λ̂_1 capped at 1, defaults 0.5 and 0.01. Two-view: see NewTwoView.
	Theta0 float64 `header:"Schedule.Theta0"`
	// Theta1: see Theta0.
	Theta1 float64 `header:"Schedule.Theta1"`
	// Average is the subspace solver's averaging window: the model served
	// (EvalTo, Snapshot) is a running average of the solver's iterates
	// over about the last Average × the steps so far (see subspace), in
	// (0, 1]. Negative: serve the last iterate. Default: DefaultAverage
	// (0.3) with the subspace solver; ignored by the other solvers.
	Average float64 `header:"learner"`
	// Forget is what a change of the stream does (see Assess): follow
	// restarts the model on an abrupt change and replaces it with a
	// challenger on a gradual one (see follower), detect only restarts
	// it, off does neither. Default: follow.
	Forget Forgetting `setting:"group"`
	// FollowAlpha bounds the probability that a challenger which is no
	// better replaces the model, over the model's whole life (the level
	// of following's sequential test, duel.go), in (0, 1). Smaller:
	// fewer false switches, later switches on a real change. Default:
	// DefaultFollowAlpha (0.01).
	FollowAlpha float64 `setting:"group"`
	// Seed is the model seed; block seeds derive from it. Default: 1.
	Seed uint64 `header:"ModelSeed"`
	// Standardize scales each input dimension to zero mean and unit
	// variance with statistics from the first batch. Default: off.
	Standardize bool `header:"Settings.Standardize"`
	// Center learns the centred covariance operator. Default: off.
	Center bool `header:"Settings.Center,one-view"`
	// KernelY is the kernel of the second view (ksvd, kcca). Default:
	// gaussian with the median trick. Ignored by ksir, whose second view is
	// the slice indicators of the target under the linear map.
	KernelY features.Kernel `header:"view"`
	// DimY is the second view's dimension; 0 = from the first batch.
	DimY int `header:"view"`
	// Uncentered turns off the centring two-view algorithms use by default
	// (without it Alg. 4 diverges at useful step sizes on real data).
	Uncentered bool `header:"Settings.Uncentered,two-view"`
	// Slices is the number of target slices of ksir. Default: 10.
	Slices int `header:"Settings.Slices,two-view"`
	// Precision of the product x·Ω (the bulk of the step when d is large):
	// float64, or float32 (features.Map.Float32: twice the SIMD lanes and
	// cache, float64 everywhere after the product). float32 needs a
	// shift-invariant kernel (gaussian, laplacian, cauchy, matern); in a
	// two-view model it applies to the views whose kernel is one.
	// Default: float64.
	Precision Precision `header:"view"`
	// Compute selects who computes the products x·Ω and Φ·α: exact (the
	// package's own kernels, bit-identical on every platform and build) or
	// blas (the BLAS linked into the binary — OpenBLAS in a build with the
	// openblas tag — fastest for large d; deterministic per binary and CPU,
	// projections agree with the learner to rounding; see
	// features.Map.BLAS). Default: exact.
	Compute Compute `header:"view"`
	// Frequencies is how random features draw their frequencies: auto
	// (the default: orthogonal where it applies, else iid), iid (every
	// frequency independent: generator features.GeneratorID, the paper's)
	// or orthogonal (structured orthogonal random features,
	// features.Map.Structured: orthogonal directions in blocks that share
	// Walsh–Hadamard stacks, [cos, sin] pairs; lower-variance kernel
	// estimates at O(log d) a feature instead of O(d)). Orthogonal needs a
	// radial kernel (gaussian, matern, arccosine), random features, float64
	// precision and exact compute, and at least MinStructuredDim inputs
	// (below, the draws are i.i.d.); auto takes it then from
	// AutoStructuredDim inputs on. A restored model keeps its own.
	Frequencies Frequencies `header:"view"`
	// Features is the source of feature blocks: random (random features
	// from a seed per block, the paper's) or landmarks (B points of the
	// stream per block and the Nyström map they define; see
	// features.Landmarks). Landmark models store those points: a snapshot
	// then holds rows of the data. kpca, gha, ksvd and kcca (not ksir).
	// Default: random.
	Features FeatureSource `header:"view"`
	// Workers evaluating feature blocks in parallel. Default: GOMAXPROCS.
	Workers int `setting:"runtime"`
	// CacheBytes bounds cached feature blocks. Default: 1 GiB.
	CacheBytes int64 `setting:"runtime"`
	// KeepBytes bounds the batch's features the subspace and covariance
	// solvers keep from evaluating the functions for the gradient of every
	// block (b × features × 8 bytes); past it each step evaluates the
	// features a second time, trading time for memory. Default (0):
	// features.DefaultKeepBytes (512 MiB) for inputs of at least k
	// dimensions, none below (see keepBytes). Negative: keep none. A
	// runtime setting, not part of the model.
	KeepBytes int64 `setting:"runtime"`
}

// Runtime reports whether f, a field of Config, is a runtime setting:
// this process's resources, not part of the model (its `setting` tag).
func Runtime(f reflect.StructField) bool { return f.Tag.Get("setting") == "runtime" }

// takeRuntime sets c's runtime and group settings (see Config) to rt's:
// what a restored learner takes from the process that restores it
// rather than from its snapshot.
func (c *Config) takeRuntime(rt Config) {
	cv, rv := reflect.ValueOf(c).Elem(), reflect.ValueOf(rt)
	t := cv.Type()
	for i := range t.NumField() {
		if k := t.Field(i).Tag.Get("setting"); k == "runtime" || k == "group" {
			cv.Field(i).Set(rv.Field(i))
		}
	}
}

// FeatureSource names where feature blocks come from.
type FeatureSource string

// Feature sources.
const (
	FeaturesRandom    FeatureSource = "random"
	FeaturesLandmarks FeatureSource = "landmarks"
)

// Frequencies names how random features draw their frequencies.
type Frequencies string

// Frequency draws.
const (
	FrequenciesAuto       Frequencies = "auto"
	FrequenciesIID        Frequencies = "iid"
	FrequenciesOrthogonal Frequencies = "orthogonal"
)

// MinStructuredDim is the least input dimension that takes orthogonal
// frequencies. Below it the structured transform H·D₃·H·D₂·H·D₁ of
// length p < 16 reaches too few directions to estimate the kernel
// without bias: with 65,536 features on anisotropic data the relative
// squared error of k̂ is 10–70× the i.i.d. one at d = 2–8 (gaussian and
// arc-cosine), equal at 16 and below it from there (TestStructuredBias).
const MinStructuredDim = 16

// AutoStructuredDim is the least input dimension for which auto chooses
// orthogonal frequencies: below it they are no faster a step
// (`streamkpca bench throughput --features 32768 --k 10 --frequencies
// iid|orthogonal`, AVX-512, medians of three: 0.82× at d = 16, 1.20× at
// 32, 1.58× at 64, 7.9× at 784).
const AutoStructuredDim = 32

// structured reports whether a view with kernel kern and d inputs draws
// structured orthogonal frequencies under c.
func (c *Config) structured(kern features.Kernel, d int, float32 bool) bool {
	applies := kern.Family.Radial() && c.Features != FeaturesLandmarks && !float32 && c.Compute != ComputeBLAS
	switch c.Frequencies {
	case FrequenciesOrthogonal:
		return applies && d >= MinStructuredDim
	case FrequenciesAuto, "":
		return applies && d >= AutoStructuredDim
	}
	return false
}

// Precision is the arithmetic of x·Ω.
type Precision string

// Precisions.
const (
	Float64 Precision = "float64"
	Float32 Precision = "float32"
)

// Compute selects the implementation of the products.
type Compute string

// Compute modes.
const (
	ComputeExact Compute = "exact"
	ComputeBLAS  Compute = "blas"
)

// The valid values of each enumeration: what Validate accepts, and what
// the service's configuration (package configs) checks its YAML fields
// against.
var (
	Algorithms     = []Algorithm{AlgKPCA, AlgGHA, AlgKSVD, AlgKCCA, AlgKSIR} // the keys of algorithms, in order
	Solvers        = []Solver{SolverSubspace, SolverCovariance, SolverOja}
	FeatureSources = []FeatureSource{FeaturesRandom, FeaturesLandmarks}
	Precisions     = []Precision{Float64, Float32}
	FrequencyDraws = []Frequencies{FrequenciesAuto, FrequenciesIID, FrequenciesOrthogonal}
	Computes       = []Compute{ComputeExact, ComputeBLAS}
)

// OneOf lists vs for a message: "a, b or c".
func OneOf[T ~string](vs []T) string {
	var b strings.Builder
	for i, v := range vs {
		switch {
		case i == 0:
		case i == len(vs)-1:
			b.WriteString(" or ")
		default:
			b.WriteString(", ")
		}
		b.WriteString(string(v))
	}
	return b.String()
}

// WithDefaults returns c with every zero field set to its default, as New
// sets it: the one statement of the learner's defaults, which the service
// configuration (package configs) takes its own from. (Two-view learners
// start from θ₀ = DefaultTwoViewTheta0, θ₁ = DefaultTwoViewTheta1 instead;
// NewTwoView sets those before these.)
func (c Config) WithDefaults() Config {
	c.setDefaults()
	return c
}

func (c *Config) setDefaults() {
	if c.Model == "" {
		c.Model = "model"
	}
	if c.Algorithm == "" {
		c.Algorithm = AlgKPCA
	}
	alg := c.Algorithm.spec()
	if c.Precision == "" {
		c.Precision = Float64
	}
	if c.Compute == "" {
		c.Compute = ComputeExact
	}
	if c.Frequencies == "" {
		c.Frequencies = FrequenciesAuto
	}
	if c.Kernel.Family == "" {
		c.Kernel.Family = features.Gaussian
	}
	if c.Solver == "" && len(alg.solvers) > 0 {
		c.Solver = alg.solvers[0]
		if c.Features == FeaturesLandmarks && !alg.twoView {
			c.Solver = SolverCovariance // PCA of a landmark budget's statistics
		}
	}
	if c.BlockSize == 0 {
		c.BlockSize = DefaultBlockSize
		if c.Solver == SolverSubspace && !c.Algorithm.TwoView() && c.Algorithm != "" {
			c.BlockSize = DefaultSubspaceBlockSize
		}
		if c.Solver == SolverCovariance {
			c.BlockSize = DefaultCovarianceBlockSize
		}
	}
	if c.Ridge == 0 && !(alg.chooseRidge && c.Solver == SolverCovariance) {
		c.Ridge = DefaultRidge
	}
	if c.Features == "" {
		c.Features = FeaturesRandom
	}
	if c.MaxFeatures == 0 {
		c.MaxFeatures = DefaultMaxFeatures
		if c.Features == FeaturesLandmarks {
			c.MaxFeatures = DefaultLandmarkMaxFeatures
		}
		if c.Solver == SolverCovariance {
			c.MaxFeatures = DefaultCovarianceMaxFeatures
		}
	}
	if (c.Solver == SolverSubspace || c.Solver == SolverCovariance) && !c.Algorithm.TwoView() {
		// The covariance solver's steps before its budget is full are
		// the subspace solver's.
		if c.Theta0 == 0 {
			switch {
			case c.Center && c.Solver == SolverSubspace:
				c.Theta0 = DefaultSubspaceCentredTheta0
			case c.Algorithm == AlgKPCA && c.Solver == SolverSubspace && c.Features == FeaturesRandom && !c.Kernel.Family.Identity():
				c.Theta0 = DefaultRandomTheta0
			default:
				c.Theta0 = DefaultSubspaceTheta0
			}
		}
		if c.Theta1 == 0 {
			c.Theta1 = DefaultSubspaceTheta1
		}
	}
	if c.Solver == SolverSubspace && !c.Algorithm.TwoView() && c.Average == 0 {
		c.Average = DefaultAverage
	}
	if c.Theta0 == 0 {
		c.Theta0 = DefaultTheta0
	}
	if c.Theta1 == 0 {
		c.Theta1 = DefaultTheta1
	}
	if c.Seed == 0 {
		c.Seed = DefaultSeed
	}
	if c.FollowAlpha == 0 {
		c.FollowAlpha = DefaultFollowAlpha
	}
	if c.Forget == "" {
		c.Forget = ForgetFollow
	}
	if c.KernelY.Family == "" {
		c.KernelY.Family = features.Gaussian
	}
	if c.Slices == 0 {
		c.Slices = 10
	}
}

// Columns is the components a learner of c learns, defaults filled: K
// and the Oversample beyond them (KPCA.Columns after New).
func (c Config) Columns() int {
	c.setDefaults()
	return c.K + max(c.Oversample, 0)
}

// Validate reports the first invalid field, after defaults.
func (c Config) Validate() error {
	c.setDefaults()
	for _, check := range []func() error{c.checkAlgorithm, c.checkSchedule, c.checkFeatures} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// checkAlgorithm reports the first invalid setting of the algorithm: its
// name, components, second view, solver and ridge.
func (c Config) checkAlgorithm() error {
	if !slices.Contains(Algorithms, c.Algorithm) {
		return fmt.Errorf("%w: algorithm %q (want %s)", ErrConfig, c.Algorithm, OneOf(Algorithms))
	}
	alg := c.Algorithm.spec()
	if alg.targetY && c.Slices <= c.K {
		return fmt.Errorf("%w: ksir needs more slices (%d) than components (k=%d)", ErrConfig, c.Slices, c.K)
	}
	if alg.twoView && !alg.targetY {
		ky := c.KernelY
		if ky.Family.HasBandwidth() && ky.Bandwidth == 0 {
			ky.Bandwidth = 1
		}
		if err := ky.Validate(); err != nil {
			return fmt.Errorf("%w: kernel of y: %w", ErrConfig, err)
		}
	}
	if c.K < 1 {
		return fmt.Errorf("%w: k must be ≥ 1, got %d", ErrConfig, c.K)
	}
	switch {
	case !slices.Contains(Solvers, c.Solver):
		return fmt.Errorf("%w: solver must be %s, got %q", ErrConfig, OneOf(Solvers), c.Solver)
	case !slices.Contains(alg.solvers, c.Solver):
		return fmt.Errorf("%w: %s takes the solver %s (its default first), not %s", ErrConfig, c.Algorithm, OneOf(alg.solvers), c.Solver)
	case c.Solver == SolverCovariance && c.MaxFeatures > MaxCovarianceFeatures:
		return fmt.Errorf("%w: the covariance solver keeps m² statistics; max features must be ≤ %d, got %d", ErrConfig, MaxCovarianceFeatures, c.MaxFeatures)
	}
	if !(c.Ridge >= 0) || math.IsInf(c.Ridge, 0) {
		return fmt.Errorf("%w: ridge must be > 0 (or 0: kcca chooses it on held-out pairs), got %v", ErrConfig, c.Ridge)
	}
	return nil
}

// checkSchedule reports the first invalid setting of the feature budget
// and the step: block size, max features, averaging, θ and forgetting.
func (c Config) checkSchedule() error {
	if !c.Kernel.Family.Identity() && (c.BlockSize < c.K || c.BlockSize > 1<<16) {
		return fmt.Errorf("%w: block size must be in [k=%d, 65536], got %d", ErrConfig, c.K, c.BlockSize)
	}
	if c.Oversample > 0 && (c.Algorithm.TwoView() || c.Kernel.Family.Identity() || c.BlockSize < c.K+c.Oversample) {
		return fmt.Errorf("%w: oversample %d: learned beyond k by one-view learners with random or landmark features, k + oversample (%d) at most the block size (%d)", ErrConfig, c.Oversample, c.K+c.Oversample, c.BlockSize)
	}
	if !c.Kernel.Family.Identity() && c.MaxFeatures < c.BlockSize {
		return fmt.Errorf("%w: max features (%d) must be ≥ block size (%d)", ErrConfig, c.MaxFeatures, c.BlockSize)
	}
	if uint64(c.MaxFeatures)*uint64(c.K+max(c.Oversample, 0)) > snapshot.MaxCoef {
		return fmt.Errorf("%w: max features × k = %d × %d coefficients exceed what a snapshot holds (%d)", ErrConfig, c.MaxFeatures, c.K+max(c.Oversample, 0), snapshot.MaxCoef)
	}
	if math.IsNaN(c.Average) || c.Average > 1 {
		return fmt.Errorf("%w: average must be in (0, 1], or negative to serve the last iterate, got %v", ErrConfig, c.Average)
	}
	if !(c.Theta0 > 0) || math.IsInf(c.Theta0, 0) || c.Theta1 < 0 || math.IsInf(c.Theta1, 0) {
		return fmt.Errorf("%w: theta0 must be > 0 and theta1 ≥ 0, got %v and %v", ErrConfig, c.Theta0, c.Theta1)
	}
	if !slices.Contains(Forgettings, c.Forget) {
		return fmt.Errorf("%w: forget must be %s, got %q", ErrConfig, OneOf(Forgettings), c.Forget)
	}
	if !(c.FollowAlpha > 0 && c.FollowAlpha < 1) {
		return fmt.Errorf("%w: follow_alpha must be in (0, 1), got %v", ErrConfig, c.FollowAlpha)
	}
	return nil
}

// checkFeatures reports the first invalid setting of the features: their
// frequencies, precision, compute, source, input dimension and kernel.
func (c Config) checkFeatures() error {
	alg := c.Algorithm.spec()
	if !slices.Contains(FrequencyDraws, c.Frequencies) {
		return fmt.Errorf("%w: frequencies must be %s, got %q", ErrConfig, OneOf(FrequencyDraws), c.Frequencies)
	}
	if c.Frequencies == FrequenciesOrthogonal {
		if c.Features == FeaturesLandmarks || c.Precision == Float32 || c.Compute == ComputeBLAS {
			return fmt.Errorf("%w: orthogonal frequencies are for random features in float64 with exact compute (not landmarks, float32 precision or blas compute)", ErrConfig)
		}
		if !c.Kernel.Family.Radial() && (!c.Algorithm.TwoView() || !c.KernelY.Family.Radial()) {
			return fmt.Errorf("%w: orthogonal frequencies need a radial kernel (gaussian, matern or arccosine), not %s", ErrConfig, c.Kernel.Family)
		}
	}
	if !slices.Contains(Precisions, c.Precision) {
		return fmt.Errorf("%w: precision must be %s, got %q", ErrConfig, OneOf(Precisions), c.Precision)
	}
	if !slices.Contains(Computes, c.Compute) {
		return fmt.Errorf("%w: compute must be %s, got %q", ErrConfig, OneOf(Computes), c.Compute)
	}
	if c.Dim < 0 {
		return fmt.Errorf("%w: dim must be ≥ 0, got %d", ErrConfig, c.Dim)
	}
	switch c.Features {
	case FeaturesRandom:
	case FeaturesLandmarks:
		if !alg.landmarks {
			return fmt.Errorf("%w: landmark features are for %s; %s uses random features", ErrConfig, OneOf(algorithmsWhere(func(a algorithm) bool { return a.landmarks })), c.Algorithm)
		}
		if c.Precision == Float32 || c.Compute == ComputeBLAS {
			return fmt.Errorf("%w: landmark features compute in float64 with the exact kernels (precision float64, compute exact)", ErrConfig)
		}
		if c.Kernel.Family.Identity() || c.Algorithm.TwoView() && c.KernelY.Family.Identity() {
			return fmt.Errorf("%w: the linear kernel has no landmark features (its identity map is exact)", ErrConfig)
		}
	default:
		return fmt.Errorf("%w: features must be %s, got %q", ErrConfig, OneOf(FeatureSources), c.Features)
	}
	kern := c.Kernel
	if kern.Family.HasBandwidth() && kern.Bandwidth == 0 {
		kern.Bandwidth = 1 // chosen by the median trick on the first batch
	}
	if err := kern.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return nil
}
