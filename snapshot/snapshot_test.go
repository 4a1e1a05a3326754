package snapshot

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/streamkpca/streamkpca/features"
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

// TestGolden pins the format and the projection: testdata/golden.skpca
// (format v2) and the projections of three points recorded when format v1
// was written (refresh deliberately with -update).
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

// TestGoldenV1StillLoads: the file format v1 wrote (kept as it was
// written) decodes, re-encodes as v2 byte for byte what the same snapshot
// encodes to, and projects the golden points bit for bit.
func TestGoldenV1StillLoads(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "golden_v1.skpca"))
	if err != nil {
		t.Fatal(err)
	}
	if v := binary.LittleEndian.Uint32(data[8:]); v != 1 {
		t.Fatalf("golden_v1.skpca has version %d", v)
	}
	for _, dec := range []func([]byte) (*Snapshot, error){Decode, func(b []byte) (*Snapshot, error) {
		var s Snapshot
		_, err := s.ReadFrom(bytes.NewReader(b))
		return &s, err
	}} {
		snap, err := dec(data)
		if err != nil {
			t.Fatal(err)
		}
		if snap.State != nil || snap.Header.Covariance != nil {
			t.Error("a v1 file decoded with learner state")
		}
		again, _ := snap.MarshalBinary()
		want, _ := sample().MarshalBinary()
		if !bytes.Equal(again, want) {
			t.Error("v1 file re-encoded differs from the sample's v2 encoding")
		}
		m, err := NewModel(snap, ModelOptions{CacheBytes: -1})
		if err != nil {
			t.Fatal(err)
		}
		got, _ := m.Project(nil, []float64{0, 0, 1, -1, 2.5, 0.25})
		var wantP []float64
		j, _ := os.ReadFile(filepath.Join("testdata", "golden_projections.json"))
		json.Unmarshal(j, &wantP)
		if !slices.Equal(got, wantP) {
			t.Errorf("v1 projections %v, golden %v", got, wantP)
		}
	}
}

// TestGoldenV1TwoView: a kcca snapshot written by format v1's code
// (testdata/golden_v1_kcca.skpca, with its "extra" map and the projections
// that code served, in golden_v1_kcca.json) decodes with the map in the
// typed Settings and projects both views bit for bit as it did.
func TestGoldenV1TwoView(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "golden_v1_kcca.skpca"))
	if err != nil {
		t.Fatal(err)
	}
	var want struct {
		X, Y  []float64
		ProjX []float64 `json:"proj_x"`
		ProjY []float64 `json:"proj_y"`
		Extra map[string]float64
	}
	j, _ := os.ReadFile(filepath.Join("testdata", "golden_v1_kcca.json"))
	if err := json.Unmarshal(j, &want); err != nil {
		t.Fatal(err)
	}
	snap, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	st := snap.Header.Settings
	e := want.Extra
	if st.Standardize != (e["standardize"] == 1) || st.Uncentered != (e["uncentered"] == 1) || st.Slices != int(e["slices"]) ||
		st.Trace0 != e["trace0"] || st.WNorm != e["wnorm"] || st.TraceRun != e["tr_run"] || !st.Standardize || st.Trace0 == 0 {
		t.Errorf("settings %+v from v1 extra %v", st, e)
	}
	m, err := NewModel(snap, ModelOptions{})
	if err != nil {
		t.Fatal(err)
	}
	px, err1 := m.ProjectView(0, nil, want.X)
	py, err2 := m.ProjectView(1, nil, want.Y)
	if err1 != nil || err2 != nil || !slices.Equal(px, want.ProjX) || !slices.Equal(py, want.ProjY) {
		t.Errorf("projections %v, %v (%v, %v); v1 served %v, %v", px, py, err1, err2, want.ProjX, want.ProjY)
	}
}

