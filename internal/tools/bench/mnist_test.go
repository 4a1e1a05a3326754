package bench

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/streamkpca/streamkpca/internal/mnist"
	"github.com/streamkpca/streamkpca/online"
)

// latentImages returns n 28×28 images whose pixel (r, c) is pixel(r, c,
// a, b) plus a little noise, for latent a, b drawn from N(0, 1) for each
// image: a stream whose kernel spectrum falls fast, as MNIST's does.
func latentImages(n int, seed uint64, pixel func(r, c int, a, b float64) float64) mnist.Set {
	rng := rand.New(rand.NewPCG(seed, 9))
	set := mnist.Set{X: make([]float64, n*mnist.Pixels), Labels: make([]int, n)}
	for i := range n {
		set.Labels[i] = i % 10
		img := set.X[i*mnist.Pixels : (i+1)*mnist.Pixels]
		a, b := rng.NormFloat64(), rng.NormFloat64()
		for p := range img {
			img[p] = pixel(p/28, p%28, a, b) + 0.05*rng.NormFloat64()
		}
	}
	return set
}

// twoFactors is a·f₁ + b·f₂ for two fixed smooth patterns.
func twoFactors(r, c int, a, b float64) float64 {
	return a*math.Sin(float64(r+c)/5) + b*math.Cos(float64(r*c)/40)
}

// RunMNIST scores each method against exact kernel PCA of the same
// training images: the learner's error is its last epoch's checkpoint
// and falls to the exact subspace's neighbourhood, and Nyström with half
// the training images as landmarks is closer still.
func TestRunMNISTScoresAgainstExact(t *testing.T) {
	progress := map[string]int{}
	res, err := RunMNIST(context.Background(), latentImages(700, 1, twoFactors), MNISTConfig{
		MNISTRun: MNISTRun{Train: 512, Test: 128, K: 3, Epochs: 6, Batch: 128, Landmarks: 256},
		Learner:  online.Config{K: 3, MaxFeatures: 2048, BlockSize: 128},
		Progress: func(method string, _ Checkpoint) { progress[method]++ },
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Train != 512 || res.Test != 128 || res.K != 3 || !(res.Bandwidth > 0) || len(res.Methods) != 2 {
		t.Fatalf("train %d test %d k %d bandwidth %v, %d methods; want 512, 128, 3, a bandwidth and two methods (no random features asked for)",
			res.Train, res.Test, res.K, res.Bandwidth, len(res.Methods))
	}
	for _, m := range res.Methods {
		t.Logf("%s (%d %s): error %.3g in %.2f s, %d checkpoints", m.Method, m.Size, m.SizeOf, m.Error, m.Seconds, len(m.Curve))
	}
	learner, nystrom := res.Methods[0], res.Methods[1]
	if len(learner.Curve) != 6 || progress[learner.Method] != 6 || learner.Error != learner.Curve[5].Error {
		t.Errorf("the learner's curve has %d checkpoints (%d reported), its error %v; want one per epoch, 6, and the last one's", len(learner.Curve), progress[learner.Method], learner.Error)
	}
	if !(learner.Error < 0.01) || !(nystrom.Error < 1e-5) {
		t.Errorf("errors against exact kernel PCA: learner %v, Nyström %v; want below 0.01 and 1e-5", learner.Error, nystrom.Error)
	}
}
