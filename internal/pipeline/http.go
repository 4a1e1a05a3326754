package pipeline

import (
	"crypto/subtle"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/streamkpca/streamkpca/publish"
)

func (p *Pipeline) startHTTP() (*http.Server, error) {
	if p.cfg.HTTP.Addr == "off" {
		return nil, nil
	}
	tok := p.httpToken
	want := []byte("Bearer " + tok)
	guard := func(h http.Handler) http.Handler {
		if tok == "" {
			return h
		}
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
	open := func(h http.Handler) http.Handler {
		if p.cfg.HTTP.ProtectAll {
			return guard(h)
		}
		return h
	}
	mux := http.NewServeMux()
	mux.Handle("GET /healthz", open(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok\n")) })))
	mux.Handle("GET /readyz", open(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if m, _ := p.cur.Get(); m == nil {
			http.Error(w, "no model version yet", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ready\n"))
	})))
	mux.Handle("GET /metrics", open(promhttp.HandlerFor(p.reg, promhttp.HandlerOpts{})))
	mux.Handle("GET /{$}", open(p.statusPage(time.Now())))
	mux.Handle("/v1/", p.met.instrumentAPI(guard(publish.HTTPHandler(p.cfg.Model, &p.cur, publish.Limits{MaxVectors: p.cfg.HTTP.MaxVectors, MaxBytes: p.cfg.HTTP.MaxBodyBytes},
		publish.VersionOptions{Versions: publish.StoreVersions{Store: p.store}, CanPin: tok != "", OnPin: p.tellWatchers}))))
	ln, err := net.Listen("tcp", p.cfg.HTTP.Addr)
	if err != nil {
		return nil, fmt.Errorf("pipeline: http.addr %s: %w", p.cfg.HTTP.Addr, err)
	}
	p.mu.Lock()
	p.httpLn = ln
	p.mu.Unlock()
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 60 * time.Second}
	if c, k := p.cfg.HTTP.TLSCertFile, p.cfg.HTTP.TLSKeyFile; c != "" {
		cert, err := tls.LoadX509KeyPair(c, k)
		if err != nil {
			ln.Close()
			return nil, fmt.Errorf("pipeline: http.tls_cert_file/tls_key_file: %w", err)
		}
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		go srv.ServeTLS(ln, "", "")
		return srv, nil
	}
	go srv.Serve(ln)
	return srv, nil
}
