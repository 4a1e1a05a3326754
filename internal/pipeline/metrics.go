package pipeline

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the service's Prometheus metrics (names in README).
type Metrics struct {
	Samples        prometheus.Counter
	Batches        prometheus.Counter
	Rejected       prometheus.Counter
	BadMessages    *prometheus.CounterVec
	Duplicates     prometheus.Counter
	BatchSeconds   prometheus.Histogram
	Features       prometheus.Gauge
	Version        prometheus.Gauge
	Snapshots      prometheus.Counter
	SnapshotErrors prometheus.Counter
	Publishes      prometheus.Counter
	PublishErrors  prometheus.Counter
	DeadLetterErrs prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Samples:        prometheus.NewCounter(prometheus.CounterOpts{Name: "streamkpca_samples_learned_total", Help: "Samples passed to the learner."}),
		Batches:        prometheus.NewCounter(prometheus.CounterOpts{Name: "streamkpca_batches_total", Help: "Mini-batches learned."}),
		Rejected:       prometheus.NewCounter(prometheus.CounterOpts{Name: "streamkpca_batches_rejected_total", Help: "Mini-batches refused by the divergence guard."}),
		BadMessages:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: "streamkpca_bad_messages_total", Help: "Messages refused and dead-lettered, by reason."}, []string{"reason"}),
		Duplicates:     prometheus.NewCounter(prometheus.CounterOpts{Name: "streamkpca_duplicate_messages_total", Help: "Messages dropped because their offset was already consumed (after a rebalance)."}),
		BatchSeconds:   prometheus.NewHistogram(prometheus.HistogramOpts{Name: "streamkpca_batch_seconds", Help: "Time to learn one mini-batch.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}),
		Features:       prometheus.NewGauge(prometheus.GaugeOpts{Name: "streamkpca_features", Help: "Random features in the model."}),
		Version:        prometheus.NewGauge(prometheus.GaugeOpts{Name: "streamkpca_model_version", Help: "Version (step) of the newest persisted snapshot."}),
		Snapshots:      prometheus.NewCounter(prometheus.CounterOpts{Name: "streamkpca_snapshots_total", Help: "Snapshots persisted."}),
		SnapshotErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "streamkpca_snapshot_errors_total", Help: "Snapshot writes that failed (retried)."}),
		Publishes:      prometheus.NewCounter(prometheus.CounterOpts{Name: "streamkpca_publishes_total", Help: "Versions published on NATS."}),
		PublishErrors:  prometheus.NewCounter(prometheus.CounterOpts{Name: "streamkpca_publish_errors_total", Help: "Publishes that failed (retried)."}),
		DeadLetterErrs: prometheus.NewCounter(prometheus.CounterOpts{Name: "streamkpca_dead_letter_errors_total", Help: "Dead-letter writes that failed."}),
	}
	reg.MustRegister(m.Samples, m.Batches, m.Rejected, m.BadMessages, m.Duplicates, m.BatchSeconds, m.Features,
		m.Version, m.Snapshots, m.SnapshotErrors, m.Publishes, m.PublishErrors, m.DeadLetterErrs)
	for _, r := range []string{"empty", "oversized", "malformed", "dimension", "non_finite", "domain"} {
		m.BadMessages.WithLabelValues(r)
	}
	return m
}