// TestStateRoundTrip: the covariance solver's state survives encoding,
// the header's sizes are enforced, and Served leaves it out.
func TestStateRoundTrip(t *testing.T) {
	s := sample()
	// A two-view layout is not needed to carry state: the sizes are the
	// header's.
	s.Header.Covariance = &Covariance{Samples: 1024, Solves: 3, Features: [2]int{3, 2}, Basis: 2}
	n, err := s.Header.Covariance.Len()
	if err != nil || n != 6+3+6+3+2+4 {
		t.Fatalf("Len = %d, %v; want 24", n, err)
	}
	s.State = make([]float64, n)
	for i := range s.State {
		s.State[i] = float64(i) - 0.5
	}
	data, err := s.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.State, s.State) || *got.Header.Covariance != *s.Header.Covariance || !slices.Equal(got.Coef[0], s.Coef[0]) {
		t.Error("state or coefficients changed in the round trip")
	}
	served, _ := got.Served().MarshalBinary()
	plain, _ := sample().MarshalBinary()
	if !bytes.Equal(served, plain) {
		t.Error("Served() encodes differently from the snapshot without state")
	}
	s.State = s.State[:n-1]
	if _, err := s.MarshalBinary(); !errors.Is(err, ErrSize) {
		t.Errorf("short state: %v, want ErrSize", err)
	}
	s.State = append(s.State, math.NaN())
	if _, err := s.MarshalBinary(); !errors.Is(err, ErrNonFinite) {
		t.Errorf("NaN state: %v, want ErrNonFinite", err)
	}
	// A file that claims state it does not carry is refused before any
	// allocation for it.
	bad := bytes.Replace(plain, []byte(`"diagnostics"`), []byte(`"covariance":{"samples":1,"solves":1,"features":[2,2],"basis":1},"diagnostics"`), 1)
	if _, err := Decode(bad); err == nil {
		t.Error("a header with state the payload lacks decoded")
	}
}

