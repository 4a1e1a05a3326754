package online

import (
	"gonum.org/v1/gonum/mat"

	"github.com/streamkpca/streamkpca/features"
	"github.com/streamkpca/streamkpca/internal/synth"
)

func kernelG(l float64) features.Kernel {
	return features.Kernel{Family: features.Gaussian, Bandwidth: l}
}

func synthErr(a, b *mat.Dense) float64 { return synth.SubspaceError(a, b) }
