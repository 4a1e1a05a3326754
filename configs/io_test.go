package configs

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// writePEM writes a self-signed certificate and its key as PEM files in
// dir and returns their paths.
func writePEM(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "streamkpca-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// TLS settings load a CA and a client certificate, refuse unusable files
// by the setting's name, and are nil when TLS is off.
func TestTLSConfig(t *testing.T) {
	dir := t.TempDir()
	cert, key := writePEM(t, dir)
	if c, err := (TLS{CAFile: cert}).Config(); c != nil || err != nil {
		t.Errorf("TLS off: %v, %v; want nil, nil", c, err)
	}
	c, err := TLS{Enabled: true, CAFile: cert, CertFile: cert, KeyFile: key}.Config()
	if err != nil {
		t.Fatal(err)
	}
	if c.MinVersion != tls.VersionTLS12 || c.RootCAs == nil || len(c.Certificates) != 1 || c.InsecureSkipVerify {
		t.Errorf("config %+v", c)
	}
	junk := filepath.Join(dir, "junk.pem")
	if err := os.WriteFile(junk, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tls  TLS
		want string
	}{
		{TLS{Enabled: true, CAFile: filepath.Join(dir, "missing.pem")}, "ca_file"},
		{TLS{Enabled: true, CAFile: junk}, "ca_file holds no PEM certificate"},
		{TLS{Enabled: true, CertFile: cert}, "client certificate"},
		{TLS{Enabled: true, CertFile: cert, KeyFile: junk}, "client certificate"},
	} {
		if _, err := tc.tls.Config(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error with %q", tc.tls, err, tc.want)
		}
	}
}

// NATS credentials come from their files, trimmed; an empty secret file
// stops start-up (never a connection without the token), and no error
// holds the secret.
func TestNATSConnectConfigReadsSecrets(t *testing.T) {
	dir := t.TempDir()
	pass, tok, empty := filepath.Join(dir, "p"), filepath.Join(dir, "t"), filepath.Join(dir, "e")
	for p, s := range map[string]string{pass: "pw-secret\n", tok: "  tok-secret \n", empty: "\n \n"} {
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cc, err := NATS{URL: "nats://a:4222", User: "u", PasswordFile: pass, TokenFile: tok}.ConnectConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cc.URL != "nats://a:4222" || cc.User != "u" || cc.Password != "pw-secret" || cc.Token != "tok-secret" || cc.TLS != nil {
		t.Errorf("connect config %+v", cc)
	}
	for _, n := range []NATS{{PasswordFile: pass, TokenFile: empty}, {TokenFile: tok, PasswordFile: empty},
		{PasswordFile: pass, TokenFile: filepath.Join(dir, "missing")}, {TokenFile: tok, TLS: TLS{Enabled: true, CAFile: empty}}} {
		if _, err := n.ConnectConfig(); err == nil || strings.Contains(err.Error(), "-secret") {
			t.Errorf("%+v: %v, want an error that holds no secret", n, err)
		}
	}
}

// The logger writes JSON at and above its level (info for an unknown or
// empty one: an empty level used to drop every message) and a console
// format for people.
func TestLoggerLevelAndFormat(t *testing.T) {
	var b bytes.Buffer
	l := Log{Level: "warn", Format: "json"}.Logger(&b)
	l.Info().Msg("quiet")
	l.Warn().Str("k", "v").Msg("heard")
	var rec map[string]any
	if err := json.Unmarshal(b.Bytes(), &rec); err != nil || rec["level"] != "warn" || rec["message"] != "heard" || rec["k"] != "v" || rec["time"] == nil {
		t.Errorf("json: %q (%v)", b.String(), err)
	}
	b.Reset()
	l = Log{Level: "loud"}.Logger(&b) // not a terminal: json; unknown level: info
	l.Debug().Msg("quiet")
	l.Info().Msg("heard")
	if !strings.Contains(b.String(), `"level":"info"`) || strings.Contains(b.String(), "quiet") {
		t.Errorf("unknown level: %q", b.String())
	}
	b.Reset()
	l = Log{Format: "console"}.Logger(&b)
	l.Info().Msg("heard")
	if s := b.String(); !strings.Contains(s, "heard") || strings.HasPrefix(s, "{") {
		t.Errorf("console: %q", s)
	}
}

// Load reads a file, refusing a key it does not know (naming it and the
// file) and a malformed --set; no file and no settings is the defaults.
func TestLoadFileAndSets(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("learner:\n  kk: 5\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(bad, nil); err == nil || !strings.Contains(err.Error(), "kk") || !strings.Contains(err.Error(), bad) {
		t.Errorf("unknown key: %v", err)
	}
	if _, err := Load(filepath.Join(dir, "missing.yaml"), nil); err == nil {
		t.Error("a missing file loaded")
	}
	for _, set := range []string{"learner.k", "=5", "learner.k=five"} {
		if _, err := Load("", nil, set); err == nil || !strings.Contains(err.Error(), "set") {
			t.Errorf("--set %q: %v", set, err)
		}
	}
	good := filepath.Join(dir, "good.yaml")
	if err := os.WriteFile(good, []byte("learner:\n  k: 7\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(good, []string{"STREAMKPCA_LEARNER_K=8"}, "learner.k=9")
	if err != nil || c.Learner.K != 9 {
		t.Errorf("file 7, environment 8, --set 9: k = %d (%v), want 9", c.Learner.K, err)
	}
	c, err = Load("", nil)
	if err != nil || !reflect.DeepEqual(c, Default()) {
		t.Errorf("nothing given: %v; want the defaults", err)
	}
}

// The Schema Registry's settings: none for the formats that need none; a
// password file that is empty or missing stops start-up naming it; two
// views over a registry format are accepted.
func TestSchemaRegistrySettings(t *testing.T) {
	k := Default().Kafka
	if r, err := k.Registry(); r != nil || err != nil {
		t.Fatalf("json: %v, %v; want no registry", r, err)
	}
	k.Format, k.SchemaRegistry.URL = "avro", "http://a:8081, http://b:8081"
	if r, err := k.Registry(); r == nil || err != nil {
		t.Fatalf("avro: %v, %v", r, err)
	}
	blank := filepath.Join(t.TempDir(), "blank")
	os.WriteFile(blank, []byte("\n"), 0o600)
	for _, f := range []string{blank, blank + ".missing"} {
		k.SchemaRegistry.PasswordFile = f
		if _, err := k.Registry(); err == nil || !strings.Contains(err.Error(), "kafka.schema_registry.password_file") {
			t.Errorf("password file %s: %v; want an error naming kafka.schema_registry.password_file", f, err)
		}
	}
	if _, err := Load("", nil, "kafka.format=jsonschema", "kafka.schema_registry.url=http://r:8081", "learner.algorithm=kcca"); err != nil {
		t.Errorf("kcca over jsonschema: %v", err)
	}
}
