package online

import (
	"fmt"

	"github.com/streamkpca/streamkpca/snapshot"
)

// Difference is a model setting whose value in a Config differs from a
// stored model's: Setting names it as the service's configuration does
// (learner.k, kafka.dim, …).
type Difference struct {
	Setting       string
	Config, Model string
}

func (d Difference) String() string {
	return fmt.Sprintf("%s is %s in the configuration but %s in the stored model", d.Setting, d.Config, d.Model)
}

// Differences lists the model settings of c (defaults filled, as the
// service fills them) that a model restored from h would not follow,
// because a model keeps what it was learned with: the components, the
// kernel and an explicit bandwidth (0 is the median trick, whatever it
// found), the seed, the block size, the dimension when c sets one, the
// centring, the standardisation and the feature source. The feature
// budget is not among them: a larger one is raised (RaiseBudget), and a
// stored budget above c's may have grown with the stream.
func Differences(c Config, h *snapshot.Header) []Difference {
	if len(h.Views) == 0 {
		return nil
	}
	var out []Difference
	add := func(setting string, cfg, model any) {
		out = append(out, Difference{setting, fmt.Sprint(cfg), fmt.Sprint(model)})
	}
	v := h.Views[0]
	if c.K != 0 && c.K != h.K {
		add("learner.k", c.K, h.K)
	}
	if c.Kernel.Family != "" && c.Kernel.Family != v.Kernel.Family {
		add("learner.kernel", c.Kernel.Family, v.Kernel.Family)
	}
	if c.Kernel.Bandwidth != 0 && c.Kernel.Bandwidth != v.Kernel.Bandwidth {
		add("learner.bandwidth", c.Kernel.Bandwidth, v.Kernel.Bandwidth)
	}
	if c.Seed != 0 && c.Seed != h.ModelSeed {
		add("learner.seed", c.Seed, h.ModelSeed)
	}
	if c.BlockSize != 0 && h.BlockSize != 0 && c.BlockSize != h.BlockSize && !v.Kernel.Family.Identity() {
		add("learner.block", c.BlockSize, h.BlockSize)
	}
	if c.Dim != 0 && c.Dim != v.Dim {
		add("kafka.dim", c.Dim, v.Dim)
	}
	if len(h.Views) == 1 && c.Center != h.Settings.Center {
		add("learner.center", c.Center, h.Settings.Center)
	}
	if c.Standardize != h.Settings.Standardize {
		add("learner.standardize", c.Standardize, h.Settings.Standardize)
	}
	if c.Features != "" && (c.Features == FeaturesLandmarks) != v.Landmarks() {
		add("learner.features", c.Features, map[bool]string{true: "landmarks", false: "random"}[v.Landmarks()])
	}
	return out
}
