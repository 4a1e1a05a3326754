package snapshot

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/streamkpca/streamkpca/features"
)

// Magic opens every snapshot file.
const Magic = "SKPCASNP"

// Version is the newest format version this package writes. It reads it
// and every earlier one: v2 added the learner state (Header.Covariance and
// Snapshot.State) and typed Header.Settings, which v1 wrote as an untyped
// "extra" map; v3 added Header.Averaged and its state; v4 added
// Header.Challenger and its state. A snapshot is written in the oldest
// version that holds it (v3 only with Header.Averaged, v4 only with
// Header.Challenger), so what is published, which carries no learner
// state (Snapshot.Served), stays readable by v2 readers.
const Version uint32 = 4

// newerFormats is how far past Version a file's version may be and still
// be taken for a later release's format (ErrNewer).
const newerFormats = 64

// Limits checked before allocating.
const (
	MaxHeaderBytes = 64 << 20
	MaxCoef        = 1 << 30 // 8 GiB of float64
)

// Errors returned (wrapped) by the decoder.
var (
	ErrMagic   = errors.New("snapshot: not a snapshot (bad magic)")
	ErrVersion = errors.New("snapshot: unsupported version")
	// ErrNewer (with ErrVersion) marks a file of a format a later release
	// writes: a version above Version by at most newerFormats (more is a
	// damaged file, not a release).
	ErrNewer       = errors.New("snapshot: written by a newer release")
	ErrChecksum    = errors.New("snapshot: checksum mismatch (file corrupt)")
	ErrTruncated   = errors.New("snapshot: truncated")
	ErrSize        = errors.New("snapshot: sizes do not add up")
	ErrHeader      = errors.New("snapshot: invalid header")
	ErrUnsupported = errors.New("snapshot: unsupported model")
	ErrNonFinite   = errors.New("snapshot: non-finite value (NaN or ±Inf); such a model is never written or served")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Seeds is a list of block seeds, JSON-encoded as 16-digit hex strings.
type Seeds []uint64

// MarshalJSON implements json.Marshaler.
func (s Seeds) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 2+19*len(s))
	b = append(b, '[')
	for i, v := range s {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		h := strconv.FormatUint(v, 16)
		for j := len(h); j < 16; j++ {
			b = append(b, '0')
		}
		b = append(b, h...)
		b = append(b, '"')
	}
	return append(b, ']'), nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (s *Seeds) UnmarshalJSON(b []byte) error {
	var strs []string
	if err := json.Unmarshal(b, &strs); err != nil {
		return err
	}
	out := make(Seeds, len(strs))
	for i, h := range strs {
		v, err := strconv.ParseUint(h, 16, 64)
		if err != nil {
			return fmt.Errorf("seed %d: %w", i, err)
		}
		out[i] = v
	}
	*s = out
	return nil
}

// Offset is the next Kafka offset to learn from for one topic partition.
type Offset struct {
	Topic     string `json:"topic"`
	Partition int    `json:"partition"`
	Next      int64  `json:"next"`
}

// Schedule is the step-size schedule eta_t = Theta0/((1+Theta1·t)·Scale),
// where Scale is the running estimate of the top eigenvalue that makes
// Theta0 unitless.
type Schedule struct {
	Theta0 float64 `json:"theta0"`
	Theta1 float64 `json:"theta1"`
	Scale  float64 `json:"scale"`
	// Backoff multiplies the step after divergence-guard rejections.
	Backoff float64 `json:"backoff"`
	// Solver is the update rule: "subspace" or "oja" (the paper's Alg.
	// 1–2) for one view; "oja" (the paper's Alg. 3–4) or "covariance" for
	// two. Empty in snapshots written before the subspace solver existed:
	// those restore with the one-view default, or the paper's two-view
	// rule.
	Solver string `json:"solver,omitempty"`
	// Ridge is the covariance solver's regularisation (relative to each
	// view's mean feature variance); 0 for every other rule.
	Ridge float64 `json:"ridge,omitempty"`
	// RidgeAuto: the learner chooses Ridge itself on held-out pairs (kcca's
	// covariance solver by default); Ridge is its latest choice.
	RidgeAuto bool `json:"ridge_auto,omitempty"`
	// Restart is the step at which the schedule last restarted after a
	// change of the stream was detected (0: never): the step size and
	// the running averages count their steps from it.
	Restart uint64 `json:"restart,omitempty"`
}

// Preprocess is the per-dimension standardisation x' = (x − Mean)/Scale
// applied before the features. Empty slices mean none.
type Preprocess struct {
	Mean  []float64 `json:"mean,omitempty"`
	Scale []float64 `json:"scale,omitempty"`
}

// View is one input view of a model: its dimension, kernel and
// standardisation, and the centring offset subtracted from its outputs.
type View struct {
	Dim        int             `json:"dim"`
	Kernel     features.Kernel `json:"kernel"`
	Preprocess Preprocess      `json:"preprocess"`
	// Center is the estimate of E[H(x)] (length k) subtracted from every
	// projection when centring is on; empty when off.
	Center []float64 `json:"center,omitempty"`
	// Seeds and BlockSize of a view after the first (the first view uses
	// the header's). A view's coefficients are len(Seeds)·BlockSize rows.
	Seeds     Seeds `json:"seeds,omitempty"`
	BlockSize int   `json:"block_size,omitempty"`
	// Slices are the KSIR target thresholds (view 1 is the one-hot slice
	// indicator of the target): slice i holds t with Slices[i-1] < t ≤
	// Slices[i].
	Slices []float64 `json:"slices,omitempty"`
	// Precision is the arithmetic of the product x·Ω: "float32" (see
	// features.Map.Float32) or empty for float64. Projections must use the
	// learner's precision to reproduce its outputs bit for bit.
	Precision string `json:"precision,omitempty"`
	// Compute is "blas" when the products went through the linked BLAS
	// (features.Map.BLAS), empty for the package's own kernels.
	Compute string `json:"compute,omitempty"`
	// Features is "landmarks" when the view's blocks are landmark blocks
	// (features.Landmarks): the snapshot then carries, after all
	// coefficients, the view's landmark points (blocks·BlockSize rows of
	// Dim values, standardised, in block order) — rows of the data. Empty
	// for random features from the seeds.
	Features string `json:"features,omitempty"`
	// Frequencies is "orthogonal" when the view's random features are
	// structured orthogonal ones (features.Map.Structured, generator
	// features.StructuredGeneratorID), empty for i.i.d. frequencies.
	Frequencies string `json:"frequencies,omitempty"`
}

