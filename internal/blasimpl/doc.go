// Package blasimpl selects the BLAS behind gonum's blas64 and blas32 for
// the binary that imports it. In the default build that is gonum's own
// pure-Go BLAS and this package does nothing. Built with the openblas tag
// (and Debian's libopenblas-dev, or any libopenblas on the linker path),
// its init routes both through gonum's netlib cgo binding to OpenBLAS.
//
// What goes through that BLAS: the baselines of `streamkpca bench compare`,
// the GEMM ceiling of `streamkpca bench throughput`, gonum's matrix work
// (eigensolvers, QR) and a learner configured with compute: blas. The
// learner's default kernels (compute: exact) never do, so models and
// projections are the same bits in both builds.
//
// # OpenBLAS and this machine's CPU
//
// OpenBLAS picks its kernels from the CPU it detects. Debian's 0.3.21
// misdetects some Xeons and then runs generic kernels several times
// slower; OPENBLAS_CORETYPE=SkylakeX (or the right name for the CPU)
// overrides the detection. [CoreName] reports what it chose. Tests and CI
// never set it.
package blasimpl
