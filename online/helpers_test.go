package online

import "github.com/streamkpca/streamkpca/online/features"

func kernelG(l float64) features.Kernel {
	return features.Kernel{Family: features.Gaussian, Bandwidth: l}
}