// FrequenciesOrthogonal is View.Frequencies of a structured view.
const FrequenciesOrthogonal = "orthogonal"

// Structured reports whether the view's random features are structured
// orthogonal ones.
func (v View) Structured() bool { return v.Frequencies == FrequenciesOrthogonal }

// GeneratorOf is the generator id of a model with these views:
// features.StructuredGeneratorID when any is structured, else
// features.GeneratorID (which every reader of the i.i.d. generator knows).
func GeneratorOf(views ...View) string {
	for _, v := range views {
		if v.Structured() {
			return features.StructuredGeneratorID
		}
	}
	return features.GeneratorID
}

// FeaturesLandmarks is View.Features of a landmark view.
const FeaturesLandmarks = "landmarks"

// Landmarks reports whether the view's blocks are landmark blocks.
func (v View) Landmarks() bool { return v.Features == FeaturesLandmarks }

// BLAS reports whether the view's products use the linked BLAS.
func (v View) BLAS() bool { return v.Compute == ComputeBLAS }

// ComputeBLAS is View.Compute of a BLAS-mode view.
const ComputeBLAS = "blas"

// Float32 reports whether the view's x·Ω is computed in float32.
func (v View) Float32() bool { return v.Precision == PrecisionFloat32 }

// PrecisionFloat32 is View.Precision of a float32 view.
const PrecisionFloat32 = "float32"

// Diagnostics are live estimates recorded at snapshot time.
type Diagnostics struct {
	// Eigenvalues estimates the top-k eigenvalues of the (centred)
	// covariance operator from the running HᵀH/b, in decreasing order.
	Eigenvalues []float64 `json:"eigenvalues,omitempty"`
	// Drift is ‖M − diag(M)‖_F/‖M‖_F for the running M = HᵀH/b: how far the
	// learned functions are from orthogonal in L2(p).
	Drift float64 `json:"drift"`
	// Rejected counts batches the divergence guard refused.
	Rejected uint64 `json:"rejected"`
	// BadSamples counts samples dropped by validation upstream.
	BadSamples uint64 `json:"bad_samples,omitempty"`
	// Changes counts the changes of the stream detected so far, each of
	// which restarted the schedule (Schedule.Restart is the last).
	Changes uint64 `json:"changes,omitempty"`
	// Switches counts the times a challenger learner, started on the
	// stream as it was then, replaced the model because it fitted the
	// held-out points better (learner.forget: follow).
	Switches uint64 `json:"switches,omitempty"`
	// Rollbacks counts the switches undone: the model a switch replaced,
	// kept as a reserve, scored better than its successor on later
	// held-out points and took its place back.
	Rollbacks uint64 `json:"rollbacks,omitempty"`
	// LearnedFraction is the fraction of the stream's messages the
	// service was learning when the snapshot was taken (load shedding:
	// 1 or absent when it learns all), and Shed the messages it did not
	// learn to keep up, since the model started.
	LearnedFraction float64 `json:"learned_fraction,omitempty"`
	Shed            uint64  `json:"shed,omitempty"`
	// Quality is the held-out score of the served model on the stream
	// (see Quality); nil where none was measured (fit, or before the
	// first held-out point).
	Quality *Quality `json:"quality,omitempty"`
}

// Quality is a model's score on held-out points of its own stream,
// measured before each was learned (progressive validation), so it
// needs no known truth.
type Quality struct {
	// Score is the one figure: for kpca and gha the share of the kernel's
	// variance that the k functions capture on fresh points (1 − the
	// feature-space reconstruction error, relative); for ksvd the sum of
	// the held-out singular values; for kcca and ksir the sum of the
	// held-out correlations of the k pairs of functions.
	Score float64 `json:"score"`
	// Components is the score of each component (its captured share,
	// singular value or correlation).
	Components []float64 `json:"components,omitempty"`
	// Points is how many held-out points the score averages (its
	// effective window).
	Points float64 `json:"points"`
	// Fit and Challenger compare the model with the learner following
	// tests it against (learner.forget: follow). One view: the mean
	// share of their kernel variance that each captures on the held-out
	// points of the current test, scored before either learned them
	// (the challenger's, or on probation the reserve's); two views: the
	// last window's held-out Score of each. Absent without a challenger.
	Fit        float64 `json:"fit,omitempty"`
	Challenger float64 `json:"challenger,omitempty"`
	// Evidence is a one-view follower's test (learner.forget: follow):
	// the wealth of its bets that the challenger fits better than the
	// shadow, or with Candidate the candidate better than the model,
	// which rejects when it reaches 1/Level. Fit and Challenger are then
	// the shadow's and the challenger's shares, or the model's and the
	// candidate's.
	Evidence  float64 `json:"evidence,omitempty"`
	Level     float64 `json:"level,omitempty"`
	Candidate bool    `json:"candidate,omitempty"`
}

// Header is the JSON header of a snapshot.
type Header struct {
	Model string `json:"model"`
	// Incarnation names one life of the model: chosen at random when a
	// service starts it without local history (an empty snapshot.dir),
	// kept by every snapshot after. Versions order within an incarnation;
	// a reader moves to a new one when it appears (docs/api.md). Empty in
	// models learned before incarnations existed, by fit, and in cluster
	// mode.
	Incarnation string `json:"incarnation,omitempty"`
	Algorithm   string `json:"algorithm"`
	Generator   string `json:"generator"`
	K           int    `json:"k"`
	// Oversample is the components a one-view learner learns beyond K
	// (the learner's setting): its coefficients (and centres) hold K +
	// Oversample columns, of which the first K, the leading ones, are
	// served (Served, NewModel). 0 in a published model.
	Oversample  int         `json:"oversample,omitempty"`
	BlockSize   int         `json:"block_size"`
	Seeds       Seeds       `json:"seeds"`
	Views       []View      `json:"views"`
	Step        uint64      `json:"step"`
	SamplesSeen uint64      `json:"samples_seen"`
	Schedule    Schedule    `json:"schedule"`
	MaxFeatures int         `json:"max_features"`
	ModelSeed   uint64      `json:"model_seed"`
	Offsets     []Offset    `json:"offsets,omitempty"`
	Created     time.Time   `json:"created"`
	Diagnostics Diagnostics `json:"diagnostics"`
	// Running is the learner's exponential average of M (k×k, row-major),
	// kept so that a restored learner continues with the same step scale.
	Running []float64 `json:"running_m,omitempty"`
	// Settings are the learner's settings and internals beyond the model
	// (format v2; v1 wrote them as an untyped "extra" map, which the
	// decoder reads into this).
	Settings Settings `json:"settings,omitzero"`
	// Covariance describes the covariance solver's statistics carried in
	// Snapshot.State (format v2); nil for every other learner, and in
	// the served copy of a model (Snapshot.Served).
	Covariance *Covariance `json:"covariance,omitempty"`
	// Averaged says that the coefficients (and view 0's centre) are the
	// average the subspace solver serves and that Snapshot.State holds its
	// last iterate and running average (format v3); nil for every other
	// learner, and in the served copy of a model.
	Averaged *Averaged `json:"averaged,omitempty"`
	// Detector is the state of the change detector on the held-out score
	// (package online, the monitor): learner state, so that a restored
	// learner finds a change where the one that went on would. nil before
	// the detector has a reference, and in the served copy of a model.
	Detector *Detector `json:"detector,omitempty"`
	// Novelty is the reference a point's novelty is ranked against
	// (Model.Novelty: the output topic's records and the score
	// endpoints); nil without one. Part of the served model.
	Novelty *Novelty `json:"novelty,omitempty"`
	// Challenger is the state of the learner that runs beside the model
	// on the recent stream and replaces it when it fits the held-out
	// points better (package online, learner.forget: follow), so that a
	// restored learner decides as the one that went on would (format
	// v4); nil without one, and in the served copy of a model.
	Challenger *Challenger `json:"challenger,omitempty"`
}

