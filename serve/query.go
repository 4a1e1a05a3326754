package serve

import (
	"bytes"
	_ "embed"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/streamkpca/streamkpca/snapshot"

	"github.com/streamkpca/streamkpca/publish"
)

// Current holds the model version being served: the newest the learner
// persisted, unless an operator pinned another (Pin). It is safe for
// concurrent use; readers never block the learner.
type Current struct {
	p   atomic.Pointer[served] // newest
	pin atomic.Pointer[served] // pinned, or nil
	// pinMu orders pin requests (HTTP and NATS alike): each one's write
	// to the NATS pin key and its change of what is served happen
	// together, so the two always agree (see pin).
	pinMu sync.Mutex
}

type served struct {
	m    *snapshot.Model
	data []byte
}

// Set replaces the newest model (and its encoded bytes). While a version
// is pinned, the pinned one is still the one served.
func (c *Current) Set(m *snapshot.Model, data []byte) { c.p.Store(&served{m: m, data: data}) }

// Get returns the served model and bytes: the pinned version if any, else
// the newest; nil before the first Set.
func (c *Current) Get() (*snapshot.Model, []byte) {
	s := c.pin.Load()
	if s == nil {
		s = c.p.Load()
	}
	if s == nil {
		return nil, nil
	}
	return s.m, s.data
}

// Pin serves m instead of the newest version until Unpin.
func (c *Current) Pin(m *snapshot.Model, data []byte) { c.pin.Store(&served{m: m, data: data}) }

// Unpin serves the newest version again.
func (c *Current) Unpin() { c.pin.Store(nil) }

// Pinned returns the pinned version, 0 when none is.
func (c *Current) Pinned() uint64 {
	if s := c.pin.Load(); s != nil {
		return s.m.Header().Version()
	}
	return 0
}

// Limits bound query requests. Zero values mean the default.
type Limits struct {
	// MaxVectors per project request. Default: 10,000.
	MaxVectors int
	// MaxBytes of a request body. Default: 8 MiB (NATS requests are
	// further bounded by the server's max payload).
	MaxBytes int64
	// MaxConcurrent bounds the HTTP project requests decoded and
	// projected at once (more wait for a slot once their body is in).
	// Memory for projection requests stays below MaxReading × MaxBytes +
	// MaxConcurrent × (5 × MaxBytes + 8·k·MaxVectors) bytes: the bodies
	// being received, and per slot a body, its decoded values (a number
	// takes at least two bytes of body and eight decoded) and the
	// projections. NATS requests are handled one at a time per endpoint.
	// Default: 2 × GOMAXPROCS.
	MaxConcurrent int
	// MaxReading bounds the HTTP request bodies being received at once,
	// each within BodyTimeout, before a projection slot is taken: a slow
	// client holds a reading place, never a projection slot, so it cannot
	// starve the others (bodies in memory: MaxReading × MaxBytes at most).
	// Default: 4 × MaxConcurrent.
	MaxReading int
	// BodyTimeout is the time a request body has to arrive whole.
	// Default: 5 s.
	BodyTimeout time.Duration
}

