package ingest

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

func f32(v ...float32) []byte {
	b := make([]byte, 0, 4*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

func f64(v ...float64) []byte {
	b := make([]byte, 0, 8*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
	}
	return b
}

func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		name   string
		format Format
		dim    int
		msg    []byte
		want   []float64
		wantY  []float64
		reason string
	}{
		{"json array", FormatJSON, 0, []byte(`[1.5, -2, 3e2]`), []float64{1.5, -2, 300}, nil, ""},
		{"json two-view", FormatJSON, 0, []byte(`{"x":[1,2],"y":[3]}`), []float64{1, 2}, []float64{3}, ""},
		{"json target", FormatJSON, 0, []byte(`{"x":[1],"target":[0.5]}`), []float64{1}, []float64{0.5}, ""},
		{"json truncated", FormatJSON, 0, []byte(`[1,`), nil, nil, ReasonMalformed},
		{"json string", FormatJSON, 0, []byte(`["a"]`), nil, nil, ReasonMalformed},
		{"json overflow", FormatJSON, 0, []byte(`[1e999]`), nil, nil, ReasonNonFinite},
		{"json NaN literal", FormatJSON, 0, []byte(`[NaN]`), nil, nil, ReasonMalformed},
		{"json scalar", FormatJSON, 0, []byte(`3`), nil, nil, ReasonMalformed},
		{"json empty array", FormatJSON, 0, []byte(`[]`), nil, nil, ReasonDimension},
		{"wrong dim", FormatJSON, 2, []byte(`[1,2,3]`), nil, nil, ReasonDimension},
		{"empty", FormatJSON, 0, []byte("  "), nil, nil, ReasonEmpty},
		{"csv", FormatCSV, 0, []byte("1, 2.5,-3\n"), []float64{1, 2.5, -3}, nil, ""},
		{"csv NaN", FormatCSV, 0, []byte("1,NaN"), nil, nil, ReasonNonFinite},
		{"csv Inf", FormatCSV, 0, []byte("Inf,1"), nil, nil, ReasonNonFinite},
		{"csv junk", FormatCSV, 0, []byte("1,x"), nil, nil, ReasonMalformed},
		{"f32le", FormatF32LE, 0, f32(1, -0.5), []float64{1, -0.5}, nil, ""},
		{"f32le ragged", FormatF32LE, 0, []byte{1, 2, 3}, nil, nil, ReasonMalformed},
		{"f32le inf", FormatF32LE, 0, f32(float32(math.Inf(1))), nil, nil, ReasonNonFinite},
		{"f64le", FormatF64LE, 0, f64(2, 3), []float64{2, 3}, nil, ""},
		{"f64le nan", FormatF64LE, 0, f64(math.NaN()), nil, nil, ReasonNonFinite},
		{"oversized", FormatCSV, 0, []byte("1" + string(make([]byte, 2000))), nil, nil, ReasonOversized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &Decoder{Format: tc.format, Dim: tc.dim, MaxBytes: 1000}
			prefix := []float64{42}
			x, y, err := d.Decode(slices.Clone(prefix), nil, tc.msg)
			if tc.reason != "" {
				if Reason(err) != tc.reason {
					t.Fatalf("err %v (reason %q), want reason %q", err, Reason(err), tc.reason)
				}
				if !slices.Equal(x, prefix) || len(y) != 0 {
					t.Errorf("refused message left values behind: %v %v", x, y)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(x[1:], tc.want) || !slices.Equal(y, tc.wantY) {
				t.Errorf("got %v %v, want %v %v", x[1:], y, tc.want, tc.wantY)
			}
		})
	}
}

func TestDecodeFixesDimension(t *testing.T) {
	d := &Decoder{Format: FormatJSON}
	if _, _, err := d.Decode(nil, nil, []byte(`[1,2]`)); err != nil || d.Dim != 2 {
		t.Fatalf("first message: %v, dim %d", err, d.Dim)
	}
	if _, _, err := d.Decode(nil, nil, []byte(`[1]`)); Reason(err) != ReasonDimension {
		t.Errorf("second message of another dimension: %v", err)
	}
}

// FuzzDecode: no payload panics, and an accepted one has the decoder's
// dimension and only finite values.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{`[1,2]`, `{"x":[1],"y":[2]}`, `1,2`, "", `[1e999]`, "\x00\x00\x80\x7f", `{"x":null}`} {
		f.Add([]byte(s), uint8(0))
		f.Add([]byte(s), uint8(1))
		f.Add([]byte(s), uint8(2))
		f.Add([]byte(s), uint8(3))
	}
	formats := []Format{FormatJSON, FormatCSV, FormatF32LE, FormatF64LE}
	f.Fuzz(func(t *testing.T, msg []byte, fi uint8) {
		d := &Decoder{Format: formats[int(fi)%len(formats)], MaxBytes: 4096}
		x, y, err := d.Decode(nil, nil, msg)
		checkDecoded(t, d, x, y, err)
	})
}

