package online_test

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/streamkpca/streamkpca/features"
	"github.com/streamkpca/streamkpca/online"
)

// Learning the top eigenfunctions of the Gaussian kernel on x ~ N(0, 1)
// from mini-batches; the kernel operator's eigenvalues are known in closed
// form (0.618, 0.236, 0.090 for bandwidth 1).
func ExampleKPCA() {
	l, err := online.New(online.Config{K: 3, MaxFeatures: 4096, Algorithm: online.AlgGHA,
		Kernel: features.Kernel{Family: features.Gaussian, Bandwidth: 1}})
	if err != nil {
		panic(err)
	}
	defer l.Close()
	rng := rand.New(rand.NewPCG(1, 1))
	x := make([]float64, 512)
	for range 100 {
		for i := range x {
			x[i] = rng.NormFloat64()
		}
		if err := l.Update(x, len(x)); err != nil {
			panic(err)
		}
	}
	eig, _ := l.Eigenvalues()
	fmt.Println("samples:", l.SamplesSeen(), "features:", l.Features())
	for i, want := range []float64{0.618, 0.236, 0.090} {
		fmt.Printf("λ%d within 0.02 of %.3f: %v\n", i+1, want, math.Abs(eig[i]-want) < 0.02)
	}
	// Output:
	// samples: 51200 features: 4096
	// λ1 within 0.02 of 0.618: true
	// λ2 within 0.02 of 0.236: true
	// λ3 within 0.02 of 0.090: true
}
