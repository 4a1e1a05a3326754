package snapshot

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/streamkpca/streamkpca/online/features"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

// sample returns a small hand-built snapshot: 3 blocks of 4 features, k = 2,
// 2-dimensional input, standardisation and centring on.
func sample() *Snapshot {
	rng := rand.New(rand.NewPCG(1, 1))
	coef := make([]float64, 3*4*2)
	for i := range coef {
		coef[i] = rng.NormFloat64()
	}
	return &Snapshot{
		Header: Header{
			Model: "golden", Algorithm: "kpca", Generator: features.GeneratorID, K: 2, BlockSize: 4,
			Seeds: Seeds{1, 0xfedcba9876543210, 3},
			Views: []View{{Dim: 2, Kernel: features.Kernel{Family: features.Gaussian, Bandwidth: 1.5},
				Preprocess: Preprocess{Mean: []float64{0.5, -1}, Scale: []float64{2, 0.5}}, Center: []float64{0.1, -0.2}}},
			Step: 3, SamplesSeen: 1536, Schedule: Schedule{Theta0: 0.5, Theta1: 0.01, Scale: 0.6, Backoff: 1},
			MaxFeatures: 12, ModelSeed: 1,
			Offsets: []Offset{{Topic: "t", Partition: 0, Next: 1536}},
			Created: time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC),
		},
		Coef: [][]float64{coef},
	}
}

