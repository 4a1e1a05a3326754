package ingest

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/streamkpca/streamkpca/internal/testkit"
)

func registryDecoder(t *testing.T, format Format, url string) *Decoder {
	t.Helper()
	reg, err := NewRegistry(RegistryConfig{URLs: []string{url}})
	if err != nil {
		t.Fatal(err)
	}
	d := &Decoder{Format: format, Registry: reg}
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	return d
}

// Each Schema Registry format, produced as a producer's serializer does
// (schema registered through the registry client, the Confluent wire
// format), decodes to the values the json format reads from the same
// numbers, bit for bit; x alone for one view, x and y for two.
func TestRegistryFormatsDecodeAsJSON(t *testing.T) {
	reg := testkit.NewRegistry(t)
	rng := rand.New(rand.NewPCG(1, 2))
	row := func(n int) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = rng.NormFloat64() * math.Pow(10, float64(rng.IntN(20)-10))
		}
		return v
	}
	for _, format := range []Format{FormatAvro, FormatProtobuf, FormatJSONSchema} {
		t.Run(string(format), func(t *testing.T) {
			for _, oneView := range []bool{true, false} {
				d := registryDecoder(t, format, reg.URL())
				d.OneView = oneView
				js := &Decoder{Format: FormatJSON, OneView: oneView}
				for range 50 {
					x, y := row(7), row(3)
					gx, gy, err := d.Decode(nil, nil, reg.Encode(t, string(format), 0, x, y))
					if err != nil {
						t.Fatalf("one view %v: %v", oneView, err)
					}
					wx, wy, err := js.Decode(nil, nil, testkit.JSONRow(x, y))
					if err != nil {
						t.Fatal(err)
					}
					if !bitsEqual(gx, wx) || !bitsEqual(gy, wy) || !bitsEqual(gx, x) {
						t.Fatalf("one view %v: got x %v y %v, json gives x %v y %v", oneView, gx, gy, wx, wy)
					}
					if oneView != (len(gy) == 0) {
						t.Fatalf("one view %v: y %v", oneView, gy)
					}
				}
			}
		})
	}
}

func bitsEqual(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			return false
		}
	}
	return true
}

// Every message the registry cannot explain is refused with its reason,
// and what it says names the setting to check.
func TestRegistryRefusals(t *testing.T) {
	reg := testkit.NewRegistry(t)
	avroMsg := reg.Encode(t, "avro", 0, []float64{1, 2}, nil)
	cases := []struct {
		name   string
		format Format
		field  string
		msg    []byte
		reason string
		says   string
	}{
		{"json sent to avro", FormatAvro, "", []byte(`[1,2,3]`), ReasonMalformed, "kafka.format"},
		{"unknown schema id", FormatAvro, "", reg.Encode(t, "avro", 999, []float64{1}, nil), ReasonSchema, "no such schema"},
		{"avro id read as protobuf", FormatProtobuf, "", avroMsg, ReasonSchema, "kafka.format is protobuf"},
		{"jsonschema id read as avro", FormatAvro, "", reg.Encode(t, "jsonschema", 0, []float64{1}, nil), ReasonSchema, "kafka.format is avro"},
		{"truncated avro", FormatAvro, "", avroMsg[:len(avroMsg)-3], ReasonMalformed, "avro value"},
		{"no such field", FormatAvro, "features", avroMsg, ReasonDimension, "kafka.schema_registry.field"},
		{"value against its schema", FormatJSONSchema, "",
			append(reg.Encode(t, "jsonschema", 0, nil, nil)[:5], `{"x":["1"]}`...), ReasonSchema, "does not match"},
		{"json schema, not json", FormatJSONSchema, "", append(reg.Encode(t, "jsonschema", 0, nil, nil)[:5], `{"x":`...), ReasonMalformed, "json value"},
		{"protobuf index past the file", FormatProtobuf, "", append(reg.Encode(t, "protobuf", 0, nil, nil)[:5], 2, 18, 0), ReasonSchema, "no message at index"},
		{"protobuf field of strings", FormatProtobuf, "name", append(reg.Encode(t, "protobuf", 0, nil, nil)[:5], 0), ReasonDimension, "not a repeated field"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := registryDecoder(t, c.format, reg.URL())
			d.Field = c.field
			_, _, err := d.Decode(nil, nil, c.msg)
			if Reason(err) != c.reason || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("err %v (reason %q), want reason %q saying %q", err, Reason(err), c.reason, c.says)
			}
		})
	}
}

