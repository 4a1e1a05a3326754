package pipeline

import (
	"fmt"
	"os"
	"runtime/debug"

	"github.com/rs/zerolog"

	"github.com/streamkpca/streamkpca/configs"
	"github.com/streamkpca/streamkpca/features"
	"github.com/streamkpca/streamkpca/ingest"
	"github.com/streamkpca/streamkpca/online"
	"github.com/streamkpca/streamkpca/publish"
	"github.com/streamkpca/streamkpca/snapshot"
)

// memPlan is what the service holds besides the learner and the Kafka
// queue, by part: the served model's generated blocks
// (snapshot.ModelOptions.CacheBytes), the bytes of the versions held by
// download requests (publish.StoreVersions.HoldBytes) and each cached
// version's generated blocks a view (publish.StoreVersions.CacheBytes).
// Zero: the part's default.
type memPlan struct {
	servedCache, versionHold, versionCache int64
}

// servedCacheBytes is the served model's block cache without a
// container limit (snapshot.ModelOptions' default).
const servedCacheBytes = snapshot.DefaultModelCacheBytes

// memoryOverhead is what the plan leaves the process outside the parts
// it counts (the runtime, goroutines' stacks, connections' buffers,
// HTTP and NATS), of a container's limit lim: a sixteenth, at least 16
// MiB.
func memoryOverhead(lim int64) int64 { return max(16<<20, lim/16) }

// fitMemory sizes the service below a container's memory limit lim
// (bytes, read from src; 0: none). The Go runtime's soft limit is set to
// 90% of it, B (setLimit, unless GOMEMLIMIT is set), and B is shared out
// among everything the service holds, the bounds at their defaults
// lowered to:
//
//   - kafka.queue_bytes B/16 (fetched messages, and their parsed values
//     waiting for the learner: twice that);
//   - learner.cache_bytes B/8, and the served model's block cache as
//     much;
//   - learner.keep_bytes B/16;
//   - learner.replay_bytes B/32 (the window of recent rows replayed);
//   - the versions downloads hold B/16, and the versions cache's blocks
//     B/16 (4 versions, each view);
//   - learner.max_model_bytes what is left after those and
//     memoryOverhead: about half the limit. It bounds the learner
//     (online.KPCA.MemoryBytes: coefficients, kept features, cached
//     blocks, following's learners) and the copies of its coefficients
//     the service keeps (serviceCopies).
//
// A bound configured above the limit is refused, naming both figures;
// so is a configuration whose parts add up past the limit, naming them.
func fitMemory(c *configs.Config, lim int64, src string, log zerolog.Logger, setLimit func(int64) int64) (memPlan, error) {
	var plan memPlan
	if lim <= 0 {
		return plan, nil
	}
	l := &c.Learner
	for _, b := range []struct {
		name string
		v    int64
	}{{"learner.max_model_bytes", l.MaxModelBytes}, {"learner.cache_bytes", l.CacheBytes}, {"learner.keep_bytes", l.KeepBytes}, {"kafka.queue_bytes", c.Kafka.QueueBytes}} {
		if b.v > lim && !isDefault(b.name, b.v) {
			return plan, fmt.Errorf("pipeline: %s is %d bytes, above the container's memory limit of %d bytes (%s): the service would be killed before it reached it; set it to at most about half the limit, or leave it out for a size that fits",
				b.name, b.v, lim, src)
		}
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		setLimit(lim / 10 * 9)
	}
	b := lim / 10 * 9
	if c.Kafka.QueueBytes == ingest.DefaultQueueBytes && c.Kafka.QueueBytes > b/16 {
		c.Kafka.QueueBytes = b / 16
	}
	if l.CacheBytes == features.DefaultCacheBytes && l.CacheBytes > b/8 {
		l.CacheBytes = b / 8
	}
	if l.KeepBytes == 0 && features.DefaultKeepBytes > b/16 {
		l.KeepBytes = b / 16
	}
	if l.ReplayBytes == configs.DefaultReplayBytes && l.ReplayBytes > b/32 {
		l.ReplayBytes = b / 32
	}
	replay := int64(0)
	if l.Replay > 0 {
		replay = l.ReplayBytes
	}
	views := int64(1)
	if online.Algorithm(l.Algorithm).TwoView() {
		views = 2
	}
	plan = memPlan{servedCache: min(max(l.CacheBytes, 1), servedCacheBytes), versionHold: min(b/16, publish.DefaultHoldBytes),
		versionCache: max(1, min(b/16/publish.VersionCacheN/views, publish.VersionCacheBytes))}
	fixed := memoryOverhead(lim) + 2*c.Kafka.QueueBytes + plan.servedCache*views + plan.versionHold + publish.VersionCacheN*views*plan.versionCache + replay
	if l.MaxModelBytes == defaultMaxModelBytes && l.MaxModelBytes > b-fixed {
		l.MaxModelBytes = max(b-fixed, 1<<20)
	}
	if err := fitFeatures(l, views, lim, src, log); err != nil {
		return plan, err
	}
	if total := fixed + l.MaxModelBytes; total > lim {
		return plan, fmt.Errorf("pipeline: the service's memory adds up to %d bytes, above the container's memory limit of %d bytes (%s): learner.max_model_bytes %d, twice kafka.queue_bytes %d, learner.replay_bytes %d, the served and stored versions' caches %d and %d for the process itself; lower the settings named, or leave them out for sizes that fit",
			total, lim, src, l.MaxModelBytes, 2*c.Kafka.QueueBytes, replay, plan.servedCache*views+plan.versionHold+publish.VersionCacheN*views*plan.versionCache, memoryOverhead(lim))
	}
	log.Info().Int64("limit_bytes", lim).Str("from", src).Int64("max_model_bytes", l.MaxModelBytes).
		Int64("cache_bytes", l.CacheBytes).Int64("keep_bytes", l.KeepBytes).Int64("queue_bytes", c.Kafka.QueueBytes).
		Int64("served_cache_bytes", plan.servedCache).Int64("versions_hold_bytes", plan.versionHold).
		Bool("runtime_limit_set", os.Getenv("GOMEMLIMIT") == "").
		Msg("sized below the container's memory limit")
	return plan, nil
}

