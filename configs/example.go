package configs

import (
	"bytes"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

//go:generate go run ./internal/genexample

// exampleHeader opens configs/streamkpca.yaml.
const exampleHeader = `# streamkpca service configuration. Every field is optional: the value shown
# is the default. Environment variables override the file: the YAML path in
# upper case, '_' between levels, e.g. STREAMKPCA_LEARNER_K=5,
# STREAMKPCA_KAFKA_BROKERS=b1:9092,b2:9092, STREAMKPCA_SNAPSHOT_EVERY=1m.
# Generated from configs/config.go (go generate ./configs): edit the
# settings' tags there, not this file.
`

// exampleColumn is where the settings' comments start.
const exampleColumn = 31

// Example returns configs/streamkpca.yaml: every setting with its default
// (Default) and its `doc` tag, in the order config.go declares them. A
// setting whose default depends on others (the dead-letter topic on the
// topic, the ridge on the algorithm) shows its `shown` tag instead, the
// value that means "the default"; one without a default value but with
// an `example` tag is shown commented out with that value.
func Example() []byte {
	var b bytes.Buffer
	b.WriteString(exampleHeader)
	writeExample(&b, reflect.ValueOf(Default()), "")
	return b.Bytes()
}

func writeExample(b *bytes.Buffer, v reflect.Value, indent string) {
	t := v.Type()
	for i := range t.NumField() {
		f, fv := t.Field(i), v.Field(i)
		key := strings.Split(f.Tag.Get("yaml"), ",")[0]
		if key == "" || key == "-" {
			continue
		}
		if f.Type.Kind() == reflect.Struct {
			if indent == "" {
				b.WriteByte('\n')
			}
			fmt.Fprintf(b, "%s%s:\n", indent, key)
			writeExample(b, fv, indent+"  ")
			continue
		}
		line := indent + key + ": " + exampleValue(fv)
		if shown, ok := f.Tag.Lookup("shown"); ok {
			line = indent + key + ": " + shown
		}
		if ex := f.Tag.Get("example"); ex != "" && fv.IsZero() {
			line = indent + "# " + key + ": " + ex
		}
		doc := strings.Split(f.Tag.Get("doc"), "\n")
		for j, d := range doc {
			if d == "" {
				break
			}
			if j > 0 {
				line = ""
			}
			line += strings.Repeat(" ", max(1, exampleColumn-len([]rune(line)))) + "# " + d
			if j < len(doc)-1 {
				line += "\n"
			}
			b.WriteString(line)
			line = ""
		}
		b.WriteString(line + "\n")
	}
}

// exampleValue writes a default as YAML reads it back.
func exampleValue(v reflect.Value) string {
	if d, ok := v.Interface().(time.Duration); ok {
		return d.String()
	}
	switch v.Kind() {
	case reflect.String:
		out, _ := yaml.Marshal(v.String())
		return strings.TrimSpace(string(out))
	case reflect.Float64:
		return strings.Replace(strconv.FormatFloat(v.Float(), 'g', -1, 64), "e+", "e", 1)
	case reflect.Slice:
		parts := make([]string, v.Len())
		for i := range parts {
			parts[i] = exampleValue(v.Index(i))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return fmt.Sprint(v.Interface())
}
