package ingest

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestReadFileInfersTheFormat: the same two rows written as csv (with a
// header), JSON lines and f32le/f64le files read back equal from the
// extension alone; a raw file without a dimension is refused by name.
func TestReadFileInfersTheFormat(t *testing.T) {
	dir := t.TempDir()
	want := []float64{0.5, -2, 3.25, 1, 0, -0.125}
	raw := func(bits int) []byte {
		var b []byte
		for _, v := range want {
			if bits == 32 {
				b = binary.LittleEndian.AppendUint32(b, math.Float32bits(float32(v)))
			} else {
				b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
			}
		}
		return b
	}
	files := map[string][]byte{
		"a.csv":   []byte("x0,x1,x2\n0.5,-2,3.25\n1,0,-0.125\n"),
		"a.jsonl": []byte("[0.5,-2,3.25]\n\n[1,0,-0.125]\n"),
		"a.f32":   raw(32),
		"a.f64le": raw(64),
	}
	for name, data := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		tb, err := ReadFile(p, "", 3)
		x, rows, d := tb.X, tb.Rows, tb.Dim
		if err != nil || rows != 2 || d != 3 || !slices.Equal(x, want) {
			t.Errorf("%s: %v rows %d d %d, err %v; want %v", name, x, rows, d, err, want)
		}
		if wantHeader := filepath.Ext(name) == ".csv"; (tb.Header != "") != wantHeader {
			t.Errorf("%s: header %q, want one: %v", name, tb.Header, wantHeader)
		}
		if strings.HasPrefix(filepath.Ext(name), ".f") {
			if _, err := ReadFile(p, "", 0); err == nil || !strings.Contains(err.Error(), "--dim") {
				t.Errorf("%s without a dimension: %v, want an error naming --dim", name, err)
			}
		}
	}
	if _, err := ReadFile(filepath.Join(dir, "missing.csv"), "", 0); err == nil {
		t.Error("a missing file read without error")
	}
}

// TestSelectColumns: cut's field lists, against columns picked by hand.
func TestSelectColumns(t *testing.T) {
	x := []float64{1, 2, 3, 4, 5, 11, 12, 13, 14, 15} // 2 rows of 5
	for spec, want := range map[string][]float64{
		"1-4":   {1, 2, 3, 4, 11, 12, 13, 14},
		"5,1":   {5, 1, 15, 11},
		"2,4-":  {2, 4, 5, 12, 14, 15},
		"-2":    {1, 2, 11, 12},
		" 3 ":   {3, 13},
		"1-1,5": {1, 5, 11, 15},
	} {
		got, d, err := SelectColumns(x, 2, 5, spec)
		if err != nil || d*2 != len(want) || !slices.Equal(got, want) {
			t.Errorf("%q: %v (d %d, err %v), want %v", spec, got, d, err, want)
		}
	}
	for _, spec := range []string{"", "0", "6", "3-2", "a", "1,,2", "-", "2-x"} {
		if _, _, err := SelectColumns(x, 2, 5, spec); err == nil || !strings.Contains(err.Error(), "--cols") {
			t.Errorf("%q: error %v, want one naming --cols", spec, err)
		}
	}
}

// Issue 61: one NaN or ragged row aborted a whole file. ReadFileSkipping
// passes over bad rows, counts them by reason and keeps the dimension of
// the first good row.
func TestReadFileSkippingCountsBadRows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.csv")
	if err := os.WriteFile(path, []byte("a,b\n1,2\nNaN,3\n4,5,6\n7,8\nx,y\n9,10\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(path, "", 0); err == nil {
		t.Fatal("ReadFile took a file with bad rows")
	}
	tb, err := ReadFileSkipping(path, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if tb.Rows != 3 || tb.Dim != 2 || tb.SkippedRows() != 3 || tb.FirstBadAt != 3 {
		t.Fatalf("%d rows of %d, %d skipped %v from line %d; want 3 rows of 2, 3 skipped from line 3", tb.Rows, tb.Dim, tb.SkippedRows(), tb.Skipped, tb.FirstBadAt)
	}
	if want := []float64{1, 2, 7, 8, 9, 10}; !slices.Equal(tb.X, want) {
		t.Errorf("values %v; want %v", tb.X, want)
	}
	if tb.Skipped[ReasonNonFinite] != 1 || tb.Skipped[ReasonDimension] != 1 || tb.Skipped[ReasonMalformed] != 1 {
		t.Errorf("skipped by reason %v; want one each of non_finite, dimension, malformed", tb.Skipped)
	}
}
