package pipeline

import (
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/streamkpca/streamkpca/configs"
)

// TestFitMemory: under a container limit of 400 MiB a service at its
// defaults (max_model_bytes 1 GiB, cache_bytes 1 GiB, keep_bytes 512
// MiB: each alone above or near the limit) is sized to 200, 50 and 50
// MiB with the runtime's soft limit at 360 MiB; a bound configured above
// the limit is refused naming both figures; without a limit nothing
// changes.
func TestFitMemory(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	const lim = 400 << 20
	var c configs.Config
	c.SetDefaults()
	var set int64
	record := func(n int64) int64 { set = n; return 0 }
	if err := fitMemory(&c, lim, "memory.max", zerolog.Nop(), record); err != nil {
		t.Fatal(err)
	}
	l := c.Learner
	if l.MaxModelBytes != 200<<20 || l.CacheBytes != 50<<20 || l.KeepBytes != 50<<20 || set != lim/10*9 {
		t.Errorf("max_model_bytes %d, cache_bytes %d, keep_bytes %d, runtime limit %d; want %d, %d, %d, %d",
			l.MaxModelBytes, l.CacheBytes, l.KeepBytes, set, 200<<20, 50<<20, 50<<20, lim/10*9)
	}
	var d configs.Config
	d.Learner.MaxModelBytes = 2 << 30
	d.SetDefaults()
	err := fitMemory(&d, lim, "memory.max", zerolog.Nop(), record)
	if err == nil || !strings.Contains(err.Error(), "2147483648") || !strings.Contains(err.Error(), "419430400") {
		t.Errorf("max_model_bytes 2 GiB under a 400 MiB limit: %v; want a refusal naming both", err)
	}
	var e configs.Config
	e.SetDefaults()
	set = -1
	if err := fitMemory(&e, 0, "", zerolog.Nop(), record); err != nil || e.Learner.MaxModelBytes != 1<<30 || e.Learner.KeepBytes != 0 || set != -1 {
		t.Errorf("no limit: %v, learner changed or runtime limit set (%d)", err, set)
	}
}
