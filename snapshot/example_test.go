package snapshot_test

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/streamkpca/streamkpca/features"
	"github.com/streamkpca/streamkpca/online"
	"github.com/streamkpca/streamkpca/snapshot"
)

// A model learned online is served from its bytes: the Model projects
// exactly what the learner computes.
func ExampleModel() {
	l, err := online.New(online.Config{K: 2, BlockSize: 32, MaxFeatures: 256,
		Kernel: features.Kernel{Family: features.Gaussian, Bandwidth: 1}})
	if err != nil {
		panic(err)
	}
	defer l.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	x := make([]float64, 256)
	for range 16 {
		for i := range x {
			x[i] = rng.NormFloat64()
		}
		if err := l.Update(x, len(x)); err != nil {
			panic(err)
		}
	}
	data, err := l.Snapshot().MarshalBinary() // what Store.Save writes and NATS serves
	if err != nil {
		panic(err)
	}
	snap, err := snapshot.Decode(data)
	if err != nil {
		panic(err)
	}
	m, err := snapshot.NewModel(snap, snapshot.ModelOptions{})
	if err != nil {
		panic(err)
	}
	points := []float64{-1, 0, 0.5}
	served, err := m.Project(nil, points)
	if err != nil {
		panic(err)
	}
	learned := make([]float64, len(points)*m.K())
	l.EvalTo(learned, points, len(points))
	fmt.Println("components:", m.K(), "input dimension:", m.Dim(0), "features:", snap.Header.Features())
	fmt.Println("served = learned, bit for bit:", slices.Equal(served, learned))
	// Output:
	// components: 2 input dimension: 1 features: 256
	// served = learned, bit for bit: true
}
