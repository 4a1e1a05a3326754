package configs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/streamkpca/streamkpca/features"
	"github.com/streamkpca/streamkpca/ingest"
	"github.com/streamkpca/streamkpca/online"
	"github.com/streamkpca/streamkpca/publish"
)

// Config is the whole service configuration. Every field documents its
// default; the zero value means "use the default". A field's tags are
// the one declaration of a setting: `yaml` its key (and so its
// STREAMKPCA_ variable and, for the learner, its flag), `doc` its line
// in configs/streamkpca.yaml and --help (generated from them: Example),
// `online` where the learner takes it (online.go).
type Config struct {
	// Model is the model's name (subjects, file names). Default: "default".
	Model string `yaml:"model" online:"Model" doc:"name used in subjects, file names and URLs"`
	// ShutdownTimeout bounds a graceful stop from the signal on: the
	// final snapshot's wait for its dead letters, the final publish, the
	// HTTP requests in flight, the dead letters' flush and NATS's drain
	// share it (a final snapshot whose dead letters cannot be written is
	// not taken: its messages are read again after the restart). Default:
	// 30s.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout" min:"0s" doc:"a graceful stop's bound from the signal on: final snapshot, publish, HTTP, dead letters, NATS drain"`
	Kafka           Kafka         `yaml:"kafka"`
	Learner         Learner       `yaml:"learner"`
	Snapshot        Snapshot      `yaml:"snapshot"`
	Output          Output        `yaml:"output"`
	NATS            NATS          `yaml:"nats"`
	HTTP            HTTP          `yaml:"http"`
	Log             Log           `yaml:"log"`
	Cluster         Cluster       `yaml:"cluster"`
}

// Cluster makes the instances of one consumer group learn one model
// (package cluster): every step is the step on the union of their
// batches, exchanged over NATS.
type Cluster struct {
	// Enabled turns it on. Every instance of the group must have the same
	// model settings. Needs NATS, learner.algorithm kpca or gha with the
	// subspace solver and random features. Default: false (each instance
	// learns its own model from its partitions).
	Enabled bool `yaml:"enabled" doc:"true: the instances of kafka.group learn one model together"`
	// StepTimeout: an instance that has not sent its part of a step by
	// then is gone, and the group waits for the next generation. Must
	// exceed learner.linger (an instance without data steps every linger).
	// Default: 30s.
	StepTimeout time.Duration `yaml:"step_timeout" min:"0s" zero:"refused" doc:"an instance silent this long is gone; must exceed learner.linger"`
}

// Kafka is the input side.
type Kafka struct {
	// Brokers is the bootstrap list. Default: [localhost:9092].
	Brokers List `yaml:"brokers"`
	// Topic of vectors. Default: "vectors".
	Topic string `yaml:"topic"`
	// Group is the consumer group. Default: "streamkpca". Several
	// instances in a group split the partitions; each learns its own model
	// unless cluster.enabled, when they learn one together (see
	// docs/operations.md).
	Group string `yaml:"group" doc:"one model per consumer group (see docs/operations.md)"`
	// Start for partitions the model has never seen: earliest or latest.
	// Default: earliest.
	Start string `yaml:"start" doc:"where a partition the model never saw starts: earliest | latest"`
	// OffsetOutOfRange is what happens to a partition whose next offset
	// lies outside its range: past its end (the topic was deleted and
	// created again, or truncated) or below its first offset (retention
	// removed messages the model had not read). earliest reads it from
	// its first offset; fail stops the service. Either way the gap is
	// logged as an error and counted. Default: earliest.
	OffsetOutOfRange string `yaml:"offset_out_of_range" doc:"a partition whose next offset is out of its range (a recreated topic, retention): earliest | fail; always logged and counted"`
	// Format of messages: json, csv, f32le, f64le, or a Schema Registry
	// format (avro, protobuf, jsonschema: the Confluent wire format, the
	// schema fetched by its id from schema_registry). Default: json.
	Format string `yaml:"format" doc:"json ([1,2] or {\"x\":[..],\"y\":[..]}) | csv | f32le | f64le\n| avro | protobuf | jsonschema (Confluent wire format; needs schema_registry.url)"`
	// SchemaRegistry is where the avro, protobuf and jsonschema formats
	// find their schemas, and which fields hold the vectors.
	SchemaRegistry SchemaRegistry `yaml:"schema_registry"`
	// Dim is the input dimension; 0 = from the first valid message.
	Dim int `yaml:"dim" min:"0" max:"1048576" online:"Dim" doc:"0 = fixed by the first valid message"`
	// DeadLetterTopic receives refused messages. Default: "<topic>.dlq".
	DeadLetterTopic string `yaml:"dead_letter_topic" shown:"\"\"" doc:"default: <topic>.dlq"`
	// DeadLetterSpillBytes bounds the file in snapshot.dir that keeps the
	// dead letters the dead-letter topic refuses (a missing topic, an
	// ACL), so that learning and snapshots go on; they are sent when the
	// topic takes writes again, across restarts. Default: 64 MiB.
	DeadLetterSpillBytes int64 `yaml:"dead_letter_spill_bytes" min:"1" doc:"dead letters the topic refuses wait in <snapshot.dir>/<model>.dead-letters up to this (64 MiB)"`
	// MaxMessageBytes refuses larger messages. Default: 1048576.
	MaxMessageBytes int `yaml:"max_message_bytes" min:"8" zero:"refused" doc:"larger messages are dead-lettered as \"oversized\""`
	// MaxAbs dead-letters a message holding a value whose magnitude
	// exceeds it (reason out_of_range): one huge finite value overflows
	// unbounded kernels and would spoil its whole batch. Default: 1e12.
	MaxAbs float64 `yaml:"max_abs" zero:"refused" doc:"values beyond ± this are dead-lettered as \"out_of_range\""`
	// QueueSize and QueueBytes bound fetched-but-unlearned messages, in
	// count and in bytes of values; the lag metric counts them. Fetched
	// messages hold at most queue_bytes plus, per assigned partition, one
	// fetch of max_message_bytes and 16 messages; the parse stage ahead of
	// the learner holds a second budget of queue_bytes (raw messages and
	// their parsed values), so the whole is about twice queue_bytes.
	// Defaults: 4096, 64 MiB.
	QueueSize  int   `yaml:"queue_size" min:"1" zero:"refused" doc:"fetched-but-unlearned messages (backpressure bound)..."`
	QueueBytes int64 `yaml:"queue_bytes" min:"1" zero:"refused" doc:"...and their bytes (64 MiB)"`
	// FetchMaxWait bounds one fetch: a broker slower than 1 s (a
	// quarter of fetch_max_wait when that is under 1 s) to answer is
	// never read, and shutdown and rebalances wait up to this long for a
	// fetch in flight. Default: 1.5s.
	FetchMaxWait time.Duration `yaml:"fetch_max_wait" min:"10ms" zero:"refused" doc:"a broker slower than 1s (this/4 when this is under 1s) to answer a fetch is never read"`
	// SessionTimeout: a crashed instance holds its partitions this long
	// before the group reassigns them. Default: 10s.
	SessionTimeout time.Duration `yaml:"session_timeout" doc:"a crashed instance holds its partitions this long"`
	// RebalanceTimeout: how long a rebalance waits for members. Default: 10s.
	RebalanceTimeout time.Duration `yaml:"rebalance_timeout"`
	TLS              TLS           `yaml:"tls"`
	SASL             SASL          `yaml:"sasl"`
}

// SchemaRegistry is a Confluent-compatible Schema Registry
// (kafka.format avro, protobuf or jsonschema; ingest/registry.go).
type SchemaRegistry struct {
	// URL of the registry; several, comma-separated, are tried in turn.
	URL string `yaml:"url" doc:"http(s)://host:8081 (comma-separated: tried in turn); needed by kafka.format avro | protobuf | jsonschema"`
	// User and Password (or PasswordFile): HTTP basic authentication
	// (Confluent Cloud: the API key and secret).
	User         string `yaml:"user"`
	Password     string `yaml:"password" doc:"or password_file: /run/secrets/registry"`
	PasswordFile string `yaml:"password_file"`
	TLS          TLS    `yaml:"tls"`
	// Field is the dotted path of x in a message's value (a value that is
	// itself an array is x). Default: x.
	Field string `yaml:"field" doc:"dotted path of the vector in the value (default x; an array value is the vector)"`
	// FieldY is the dotted path of y for two-view algorithms. Default: y,
	// else target.
	FieldY string `yaml:"field_y" doc:"two views: dotted path of y (default y, else target)"`
}

