package configs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestHelmChartConfigLoads: the configuration the Helm chart mounts
// (deploy/helm/streamkpca/values.yaml, config) is one the service loads
// and accepts, and the chart's probes are the service's health and
// readiness endpoints.
func TestHelmChartConfigLoads(t *testing.T) {
	b, err := os.ReadFile("../deploy/helm/streamkpca/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var values struct {
		Config map[string]any `yaml:"config"`
	}
	if err := yaml.Unmarshal(b, &values); err != nil {
		t.Fatal(err)
	}
	cfg, err := yaml.Marshal(values.Config)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "streamkpca.yaml")
	if err := os.WriteFile(path, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path, nil)
	if err != nil {
		t.Fatalf("the chart's configuration does not load: %v\n%s", err, cfg)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("the chart's configuration is refused: %v\n%s", err, cfg)
	}
	sts, err := os.ReadFile("../deploy/helm/streamkpca/templates/statefulset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"path: /healthz", "path: /readyz", "mountPath: /var/lib/streamkpca", `"run", "--config", "/etc/streamkpca/streamkpca.yaml"`} {
		if !strings.Contains(string(sts), want) {
			t.Errorf("the chart's StatefulSet lacks %q", want)
		}
	}
	if !strings.HasPrefix(c.Snapshot.Dir, "/var/lib/streamkpca/") {
		t.Errorf("snapshot.dir %s is not on the chart's volume", c.Snapshot.Dir)
	}
}
