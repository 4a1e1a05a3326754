package publish

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/rs/zerolog"

	"github.com/streamkpca/streamkpca/internal/devstack"
	"github.com/streamkpca/streamkpca/internal/logbuf"
	"github.com/streamkpca/streamkpca/internal/testkit"
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

// TestConnectWithEachCredential: a server that wants a user and password,
// or a token, is reached with them; with a wrong password the connection
// never comes up, the log says which settings to check and never holds
// the password; a missing nkey seed is an error naming its setting.
func TestConnectWithEachCredential(t *testing.T) {
	for _, tc := range []struct {
		name   string
		server func(*server.Options)
		cc     ConnectConfig
		ok     bool
	}{
		{"user", func(o *server.Options) { o.Username, o.Password = "svc", "s3cret-pw" }, ConnectConfig{User: "svc", Password: "s3cret-pw"}, true},
		{"token", func(o *server.Options) { o.Authorization = "t0ken-xyz" }, ConnectConfig{Token: "t0ken-xyz"}, true},
		{"wrong password", func(o *server.Options) { o.Username, o.Password = "svc", "s3cret-pw" }, ConnectConfig{User: "svc", Password: "wrong-pw-123"}, false},
		{"no credentials", func(o *server.Options) { o.Authorization = "t0ken-xyz" }, ConnectConfig{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stack, err := devstack.StartNATSOnly(t.TempDir(), tc.server)
			if err != nil {
				t.Fatal(err)
			}
			defer stack.Close()
			tc.cc.URL = stack.NATSURL()
			var logs logbuf.Buffer
			nc, err := Connect(tc.cc, zerolog.New(&logs))
			if err != nil {
				t.Fatalf("Connect: %v (it retries in the background instead)", err)
			}
			defer nc.Close()
			if tc.ok {
				testkit.WaitFor(t, "connected", nc.IsConnected)
				return
			}
			testkit.WaitFor(t, "the refusal logged", func() bool { return strings.Contains(logs.String(), "NATS refused the credentials") })
			if nc.IsConnected() {
				t.Error("connected with wrong credentials")
			}
			if l := logs.String(); strings.Contains(l, "wrong-pw-123") || strings.Contains(l, "s3cret-pw") || !strings.Contains(l, "nats.user/nats.password") {
				t.Errorf("log %s: want the settings named and no password", l)
			}
		})
	}
	_, err := Connect(ConnectConfig{URL: "nats://127.0.0.1:1", NKeyFile: filepath.Join(t.TempDir(), "missing.nk")}, zerolog.Nop())
	if err == nil || !strings.Contains(err.Error(), "nats.nkey_file") {
		t.Errorf("missing nkey seed: %v, want an error naming nats.nkey_file", err)
	}
}

// TestConnectToNothingRetries: with no server, Connect returns a
// connection that keeps trying (the service starts and learns while NATS
// is down), and the log line of a failed attempt says when the next one
// comes and holds no credentials of the URL.
func TestConnectToNothingRetries(t *testing.T) {
	var logs logbuf.Buffer
	nc, err := Connect(ConnectConfig{URL: "nats://svc:urlpass@127.0.0.1:1"}, zerolog.New(&logs))
	if err != nil {
		t.Fatalf("Connect with no server: %v; want a connection that retries", err)
	}
	defer nc.Close()
	testkit.WaitFor(t, "a failed attempt logged", func() bool { return strings.Contains(logs.String(), "retry_in_ms") })
	if nc.IsConnected() || strings.Contains(logs.String(), "urlpass") {
		t.Errorf("connected %v; log %s", nc.IsConnected(), logs.String())
	}
}

// Defect (issue 58, "no reconnect buffer"): while disconnected, nats.go
// queued publishes (8 MiB by default) and sent them after the reconnect:
// a write the service made as the lease's owner could reach the server
// after the lease had passed to another — a frozen owner's write by
// another name. Now a publish while disconnected fails at once, and the
// caller (a publish, a step) retries knowing it was not sent.
func TestAPublishWhileDisconnectedIsNotQueued(t *testing.T) {
	stack, err := devstack.StartNATSOnly(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stack.Close()
	nc, err := Connect(ConnectConfig{URL: stack.NATSURL()}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	deadline := time.Now().Add(10 * time.Second)
	for !nc.IsConnected() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	stack.StopNATS()
	for !nc.IsReconnecting() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !nc.IsReconnecting() {
		t.Fatal("the connection did not notice the server stopped")
	}
	if err := nc.Publish("m.updates", []byte("a write as the owner")); err == nil {
		t.Fatal("a publish while disconnected was queued, to be sent after the reconnect whoever owns the lease then")
	}
}