// Challenger is the state of a model's challenger (package online, the
// follower). Snapshot.State holds, after the model's own learner state:
// the comparison window (one view: its Rows held-out rows, raw, Rows ×
// Dim; two views with a Test: its Rows held-out pairs, raw, each x then
// y, Rows × (Dim_x + Dim_y); two views of the margin rule before it, no
// Test: the values the model's and the challenger's functions took at
// its Rows held-out pairs when they were assessed, the model's u, the
// model's v, the challenger's u, the challenger's v, Rows × K each), the
// challenger's coefficients (its Model header's counts, view by view)
// and its own learner state (as its Model header describes).
type Challenger struct {
	// Wins is the comparison windows in a row the challenger has won.
	Wins int `json:"wins"`
	// Compared is the windows it has been compared in (it is restarted
	// only after several).
	Compared int `json:"compared"`
	// Rows is the held-out rows the current comparison window holds.
	Rows int `json:"rows"`
	// Fit and ChallengerFit are the last window's fit scores of the
	// model and of the challenger (0 before the first window).
	Fit           float64 `json:"fit"`
	ChallengerFit float64 `json:"challenger_fit"`
	// Model is the challenger's own header: random-feature views of the
	// model's dimensions, no challenger of its own, the model's k.
	Model *Header `json:"model"`
	// Successor (the margin rule's, before Test): the challenger is a
	// covariance-solver model at the full feature budget, started after a
	// switch to a smaller challenger, that replaces the model when it
	// scores better (package online restores it as a candidate).
	Successor bool `json:"successor,omitempty"`
	// Lead is a two-view challenger's lead in its last windows: each
	// window's score difference and its variance, oldest first (package
	// online).
	Lead []float64 `json:"lead,omitempty"`
	// Test is a follower's sequential test (package online's
	// betting): the log-wealth of each of its bets, then the held-out
	// points it has bet on; Tests counts the candidacies of the model's
	// life so far (a candidacy's level is spent by it). Fit and
	// ChallengerFit are then the sums of the two learners' held-out
	// scores over those points (one view: shares; two views: summed
	// standardised products), and Rows the test's reference rows or
	// pairs (the window), of which the first Reference are in use.
	Test  []float64 `json:"test,omitempty"`
	Tests int       `json:"tests,omitempty"`
	// Candidate: the model is a candidate (a learner of the model's
	// budget started when the scouts found a change, on trial against the
	// model), not a challenger. Model may hold a challenger of its own,
	// one level deep: the shadow of the model's lineage, the scouts'
	// reference (package online's chase).
	Candidate bool `json:"candidate,omitempty"`
	// Reference is how many of a test's Rows form the reference
	// set in use (the rest are being collected for the next one:
	// Collecting).
	Reference  int  `json:"reference,omitempty"`
	Collecting bool `json:"collecting,omitempty"`
}

// Detector is the change detector's state (package online): the
// reference of the held-out score, built over Points held-out points in
// Batches batches since the model's last restart (their mean and
// variance), and the one-sided CUSUM statistic of drops below it.
type Detector struct {
	Batches int     `json:"batches"`
	Points  float64 `json:"points"`
	Mean    float64 `json:"mean"`
	Var     float64 `json:"var"`
	CUSUM   float64 `json:"cusum"`
}

// valid reports whether d's figures can be a detector's.
func (d *Detector) valid() bool {
	for _, v := range []float64{d.Points, d.Mean, d.Var, d.CUSUM} {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return false
		}
	}
	return d.Batches >= 0 && d.Points >= 0 && d.Var >= 0 && d.CUSUM >= 0
}

// Averaged describes the state of a kpca or gha learner whose served
// functions are a running average of its iterates, orthonormalised
// (package online, Config.Average). Snapshot.State holds the last
// iterate's coefficients and the running average's, as many as Coef[0]
// each, then, for a centred model (Settings.Center), the iterate's centre
// and the average's (k values each).
type Averaged struct {
	// Window is the averaging window as a fraction of the steps so far,
	// in (0, 1].
	Window float64 `json:"window"`
}

// Settings are what a restored learner needs beyond the model itself:
// configuration the views do not record and the two-view learner's step
// internals. Projections do not use them.
type Settings struct {
	// Center: kpca/gha learned the centred covariance operator.
	Center bool `json:"center,omitempty"`
	// Uncentered: a two-view learner ran without its default centring.
	Uncentered bool `json:"uncentered,omitempty"`
	// Standardize: inputs were standardised with the first batch's
	// statistics (View.Preprocess holds them).
	Standardize bool `json:"standardize,omitempty"`
	// Slices is ksir's number of target slices (View.Slices holds the
	// thresholds).
	Slices int `json:"slices,omitempty"`
	// Trace0 is the two-view functions' variance after the first batch:
	// the divergence guard's reference.
	Trace0 float64 `json:"trace0,omitempty"`
	// WNorm is ‖W‖₂ of the last two-view batch, which bounds the step.
	WNorm float64 `json:"wnorm,omitempty"`
	// TraceRun is the two-view functions' running variance.
	TraceRun float64 `json:"trace_run,omitempty"`
}

// v1Extra is how format v1 stored Settings.
type v1Extra struct {
	Extra map[string]float64 `json:"extra"`
}

