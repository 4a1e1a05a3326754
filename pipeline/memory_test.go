package pipeline

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/streamkpca/streamkpca/configs"
	"github.com/streamkpca/streamkpca/ingest"
	"github.com/streamkpca/streamkpca/snapshot"
)

// TestFitMemory: under a container limit of 400 MiB a service at its
// defaults (max_model_bytes 1 GiB, cache_bytes 1 GiB, keep_bytes 512
// MiB, queue_bytes 64 MiB, the served model's block cache 256 MiB, the
// versions' 256 MiB held and 4 × 32 MiB cached: each alone near the
// limit, all of them together four times it) is shared out below the
// runtime's soft limit B = 360 MiB: queue_bytes B/16 (held twice), the
// learner's and the served model's caches B/8 each, keep_bytes B/16,
// the versions B/16 held and B/16 cached, the replay window B/32 (on by
// default), 25 MiB for the process, and max_model_bytes the rest, 200
// MiB − B/32 = 188.75 MiB, so that the parts add up to B; a
// bound configured above the limit is refused naming both figures, and
// so are parts that add up past it; without a limit nothing changes.
func TestFitMemory(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	const lim = 400 << 20
	const b = lim / 10 * 9
	var c configs.Config
	c.SetDefaults()
	var set int64
	record := func(n int64) int64 { set = n; return 0 }
	plan, err := fitMemory(&c, lim, "memory.max", zerolog.Nop(), record)
	if err != nil {
		t.Fatal(err)
	}
	l := c.Learner
	if l.CacheBytes != b/8 || l.KeepBytes != b/16 || c.Kafka.QueueBytes != b/16 || set != b || l.ReplayBytes != b/32 ||
		plan.servedCache != b/8 || plan.versionHold != b/16 || plan.versionCache != b/16/4 {
		t.Errorf("cache_bytes %d, keep_bytes %d, queue_bytes %d, runtime limit %d, replay_bytes %d, served cache %d, versions held %d and cached %d a version; want %d, %d, %d, %d, %d, %d, %d, %d",
			l.CacheBytes, l.KeepBytes, c.Kafka.QueueBytes, set, l.ReplayBytes, plan.servedCache, plan.versionHold, plan.versionCache, b/8, b/16, b/16, b, b/32, b/8, b/16, b/16/4)
	}
	parts := l.MaxModelBytes + 2*c.Kafka.QueueBytes + plan.servedCache + plan.versionHold + 4*plan.versionCache + l.ReplayBytes + lim/16
	if l.MaxModelBytes != 200<<20-b/32 || parts != b {
		t.Errorf("max_model_bytes %d, the parts add up to %d; want %d and the runtime's limit %d", l.MaxModelBytes, parts, 200<<20-b/32, b)
	}
	var d configs.Config
	d.Learner.MaxModelBytes = 2 << 30
	d.SetDefaults()
	_, err = fitMemory(&d, lim, "memory.max", zerolog.Nop(), record)
	if err == nil || !strings.Contains(err.Error(), "2147483648") || !strings.Contains(err.Error(), "419430400") {
		t.Errorf("max_model_bytes 2 GiB under a 400 MiB limit: %v; want a refusal naming both", err)
	}
	var q configs.Config
	q.Kafka.QueueBytes, q.Learner.MaxModelBytes = 150<<20, 150<<20
	q.SetDefaults()
	_, err = fitMemory(&q, lim, "memory.max", zerolog.Nop(), record)
	if err == nil || !strings.Contains(err.Error(), "kafka.queue_bytes") || !strings.Contains(err.Error(), "learner.max_model_bytes") {
		t.Errorf("queue_bytes and max_model_bytes 150 MiB each under a 400 MiB limit (450 MiB with the queue held twice): %v; want a refusal naming both", err)
	}
	var e configs.Config
	e.SetDefaults()
	set = -1
	if _, err := fitMemory(&e, 0, "", zerolog.Nop(), record); err != nil || e.Learner.MaxModelBytes != 1<<30 || e.Learner.KeepBytes != 0 || set != -1 {
		t.Errorf("no limit: %v, learner changed or runtime limit set (%d)", err, set)
	}
}

// TestFitFeatures: the feature budget a learner starts with must fit
// learner.max_model_bytes with the service's copies: 5 × 32·k bytes a
// feature (online.ModelBytes, serviceCopies). Under a 256 MiB limit
// max_model_bytes is 230.4 − 16 − 2·14.4 − 28.8 − 14.4 − 14.4 − 7.2 (the
// replay window, B/32) MiB, about 120.8 MiB: k = 64 holds 12,369
// features at most, so 16,384 set by hand is refused naming the settings
// and 12,288 (whole blocks of 512), the default 32,768 is lowered to
// 12,288, and k = 3's default 32,768 (16
// MiB) is kept. (A service started with 16,384 at k = 64 in a 256 MiB
// cgroup was OOM-killed while it learned: TestSlowDownloadsInAMemoryCgroup
// found it.)
func TestFitFeatures(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	const lim = 256 << 20
	record := func(int64) int64 { return 0 }
	fit := func(k, maxFeatures int) (*configs.Config, error) {
		var c configs.Config
		c.Learner.K, c.Learner.MaxFeatures = k, maxFeatures
		c.SetDefaults()
		_, err := fitMemory(&c, lim, "memory.max", zerolog.Nop(), record)
		return &c, err
	}
	c, err := fit(64, 16384)
	want := (c.Learner.MaxModelBytes / (5 * 32 * 64)) / 512 * 512
	if err == nil || !strings.Contains(err.Error(), "learner.max_features 16384") || !strings.Contains(err.Error(), fmt.Sprint("at most ", want)) {
		t.Errorf("k = 64, 16,384 features under 256 MiB: %v; want a refusal naming learner.max_features and %d", err, want)
	}
	if want != 12288 {
		t.Errorf("the budget that fits is %d features; the closed form above gives 12,288", want)
	}
	if c, err := fit(64, 0); err != nil || c.Learner.MaxFeatures != 12288 {
		t.Errorf("k = 64, default max_features: %v, max_features %d; want it lowered to 12,288", err, c.Learner.MaxFeatures)
	}
	if c, err := fit(3, 0); err != nil || c.Learner.MaxFeatures != 32768 {
		t.Errorf("k = 3, default max_features: %v, max_features %d; want the default kept (32,768)", err, c.Learner.MaxFeatures)
	}
}