// TestAveragedStateRoundTrip: a snapshot whose served coefficients are an
// average carries the iterate and the running average (coefficients, then
// the centres of a centred model) as state, is written as format v3 and read back unchanged; its
// served copy drops the state and is written as v2, so readers of v2 can
// load what is published. Inconsistent headers are refused.
func TestAveragedStateRoundTrip(t *testing.T) {
	s := sample()
	s.Header.Settings.Center = true
	s.Header.Averaged = &Averaged{Window: 0.3}
	s.State = make([]float64, 2*len(s.Coef[0])+2*s.Header.K)
	for i := range s.State {
		s.State[i] = float64(i) + 0.25
	}
	data, err := s.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if v := binary.LittleEndian.Uint32(data[8:]); v != 3 {
		t.Errorf("written as format v%d, want 3", v)
	}
	got, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.State, s.State) || *got.Header.Averaged != *s.Header.Averaged || !slices.Equal(got.Coef[0], s.Coef[0]) {
		t.Error("state or coefficients changed in the round trip")
	}
	served, err := got.Served().MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if v := binary.LittleEndian.Uint32(served[8:]); v != 2 {
		t.Errorf("served copy written as format v%d, want 2", v)
	}
	plain := sample()
	plain.Header.Settings.Center = true
	want, _ := plain.MarshalBinary()
	if !bytes.Equal(served, want) {
		t.Error("Served() encodes differently from the snapshot without state")
	}
	for name, mod := range map[string]func(*Snapshot){
		"short state":             func(s *Snapshot) { s.State = s.State[:len(s.State)-1] },
		"uncentred with a centre": func(s *Snapshot) { s.Header.Settings.Center = false },
		"window 0":                func(s *Snapshot) { s.Header.Averaged.Window = 0 },
		"window above 1":          func(s *Snapshot) { s.Header.Averaged.Window = 1.5 },
		"NaN window":              func(s *Snapshot) { s.Header.Averaged.Window = math.NaN() },
		"with covariance state": func(s *Snapshot) {
			s.Header.Covariance = &Covariance{Samples: 1, Features: [2]int{2, 0}, Basis: 1}
		},
	} {
		bad := sample()
		bad.Header.Settings.Center = true
		bad.Header.Averaged = &Averaged{Window: 0.3}
		bad.State = slices.Clone(s.State)
		mod(bad)
		if _, err := bad.MarshalBinary(); err == nil {
			t.Errorf("%s: encoded", name)
		}
	}
	// A v2 file cannot carry averaged state: v3 introduced it.
	v2 := slices.Clone(data)
	binary.LittleEndian.PutUint32(v2[8:], 2)
	body := len(v2) - 4
	binary.LittleEndian.PutUint32(v2[body:], crc32.Checksum(v2[:body], crc32.MakeTable(crc32.Castagnoli)))
	if _, err := Decode(v2); !errors.Is(err, ErrHeader) {
		t.Errorf("averaged state in a v2 file: %v, want ErrHeader", err)
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
	lm, _ := landmarkSample().MarshalBinary()
	f.Add(lm)
	ch, _ := challengerSample().MarshalBinary()
	f.Add(ch)
	ch2, _ := twoViewChallengerSample().MarshalBinary()
	f.Add(ch2)
	f.Add(data[:30])
	f.Add([]byte("SKPCASNP\x01\x00\x00\x00\xff\xff\xff\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var s Snapshot
		if err := s.UnmarshalBinary(b); err != nil {
			var r Snapshot
			r.ReadFrom(bytes.NewReader(b))
			return
		}
		if _, _, c := s.SplitState(); c != nil {
			if err := c.Validate(); err != nil {
				t.Fatalf("a decoded snapshot's challenger does not validate: %v", err)
			}
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
		if len(s2.Landmarks) != len(s.Landmarks) || len(s.Landmarks) > 0 && !slices.Equal(s2.Landmarks[0], s.Landmarks[0]) {
			t.Fatal("landmarks changed")
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

// landmarkSample is a hand-built landmark model: 2 blocks of 3 landmarks
// in 2-D, k = 2, no standardisation or centring.
func landmarkSample() *Snapshot {
	rng := rand.New(rand.NewPCG(2, 3))
	draw := func(n int) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = rng.NormFloat64()
		}
		return v
	}
	s := sample()
	h := &s.Header
	h.Model, h.BlockSize, h.Seeds, h.MaxFeatures, h.Offsets = "lm", 3, Seeds{1, 2}, 6, nil
	h.Views = []View{{Dim: 2, Kernel: features.Kernel{Family: features.Gaussian, Bandwidth: 1.2}, Features: FeaturesLandmarks}}
	s.Coef, s.Landmarks = [][]float64{draw(2 * 3 * 2)}, [][]float64{draw(2 * 3 * 2)}
	return s
}

// TestLandmarkProjectMatchesDefinition: a landmark model projects
// Σ_blocks ψ_j(x)·A_j with ψ_j(x) = L_j⁻¹·k(Z_j, x), L_j the Cholesky
// factor of K_{Z_j Z_j} + εI — here computed by gonum from the kernel's
// closed form — after a round trip through the file format.
func TestLandmarkProjectMatchesDefinition(t *testing.T) {
	src := landmarkSample()
	data, err := src.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	s, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.Landmarks[0], src.Landmarks[0]) || !slices.Equal(s.Coef[0], src.Coef[0]) {
		t.Fatal("landmarks or coefficients changed in the round trip")
	}
	m, err := NewModel(s, ModelOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kern := s.Header.Views[0].Kernel
	z := s.Landmarks[0]
	for _, x := range [][]float64{{0.3, -0.7}, {z[0], z[1]}, {2, 2}} {
		got, err := m.Project(nil, x)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]float64, 2)
		for j := 0; j < 2; j++ {
			zj := z[j*6 : j*6+6]
			kzz := mat.NewSymDense(3, nil)
			kx := mat.NewVecDense(3, nil)
			for a := 0; a < 3; a++ {
				kx.SetVec(a, kern.Eval(x, zj[2*a:2*a+2]))
				for b := a; b < 3; b++ {
					v := kern.Eval(zj[2*a:2*a+2], zj[2*b:2*b+2])
					if a == b {
						v += 1e-8 // ε = 1e-8 × the mean diagonal (1 for the Gaussian)
					}
					kzz.SetSym(a, b, v)
				}
			}
			var ch mat.Cholesky
			if !ch.Factorize(kzz) {
				t.Fatal("not positive definite")
			}
			var l mat.TriDense
			ch.LTo(&l)
			var psi mat.VecDense
			if err := psi.SolveVec(&l, kx); err != nil {
				t.Fatal(err)
			}
			for f := 0; f < 3; f++ {
				for q := 0; q < 2; q++ {
					want[q] += psi.AtVec(f) * s.Coef[0][(j*3+f)*2+q]
				}
			}
		}
		for q := range want {
			if math.Abs(got[q]-want[q]) > 1e-9*(1+math.Abs(want[q])) {
				t.Errorf("x %v component %d: %v, definition gives %v", x, q, got[q], want[q])
			}
		}
	}
}

// TestLandmarkPayloadChecked: landmark values are part of the checked
// payload: missing, non-finite or unknown-source snapshots are refused.
func TestLandmarkPayloadChecked(t *testing.T) {
	s := landmarkSample()
	s.Landmarks[0] = s.Landmarks[0][:6]
	if _, err := s.MarshalBinary(); !errors.Is(err, ErrSize) {
		t.Errorf("half the landmarks: %v, want ErrSize", err)
	}
	s = landmarkSample()
	s.Landmarks = nil
	if _, err := s.MarshalBinary(); !errors.Is(err, ErrSize) {
		t.Errorf("no landmarks: %v, want ErrSize", err)
	}
	s = landmarkSample()
	s.Landmarks[0][4] = math.Inf(1)
	if _, err := s.MarshalBinary(); !errors.Is(err, ErrNonFinite) {
		t.Errorf("infinite landmark: %v, want ErrNonFinite", err)
	}
	// A header that drops the landmark flag leaves the file longer than the
	// header implies.
	data, _ := landmarkSample().MarshalBinary()
	s = landmarkSample()
	s.Header.Views[0].Features = ""
	s.Landmarks = nil
	plain, _ := s.MarshalBinary()
	if len(plain) >= len(data) {
		t.Fatalf("landmark file %d bytes, the same without landmarks %d", len(data), len(plain))
	}
	s = landmarkSample()
	s.Header.Views[0].Features = "sketch"
	if _, err := s.MarshalBinary(); !errors.Is(err, ErrUnsupported) {
		t.Errorf("unknown feature source: %v, want ErrUnsupported", err)
	}
}

// TestModelReuseSharesBlocks: a Model built with Reuse of the previous
// version shares the blocks both versions have (same map, same seeds or
// landmark points), generates only the new ones, projects exactly as a
// Model built from scratch, and shares nothing with a model of another
// bandwidth.
func TestModelReuseSharesBlocks(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func() *Snapshot
	}{{"random", sample}, {"landmarks", landmarkSample}} {
		t.Run(tc.name, func(t *testing.T) {
			older := tc.make()
			newer := tc.make()
			// The newer version: one more block (same seeds before it), new coefficients.
			h := &newer.Header
			nb, d, k := h.BlockSize, h.Views[0].Dim, h.K
			if h.Views[0].Landmarks() {
				newer.Landmarks[0] = append(slices.Clone(newer.Landmarks[0]), newer.Landmarks[0][:nb*d]...)
				for i := range newer.Landmarks[0][len(newer.Landmarks[0])-nb*d:] {
					newer.Landmarks[0][len(newer.Landmarks[0])-nb*d+i] += 0.25
				}
			}
			h.Seeds = append(slices.Clone(h.Seeds), 12345)
			newer.Coef[0] = append(slices.Clone(newer.Coef[0]), newer.Coef[0][:nb*k]...)
			for i := range newer.Coef[0] {
				newer.Coef[0][i] *= 1.5
			}
			m0, err := NewModel(older, ModelOptions{})
			if err != nil {
				t.Fatal(err)
			}
			reused, err := NewModel(newer, ModelOptions{Reuse: m0})
			if err != nil {
				t.Fatal(err)
			}
			fresh, err := NewModel(newer, ModelOptions{})
			if err != nil {
				t.Fatal(err)
			}
			old, nw := m0.cache[0].blocks, reused.cache[0].blocks
			if len(nw) != len(old)+1 {
				t.Fatalf("%d blocks, want %d", len(nw), len(old)+1)
			}
			for j := range old {
				if nw[j] != old[j] {
					t.Errorf("block %d generated again, not shared", j)
				}
			}
			if nw[len(old)] == old[len(old)-1] {
				t.Error("the new block is an old one")
			}
			x := []float64{0.3, -1.2, 2.5, 0.7, -0.4, 1.1}
			a, err1 := reused.Project(nil, x)
			b, err2 := fresh.Project(nil, x)
			if err1 != nil || err2 != nil || !slices.Equal(a, b) {
				t.Errorf("reused model projects %v, fresh %v (%v, %v)", a, b, err1, err2)
			}
			other := tc.make()
			other.Header.Views[0].Kernel.Bandwidth *= 2
			mo, err := NewModel(other, ModelOptions{Reuse: m0})
			if err != nil {
				t.Fatal(err)
			}
			if mo.cache[0].blocks[0] == old[0] {
				t.Error("a model with another bandwidth shares blocks")
			}
		})
	}
}