// A nested field path reads a record inside the value.
func TestRegistryFieldPath(t *testing.T) {
	fake := testkit.NewRegistry(t)
	cl, err := sr.NewClient(sr.URLs(fake.URL()))
	if err != nil {
		t.Fatal(err)
	}
	ss, err := cl.CreateSchema(t.Context(), "nested-value", sr.Schema{Type: sr.TypeJSON, Schema: `{"type":"object"}`})
	if err != nil {
		t.Fatal(err)
	}
	var hdr sr.ConfluentHeader
	msg, _ := hdr.AppendEncode(nil, ss.ID, nil)
	msg = append(msg, `{"sensor":{"id":"a7","values":[1.5,-2,3e-7]}}`...)
	d := registryDecoder(t, FormatJSONSchema, fake.URL())
	d.Field = "sensor.values"
	x, _, err := d.Decode(nil, nil, msg)
	if err != nil || !bitsEqual(x, []float64{1.5, -2, 3e-7}) {
		t.Fatalf("x %v, err %v", x, err)
	}
}

// A registry that cannot answer — down, or refusing the credentials — is
// no verdict on the message: Parse returns a *RegistryError, which is not
// a bad message (no reason), names the settings, and the same message
// parses once the registry answers.
func TestRegistryDownIsNotABadMessage(t *testing.T) {
	reg := testkit.NewRegistry(t)
	msg := reg.Encode(t, "avro", 0, []float64{1, 2, 3}, nil)
	d := registryDecoder(t, FormatAvro, reg.URL())
	reg.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		http.Error(w, `{"error_code":40101,"message":"Unauthorized"}`, http.StatusUnauthorized)
		return true
	})
	_, _, err := d.Decode(nil, nil, msg)
	var re *RegistryError
	if !errors.As(err, &re) || Reason(err) != "" || !strings.Contains(err.Error(), "kafka.schema_registry.url") {
		t.Fatalf("refused credentials: %v, want a *RegistryError with no reason naming the settings", err)
	}
	reg.ClearInterceptors()
	x, _, err := d.Decode(nil, nil, msg)
	if err != nil || !bitsEqual(x, []float64{1, 2, 3}) {
		t.Fatalf("after the registry answers: x %v, err %v", x, err)
	}

	down := registryDecoder(t, FormatAvro, "http://127.0.0.1:1")
	if _, _, err := down.Decode(nil, nil, msg); !errors.As(err, &re) || Reason(err) != "" {
		t.Fatalf("unreachable registry: %v, want a *RegistryError", err)
	}
	if err := (&Decoder{Format: FormatAvro}).Validate(); err == nil || !strings.Contains(err.Error(), "kafka.schema_registry.url") {
		t.Fatalf("avro without a registry: %v", err)
	}
}

// FuzzRegistryPayload: whatever follows a valid header of each format's
// schema, Decode never panics, refuses with a reason (the registry
// answers, so never a *RegistryError) or accepts finite values of one
// dimension.
func FuzzRegistryPayload(f *testing.F) {
	reg := testkit.NewRegistry(f)
	formats := []Format{FormatAvro, FormatProtobuf, FormatJSONSchema}
	for i, format := range formats {
		msg := reg.Encode(f, string(format), 0, []float64{1, -2.5, 3e-9}, []float64{4})
		n := 5
		if format == FormatProtobuf {
			n = 6
		}
		f.Add(msg[n:], uint8(i))
		f.Add([]byte{0xfe, 0xff, 0xff, 0xff, 0x0f}, uint8(i)) // a block claiming 2³¹ items
	}
	decoders := make([]*Decoder, len(formats))
	for i, format := range formats {
		r, err := NewRegistry(RegistryConfig{URLs: []string{reg.URL()}})
		if err != nil {
			f.Fatal(err)
		}
		decoders[i] = &Decoder{Format: format, Registry: r, MaxBytes: 4096}
	}
	f.Fuzz(func(t *testing.T, payload []byte, fi uint8) {
		i := int(fi) % len(formats)
		d := *decoders[i]
		var hdr sr.ConfluentHeader
		var index []int
		if formats[i] == FormatProtobuf {
			index = []int{1}
		}
		msg, _ := hdr.AppendEncode(nil, reg.ID(string(formats[i])), index)
		x, y, err := d.Decode(nil, nil, append(msg, payload...))
		checkDecoded(t, &d, x, y, err)
	})
}