func (l *Limits) setDefaults() {
	if l.MaxVectors <= 0 {
		l.MaxVectors = 10_000
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = 8 << 20
	}
	if l.MaxConcurrent <= 0 {
		l.MaxConcurrent = 2 * runtime.GOMAXPROCS(0)
	}
	if l.MaxReading <= 0 {
		l.MaxReading = 4 * l.MaxConcurrent
	}
	if l.BodyTimeout <= 0 {
		l.BodyTimeout = 5 * time.Second
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

// ScoreResponse answers a score query: ProjectResponse's projections (the
// same bits) and each vector's residual, the squared distance in the
// model's feature space between the vector's features and their
// projection onto the k components (snapshot.Model.Score; kernel PCA's
// reconstruction error, in the kernel's units).
type ScoreResponse struct {
	ProjectResponse
	Residuals []float64 `json:"residuals"`
	// Novelty is each residual's place among the version's reference
	// residuals (snapshot.Model.Novelty), when the version has one.
	Novelty []float64 `json:"novelty,omitempty"`
}

// projectBody is a decoded ProjectRequest: the vectors' values in one
// slice and each vector's length.
type projectBody struct {
	values  []float64
	lens    []int
	view    string
	version uint64 // a stored version to project with (NATS; 0: the served one)
}

// decodeProject reads a ProjectRequest token by token, refusing it as soon
// as it holds more than maxVectors vectors, an unknown field or anything
// after the object: memory stays proportional to what is accepted, never
// to what a client sends.
func decodeProject(body []byte, maxVectors int) (projectBody, error) {
	var out projectBody
	bad := func(format string, a ...any) (projectBody, error) {
		return projectBody{}, fmt.Errorf("%w: body must be {\"vectors\": [[...], ...], \"view\": \"x\"|\"y\"}: "+format, append([]any{errBadRequest}, a...)...)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return bad("not a JSON object")
	}
	seen := map[string]bool{}
	var vec []float64
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return bad("%v", err)
		}
		key, _ := t.(string)
		if seen[key] {
			return bad("field %q twice", key)
		}
		seen[key] = true
		switch key {
		case "vectors":
			if t, err := dec.Token(); err != nil || t != json.Delim('[') {
				return bad("vectors is not an array")
			}
			for dec.More() {
				if len(out.lens) == maxVectors {
					return projectBody{}, fmt.Errorf("%w: more than %d vectors (the limit)", errBadRequest, maxVectors)
				}
				vec = vec[:0]
				if err := dec.Decode(&vec); err != nil {
					if nonFinite(body, dec.InputOffset()) {
						// Python's json.dumps writes NaN and Infinity,
						// which are not JSON: name them, not the parser.
						return bad("vector %d holds NaN or Infinity, which JSON cannot carry and no kernel can project (%v)", len(out.lens), err)
					}
					return bad("vector %d: %v", len(out.lens), err)
				}
				out.values = append(out.values, vec...)
				out.lens = append(out.lens, len(vec))
			}
			if _, err := dec.Token(); err != nil {
				return bad("%v", err)
			}
		case "view":
			if err := dec.Decode(&out.view); err != nil {
				return bad("view: %v", err)
			}
		case "version":
			if err := dec.Decode(&out.version); err != nil {
				return bad("version: %v", err)
			}
		default:
			return bad("unknown field %q", key)
		}
	}
	if _, err := dec.Token(); err != nil {
		return bad("%v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return bad("data after the JSON object")
	}
	if len(out.lens) == 0 {
		return projectBody{}, fmt.Errorf("%w: no vectors", errBadRequest)
	}
	return out, nil
}

// nonFinite reports whether the body holds NaN or Infinity (as
// non-standard encoders write them) within 64 bytes after off, where the
// decoder stopped.
func nonFinite(body []byte, off int64) bool {
	lo := max(0, int(off)-8)
	hi := min(len(body), int(off)+64)
	if lo >= hi {
		return false
	}
	w := body[lo:hi]
	return bytes.Contains(w, []byte("NaN")) || bytes.Contains(w, []byte("Infinity"))
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

// errUnprocessable marks a request this model cannot answer by its kind
// (HTTP 422): a score of a centred model.
var errUnprocessable = errors.New("unprocessable")

// Project answers one project request against the served model.
func Project(c *Current, body []byte, lim Limits) (*ProjectResponse, error) {
	return projectVersion(c, nil, body, lim)
}

// projectVersion answers a project request: with the stored version the
// body names ("version", from vs), else with the served one.
func projectVersion(c *Current, vs publish.Versions, body []byte, lim Limits) (*ProjectResponse, error) {
	return projectModel(body, lim, versionGetter(c, vs))
}

// scoreVersion is projectVersion for a score request.
func scoreVersion(c *Current, vs publish.Versions, body []byte, lim Limits) (*ScoreResponse, error) {
	return scoreModel(body, lim, versionGetter(c, vs))
}

// versionGetter returns the stored version a request names (from vs), or
// the served one for none.
func versionGetter(c *Current, vs publish.Versions) func(version uint64) (*snapshot.Model, error) {
	return func(version uint64) (*snapshot.Model, error) {
		if version == 0 {
			if m, _ := c.Get(); m != nil {
				return m, nil
			}
			return nil, publish.ErrNoModel
		}
		if vs == nil {
			return nil, fmt.Errorf("%w: this service keeps no versions", publish.ErrNoVersion)
		}
		m, _, err := vs.Load(version)
		return m, err
	}
}

// projectModel decodes a project request and answers it with the model
// get returns for the version the request names (0: none named).
func projectModel(body []byte, lim Limits, get func(version uint64) (*snapshot.Model, error)) (*ProjectResponse, error) {
	p, _, err := answerModel(body, lim, false, get)
	return p, err
}

// scoreModel is projectModel with each vector's residual (x view only).
func scoreModel(body []byte, lim Limits, get func(version uint64) (*snapshot.Model, error)) (*ScoreResponse, error) {
	var m *snapshot.Model
	p, res, err := answerModel(body, lim, true, func(version uint64) (*snapshot.Model, error) {
		var err error
		m, err = get(version)
		return m, err
	})
	if err != nil {
		return nil, err
	}
	out := &ScoreResponse{ProjectResponse: *p, Residuals: res}
	for _, r := range res {
		q, ok := m.Novelty(r)
		if !ok {
			break
		}
		out.Novelty = append(out.Novelty, q)
	}
	return out, nil
}

// answerModel answers a project request, or a score request (score: the
// residuals too, of the x view).
func answerModel(body []byte, lim Limits, score bool, get func(version uint64) (*snapshot.Model, error)) (*ProjectResponse, []float64, error) {
	lim.setDefaults()
	req, err := decodeProject(body, lim.MaxVectors)
	if err != nil {
		return nil, nil, err
	}
	m, err := get(req.version)
	if err != nil {
		return nil, nil, err
	}
	view := 0
	switch req.view {
	case "", "x":
	case "y":
		view = 1
	default:
		return nil, nil, fmt.Errorf("%w: view %q (want x or y)", errBadRequest, req.view)
	}
	if view >= m.Views() {
		return nil, nil, fmt.Errorf("%w: model has no view %q", errBadRequest, req.view)
	}
	d := m.Dim(view)
	for i, n := range req.lens {
		if n != d {
			return nil, nil, fmt.Errorf("%w: vector %d has %d values, the model wants %d", errBadRequest, i, n, d)
		}
	}
	x := req.values
	rows := len(req.lens)
	var p, res []float64
	if score {
		if view != 0 {
			return nil, nil, fmt.Errorf("%w: a score is of the x view; leave \"view\" out", errBadRequest)
		}
		p, res, err = m.Score(nil, nil, x)
		if errors.Is(err, snapshot.ErrCentred) {
			return nil, nil, fmt.Errorf("%w: %v", errUnprocessable, err)
		}
	} else {
		p, err = m.ProjectView(view, nil, x)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", errBadRequest, err)
	}
	k := m.K()
	for i, v := range p {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, nil, fmt.Errorf("%w: the projection of vector %d is not finite: its values are too large for this model's kernel", errBadRequest, i/k)
		}
	}
	out := &ProjectResponse{Model: m.Header().Model, Version: m.Header().Version(), K: k, Projections: make([][]float64, rows)}
	for i := range out.Projections {
		out.Projections[i] = p[i*k : (i+1)*k : (i+1)*k]
	}
	return out, res, nil
}

func info(c *Current) (*Info, error) {
	m, data := c.Get()
	if m == nil {
		return nil, publish.ErrNoModel
	}
	return &Info{Version: m.Header().Version(), Features: m.Header().Features(), Size: len(data), Header: m.Header()}, nil
}

// Service is the NATS micro service answering queries for one model.
type Service struct {
	svc micro.Service
}

// NewService registers the service "streamkpca" with endpoints
// <prefix>.<model>.{snapshot,project,score,info,versions,pin}: project
// and score take an optional "version" to project with a stored version; versions lists
// them; pin takes {"version": v} (0 unpins) and is refused (403) unless
// opt.CanPin. The snapshot endpoint answers
// with the notice of the served version (object name, bucket, size,
// sha256) plus its header: the bytes live in the Object Store because
// snapshots outgrow NATS's message size.
func NewService(nc *nats.Conn, cfg publish.Config, cur *Current, lim Limits, opt VersionOptions) (*Service, error) {
	if err := cfg.SetDefaults(); err != nil {
		return nil, err
	}
	svc, err := micro.AddService(nc, micro.Config{
		Name: "streamkpca", Version: "0.1.0",
		Description: "streamkpca model queries", Metadata: map[string]string{"model": cfg.Model},
	})
	if err != nil {
		return nil, fmt.Errorf("serve: add micro service: %w", err)
	}
	g := svc.AddGroup(cfg.Prefix + "." + cfg.Model)
	add := func(name string, do func(body []byte) (any, error)) error {
		s := natsSchemas[name]
		return g.AddEndpoint(name, answer(do),
			micro.WithEndpointMetadata(map[string]string{"request": s[0], "response": s[1], "errors": natsErrors}))
	}
	err = errors.Join(
		add("project", func(body []byte) (any, error) { return projectVersion(cur, opt.Versions, body, lim) }),
		add("score", func(body []byte) (any, error) { return scoreVersion(cur, opt.Versions, body, lim) }),
		add("versions", func([]byte) (any, error) {
			if opt.Versions == nil {
				return nil, fmt.Errorf("%w: this service keeps no versions", publish.ErrNoVersion)
			}
			list, err := opt.Versions.List()
			return map[string]any{"versions": list, "pinned": cur.Pinned()}, err
		}),
		add("pin", func(body []byte) (any, error) {
			v, err := pin(cur, opt, body)
			return map[string]uint64{"pinned": v}, err
		}),
		add("info", func([]byte) (any, error) { return info(cur) }),
		add("snapshot", func([]byte) (any, error) {
			in, err := info(cur)
			if err != nil {
				return nil, err
			}
			return map[string]any{
				"version": in.Version, "bucket": cfg.ObjectBucket, "object": publish.ObjectName(cfg.Model, in.Header.Incarnation, in.Version),
				"size": in.Size, "header": in.Header,
			}, nil
		}),
	)
	if err != nil {
		svc.Stop()
		return nil, fmt.Errorf("serve: add endpoints: %w", err)
	}
	return &Service{svc: svc}, nil
}

// answer is a NATS endpoint's handler: do's reply, or its error with
// the code statusOf gives it. A reply that cannot be encoded or sent
// becomes an error reply, never silence.
func answer(do func(body []byte) (any, error)) micro.HandlerFunc {
	return func(r micro.Request) {
		v, err := do(r.Data())
		if err == nil {
			if err = r.RespondJSON(v); err != nil {
				err = fmt.Errorf("reply not sent: %w", err)
			}
		}
		if err != nil {
			b, _ := json.Marshal(map[string]string{"error": err.Error()})
			r.Error(strconv.Itoa(statusOf(err)), err.Error(), b)
		}
	}
}

// statusOf is the status a query's error is answered with, over HTTP and
// as a NATS micro error code alike.
func statusOf(err error) int {
	switch {
	case errors.Is(err, errBadRequest):
		return http.StatusBadRequest
	case errors.Is(err, errUnprocessable):
		return http.StatusUnprocessableEntity
	case errors.Is(err, publish.ErrNoVersion):
		return http.StatusNotFound
	case errors.Is(err, errForbidden):
		return http.StatusForbidden
	case errors.Is(err, publish.ErrNoModel), errors.Is(err, errUnavailable):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// natsSchemas describe each endpoint's request and reply: the endpoints'
// metadata, so that `nats micro info streamkpca` shows them.
var natsSchemas = map[string][2]string{
	"project":  {`{"vectors": [[number, ...], ...], "view"?: "x"|"y", "version"?: integer}`, `{"model": string, "version": integer, "k": integer, "projections": [[number, ...], ...]}`},
	"score":    {`{"vectors": [[number, ...], ...], "version"?: integer}`, `{"model": string, "version": integer, "k": integer, "projections": [[number, ...], ...], "residuals": [number, ...], "novelty"?: [number, ...]}`},
	"info":     {`(empty)`, `{"version": integer, "features": integer, "size": integer, "header": object}`},
	"snapshot": {`(empty)`, `{"version": integer, "bucket": string, "object": string, "size": integer, "header": object}`},
	"versions": {`(empty)`, `{"versions": [{"version", "samples_seen", "created", "features", "size", "sha256"}, ...], "pinned": integer}`},
	"pin":      {`{"version": integer (0 unpins)}`, `{"pinned": integer}`},
}

// natsErrors is every endpoint's error reply.
const natsErrors = `Nats-Service-Error-Code 400 (bad request), 403 (pin not enabled), 404 (no such version), 503 (no model yet), 500; body {"error": string}`

// Stop deregisters the service.
func (s *Service) Stop() error { return s.svc.Stop() }

// OpenAPI is the HTTP API's contract (serve/openapi.yaml), served at
// /v1/openapi.yaml; a test validates the handler's real requests and
// responses against it, so the two cannot drift.
//
//go:embed openapi.yaml
var OpenAPI []byte

// HTTPHandler serves, for one model:
//
//	GET  /v1/openapi.yaml             the OpenAPI 3 document
//	GET  /v1/models                   {"models": [{"model", "version", "ready"}]}
//	GET  /v1/models/<model>           info JSON
//	GET  /v1/models/<model>/snapshot  the snapshot bytes (ETag: incarnation, version, CRC-32C)
//	POST /v1/models/<model>/project   ProjectRequest → ProjectResponse
//	POST /v1/models/<model>/score     ProjectRequest → ScoreResponse
//
// and, with opt.Versions, the version routes (addVersionRoutes).
//
// Errors are JSON {"error": "..."} with a 4xx/5xx status; a known path
// with another method is a 405 with Allow.
func HTTPHandler(model string, cur *Current, lim Limits, opt VersionOptions) http.Handler {
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
			httpErr(w, publish.ErrNoModel)
			return
		}
		serveSnapshot(w, r, m, data)
	})
	slots := newProjectSlots(lim)
	for _, kind := range []string{"project", "score"} {
		mux.HandleFunc("POST "+base+"/"+kind, func(w http.ResponseWriter, r *http.Request) {
			serveProject(w, r, lim, slots, kind == "score", func(version uint64) (*snapshot.Model, error) {
				if version != 0 {
					return nil, fmt.Errorf("%w: \"version\" belongs to …/versions/{version}/%s", errBadRequest, kind)
				}
				if m, _ := cur.Get(); m != nil {
					return m, nil
				}
				return nil, publish.ErrNoModel
			})
		})
	}
	if opt.Versions != nil {
		addVersionRoutes(mux, base, cur, opt, lim, slots)
	}
	mux.HandleFunc("GET /v1/openapi.yaml", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		w.Write(OpenAPI)
	})
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		type entry struct {
			Model   string `json:"model"`
			Version uint64 `json:"version,omitempty"`
			Ready   bool   `json:"ready"`
		}
		e := entry{Model: model}
		if m, _ := cur.Get(); m != nil {
			e.Version, e.Ready = m.Header().Version(), true
		}
		writeJSON(w, http.StatusOK, map[string][]entry{"models": {e}})
	})
	allow := map[string]string{"/v1/openapi.yaml": "GET", "/v1/models": "GET", base: "GET", base + "/snapshot": "GET", base + "/project": "POST", base + "/score": "POST",
		base + "/versions": "GET", base + "/pin": "PUT, DELETE"}
	mux.HandleFunc("/v1/", func(w http.ResponseWriter, r *http.Request) {
		// The escaped path: M%2Fsnapshot is not M/snapshot (the routes
		// above did not match it either).
		p := r.URL.EscapedPath()
		if a, ok := allow[p]; ok {
			w.Header().Set("Allow", a)
			writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": r.Method + " is not allowed here; use " + a})
			return
		}
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no such endpoint; the model is served at " + base})
	})
	return mux
}