// TestModelSharesGeneratedBlocks: a Model offered an evaluator's generated
// blocks (ModelOptions.Shared) uses them instead of generating its own,
// beyond its CacheBytes too (they cost it nothing), and refuses blocks of
// another map or another seed; the projections are the fresh model's
// bits.
func TestModelSharesGeneratedBlocks(t *testing.T) {
	s := sample()
	v := s.Header.Views[0]
	fm := features.Map{Kernel: v.Kernel, Dim: v.Dim, BlockSize: s.Header.BlockSize}
	ev := features.NewEvaluator(fm, features.EvaluatorConfig{Workers: 1})
	defer ev.Close()
	seeds := []uint64(s.Header.Seeds)
	// The evaluator saw blocks 0 and 1 with the snapshot's seeds and
	// block 2 with another seed.
	h := make([]float64, 2)
	ev.Eval(h, []float64{0.1, 0.2}, 1, []uint64{seeds[0], seeds[1], 77}, make([]float64, 3*4*2), 2)
	gen := ev.Generated()
	x := []float64{0.3, -1.2, 2.5, 0.7, -0.4, 1.1}
	fresh, err := NewModel(s, ModelOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := fresh.Project(nil, x)
	for _, cacheBytes := range []int64{0, -1} {
		m, err := NewModel(s, ModelOptions{Shared: []features.Generated{gen}, CacheBytes: cacheBytes})
		if err != nil {
			t.Fatal(err)
		}
		blocks := m.cache[0].blocks
		if len(blocks) < 2 || blocks[0] != gen.Blocks[0] || blocks[1] != gen.Blocks[1] {
			t.Fatalf("cache bytes %d: blocks 0 and 1 were not shared", cacheBytes)
		}
		if cacheBytes >= 0 {
			if len(blocks) != 3 || blocks[2] == gen.Blocks[2] || blocks[2].Seed != seeds[2] {
				t.Errorf("block 2 (another seed in the evaluator) shared, or not generated")
			}
		} else if len(blocks) != 2 {
			t.Errorf("without a cache budget %d blocks kept, want the 2 shared", len(blocks))
		}
		got, err := m.Project(nil, x)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("cache bytes %d: shared model projects %v, fresh %v (%v)", cacheBytes, got, want, err)
		}
	}
	other := sample()
	other.Header.Views[0].Kernel.Bandwidth *= 2
	mo, err := NewModel(other, ModelOptions{Shared: []features.Generated{gen}})
	if err != nil {
		t.Fatal(err)
	}
	if mo.cache[0].blocks[0] == gen.Blocks[0] {
		t.Error("a model with another bandwidth shares blocks")
	}
}