// BenchmarkParseRegistered: a message of 784 doubles as the service
// parses it, in each Schema Registry format, beside json and f64le.
func BenchmarkParseRegistered(b *testing.B) {
	reg := testkit.NewRegistry(b)
	rng := rand.New(rand.NewPCG(1, 1))
	x := make([]float64, 784)
	for i := range x {
		x[i] = rng.NormFloat64()
	}
	f64 := make([]byte, 0, 8*len(x))
	for _, v := range x {
		f64 = binary.LittleEndian.AppendUint64(f64, math.Float64bits(v))
	}
	msgs := map[Format][]byte{FormatJSON: testkit.JSONRow(x, nil), FormatF64LE: f64}
	for _, f := range []Format{FormatAvro, FormatProtobuf, FormatJSONSchema} {
		msgs[f] = reg.Encode(b, string(f), 0, x, nil)
	}
	for _, f := range []Format{FormatJSON, FormatF64LE, FormatAvro, FormatProtobuf, FormatJSONSchema} {
		b.Run(string(f), func(b *testing.B) {
			d := &Decoder{Format: f, OneView: true}
			if f.Registered() {
				r, err := NewRegistry(RegistryConfig{URLs: []string{reg.URL()}})
				if err != nil {
					b.Fatal(err)
				}
				d.Registry = r
			}
			b.SetBytes(int64(len(msgs[f])))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := d.Parse(nil, nil, msgs[f]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Two versions of a record of one name (a schema evolved: x from float
// to double) decode each by its own id; a schema that does not compile
// is asked for once, not for every message that names it.
func TestRegistrySchemaVersions(t *testing.T) {
	reg := testkit.NewRegistry(t)
	cl, err := sr.NewClient(sr.URLs(reg.URL()))
	if err != nil {
		t.Fatal(err)
	}
	v1 := `{"type":"record","name":"Row","namespace":"streamkpca.test","fields":[{"name":"x","type":{"type":"array","items":"float"}}]}`
	v2 := `{"type":"record","name":"Row","namespace":"streamkpca.test","fields":[{"name":"x","type":{"type":"array","items":"double"}},{"name":"tag","type":"string","default":""}]}`
	broken := `{"type":"record","name":"Broken","fields":[{"name":"x","type":"nosuchtype"}]}`
	var ids []int
	for _, text := range []string{v1, v2, broken} {
		ss, err := cl.CreateSchema(t.Context(), "evolving-value", sr.Schema{Schema: text, Type: sr.TypeAvro})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, ss.ID)
	}
	var hdr sr.ConfluentHeader
	m1, _ := hdr.AppendEncode(nil, ids[0], nil)
	m1 = append(m1, 4, 0, 0, 0xc0, 0x3f, 0, 0, 0x20, 0xc0, 0) // [1.5, -2.5] as floats
	m2, _ := hdr.AppendEncode(nil, ids[1], nil)
	m2 = append(m2, 2)
	m2 = binary.LittleEndian.AppendUint64(m2, math.Float64bits(0.1))
	m2 = append(m2, 0, 2, 'a') // the array's end, tag "a"
	d := registryDecoder(t, FormatAvro, reg.URL())
	for range 2 {
		x1, _, err1 := d.Parse(nil, nil, m1)
		x2, _, err2 := d.Parse(nil, nil, m2)
		if err1 != nil || err2 != nil || !bitsEqual(x1, []float64{1.5, -2.5}) || !bitsEqual(x2, []float64{0.1}) {
			t.Fatalf("v1 %v (%v), v2 %v (%v); want [1.5 -2.5] and [0.1]", x1, err1, x2, err2)
		}
	}
	var asked atomic.Int64
	reg.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		if strings.Contains(r.URL.Path, "/schemas/ids/") {
			asked.Add(1)
		}
		return false
	})
	mb, _ := hdr.AppendEncode(nil, ids[2], nil)
	mb = append(mb, 0)
	for range 5 {
		if _, _, err := d.Parse(nil, nil, mb); Reason(err) != ReasonSchema {
			t.Fatalf("a schema that does not compile: %v", err)
		}
	}
	if n := asked.Load(); n != 1 {
		t.Errorf("the registry was asked %d times for a schema that does not compile; want once", n)
	}
}
