package publish

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/streamkpca/streamkpca/snapshot"
)

// Current holds the model version being served. It is safe for concurrent
// use; readers never block the learner.
type Current struct{ p atomic.Pointer[served] }

type served struct {
	m    *snapshot.Model
	data []byte
}

// Set replaces the served model (and its encoded bytes).
func (c *Current) Set(m *snapshot.Model, data []byte) { c.p.Store(&served{m: m, data: data}) }

// Get returns the served model and bytes, nil before the first Set.
func (c *Current) Get() (*snapshot.Model, []byte) {
	s := c.p.Load()
	if s == nil {
		return nil, nil
	}
	return s.m, s.data
}

// Limits bound query requests. Zero values mean the default.
type Limits struct {
	// MaxVectors per project request. Default: 10,000.
	MaxVectors int
	// MaxBytes of a request body. Default: 8 MiB (NATS requests are
	// further bounded by the server's max payload).
	MaxBytes int64
}

func (l *Limits) setDefaults() {
	if l.MaxVectors <= 0 {
		l.MaxVectors = 10_000
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = 8 << 20
	}
}

// ProjectRequest is the body of a project query.
type ProjectRequest struct {
	Vectors [][]float64 `json:"vectors"`
	// View is "x" (default) or "y" for two-view models.
	View string `json:"view,omitempty"`
}

// ProjectResponse answers a project query.
type ProjectResponse struct {
	Model       string      `json:"model"`
	Version     uint64      `json:"version"`
	K           int         `json:"k"`
	Projections [][]float64 `json:"projections"`
}

// Info answers an info query.
type Info struct {
	Version  uint64           `json:"version"`
	Features int              `json:"features"`
	Size     int              `json:"size"`
	Header   *snapshot.Header `json:"header"`
}

// errBadRequest marks client errors (HTTP 400, micro code 400).
var errBadRequest = errors.New("bad request")

// Project answers one project request against the served model.
func Project(c *Current, body []byte, lim Limits) (*ProjectResponse, error) {
	lim.setDefaults()
	m, _ := c.Get()
	if m == nil {
		return nil, ErrNoModel
	}
	var req ProjectRequest
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return nil, fmt.Errorf("%w: body must be {\"vectors\": [[...], ...]}: %v", errBadRequest, err)
	}
	if len(req.Vectors) == 0 {
		return nil, fmt.Errorf("%w: no vectors", errBadRequest)
	}
	if len(req.Vectors) > lim.MaxVectors {
		return nil, fmt.Errorf("%w: %d vectors exceed the limit of %d", errBadRequest, len(req.Vectors), lim.MaxVectors)
	}
	view := 0
	switch req.View {
	case "", "x":
	case "y":
		view = 1
	default:
		return nil, fmt.Errorf("%w: view %q (want x or y)", errBadRequest, req.View)
	}
	if view >= m.Views() {
		return nil, fmt.Errorf("%w: model has no view %q", errBadRequest, req.View)
	}
	d := m.Dim(view)
	x := make([]float64, 0, len(req.Vectors)*d)
	for i, v := range req.Vectors {
		if len(v) != d {
			return nil, fmt.Errorf("%w: vector %d has %d values, the model wants %d", errBadRequest, i, len(v), d)
		}
		x = append(x, v...)
	}
	p, err := m.ProjectView(view, nil, x)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errBadRequest, err)
	}
	k := m.K()
	out := &ProjectResponse{Model: m.Header().Model, Version: m.Header().Version(), K: k, Projections: make([][]float64, len(req.Vectors))}
	for i := range out.Projections {
		out.Projections[i] = p[i*k : (i+1)*k : (i+1)*k]
	}
	return out, nil
}

func info(c *Current) (*Info, error) {
	m, data := c.Get()
	if m == nil {
		return nil, ErrNoModel
	}
	return &Info{Version: m.Header().Version(), Features: m.Header().Features(), Size: len(data), Header: m.Header()}, nil
}

// Service is the NATS micro service answering queries for one model.
type Service struct {
	svc micro.Service
}

