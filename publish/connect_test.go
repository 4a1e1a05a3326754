package publish

import (
	"testing"
	"time"
)

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"nats://u:secret@h:4222":           "nats://redacted@h:4222",
		"nats://h1:4222,tls://a:b@h2:4222": "nats://h1:4222,tls://redacted@h2:4222",
		"nats://127.0.0.1:4222":            "nats://127.0.0.1:4222",
		"tls://only-user@host:1":           "tls://redacted@host:1",
	} {
		if got := redact(in); got != want {
			t.Errorf("redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestReconnectBacksOff: NATS reconnect attempts wait 1 s, doubling to
// 10 s (before: a fixed 1 s, and a warning a second for as long as NATS
// was down).
func TestReconnectBacksOff(t *testing.T) {
	want := []time.Duration{time.Second, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}
	for failed, w := range want {
		if got := reconnectDelay(int64(failed)); got != w {
			t.Errorf("after %d failed attempts: wait %v, want %v", failed, got, w)
		}
	}
}