// TLS configures a TLS client. Off unless Enabled.
type TLS struct {
	Enabled bool `yaml:"enabled"`
	// CAFile, CertFile, KeyFile are PEM files; empty = system roots, no
	// client certificate.
	CAFile   string `yaml:"ca_file"`
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// InsecureSkipVerify disables verification (tests only).
	InsecureSkipVerify bool `yaml:"insecure_skip_verify" doc:"verify nothing (tests only)"`
}

// SASL configures Kafka authentication.
type SASL struct {
	// Mechanism: "", plain, scram-sha-256, scram-sha-512. Default: none.
	Mechanism    string `yaml:"mechanism" doc:"plain | scram-sha-256 | scram-sha-512"`
	User         string `yaml:"user"`
	Password     string `yaml:"password" doc:"or password_file: /run/secrets/kafka"`
	PasswordFile string `yaml:"password_file"`
}

// Learner configures the DSGD learner (package online).
type Learner struct {
	// Algorithm: kpca, gha, ksvd, kcca or ksir (the last three learn
	// from (x, y) pairs; kcca by its covariance solver). Default: kpca.
	Algorithm string `yaml:"algorithm" online:"Algorithm,filled" doc:"kpca (subspace, Alg. 1-2) | gha (ordered eigenfunctions, Sec. 5.1)\n| ksvd (Alg. 3) | kcca (Alg. 4) | ksir (Sec. 5.4); the last three read\n{\"x\":[...],\"y\":[...]} (ksir: {\"x\":[...],\"target\":[t]}) json messages"`
	// K components. Default: 3.
	K int `yaml:"k" min:"1" zero:"refused" online:"K" doc:"components"`
	// Oversample: components kpca learns beyond k and does not serve
	// (online.Config.Oversample): they change the k served only through
	// the step, which theta0 sets at no cost. Default (0) and -1: none.
	Oversample int `yaml:"oversample" min:"-1" online:"Oversample" doc:"kpca: components learned beyond k and not served; they only enlarge the step (theta0 does that for free) (0, -1: none)"`
	// Kernel family: gaussian, laplacian, cauchy, matern, dotproduct,
	// polynomial, expsemigroup, recsemigroup, arccosine, linear.
	// Default: gaussian.
	Kernel string `yaml:"kernel" online:"Kernel.Family,filled" doc:"gaussian | laplacian | cauchy | matern | dotproduct | polynomial\n| expsemigroup | recsemigroup | arccosine | linear (paper Table 1)"`
	// Bandwidth ℓ (gaussian, laplacian, cauchy, matern); 0 = median trick
	// on the first batch.
	Bandwidth float64 `yaml:"bandwidth" online:"Kernel.Bandwidth" doc:"ℓ of gaussian/laplacian/cauchy/matern; 0 = median trick on the first batch"`
	// Nu: Matérn smoothness ν.
	Nu float64 `yaml:"nu" online:"Kernel.Nu" doc:"matern ν (e.g. 1.5)"`
	// Degree: polynomial p, or arc-cosine n (0, 1, 2).
	Degree int `yaml:"degree" online:"Kernel.Degree" doc:"polynomial p, or arccosine n (0, 1, 2)"`
	// Offset: polynomial c.
	Offset float64 `yaml:"offset" online:"Kernel.Offset" doc:"polynomial c"`
	// Coefficients a_0…a_M of the dot-product kernel.
	Coefficients []float64 `yaml:"coefficients" online:"Kernel.Coefficients" example:"[1, 1, 0.5]" doc:"dotproduct a_0…a_M (no default: required for dotproduct)"`
	// P of the dot-product kernel's degree distribution. 0 = 2.
	P float64 `yaml:"p" online:"Kernel.P" doc:"dotproduct degree law parameter (0 = 2)"`
	// Beta of the exp-semigroup kernel; Lambda of the rec-semigroup kernel.
	Beta   float64 `yaml:"beta" online:"Kernel.Beta" doc:"expsemigroup β (inputs must be ≥ 0)"`
	Lambda float64 `yaml:"lambda" online:"Kernel.Lambda" doc:"recsemigroup λ (inputs must be ≥ 0)"`
	// KernelY, BandwidthY: the second view's kernel (ksvd, kcca). Defaults:
	// gaussian, median trick.
	KernelY    string  `yaml:"kernel_y" online:"KernelY.Family,filled" doc:"ksvd/kcca: kernel of the y view"`
	BandwidthY float64 `yaml:"bandwidth_y" online:"KernelY.Bandwidth" doc:"ksvd/kcca: its bandwidth; 0 = median trick"`
	// Slices of the target for ksir. Default: 10.
	Slices int `yaml:"slices" online:"Slices,filled" doc:"ksir: target slices (> k)"`
	// Uncentered turns off the two-view algorithms' default centring.
	Uncentered bool `yaml:"uncentered" online:"Uncentered" doc:"ksvd/kcca/ksir: turn off the default centring"`
	// Batch is the mini-batch size b. Default: 512.
	Batch int `yaml:"batch" min:"1" max:"1048576" zero:"refused" doc:"data mini-batch b"`
	// Linger: a partial batch is learned after waiting this long for more
	// data. Default: 2s.
	Linger time.Duration `yaml:"linger" min:"1ns" doc:"learn a partial batch after waiting this long"`
	// Block is the features per block B. Default: 512 for kpca/gha with the
	// subspace solver (features must join while the step is still large to
	// be learned) and for the covariance solver, 128 otherwise (the
	// paper's).
	Block int `yaml:"block" zero:"refused" online:"BlockSize,filled" doc:"random features per block B (≥ k); default 512 for kpca/gha with the subspace solver and kcca's covariance solver, 128 otherwise"`
	// MaxFeatures is the feature budget. Default: 32768 with the subspace
	// solver, 4096 landmarks with it; 2048 (per view for kcca) under the
	// covariance solver.
	MaxFeatures int `yaml:"max_features" max:"16777216" zero:"refused" online:"MaxFeatures,filled" doc:"feature budget (2048, per view for kcca, under the covariance solver; fit's kcca: what --time and max_model_bytes pay for); past it blocks are revisited in turn"`
	// Features: random (random features from a seed per block, the
	// paper's) or landmarks (each block is Block points of the stream and
	// the Nyström map they define: far more accurate per feature when the
	// spectrum decays fast, about five times the cost per feature, and
	// snapshots then hold those points — rows of your data). kpca, gha,
	// ksvd and kcca (not ksir). Part of the model. Default: random.
	Features string `yaml:"features" online:"Features,filled" doc:"random (from seeds), or landmarks (points of the stream; snapshots then hold data rows; not ksir)"`
	// Solver of kpca/gha: subspace (stochastic orthogonal iteration over
	// all feature blocks; needs no tuning), covariance (PCA of the running
	// covariance of a fixed feature budget, 2,048 by default: with
	// landmarks, streaming Nyström PCA) or oja (the paper's rule). Of
	// kcca: covariance (regularised CCA on the running covariances of a
	// fixed feature budget, 2,048 per view by default) or oja (the paper's
	// Alg. 4). ksvd and ksir have the paper's rule only. Part of the
	// model: a restored snapshot keeps its own. Default: covariance for
	// kcca and for kpca/gha with landmark features, subspace otherwise.
	Solver string `yaml:"solver" online:"Solver,filled" doc:"kpca/gha: subspace (no tuning needed), covariance (streaming Nyström PCA with features: landmarks: set it when you switch) or oja (the paper's rule); kcca: covariance (its default: set it when you switch to kcca) or oja"`
	// Ridge of the covariance solver, relative to each view's mean
	// feature variance. Default: for kcca 0, chosen by the learner on
	// held-out pairs (from 1e-3 to 1: docs/learners.md); 0.01 for kpca
	// and gha.
	Ridge float64 `yaml:"ridge" online:"Ridge,filled" shown:"0" doc:"covariance solver: ridge relative to each view's mean feature variance; 0 = kcca chooses it on held-out pairs (kpca/gha: 0.01)"`
	// Theta0, Theta1: step schedule. 0 = the algorithm's default: 1, 0.05
	// for the subspace solver; 0.5, 0.01 for oja; 1, 0.001 for
	// ksvd/kcca/ksir.
	Theta0 float64 `yaml:"theta0" online:"Theta0" doc:"unitless initial step; 0 = 4 (kpca, subspace, random features), 5 (subspace with center: true), 1 (other subspace), 0.5 (oja, capped at 1) or 1 (two-view)"`
	Theta1 float64 `yaml:"theta1" online:"Theta1" doc:"decay η_t ∝ 1/(1 + θ₁·t); 0 = 0.05 (subspace), 0.01 (oja) or 0.001 (two-view)"`
	// Average: the subspace solver serves the average of its iterates
	// over about this fraction of the steps so far (Polyak–Ruppert
	// averaging), in (0, 1]; negative serves the last iterate. Part of
	// the model. Default: 0.3 with the subspace solver.
	Average float64 `yaml:"average" online:"Average,filled" doc:"subspace solver: serve the average of its iterates over about this fraction of the steps so far (0 = 0.3); negative: the last iterate"`
	// Holdout: one message in this many (chosen by a hash of partition
	// and offset, so a restart chooses the same) is scored by the served
	// model before it is learned: the quality figure of the status page,
	// /metrics, snapshots and notices, and the signal of the change
	// detector. The held-out messages are learned too. 1 scores none
	// (and so detects no change). Default: 16.
	Holdout int `yaml:"holdout" zero:"refused" doc:"one message in this many is scored before it is learned: the quality figure and the change detector's signal (1 = none)"`
	// Forget: follow (one view: two scouts of a sixteenth of the budget
	// — a shadow of the model's lineage and a challenger restarted on the
	// recent stream — are compared by a sequential test on held-out
	// points; when the challenger wins, a candidate of the model's budget
	// starts on the stream and replaces the model only when the same kind
	// of test finds it better. Two views: a challenger on the recent stream replaces the
	// model when it scores better in windows of held-out pairs. An
	// abrupt change restarts a one-view model, as detect does, and
	// starts a new challenger beside a two-view one. One-view kpca and
	// gha with random features and the subspace or oja solver, in
	// cluster mode too (rank 0 runs the scouts and the candidate),
	// and two-view kcca, ksvd and ksir with random features — elsewhere
	// follow is detect), detect (only the change detector on the
	// held-out score: a change restarts the model) or off (never: for
	// streams known to be stationary). docs/learners.md. Default: follow.
	Forget string `yaml:"forget" online:"Forget,filled" doc:"follow: a challenger on the recent stream replaces the model when a sequential test finds it better (a one-view model also restarts on an abrupt change); detect: restart on an abrupt change only; off: never"`
	// Reset: when the model stored in snapshot.dir was learned with
	// settings other than these (learner.k, kernel, bandwidth, seed,
	// block, center, standardize, features, kafka.dim), start a new
	// model — a new incarnation, the stored snapshots moved to
	// snapshot.dir/replaced-<time> — instead of refusing to start. Meant
	// for one start: `--set learner.reset=true`. Default: false.
	Reset bool `yaml:"reset" doc:"start a new model when the stored one was learned with other settings (else start-up refuses, naming them)"`
	// FollowAlpha bounds the probability that following ever replaces a
	// one-view model with a candidate that is no better, over the
	// model's whole life: the level of its sequential tests, in (0, 1).
	// Smaller: fewer false switches, later switches on a real change.
	// docs/learners.md. Default: 0.01.
	FollowAlpha float64 `yaml:"follow_alpha" online:"FollowAlpha,filled" doc:"following's bound on the probability of ever replacing a one-view model with one that is no better, over its life (0 < α < 1)"`
	// LoadShedding: auto (when the learner cannot keep up with the
	// stream, learn a deterministic fraction of its messages, chosen by
	// a hash of partition and offset, and stop adding features, so that
	// consumer lag stays bounded; every offset is still covered, nothing
	// is dead-lettered for load) or off (learn every message; lag grows
	// when the stream is faster than the learner). In cluster mode each
	// member sheds its own share and the group counts it. Default: auto.
	LoadShedding string `yaml:"load_shedding" doc:"auto: when the learner cannot keep up, learn a fraction of the messages (hash of partition and offset) and stop adding features, so lag stays bounded; off: learn all, lag may grow"`
	// TargetLoad is the share of the loop's time the learner may take
	// before load shedding learns a fraction, in (0, 1]. Default: 0.8.
	TargetLoad float64 `yaml:"target_load" doc:"share of the loop's time the learner may take before load shedding starts"`
	// Budget: stream (once MaxFeatures is reached, the feature budget
	// keeps growing, a block a step, while the stream leaves the learner
	// under 0.4 of TargetLoad, up to MaxModelBytes: a slow stream buys
	// accuracy with the time it leaves; kpca and gha with the subspace or
	// oja solver and random features; in cluster mode the group grows
	// when every member votes for it) or fixed
	// (MaxFeatures is the budget). Default: stream.
	Budget string `yaml:"budget" doc:"stream: past max_features the budget keeps growing (a block a step) while the stream leaves the learner under 0.4 of target_load, up to max_model_bytes (kpca/gha, subspace or oja solver, random features); fixed: max_features is the budget"`
	// MaxModelBytes bounds a budget that grows with the stream: counted
	// are the coefficients and their working copies (about 32·k bytes a
	// feature), the batch's kept features and the cached blocks. Default:
	// 1 GiB (half a container's memory limit when that is lower).
	MaxModelBytes int64 `yaml:"max_model_bytes" min:"0" doc:"bound on a budget that grows with the stream: about 32·k bytes per feature"`
	// Replay: while the stream leaves the learner idle (nothing shed,
	// growth not held, no message waiting, less than a batch behind in
	// the topic), the loop learns batches taken in sweeps from a window
	// of the most recent learned rows, up to this many revisited rows per
	// learned row: more steps for a stream that ends before the learner's
	// steps do, and for a challenger that follows a change
	// (online.Window; measured in docs/learners.md, "More steps with the
	// time a slow stream leaves"). The window is the service's, never
	// the model's; it is emptied when following or the change detector
	// replaces the model. -1: off. Not in cluster mode (a group's step
	// is the group's). Default: 3 (measured on five real stationary
	// streams and the MNIST ramp through the service: docs/results.md,
	// "Replay on by default").
	Replay float64 `yaml:"replay" zero:"refused" doc:"rows learned again per row learned, from a window of recent rows, with the time a slow stream leaves (-1: off; not in cluster mode)"`
	// ReplayBytes bounds the replay window (at most 8,192 rows).
	// Default: 32 MiB (a thirty-second of the runtime's limit under a
	// container limit, when that is less).
	ReplayBytes int64 `yaml:"replay_bytes" min:"1" zero:"refused" doc:"room of the replay window of recent rows (at most 8,192 rows)"`
	// Seed of the model. Default: 1.
	Seed uint64 `yaml:"seed" online:"Seed,filled" doc:"model seed: every block's random features (and landmark choices) derive from it"`
	// Center learns the centred operator. Default: false.
	Center bool `yaml:"center" online:"Center" doc:"learn the centred covariance operator"`
	// Standardize each input dimension. Default: false.
	Standardize bool `yaml:"standardize" online:"Standardize" doc:"per-dimension z-scores (first-batch statistics)"`
	// Precision of the product x·Ω: float64 or float32 (twice the SIMD
	// lanes and cached blocks; shift-invariant kernels only; everything
	// after the product stays float64). Part of the model: a restored
	// snapshot keeps its own. Default: float64.
	Precision string `yaml:"precision" online:"Precision,filled" doc:"of x·Ω: float64, or float32 (faster for large d; shift-invariant kernels)"`
	// Compute: exact (own kernels, bit-identical everywhere) or blas (the
	// BLAS linked into the binary, OpenBLAS with the openblas build tag;
	// projections agree to rounding). Part of the model. Default: exact.
	Compute string `yaml:"compute" online:"Compute,filled" doc:"exact (own kernels, same bits everywhere) or blas (OpenBLAS in -tags openblas builds)"`
	// Frequencies of random features: auto (orthogonal where it applies:
	// radial kernels, random features, float64, exact compute), iid (the
	// paper's independent draws) or orthogonal (structured orthogonal
	// random features). Part of the model: a restored snapshot keeps its
	// own. Default: auto.
	Frequencies string `yaml:"frequencies" online:"Frequencies,filled" doc:"random features: auto (orthogonal for gaussian, matern and arccosine kernels in float64 with exact compute), iid (independent draws, the paper's) or orthogonal (structured orthogonal: lower-variance kernel estimates at O(log d) a feature)"`
	// Workers evaluating features. Default: number of CPUs.
	Workers int `yaml:"workers" min:"0" online:"Workers" doc:"0 = number of CPUs"`
	// CacheBytes for generated features. Default: 1 GiB.
	CacheBytes int64 `yaml:"cache_bytes" min:"0" online:"CacheBytes" doc:"generated feature blocks kept in memory"`
	// KeepBytes bounds the batch's features kept between evaluating the
	// functions and the gradient (batch × features × 8 bytes); past it a
	// step evaluates them twice. -1 keeps none. Default (0): 512 MiB for
	// inputs of at least k dimensions, none below (re-evaluating them
	// costs a small share of such a step; online.Config.KeepBytes).
	KeepBytes int64 `yaml:"keep_bytes" min:"-1" online:"KeepBytes" doc:"a batch's features kept for the gradient; 0: 512 MiB when the input has at least k dimensions, none below; -1: none (each step evaluates twice)"`
}

