package online

import (
	"strings"
	"testing"

	"github.com/streamkpca/streamkpca/features"
	"github.com/streamkpca/streamkpca/snapshot"
)

// TestDifferencesNameEachSetting: every model setting a restart would
// silently ignore (the stored model keeps what it was learned with) is
// named with both values; settings that match, a bandwidth left to the
// median trick, an unset dimension and a budget that grew are not.
func TestDifferencesNameEachSetting(t *testing.T) {
	h := &snapshot.Header{K: 5, ModelSeed: 7, BlockSize: 256,
		Views: []snapshot.View{{Dim: 16, Kernel: features.Kernel{Family: features.Gaussian, Bandwidth: 2.5}}}}
	same := Config{K: 5, Seed: 7, BlockSize: 256, Dim: 16, Kernel: features.Kernel{Family: features.Gaussian}, MaxFeatures: 128, Features: FeaturesRandom}
	if d := Differences(same, h); len(d) != 0 {
		t.Errorf("matching settings reported as differences: %v", d)
	}
	changed := Config{K: 10, Seed: 8, BlockSize: 512, Dim: 32, Kernel: features.Kernel{Family: features.Laplacian, Bandwidth: 1}, Center: true, Standardize: true, Features: FeaturesLandmarks}
	d := Differences(changed, h)
	want := map[string][2]string{
		"learner.k": {"10", "5"}, "learner.seed": {"8", "7"}, "learner.block": {"512", "256"}, "kafka.dim": {"32", "16"},
		"learner.kernel": {"laplacian", "gaussian"}, "learner.bandwidth": {"1", "2.5"}, "learner.center": {"true", "false"},
		"learner.standardize": {"true", "false"}, "learner.features": {"landmarks", "random"},
	}
	got := map[string][2]string{}
	for _, x := range d {
		got[x.Setting] = [2]string{x.Config, x.Model}
		if !strings.Contains(x.String(), x.Setting) || !strings.Contains(x.String(), x.Config) || !strings.Contains(x.String(), x.Model) {
			t.Errorf("%q does not name the setting and both values", x.String())
		}
	}
	for s, w := range want {
		if got[s] != w {
			t.Errorf("%s: got %v, want config %s, model %s", s, got[s], w[0], w[1])
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d differences, want %d: %v", len(got), len(want), d)
	}
}
