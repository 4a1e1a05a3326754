package ingest

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Format is a message encoding (DESIGN "Kafka messages").
type Format string

// Formats.
const (
	FormatJSON  Format = "json"  // [1.0, 2.0] or {"x":[...],"y":[...]} / {"x":[...],"target":[...]}
	FormatCSV   Format = "csv"   // 1.0,2.0
	FormatF32LE Format = "f32le" // raw little-endian float32
	FormatF64LE Format = "f64le" // raw little-endian float64
)

// Formats lists the formats a Kafka stream may have (kafka.format).
var Formats = []Format{FormatJSON, FormatCSV, FormatF32LE, FormatF64LE, FormatAvro, FormatProtobuf, FormatJSONSchema}

// Reasons a message is refused; they label the bad-message metric and the
// dead-letter header.
const (
	ReasonEmpty      = "empty"
	ReasonOversized  = "oversized"
	ReasonMalformed  = "malformed"
	ReasonDimension  = "dimension"
	ReasonNonFinite  = "non_finite"
	ReasonDomain     = "domain"       // outside the kernel's domain (e.g. x < 0 for semigroup kernels)
	ReasonOutOfRange = "out_of_range" // a finite value beyond Decoder.MaxAbs
)

// BadMessageError says why a message was refused.
type BadMessageError struct {
	Reason string
	Err    error
}

func (e *BadMessageError) Error() string {
	return "ingest: bad message (" + e.Reason + "): " + e.Err.Error()
}
func (e *BadMessageError) Unwrap() error { return e.Err }

func bad(reason string, format string, args ...any) error {
	return &BadMessageError{Reason: reason, Err: fmt.Errorf(format, args...)}
}

// Reason returns the refusal reason of err, or "" if err is not a
// BadMessageError.
func Reason(err error) string {
	var b *BadMessageError
	if errors.As(err, &b) {
		return b.Reason
	}
	return ""
}

// Decoder decodes and validates messages. Dim fixes the dimension; when 0
// the first valid message fixes it. Decoders are not safe for concurrent use.
type Decoder struct {
	Format Format
	// Dim is the expected dimension of x; 0 means "from the first message".
	Dim int
	// DimY is the expected dimension of y (two-view), 0 = from first.
	DimY int
	// MaxBytes refuses larger messages. Default: 1 MiB.
	MaxBytes int
	// MaxAbs refuses a message with a value whose magnitude exceeds it
	// (reason out_of_range): one 1e308 in a batch overflows unbounded
	// kernels (polynomial, linear, dot-product, arc-cosine) and would
	// spoil the whole batch. Default: DefaultMaxAbs.
	MaxAbs float64
	// OneView: the model learns from x alone, and a JSON object's "y" or
	// "target" is ignored, whatever it holds (docs/operations.md).
	OneView bool
	// Registry holds the schemas of the Schema Registry formats (avro,
	// protobuf, jsonschema; registry.go); Field and FieldY are the
	// dotted paths of x and y in their values (defaults: x; y, else
	// target).
	Registry      *Registry
	Field, FieldY string
}

// DefaultMaxAbs is the default bound on |value|: far beyond any
// standardised or physical measurement, far below float64 overflow under
// a degree-10 polynomial kernel.
const DefaultMaxAbs = 1e12

// Validate checks the decoder's settings.
func (d *Decoder) Validate() error {
	if !slices.Contains(Formats, d.Format) {
		return fmt.Errorf("ingest: unknown format %q (%v)", d.Format, Formats)
	}
	if d.Format.Registered() && d.Registry == nil {
		return fmt.Errorf("ingest: format %s reads schemas from a Schema Registry: set kafka.schema_registry.url", d.Format)
	}
	if d.Dim < 0 || d.MaxBytes < 0 || d.MaxAbs < 0 {
		return fmt.Errorf("ingest: dimension, max bytes and max abs must be ≥ 0")
	}
	return nil
}

// Decode returns the vector x (and y for two-view JSON) of one message,
// appending to the given slices, or a *BadMessageError. It never panics.
// It is Parse then Check.
func (d *Decoder) Decode(x, y []float64, msg []byte) ([]float64, []float64, error) {
	n0, m0 := len(x), len(y)
	x, y, err := d.Parse(x, y, msg)
	if err != nil {
		return x, y, err
	}
	if err := d.Check(x[n0:], y[m0:]); err != nil {
		return x[:n0], y[:m0], err
	}
	return x, y, nil
}

