package serve

import (
	"crypto/subtle"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"time"
)

// ServerConfig configures Listen: the HTTP server that serves a model.
type ServerConfig struct {
	// Addr is the listen address, e.g. "127.0.0.1:8080" (":0" for any
	// free port).
	Addr string
	// Token, when set, guards the API: every request under /v1/ must carry
	// "Authorization: Bearer <Token>" (compared in constant time) or gets
	// 401 with a JSON error. An empty Token leaves the API open.
	Token string
	// ProtectAll puts the other routes (Routes) behind the token too.
	// Listen refuses it without a Token: nothing fails open.
	ProtectAll bool
	// TLSCertFile and TLSKeyFile, when set, serve HTTPS (TLS 1.2 or later).
	TLSCertFile, TLSKeyFile string
	// API is mounted at /v1/ (HTTPHandler), always behind the token.
	API http.Handler
	// Instrument, if set, wraps the guarded API, so that it sees the
	// requests the token refuses too (metrics).
	Instrument func(http.Handler) http.Handler
	// Routes are the other routes, by ServeMux pattern ("GET /healthz").
	Routes map[string]http.Handler
}

// Listen starts serving cfg on its own goroutine and returns the server
// (Close or Shutdown it) and its listener (Addr gives the bound address).
// The server bounds header, read and write times so that a slow client
// cannot hold a connection for good.
func Listen(cfg ServerConfig) (*http.Server, net.Listener, error) {
	if cfg.ProtectAll && cfg.Token == "" {
		return nil, nil, fmt.Errorf("serve: protect_all without a token would leave every route open")
	}
	mux := http.NewServeMux()
	for pattern, h := range cfg.Routes {
		if cfg.ProtectAll {
			h = bearer(cfg.Token, h)
		}
		mux.Handle(pattern, h)
	}
	if cfg.API != nil {
		api := bearer(cfg.Token, cfg.API)
		if cfg.Instrument != nil {
			api = cfg.Instrument(api)
		}
		mux.Handle("/v1/", api)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 60 * time.Second}
	var cert tls.Certificate
	if cfg.TLSCertFile != "" || cfg.TLSKeyFile != "" {
		var err error
		if cert, err = tls.LoadX509KeyPair(cfg.TLSCertFile, cfg.TLSKeyFile); err != nil {
			return nil, nil, fmt.Errorf("serve: TLS certificate and key: %w", err)
		}
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, nil, fmt.Errorf("serve: listen on %s: %w", cfg.Addr, err)
	}
	if cfg.TLSCertFile != "" {
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		go srv.ServeTLS(ln, "", "")
	} else {
		go srv.Serve(ln)
	}
	return srv, ln, nil
}

// bearer passes requests that carry "Authorization: Bearer <token>" to h
// and answers 401 to the rest; an empty token passes everything.
func bearer(token string, h http.Handler) http.Handler {
	if token == "" {
		return h
	}
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"error":"missing or wrong bearer token"}` + "\n"))
			return
		}
		h.ServeHTTP(w, r)
	})
}