// Snapshot configures persistence.
type Snapshot struct {
	// Dir of snapshot files. Default: "./snapshots".
	Dir string `yaml:"dir"`
	// Keep snapshots. Default: 5.
	Keep int `yaml:"keep" min:"1" zero:"refused"`
	// EveryBatches: snapshot after this many batches. Default: 50.
	EveryBatches int `yaml:"every_batches" min:"1" zero:"refused"`
	// Every: snapshot at least this often while learning. Default: 30s.
	Every time.Duration `yaml:"every" min:"0s"`
}

// Output writes every good message's scores to a Kafka topic (package
// output): its projection, residual and novelty, one record per source
// offset.
type Output struct {
	// Topic to write the records to; "" turns the output off. Default: "".
	Topic string `yaml:"topic" doc:"one record per good message: its projection, residual and novelty (docs/api.md); \"\" = off"`
	// Brokers of the output topic's cluster. Default: kafka.brokers.
	Brokers List `yaml:"brokers" shown:"[]" doc:"default: kafka.brokers"`
	// TLS and SASL of the output topic's cluster: when tls.enabled or
	// sasl.mechanism is set, these; otherwise kafka.tls and kafka.sasl.
	TLS  TLS  `yaml:"tls" doc:"the output cluster's own TLS (default: kafka.tls)"`
	SASL SASL `yaml:"sasl" doc:"the output cluster's own SASL (default: kafka.sasl)"`
	// NoveltyQuantile: a record is "novel" when its novelty is at least
	// this; under a stream that does not change, at most a 1 − q share of
	// records is. Default: 0.999.
	NoveltyQuantile float64 `yaml:"novelty_quantile" doc:"novel: novelty ≥ this (at most a 1 − q share of an unchanging stream's records)"`
	// EveryBatches: with a topic, a version is cut at least this often
	// (and snapshot.every_batches otherwise): the records are scored by
	// the newest version, so a stale one scores them worse. Default: 8.
	EveryBatches int `yaml:"every_batches" min:"1" doc:"with a topic, a new version (the one records are scored by) at least every this many batches"`
	// NoveltyWindow: the last held-out rows a version's novelty
	// reference is made of (its residuals on them, computed when it is
	// cut; the rows are kept in memory, never in a model). Default: 1024.
	NoveltyWindow int `yaml:"novelty_window" min:"1" max:"65536" doc:"the last held-out rows each version's residuals are ranked among (≥ 1/(1 − novelty_quantile) − 1; kept in memory: rows × dim × 8 bytes)"`
}

