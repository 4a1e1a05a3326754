//go:build !openblas

package blasimpl

// Name is the BLAS behind blas64 and blas32 in this binary.
const Name = "gonum (pure Go)"

// CoreName is the kernel family the BLAS chose for this CPU.
func CoreName() string { return "" }

// SetThreads sets the BLAS's own thread count; gonum's BLAS has none.
func SetThreads(int) {}