// TestMemoryWithinTheContainerLimit measures the service's live heap
// against the container limit it sizes itself below (fitMemory), at d =
// 4, 64 and 784, with everything that holds memory in use: a model of
// 4,096 i.i.d. features (with following's scouts) learned from a
// backlog, a snapshot every batch,
// and while it learns, projections through the served model and through
// every stored version (each generating the blocks its caches keep). The
// live heap (after a collection, less what the test held before the
// service started) must stay within the runtime's soft limit, 90% of
// the container's: above it the runtime collects without end and the
// container is killed. Before the service counted everything (the
// served model's blocks up to 256 MiB, each stored version's up to 32
// MiB and its file's learner state, each scout's blocks up to the
// model's own bound, whatever the limit), the live heap at d = 784
// reached 247 MiB under this 48 MiB limit (30.6 MiB now).
func TestMemoryWithinTheContainerLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("learns three models of 4,096 features")
	}
	orig := setMemoryLimit
	setMemoryLimit = func(int64) int64 { return 0 }
	t.Cleanup(func() { setMemoryLimit = orig })
	t.Setenv("GOMEMLIMIT", "")
	const lim = 48 << 20
	for _, d := range []int{4, 64, 784} {
		t.Run(fmt.Sprint("d=", d), func(t *testing.T) {
			c := testConfig(t)
			c.Kafka.Dim = d
			c.Learner.K, c.Learner.Block, c.Learner.MaxFeatures, c.Learner.Batch = 5, 512, 4096, 128
			c.Learner.Frequencies, c.Learner.Budget = "iid", "fixed"
			c.Snapshot.EveryBatches, c.Snapshot.Keep = 1, 8
			rng := rand.New(rand.NewPCG(uint64(d), 1))
			const n = 14 * 128
			src := ingest.NewMemSource("v", 64)
			msgs := make([][]byte, n)
			for i := range msgs {
				var b []byte
				for j := range d {
					if j > 0 {
						b = append(b, ',')
					}
					b = strconv.AppendFloat(b, rng.NormFloat64(), 'f', 4, 64)
				}
				msgs[i] = b
			}
			src.Produce(0, msgs...)
			msgs = nil
			rows := make([]float64, 16*d) // a few rows: projecting generates every block all the same
			for i := range rows {
				rows[i] = rng.NormFloat64()
			}
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			base := ms.HeapAlloc
			h := startLoop(t, c, src, &ingest.MemDeadLetter{}, func(o *Options) {
				o.containerLimit = func() (int64, string, error) { return lim, "test", nil }
			})
			var peak uint64
			measure := func() {
				runtime.GC()
				runtime.ReadMemStats(&ms)
				if ms.HeapAlloc > base {
					peak = max(peak, ms.HeapAlloc-base)
				}
			}
			proj := make([]float64, 16*5)
			var served *snapshot.Model
			seen := map[uint64]bool{}
			for h.p.Status().Consumed < n {
				// Each model once (its caches fill at its first
				// projection): the served one whenever it changes, every
				// stored version as it appears.
				if m, _ := h.p.Current().Get(); m != nil && m != served {
					served = m
					if _, err := m.Project(proj, rows); err != nil {
						t.Fatal(err)
					}
				}
				vs, _ := h.p.pub.versions.List()
				for _, v := range vs {
					if seen[v.Version] {
						continue
					}
					seen[v.Version] = true
					m, _, release, err := h.p.pub.versions.Hold(t.Context(), v.Version)
					if err != nil {
						continue // pruned meanwhile
					}
					if _, err := m.Project(proj, rows); err != nil {
						t.Fatal(err)
					}
					release()
				}
				measure()
				time.Sleep(100 * time.Millisecond) // a collection each time: caches that fill stay full
			}
			measure()
			if vs, _ := h.p.pub.versions.List(); len(vs) > 0 {
				t.Logf("versions: %d, the newest %d bytes published, %d features", len(vs), vs[0].Size, vs[0].Features)
			}
			h.stop()
			t.Logf("d = %d: live heap at most %.1f MiB under a limit of %d MiB (the runtime's %.1f MiB; max_model_bytes sized to %.1f MiB)",
				d, float64(peak)/(1<<20), lim>>20, float64(lim/10*9)/(1<<20), float64(h.p.cfg.Learner.MaxModelBytes)/(1<<20))
			if peak > lim/10*9 {
				t.Errorf("d = %d: the live heap reached %d bytes, above the runtime's soft limit %d (90%% of the container's %d)", d, peak, lim/10*9, lim)
			}
		})
	}
}
