package ingest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// ReadAll reads every record of r: one vector per line for csv and json
// (JSON lines; blank lines are skipped, and a first csv line that does not
// parse is taken for a header row), or back-to-back records of dim values
// for f32le/f64le. A bad record is an error naming its line or record
// number. It returns the values, the rows and the dimension (dim, or
// fixed by the first record when dim is 0).
func ReadAll(r io.Reader, format Format, dim int) ([]float64, int, int, error) {
	dec := &Decoder{Format: format, Dim: dim, MaxBytes: 64 << 20}
	if err := dec.Validate(); err != nil {
		return nil, 0, 0, err
	}
	var x []float64
	rows := 0
	if format == FormatF32LE || format == FormatF64LE {
		if dim < 1 {
			return nil, 0, 0, fmt.Errorf("ingest: the dimension is required for %s input", format)
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
				return nil, 0, 0, fmt.Errorf("record %d: %w", rows+1, err)
			}
			var err error
			if x, _, err = dec.Decode(x, nil, buf); err != nil {
				return nil, 0, 0, fmt.Errorf("record %d: %w", rows+1, err)
			}
			rows++
		}
		return x, rows, dec.Dim, nil
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
		var err error
		if x, _, err = dec.Decode(x, nil, b); err != nil {
			if line == 1 && format == FormatCSV && Reason(err) == ReasonMalformed {
				dec.Dim = dim // a header row
				continue
			}
			return nil, 0, 0, fmt.Errorf("line %d: %w", line, err)
		}
		rows++
	}
	if err := sc.Err(); err != nil {
		return nil, 0, 0, fmt.Errorf("read input: %w", err)
	}
	return x, rows, dec.Dim, nil
}

// ReadFile reads every record of the file at path ("-": standard input)
// with ReadAll. An empty format is inferred from the extension: .jsonl,
// .json and .ndjson are JSON lines, .f32/.f32le and .f64/.f64le raw
// little-endian, anything else (and standard input) csv; "jsonl" is
// accepted for json. The raw formats need dim.
func ReadFile(path string, format Format, dim int) ([]float64, int, int, error) {
	var r io.Reader = os.Stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, 0, 0, fmt.Errorf("open input: %w", err)
		}
		defer f.Close()
		r = f
		if format == "" {
			switch strings.ToLower(filepath.Ext(path)) {
			case ".jsonl", ".json", ".ndjson":
				format = FormatJSON
			case ".f32", ".f32le":
				format = FormatF32LE
			case ".f64", ".f64le":
				format = FormatF64LE
			}
		}
	}
	switch format {
	case "":
		format = FormatCSV
	case "jsonl":
		format = FormatJSON
	}
	if (format == FormatF32LE || format == FormatF64LE) && dim < 1 {
		return nil, 0, 0, fmt.Errorf("%s input needs its dimension (--dim): raw records carry none", format)
	}
	return ReadAll(r, format, dim)
}