// NATS configures the output side.
type NATS struct {
	// URL of the servers (comma-separated). Default: nats://127.0.0.1:4222.
	URL string `yaml:"url" doc:"a cluster: every server, comma-separated (nats://a:4222,nats://b:4222,nats://c:4222)"`
	// Disabled turns publishing off (snapshots stay local).
	Disabled bool `yaml:"disabled" doc:"true: learn and snapshot locally only"`
	// Prefix of subjects. Default: "streamkpca".
	Prefix string `yaml:"prefix"`
	// AllowPin enables the pin endpoint (<prefix>.<model>.pin), which
	// changes the version every client is served. Grant it to operators
	// only, with NATS permissions on that subject. Default: false.
	AllowPin bool `yaml:"allow_pin" doc:"the pin endpoint (restrict its subject with NATS permissions)"`
	// ObjectBucket, KVBucket: JetStream buckets. Defaults:
	// streamkpca-snapshots, streamkpca-latest.
	ObjectBucket string `yaml:"object_bucket"`
	KVBucket     string `yaml:"kv_bucket"`
	// Keep versions in the object store. Default: 10.
	Keep int `yaml:"keep" min:"1" zero:"refused" doc:"versions kept in the object store"`
	// Replicas: how many servers of a NATS cluster hold each bucket
	// (JetStream replicas, 1–5). Default: 1 (a single server); 3 on a
	// cluster of three or more servers.
	Replicas int `yaml:"replicas" doc:"servers holding each bucket: 3 on a NATS cluster of three or more"`
	// LeaseTTL is the period of the model name's ownership lease (a KV
	// key renewed every third of it): one service publishes a model name
	// at a time, another with the same name stands by and takes over
	// once the lease has not been renewed for this long. Default: 15s.
	LeaseTTL time.Duration `yaml:"lease_ttl" zero:"refused" doc:"one service per model name; another stands by and takes over after this"`
	// Authentication: user/password, token, creds file or nkey seed file.
	User         string `yaml:"user"`
	Password     string `yaml:"password"`
	PasswordFile string `yaml:"password_file"`
	Token        string `yaml:"token"`
	TokenFile    string `yaml:"token_file"`
	CredsFile    string `yaml:"creds_file"`
	NKeyFile     string `yaml:"nkey_file"`
	TLS          TLS    `yaml:"tls"`
}

// HTTP configures the HTTP server.
type HTTP struct {
	// Addr to listen on; "off" disables. Default: "127.0.0.1:8080"
	// (this machine only). An address beyond loopback needs a token, or
	// AllowUnauthenticated.
	Addr string `yaml:"addr" doc:"\"off\" disables; beyond loopback needs a token..."`
	// AllowUnauthenticated lets Addr serve beyond loopback without a
	// token (behind a trusted proxy, say). Default: false.
	AllowUnauthenticated bool `yaml:"allow_unauthenticated" doc:"...or this"`
	// Token, if set, is required as "Authorization: Bearer <token>" on
	// /v1/ endpoints. TokenFile reads it from a file.
	Token     string `yaml:"token" doc:"require \"Authorization: Bearer <token>\" on /v1/"`
	TokenFile string `yaml:"token_file"`
	// ProtectAll puts /metrics, /healthz and /readyz behind the token too.
	// Default: false (open, for probes and scrapers).
	ProtectAll bool `yaml:"protect_all" doc:"true: /metrics and health need the token too"`
	// TLSCertFile and TLSKeyFile (PEM) serve HTTPS instead of HTTP.
	TLSCertFile string `yaml:"tls_cert_file" doc:"PEM; with tls_key_file, serve HTTPS"`
	TLSKeyFile  string `yaml:"tls_key_file"`
	// MaxVectors per project request. Default: 10000.
	MaxVectors int `yaml:"max_vectors" min:"1" zero:"refused"`
	// MaxBodyBytes of a request. Default: 8388608.
	MaxBodyBytes int64 `yaml:"max_body_bytes" min:"1" zero:"refused"`
}