// checkDecoded fails t unless Decode's answer is a refusal with a reason
// or finite values of the decoder's (now fixed) dimension.
func checkDecoded(t *testing.T, d *Decoder, x, y []float64, err error) {
	t.Helper()
	if err != nil {
		if Reason(err) == "" {
			t.Fatalf("error without a reason: %v", err)
		}
		return
	}
	if len(x) != d.Dim || len(x) == 0 {
		t.Fatalf("accepted %d values with dim %d", len(x), d.Dim)
	}
	for _, v := range append(x, y...) {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			t.Fatalf("accepted non-finite %v", v)
		}
	}
}

// TestPoisonFirstMessageDoesNotFixDimension: with the dimension unset, a
// first message that fails validation (a NaN among five values) is
// refused without fixing the dimension, so the valid 1-D messages after
// it are accepted (issue: one bad first message stopped learning for good).
func TestPoisonFirstMessageDoesNotFixDimension(t *testing.T) {
	for _, tc := range []struct {
		format Format
		poison string
		good   string
	}{
		{FormatCSV, "NaN,1,2,3,4", "7"},
		{FormatJSON, "[1, 2, 1e999]", "[7]"},
		{FormatJSON, `{"x": [1, 2], "y": [NaN]}`, `{"x": [7], "y": [8]}`},
	} {
		d := &Decoder{Format: tc.format}
		if _, _, err := d.Decode(nil, nil, []byte(tc.poison)); err == nil {
			t.Fatalf("%s %q accepted", tc.format, tc.poison)
		}
		if d.Dim != 0 || d.DimY != 0 {
			t.Errorf("%s %q fixed the dimensions to %d, %d", tc.format, tc.poison, d.Dim, d.DimY)
		}
		x, _, err := d.Decode(nil, nil, []byte(tc.good))
		if err != nil || len(x) != 1 || x[0] != 7 {
			t.Errorf("%s: the valid message %q after the poison one: %v, %v", tc.format, tc.good, x, err)
		}
	}
}

// FuzzReadAll: any file in any format reads into whole rows of one
// dimension, or fails with an error; it never panics.
func FuzzReadAll(f *testing.F) {
	f.Add([]byte("a,b\n1,2\n3,4\n"), uint8(0), 0)
	f.Add([]byte("[1,2]\n\n[3,4]\n"), uint8(1), 0)
	f.Add([]byte("\x00\x00\x80\x3f\x00\x00\x00\x40"), uint8(2), 2)
	f.Add([]byte("1,2\n3\n"), uint8(0), 0)
	formats := []Format{FormatCSV, FormatJSON, FormatF32LE, FormatF64LE}
	f.Fuzz(func(t *testing.T, data []byte, format uint8, dim int) {
		if dim < 0 || dim > 1<<10 {
			return
		}
		x, rows, d, err := ReadAll(bytes.NewReader(data), formats[int(format)%len(formats)], dim)
		if err != nil {
			return
		}
		if rows*d != len(x) {
			t.Fatalf("%d rows of dimension %d but %d values", rows, d, len(x))
		}
		for _, v := range x {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Fatalf("non-finite value %v read", v)
			}
		}
	})
}

