package pipeline

import (
	"fmt"
	"os"
	"runtime/debug"

	"github.com/rs/zerolog"

	"github.com/streamkpca/streamkpca/configs"
	"github.com/streamkpca/streamkpca/features"
)

// fitMemory sizes the service below a container's memory limit lim
// (bytes, read from src; 0: none): the Go runtime's soft limit at 90% of
// it (setLimit, unless GOMEMLIMIT is set), and the learner's bounds —
// learner.max_model_bytes to half of it, cache_bytes and keep_bytes to
// an eighth each — where they are at their defaults. A bound configured
// above the limit is refused, naming both figures: the service would be
// killed at the limit before it reached its bound.
func fitMemory(c *configs.Config, lim int64, src string, log zerolog.Logger, setLimit func(int64) int64) error {
	if lim <= 0 {
		return nil
	}
	l := &c.Learner
	for _, b := range []struct {
		name string
		v    int64
	}{{"learner.max_model_bytes", l.MaxModelBytes}, {"learner.cache_bytes", l.CacheBytes}, {"learner.keep_bytes", l.KeepBytes}} {
		if b.v > lim && !isDefault(b.name, b.v) {
			return fmt.Errorf("pipeline: %s is %d bytes, above the container's memory limit of %d bytes (%s): the service would be killed before it reached it; set it to at most about half the limit, or leave it out for a size that fits",
				b.name, b.v, lim, src)
		}
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		setLimit(lim / 10 * 9)
	}
	if l.MaxModelBytes == defaultMaxModelBytes && l.MaxModelBytes > lim/2 {
		l.MaxModelBytes = lim / 2
	}
	if l.CacheBytes == features.DefaultCacheBytes && l.CacheBytes > lim/8 {
		l.CacheBytes = lim / 8
	}
	if l.KeepBytes == 0 && features.DefaultKeepBytes > lim/8 {
		l.KeepBytes = lim / 8
	}
	log.Info().Int64("limit_bytes", lim).Str("from", src).Int64("max_model_bytes", l.MaxModelBytes).
		Int64("cache_bytes", l.CacheBytes).Int64("keep_bytes", l.KeepBytes).Bool("runtime_limit_set", os.Getenv("GOMEMLIMIT") == "").
		Msg("sized below the container's memory limit")
	return nil
}

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
	}
	return v == 0
}

// setMemoryLimit is the runtime's soft memory limit (a variable for
// tests).
var setMemoryLimit = debug.SetMemoryLimit