// settings converts v1's map; unknown keys are ignored, as v1 did.
func (e v1Extra) settings() Settings {
	x := e.Extra
	return Settings{Center: x["center"] == 1, Uncentered: x["uncentered"] == 1, Standardize: x["standardize"] == 1,
		Slices: int(x["slices"]), Trace0: x["trace0"], WNorm: x["wnorm"], TraceRun: x["tr_run"]}
}

// Covariance is the state of a learner with the covariance solver
// (package online, SolverCovariance) that a restored learner needs to
// continue bit for bit and that projecting does not. For two views
// (kcca), Snapshot.State holds, in order, S_xx and S_yy (upper
// triangles, row by row), S_xy (m_x×m_y), the feature sums s_x and s_y,
// and the solve's warm-start basis (m_y×Basis), all row-major. For one
// view (kpca, gha; Features[1] = 0) it holds S_xx (upper triangle), s_x
// and the basis (m_x×Basis).
type Covariance struct {
	// Samples in the statistics.
	Samples float64 `json:"samples"`
	// SolvedAt is Samples at the last solve.
	SolvedAt float64 `json:"solved_at"`
	// Solves done so far.
	Solves uint64 `json:"solves"`
	// Features m_x and m_y of the statistics.
	Features [2]int `json:"features"`
	// Basis is the number of columns p of the warm-start basis.
	Basis int `json:"basis"`
}

// Len is the number of float64 values the state holds.
func (c *Covariance) Len() (int, error) {
	mx, my, p := c.Features[0], c.Features[1], c.Basis
	if my == 0 { // one view
		if mx < 1 || mx > 1<<14 || p < 1 || p > mx {
			return 0, fmt.Errorf("%w: covariance state with features %v and basis %d", ErrHeader, c.Features, p)
		}
		return mx*(mx+1)/2 + mx + mx*p, nil
	}
	if mx < 1 || my < 1 || mx > 1<<14 || my > 1<<14 || p < 1 || p > min(mx, my) {
		return 0, fmt.Errorf("%w: covariance state with features %v and basis %d", ErrHeader, c.Features, p)
	}
	return mx*(mx+1)/2 + my*(my+1)/2 + mx*my + mx + my + my*p, nil
}

// Features returns the number of random features (blocks × block size).
func (h *Header) Features() int { return len(h.Seeds) * h.BlockSize }

// Version is the snapshot's version: the learner step it was taken at.
func (h *Header) Version() uint64 { return h.Step }

// ViewSeeds returns the block seeds and block size of view v.
func (h *Header) ViewSeeds(v int) (Seeds, int) {
	if v == 0 || h.Views[v].BlockSize == 0 {
		return h.Seeds, h.BlockSize
	}
	return h.Views[v].Seeds, h.Views[v].BlockSize
}

// payload is the number of coefficients and of landmark values each view
// carries.
func (h *Header) payload() (coef, lm []int, err error) {
	coef, err = h.coefCounts()
	if err != nil {
		return nil, nil, err
	}
	lm = make([]int, len(h.Views))
	var total uint64
	for _, c := range coef {
		total += uint64(c)
	}
	for v, view := range h.Views {
		if !view.Landmarks() {
			continue
		}
		seeds, bs := h.ViewSeeds(v)
		if view.Dim < 1 || view.Dim > 1<<24 {
			return nil, nil, fmt.Errorf("%w: view %d dimension %d", ErrHeader, v, view.Dim)
		}
		n := uint64(len(seeds)) * uint64(bs) * uint64(view.Dim)
		total += n
		if total > MaxCoef {
			return nil, nil, fmt.Errorf("%w: %d coefficients and landmark values exceed the limit %d", ErrSize, total, MaxCoef)
		}
		lm[v] = int(n)
	}
	n, err := h.stateLenErr()
	if err != nil {
		return nil, nil, err
	}
	if total += uint64(n); total > MaxCoef {
		return nil, nil, fmt.Errorf("%w: %d coefficients, landmark and state values exceed the limit %d", ErrSize, total, MaxCoef)
	}
	return coef, lm, nil
}

// stateLen is the number of learner-state values the payload ends with
// (0 for a header Validate refuses).
func (h *Header) stateLen() int {
	n, _ := h.stateLenErr()
	return n
}

// ownStateLen is the number of the learner's own state values: those of
// Covariance or Averaged, before the challenger's.
func (h *Header) ownStateLen() (int, error) {
	switch {
	case h.Covariance != nil:
		return h.Covariance.Len()
	case h.Averaged != nil:
		return h.averagedLen()
	}
	return 0, nil
}

// stateLenErr is stateLen with the reason a header's state sizes are
// impossible.
func (h *Header) stateLenErr() (int, error) { return h.stateLenAt(0) }

// stateLenAt is stateLenErr of a header depth challengers deep: a
// challenger's header may hold a challenger of its own (depth 1), which
// may not.
func (h *Header) stateLenAt(depth int) (int, error) {
	own, err := h.ownStateLen()
	if err != nil {
		return 0, err
	}
	c := h.Challenger
	if c == nil {
		return own, nil
	}
	m := c.Model
	if m == nil || (m.Challenger != nil && depth > 0) || len(m.Views) != len(h.Views) || m.K != h.K || m.Oversample != h.Oversample || c.Rows < 0 || c.Rows > 1<<16 || c.Wins < 0 || c.Compared < 0 {
		return 0, fmt.Errorf("%w: a challenger must be a random-feature model of the same k, views and dimensions, without a challenger of its own, and hold at most 65536 rows", ErrHeader)
	}
	for v := range m.Views {
		if m.Views[v].Landmarks() || m.Views[v].Dim != h.Views[v].Dim {
			return 0, fmt.Errorf("%w: a challenger must be a random-feature model of the same k, views and dimensions, without a challenger of its own, and hold at most 65536 rows", ErrHeader)
		}
	}
	counts, err := m.coefCounts()
	if err != nil {
		return 0, fmt.Errorf("challenger: %w", err)
	}
	chOwn, err := m.stateLenAt(depth + 1)
	if err != nil {
		return 0, fmt.Errorf("challenger: %w", err)
	}
	n := uint64(own) + uint64(c.Rows)*uint64(h.windowWidth(c)) + uint64(chOwn)
	for _, m := range counts {
		n += uint64(m)
	}
	if n > MaxCoef {
		return 0, fmt.Errorf("%w: %d learner-state values exceed the limit %d", ErrSize, n, MaxCoef)
	}
	return int(n), nil
}

