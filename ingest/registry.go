package ingest

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bufbuild/protocompile"
	"github.com/hamba/avro/v2"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// # Schema Registry formats
//
// kafka.format avro, protobuf and jsonschema read messages in the
// Confluent wire format: a zero byte, the writer's schema id (4 bytes,
// big-endian), for protobuf the message's index in its file (a varint
// array), then the value encoded by that schema. The schema comes from a
// Schema Registry (kafka.schema_registry.url) by its id, once: ids are
// immutable, so a schema fetched is kept for the process's life. The
// vector is a field of the value named by a dotted path
// (kafka.schema_registry.field, default x; a value that is itself an
// array is the vector), a two-view pair's y another
// (kafka.schema_registry.field_y, default y, else target), each an
// array of numbers (Avro double, float, int or long; protobuf repeated
// double, float or integers; JSON numbers).
//
// A message the registry cannot explain is a bad message, dead-lettered
// with reason "schema": an id the registry does not hold (asked again
// after unknownIDRetry, in case the producer registered it since), a
// schema of another type than kafka.format names, a schema that does not
// compile (Avro references to other subjects are not resolved), a
// JSON value its schema refuses. A registry that cannot be reached, or
// refuses the credentials, is not the message's fault: Parse returns a
// *RegistryError and the caller retries the message (Ahead.Run), so
// nothing is dead-lettered or skipped while the registry is down.
//
// The libraries: franz-go's sr client (the registry's REST API and the
// wire format's header), hamba/avro (Avro binary into Go values),
// protocompile and the protobuf runtime's dynamicpb (a .proto text into
// descriptors, a message read by them), santhosh-tekuri/jsonschema
// (JSON Schema drafts 4 to 2020-12).

// Schema Registry formats (see above).
const (
	FormatAvro       Format = "avro"
	FormatProtobuf   Format = "protobuf"
	FormatJSONSchema Format = "jsonschema"
)

// ReasonSchema: the message names a schema the registry does not hold,
// of another type than kafka.format, that does not compile, or (JSON
// Schema) that refuses the value.
const ReasonSchema = "schema"

// Registered reports whether f reads the Schema Registry wire format.
func (f Format) Registered() bool {
	return f == FormatAvro || f == FormatProtobuf || f == FormatJSONSchema
}

// schemaType is the registry's type of the schemas f's messages name.
func (f Format) schemaType() sr.SchemaType {
	switch f {
	case FormatProtobuf:
		return sr.TypeProtobuf
	case FormatJSONSchema:
		return sr.TypeJSON
	}
	return sr.TypeAvro
}

// unknownIDRetry is how long an id the registry said it does not hold is
// refused without asking again.
const unknownIDRetry = 30 * time.Second

// RegistryConfig is how to reach a Schema Registry.
type RegistryConfig struct {
	// URLs of the registry (tried in turn).
	URLs []string
	// User and Password: HTTP basic authentication; empty: none.
	User, Password string
	// TLS for https URLs; nil: the system's roots.
	TLS *tls.Config
	// Timeout bounds one request. Default: 5 s.
	Timeout time.Duration
}

// Registry fetches and keeps the schemas messages name by id. It is safe
// for concurrent use.
type Registry struct {
	cl      *sr.Client
	timeout time.Duration
	mu      sync.Mutex
	known   map[int]*writerSchema
}

// writerSchema is one id's schema, compiled, or why it cannot be used.
type writerSchema struct {
	typ   sr.SchemaType
	avro  avro.Schema
	json  *jsonschema.Schema
	proto protoreflect.FileDescriptor
	// bad: the messages naming this id are refused with this error
	// (reason schema); retryAt: when to ask the registry again (an id
	// it did not hold, after unknownIDRetry; zero: never, as for a
	// schema that does not compile — ids are immutable).
	bad     error
	retryAt time.Time
}

// RegistryError is a registry that cannot answer (unreachable, an HTTP
// error, refused credentials): the message is not at fault and is parsed
// again later.
type RegistryError struct {
	ID  int
	Err error
}

