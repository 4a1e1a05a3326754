package serve

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestListenGuards: with a token, the API answers 401 without the bearer
// header (or with a wrong one) and serves it with the right one; the
// other routes are open unless ProtectAll; ProtectAll without a token is
// refused, not served open; Instrument sees refused requests.
func TestListenGuards(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	get := func(url, auth string) int {
		req, _ := http.NewRequest("GET", url, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, protectAll := range []bool{false, true} {
		var seen []int
		srv, ln, err := Listen(ServerConfig{Addr: "127.0.0.1:0", Token: "s3cret", ProtectAll: protectAll, API: ok,
			Routes: map[string]http.Handler{"GET /healthz": ok},
			Instrument: func(h http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					sw := &codeWriter{ResponseWriter: w, code: 200}
					h.ServeHTTP(sw, r)
					seen = append(seen, sw.code)
				})
			}})
		if err != nil {
			t.Fatal(err)
		}
		base := "http://" + ln.Addr().String()
		for _, c := range []struct {
			path, auth string
			want       int
		}{
			{"/v1/models", "", 401}, {"/v1/models", "Bearer wrong", 401}, {"/v1/models", "Bearer s3cret", 200},
			{"/healthz", "", map[bool]int{false: 200, true: 401}[protectAll]}, {"/healthz", "Bearer s3cret", 200},
		} {
			if got := get(base+c.path, c.auth); got != c.want {
				t.Errorf("protect_all %v: GET %s with %q: %d, want %d", protectAll, c.path, c.auth, got, c.want)
			}
		}
		if len(seen) != 3 || seen[0] != 401 || seen[2] != 200 {
			t.Errorf("Instrument saw %v, want the three API requests, refusals included", seen)
		}
		srv.Close()
	}
	if _, _, err := Listen(ServerConfig{Addr: "127.0.0.1:0", ProtectAll: true, API: ok}); err == nil || !strings.Contains(err.Error(), "token") {
		t.Errorf("protect_all without a token: %v, want a refusal", err)
	}
	if _, _, err := Listen(ServerConfig{Addr: "127.0.0.1:0", TLSCertFile: "/nonexistent.pem", TLSKeyFile: "/nonexistent.key", API: ok}); err == nil {
		t.Error("a missing TLS certificate was accepted")
	}
}

type codeWriter struct {
	http.ResponseWriter
	code int
}

func (w *codeWriter) WriteHeader(c int) { w.code = c; w.ResponseWriter.WriteHeader(c) }