// Log configures logging.
type Log struct {
	// Level: debug, info, warn, error. Default: info.
	Level string `yaml:"level" doc:"debug | info | warn | error"`
	// Format: console or json. Default: console on a terminal, else json.
	Format string `yaml:"format" doc:"console | json; default console on a terminal"`
}

// Default returns the configuration with every default filled in.
func Default() Config {
	var c Config
	c.SetDefaults()
	return c
}

// SetDefaults fills zero fields with their defaults.
func (c *Config) SetDefaults() {
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	defI := func(i *int, v int) {
		if *i == 0 {
			*i = v
		}
	}
	def(&c.Model, "default")
	if len(c.Kafka.Brokers) == 0 {
		c.Kafka.Brokers = List{"localhost:9092"}
	}
	def(&c.Kafka.Topic, "vectors")
	def(&c.Kafka.Group, ingest.DefaultGroupID)
	def(&c.Kafka.Start, "earliest")
	def(&c.Kafka.OffsetOutOfRange, ingest.OutOfRangeEarliest)
	def(&c.Kafka.Format, "json")
	def(&c.Kafka.DeadLetterTopic, c.Kafka.Topic+".dlq")
	if c.Kafka.DeadLetterSpillBytes == 0 {
		c.Kafka.DeadLetterSpillBytes = ingest.DefaultSpillBytes
	}
	defI(&c.Kafka.MaxMessageBytes, ingest.DefaultMaxMessageBytes)
	defI(&c.Kafka.QueueSize, ingest.DefaultQueueSize)
	if c.Kafka.QueueBytes == 0 {
		c.Kafka.QueueBytes = ingest.DefaultQueueBytes
	}
	if c.Kafka.MaxAbs == 0 {
		c.Kafka.MaxAbs = 1e12
	}
	if c.Kafka.FetchMaxWait == 0 {
		c.Kafka.FetchMaxWait = ingest.DefaultFetchMaxWait
	}
	if c.Kafka.SessionTimeout == 0 {
		c.Kafka.SessionTimeout = ingest.DefaultGroupTimeout
	}
	if c.Kafka.RebalanceTimeout == 0 {
		c.Kafka.RebalanceTimeout = ingest.DefaultGroupTimeout
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = 30 * time.Second
	}
	defI(&c.Learner.K, 3) // the service's; the library requires k
	defI(&c.Learner.Batch, 512)
	defI(&c.Learner.Holdout, online.DefaultHoldout)
	def(&c.Learner.LoadShedding, "auto")
	def(&c.Learner.Budget, "stream")
	if c.Learner.MaxModelBytes == 0 {
		c.Learner.MaxModelBytes = 1 << 30
	}
	if c.Learner.TargetLoad == 0 {
		c.Learner.TargetLoad = 0.8
	}
	if c.Learner.Replay == 0 {
		c.Learner.Replay = DefaultReplay
	}
	if c.Learner.ReplayBytes == 0 {
		c.Learner.ReplayBytes = DefaultReplayBytes
	}
	if c.Learner.Linger == 0 {
		c.Learner.Linger = 2 * time.Second
	}
	// Everything the learner defaults itself comes from online: one
	// statement of each default (online.Config.WithDefaults; the fields
	// tagged online:",filled").
	c.Learner.fillFromOnline(c.Learner.Online(c.Model, 0).WithDefaults())
	if c.Learner.CacheBytes == 0 {
		c.Learner.CacheBytes = features.DefaultCacheBytes
	}
	if len(c.Output.Brokers) == 0 {
		c.Output.Brokers = c.Kafka.Brokers
	}
	if c.Output.NoveltyQuantile == 0 {
		c.Output.NoveltyQuantile = 0.999
	}
	defI(&c.Output.NoveltyWindow, 1024)
	defI(&c.Output.EveryBatches, 8)
	def(&c.Snapshot.Dir, "./snapshots")
	defI(&c.Snapshot.Keep, 5)
	defI(&c.Snapshot.EveryBatches, 50)
	if c.Snapshot.Every == 0 {
		c.Snapshot.Every = 30 * time.Second
	}
	def(&c.NATS.URL, "nats://127.0.0.1:4222")
	def(&c.NATS.Prefix, publish.DefaultPrefix)
	def(&c.NATS.ObjectBucket, publish.DefaultObjectBucket)
	def(&c.NATS.KVBucket, publish.DefaultKVBucket)
	defI(&c.NATS.Keep, publish.DefaultKeep)
	defI(&c.NATS.Replicas, 1)
	if c.NATS.LeaseTTL == 0 {
		c.NATS.LeaseTTL = 15 * time.Second
	}
	def(&c.HTTP.Addr, "127.0.0.1:8080")
	defI(&c.HTTP.MaxVectors, 10000)
	if c.HTTP.MaxBodyBytes == 0 {
		c.HTTP.MaxBodyBytes = 8 << 20
	}
	def(&c.Log.Level, "info")
	if c.Cluster.StepTimeout == 0 {
		c.Cluster.StepTimeout = 30 * time.Second
	}
}

// Validate reports every invalid field, each named by its YAML path.
func (c *Config) Validate() error {
	var pb problems
	// Ranges: the fields' min and max tags (an upper bound is where a
	// value cannot be what the user meant and would exhaust memory at the
	// first batch instead of failing here).
	for _, r := range outOfRange(c) {
		pb.bad(r.key, "%v: must be %s %v", r.value, r.rel, r.bound)
	}
	c.validateInput(&pb)
	c.validateLearner(&pb)
	c.validateOutputs(&pb)
	return errors.Join(pb...)
}

// problems gathers Validate's errors, each named by its YAML path.
type problems []error

func (pb *problems) bad(field, format string, a ...any) {
	*pb = append(*pb, fmt.Errorf("%s: "+format, append([]any{field}, a...)...))
}

// name checks a name used in subjects and file names.
func (pb *problems) name(field, v string) {
	for _, r := range v {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			pb.bad(field, "%q: use letters, digits, '-' and '_'", v)
			return
		}
	}
}

// validateInput checks the model's name and the Kafka side.
func (c *Config) validateInput(pb *problems) {
	pb.name("model", c.Model)
	pb.name("nats.prefix", c.NATS.Prefix)
	for i, b := range c.Kafka.Brokers {
		if !strings.Contains(b, ":") {
			pb.bad(fmt.Sprintf("kafka.brokers[%d]", i), "%q: want host:port", b)
		}
	}
	if c.Kafka.Start != "earliest" && c.Kafka.Start != "latest" {
		pb.bad("kafka.start", "%q: want earliest or latest", c.Kafka.Start)
	}
	if c.Kafka.OffsetOutOfRange != ingest.OutOfRangeEarliest && c.Kafka.OffsetOutOfRange != ingest.OutOfRangeFail {
		pb.bad("kafka.offset_out_of_range", "%q: want earliest or fail", c.Kafka.OffsetOutOfRange)
	}
	if f := ingest.Format(c.Kafka.Format); !slices.Contains(ingest.Formats, f) {
		pb.bad("kafka.format", "%q: want one of %v", c.Kafka.Format, ingest.Formats)
	} else if f.Registered() && strings.TrimSpace(c.Kafka.SchemaRegistry.URL) == "" {
		pb.bad("kafka.schema_registry.url", "kafka.format %s reads each message's schema from a Schema Registry: set its URL", c.Kafka.Format)
	}
	if !(c.Kafka.MaxAbs > 0) {
		pb.bad("kafka.max_abs", "%v: must be > 0", c.Kafka.MaxAbs)
	}
	alg := online.Algorithm(c.Learner.Algorithm)
	if alg.TwoView() {
		if f := ingest.Format(c.Kafka.Format); f != ingest.FormatJSON && !f.Registered() {
			pb.bad("kafka.format", "%q: learner.algorithm %s learns from (x, y) pairs, which only json ({\"x\":[...],\"y\":[...]} or {\"x\":[...],\"target\":[...]}) and the Schema Registry formats (kafka.schema_registry.field_y) carry", c.Kafka.Format, c.Learner.Algorithm)
		}
	}
	for field, m := range map[string]string{"kafka.sasl.mechanism": c.Kafka.SASL.Mechanism, "output.sasl.mechanism": c.Output.SASL.Mechanism} {
		switch m {
		case "", "plain", "scram-sha-256", "scram-sha-512":
		default:
			pb.bad(field, "%q: want plain, scram-sha-256 or scram-sha-512", m)
		}
	}
}