func (e *RegistryError) Error() string {
	return fmt.Sprintf("schema registry: schema id %d: %v (check kafka.schema_registry.url, user, password_file and tls)", e.ID, e.Err)
}
func (e *RegistryError) Unwrap() error { return e.Err }

// NewRegistry makes a registry client; it does not contact the registry.
func NewRegistry(cfg RegistryConfig) (*Registry, error) {
	if len(cfg.URLs) == 0 {
		return nil, errors.New("ingest: schema registry: no URL (kafka.schema_registry.url)")
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	opts := []sr.ClientOpt{sr.URLs(cfg.URLs...), sr.UserAgent("streamkpca"), sr.HTTPClient(&http.Client{Timeout: timeout})}
	if cfg.User != "" || cfg.Password != "" {
		opts = append(opts, sr.BasicAuth(cfg.User, cfg.Password))
	}
	if cfg.TLS != nil {
		opts = append(opts, sr.DialTLSConfig(cfg.TLS))
	}
	cl, err := sr.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("ingest: schema registry (kafka.schema_registry): %w", err)
	}
	return &Registry{cl: cl, timeout: timeout, known: map[int]*writerSchema{}}, nil
}

// schema returns id's schema, fetching and compiling it the first time;
// a *RegistryError when the registry cannot answer.
func (r *Registry) schema(id int) (*writerSchema, error) {
	r.mu.Lock()
	w, ok := r.known[id]
	r.mu.Unlock()
	if ok && (w.retryAt.IsZero() || time.Now().Before(w.retryAt)) {
		return w, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
	s, err := r.cl.SchemaByID(ctx, id)
	cancel()
	if err != nil {
		var re *sr.ResponseError
		if !errors.As(err, &re) || re.ErrorCode != sr.ErrSchemaNotFound.Code {
			return nil, &RegistryError{ID: id, Err: err}
		}
		w = &writerSchema{bad: bad(ReasonSchema, "schema id %d: the registry holds no such schema (was the message produced against another registry?)", id), retryAt: time.Now().Add(unknownIDRetry)}
	} else {
		w = compileSchema(id, s)
	}
	r.mu.Lock()
	r.known[id] = w
	r.mu.Unlock()
	return w, nil
}

// compileSchema compiles a registry schema; a schema that does not
// compile refuses its messages.
func compileSchema(id int, s sr.Schema) *writerSchema {
	w := &writerSchema{typ: s.Type}
	if len(s.References) > 0 && s.Type != sr.TypeProtobuf {
		w.bad = bad(ReasonSchema, "schema id %d references other subjects, which streamkpca does not resolve", id)
		return w
	}
	var err error
	switch s.Type {
	case sr.TypeAvro:
		// A cache of its own: two versions of a record of one name (a
		// schema evolved) must not resolve each other's named types.
		w.avro, err = avro.ParseWithCache(s.Schema, "", &avro.SchemaCache{})
	case sr.TypeJSON:
		w.json, err = compileJSONSchema(s.Schema)
	case sr.TypeProtobuf:
		if len(s.References) > 0 {
			err = errors.New("references to other subjects are not resolved")
			break
		}
		w.proto, err = compileProto(s.Schema)
	default:
		err = fmt.Errorf("unknown schema type %v", s.Type)
	}
	if err != nil {
		w.bad = bad(ReasonSchema, "schema id %d (%v) does not compile: %v", id, s.Type, err)
	}
	return w
}

// compileJSONSchema compiles a JSON Schema document, loading nothing from
// outside it.
func compileJSONSchema(text string) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	const loc = "registry:///schema.json"
	if err := c.AddResource(loc, doc); err != nil {
		return nil, err
	}
	return c.Compile(loc)
}

// compileProto compiles a .proto text (imports of the well-known types
// only).
func compileProto(text string) (protoreflect.FileDescriptor, error) {
	const name = "registry.proto"
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
		Accessor: protocompile.SourceAccessorFromMap(map[string]string{name: text}),
	})}
	files, err := c.Compile(context.Background(), name)
	if err != nil {
		return nil, err
	}
	return files[0], nil
}

