package online

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/streamkpca/streamkpca/internal/synth"
)

var expPoints = flag.Int("exp.points", 0, "run the hermite experiment with this many points")
var expTheta0 = flag.Float64("exp.theta0", 0, "")
var expTheta1 = flag.Float64("exp.theta1", 0, "")
var expMaxF = flag.Int("exp.maxf", 0, "")
var expCenter = flag.Bool("exp.center", false, "")

func TestHermiteExperiment(t *testing.T) {
	if *expPoints == 0 {
		t.Skip("experiment: pass -exp.points")
	}
	h := synth.Hermite1D()
	rng := rand.New(rand.NewPCG(1, 1))
	held := make([]float64, 2000)
	h.Sample(held, rng)
	truth := h.Eigenfunctions(held, 2000, 3)
	l, err := New(Config{K: 3, Kernel: kernelG(1), Theta0: *expTheta0, Theta1: *expTheta1, MaxFeatures: *expMaxF, Center: *expCenter})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	b := 512
	x := make([]float64, b)
	out := make([]float64, 2000*3)
	start := time.Now()
	next := 1000
	for n := 0; n < *expPoints; n += b {
		h.Sample(x, rng)
		if err := l.Update(x, b); err != nil {
			t.Log(err)
		}
		if n+b >= next || n+b >= *expPoints {
			l.EvalTo(out, held, 2000)
			e := synth.SubspaceError(mat.NewDense(2000, 3, out), truth)
			ev, drift := l.Eigenvalues()
			fmt.Printf("%8d pts  feat %6d  err %.3e  eta %.3g eig %.4v drift %.2g  %.1fs\n", n+b, l.Features(), e, l.StepSize(), ev, drift, time.Since(start).Seconds())
			next *= 2
		}
	}
}