// validateLearner checks the learner's settings: the enumerations are
// online's lists, under the YAML names.
func (c *Config) validateLearner(pb *problems) {
	alg, solver := online.Algorithm(c.Learner.Algorithm), online.Solver(c.Learner.Solver)
	// Enumerations: the learner's lists (online), under the YAML names.
	if !slices.Contains(online.Algorithms, alg) {
		pb.bad("learner.algorithm", "%q: want %s", alg, online.OneOf(online.Algorithms))
	}
	if k := c.Learner.KernelSpec(); true {
		if k.Family.HasBandwidth() && k.Bandwidth <= 0 {
			k.Bandwidth = 1 // 0: the median trick; < 0: learner.bandwidth's rule below says so
		}
		if err := k.Validate(); err != nil {
			pb.bad("learner.kernel", "%v", err)
		}
	}
	if c.Learner.Bandwidth < 0 {
		pb.bad("learner.bandwidth", "%v: must be > 0, or 0 for the median trick", c.Learner.Bandwidth)
	}
	if c.Learner.Block < c.Learner.K {
		pb.bad("learner.block", "%d: must be ≥ learner.k (%d)", c.Learner.Block, c.Learner.K)
	}
	if p := online.Precision(c.Learner.Precision); !slices.Contains(online.Precisions, p) {
		pb.bad("learner.precision", "%q: want %s", p, online.OneOf(online.Precisions))
	}
	if p := online.Compute(c.Learner.Compute); !slices.Contains(online.Computes, p) {
		pb.bad("learner.compute", "%q: want %s", p, online.OneOf(online.Computes))
	}
	if p := online.Frequencies(c.Learner.Frequencies); !slices.Contains(online.FrequencyDraws, p) {
		pb.bad("learner.frequencies", "%q: want %s", p, online.OneOf(online.FrequencyDraws))
	}
	if p := online.FeatureSource(c.Learner.Features); !slices.Contains(online.FeatureSources, p) {
		pb.bad("learner.features", "%q: want %s", p, online.OneOf(online.FeatureSources))
	} else if p == online.FeaturesLandmarks && !alg.TakesLandmarks() {
		pb.bad("learner.features", "landmarks: %s takes random features only", alg)
	}
	switch {
	case solver != "" && !slices.Contains(online.Solvers, solver):
		pb.bad("learner.solver", "%q: want %s", solver, online.OneOf(online.Solvers))
	case solver != "" && slices.Contains(online.Algorithms, alg) && !slices.Contains(alg.Solvers(), solver):
		pb.bad("learner.solver", "%s: learner.algorithm %s takes %s (its default first)", solver, alg, online.OneOf(alg.Solvers()))
	case solver == online.SolverCovariance && c.Learner.MaxFeatures > online.MaxCovarianceFeatures:
		pb.bad("learner.max_features", "%d: the covariance solver keeps m² statistics; must be ≤ %d", c.Learner.MaxFeatures, online.MaxCovarianceFeatures)
	}
	if f := online.Forgetting(c.Learner.Forget); !slices.Contains(online.Forgettings, f) {
		pb.bad("learner.forget", "%q: want %s", f, online.OneOf(online.Forgettings))
	}
	if a := c.Learner.FollowAlpha; !(a > 0 && a < 1) {
		pb.bad("learner.follow_alpha", "%v: want a probability in (0, 1), e.g. 0.01", a)
	}
	if c.Learner.LoadShedding != "auto" && c.Learner.LoadShedding != "off" {
		pb.bad("learner.load_shedding", "%q: want auto or off", c.Learner.LoadShedding)
	}
	if c.Learner.Budget != "stream" && c.Learner.Budget != "fixed" {
		pb.bad("learner.budget", "%q: want stream or fixed", c.Learner.Budget)
	}
	if !(c.Learner.TargetLoad > 0) || c.Learner.TargetLoad > 1 {
		pb.bad("learner.target_load", "%v: must be in (0, 1]", c.Learner.TargetLoad)
	}
	if r := c.Learner.Replay; math.IsNaN(r) || math.IsInf(r, 0) || r < 0 && r != -1 {
		pb.bad("learner.replay", "%v: want revisited rows per learned row, > 0, or -1 (off)", r)
	}
	if c.Learner.Holdout < 1 {
		pb.bad("learner.holdout", "%d: must be ≥ 1 (1 holds out nothing)", c.Learner.Holdout)
	}
	if math.IsNaN(c.Learner.Average) || c.Learner.Average > 1 {
		pb.bad("learner.average", "%v: must be in (0, 1], or negative to serve the last iterate", c.Learner.Average)
	}
	if !(c.Learner.Ridge >= 0) || math.IsInf(c.Learner.Ridge, 0) {
		pb.bad("learner.ridge", "%v: must be > 0, or 0 for kcca to choose it on held-out pairs", c.Learner.Ridge)
	}
	if c.Learner.MaxFeatures < c.Learner.Block {
		pb.bad("learner.max_features", "%d: must be ≥ learner.block (%d)", c.Learner.MaxFeatures, c.Learner.Block)
	}
	if c.Learner.Theta0 < 0 || c.Learner.Theta1 < 0 {
		pb.bad("learner.theta0/theta1", "%v/%v: must be ≥ 0 (0 = the algorithm's default)", c.Learner.Theta0, c.Learner.Theta1)
	}
	if c.Learner.Kernel == "linear" && c.Kafka.Dim > 0 && c.Learner.K > c.Kafka.Dim {
		pb.bad("learner.k", "%d: the linear kernel has kafka.dim = %d features; k must be ≤ %d", c.Learner.K, c.Kafka.Dim, c.Kafka.Dim)
	}
}