// Parse appends the values of one message to x (and y), checking only its
// syntax and size (reasons empty, oversized, malformed): what does not
// depend on the model, so that it can run ahead of the learner on another
// goroutine. It reads Format and MaxBytes only (and the Schema Registry
// formats' Registry and fields). Check completes the validation. A
// *RegistryError (the registry cannot answer) is no verdict on the
// message: parse it again later.
func (d *Decoder) Parse(x, y []float64, msg []byte) ([]float64, []float64, error) {
	max := d.MaxBytes
	if max == 0 {
		max = 1 << 20
	}
	if len(bytes.TrimSpace(msg)) == 0 {
		return x, y, bad(ReasonEmpty, "empty message")
	}
	if len(msg) > max {
		return x, y, bad(ReasonOversized, "%d bytes exceed the limit of %d", len(msg), max)
	}
	n0, m0 := len(x), len(y)
	var err error
	switch d.Format {
	case FormatJSON:
		x, y, err = decodeJSON(x, y, msg, d.OneView)
	case FormatCSV:
		x, err = decodeCSV(x, msg)
	case FormatF32LE:
		if len(msg)%4 != 0 {
			return x, y, bad(ReasonMalformed, "%d bytes is not a whole number of float32", len(msg))
		}
		for i := 0; i < len(msg); i += 4 {
			x = append(x, float64(math.Float32frombits(binary.LittleEndian.Uint32(msg[i:]))))
		}
	case FormatF64LE:
		if len(msg)%8 != 0 {
			return x, y, bad(ReasonMalformed, "%d bytes is not a whole number of float64", len(msg))
		}
		for i := 0; i < len(msg); i += 8 {
			x = append(x, math.Float64frombits(binary.LittleEndian.Uint64(msg[i:])))
		}
	case FormatAvro, FormatProtobuf, FormatJSONSchema:
		x, y, err = d.parseRegistered(x, y, msg)
	default:
		return x, y, bad(ReasonMalformed, "unknown format %q", d.Format)
	}
	if err != nil {
		return x[:n0], y[:m0], err
	}
	return x, y, nil
}

// Check validates one parsed message's values x (and y): the dimensions
// (reason dimension), then each value (non_finite, out_of_range). Only a
// message that passes fixes an unset dimension.
func (d *Decoder) Check(x, y []float64) error {
	if err := d.check(x, y); err != nil {
		return err
	}
	if d.Dim == 0 {
		d.Dim = len(x)
	}
	if d.DimY == 0 && len(y) > 0 {
		d.DimY = len(y)
	}
	return nil
}

// check is Check without fixing a dimension.
func (d *Decoder) check(x, y []float64) error {
	if err := checkDim(d.Dim, len(x), "x"); err != nil {
		return err
	}
	if len(y) > 0 {
		if err := checkDim(d.DimY, len(y), "y"); err != nil {
			return err
		}
	}
	bound := d.MaxAbs
	if bound == 0 {
		bound = DefaultMaxAbs
	}
	for _, v := range x {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return bad(ReasonNonFinite, "value %v", v)
		}
		if math.Abs(v) > bound {
			return bad(ReasonOutOfRange, "value %v beyond ±%v (kafka.max_abs)", v, bound)
		}
	}
	for _, v := range y {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return bad(ReasonNonFinite, "value %v in y", v)
		}
		if math.Abs(v) > bound {
			return bad(ReasonOutOfRange, "value %v in y beyond ±%v (kafka.max_abs)", v, bound)
		}
	}
	return nil
}

// checkDim checks n values against the dimension dim (0: not fixed yet).
func checkDim(dim, n int, what string) error {
	if n == 0 {
		return bad(ReasonDimension, "%s has no values", what)
	}
	if dim != 0 && n != dim {
		return bad(ReasonDimension, "%s has %d values, want %d", what, n, dim)
	}
	return nil
}

type twoView struct {
	X      []float64 `json:"x"`
	Y      []float64 `json:"y"`
	Target []float64 `json:"target"`
}

func decodeJSON(x, y []float64, msg []byte, oneView bool) ([]float64, []float64, error) {
	t := bytes.TrimSpace(msg)
	switch t[0] {
	case '[':
		if out, ok := appendFloatArray(x, t); ok {
			return out, y, nil
		}
		return decodeJSONArray(x, y, t)
	case '{':
		if oneView {
			var v struct {
				X []float64 `json:"x"`
			}
			if err := json.Unmarshal(t, &v); err != nil {
				return x, y, bad(ReasonMalformed, "json: %v", err)
			}
			return append(x, v.X...), y, nil
		}
		var v twoView
		if err := json.Unmarshal(t, &v); err != nil {
			return x, y, bad(ReasonMalformed, "json: %v", err)
		}
		x = append(x, v.X...)
		y = append(y, v.Y...)
		y = append(y, v.Target...)
		return x, y, nil
	}
	return x, y, bad(ReasonMalformed, "json: want an array or an object, got %q", string(t[:min(len(t), 16)]))
}

// decodeJSONArray decodes a JSON array of numbers with encoding/json: the
// reference appendFloatArray agrees with (FuzzJSONArrayFastPath).
func decodeJSONArray(x, y []float64, t []byte) ([]float64, []float64, error) {
	var v []json.Number
	if err := json.Unmarshal(t, &v); err != nil {
		return x, y, bad(ReasonMalformed, "json: %v", err)
	}
	for _, n := range v {
		f, err := strconv.ParseFloat(string(n), 64)
		if err != nil {
			return x, y, bad(ReasonNonFinite, "json number %s: %v", n, err)
		}
		x = append(x, f)
	}
	return x, y, nil
}