// avroAPI decodes Avro values with a bound on what a value's own counts
// may make it allocate: an array block claiming 2³¹ items in a message of
// a few bytes is refused, not allocated.
var avroAPI = avro.Config{MaxByteSliceSize: 1 << 20, MaxSliceAllocSize: 1 << 20}.Freeze()

// parseRegistered is Parse for the Schema Registry formats.
func (d *Decoder) parseRegistered(x, y []float64, msg []byte) ([]float64, []float64, error) {
	if d.Registry == nil {
		return x, y, bad(ReasonMalformed, "kafka.format %s needs kafka.schema_registry.url", d.Format)
	}
	var hdr sr.ConfluentHeader
	id, rest, err := hdr.DecodeID(msg)
	if err != nil {
		return x, y, bad(ReasonMalformed, "not the Schema Registry wire format (a zero byte, then a 4-byte schema id; first byte %#02x): check kafka.format (%s)", msg[0], d.Format)
	}
	w, err := d.Registry.schema(id)
	if err != nil {
		return x, y, err
	}
	if w.bad != nil {
		return x, y, w.bad
	}
	if want := d.Format.schemaType(); w.typ != want {
		return x, y, bad(ReasonSchema, "schema id %d is a %v schema; kafka.format is %s", id, w.typ, d.Format)
	}
	var v any
	switch w.typ {
	case sr.TypeAvro:
		if err := avroAPI.Unmarshal(w.avro, rest, &v); err != nil {
			return x, y, bad(ReasonMalformed, "avro value of schema id %d: %v", id, err)
		}
	case sr.TypeJSON:
		if v, err = jsonschema.UnmarshalJSON(bytes.NewReader(rest)); err != nil {
			return x, y, bad(ReasonMalformed, "json value of schema id %d: %v", id, err)
		}
		if err := w.json.Validate(v); err != nil {
			return x, y, bad(ReasonSchema, "the value does not match schema id %d: %v", id, err)
		}
	case sr.TypeProtobuf:
		idx, body, err := hdr.DecodeIndex(rest, 64)
		if err != nil {
			return x, y, bad(ReasonMalformed, "protobuf message index after schema id %d: %v", id, err)
		}
		md := protoMessage(w.proto, idx)
		if md == nil {
			return x, y, bad(ReasonSchema, "schema id %d has no message at index %v", id, idx)
		}
		m := dynamicpb.NewMessage(md)
		if err := proto.Unmarshal(body, m); err != nil {
			return x, y, bad(ReasonMalformed, "protobuf value of schema id %d (%s): %v", id, md.FullName(), err)
		}
		v = m
	}
	n0, m0 := len(x), len(y)
	x, err = appendField(x, v, d.field(), "kafka.schema_registry.field")
	if err != nil {
		return x[:n0], y, err
	}
	if d.OneView {
		return x, y, nil
	}
	for _, f := range d.fieldsY() {
		if y, err = appendField(y, v, f, "kafka.schema_registry.field_y"); err == nil {
			return x, y, nil
		}
		y = y[:m0]
		if !errors.Is(err, errNoField) {
			return x[:n0], y, err
		}
	}
	return x, y, nil // no y: the loop refuses a two-view message without one
}

// protoMessage is the message at index idx of file f (the Confluent
// index: a top-level message, then nested ones); nil if there is none.
func protoMessage(f protoreflect.FileDescriptor, idx []int) protoreflect.MessageDescriptor {
	if len(idx) == 0 {
		idx = []int{0}
	}
	ms := f.Messages()
	var md protoreflect.MessageDescriptor
	for _, i := range idx {
		if i < 0 || i >= ms.Len() {
			return nil
		}
		md = ms.Get(i)
		ms = md.Messages()
	}
	return md
}

// field is the path of x; fieldsY those tried for y, in order.
func (d *Decoder) field() string {
	if d.Field != "" {
		return d.Field
	}
	return "x"
}

func (d *Decoder) fieldsY() []string {
	if d.FieldY != "" {
		return []string{d.FieldY}
	}
	return []string{"y", "target"}
}