// validateOutputs checks NATS, HTTP, cluster mode and logging.
func (c *Config) validateOutputs(pb *problems) {
	alg := online.Algorithm(c.Learner.Algorithm)
	if c.NATS.Replicas < 1 || c.NATS.Replicas > 5 {
		pb.bad("nats.replicas", "%d: JetStream holds a bucket on 1 to 5 servers (3 on a cluster of three)", c.NATS.Replicas)
	}
	if c.NATS.LeaseTTL < time.Second {
		pb.bad("nats.lease_ttl", "%v: must be ≥ 1s (a lease renewed more often than every ⅓ s loads the KV bucket for nothing)", c.NATS.LeaseTTL)
	}
	if a := c.HTTP.Addr; a != "off" && c.HTTP.Token == "" && c.HTTP.TokenFile == "" && !c.HTTP.AllowUnauthenticated && !loopback(a) {
		pb.bad("http.addr", "%q serves beyond this machine without a token: set http.token or http.token_file, use a loopback address (127.0.0.1:8080), or set http.allow_unauthenticated: true", a)
	}
	if (c.HTTP.TLSCertFile == "") != (c.HTTP.TLSKeyFile == "") {
		pb.bad("http.tls_cert_file/tls_key_file", "set both or neither")
	}
	if q := c.Output.NoveltyQuantile; !(q > 0 && q < 1) {
		pb.bad("output.novelty_quantile", "%v: want 0 < q < 1", q)
	} else if w := c.Output.NoveltyWindow; c.Output.Topic != "" && float64(w)/float64(w+1) < q {
		pb.bad("output.novelty_window", "%d: a novelty is at most %d/%d, below output.novelty_quantile %v, so no record would ever be novel; use at least %d", w, w, w+1, q, int(math.Ceil(q/(1-q))))
	}
	if c.Output.Topic != "" {
		if c.Output.Topic == c.Kafka.Topic || c.Output.Topic == c.Kafka.DeadLetterTopic {
			pb.bad("output.topic", "%q is kafka.topic or kafka.dead_letter_topic: choose a topic of its own", c.Output.Topic)
		}
		if c.Cluster.Enabled {
			pb.bad("output.topic", "not yet with cluster.enabled: a group's members do not score their partitions yet")
		}
		for i, b := range c.Output.Brokers {
			if !strings.Contains(b, ":") {
				pb.bad(fmt.Sprintf("output.brokers[%d]", i), "%q: want host:port", b)
			}
		}
	}
	if c.Cluster.Enabled {
		switch {
		case c.NATS.Disabled:
			pb.bad("cluster.enabled", "the instances exchange every step over NATS: nats.disabled must be false")
		case alg.TwoView():
			pb.bad("cluster.enabled", "learner.algorithm %s: one model on several instances is built for the one-view algorithms (kpca, gha)", alg)
		case c.Learner.Features != string(online.FeaturesRandom): // before the solver: landmarks imply covariance
			pb.bad("cluster.enabled", "learner.features %s: one model on several instances takes random features (a landmark block is one instance's points)", c.Learner.Features)
		case c.Learner.Solver != string(online.SolverSubspace):
			pb.bad("cluster.enabled", "learner.solver %s: one model on several instances takes the subspace solver", c.Learner.Solver)
		}
		if c.Cluster.StepTimeout <= c.Learner.Linger {
			pb.bad("cluster.step_timeout", "%v: must exceed learner.linger (%v): an instance without data steps every linger", c.Cluster.StepTimeout, c.Learner.Linger)
		}
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		pb.bad("log.level", "%q: want debug, info, warn or error", c.Log.Level)
	}
	switch c.Log.Format {
	case "", "console", "json":
	default:
		pb.bad("log.format", "%q: want console or json", c.Log.Format)
	}
}

// Load reads a YAML file (path "" = none), applies STREAMKPCA_* environment
// overrides from env (os.Environ() form), then the command-line overrides
// sets ("learner.k=5", YAML paths), fills defaults and validates. Unknown
// YAML fields, variables and paths are errors.
//
// List settings (kafka.brokers) take a YAML list or one string of
// comma-separated items ("host:9092" or "a:9092,b:9092").
func Load(path string, env []string, sets ...string) (Config, error) {
	var c Config
	if path != "" {
		f, err := os.Open(path)
		if err != nil {
			return c, fmt.Errorf("configs: %w", err)
		}
		defer f.Close()
		raw, err := io.ReadAll(f)
		if err != nil {
			return c, fmt.Errorf("configs: %w", err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(raw))
		dec.KnownFields(true)
		if err := dec.Decode(&c); err != nil && err.Error() != "EOF" {
			return c, fmt.Errorf("configs: %s: %w", path, err)
		}
		var tree map[string]any
		if yaml.Unmarshal(raw, &tree) == nil {
			for _, field := range noZero {
				if v, ok := lookup(tree, field); ok && isZero(v) {
					return c, fmt.Errorf("configs: %s: %s: 0 is not allowed (leave it out for the default)", path, field)
				}
			}
		}
	}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		for _, field := range noZero {
			if k == envName(field) && isZero(strings.TrimSpace(v)) {
				return c, fmt.Errorf("configs: environment: %s=0: not allowed (unset it for the default)", k)
			}
		}
	}
	for _, kv := range sets {
		k, v, _ := strings.Cut(kv, "=")
		if slices.Contains(noZero, k) && isZero(strings.TrimSpace(v)) {
			return c, fmt.Errorf("configs: flags: --set %s=0: not allowed (leave it out for the default)", k)
		}
	}
	if err := ApplyEnv(&c, env); err != nil {
		return c, err
	}
	if len(sets) > 0 {
		vars, labels := map[string]string{}, map[string]string{}
		for _, kv := range sets {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return c, fmt.Errorf("configs: --set %q: want path=value, e.g. learner.k=5", kv)
			}
			name := envName(k)
			vars[name], labels[name] = v, "--set "+k
		}
		if err := applyVars(&c, vars, labels); err != nil {
			return c, fmt.Errorf("configs: flags: %w", err)
		}
	}
	c.SetDefaults()
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("configs: invalid configuration:\n%w", err)
	}
	return c, nil
}

// DefaultReplay and DefaultReplayBytes are learner.replay's and
// learner.replay_bytes' defaults.
const (
	DefaultReplay      = 3.0
	DefaultReplayBytes = 32 << 20
)

// noZero lists the settings where 0 would mean "the default" but is never
// what a user who writes it means (tagged zero:"refused"): an explicit 0
// is an error, not the default.
var noZero = func() (keys []string) {
	walkSettings(reflect.ValueOf(Config{}), "", func(key string, f reflect.StructField, _ reflect.Value) {
		if f.Tag.Get("zero") == "refused" {
			keys = append(keys, key)
		}
	})
	return keys
}()

// walkSettings calls fn on every setting of v (a Config or a part of
// one) with its YAML path.
func walkSettings(v reflect.Value, prefix string, fn func(key string, f reflect.StructField, v reflect.Value)) {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		key := prefix + strings.Split(f.Tag.Get("yaml"), ",")[0]
		if f.Type.Kind() == reflect.Struct {
			walkSettings(v.Field(i), key+".", fn)
			continue
		}
		fn(key, f, v.Field(i))
	}
}

// rangeError is a setting outside its min or max tag.
type rangeError struct {
	key          string
	value, bound any
	rel          string
}

// outOfRange lists c's settings outside their min and max tags (whole
// numbers, and durations written as durations).
func outOfRange(c *Config) []rangeError {
	var out []rangeError
	walkSettings(reflect.ValueOf(*c), "", func(key string, f reflect.StructField, v reflect.Value) {
		for _, b := range []struct{ tag, rel string }{{"min", "≥"}, {"max", "≤"}} {
			s, ok := f.Tag.Lookup(b.tag)
			if !ok {
				continue
			}
			var x, bound int64
			var shown any
			switch {
			case f.Type == reflect.TypeFor[time.Duration]():
				d, err := time.ParseDuration(s)
				if err != nil {
					panic(fmt.Sprintf("configs: %s: %s tag %q: %v", key, b.tag, s, err)) // a declaration's typo: every test fails
				}
				x, bound, shown = v.Int(), int64(d), d
			case v.CanInt():
				n, err := strconv.ParseInt(s, 10, 64)
				if err != nil {
					panic(fmt.Sprintf("configs: %s: %s tag %q: %v", key, b.tag, s, err))
				}
				x, bound, shown = v.Int(), n, n
			default:
				panic(fmt.Sprintf("configs: %s: a %s tag on a %s", key, b.tag, f.Type))
			}
			if b.tag == "min" && x < bound || b.tag == "max" && x > bound {
				out = append(out, rangeError{key: key, value: v.Interface(), bound: shown, rel: b.rel})
			}
		}
	})
	return out
}

// envName is the environment variable of a YAML path.
func envName(path string) string {
	return "STREAMKPCA_" + strings.ToUpper(strings.ReplaceAll(path, ".", "_"))
}

// lookup finds a dotted path in a decoded YAML tree.
func lookup(tree map[string]any, path string) (any, bool) {
	head, rest, more := strings.Cut(path, ".")
	v, ok := tree[head]
	if !ok || !more {
		return v, ok
	}
	sub, ok := v.(map[string]any)
	if !ok {
		return nil, false
	}
	return lookup(sub, rest)
}

// isZero reports whether a YAML scalar or a variable's text is zero.
func isZero(v any) bool {
	switch x := v.(type) {
	case int:
		return x == 0
	case float64:
		return x == 0
	case string:
		if d, err := time.ParseDuration(x); err == nil {
			return d == 0
		}
		f, err := strconv.ParseFloat(x, 64)
		return err == nil && f == 0
	}
	return false
}

