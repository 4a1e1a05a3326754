//go:build openblas

package blasimpl

/*
#cgo LDFLAGS: -lopenblas
void openblas_set_num_threads(int);
char* openblas_get_corename(void);
*/
import "C"

import (
	"gonum.org/v1/gonum/blas/blas32"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/netlib/blas/netlib"
)

// Name is the BLAS behind blas64 and blas32 in this binary.
const Name = "OpenBLAS"

func init() {
	blas64.Use(netlib.Implementation{})
	blas32.Use(netlib.Implementation{})
}

// CoreName is the kernel family OpenBLAS chose for this CPU (e.g.
// "Haswell", "SkylakeX"), after OPENBLAS_CORETYPE if set.
func CoreName() string { return C.GoString(C.openblas_get_corename()) }

// SetThreads sets OpenBLAS's thread count for the calls that follow.
// Callers that already run BLAS calls on several goroutines set 1, so the
// two levels of parallelism do not oversubscribe the cores.
func SetThreads(n int) { C.openblas_set_num_threads(C.int(n)) }