// appendFloatArray is the fast path of a JSON array of numbers, the
// common message: one pass over the bytes, each number checked against
// JSON's grammar and converted by strconv, 3–5× faster than
// encoding/json (BenchmarkDecodeJSON). It handles only whitespace,
// brackets, commas and numbers; ok is false, with x unchanged, for
// anything else (null, nesting, malformed input) so that decodeJSONArray
// decides, with encoding/json's exact behaviour and messages (a number out
// of float64's range included).
func appendFloatArray(x []float64, t []byte) (out []float64, ok bool) {
	n0 := len(x)
	i := skipSpace(t, 1) // t[0] == '['
	if i < len(t) && t[i] == ']' {
		return x, skipSpace(t, i+1) == len(t)
	}
	// One allocation for the values (the commas count them), not one per
	// doubling; a value takes at least two bytes with its comma, which
	// bounds what a message of commas alone makes this allocate. A refused
	// message's caller goes on with its own slice (decodeJSON), so the
	// capacity is not kept.
	x = slices.Grow(x, min(bytes.Count(t, comma)+1, len(t)/2+1))
	for {
		f, j, exact := parseNumber(t, i)
		if j == i {
			return x[:n0], false
		}
		if !exact {
			var perr error
			f, perr = strconv.ParseFloat(string(t[i:j]), 64)
			if perr != nil {
				// Out of range: rare; the rest of the document decides
				// between malformed and non-finite, so the slow path does.
				return x[:n0], false
			}
		}
		x = append(x, f)
		i = skipSpace(t, j)
		if i == len(t) {
			return x[:n0], false
		}
		switch t[i] {
		case ',':
			i = skipSpace(t, i+1)
		case ']':
			if skipSpace(t, i+1) != len(t) {
				return x[:n0], false
			}
			return x, true
		default:
			return x[:n0], false
		}
	}
}

func skipSpace(t []byte, i int) int {
	for i < len(t) && (t[i] == ' ' || t[i] == '\t' || t[i] == '\n' || t[i] == '\r') {
		i++
	}
	return i
}

var comma = []byte{','}

// pow10 holds the powers of ten that float64 represents exactly.
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
	1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// parseNumber scans the JSON number starting at t[i],
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?, and returns its end j
// (i if none starts there). While scanning it gathers the decimal
// significand and exponent; when the significand is at most 2⁵³ and the
// power of ten at most 10²² either way, both are exact float64s and one
// multiplication or division is correctly rounded (Clinger's fast path,
// which strconv.ParseFloat takes first too), so f is ParseFloat's value
// and exact is true. Otherwise (17-digit significands, large exponents)
// exact is false and the caller converts t[i:j] with strconv.
// FuzzJSONNumber checks the bits against strconv.
func parseNumber(t []byte, i int) (f float64, j int, exact bool) {
	j = i
	neg := j < len(t) && t[j] == '-'
	if neg {
		j++
	}
	var mant uint64
	digits, exp := 0, 0 // significant digits gathered; the power of ten they are shifted by
	take := func(frac bool) int {
		k := j
		for j < len(t) && t[j] >= '0' && t[j] <= '9' {
			if c := uint64(t[j] - '0'); mant != 0 || c != 0 {
				if digits < 19 {
					mant = mant*10 + c
					if frac {
						exp--
					}
				} else if !frac {
					exp++ // a digit beyond the 19th: the result is not exact
				}
				digits++
			} else if frac {
				exp-- // a leading zero of the fraction
			}
			j++
		}
		return j - k
	}
	switch {
	case j < len(t) && t[j] == '0':
		j++
	case j < len(t) && t[j] >= '1' && t[j] <= '9':
		take(false)
	default:
		return 0, i, false
	}
	if j < len(t) && t[j] == '.' {
		j++
		if take(true) == 0 {
			return 0, i, false
		}
	}
	if j < len(t) && (t[j] == 'e' || t[j] == 'E') {
		j++
		eneg := j < len(t) && t[j] == '-'
		if j < len(t) && (t[j] == '+' || t[j] == '-') {
			j++
		}
		k, e := j, 0
		for j < len(t) && t[j] >= '0' && t[j] <= '9' {
			if e < 10000 {
				e = e*10 + int(t[j]-'0')
			}
			j++
		}
		if j == k {
			return 0, i, false
		}
		if eneg {
			e = -e
		}
		exp += e
	}
	if digits > 19 || mant > 1<<53 {
		return 0, j, false
	}
	f = float64(mant)
	switch {
	case mant == 0:
	case exp >= 0 && exp < len(pow10):
		f *= pow10[exp]
	case exp < 0 && -exp < len(pow10):
		f /= pow10[-exp]
	default:
		return 0, j, false
	}
	if neg {
		f = -f
	}
	return f, j, true
}

func decodeCSV(x []float64, msg []byte) ([]float64, error) {
	s := strings.TrimSpace(string(msg))
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil {
			var ne *strconv.NumError
			if errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange) {
				return x, bad(ReasonNonFinite, "csv: %v", err)
			}
			return x, bad(ReasonMalformed, "csv: %v", err)
		}
		x = append(x, v)
	}
	return x, nil
}