// FuzzJSONArrayFastPath: wherever the fast path answers, it answers as
// encoding/json does: the same values bit for bit, or the same refusal.
func FuzzJSONArrayFastPath(f *testing.F) {
	for _, s := range []string{"[1,2.5,-3e2]", "[ ]", "[1e400]", "[01]", "[1,]", "[null]", "[1 2]", " [ -0.0 , 5E-3 ] ", "[1]x", "[-]", "[1.]", "[.5]", "[1e]", "[[1]]", "[\"1\"]"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		tr := bytes.TrimSpace(msg)
		if len(tr) == 0 || tr[0] != '[' {
			return
		}
		fast, ok := appendFloatArray(nil, tr)
		if !ok {
			if len(fast) != 0 {
				t.Fatalf("%q: declined but returned %v", tr, fast)
			}
			return
		}
		slow, _, serr := decodeJSONArray(nil, nil, tr)
		if serr != nil {
			t.Fatalf("%q: fast path accepted %v, encoding/json refused: %v", tr, fast, serr)
		}
		if len(fast) != len(slow) {
			t.Fatalf("%q: fast %v, encoding/json %v", tr, fast, slow)
		}
		for i := range fast {
			if math.Float64bits(fast[i]) != math.Float64bits(slow[i]) {
				t.Fatalf("%q: value %d: fast %v, encoding/json %v", tr, i, fast[i], slow[i])
			}
		}
	})
}

func BenchmarkDecodeJSON(b *testing.B) {
	var msg []byte
	msg = append(msg, '[')
	rng := rand.New(rand.NewPCG(1, 1))
	for i := range 784 {
		if i > 0 {
			msg = append(msg, ',')
		}
		msg = strconv.AppendFloat(msg, rng.NormFloat64(), 'g', -1, 64)
	}
	msg = append(msg, ']')
	x := make([]float64, 0, 784)
	b.Run("fast", func(b *testing.B) {
		b.SetBytes(int64(len(msg)))
		for b.Loop() {
			x, _ = appendFloatArray(x[:0], msg)
		}
	})
	b.Run("parse", func(b *testing.B) { // as the service calls it: a new slice a message
		d := &Decoder{Format: FormatJSON}
		b.SetBytes(int64(len(msg)))
		b.ReportAllocs()
		for b.Loop() {
			x, _, _ = d.Parse(nil, nil, msg)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(msg)))
		for b.Loop() {
			x, _, _ = decodeJSONArray(x[:0], nil, msg)
		}
	})
}

// TestJSONNumberMatchesStrconv: every number the fast path converts itself
// has strconv.ParseFloat's bits, and it declines (leaving strconv to
// convert) no more than it must: shortest forms of random float64s (about
// half have 17 digits, beyond 2⁵³), short decimals as sensors send them,
// integers, exponents at and past 10²², signed zeros and leading zeros.
func TestJSONNumberMatchesStrconv(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	var cases []string
	for range 20000 {
		v := rng.NormFloat64() * math.Pow(10, float64(rng.IntN(50)-25))
		cases = append(cases, strconv.FormatFloat(v, 'g', -1, 64), strconv.FormatFloat(v, 'f', rng.IntN(8), 64),
			strconv.FormatFloat(v, 'e', rng.IntN(17), 64), strconv.Itoa(int(rng.Int64N(1<<62))-1<<61))
	}
	cases = append(cases, "0", "-0", "0.0", "-0.000", "0e5", "0E-400", "1e22", "1e23", "-1e-22", "1e-23",
		"9007199254740992", "9007199254740993", "9007199254740991.5", "0.000001", "123456789012345678901234567890",
		"1.0000000000000000000000001", "4.9e-324", "1.7976931348623157e308", "2.2250738585072014e-308", "1E+2", "1e-0")
	fast := 0
	for _, c := range cases {
		want, err := strconv.ParseFloat(c, 64)
		if err != nil {
			t.Fatalf("%s: strconv: %v", c, err)
		}
		f, j, exact := parseNumber([]byte(c), 0)
		if j != len(c) {
			t.Fatalf("%s: the number ends at %d, not %d", c, j, len(c))
		}
		if exact {
			fast++
			if math.Float64bits(f) != math.Float64bits(want) {
				t.Fatalf("%s: fast path %v (%#x), strconv %v (%#x)", c, f, math.Float64bits(f), want, math.Float64bits(want))
			}
		}
	}
	// Short decimals and integers below 2⁵³ all take the fast path.
	for _, c := range []string{"0.5", "-12.25", "3.14159", "1e3", "42", "-0.001", "123456.789"} {
		if _, _, exact := parseNumber([]byte(c), 0); !exact {
			t.Errorf("%s: declined by the fast path", c)
		}
	}
	t.Logf("%d of %d numbers converted without strconv", fast, len(cases))
}