// windowWidth is the values a row of challenger c's comparison window
// takes: a one-view window holds the raw rows (the view's Dim); a
// two-view test's (c.Test) its reference pairs (the views' Dims), the
// margin rule's before it the prequential values of each pair (the
// model's and the challenger's k values of both views: 4·K).
func (h *Header) windowWidth(c *Challenger) int {
	if len(h.Views) == 2 {
		if len(c.Test) > 0 {
			return h.Views[0].Dim + h.Views[1].Dim
		}
		return 4 * h.K
	}
	return h.Views[0].Dim
}

// SplitState splits a snapshot's learner state into the model's own and
// its challenger's (Header.Challenger): the comparison window (see
// Challenger) and the challenger as a snapshot of its own (sharing s's
// slices). Without a challenger, window and challenger are nil.
func (s *Snapshot) SplitState() (own, window []float64, challenger *Snapshot) {
	n, _ := s.Header.ownStateLen()
	own = s.State[:min(n, len(s.State)):min(n, len(s.State))]
	c := s.Header.Challenger
	if c == nil || len(s.State) != s.Header.stateLen() {
		return own, nil, nil
	}
	rest := s.State[n:]
	w := c.Rows * s.Header.windowWidth(c)
	window, rest = rest[:w:w], rest[w:]
	counts, _ := c.Model.coefCounts()
	challenger = &Snapshot{Header: *c.Model}
	for _, m := range counts {
		challenger.Coef = append(challenger.Coef, rest[:m:m])
		rest = rest[m:]
	}
	if len(rest) > 0 {
		challenger.State = rest
	}
	return own, window, challenger
}

// averagedLen is the number of values Header.Averaged's state holds.
func (h *Header) averagedLen() (int, error) {
	a := h.Averaged
	if !(a.Window > 0 && a.Window <= 1) {
		return 0, fmt.Errorf("%w: averaging window %v, want (0, 1]", ErrHeader, a.Window)
	}
	if h.Covariance != nil || len(h.Views) != 1 {
		return 0, fmt.Errorf("%w: averaged state in a model with %d views or covariance state", ErrHeader, len(h.Views))
	}
	counts, err := h.coefCounts()
	if err != nil {
		return 0, err
	}
	n := 2 * counts[0]
	if h.Settings.Center {
		n += 2 * h.Columns()
	}
	return n, nil
}

// coefCounts is the number of coefficients each view carries.
func (h *Header) coefCounts() ([]int, error) {
	if h.K < 1 || h.K > 1<<12 || h.BlockSize < 1 || h.BlockSize > 1<<16 || h.Oversample < 0 || h.Oversample > 1<<12 || (h.Oversample > 0 && len(h.Views) != 1) {
		return nil, fmt.Errorf("%w: k=%d oversample=%d block_size=%d", ErrHeader, h.K, h.Oversample, h.BlockSize)
	}
	// A restored learner reserves max_features·k coefficients a view: the
	// same bound as the coefficients a snapshot may carry.
	if h.MaxFeatures < 0 || uint64(h.MaxFeatures)*uint64(h.Columns()) > MaxCoef {
		return nil, fmt.Errorf("%w: max_features %d × k %d exceeds the limit of %d coefficients", ErrSize, h.MaxFeatures, h.Columns(), MaxCoef)
	}
	out := make([]int, len(h.Views))
	var total uint64
	for v := range h.Views {
		seeds, bs := h.ViewSeeds(v)
		if bs < 1 || bs > 1<<16 {
			return nil, fmt.Errorf("%w: view %d block_size=%d", ErrHeader, v, bs)
		}
		n := uint64(len(seeds)) * uint64(bs) * uint64(h.Columns())
		total += n
		if total > MaxCoef {
			return nil, fmt.Errorf("%w: %d coefficients exceed the limit %d", ErrSize, total, MaxCoef)
		}
		out[v] = int(n)
	}
	return out, nil
}

// Validate checks the header's internal consistency.
// Novelty is a version's reference for novelty: its own residuals
// (Model.Score) on the stream's last held-out rows, oldest first.
type Novelty struct {
	Residuals []float64 `json:"residuals"`
}

// MaxNoveltyResiduals bounds Novelty.Residuals.
const MaxNoveltyResiduals = 1 << 16

func (h *Header) Validate() error {
	if n := h.Novelty; n != nil {
		if len(n.Residuals) > MaxNoveltyResiduals {
			return fmt.Errorf("%w: %d novelty residuals, at most %d", ErrHeader, len(n.Residuals), MaxNoveltyResiduals)
		}
		for _, v := range n.Residuals {
			if !(v >= 0) || math.IsInf(v, 0) {
				return fmt.Errorf("%w: novelty residual %v (want finite, ≥ 0)", ErrHeader, v)
			}
		}
	}
	if h.Detector != nil && !h.Detector.valid() {
		return fmt.Errorf("%w: detector state %+v", ErrHeader, *h.Detector)
	}
	if c := h.Challenger; c != nil {
		// One level deep: a one-view challenger's shadow (Candidate).
		if nested := c.Model; nested == nil || (nested.Challenger != nil && (nested.Challenger.Model == nil || nested.Challenger.Model.Challenger != nil)) {
			return fmt.Errorf("%w: a challenger without a model, or challengers nested more than one deep", ErrHeader)
		}
		for _, v := range c.Test {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("%w: challenger test state %v", ErrNonFinite, c.Test)
			}
		}
		if err := c.Model.Validate(); err != nil {
			return fmt.Errorf("challenger: %w", err)
		}
		if math.IsNaN(c.Fit) || math.IsInf(c.Fit, 0) || math.IsNaN(c.ChallengerFit) || math.IsInf(c.ChallengerFit, 0) {
			return fmt.Errorf("%w: challenger fit scores %v, %v", ErrNonFinite, c.Fit, c.ChallengerFit)
		}
	}
	if h.Generator != features.GeneratorID && h.Generator != features.StructuredGeneratorID {
		return fmt.Errorf("%w: generator %q (this build knows %q and %q)", ErrUnsupported, h.Generator, features.GeneratorID, features.StructuredGeneratorID)
	}
	if len(h.Views) < 1 || len(h.Views) > 2 {
		return fmt.Errorf("%w: %d views", ErrHeader, len(h.Views))
	}
	if len(h.Views) >= 1 && len(h.Views) <= 2 {
		if _, _, err := h.payload(); err != nil {
			return err
		}
	}
	for i, v := range h.Views {
		if v.Precision != "" && v.Precision != PrecisionFloat32 {
			return fmt.Errorf("%w: view %d: unknown precision %q", ErrHeader, i, v.Precision)
		}
		if v.Compute != "" && v.Compute != ComputeBLAS {
			return fmt.Errorf("%w: view %d: unknown compute mode %q", ErrHeader, i, v.Compute)
		}
		if v.Frequencies != "" && v.Frequencies != FrequenciesOrthogonal {
			return fmt.Errorf("%w: view %d: unknown frequencies %q", ErrUnsupported, i, v.Frequencies)
		}
		if v.Structured() && h.Generator != features.StructuredGeneratorID {
			return fmt.Errorf("%w: view %d has orthogonal frequencies but the generator is %q", ErrHeader, i, h.Generator)
		}
		if v.Features != "" && v.Features != FeaturesLandmarks {
			return fmt.Errorf("%w: view %d: unknown feature source %q", ErrUnsupported, i, v.Features)
		}
		if v.Dim < 1 || v.Dim > 1<<24 {
			return fmt.Errorf("%w: view %d dimension %d", ErrHeader, i, v.Dim)
		}
		if err := v.Kernel.Validate(); err != nil {
			return fmt.Errorf("%w: view %d: %w", ErrHeader, i, err)
		}
		p := v.Preprocess
		if (len(p.Mean) != 0 && len(p.Mean) != v.Dim) || len(p.Mean) != len(p.Scale) {
			return fmt.Errorf("%w: view %d standardisation has %d means, %d scales for dimension %d", ErrHeader, i, len(p.Mean), len(p.Scale), v.Dim)
		}
		if len(v.Center) != 0 && len(v.Center) != h.Columns() {
			return fmt.Errorf("%w: view %d centre has length %d, want k=%d", ErrHeader, i, len(v.Center), h.Columns())
		}
		for name, xs := range map[string][]float64{"standardisation mean": p.Mean, "standardisation scale": p.Scale, "centre": v.Center} {
			if j := nonFinite(xs); j >= 0 {
				return fmt.Errorf("%w: view %d %s[%d] = %v", ErrNonFinite, i, name, j, xs[j])
			}
		}
	}
	return nil
}

