package pipeline

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/streamkpca/streamkpca/ingest"
	"github.com/streamkpca/streamkpca/output"
)

// TestDashboardQueriesExportedMetrics: every metric the shipped Grafana
// dashboard (deploy/grafana/streamkpca.json) queries is one a running
// service exports, and every panel has a query.
func TestDashboardQueriesExportedMetrics(t *testing.T) {
	b, err := os.ReadFile("../deploy/grafana/streamkpca.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	c := testConfig(t)
	c.Output.Topic = "scores"
	src := ingest.NewMemSource("v", 64)
	src.Produce(0, points(600, 2, 1)...)
	h := startLoop(t, c, src, &ingest.MemDeadLetter{}, func(o *Options) { o.Output = &output.Memory{} })
	h.waitConsumed(600)
	h.stop()
	fams, err := h.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var exported []string
	for _, f := range fams {
		exported = append(exported, f.GetName())
	}
	name := regexp.MustCompile(`streamkpca_[a-z0-9_]+`)
	queried := 0
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			for _, m := range name.FindAllString(q.Expr, -1) {
				queried++
				if !slices.Contains(exported, m) {
					t.Errorf("panel %q queries %s, which the service does not export", p.Title, m)
				}
			}
		}
	}
	if queried < 10 {
		t.Fatalf("%d metrics queried", queried)
	}
}
