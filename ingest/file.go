package ingest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ReadAll reads every record of r: one vector per line for csv and json
// (JSON lines; blank lines are skipped, and a first csv line that does not
// parse is taken for a header row), or back-to-back records of dim values
// for f32le/f64le. A bad record is an error naming its line or record
// number. It returns the values, the rows and the dimension (dim, or
// fixed by the first record when dim is 0).
func ReadAll(r io.Reader, format Format, dim int) ([]float64, int, int, error) {
	t, err := readAll(r, format, dim, false)
	return t.X, t.Rows, t.Dim, err
}

// Table is what ReadFile read: Rows×Dim values, row-major.
type Table struct {
	X         []float64
	Rows, Dim int
	// Header is the first line of a csv input when it did not parse as
	// numbers and was skipped as a header row; empty otherwise.
	Header string
	// Skipped counts the bad records ReadFileSkipping passed over, by
	// reason (Reason), with the line (or record) of the first.
	Skipped     map[string]int
	FirstBadAt  int
	FirstBadErr error
}

// SkippedRows is the number of records passed over.
func (t Table) SkippedRows() int {
	n := 0
	for _, c := range t.Skipped {
		n += c
	}
	return n
}

// readAll is ReadAll, returning a Table.
func readAll(r io.Reader, format Format, dim int, skip bool) (Table, error) {
	dec := &Decoder{Format: format, Dim: dim, MaxBytes: 64 << 20}
	if err := dec.Validate(); err != nil {
		return Table{}, err
	}
	var t Table
	var header string
	var x []float64
	rows := 0
	if format.Raw() {
		if dim < 1 {
			return Table{}, fmt.Errorf("ingest: the dimension is required for %s input", format)
		}
		w := 4
		if format == FormatF64LE {
			w = 8
		}
		buf := make([]byte, w*dim)
		br := bufio.NewReaderSize(r, 1<<20)
		for {
			if _, err := io.ReadFull(br, buf); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return Table{}, fmt.Errorf("record %d: %w", rows+1, err)
			}
			n0 := len(x)
			var err error
			if x, _, err = dec.Decode(x, nil, buf); err != nil {
				if skip {
					x = x[:n0]
					t.skip(rows+t.SkippedRows()+1, err)
					continue
				}
				return Table{}, fmt.Errorf("record %d: %w", rows+1, err)
			}
			rows++
		}
		t.X, t.Rows, t.Dim, t.Header = x, rows, dec.Dim, header
		return t, nil
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	line := 0
	for sc.Scan() {
		line++
		b := sc.Bytes()
		if len(strings.TrimSpace(string(b))) == 0 {
			continue
		}
		n0, dim0 := len(x), dec.Dim
		var err error
		if x, _, err = dec.Decode(x, nil, b); err != nil {
			if line == 1 && format == FormatCSV && Reason(err) == ReasonMalformed {
				dec.Dim = dim // a header row
				header = string(b)
				continue
			}
			if skip {
				x, dec.Dim = x[:n0], dim0 // a bad record fixes nothing
				t.skip(line, err)
				continue
			}
			return Table{}, fmt.Errorf("line %d: %w", line, err)
		}
		rows++
	}
	if err := sc.Err(); err != nil {
		return Table{}, fmt.Errorf("read input: %w", err)
	}
	t.X, t.Rows, t.Dim, t.Header = x, rows, dec.Dim, header
	return t, nil
}

// skip counts a bad record passed over at line (or record) at.
func (t *Table) skip(at int, err error) {
	if t.Skipped == nil {
		t.Skipped = map[string]int{}
		t.FirstBadAt, t.FirstBadErr = at, err
	}
	reason := Reason(err)
	if reason == "" {
		reason = ReasonMalformed
	}
	t.Skipped[reason]++
}

// ReadFile reads every record of the file at path ("-": standard input)
// with ReadAll. An empty format is inferred from the extension: .jsonl,
// .json and .ndjson are JSON lines, .f32/.f32le and .f64/.f64le raw
// little-endian, anything else (and standard input) csv; "jsonl" is
// accepted for json. The raw formats need dim.
func ReadFile(path string, format Format, dim int) (Table, error) {
	return readFile(path, format, dim, false)
}

// ReadFileSkipping is ReadFile passing over bad records (a NaN, a ragged
// row, text) instead of failing at the first: Table.Skipped counts them
// by reason. The dimension is the first good record's (or dim).
func ReadFileSkipping(path string, format Format, dim int) (Table, error) {
	return readFile(path, format, dim, true)
}

func readFile(path string, format Format, dim int, skip bool) (Table, error) {
	var r io.Reader = os.Stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return Table{}, fmt.Errorf("open input: %w", err)
		}
		defer f.Close()
		r = f
	}
	format = FileFormat(path, format)
	if format.Raw() && dim < 1 {
		return Table{}, fmt.Errorf("%s input needs its dimension (--dim): raw records carry none", format)
	}
	return readAll(r, format, dim, skip)
}

// FileFormat is the format ReadFile reads path in: format if given
// ("jsonl" meaning json), else inferred from the extension (standard
// input, "-": csv).
func FileFormat(path string, format Format) Format {
	if format == "" && path != "-" {
		switch strings.ToLower(filepath.Ext(path)) {
		case ".jsonl", ".json", ".ndjson":
			format = FormatJSON
		case ".f32", ".f32le":
			format = FormatF32LE
		case ".f64", ".f64le":
			format = FormatF64LE
		}
	}
	switch format {
	case "":
		return FormatCSV
	case "jsonl":
		return FormatJSON
	}
	return format
}

// Raw reports whether f is a raw binary format (f32le, f64le), whose
// records carry no dimension.
func (f Format) Raw() bool { return f == FormatF32LE || f == FormatF64LE }

// SelectColumns keeps the columns named by spec of each of rows rows of d
// values, in spec's order. spec is cut's field list, 1-based: "1-64",
// "2,5,7-9", "3-" (from 3 to the end), "-4" (1 to 4). It returns the
// selected values and their count per row, or an error naming what is
// wrong with spec.
func SelectColumns(x []float64, rows, d int, spec string) ([]float64, int, error) {
	if len(x) != rows*d {
		return nil, 0, fmt.Errorf("select columns: %d values are not %d rows of %d", len(x), rows, d)
	}
	var cols []int
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, b := 1, d
		var err error
		if lo != "" {
			if a, err = strconv.Atoi(lo); err != nil {
				return nil, 0, fmt.Errorf("--cols %q: %q is not a column number or a range like 1-64", spec, part)
			}
		}
		if !isRange {
			b = a
		} else if hi != "" {
			if b, err = strconv.Atoi(hi); err != nil {
				return nil, 0, fmt.Errorf("--cols %q: %q is not a column number or a range like 1-64", spec, part)
			}
		}
		if part == "" || part == "-" || a < 1 || b > d || a > b {
			return nil, 0, fmt.Errorf("--cols %q: %q is outside the input's columns 1-%d (or empty)", spec, part, d)
		}
		for c := a; c <= b; c++ {
			cols = append(cols, c-1)
		}
	}
	out := make([]float64, 0, rows*len(cols))
	for r := 0; r < rows; r++ {
		row := x[r*d : (r+1)*d]
		for _, c := range cols {
			out = append(out, row[c])
		}
	}
	return out, len(cols), nil
}