// nonFinite returns the index of the first NaN or ±Inf in xs, or −1.
func nonFinite(xs []float64) int {
	for i, x := range xs {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return i
		}
	}
	return -1
}

// Snapshot is a decoded snapshot: header plus coefficients. Coef[v] holds
// view v's coefficients, blocks·BlockSize rows by K columns, row-major.
// Landmarks[v] holds a landmark view's points (blocks·BlockSize rows by
// Dim, row-major; see View.Features), nil for a random-feature view;
// Landmarks itself may be nil when no view has landmarks.
type Snapshot struct {
	Header    Header
	Coef      [][]float64
	Landmarks [][]float64
	// State is the learner state Header.Covariance (format v2) or
	// Header.Averaged (v3) describes, then Header.Challenger's (v4; see
	// SplitState), after the coefficients and landmarks in the payload;
	// nil without.
	State []float64
}

// Served returns the model as it is published: s without its learner
// state (Header.Covariance, Averaged, Detector, Challenger, State), which a projection
// does not use, and with its first K components only (Header.Oversample).
// It shares s's slices, except for the coefficients and centres of an
// oversampled model, copied without the columns past K.
func (s *Snapshot) Served() *Snapshot {
	if s.Header.Covariance == nil && s.Header.Averaged == nil && s.Header.Detector == nil && s.Header.Challenger == nil && s.State == nil && s.Header.Oversample == 0 {
		return s
	}
	out := *s
	out.Header.Covariance, out.Header.Averaged, out.Header.Detector, out.Header.Challenger, out.State = nil, nil, nil, nil, nil
	if p := s.Header.Oversample; p > 0 {
		k, cols := s.Header.K, s.Header.Columns()
		out.Header.Oversample = 0
		out.Header.Views = slices.Clone(s.Header.Views)
		for i := range out.Header.Views {
			if c := out.Header.Views[i].Center; len(c) == cols {
				out.Header.Views[i].Center = slices.Clone(c[:k])
			}
		}
		out.Coef = make([][]float64, len(s.Coef))
		for i, c := range s.Coef {
			rows := len(c) / cols
			t := make([]float64, rows*k)
			for r := range rows {
				copy(t[r*k:(r+1)*k], c[r*cols:r*cols+k])
			}
			out.Coef[i] = t
		}
		if e := s.Header.Diagnostics.Eigenvalues; len(e) > k {
			out.Header.Diagnostics.Eigenvalues = slices.Clone(e[:k])
		}
	}
	return &out
}

// Columns is the components the coefficients hold: K, and the
// Oversample a learner learns beyond them.
func (h *Header) Columns() int { return h.K + h.Oversample }

// FormatVersion is the version s is written in: the oldest that holds it.
func (s *Snapshot) FormatVersion() uint32 {
	if s.Header.Challenger != nil {
		return 4
	}
	if s.Header.Averaged != nil {
		return 3
	}
	return 2
}

// Validate checks that the coefficients match the header.
func (s *Snapshot) Validate() error {
	if err := s.Header.Validate(); err != nil {
		return err
	}
	counts, _ := s.Header.coefCounts()
	if len(s.Coef) != len(s.Header.Views) {
		return fmt.Errorf("%w: %d coefficient sets for %d views", ErrSize, len(s.Coef), len(s.Header.Views))
	}
	for i, c := range s.Coef {
		if len(c) != counts[i] {
			return fmt.Errorf("%w: view %d has %d coefficients, header implies %d", ErrSize, i, len(c), counts[i])
		}
		if j := nonFinite(c); j >= 0 {
			return fmt.Errorf("%w: view %d coefficient %d = %v", ErrNonFinite, i, j, c[j])
		}
	}
	_, lm, _ := s.Header.payload()
	for i, n := range lm {
		var z []float64
		if i < len(s.Landmarks) {
			z = s.Landmarks[i]
		}
		if len(z) != n {
			return fmt.Errorf("%w: view %d has %d landmark values, header implies %d", ErrSize, i, len(z), n)
		}
		if j := nonFinite(z); j >= 0 {
			return fmt.Errorf("%w: view %d landmark value %d = %v", ErrNonFinite, i, j, z[j])
		}
	}
	if len(s.Landmarks) > len(lm) {
		return fmt.Errorf("%w: %d landmark sets for %d views", ErrSize, len(s.Landmarks), len(lm))
	}
	if n := s.Header.stateLen(); len(s.State) != n {
		return fmt.Errorf("%w: %d learner-state values, header implies %d", ErrSize, len(s.State), n)
	}
	if j := nonFinite(s.State); j >= 0 {
		return fmt.Errorf("%w: learner-state value %d = %v", ErrNonFinite, j, s.State[j])
	}
	return nil
}