func httpErr(w http.ResponseWriter, err error) {
	writeJSON(w, statusOf(err), map[string]string{"error": err.Error()})
}

// writeJSON encodes v before writing anything, so that an encoding error
// becomes a 500 with its reason, never a 200 with an empty body.
func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code = http.StatusInternalServerError
		b, _ = json.Marshal(map[string]string{"error": "encoding the reply failed: " + err.Error()})
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(append(b, '\n'))
}

// serveSnapshot writes a version's snapshot bytes with its ETag.
func serveSnapshot(w http.ResponseWriter, r *http.Request, m *snapshot.Model, data []byte) {
	etag := snapshotETag(m, data)
	w.Header().Set("ETag", etag)
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.Write(data)
}

// snapshotETag is the ETag of a snapshot's bytes: its incarnation, its
// version and the CRC-32C the format ends with, so that a model reset
// into a new incarnation (or, with none, to other bytes) is a new ETag
// at the same version: a cache or a client polling with If-None-Match
// never takes another model for the one it holds.
func snapshotETag(m *snapshot.Model, data []byte) string {
	var crc uint32
	if n := len(data); n >= 4 {
		crc = binary.LittleEndian.Uint32(data[n-4:])
	}
	h := m.Header()
	return fmt.Sprintf(`"%s.%d.%08x"`, h.Incarnation, h.Version(), crc)
}

