package pipeline

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamkpca/streamkpca/ingest"
)

// Metrics are the service's Prometheus metrics (names in docs/operations.md).
type Metrics struct {
	// reg is the registry they are in, served on /metrics.
	reg             *prometheus.Registry
	Samples         prometheus.Counter
	Batches         prometheus.Counter
	Rejected        prometheus.Counter
	Revisited       prometheus.Counter
	ReplaySeconds   prometheus.Counter
	BadMessages     *prometheus.CounterVec
	Duplicates      prometheus.Counter
	OffsetGaps      *prometheus.CounterVec
	DeletedUnread   prometheus.Counter
	BatchSeconds    prometheus.Histogram
	Features        prometheus.Gauge
	Budget          prometheus.Gauge
	Members         prometheus.Gauge
	ClusterAside    prometheus.Counter
	Version         prometheus.Gauge
	Snapshots       prometheus.Counter
	SnapshotErrors  prometheus.Counter
	Publishes       prometheus.Counter
	PublishErrors   prometheus.Counter
	DeadLetterErrs  prometheus.Counter
	Published       prometheus.Gauge
	LeaseHeld       prometheus.Gauge
	LeaseChanges    prometheus.Counter
	Served          prometheus.GaugeFunc // set by New: it reads the served (pinned or newest) version
	Eigenvalues     *prometheus.GaugeVec
	Quality         prometheus.Gauge
	Shed            prometheus.Counter
	LearnedFraction prometheus.Gauge
	Behind          prometheus.Gauge
	Changes         prometheus.Counter
	Switches        prometheus.Counter
	Rollbacks       prometheus.Counter
	Fit             prometheus.Gauge
	FitChallenger   prometheus.Gauge
	Evidence        prometheus.Gauge
	Requests        *prometheus.CounterVec
	RequestSeconds  *prometheus.HistogramVec
	OutRecords      prometheus.Counter
	OutErrors       prometheus.Counter
	OutNovel        prometheus.Counter
	OutPending      prometheus.Gauge
}