// MarshalBinary encodes s in format s.FormatVersion().
func (s *Snapshot) MarshalBinary() ([]byte, error) {
	var buf bytes.Buffer
	if _, err := s.WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteTo writes s in format s.FormatVersion().
func (s *Snapshot) WriteTo(w io.Writer) (int64, error) {
	if err := s.Validate(); err != nil {
		return 0, err
	}
	hdr, err := json.Marshal(&s.Header)
	if err != nil {
		return 0, fmt.Errorf("snapshot: encode header: %w", err)
	}
	if len(hdr) > MaxHeaderBytes {
		return 0, fmt.Errorf("%w: header of %d bytes exceeds %d", ErrSize, len(hdr), MaxHeaderBytes)
	}
	crc := crc32.New(castagnoli)
	cw := &countWriter{w: io.MultiWriter(w, crc)}
	var pre [16]byte
	copy(pre[:8], Magic)
	binary.LittleEndian.PutUint32(pre[8:], s.FormatVersion())
	binary.LittleEndian.PutUint32(pre[12:], uint32(len(hdr)))
	cw.Write(pre[:])
	cw.Write(hdr)
	var total int
	payload := append(append(append([][]float64(nil), s.Coef...), s.Landmarks...), s.State)
	for _, c := range payload {
		total += len(c)
	}
	var n8 [8]byte
	binary.LittleEndian.PutUint64(n8[:], uint64(total))
	cw.Write(n8[:])
	chunk := make([]byte, 0, 64<<10)
	for _, c := range payload {
		for _, v := range c {
			chunk = binary.LittleEndian.AppendUint64(chunk, math.Float64bits(v))
			if len(chunk) == cap(chunk) {
				cw.Write(chunk)
				chunk = chunk[:0]
			}
		}
	}
	cw.Write(chunk)
	if cw.err != nil {
		return cw.n, fmt.Errorf("snapshot: write: %w", cw.err)
	}
	var sum [4]byte
	binary.LittleEndian.PutUint32(sum[:], crc.Sum32())
	m, err := w.Write(sum[:])
	if err != nil {
		return cw.n + int64(m), fmt.Errorf("snapshot: write: %w", err)
	}
	return cw.n + int64(m), nil
}

type countWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
	return n, err
}

// UnmarshalBinary decodes a v1, v2, v3 or v4 snapshot from data, rejecting any mismatch
// before allocating the payload.
func (s *Snapshot) UnmarshalBinary(data []byte) error {
	if len(data) < 16 {
		return fmt.Errorf("%w: %d bytes", ErrTruncated, len(data))
	}
	hlen, version, err := checkPrefix(data[:16])
	if err != nil {
		return err
	}
	if uint64(len(data)) < 16+uint64(hlen)+8+4 {
		return fmt.Errorf("%w: %d bytes, header alone needs %d", ErrTruncated, len(data), 16+hlen+12)
	}
	n := binary.LittleEndian.Uint64(data[16+hlen:])
	if n > MaxCoef || uint64(len(data)) != 16+uint64(hlen)+8+8*n+4 {
		return fmt.Errorf("%w: %d bytes for %d coefficients", ErrSize, len(data), n)
	}
	body := len(data) - 4
	if got, want := crc32.Checksum(data[:body], castagnoli), binary.LittleEndian.Uint32(data[body:]); got != want {
		return fmt.Errorf("%w: stored %08x, computed %08x", ErrChecksum, want, got)
	}
	var h Header
	if err := decodeHeader(data[16:16+hlen], version, &h, n); err != nil {
		return err
	}
	coef := make([]float64, n)
	if i := putFloats(coef, data[24+hlen:body]); i >= 0 {
		return fmt.Errorf("%w: coefficient or landmark value %d = %v", ErrNonFinite, i, coef[i])
	}
	s.Header = h
	s.Coef, s.Landmarks, s.State = splitViews(coef, &h)
	return nil
}

// checkPrefix returns the header length and the format version.
func checkPrefix(p []byte) (int, uint32, error) {
	if string(p[:8]) != Magic {
		return 0, 0, ErrMagic
	}
	v := binary.LittleEndian.Uint32(p[8:])
	if v > Version && v <= Version+newerFormats {
		return 0, 0, fmt.Errorf("%w: %w: %d (this build reads 1 to %d)", ErrVersion, ErrNewer, v, Version)
	}
	if v < 1 || v > Version {
		return 0, 0, fmt.Errorf("%w: %d (this build reads 1 to %d)", ErrVersion, v, Version)
	}
	hlen := binary.LittleEndian.Uint32(p[12:])
	if hlen > MaxHeaderBytes {
		return 0, 0, fmt.Errorf("%w: header of %d bytes exceeds %d", ErrSize, hlen, MaxHeaderBytes)
	}
	return int(hlen), v, nil
}

func decodeHeader(b []byte, version uint32, h *Header, n uint64) error {
	if err := json.Unmarshal(b, h); err != nil {
		return fmt.Errorf("%w: %w", ErrHeader, err)
	}
	if version == 1 {
		var e v1Extra
		if err := json.Unmarshal(b, &e); err != nil {
			return fmt.Errorf("%w: v1 extra: %w", ErrHeader, err)
		}
		h.Settings = e.settings()
	}
	if version < 3 && h.Averaged != nil {
		return fmt.Errorf("%w: averaged state in a format v%d snapshot (v3 introduced it)", ErrHeader, version)
	}
	if version < 4 && h.Challenger != nil {
		return fmt.Errorf("%w: challenger state in a format v%d snapshot (v4 introduced it)", ErrHeader, version)
	}
	if err := h.Validate(); err != nil {
		return err
	}
	counts, lm, _ := h.payload()
	total := uint64(h.stateLen())
	for _, c := range append(counts, lm...) {
		total += uint64(c)
	}
	if total != n {
		return fmt.Errorf("%w: header implies %d coefficients, file has %d", ErrSize, total, n)
	}
	return nil
}

// splitViews splits the payload into the views' coefficients, then their
// landmark points (nil when no view has landmarks), then the learner
// state (nil without).
func splitViews(coef []float64, h *Header) (out, landmarks [][]float64, state []float64) {
	counts, lm, _ := h.payload()
	out = make([][]float64, len(counts))
	off := 0
	for v, c := range counts {
		out[v] = coef[off : off+c : off+c]
		off += c
	}
	for v, c := range lm {
		if c == 0 {
			continue
		}
		if landmarks == nil {
			landmarks = make([][]float64, len(lm))
		}
		landmarks[v] = coef[off : off+c : off+c]
		off += c
	}
	if n := h.stateLen(); n > 0 {
		state = coef[off : off+n : off+n]
	}
	return out, landmarks, state
}

