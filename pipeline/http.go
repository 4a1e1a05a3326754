package pipeline

import (
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/streamkpca/streamkpca/publish"
	"github.com/streamkpca/streamkpca/serve"
)

// startHTTP serves the model's API (serve.HTTPHandler), health,
// readiness, metrics and the status page (serve.Listen).
func (p *Pipeline) startHTTP() (*http.Server, error) {
	if p.cfg.HTTP.Addr == "off" {
		return nil, nil
	}
	ready := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Kafka first: without it no version comes, and the reason to give
		// is the brokers, not the missing version.
		var kafkaDown string
		if u, ok := p.in.src.(interface{ Unreachable() (time.Time, error) }); ok {
			if since, err := u.Unreachable(); !since.IsZero() {
				kafkaDown = fmt.Sprintf("kafka unreachable for %.0f s (%v)", time.Since(since).Seconds(), err)
				if m, _ := p.pub.cur.Get(); m == nil {
					http.Error(w, "no model version yet: "+kafkaDown+" (kafka.brokers)", http.StatusServiceUnavailable)
					return
				}
				if time.Since(since) >= unreachableNotReady {
					http.Error(w, kafkaDown+": the model is served but not learning", http.StatusServiceUnavailable)
					return
				}
			}
		}
		if since, err := p.in.registry.Since(); !since.IsZero() {
			down := fmt.Sprintf("the schema registry has not answered for %.0f s (check kafka.schema_registry.url, user, password_file and tls): %v; the stream waits for it", time.Since(since).Seconds(), err)
			if m, _ := p.pub.cur.Get(); m == nil || time.Since(since) >= unreachableNotReady {
				http.Error(w, down, http.StatusServiceUnavailable)
				return
			}
		}
		if m, _ := p.pub.cur.Get(); m == nil {
			msg := "no model version yet: waiting for the first batch of learner.batch messages (or learner.linger) from kafka.topic " + p.cfg.Kafka.Topic
			if h := p.Status().Hint; h != "" {
				msg += "; " + h
			}
			http.Error(w, msg, http.StatusServiceUnavailable)
			return
		}
		pubSince, pubErr := p.pub.dist.Down()
		if !pubSince.IsZero() && time.Since(pubSince) >= unreachableNotReady {
			http.Error(w, fmt.Sprintf("publishing to NATS has failed for %.0f s (check nats.url %s): %v; the model is learned and stored, not published",
				time.Since(pubSince).Seconds(), publish.RedactURL(p.cfg.NATS.URL), pubErr), http.StatusServiceUnavailable)
			return
		}
		dlq := p.deadLetters()
		if dlq != nil && dlq.Failing() {
			http.Error(w, "kafka.dead_letter_topic "+p.cfg.Kafka.DeadLetterTopic+" refuses writes and the spill is full (kafka.dead_letter_spill_bytes): snapshots wait until the dead letters are stored", http.StatusServiceUnavailable)
			return
		}
		if since, err := p.outputDown(); !since.IsZero() && time.Since(since) >= outputNotReady {
			http.Error(w, fmt.Sprintf("output.topic %s has refused the records for %.0f s (check output.brokers and the topic): %v; learning waits until they are stored",
				p.cfg.Output.Topic, time.Since(since).Seconds(), err), http.StatusServiceUnavailable)
			return
		}
		p.mu.Lock()
		behind := p.led.status.Behind
		p.mu.Unlock()
		if behind {
			// Still ready: the model is served and learns; the lag says
			// how far behind, and an operator adds capacity.
			fmt.Fprintf(w, "ready; falling behind kafka.topic %s whatever is shed: the lag grows (learner.target_load; output.topic scores every message)\n", p.cfg.Kafka.Topic)
			return
		}
		if n, _ := dlq.Spilled(); n > 0 {
			fmt.Fprintf(w, "ready; %d dead letters wait in the spill: kafka.dead_letter_topic %s refuses writes\n", n, p.cfg.Kafka.DeadLetterTopic)
			return
		}
		w.Write([]byte("ready\n"))
	})
	api := serve.HTTPHandler(p.cfg.Model, &p.pub.cur, serve.Limits{MaxVectors: p.cfg.HTTP.MaxVectors, MaxBytes: p.cfg.HTTP.MaxBodyBytes},
		serve.VersionOptions{Versions: p.pub.versions, CanPin: p.web.token != "", OnPin: p.tellWatchers})
	srv, ln, err := serve.Listen(serve.ServerConfig{
		Addr: p.cfg.HTTP.Addr, Token: p.web.token, ProtectAll: p.cfg.HTTP.ProtectAll,
		TLSCertFile: p.cfg.HTTP.TLSCertFile, TLSKeyFile: p.cfg.HTTP.TLSKeyFile,
		API: api, Instrument: p.met.instrumentAPI,
		Routes: map[string]http.Handler{
			"GET /healthz": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok\n")) }),
			"GET /readyz":  ready,
			"GET /metrics": promhttp.HandlerFor(p.met.reg, promhttp.HandlerOpts{}),
			"GET /{$}":     p.statusPage(time.Now()),
		},
	})
	if err != nil {
		return nil, fmt.Errorf("pipeline: http (http.addr, http.tls_cert_file/tls_key_file): %w", err)
	}
	p.mu.Lock()
	p.web.ln = ln
	p.mu.Unlock()
	p.log.Info().Str("http", ln.Addr().String()).Msg("serving HTTP: the status page, /v1/models/" + p.cfg.Model + ", /metrics")
	return srv, nil
}

// unreachableNotReady is how long the brokers may be unreachable before
// /readyz says so (a rebalance or a broker restart is shorter).
const unreachableNotReady = 30 * time.Second

// outputNotReady is how long the output topic may refuse records before
// /readyz says so (learning waits meanwhile).
const outputNotReady = 5 * time.Second