// fitFeatures checks the feature budget the learner starts with against
// learner.max_model_bytes under a container's limit: its coefficients
// and working copies (online.ModelBytes, per view) and the service's
// copies of them (serviceCopies). A default max_features that does not
// fit is lowered to whole blocks that do, as budget growth would stop
// there (a value equal to the default counts as the default, as for the
// other bounds: isDefault); one set by hand is refused, naming the
// figure that fits. The
// covariance solver's statistics are sized by its own cap
// (online.MaxCovarianceFeatures) and are not checked here.
func fitFeatures(l *configs.Learner, views, lim int64, src string, log zerolog.Logger) error {
	oc := l.Online("", 0).WithDefaults()
	if oc.Solver == online.SolverCovariance || oc.Features == online.FeaturesLandmarks {
		return nil
	}
	f, block := oc.MaxFeatures, oc.BlockSize
	perFeature := (1 + serviceCopies) * online.ModelBytes(1, oc.Columns()) * views
	if int64(f)*perFeature <= l.MaxModelBytes {
		return nil
	}
	fits := int(l.MaxModelBytes/perFeature) / block * block
	if (l.MaxFeatures == 0 || l.MaxFeatures == online.DefaultMaxFeatures) && fits >= block {
		l.MaxFeatures = fits
		log.Warn().Int("max_features", fits).Int("k", l.K).Int64("max_model_bytes", l.MaxModelBytes).Int64("limit_bytes", lim).
			Msg("learner.max_features lowered to what the container's memory limit holds (the coefficients and the service's copies of them)")
		return nil
	}
	return fmt.Errorf("pipeline: learner.max_features %d at k = %d needs about %d bytes (the coefficients, their working copies and the service's %d copies of them), above learner.max_model_bytes %d under the container's memory limit of %d bytes (%s): set learner.max_features to at most %d, or lower learner.k, or raise the limit",
		f, l.K, int64(f)*perFeature, serviceCopies, l.MaxModelBytes, lim, src, fits)
}

// serviceCopies is how many copies of the learner's coefficients
// (ModelBytes: about 32·k bytes a feature with their working copies) the
// service holds besides the learner's own, counted against
// learner.max_model_bytes when the budget grows: the last cut (its
// coefficients and state: averaged iterates, following's candidate), its
// published bytes, the previous cut until the served model moves on,
// and up to publish.VersionCacheN stored versions (their bytes and
// coefficients) requested over HTTP or NATS.
const serviceCopies = 4

// defaultMaxModelBytes is configs' default learner.max_model_bytes.
const defaultMaxModelBytes = 1 << 30

// isDefault reports whether v is the default of the setting name (a
// default above a container's limit is lowered, not refused).
func isDefault(name string, v int64) bool {
	switch name {
	case "learner.max_model_bytes":
		return v == defaultMaxModelBytes
	case "learner.cache_bytes":
		return v == features.DefaultCacheBytes
	case "kafka.queue_bytes":
		return v == ingest.DefaultQueueBytes
	}
	return v == 0
}

// setMemoryLimit is the runtime's soft memory limit (a variable for
// tests).
var setMemoryLimit = debug.SetMemoryLimit
