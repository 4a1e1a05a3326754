package online

import (
	"math/rand/v2"
	"testing"

	"github.com/streamkpca/streamkpca/features"
	"github.com/streamkpca/streamkpca/snapshot"
)

// TestFrequenciesChoiceAndRestore: auto takes structured orthogonal
// frequencies for a gaussian kernel on 40 inputs and i.i.d. ones on 8,
// the snapshot names the generator accordingly, and a restored model
// keeps the frequencies it was learned with whatever the runtime
// configuration says (an i.i.d. model restored under the default auto
// must not change meaning).
func TestFrequenciesChoiceAndRestore(t *testing.T) {
	for _, tc := range []struct {
		d     int
		freq  Frequencies
		want  string
		views string
	}{
		{40, FrequenciesAuto, features.StructuredGeneratorID, snapshot.FrequenciesOrthogonal},
		{40, FrequenciesIID, features.GeneratorID, ""},
		{8, FrequenciesAuto, features.GeneratorID, ""},
		{20, FrequenciesOrthogonal, features.StructuredGeneratorID, snapshot.FrequenciesOrthogonal},
	} {
		rng := rand.New(rand.NewPCG(1, 2))
		x := make([]float64, 256*tc.d)
		for i := range x {
			x[i] = rng.NormFloat64()
		}
		l, err := New(Config{K: 3, Frequencies: tc.freq, BlockSize: 64, MaxFeatures: 512})
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if err := l.Update(x, 256); err != nil {
				t.Fatal(err)
			}
		}
		check := func(what string, s *snapshot.Snapshot) {
			t.Helper()
			if s.Header.Generator != tc.want || s.Header.Views[0].Frequencies != tc.views {
				t.Fatalf("d=%d %s%s: generator %q, view frequencies %q; want %q, %q", tc.d, tc.freq, what, s.Header.Generator, s.Header.Views[0].Frequencies, tc.want, tc.views)
			}
		}
		snap := l.Snapshot()
		l.Close()
		check("", snap)
		r, err := Restore(snap, Config{Frequencies: FrequenciesAuto})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Update(x, 256); err != nil {
			t.Fatal(err)
		}
		again := r.Snapshot()
		r.Close()
		check(" restored", again)
		// The restored model's blocks are the stored ones: the same
		// projections as a Model of the snapshot.
		m, err := snapshot.NewModel(snap, snapshot.ModelOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.ProjectView(0, nil, x[:tc.d]); err != nil {
			t.Fatal(err)
		}
	}
}