func TestRoundTrip(t *testing.T) {
	s := sample()
	data, err := s.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var a, b Snapshot
	if err := a.UnmarshalBinary(data); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ReadFrom(bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	for _, got := range []*Snapshot{&a, &b} {
		if !slices.Equal(got.Coef[0], s.Coef[0]) || !slices.Equal(got.Header.Seeds, s.Header.Seeds) {
			t.Error("coefficients or seeds changed in the round trip")
		}
		again, _ := got.MarshalBinary()
		if !bytes.Equal(again, data) {
			t.Error("re-encoding differs")
		}
	}
	// Seeds are hex strings in the JSON header.
	if !bytes.Contains(data, []byte(`"fedcba9876543210"`)) {
		t.Error("seed not written as 16 hex digits")
	}
}

// TestGolden pins the format and the projection: testdata/golden.skpca and
// the projections of three points recorded when format v1 was written
// (refresh deliberately with -update).
func TestGolden(t *testing.T) {
	path := filepath.Join("testdata", "golden.skpca")
	ppath := filepath.Join("testdata", "golden_projections.json")
	points := []float64{0, 0, 1, -1, 2.5, 0.25}
	if *update {
		data, _ := sample().MarshalBinary()
		os.WriteFile(path, data, 0o644)
		m, _ := NewModel(sample(), ModelOptions{})
		p, _ := m.Project(nil, points)
		j, _ := json.Marshal(p)
		os.WriteFile(ppath, j, 0o644)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := sample().MarshalBinary()
	if !bytes.Equal(data, want) {
		t.Error("encoding of the sample snapshot differs from testdata/golden.skpca")
	}
	snap, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewModel(snap, ModelOptions{CacheBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	got, err := m.Project(nil, points)
	if err != nil {
		t.Fatal(err)
	}
	var wantP []float64
	j, _ := os.ReadFile(ppath)
	json.Unmarshal(j, &wantP)
	if !slices.Equal(got, wantP) {
		t.Errorf("projections %v, golden %v (bit for bit)", got, wantP)
	}
}

// TestProjectMatchesDefinition checks Model.Project against the defining
// sum Σ_f √(2/B)·cos(2π(x'·Ω'_f + β_f))·α_f − centre, computed here with
// math.Cos and plain loops.
func TestProjectMatchesDefinition(t *testing.T) {
	s := sample()
	m, _ := NewModel(s, ModelOptions{})
	x := []float64{1, -1}
	got, _ := m.Project(nil, x)
	v := s.Header.Views[0]
	xs := []float64{(x[0] - v.Preprocess.Mean[0]) / v.Preprocess.Scale[0], (x[1] - v.Preprocess.Mean[1]) / v.Preprocess.Scale[1]}
	fm := features.Map{Kernel: v.Kernel, Dim: 2, BlockSize: 4}
	want := []float64{-v.Center[0], -v.Center[1]}
	for j, seed := range s.Header.Seeds {
		var b features.Block
		fm.Generate(&b, seed)
		for f := 0; f < 4; f++ {
			z := b.Phase[f] + xs[0]*b.Omega[f] + xs[1]*b.Omega[4+f]
			phi := math.Sqrt(0.5) * math.Cos(2*math.Pi*z)
			for q := 0; q < 2; q++ {
				want[q] += phi * s.Coef[0][(j*4+f)*2+q]
			}
		}
	}
	for q := range want {
		if math.Abs(got[q]-want[q]) > 1e-12 {
			t.Errorf("component %d: %v, definition gives %v", q, got[q], want[q])
		}
	}
	if _, err := m.Project(nil, []float64{math.NaN(), 0}); err == nil {
		t.Error("NaN input accepted")
	}
	if _, err := m.Project(nil, []float64{1, 2, 3}); err == nil {
		t.Error("3 values for a 2-dimensional model accepted")
	}
}

// A header naming an arithmetic this build does not know is refused, not
// projected with the wrong one.
func TestUnknownModeRejected(t *testing.T) {
	for _, mut := range []func(v *View){
		func(v *View) { v.Precision = "float16" },
		func(v *View) { v.Compute = "gpu" },
	} {
		s := sample()
		mut(&s.Header.Views[0])
		data, err := s.MarshalBinary()
		if err == nil {
			_, err = Decode(data)
		}
		if !errors.Is(err, ErrHeader) {
			t.Errorf("view %+v: got %v, want ErrHeader", s.Header.Views[0], err)
		}
	}
}

func TestCorruptRejected(t *testing.T) {
	data, _ := sample().MarshalBinary()
	flip := slices.Clone(data)
	flip[len(flip)/2] ^= 0x10
	badVer := slices.Clone(data)
	badVer[8] = 9
	for _, tc := range []struct {
		name string
		data []byte
		want error
	}{
		{"truncated", data[:len(data)-5], ErrSize},
		{"short", data[:10], ErrTruncated},
		{"bit flip", flip, ErrChecksum},
		{"version", badVer, ErrVersion},
		{"magic", append([]byte("NOTASNAP"), data[8:]...), ErrMagic},
		{"trailing", append(slices.Clone(data), 0), ErrSize},
	} {
		var s Snapshot
		err := s.UnmarshalBinary(tc.data)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: UnmarshalBinary = %v, want %v", tc.name, err, tc.want)
		}
		if _, err := s.ReadFrom(bytes.NewReader(tc.data)); err == nil && tc.name != "trailing" {
			t.Errorf("%s: ReadFrom accepted it", tc.name)
		}
	}
}

func TestStore(t *testing.T) {
	dir := t.TempDir()
	var skipped []string
	st := &Store{Dir: dir, Model: "m", Keep: 3, OnSkip: func(p string, err error) { skipped = append(skipped, p) }}
	if _, _, err := st.Latest(); !errors.Is(err, ErrNoSnapshot) {
		t.Fatalf("empty store: %v", err)
	}
	for v := uint64(1); v <= 5; v++ {
		s := sample()
		s.Header.Model, s.Header.Step = "m", v
		if _, _, err := st.Save(s); err != nil {
			t.Fatal(err)
		}
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 3 {
		t.Errorf("retention: %d files, want 3", len(ents))
	}
	// Corrupt the newest, truncate the second: Latest falls back to v3.
	p5, p4 := st.Path(5), st.Path(4)
	b, _ := os.ReadFile(p5)
	b[40] ^= 1
	os.WriteFile(p5, b, 0o644)
	b, _ = os.ReadFile(p4)
	os.WriteFile(p4, b[:len(b)/2], 0o644)
	s, _, err := st.Latest()
	if err != nil || s.Header.Step != 3 {
		t.Fatalf("Latest = step %v, %v; want 3", s, err)
	}
	if len(skipped) != 2 || !strings.HasSuffix(skipped[0], "00000000000000000005.skpca") {
		t.Errorf("skipped %v", skipped)
	}
	// No temp files left behind.
	ents, _ = os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".tmp") {
			t.Errorf("temp file %s left", e.Name())
		}
	}
}

func TestStoreUnwritable(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "file"), nil, 0o644)
	st := &Store{Dir: filepath.Join(dir, "file", "sub"), Model: "m"}
	if _, _, err := st.Save(sample()); err == nil {
		t.Error("Save into a path under a regular file succeeded")
	}
}

// FuzzDecode: no panic and no allocation beyond the input on arbitrary
// bytes; whatever decodes re-encodes and decodes to the same thing.
func FuzzDecode(f *testing.F) {
	data, _ := sample().MarshalBinary()
	f.Add(data)
	f.Add(data[:30])
	f.Add([]byte("SKPCASNP\x01\x00\x00\x00\xff\xff\xff\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var s Snapshot
		if err := s.UnmarshalBinary(b); err != nil {
			var r Snapshot
			r.ReadFrom(bytes.NewReader(b))
			return
		}
		enc, err := s.MarshalBinary()
		if err != nil {
			t.Fatalf("decoded but does not re-encode: %v", err)
		}
		var s2 Snapshot
		if err := s2.UnmarshalBinary(enc); err != nil {
			t.Fatalf("re-encoded snapshot does not decode: %v", err)
		}
		if !slices.Equal(s2.Coef[0], s.Coef[0]) && !hasNaN(s.Coef[0]) {
			t.Fatal("coefficients changed")
		}
	})
}

func hasNaN(v []float64) bool {
	for _, x := range v {
		if x != x {
			return true
		}
	}
	return false
}