// readFull fills buf from r, adding what it read to *read; a short read
// is ErrTruncated, naming what was being read.
func readFull(r io.Reader, buf []byte, read *int64, what string) error {
	m, err := io.ReadFull(r, buf)
	*read += int64(m)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrTruncated, what, err)
	}
	return nil
}

// ReadFrom decodes a v1, v2, v3 or v4 snapshot from r. It allocates for the
// payload only as the bytes arrive, decoding them as they come (about
// twice the coefficients at the peak, with outgrown room), so a lying header
// cannot force a large allocation — unless r says how long it is (a
// method Size() int64 giving its length from where ReadFrom starts, as
// bytes.Reader's and the object readers of publish's backends), that is
// the length the header gives, and the coefficients take at most
// MaxTrustedBytes: room for them is then made at once (a reader of a
// model holds it once). A size claim is no proof: an object store's
// writer states it, so beyond MaxTrustedBytes it is not trusted.
func (s *Snapshot) ReadFrom(r io.Reader) (int64, error) {
	crc := crc32.New(castagnoli)
	tr := io.TeeReader(r, crc)
	var read int64
	var pre [16]byte
	if err := readFull(tr, pre[:], &read, "prefix"); err != nil {
		return read, err
	}
	hlen, version, err := checkPrefix(pre[:])
	if err != nil {
		return read, err
	}
	hdr, err := readGrow(tr, hlen, &read)
	if err != nil {
		return read, err
	}
	var n8 [8]byte
	if err := readFull(tr, n8[:], &read, "coefficient count"); err != nil {
		return read, err
	}
	n := binary.LittleEndian.Uint64(n8[:])
	if n > MaxCoef {
		return read, fmt.Errorf("%w: %d coefficients exceed the limit %d", ErrSize, n, MaxCoef)
	}
	var h Header
	if err := decodeHeader(hdr, version, &h, n); err != nil {
		return read, err
	}
	var coef []float64
	bad := -1
	if sz, ok := r.(interface{ Size() int64 }); ok && sz.Size() == 16+int64(hlen)+8+8*int64(n)+4 && 8*n <= MaxTrustedBytes {
		coef = make([]float64, n)
		bad, err = readFloats(tr, coef, &read)
	} else {
		coef, bad, err = readFloatsGrow(tr, int(n), &read)
	}
	if err != nil {
		return read, err
	}
	var sum [4]byte
	if err := readFull(r, sum[:], &read, "checksum"); err != nil {
		return read, err
	}
	if got, want := crc.Sum32(), binary.LittleEndian.Uint32(sum[:]); got != want {
		return read, fmt.Errorf("%w: stored %08x, computed %08x", ErrChecksum, want, got)
	}
	if bad >= 0 {
		return read, fmt.Errorf("%w: coefficient or landmark value %d = %v", ErrNonFinite, bad, coef[bad])
	}
	s.Header = h
	s.Coef, s.Landmarks, s.State = splitViews(coef, &h)
	return read, nil
}

// MaxTrustedBytes bounds the room ReadFrom makes at once on a reader's
// size claim (a forged object info in a store could claim 8 GiB).
const MaxTrustedBytes = 256 << 20

// readFloatsGrow reads n little-endian float64s from r in steps of at most
// 1 MiB, growing the result as they arrive (doubling, capped at n) so
// that memory follows the bytes actually present; it adds what it read to
// *read and returns the index of the first that is not finite, or -1.
func readFloatsGrow(r io.Reader, n int, read *int64) ([]float64, int, error) {
	const step = 1 << 17 // floats: 1 MiB
	dst := make([]float64, 0, min(n, step))
	buf := make([]byte, 8*min(n, step))
	bad := -1
	for len(dst) < n {
		m := min(n-len(dst), step)
		if err := readFull(r, buf[:8*m], read, "coefficients"); err != nil {
			return nil, bad, err
		}
		if cap(dst)-len(dst) < m {
			nd := make([]float64, len(dst), min(n, max(2*cap(dst), len(dst)+m)))
			copy(nd, dst)
			dst = nd
		}
		off := len(dst)
		dst = dst[:off+m]
		if i := putFloats(dst[off:], buf[:8*m]); bad < 0 && i >= 0 {
			bad = off + i
		}
	}
	return dst, bad, nil
}

// putFloats decodes len(dst) little-endian float64s from p into dst and
// returns the index of the first that is not finite, or -1.
func putFloats(dst []float64, p []byte) int {
	bad := -1
	for i := range dst {
		dst[i] = math.Float64frombits(binary.LittleEndian.Uint64(p[8*i:]))
		if bad < 0 && (math.IsNaN(dst[i]) || math.IsInf(dst[i], 0)) {
			bad = i
		}
	}
	return bad
}

// readFloats fills dst with little-endian float64s read from r in steps
// of at most 1 MiB, adding what it read to *read, and returns the index
// of the first that is not finite, or -1.
func readFloats(r io.Reader, dst []float64, read *int64) (int, error) {
	buf := make([]byte, min(8*len(dst), 1<<20))
	bad := -1
	for off := 0; off < len(dst); {
		m := min(len(dst)-off, len(buf)/8)
		if err := readFull(r, buf[:8*m], read, "coefficients"); err != nil {
			return bad, err
		}
		if i := putFloats(dst[off:off+m], buf); bad < 0 && i >= 0 {
			bad = off + i
		}
		off += m
	}
	return bad, nil
}

// readGrow reads exactly n bytes, growing its buffer in steps of at most
// 1 MiB so that memory follows the bytes actually present, and adds what
// it read to *read.
func readGrow(r io.Reader, n int, read *int64) ([]byte, error) {
	buf, err := growRead(r, n)
	*read += int64(len(buf))
	return buf, err
}

// growRead is readGrow without the count.
func growRead(r io.Reader, n int) ([]byte, error) {
	const step = 1 << 20
	buf := make([]byte, 0, min(n, step))
	for len(buf) < n {
		want := min(n-len(buf), step)
		if cap(buf)-len(buf) < want {
			nb := make([]byte, len(buf), len(buf)+max(want, len(buf)))
			copy(nb, buf)
			buf = nb
		}
		m, err := io.ReadFull(r, buf[len(buf):len(buf)+want])
		buf = buf[:len(buf)+m]
		if err != nil {
			return buf, fmt.Errorf("%w: wanted %d bytes, got %d: %w", ErrTruncated, n, len(buf), err)
		}
	}
	return buf, nil
}