// TestDetectorStateRoundTripAndChecks: the change detector's state
// travels in the stored snapshot's header, is left out of the served copy,
// and a state no detector can have (a negative variance or statistic) is
// refused by the decoder.
func TestDetectorStateRoundTripAndChecks(t *testing.T) {
	s := sample()
	s.Header.Detector = &Detector{Batches: 40, Points: 1280, Mean: 0.62, Var: 0.004, CUSUM: 1.5}
	data, got := roundTrip(t, s)
	if got.Header.Detector == nil || *got.Header.Detector != *s.Header.Detector {
		t.Errorf("detector state %+v after the round trip, want %+v", got.Header.Detector, *s.Header.Detector)
	}
	if got.Served().Header.Detector != nil {
		t.Error("the served copy carries the detector's state")
	}
	// Files written by another program: the header's figures replaced,
	// the lengths and checksum made right.
	for _, bad := range []string{`"var":-1`, `"cusum":-0.5`, `"batches":-1`, `"points":-3`} {
		field, _, _ := strings.Cut(bad, ":")
		raw := rewriteHeader(t, data, func(h string) string {
			i := strings.Index(h, field+":")
			j := i + strings.IndexAny(h[i:], ",}")
			return h[:i] + bad + h[j:]
		})
		if err := got.UnmarshalBinary(raw); !errors.Is(err, ErrHeader) {
			t.Errorf("detector state with %s: %v, want ErrHeader", bad, err)
		}
	}
}