// OtherVariables are the project's STREAMKPCA_ variables that are not
// settings: ApplyEnv leaves them to the code that reads them instead of
// refusing them as unknown settings. STREAMKPCA_NO_AVX512 (online/
// features: leave the AVX-512 kernels out), STREAMKPCA_TOKEN and
// STREAMKPCA_TOKEN_FILE (the Python client's bearer token),
// STREAMKPCA_PYTHON, STREAMKPCA_REQUIRE_PYTHON and STREAMKPCA_FIXTURES
// (the Python client's tests).
var OtherVariables = []string{"STREAMKPCA_NO_AVX512", "STREAMKPCA_TOKEN", "STREAMKPCA_TOKEN_FILE",
	"STREAMKPCA_PYTHON", "STREAMKPCA_REQUIRE_PYTHON", "STREAMKPCA_FIXTURES"}

// ApplyEnv sets fields from STREAMKPCA_<PATH> variables.
func ApplyEnv(c *Config, env []string) error {
	vars := map[string]string{}
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if ok && strings.HasPrefix(k, "STREAMKPCA_") && !slices.Contains(OtherVariables, k) {
			vars[k] = v
		}
	}
	if len(vars) == 0 {
		return nil
	}
	if err := applyVars(c, vars, nil); err != nil {
		return fmt.Errorf("configs: environment: %w", err)
	}
	return nil
}

// applyVars sets fields from STREAMKPCA_<PATH> names; labels, if set,
// name each variable in errors as the user wrote it (a flag).
func applyVars(c *Config, vars, labels map[string]string) error {
	label := func(name string) string {
		if l, ok := labels[name]; ok {
			return l
		}
		return name
	}
	used := map[string]bool{}
	var errs []error
	var walk func(v reflect.Value, prefix string)
	walk = func(v reflect.Value, prefix string) {
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			tag := strings.Split(t.Field(i).Tag.Get("yaml"), ",")[0]
			if tag == "" || tag == "-" {
				continue
			}
			name := prefix + "_" + strings.ToUpper(tag)
			f := v.Field(i)
			if f.Kind() == reflect.Struct {
				walk(f, name)
				continue
			}
			s, ok := vars[name]
			if !ok {
				continue
			}
			used[name] = true
			if err := setField(f, s); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %w", label(name), s, err))
			}
		}
	}
	walk(reflect.ValueOf(c).Elem(), "STREAMKPCA")
	for k := range vars {
		if !used[k] {
			errs = append(errs, fmt.Errorf("%s: no such setting", label(k)))
		}
	}
	return errors.Join(errs...)
}

func setField(f reflect.Value, s string) error {
	if f.Type() == reflect.TypeOf(time.Duration(0)) {
		d, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		f.SetInt(int64(d))
		return nil
	}
	switch f.Kind() {
	case reflect.String:
		f.SetString(s)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return err
		}
		f.SetBool(b)
	case reflect.Int, reflect.Int64:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return err
		}
		f.SetInt(n)
	case reflect.Uint64:
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return err
		}
		f.SetUint(n)
	case reflect.Float64:
		x, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return err
		}
		f.SetFloat(x)
	case reflect.Slice:
		parts := strings.Split(s, ",")
		for i := range parts {
			parts[i] = strings.TrimSpace(parts[i])
		}
		if f.Type().Elem().Kind() == reflect.Float64 {
			v := make([]float64, len(parts))
			for i, p := range parts {
				x, err := strconv.ParseFloat(p, 64)
				if err != nil {
					return err
				}
				v[i] = x
			}
			f.Set(reflect.ValueOf(v))
			return nil
		}
		f.Set(reflect.ValueOf(parts))
	default:
		return fmt.Errorf("unsupported kind %s", f.Kind())
	}
	return nil
}

// loopback reports whether the listen address addr (host:port) accepts
// connections from this machine only.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Secret returns inline if set, else the trimmed contents of file. field
// names the setting in errors (e.g. "http.token"; the file setting is
// field+"_file"). A file that cannot be read, or holds only whitespace, is
// an error: an unusable secret must stop start-up, never turn
// authentication off.
func Secret(field, inline, file string) (string, error) {
	if inline != "" || file == "" {
		return inline, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("configs: %s_file: %w", field, err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", fmt.Errorf("configs: %s_file: %s is empty; put the secret in it, or unset %s_file", field, file, field)
	}
	return s, nil
}

// Decoder is the messages' decoder these settings describe, for a model
// of input dimensions dim and dimY (0: the first messages fix them;
// kafka.dim when dim is 0) learning from x alone when oneView: the
// format, its bounds and, for the Schema Registry formats, the registry
// and fields. A new format changes ingest and these settings only.
func (k Kafka) Decoder(dim, dimY int, oneView bool) (*ingest.Decoder, error) {
	reg, err := k.Registry()
	if err != nil {
		return nil, err
	}
	if dim == 0 {
		dim = k.Dim
	}
	return &ingest.Decoder{Format: ingest.Format(k.Format), Dim: dim, DimY: dimY, MaxBytes: k.MaxMessageBytes, MaxAbs: k.MaxAbs,
		OneView: oneView, Registry: reg, Field: k.SchemaRegistry.Field, FieldY: k.SchemaRegistry.FieldY}, nil
}

// Registry is the Schema Registry these settings name (nil when
// kafka.format needs none): the password read from its file, the TLS
// settings loaded; an unusable secret is an error.
func (k Kafka) Registry() (*ingest.Registry, error) {
	if !ingest.Format(k.Format).Registered() {
		return nil, nil
	}
	r := k.SchemaRegistry
	pass, err := Secret("kafka.schema_registry.password", r.Password, r.PasswordFile)
	if err != nil {
		return nil, err
	}
	tc, err := r.TLS.Config()
	if err != nil {
		return nil, fmt.Errorf("kafka.schema_registry.tls: %w", err)
	}
	var urls []string
	for u := range strings.SplitSeq(r.URL, ",") {
		if u = strings.TrimSpace(u); u != "" {
			urls = append(urls, u)
		}
	}
	return ingest.NewRegistry(ingest.RegistryConfig{URLs: urls, User: r.User, Password: pass, TLS: tc})
}

// OutputSecurity is the output topic's cluster's TLS and SASL settings
// and the name of their section: output.tls and output.sasl when either
// is set, kafka.tls and kafka.sasl otherwise.
func (c *Config) OutputSecurity() (TLS, SASL, string) {
	if c.Output.TLS.Enabled || c.Output.SASL.Mechanism != "" {
		return c.Output.TLS, c.Output.SASL, "output"
	}
	return c.Kafka.TLS, c.Kafka.SASL, "kafka"
}

// ConnectConfig is how publish.Connect reaches NATS with these settings:
// the password and token read from their files, the TLS settings loaded.
func (n NATS) ConnectConfig() (publish.ConnectConfig, error) {
	pass, err := Secret("nats.password", n.Password, n.PasswordFile)
	if err != nil {
		return publish.ConnectConfig{}, err
	}
	tok, err := Secret("nats.token", n.Token, n.TokenFile)
	if err != nil {
		return publish.ConnectConfig{}, err
	}
	tc, err := n.TLS.Config()
	if err != nil {
		return publish.ConnectConfig{}, err
	}
	return publish.ConnectConfig{URL: n.URL, User: n.User, Password: pass, Token: tok, CredsFile: n.CredsFile, NKeyFile: n.NKeyFile, TLS: tc}, nil
}

// List is a list setting that also takes one comma-separated string in
// YAML: `brokers: 127.0.0.1:9092` is a list of one, not an error.
type List []string

// UnmarshalYAML takes a sequence, or a scalar split at commas.
func (l *List) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*l = nil
		for _, item := range strings.Split(n.Value, ",") {
			if item = strings.TrimSpace(item); item != "" {
				*l = append(*l, item)
			}
		}
		return nil
	}
	var items []string
	if err := n.Decode(&items); err != nil {
		return fmt.Errorf("line %d: want a list of strings ([a, b], or \"a,b\"): %w", n.Line, err)
	}
	*l = items
	return nil
}
