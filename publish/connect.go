package publish

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
)

// ConnectConfig is how to reach NATS: the servers and the credentials,
// secrets already read (the service's configs.NATS.ConnectConfig reads
// them from its settings and files).
type ConnectConfig struct {
	// URL is the server list, comma-separated.
	URL string
	// User and Password; Token; CredsFile (a .creds file); NKeyFile (an
	// nkey seed file): whichever the server wants, or none.
	User, Password, Token, CredsFile, NKeyFile string
	// TLS, if set, secures the connection.
	TLS *tls.Config
}

// Connect opens a NATS connection that keeps retrying in the background
// when the servers are unreachable.
func Connect(c ConnectConfig, log zerolog.Logger) (*nats.Conn, error) {
	// Reconnects back off, 1 s doubling to reconnectMax, and each failed
	// attempt is logged with the wait before the next (retry_in_ms): with
	// NATS down, a line every 10 s at most, not every second.
	var failed atomic.Int64
	opts := []nats.Option{
		nats.Name("streamkpca"), nats.MaxReconnects(-1), nats.RetryOnFailedConnect(true),
		// No reconnect buffer: a write made while disconnected fails at
		// once rather than reaching the server after the reconnect, when
		// the lease it was made under may belong to another service.
		nats.ReconnectBufSize(-1),
		nats.CustomReconnectDelay(func(int) time.Duration { return reconnectDelay(failed.Load()) }),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn().Err(err).Msg("NATS disconnected; reconnecting. Learning continues, except in cluster mode, where the group's steps wait for NATS")
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			failed.Store(0)
			log.Info().Str("url", nc.ConnectedUrlRedacted()).Msg("NATS reconnected")
		}),
		nats.ReconnectErrHandler(func(_ *nats.Conn, err error) {
			n := failed.Add(1)
			natsErr(log.With().Int64("retry_in_ms", reconnectDelay(n).Milliseconds()).Logger(), "NATS connection attempt failed; retrying", err)
		}),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { natsErr(log, "NATS error", err) }),
	}
	if c.User != "" {
		opts = append(opts, nats.UserInfo(c.User, c.Password))
	}
	if c.Token != "" {
		opts = append(opts, nats.Token(c.Token))
	}
	if c.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(c.CredsFile))
	}
	if c.NKeyFile != "" {
		o, err := nats.NkeyOptionFromSeed(c.NKeyFile)
		if err != nil {
			return nil, fmt.Errorf("publish: nats.nkey_file: %w", err)
		}
		opts = append(opts, o)
	}
	if c.TLS != nil {
		opts = append(opts, nats.Secure(c.TLS))
	}
	nc, err := nats.Connect(c.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("publish: connect to NATS at %s: %w", redact(c.URL), err)
	}
	return nc, nil
}

// RedactURL hides credentials in server URLs (nats://user:pass@host)
// before they reach a log line or an error.
func RedactURL(urls string) string { return redact(urls) }

func redact(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		if u, err := url.Parse(strings.TrimSpace(p)); err == nil && u.User != nil {
			u.User = url.User("redacted")
			parts[i] = u.String()
		}
	}
	return strings.Join(parts, ",")
}

// natsErr logs a NATS client error; an authorisation failure says which
// settings to check, since the client would otherwise show only
// "connection closed".
func natsErr(log zerolog.Logger, msg string, err error) {
	if err == nil {
		return
	}
	if errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) || strings.Contains(strings.ToLower(err.Error()), "authorization") {
		log.Error().Err(err).Msg("NATS refused the credentials (authorization violation): check nats.user/nats.password(_file), nats.token(_file), nats.creds_file or nats.nkey_file; publishing and the NATS API are down until they are fixed")
		return
	}
	log.Warn().Err(err).Msg(msg)
}

// reconnectMax bounds the wait between NATS reconnect attempts.
const reconnectMax = 10 * time.Second

// reconnectDelay is the wait after failed consecutive failed attempts:
// 1 s, 2 s, 4 s, 8 s, then reconnectMax.
func reconnectDelay(failed int64) time.Duration {
	if failed <= 0 {
		return time.Second
	}
	return min(time.Second<<min(failed-1, 4), reconnectMax)
}
