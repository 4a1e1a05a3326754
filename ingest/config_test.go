package ingest

import (
	"bytes"
	"crypto/tls"
	"strings"
	"testing"

	"github.com/segmentio/kafka-go/sasl/plain"
)

// A consumer's settings are refused with the key they name, and the
// dialer and transport carry the TLS settings and SASL mechanism asked
// for (with its credentials, which no error message repeats).
func TestConsumerConfigChecksAndCarriesItsSettings(t *testing.T) {
	good := ConsumerConfig{Brokers: []string{"k:9092"}, Topic: "t"}
	for _, tc := range []struct {
		change func(*ConsumerConfig)
		key    string
	}{
		{func(c *ConsumerConfig) { c.Brokers = nil }, "kafka.brokers"},
		{func(c *ConsumerConfig) { c.Topic = "" }, "kafka.topic"},
		{func(c *ConsumerConfig) { c.Start = "middle" }, "kafka.start"},
		{func(c *ConsumerConfig) { c.SASLMechanism, c.SASLPassword = "gssapi", "s3cret" }, "kafka.sasl.mechanism"},
	} {
		c := good
		tc.change(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%+v: %v, want an error naming %s", c, err, tc.key)
		} else if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("the error repeats the password: %v", err)
		}
		if _, derr := c.Dialer(); tc.key == "kafka.sasl.mechanism" && derr == nil {
			t.Error("a dialer made with an unknown SASL mechanism")
		}
	}
	for _, start := range []string{"", StartEarliest, StartLatest} {
		c := good
		c.Start = start
		if err := c.Validate(); err != nil {
			t.Errorf("start %q: %v", start, err)
		}
	}
	c := good
	c.TLS = &tls.Config{ServerName: "k"}
	c.SASLMechanism, c.SASLUser, c.SASLPassword = "plain", "u", "p"
	d, err := c.Dialer()
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := d.SASLMechanism.(plain.Mechanism); !ok || m.Username != "u" || m.Password != "p" || d.TLS != c.TLS {
		t.Errorf("dialer: mechanism %#v, TLS %v", d.SASLMechanism, d.TLS)
	}
	tr, err := c.Transport()
	if err != nil || tr.SASL == nil || tr.SASL.Name() != "PLAIN" || tr.TLS != c.TLS {
		t.Errorf("transport: %v, %v", tr, err)
	}
	for _, m := range []string{"scram-sha-256", "scram-sha-512"} {
		c.SASLMechanism = m
		d, err := c.Dialer()
		if err != nil || d.SASLMechanism == nil || !strings.EqualFold(d.SASLMechanism.Name(), m) {
			t.Errorf("%s: %v, %v", m, d, err)
		}
	}
}

// FileFormat: the format given wins; otherwise the extension (any case)
// says; standard input and anything else are csv.
func TestFileFormatFromTheExtension(t *testing.T) {
	for _, tc := range []struct {
		path   string
		format Format
		want   Format
	}{
		{"a.csv", "", FormatCSV},
		{"a.JSONL", "", FormatJSON},
		{"a.ndjson", "", FormatJSON},
		{"a.json", "", FormatJSON},
		{"a.f32le", "", FormatF32LE},
		{"a.F64", "", FormatF64LE},
		{"a.txt", "", FormatCSV},
		{"-", "", FormatCSV},
		{"a.csv", "jsonl", FormatJSON},
		{"a.json", FormatF64LE, FormatF64LE},
	} {
		if got := FileFormat(tc.path, tc.format); got != tc.want {
			t.Errorf("FileFormat(%q, %q) = %q, want %q", tc.path, tc.format, got, tc.want)
		}
	}
}

// ReadAll names the bad record: a raw input cut inside a record, a csv
// line of another width, and takes a first csv line that does not parse
// as a header only on the first line.
func TestReadAllNamesTheBadRecord(t *testing.T) {
	if _, _, _, err := ReadAll(bytes.NewReader(make([]byte, 8*3+5)), FormatF64LE, 3); err == nil || !strings.Contains(err.Error(), "record 2") {
		t.Errorf("a raw input cut inside record 2: %v", err)
	}
	if _, _, _, err := ReadAll(strings.NewReader("1,2\n3,4\n5\n"), FormatCSV, 0); err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Errorf("a short third line: %v", err)
	}
	if _, _, _, err := ReadAll(strings.NewReader("1,2\nx,y\n"), FormatCSV, 0); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("a header on the second line: %v", err)
	}
	x, rows, d, err := ReadAll(strings.NewReader("a,b\n1,2\n\n3,4\n"), FormatCSV, 0)
	if err != nil || rows != 2 || d != 2 || len(x) != 4 || x[3] != 4 {
		t.Errorf("header, rows and a blank line: %v %d %d %v", x, rows, d, err)
	}
}