// FuzzJSONNumber: wherever parseNumber converts a number itself, its bits
// are strconv.ParseFloat's for the text it scanned, and what it scans is a
// JSON number.
func FuzzJSONNumber(f *testing.F) {
	for _, s := range []string{"1", "-0", "0.1", "1e22", "1e23", "9007199254740993", "-1.5e-7", "00", "1.", "-", "1e", "0.0000000000000000000000001"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, j, exact := parseNumber(b, 0)
		if j == 0 {
			return
		}
		if !json.Valid(b[:j]) {
			t.Fatalf("%q: scanned %q, not a JSON number", b, b[:j])
		}
		want, err := strconv.ParseFloat(string(b[:j]), 64)
		if exact && (err != nil || math.Float64bits(v) != math.Float64bits(want)) {
			t.Fatalf("%q: fast path %v, strconv %v (%v)", b[:j], v, want, err)
		}
	})
}

// TestRefusedArrayHoldsNoMemory: the fast path sizes its slice from the
// commas; a refused message (here 100,000 commas and one number, which a
// parse-ahead queue of thousands of messages would hold until the loop
// dead-letters them) must come back without that capacity, and a valid
// one takes exactly its values' slots.
func TestRefusedArrayHoldsNoMemory(t *testing.T) {
	d := &Decoder{Format: FormatJSON}
	msg := append(append([]byte("[1"), bytes.Repeat([]byte(","), 100000)...), ']')
	x, _, err := d.Parse(nil, nil, msg)
	if err == nil || cap(x) > 64 {
		t.Fatalf("a malformed array returned %v with %d slots of capacity", err, cap(x))
	}
	ok := []byte("[1,2,3]")
	if x, _, err := d.Parse(nil, nil, ok); err != nil || len(x) != 3 || cap(x) != 3 {
		t.Fatalf("[1,2,3]: %v, %d values in %d slots", err, len(x), cap(x))
	}
}

// TestOneViewIgnoresY: docs/operations.md says a one-view model ignores
// "y" (and "target"). Before, a y of another width than an earlier
// message's, or 1e999 in y, dead-lettered the message although x was
// good.
func TestOneViewIgnoresY(t *testing.T) {
	d := &Decoder{Format: FormatJSON, OneView: true}
	for _, msg := range []string{`{"x":[1,2],"y":[3]}`, `{"x":[4,5],"y":[6,7,8]}`, `{"x":[9,10],"y":[1e999]}`, `{"x":[11,12],"target":"nonsense"}`} {
		x, y, err := d.Decode(nil, nil, []byte(msg))
		if err == nil {
			err = d.Check(x, y)
		}
		if err != nil || len(x) != 2 || len(y) != 0 {
			t.Errorf("%s: x %v, y %v, %v; want x of 2 values, y ignored", msg, x, y, err)
		}
	}
	// A two-view model still reads y and refuses one it cannot use.
	two := &Decoder{Format: FormatJSON}
	if _, _, err := two.Decode(nil, nil, []byte(`{"x":[1],"y":[1e999]}`)); err == nil {
		t.Error("a two-view decoder accepted y = 1e999")
	}
}