// NewService registers the service "streamkpca" with endpoints
// <prefix>.<model>.{snapshot,project,info}. The snapshot endpoint answers
// with the notice of the served version (object name, bucket, size,
// sha256) plus its header: the bytes live in the Object Store because
// snapshots outgrow NATS's message size.
func NewService(nc *nats.Conn, cfg Config, cur *Current, lim Limits) (*Service, error) {
	if err := cfg.SetDefaults(); err != nil {
		return nil, err
	}
	svc, err := micro.AddService(nc, micro.Config{
		Name: "streamkpca", Version: "0.1.0",
		Description: "streamkpca model queries", Metadata: map[string]string{"model": cfg.Model},
	})
	if err != nil {
		return nil, fmt.Errorf("publish: add micro service: %w", err)
	}
	g := svc.AddGroup(cfg.Prefix + "." + cfg.Model)
	respondErr := func(r micro.Request, err error) {
		code := "500"
		switch {
		case errors.Is(err, errBadRequest):
			code = "400"
		case errors.Is(err, ErrNoModel):
			code = "503"
		}
		b, _ := json.Marshal(map[string]string{"error": err.Error()})
		r.Error(code, err.Error(), b)
	}
	add := func(name string, h func(micro.Request)) error {
		return g.AddEndpoint(name, micro.HandlerFunc(h))
	}
	err = errors.Join(
		add("project", func(r micro.Request) {
			resp, err := Project(cur, r.Data(), lim)
			if err != nil {
				respondErr(r, err)
				return
			}
			r.RespondJSON(resp)
		}),
		add("info", func(r micro.Request) {
			in, err := info(cur)
			if err != nil {
				respondErr(r, err)
				return
			}
			r.RespondJSON(in)
		}),
		add("snapshot", func(r micro.Request) {
			in, err := info(cur)
			if err != nil {
				respondErr(r, err)
				return
			}
			r.RespondJSON(map[string]any{
				"version": in.Version, "bucket": cfg.ObjectBucket, "object": ObjectName(cfg.Model, in.Version),
				"size": in.Size, "header": in.Header,
			})
		}),
	)
	if err != nil {
		svc.Stop()
		return nil, fmt.Errorf("publish: add endpoints: %w", err)
	}
	return &Service{svc: svc}, nil
}

// Stop deregisters the service.
func (s *Service) Stop() error { return s.svc.Stop() }

// HTTPHandler serves, for one model:
//
//	GET  /v1/models/<model>           info JSON
//	GET  /v1/models/<model>/snapshot  the snapshot bytes (ETag = version)
//	POST /v1/models/<model>/project   ProjectRequest → ProjectResponse
//
// Errors are JSON {"error": "..."} with a 4xx/5xx status.
func HTTPHandler(model string, cur *Current, lim Limits) http.Handler {
	lim.setDefaults()
	mux := http.NewServeMux()
	base := "/v1/models/" + model
	mux.HandleFunc("GET "+base, func(w http.ResponseWriter, r *http.Request) {
		in, err := info(cur)
		if err != nil {
			httpErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, in)
	})
	mux.HandleFunc("GET "+base+"/snapshot", func(w http.ResponseWriter, r *http.Request) {
		m, data := cur.Get()
		if m == nil {
			httpErr(w, ErrNoModel)
			return
		}
		etag := `"` + strconv.FormatUint(m.Header().Version(), 10) + `"`
		w.Header().Set("ETag", etag)
		if r.Header.Get("If-None-Match") == etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		w.Write(data)
	})
	mux.HandleFunc("POST "+base+"/project", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, lim.MaxBytes))
		if err != nil {
			writeJSON(w, http.StatusRequestEntityTooLarge, map[string]string{"error": fmt.Sprintf("request body over %d bytes", lim.MaxBytes)})
			return
		}
		resp, err := Project(cur, body, lim)
		if err != nil {
			httpErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, resp)
	})
	mux.HandleFunc("/v1/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no such endpoint; the model is served at " + base})
	})
	return mux
}

func httpErr(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	switch {
	case errors.Is(err, errBadRequest):
		code = http.StatusBadRequest
	case errors.Is(err, ErrNoModel):
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, map[string]string{"error": err.Error()})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}
