//go:build amd64 && !purego

package dense

import "golang.org/x/sys/cpu"

//go:noescape
func mulAddAVX512(k int, a, b, c *float64, ldc int)

//go:noescape
func mulAdd4AVX2(k int, a, b, c *float64, ldc int)

// level selects the generated kernels: levelAVX512, levelAVX2 or levelGo
// (the CPU's best, set once; tests lower it to compare).
var level = func() int {
	switch {
	case cpu.X86.HasAVX512F:
		return levelAVX512
	case cpu.X86.HasAVX2 && cpu.X86.HasAVX:
		return levelAVX2
	}
	return levelGo
}()

// kernelAsm runs the mr×nr tile with a generated kernel, if this CPU has
// one, and reports whether it did.
func kernelAsm(k int, a, b, c []float64, ldc int) bool {
	if level == levelGo || k == 0 {
		return false
	}
	_ = a[k*mr-1]
	_ = b[k*nr-1]
	_ = c[(mr-1)*ldc+nr-1]
	if level == levelAVX512 {
		mulAddAVX512(k, &a[0], &b[0], &c[0], ldc)
		return true
	}
	for q := 0; q < nr; q += 4 { // the tile in quarters of four columns
		mulAdd4AVX2(k, &a[0], &b[q], &c[q], ldc)
	}
	return true
}