func newMetrics(reg *prometheus.Registry) *Metrics {
	m := &Metrics{
		reg:             reg,
		Samples:         prometheus.NewCounter(prometheus.CounterOpts{Name: "streamkpca_samples_learned_total", Help: "Samples passed to the learner."}),
		Batches:         prometheus.NewCounter(prometheus.CounterOpts{Name: "streamkpca_batches_total", Help: "Mini-batches learned."}),
		Revisited:       prometheus.NewCounter(prometheus.CounterOpts{Name: "streamkpca_replayed_rows_total", Help: "Rows learned again from the window of recent learned rows while the stream left the learner idle (learner.replay); not counted in streamkpca_samples_learned_total."}),
		ReplaySeconds:   prometheus.NewCounter(prometheus.CounterOpts{Name: "streamkpca_replay_seconds_total", Help: "Seconds the loop spent learning revisited rows (learner.replay)."}),
		Rejected:        prometheus.NewCounter(prometheus.CounterOpts{Name: "streamkpca_batches_rejected_total", Help: "Mini-batches refused by the divergence guard."}),
		BadMessages:     prometheus.NewCounterVec(prometheus.CounterOpts{Name: "streamkpca_bad_messages_total", Help: "Messages refused and dead-lettered, by reason."}, []string{"reason"}),
		Duplicates:      prometheus.NewCounter(prometheus.CounterOpts{Name: "streamkpca_duplicate_messages_total", Help: "Messages dropped because their offset was already consumed (after a rebalance)."}),
		OffsetGaps:      prometheus.NewCounterVec(prometheus.CounterOpts{Name: "streamkpca_kafka_offset_gaps_total", Help: "Partitions found with the model's next offset out of their range, by kind: past_end (the topic was deleted and created again, or truncated), deleted (retention removed messages not yet read). kafka.offset_out_of_range says what follows."}, []string{"kind"}),
		DeletedUnread:   prometheus.NewCounter(prometheus.CounterOpts{Name: "streamkpca_kafka_messages_deleted_unread_total", Help: "Messages removed from Kafka (retention) before the model read them: lost to the model."}),
		BatchSeconds:    prometheus.NewHistogram(prometheus.HistogramOpts{Name: "streamkpca_batch_seconds", Help: "Time to learn one mini-batch.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}),
		Features:        prometheus.NewGauge(prometheus.GaugeOpts{Name: "streamkpca_features", Help: "Random features in the model."}),
		Budget:          prometheus.NewGauge(prometheus.GaugeOpts{Name: "streamkpca_feature_budget", Help: "The feature budget: learner.max_features, raised while the stream leaves the learner idle (learner.budget: stream)."}),
		Members:         prometheus.NewGauge(prometheus.GaugeOpts{Name: "streamkpca_cluster_members", Help: "Cluster mode: members of the group this instance steps with (0: none at the moment)."}),
		ClusterAside:    prometheus.NewCounter(prometheus.CounterOpts{Name: "streamkpca_cluster_left_total", Help: "Cluster mode: times this member left the consumer group because NATS did not answer it after a failed step (the others take its partitions; it rejoins once NATS answers)."}),
		Version:         prometheus.NewGauge(prometheus.GaugeOpts{Name: "streamkpca_model_version", Help: "Version (step) of the newest persisted snapshot."}),
		Snapshots:       prometheus.NewCounter(prometheus.CounterOpts{Name: "streamkpca_snapshots_total", Help: "Snapshots persisted."}),
		SnapshotErrors:  prometheus.NewCounter(prometheus.CounterOpts{Name: "streamkpca_snapshot_errors_total", Help: "Snapshot writes that failed (retried)."}),
		Publishes:       prometheus.NewCounter(prometheus.CounterOpts{Name: "streamkpca_publishes_total", Help: "Versions published on NATS."}),
		PublishErrors:   prometheus.NewCounter(prometheus.CounterOpts{Name: "streamkpca_publish_errors_total", Help: "Publishes that failed (retried)."}),
		DeadLetterErrs:  prometheus.NewCounter(prometheus.CounterOpts{Name: "streamkpca_dead_letter_errors_total", Help: "Dead letters whose write failed (each attempt; they are written again until stored, and snapshots wait)."}),
		Published:       prometheus.NewGauge(prometheus.GaugeOpts{Name: "streamkpca_published_version", Help: "Newest version published on NATS (0 before the first)."}),
		LeaseHeld:       prometheus.NewGauge(prometheus.GaugeOpts{Name: "streamkpca_lease_held", Help: "1 while this service owns the model name and publishes it, 0 while another live service does and this one stands by (nats.lease_ttl)."}),
		LeaseChanges:    prometheus.NewCounter(prometheus.CounterOpts{Name: "streamkpca_lease_changes_total", Help: "Times this service lost the model name's lease or took it over after having stood by."}),
		Eigenvalues:     prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "streamkpca_eigenvalue", Help: "The learner's eigenvalue estimates at the newest snapshot, by component (0-based)."}, []string{"component"}),
		Quality:         prometheus.NewGauge(prometheus.GaugeOpts{Name: "streamkpca_quality_score", Help: "Held-out score of the served model on its own stream (learner.holdout): kpca/gha the share of the kernel's variance its k functions capture, kcca/ksir the sum of the held-out correlations, ksvd of the singular values."}),
		Shed:            prometheus.NewCounter(prometheus.CounterOpts{Name: "streamkpca_messages_shed_total", Help: "Messages not learned to keep up with the stream (learner.load_shedding): their offsets are covered, they are not dead-lettered."}),
		LearnedFraction: prometheus.NewGauge(prometheus.GaugeOpts{Name: "streamkpca_learned_fraction", Help: "Fraction of the stream's messages being learned now (1: all; below: load shedding keeps lag bounded)."}),
		Behind:          prometheus.NewGauge(prometheus.GaugeOpts{Name: "streamkpca_falling_behind", Help: "1 while the lag grows whatever load shedding sheds: scoring every message (output.topic) or reading alone takes more than learner.target_load."}),
		Changes:         prometheus.NewCounter(prometheus.CounterOpts{Name: "streamkpca_changes_detected_total", Help: "Changes of the stream the held-out score's detector found (each restarts the model, or starts a two-view model's challenger with learner.forget follow; none with off)."}),
		Switches:        prometheus.NewCounter(prometheus.CounterOpts{Name: "streamkpca_model_switches_total", Help: "Times a learner of the recent stream replaced the model because a sequential test at learner.follow_alpha found it fits held-out messages better (learner.forget: follow): gradual change followed."}),
		Rollbacks:       prometheus.NewCounter(prometheus.CounterOpts{Name: "streamkpca_model_rollbacks_total", Help: "One view, learner.forget follow: candidates withdrawn without replacing the model (a challenger that won the scouts' test but did not fit better than the model in time; the model stayed served)."}),
		Fit:             prometheus.NewGauge(prometheus.GaugeOpts{Name: "streamkpca_fit_score", Help: "learner.forget follow: the mean held-out share (one view: of the kernel variance captured, in the test's reference space) of the shadow, or of the model while a candidate is on trial; two views: the mean standardised score of the pairs, an estimate of the sum of the held-out canonical correlations (online/followpair.go). Not set before the first figure."}),
		FitChallenger:   prometheus.NewGauge(prometheus.GaugeOpts{Name: "streamkpca_fit_score_challenger", Help: "learner.forget follow: the same figure for the challenger, or for the candidate on trial, beside streamkpca_fit_score."}),
		Evidence:        prometheus.NewGauge(prometheus.GaugeOpts{Name: "streamkpca_follow_evidence", Help: "One view, learner.forget follow: the current test's evidence (its betting wealth) that the challenger, or the candidate, fits better; the test rejects at 1/level."}),
		Requests:        prometheus.NewCounterVec(prometheus.CounterOpts{Name: "streamkpca_http_requests_total", Help: "HTTP requests, by endpoint and status code."}, []string{"endpoint", "code"}),
		RequestSeconds:  prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "streamkpca_http_request_seconds", Help: "HTTP request latency, by endpoint.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}, []string{"endpoint"}),
		OutRecords:      prometheus.NewCounter(prometheus.CounterOpts{Name: "streamkpca_output_records_total", Help: "Records stored on output.topic (one per good message; written again after a restart are counted again)."}),
		OutErrors:       prometheus.NewCounter(prometheus.CounterOpts{Name: "streamkpca_output_write_errors_total", Help: "Failed writes to output.topic (each attempt; the records are written again until stored, and learning waits)."}),
		OutNovel:        prometheus.NewCounter(prometheus.CounterOpts{Name: "streamkpca_output_novel_total", Help: "Records stored on output.topic with novel true (novelty ≥ output.novelty_quantile)."}),
		OutPending:      prometheus.NewGauge(prometheus.GaugeOpts{Name: "streamkpca_output_pending_records", Help: "Good messages handled whose records are not yet stored on output.topic."}),
	}
	m.LearnedFraction.Set(1)
	reg.MustRegister(m.Samples, m.Batches, m.Rejected, m.Revisited, m.ReplaySeconds, m.BadMessages, m.Duplicates, m.OffsetGaps, m.DeletedUnread, m.BatchSeconds, m.Features, m.Budget,
		m.Members, m.ClusterAside, m.Version, m.Snapshots, m.SnapshotErrors, m.Publishes, m.PublishErrors, m.DeadLetterErrs,
		m.Published, m.LeaseHeld, m.LeaseChanges, m.Eigenvalues, m.Quality, m.Changes, m.Switches, m.Rollbacks, m.Fit, m.FitChallenger, m.Evidence, m.Shed, m.LearnedFraction, m.Behind, m.Requests, m.RequestSeconds,
		m.OutRecords, m.OutErrors, m.OutNovel, m.OutPending)
	for _, k := range []string{ingest.GapPastEnd, ingest.GapDeleted} {
		m.OffsetGaps.WithLabelValues(k)
	}
	for _, r := range []string{"empty", "oversized", "malformed", "dimension", "non_finite", "out_of_range", "domain"} {
		m.BadMessages.WithLabelValues(r)
	}
	return m
}

