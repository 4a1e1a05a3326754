package serve

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/streamkpca/streamkpca/internal/testkit"
	"github.com/streamkpca/streamkpca/snapshot"
)

// TestScoreOverHTTPIsModelScore: /score answers snapshot.Model.Score's
// projections and residuals bit for bit (JSON round-trips float64 exactly),
// and its projections are /project's.
func TestScoreOverHTTPIsModelScore(t *testing.T) {
	s, data := testkit.Golden(t, 7)
	s.Header.Views[0].Center = nil
	s.Header.Novelty = &snapshot.Novelty{Residuals: []float64{0.2, 0.9, 0.5}}
	m, err := snapshot.NewModel(s, snapshot.ModelOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var cur Current
	cur.Set(m, data)
	h := HTTPHandler("golden", &cur, Limits{}, VersionOptions{})
	post := func(path string, out any) {
		t.Helper()
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, path, strings.NewReader(`{"vectors":[[1,2],[0.5,-1],[30,-4]]}`)))
		if w.Code != http.StatusOK {
			t.Fatalf("%s: %d %s", path, w.Code, w.Body)
		}
		if err := json.Unmarshal(w.Body.Bytes(), out); err != nil {
			t.Fatal(err)
		}
	}
	var sc ScoreResponse
	var pr ProjectResponse
	post("/v1/models/golden/score", &sc)
	post("/v1/models/golden/project", &pr)
	proj, res, err := m.Score(nil, nil, []float64{1, 2, 0.5, -1, 30, -4})
	if err != nil {
		t.Fatal(err)
	}
	k := m.K()
	for r := range 3 {
		if q, _ := m.Novelty(res[r]); sc.Novelty[r] != q {
			t.Errorf("row %d: novelty %v over HTTP, %v from the model", r, sc.Novelty[r], q)
		}
		if sc.Residuals[r] != res[r] {
			t.Errorf("row %d: residual %v over HTTP, %v from the model", r, sc.Residuals[r], res[r])
		}
		for q := range k {
			if sc.Projections[r][q] != proj[r*k+q] || pr.Projections[r][q] != proj[r*k+q] {
				t.Errorf("row %d component %d: score %v, project %v, model %v", r, q, sc.Projections[r][q], pr.Projections[r][q], proj[r*k+q])
			}
		}
	}
	if sc.Version != 7 {
		t.Errorf("version %d, want 7", sc.Version)
	}
}
