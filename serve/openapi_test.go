package serve

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/streamkpca/streamkpca/internal/testkit"
	"github.com/streamkpca/streamkpca/snapshot"

	"github.com/streamkpca/streamkpca/publish"
)

// TestOpenAPIContract sends real requests, valid and hostile, to the HTTP
// handler and validates every request the document accepts and every
// response against serve/openapi.yaml with kin-openapi: an undocumented
// status, field or content type fails the test.
func TestOpenAPIContract(t *testing.T) {
	ctx := context.Background()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(ctx); err != nil {
		t.Fatalf("the document is not valid OpenAPI 3: %v", err)
	}
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	var cur Current
	store := testkit.GoldenStore(t, 3, 7)
	h := HTTPHandler("golden", &cur, Limits{MaxVectors: 3, MaxBytes: 4096}, VersionOptions{Versions: publish.NewStoreVersions(store), CanPin: true})
	cases := []struct {
		method, path, body string
		want               int
	}{
		{"GET", "/v1/models", "", 200},
		{"GET", "/v1/models/golden", "", 503}, // before the first version
		{"POST", "/v1/models/golden/project", `{"vectors":[[1,2]]}`, 503},
		{"GET", "/v1/openapi.yaml", "", 200},
	}
	run := func(method, path, body string, want int) {
		t.Helper()
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		res := w.Result()
		got, _ := io.ReadAll(res.Body)
		if res.StatusCode != want {
			t.Errorf("%s %s %.40s: %d %s, want %d", method, path, body, res.StatusCode, got, want)
		}
		route, params, err := router.FindRoute(httptest.NewRequest(method, path, nil))
		if err != nil {
			t.Errorf("%s %s: not in the document: %v", method, path, err)
			return
		}
		in := &openapi3filter.RequestValidationInput{Request: httptest.NewRequest(method, path, strings.NewReader(body)), PathParams: params, Route: route,
			Options: &openapi3filter.Options{IncludeResponseStatus: true, AuthenticationFunc: bearerOnly}}
		if body != "" {
			in.Request.Header.Set("Content-Type", "application/json")
		}
		if want < 400 {
			if err := openapi3filter.ValidateRequest(ctx, in); err != nil {
				t.Errorf("%s %s %.40s: a request the handler accepts is not valid for the document: %v", method, path, body, err)
			}
		}
		out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: res.StatusCode, Header: res.Header,
			Body: io.NopCloser(bytes.NewReader(got)), Options: in.Options}
		if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
			t.Errorf("%s %s %.40s: response %d does not match the document: %v", method, path, body, res.StatusCode, err)
		}
	}
	for _, c := range cases {
		run(c.method, c.path, c.body, c.want)
	}
	s, data := testkit.Golden(t, 7)
	m, _ := snapshot.NewModel(s, snapshot.ModelOptions{})
	cur.Set(m, data)
	for _, c := range []struct {
		method, path, body string
		want               int
	}{
		{"GET", "/v1/models", "", 200},
		{"GET", "/v1/models/golden", "", 200},
		{"GET", "/v1/models/golden/snapshot", "", 200},
		{"POST", "/v1/models/golden/project", `{"vectors":[[1,2],[0.5,-1]]}`, 200},
		{"POST", "/v1/models/golden/project", `{"vectors":[[1,2]],"view":"x"}`, 200},
		{"POST", "/v1/models/golden/project", `{"vectors":[[1]]}`, 400},
		{"POST", "/v1/models/golden/project", `{"vectors":[[1,2],[1,2],[1,2],[1,2]]}`, 400},
		{"POST", "/v1/models/golden/project", `{"vectors":[[1,2]]} {}`, 400},
		{"POST", "/v1/models/golden/project", `{"vectors":[[` + strings.Repeat("1,", 3000) + `2]]}`, 413},
		{"GET", "/v1/models/other", "", 404},
		{"GET", "/v1/models/golden/versions", "", 200},
		{"GET", "/v1/models/golden/versions/3/snapshot", "", 200},
		{"GET", "/v1/models/golden/versions/4/snapshot", "", 404},
		{"POST", "/v1/models/golden/versions/3/project", `{"vectors":[[1,2]]}`, 200},
		{"POST", "/v1/models/golden/versions/5/project", `{"vectors":[[1,2]]}`, 404},
		{"PUT", "/v1/models/golden/pin", `{"version":3}`, 200},
		{"PUT", "/v1/models/golden/pin", `{"version":4}`, 404},
		{"PUT", "/v1/models/golden/pin", `{"v":3}`, 400},
		{"DELETE", "/v1/models/golden/pin", "", 200},
		// The golden model is centred: no residual (422).
		{"POST", "/v1/models/golden/score", `{"vectors":[[1,2]]}`, 422},
		{"POST", "/v1/models/golden/versions/3/score", `{"vectors":[[1,2]]}`, 422},
		{"POST", "/v1/models/golden/score", `{"vectors":[[1,2]],"view":"y"}`, 400},
	} {
		run(c.method, c.path, c.body, c.want)
	}
	s.Header.Views[0].Center = nil
	m, _ = snapshot.NewModel(s, snapshot.ModelOptions{})
	cur.Set(m, data)
	run("POST", "/v1/models/golden/score", `{"vectors":[[1,2],[0.5,-1]]}`, 200)
	run("POST", "/v1/models/golden/score", `{"vectors":[[1]]}`, 400)
	// The document's paths are exactly the handler's.
	for path := range doc.Paths.Map() {
		if !strings.HasPrefix(path, "/v1/") {
			t.Errorf("documented path %s outside /v1/", path)
		}
	}
	if n := len(doc.Paths.Map()); n != 11 {
		t.Errorf("%d documented paths, want the handler's 11", n)
	}
}

// bearerOnly is the document's security scheme as the service applies it:
// a request that sends credentials sends "Authorization: Bearer <token>".
func bearerOnly(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	if in.SecuritySchemeName != "bearer" {
		return fmt.Errorf("unknown security scheme %q", in.SecuritySchemeName)
	}
	if !strings.HasPrefix(in.RequestValidationInput.Request.Header.Get("Authorization"), "Bearer ") {
		return errors.New("no bearer token")
	}
	return nil
}
