package testkit

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/bufbuild/protocompile"
	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// Schemas a producer registers for rows (x, and y when it has one).
const (
	AvroRowSchema = `{"type":"record","name":"Row","namespace":"streamkpca.test","fields":[
 {"name":"x","type":{"type":"array","items":"double"}},
 {"name":"y","type":["null",{"type":"array","items":"double"}],"default":null}]}`
	ProtoRowSchema = `syntax = "proto3";
package streamkpca.test;
message Other { string name = 1; }
message Row { repeated double x = 1; repeated double y = 2; }
`
	JSONRowSchema = `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object",
 "properties":{"x":{"type":"array","items":{"type":"number"},"minItems":1},"y":{"type":"array","items":{"type":"number"}}},
 "required":["x"]}`
)

// Registry is an in-process Schema Registry (franz-go's srfake, the
// registry's REST API over HTTP) with a producer that registers the row
// schemas above through the registry client, as a producer's serializer
// does, and encodes rows in the Confluent wire format.
type Registry struct {
	*srfake.Registry
	ids map[string]int // schema id by format
	row protoreflect.MessageDescriptor
}

// NewRegistry starts the registry (closed when t ends) and registers the
// three schemas under subject "v-value".
func NewRegistry(t testing.TB) *Registry {
	t.Helper()
	fake := srfake.New()
	t.Cleanup(fake.Close)
	cl, err := sr.NewClient(sr.URLs(fake.URL()))
	if err != nil {
		t.Fatal(err)
	}
	r := &Registry{Registry: fake, ids: map[string]int{}}
	for format, s := range map[string]sr.Schema{
		"avro":       {Schema: AvroRowSchema, Type: sr.TypeAvro},
		"protobuf":   {Schema: ProtoRowSchema, Type: sr.TypeProtobuf},
		"jsonschema": {Schema: JSONRowSchema, Type: sr.TypeJSON},
	} {
		ss, err := cl.CreateSchema(context.Background(), format+"-value", s)
		if err != nil {
			t.Fatalf("registering the %s schema: %v", format, err)
		}
		r.ids[format] = ss.ID
	}
	c := protocompile.Compiler{Resolver: &protocompile.SourceResolver{
		Accessor: protocompile.SourceAccessorFromMap(map[string]string{"row.proto": ProtoRowSchema})}}
	files, err := c.Compile(context.Background(), "row.proto")
	if err != nil {
		t.Fatal(err)
	}
	r.row = files[0].Messages().ByName("Row")
	return r
}

// ID is the schema id registered for format.
func (r *Registry) ID(format string) int { return r.ids[format] }

// Encode returns the row (x, and y unless nil) as a message of format
// (avro, protobuf or jsonschema) in the Confluent wire format, naming
// the schema registered for it (or id, when not 0).
func (r *Registry) Encode(t testing.TB, format string, id int, x, y []float64) []byte {
	t.Helper()
	if id == 0 {
		id = r.ids[format]
	}
	var hdr sr.ConfluentHeader
	var index []int
	if format == "protobuf" {
		index = []int{1} // Row is the file's second message
	}
	b, _ := hdr.AppendEncode(nil, id, index)
	switch format {
	case "avro":
		type row struct {
			X []float64 `avro:"x"`
			Y []float64 `avro:"y"`
		}
		v, err := avro.Marshal(avro.MustParse(AvroRowSchema), row{X: x, Y: y})
		if err != nil {
			t.Fatal(err)
		}
		return append(b, v...)
	case "protobuf":
		m := dynamicpb.NewMessage(r.row)
		for name, vs := range map[string][]float64{"x": x, "y": y} {
			fd := r.row.Fields().ByName(protoreflect.Name(name))
			l := m.Mutable(fd).List()
			for _, v := range vs {
				l.Append(protoreflect.ValueOfFloat64(v))
			}
		}
		v, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return append(b, v...)
	case "jsonschema":
		return append(b, JSONRow(x, y)...)
	}
	t.Fatalf("unknown format %q", format)
	return nil
}

// JSONRow is the row as the json format's message: {"x":[...]} or
// {"x":[...],"y":[...]}, each number in its shortest exact form.
func JSONRow(x, y []float64) []byte {
	var b strings.Builder
	list := func(vs []float64) {
		b.WriteByte('[')
		for i, v := range vs {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.FormatFloat(v, 'g', -1, 64))
		}
		b.WriteByte(']')
	}
	b.WriteString(`{"x":`)
	list(x)
	if y != nil {
		b.WriteString(`,"y":`)
		list(y)
	}
	b.WriteByte('}')
	return []byte(b.String())
}