// instrumentAPI counts and times the /v1/ requests by endpoint (project,
// snapshot, info, models, openapi, other) and status code.
func (m *Metrics) instrumentAPI(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		h.ServeHTTP(sw, r)
		ep := endpointOf(r.URL.Path)
		m.Requests.WithLabelValues(ep, strconv.Itoa(sw.code)).Inc()
		m.RequestSeconds.WithLabelValues(ep).Observe(time.Since(start).Seconds())
	})
}

func endpointOf(path string) string {
	switch {
	case path == "/v1/models":
		return "models"
	case path == "/v1/openapi.yaml":
		return "openapi"
	case strings.HasPrefix(path, "/v1/models/") && strings.HasSuffix(path, "/project"):
		return "project"
	case strings.HasPrefix(path, "/v1/models/") && strings.HasSuffix(path, "/snapshot"):
		return "snapshot"
	case strings.HasPrefix(path, "/v1/models/") && strings.Count(path, "/") == 3:
		return "info"
	}
	return "other"
}

// statusWriter remembers the status code written.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (s *statusWriter) WriteHeader(code int) {
	s.code = code
	s.ResponseWriter.WriteHeader(code)
}

// partitionLags exports streamkpca_consumer_partition_lag{partition}: the
// last known lag of each partition this instance owns now (a partition
// revoked by a rebalance disappears). The unlabelled
// streamkpca_consumer_lag is their sum plus the messages fetched and not
// yet learned.
// Its labels are kafka_exporter's (consumergroup, topic, partition), so
// that dashboards and alerts written for it apply.
type partitionLags struct {
	p    *Pipeline
	desc *prometheus.Desc
}

func newPartitionLags(p *Pipeline) partitionLags {
	return partitionLags{p, prometheus.NewDesc("streamkpca_consumer_partition_lag",
		"Messages behind the end of each partition this instance owns (last fetch).", []string{"partition"},
		prometheus.Labels{"topic": p.cfg.Kafka.Topic, "consumergroup": p.cfg.Kafka.Group})}
}

func (c partitionLags) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c partitionLags) Collect(ch chan<- prometheus.Metric) {
	src, ok := c.p.in.src.(interface{ PartitionLags() map[int]int64 })
	if !ok {
		return
	}
	for part, lag := range src.PartitionLags() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(lag), strconv.Itoa(part))
	}
}
