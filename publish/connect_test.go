package publish

import "testing"

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
