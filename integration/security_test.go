package integration

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"github.com/rs/zerolog"
	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl/scram"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/streamkpca/streamkpca/internal/devstack"
	"github.com/streamkpca/streamkpca/internal/logbuf"
	"github.com/streamkpca/streamkpca/internal/synth"
	"github.com/streamkpca/streamkpca/publish"
)

// selfSignedCA writes a CA certificate (PEM) to dir and returns it with a
// server certificate for 127.0.0.1 signed by it.
func selfSignedCA(t *testing.T, dir string) (caFile string, server tls.Certificate) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ca := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "streamkpca test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caFile = filepath.Join(dir, "ca.pem")
	os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644)
	return caFile, tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// TestTLSAndSASL: Kafka with TLS and SASL/SCRAM-SHA-256, NATS with TLS and
// user/password, certificates from a CA generated here: the service
// learns, publishes and serves over the secured connections; a NATS client
// without TLS cannot connect, nor can Kafka clients with a wrong password.
func TestTLSAndSASL(t *testing.T) {
	dir := t.TempDir()
	caFile, cert := selfSignedCA(t, dir)
	srvTLS := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	s, err := devstack.Start(devstack.Options{
		Dir: t.TempDir(), Topics: map[string]int32{"sec": 2},
		KafkaOptions: []kfake.Opt{kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", "svc", "kpw"), kfake.TLS(srvTLS)},
		NATSOptions: func(o *server.Options) {
			o.TLSConfig, o.TLS = srvTLS, true
			o.Username, o.Password = "svc", "npw"
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	pool := x509.NewCertPool()
	pem, _ := os.ReadFile(caFile)
	pool.AppendCertsFromPEM(pem)
	mech, _ := scram.Mechanism(scram.SHA256, "svc", "kpw")
	tr := &kafka.Transport{TLS: &tls.Config{RootCAs: pool}, SASL: mech}
	const n = 10_000
	err = devstack.Produce(context.Background(), devstack.HermiteJSON(synth.Hermite1D(), 1),
		devstack.ProduceOptions{Brokers: s.Brokers(), Topic: "sec", N: n, Transport: tr})
	if err != nil {
		t.Fatal(err)
	}
	cfg := config(s, "sec", t.TempDir())
	cfg.NATS.URL = "tls://" + s.NATSURL()[len("nats://"):]
	cfg.Kafka.TLS.Enabled, cfg.Kafka.TLS.CAFile = true, caFile
	cfg.Kafka.SASL.Mechanism, cfg.Kafka.SASL.User = "scram-sha-256", "svc"
	pwFile := filepath.Join(dir, "kafka-password")
	os.WriteFile(pwFile, []byte("kpw\n"), 0o600) // secrets from files
	cfg.Kafka.SASL.PasswordFile = pwFile
	cfg.NATS.TLS.Enabled, cfg.NATS.TLS.CAFile = true, caFile
	cfg.NATS.User, cfg.NATS.Password = "svc", "npw"
	r := start(t, cfg)
	waitFor(t, 2*time.Minute, "learning and publishing over TLS", func() bool {
		st := r.p.Status()
		return st.Samples == n && st.Published > 0
	})
	nc, err := nats.Connect(cfg.NATS.URL, nats.UserInfo("svc", "npw"), nats.RootCAs(caFile))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, _, err := publish.Latest(context.Background(), nc, publish.Config{Model: "hermite"}); err != nil {
		t.Errorf("TLS client: %v", err)
	}
	if bad, err := nats.Connect(s.NATSURL(), nats.UserInfo("svc", "npw"), nats.Timeout(2*time.Second)); err == nil {
		bad.Close()
		t.Error("a plain-text NATS client connected to the TLS server")
	}
	r.graceful(t)

	// A wrong Kafka password: the producer is refused.
	badMech, _ := scram.Mechanism(scram.SHA256, "svc", "wrong")
	err = devstack.Produce(context.Background(), devstack.HermiteJSON(synth.Hermite1D(), 2),
		devstack.ProduceOptions{Brokers: s.Brokers(), Topic: "sec", N: 10, Transport: &kafka.Transport{TLS: &tls.Config{RootCAs: pool}, SASL: badMech}})
	if err == nil {
		t.Error("a wrong SCRAM password was accepted")
	}
}

// TestHTTPSAndNkey: NATS authentication with an nkey seed file, and the
// HTTP server on TLS with every endpoint (health and metrics too) behind
// the bearer token (http.protect_all).
func TestHTTPSAndNkey(t *testing.T) {
	dir := t.TempDir()
	caFile, cert := selfSignedCA(t, dir)
	user, _ := nkeys.CreateUser()
	pub, _ := user.PublicKey()
	seed, _ := user.Seed()
	seedFile := filepath.Join(dir, "user.nk")
	os.WriteFile(seedFile, seed, 0o600)
	s := startStackWith(t, map[string]int32{"hs": 1}, func(o *server.Options) {
		o.Nkeys = []*server.NkeyUser{{Nkey: pub}}
	})
	produceHermite(t, s, "hs", 3_000, 1)
	certFile, keyFile := filepath.Join(dir, "srv.pem"), filepath.Join(dir, "srv.key")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}), 0o644)
	kb, _ := x509.MarshalECPrivateKey(cert.PrivateKey.(*ecdsa.PrivateKey))
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	cfg := config(s, "hs", t.TempDir())
	cfg.NATS.NKeyFile = seedFile
	cfg.HTTP.Token, cfg.HTTP.ProtectAll = "tok", true
	cfg.HTTP.TLSCertFile, cfg.HTTP.TLSKeyFile = certFile, keyFile
	r := start(t, cfg)
	waitFor(t, time.Minute, "publishing with the nkey", func() bool { return r.p.Status().Published > 0 })
	pool := x509.NewCertPool()
	pb, _ := os.ReadFile(caFile)
	pool.AppendCertsFromPEM(pb)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: 5 * time.Second}
	base := "https://" + r.p.HTTPAddr()
	for _, path := range []string{"/healthz", "/metrics", "/v1/models/hermite"} {
		resp, err := client.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s without token: %d, want 401 (protect_all)", path, resp.StatusCode)
		}
		req, _ := http.NewRequest("GET", base+path, nil)
		req.Header.Set("Authorization", "Bearer tok")
		resp, err = client.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Errorf("GET %s with token: %v %v", path, resp, err)
		}
		resp.Body.Close()
	}
	if resp, err := http.Get("http://" + r.p.HTTPAddr() + "/healthz"); err == nil && resp.StatusCode == 200 {
		t.Error("plain HTTP answered on the TLS port")
	}
	r.graceful(t)
}

// Defect: wrong NATS credentials were logged only as "nats: connection
// closed". The log names the authorisation failure and what to check.
func TestWrongNATSCredentialsNamed(t *testing.T) {
	s := startStackWith(t, map[string]int32{"cred": 1}, func(o *server.Options) { o.Username, o.Password = "svc", "npw" })
	var buf logbuf.Buffer
	log := zerolog.New(&buf)
	nc, err := publish.Connect(publish.ConnectConfig{URL: s.NATSURL(), User: "svc", Password: "wrong"}, log)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	waitFor(t, 10*time.Second, "an authorisation error in the log", func() bool {
		return strings.Contains(buf.String(), "NATS refused the credentials")
	})
	if strings.Contains(buf.String(), "wrong") {
		t.Error("the password reached the log")
	}
}
