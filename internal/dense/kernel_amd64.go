//go:build amd64 && !purego

package dense

import "golang.org/x/sys/cpu"

//go:noescape
func mulAddAVX512(k int, a, b, c *float64, ldc int)

// hasAVX512 selects the generated kernels.
var hasAVX512 = cpu.X86.HasAVX512F

// kernelAsm runs the mr×nr tile with the generated kernel, if this CPU
// has it, and reports whether it did.
func kernelAsm(k int, a, b, c []float64, ldc int) bool {
	if !hasAVX512 || k == 0 {
		return false
	}
	_ = a[k*mr-1]
	_ = b[k*nr-1]
	_ = c[(mr-1)*ldc+nr-1]
	mulAddAVX512(k, &a[0], &b[0], &c[0], ldc)
	return true
}