// challengerSample is sample() with a challenger: a window of 3 rows
// (dim 2) and a challenger of one block of 4 features (k = 2), no state
// of its own: 3·2 + 4·2 learner-state values, 0.5, 1.5, ….
func challengerSample() *Snapshot {
	s := sample()
	ch := sample().Header
	ch.Seeds, ch.MaxFeatures, ch.Offsets = Seeds{7}, 4, nil
	s.Header.Challenger = &Challenger{Wins: 1, Rows: 3, Fit: 0.9, ChallengerFit: 0.95, Model: &ch}
	s.State = make([]float64, 3*2+4*2)
	for i := range s.State {
		s.State[i] = float64(i) + 0.5
	}
	return s
}

// roundTrip encodes s and decodes the bytes.
func roundTrip(t *testing.T, s *Snapshot) ([]byte, Snapshot) {
	t.Helper()
	data, err := s.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var got Snapshot
	if err := got.UnmarshalBinary(data); err != nil {
		t.Fatal(err)
	}
	return data, got
}

// rewriteHeader returns the snapshot file data with its JSON header
// rewritten by edit, the header length and the CRC-32C made right
// (snapshot/doc.go's layout).
func rewriteHeader(t *testing.T, data []byte, edit func(string) string) []byte {
	t.Helper()
	hl := int(binary.LittleEndian.Uint32(data[12:16]))
	header := edit(string(data[16 : 16+hl]))
	out := append([]byte(nil), data[:12]...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(header)))
	out = append(out, header...)
	out = append(out, data[16+hl:len(data)-4]...)
	return binary.LittleEndian.AppendUint32(out, crc32.Checksum(out, castagnoli))
}

// Defect: a header's max_features had no upper bound, and a learner
// restored from it (a peer's state at a cluster rejoin included) reserved
// max_features·k coefficients. A header that asks more than MaxCoef is
// refused before anything is allocated.
func TestMaxFeaturesIsBounded(t *testing.T) {
	s, _, err := Load("testdata/golden.skpca")
	if err != nil {
		t.Fatal(err)
	}
	s.Header.MaxFeatures = 1 << 40
	if err := s.Validate(); !errors.Is(err, ErrSize) {
		t.Fatalf("max_features 2⁴⁰: %v, want ErrSize", err)
	}
	s.Header.MaxFeatures = 4096
	if err := s.Validate(); err != nil {
		t.Fatalf("max_features 4096: %v", err)
	}
}

// TestChallengerStateRoundTripAndChecks: a stored model with a challenger
// (format v4) decodes to the same state and splits into the model's own,
// the window's rows and the challenger's snapshot, by the layout of
// snapshot/doc.go counted by hand; a header that lies about the
// challenger is refused, and so is a challenger in a v3 file.
func TestChallengerStateRoundTripAndChecks(t *testing.T) {
	s := challengerSample()
	if v := s.FormatVersion(); v != 4 {
		t.Fatalf("format version %d, want 4", v)
	}
	data, got := roundTrip(t, s)
	own, window, c := got.SplitState()
	if len(own) != 0 || !slices.Equal(window, s.State[:6]) || c == nil || !slices.Equal(c.Coef[0], s.State[6:]) || c.State != nil {
		t.Fatalf("split: own %v, window %v, challenger %+v", own, window, c)
	}
	if c.Header.Seeds[0] != 7 || got.Header.Challenger.Wins != 1 || got.Header.Challenger.ChallengerFit != 0.95 {
		t.Errorf("challenger header %+v after the round trip", got.Header.Challenger)
	}
	if got.Served().Header.Challenger != nil || got.Served().State != nil {
		t.Error("the served copy carries the challenger")
	}
	for name, edit := range map[string]func(string) string{
		"rows beyond the payload": func(h string) string { return strings.Replace(h, `"rows":3`, `"rows":4`, 1) },
		"a huge window":           func(h string) string { return strings.Replace(h, `"rows":3`, `"rows":1073741824`, 1) },
		"another k": func(h string) string {
			return strings.Replace(h, `"model":{"model":"golden","algorithm":"kpca","generator":"`+features.GeneratorID+`","k":2`, `"model":{"model":"golden","algorithm":"kpca","generator":"`+features.GeneratorID+`","k":1`, 1)
		},
		"no model": func(h string) string { return strings.Replace(h, `"model":{`, `"modelx":{`, 1) },
	} {
		raw := rewriteHeader(t, data, edit)
		if string(raw) == string(data) {
			t.Fatalf("%s: the edit changed nothing", name)
		}
		if err := got.UnmarshalBinary(raw); err == nil {
			t.Errorf("%s: decoded without error", name)
		}
	}
	v3 := append([]byte(nil), data...)
	binary.LittleEndian.PutUint32(v3[8:], 3)
	v3 = binary.LittleEndian.AppendUint32(v3[:len(v3)-4], crc32.Checksum(v3[:len(v3)-4], castagnoli))
	if err := got.UnmarshalBinary(v3); !errors.Is(err, ErrHeader) {
		t.Errorf("a challenger in a v3 file: %v, want ErrHeader", err)
	}
}