// errNoField: the value has no field at the path.
var errNoField = errors.New("no such field")

// appendField appends the numbers of the array at path (dotted) in v to
// out: v itself when v is an array. setting names the setting to check.
func appendField(out []float64, v any, path, setting string) ([]float64, error) {
	if m, ok := v.(*dynamicpb.Message); ok {
		return appendProtoField(out, m, path, setting)
	}
	if _, ok := v.([]any); !ok {
		for _, name := range strings.Split(path, ".") {
			obj, ok := v.(map[string]any)
			if !ok {
				return out, &BadMessageError{Reason: ReasonDimension, Err: fmt.Errorf("%w: %q is not a record at %q (%s)", errNoField, path, name, setting)}
			}
			if v, ok = obj[name]; !ok {
				return out, &BadMessageError{Reason: ReasonDimension, Err: fmt.Errorf("%w: %q (%s)", errNoField, path, setting)}
			}
			v = unwrapUnion(v)
		}
	}
	if v == nil {
		return out, &BadMessageError{Reason: ReasonDimension, Err: fmt.Errorf("%w: %q is null (%s)", errNoField, path, setting)}
	}
	arr, ok := v.([]any)
	if !ok {
		return out, bad(ReasonDimension, "%q is not an array of numbers but %T (%s)", path, v, setting)
	}
	for i, e := range arr {
		f, ok := number(e)
		if !ok {
			return out, bad(ReasonMalformed, "%q[%d] is not a number but %T", path, i, e)
		}
		out = append(out, f)
	}
	return out, nil
}

// unwrapUnion returns the value of an Avro union decoded as a map of one
// entry, the branch's type name to its value, when that value is an
// array; v otherwise.
func unwrapUnion(v any) any {
	if m, ok := v.(map[string]any); ok && len(m) == 1 {
		for _, e := range m {
			if _, ok := e.([]any); ok {
				return e
			}
		}
	}
	return v
}

// number converts a decoded number to float64.
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case float32:
		return float64(n), true
	case int:
		return float64(n), true
	case int32:
		return float64(n), true
	case int64:
		return float64(n), true
	case json.Number:
		f, err := strconv.ParseFloat(string(n), 64)
		return f, err == nil
	}
	return 0, false
}

// appendProtoField is appendField for a protobuf message.
func appendProtoField(out []float64, m protoreflect.Message, path, setting string) ([]float64, error) {
	names := strings.Split(path, ".")
	for i, name := range names {
		fd := m.Descriptor().Fields().ByName(protoreflect.Name(name))
		if fd == nil {
			return out, &BadMessageError{Reason: ReasonDimension, Err: fmt.Errorf("%w: %s has no field %q (%s)", errNoField, m.Descriptor().FullName(), path, setting)}
		}
		if i < len(names)-1 {
			if fd.Kind() != protoreflect.MessageKind || fd.IsList() || fd.IsMap() {
				return out, bad(ReasonDimension, "%q: %s is not a message (%s)", path, name, setting)
			}
			m = m.Get(fd).Message()
			continue
		}
		if !fd.IsList() {
			return out, bad(ReasonDimension, "%q is not a repeated field (%s)", path, setting)
		}
		list := m.Get(fd).List()
		for j := 0; j < list.Len(); j++ {
			e := list.Get(j)
			switch fd.Kind() {
			case protoreflect.DoubleKind, protoreflect.FloatKind:
				out = append(out, e.Float())
			case protoreflect.Int32Kind, protoreflect.Int64Kind, protoreflect.Sint32Kind, protoreflect.Sint64Kind, protoreflect.Sfixed32Kind, protoreflect.Sfixed64Kind:
				out = append(out, float64(e.Int()))
			case protoreflect.Uint32Kind, protoreflect.Uint64Kind, protoreflect.Fixed32Kind, protoreflect.Fixed64Kind:
				out = append(out, float64(e.Uint()))
			default:
				return out, bad(ReasonDimension, "%q is a repeated %v, not numbers (%s)", path, fd.Kind(), setting)
			}
		}
	}
	return out, nil
}
