package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/streamkpca/streamkpca/publish"
	"github.com/streamkpca/streamkpca/snapshot"
)

// errForbidden marks a refused operator action (HTTP 403, micro code 403);
// errUnavailable one that could not be applied now (HTTP 503, code 503).
var (
	errForbidden   = errors.New("forbidden")
	errUnavailable = errors.New("unavailable")
)

// pin applies a pin request body {"version": v}: v > 0 pins that stored
// version, 0 unpins. It returns the pinned version (0: none).
func pin(cur *Current, opt VersionOptions, body []byte) (uint64, error) {
	if !opt.CanPin || opt.Versions == nil {
		return 0, fmt.Errorf("%w: pinning is not enabled here (HTTP: put the API behind http.token; NATS: nats.allow_pin)", errForbidden)
	}
	var req struct {
		Version *uint64 `json:"version"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || req.Version == nil {
		return 0, fmt.Errorf("%w: body must be {\"version\": N} (0 unpins)", errBadRequest)
	}
	// One pin at a time: two requests racing must not leave the NATS key
	// saying one version and this server serving the other.
	cur.pinMu.Lock()
	defer cur.pinMu.Unlock()
	if *req.Version == 0 {
		if opt.OnPin != nil {
			if err := opt.OnPin(nil, nil); err != nil {
				return 0, fmt.Errorf("%w: unpin not applied: %w", errUnavailable, err)
			}
		}
		cur.Unpin()
		return 0, nil
	}
	m, data, err := opt.Versions.Load(*req.Version)
	if err != nil {
		return 0, err
	}
	if opt.OnPin != nil {
		if err := opt.OnPin(m, data); err != nil {
			return 0, fmt.Errorf("%w: pin not applied: %w", errUnavailable, err)
		}
	}
	cur.Pin(m, data)
	return *req.Version, nil
}

// VersionOptions enable the version routes of HTTPHandler.
type VersionOptions struct {
	// Versions lists and loads stored versions; nil leaves the routes out.
	Versions publish.Versions
	// CanPin allows PUT/DELETE …/pin. The service sets it only when the
	// API is behind a token: pinning is an operator's switch.
	CanPin bool
	// OnPin, if set, is called before a pin (m: the version) or an unpin
	// (m nil) takes effect; an error cancels it. The service uses it to
	// tell every Watch (Publisher.Pin, Publisher.Unpin).
	OnPin func(m *snapshot.Model, data []byte) error
}

// addVersionRoutes adds, under base (/v1/models/<model>):
//
//	GET    …/versions                      {"versions": [VersionInfo…], "pinned": v (0: none)}
//	GET    …/versions/{version}/snapshot   that version's bytes
//	POST   …/versions/{version}/project    project with that version
//	POST   …/versions/{version}/score      score with that version
//	PUT    …/pin  {"version": v}           serve v instead of the newest
//	DELETE …/pin                           serve the newest again
//
// holdWait bounds a download's wait for room among those under way
// (503 with Retry-After past it).
const holdWait = 10 * time.Second

// holder is a Versions whose versions a request holds within a bound
// (publish.StoreVersions).
type holder interface {
	Hold(ctx context.Context, version uint64) (*snapshot.Model, []byte, func(), error)
}

func addVersionRoutes(mux *http.ServeMux, base string, cur *Current, opt VersionOptions, lim Limits, slots projectSlots) {
	vs := opt.Versions
	load := func(r *http.Request) (*snapshot.Model, []byte, error) {
		v, err := strconv.ParseUint(r.PathValue("version"), 10, 64)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: version %q is not a number", errBadRequest, r.PathValue("version"))
		}
		return vs.Load(v)
	}
	mux.HandleFunc("GET "+base+"/versions", func(w http.ResponseWriter, r *http.Request) {
		list, err := vs.List()
		if err != nil {
			httpErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"versions": list, "pinned": cur.Pinned()})
	})
	mux.HandleFunc("GET "+base+"/versions/{version}/snapshot", func(w http.ResponseWriter, r *http.Request) {
		hv, ok := vs.(holder)
		if !ok {
			m, data, err := load(r)
			if err != nil {
				httpErr(w, err)
				return
			}
			serveSnapshot(w, r, m, data)
			return
		}
		// Held until written: a slow reader keeps its version in memory,
		// within the versions' bound (publish.StoreVersions.HoldBytes).
		v, err := strconv.ParseUint(r.PathValue("version"), 10, 64)
		if err != nil {
			httpErr(w, fmt.Errorf("%w: version %q is not a number", errBadRequest, r.PathValue("version")))
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), holdWait)
		m, data, release, err := hv.Hold(ctx, v)
		cancel()
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) && r.Context().Err() == nil {
				w.Header().Set("Retry-After", "5")
				err = fmt.Errorf("%w: too many version downloads under way; retry", errUnavailable)
			}
			httpErr(w, err)
			return
		}
		defer release()
		serveSnapshot(w, r, m, data)
	})
	for _, kind := range []string{"project", "score"} {
		mux.HandleFunc("POST "+base+"/versions/{version}/"+kind, func(w http.ResponseWriter, r *http.Request) {
			serveProject(w, r, lim, slots, kind == "score", func(version uint64) (*snapshot.Model, error) {
				if version != 0 {
					return nil, fmt.Errorf("%w: the version is in the path; leave \"version\" out of the body", errBadRequest)
				}
				m, _, err := load(r)
				return m, err
			})
		})
	}
	mux.HandleFunc("PUT "+base+"/pin", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 4096))
		if v, err := pin(cur, opt, body); err != nil {
			httpErr(w, err)
		} else {
			writeJSON(w, http.StatusOK, map[string]uint64{"pinned": v})
		}
	})
	mux.HandleFunc("DELETE "+base+"/pin", func(w http.ResponseWriter, r *http.Request) {
		if _, err := pin(cur, opt, []byte(`{"version":0}`)); err != nil {
			httpErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]uint64{"pinned": 0})
	})
}