// twoViewChallengerSample is a two-view kcca model (k = 2; view x of
// dimension 2, one block of 4 features; view y of dimension 3, one block
// of 2) with a challenger of the same shape and a window of 3 pairs. Its
// learner state by snapshot/doc.go's layout, counted by hand: the window,
// 3·4·k = 24 values (the model's u and v, the challenger's u and v, 3×2
// each), then the challenger's coefficients, 4·2 for x and 2·2 for y:
// 36 values, 0.5, 1.5, ….
func twoViewChallengerSample() *Snapshot {
	s := sample()
	h := &s.Header
	h.Algorithm, h.Seeds, h.MaxFeatures, h.Offsets = "kcca", Seeds{1}, 4, nil
	h.Views = append(h.Views[:1:1], View{Dim: 3, Kernel: features.Kernel{Family: features.Gaussian, Bandwidth: 1}, Seeds: Seeds{5}, BlockSize: 2})
	s.Coef = [][]float64{make([]float64, 4*2), make([]float64, 2*2)}
	ch := *h
	ch.Seeds, ch.Views = Seeds{7}, slices.Clone(h.Views)
	ch.Views[1].Seeds = Seeds{8}
	h.Challenger = &Challenger{Rows: 3, Lead: []float64{0.1, 0.01}, Model: &ch}
	s.State = make([]float64, 24+8+4)
	for i := range s.State {
		s.State[i] = float64(i) + 0.5
	}
	return s
}

// TestTwoViewChallengerStateSplits: a two-view model's challenger state
// round-trips and splits into the window's 24 values and the
// challenger's coefficients of each view at the offsets counted by hand
// (twoViewChallengerSample); one value more or less is refused. Before
// two-view learners had a challenger, such a header was refused.
func TestTwoViewChallengerStateSplits(t *testing.T) {
	s := twoViewChallengerSample()
	_, got := roundTrip(t, s)
	own, window, c := got.SplitState()
	if len(own) != 0 || !slices.Equal(window, s.State[:24]) || c == nil {
		t.Fatalf("split: own %v, window %v, challenger %v", own, window, c != nil)
	}
	if len(c.Coef) != 2 || !slices.Equal(c.Coef[0], s.State[24:32]) || !slices.Equal(c.Coef[1], s.State[32:36]) || c.State != nil {
		t.Errorf("challenger coefficients %v, state %v; want %v and %v, none", c.Coef, c.State, s.State[24:32], s.State[32:36])
	}
	if l := got.Header.Challenger.Lead; !slices.Equal(l, []float64{0.1, 0.01}) {
		t.Errorf("lead %v after the round trip", l)
	}
	for _, n := range []int{35, 37} {
		bad := twoViewChallengerSample()
		bad.State = bad.State[:0]
		for i := range n {
			bad.State = append(bad.State, float64(i))
		}
		if _, err := bad.MarshalBinary(); err == nil {
			t.Errorf("%d learner-state values for a layout of 36: encoded without error", n)
		}
	}
}

// TestProjectRefusesAWrongDst: a dst of the wrong length is an error
// that names the lengths, not a panic (bad input never panics).
func TestProjectRefusesAWrongDst(t *testing.T) {
	m, err := NewModel(sample(), ModelOptions{})
	if err != nil {
		t.Fatal(err)
	}
	x := []float64{1, -1, 2, 0.5}
	for _, dst := range [][]float64{make([]float64, 3), make([]float64, 5)} {
		if _, err := m.Project(dst, x); err == nil || !strings.Contains(err.Error(), "dst of") {
			t.Errorf("Project with %d values for 2 points of k = 2: %v; want an error naming dst", len(dst), err)
		}
	}
	if _, err := m.Project(make([]float64, 4), x); err != nil {
		t.Errorf("Project with a dst of the right length: %v", err)
	}
}