// readBody reads r's body, at most max bytes, into a buffer sized by
// Content-Length when the client sent one (no doubling as it grows).
func readBody(w http.ResponseWriter, r *http.Request, max int64) ([]byte, error) {
	var buf bytes.Buffer
	if n := r.ContentLength; n > 0 && n <= max {
		buf.Grow(int(n) + bytes.MinRead)
	}
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, max))
	return buf.Bytes(), err
}

// projectSlots bound the HTTP project requests: reading places for
// bodies being received and projection slots for bodies being decoded
// and projected (Limits.MaxReading, Limits.MaxConcurrent).
type projectSlots struct {
	reading, project chan struct{}
}

func newProjectSlots(lim Limits) projectSlots {
	return projectSlots{reading: make(chan struct{}, lim.MaxReading), project: make(chan struct{}, lim.MaxConcurrent)}
}

// take waits for a place in c; false when the request ended first.
func take(c chan struct{}, r *http.Request) bool {
	select {
	case c <- struct{}{}:
		return true
	case <-r.Context().Done():
		return false
	}
}

// serveProject answers a project request against the model get returns:
// the body is received whole within lim.BodyTimeout holding a reading
// place, then decoded and projected holding a projection slot. A slow
// body thus never holds a projection slot, and at most MaxReading bodies
// and MaxConcurrent decoded requests are in memory at once.
func serveProject(w http.ResponseWriter, r *http.Request, lim Limits, slots projectSlots, score bool, get func(version uint64) (*snapshot.Model, error)) {
	if !take(slots.reading, r) {
		return
	}
	// Servers without per-request deadlines (a test's recorder) keep
	// their own; the service's do per request.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(lim.BodyTimeout))
	body, err := readBody(w, r, lim.MaxBytes)
	<-slots.reading
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeJSON(w, http.StatusRequestEntityTooLarge, map[string]string{"error": fmt.Sprintf("request body over %d bytes", lim.MaxBytes)})
		} else {
			writeJSON(w, http.StatusRequestTimeout, map[string]string{"error": fmt.Sprintf("request body not received within %s", lim.BodyTimeout)})
		}
		return
	}
	if !take(slots.project, r) {
		return
	}
	defer func() { <-slots.project }()
	var resp any
	if score {
		resp, err = scoreModel(body, lim, get)
	} else {
		resp, err = projectModel(body, lim, get)
	}
	if err != nil {
		httpErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}
