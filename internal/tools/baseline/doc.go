// Package baseline holds the methods a user would pick instead of
// streamkpca, implemented in-project so that `streamkpca bench compare`
// runs them on the same stream, in the same process, against the same
// held-out truth:
//
//   - [Exact]: kernel PCA of the Gram matrix of the first n points
//     (eigendecomposition of an n×n matrix; the eigenfunctions are extended
//     to new points by the Nyström formula f(x) = Σ_i k(x, x_i)·u_i).
//   - [RFF]: a fixed set of m random Fourier features (the same generator
//     as the learner) and the exact top-k eigenvectors of their
//     uncentred second-moment matrix (1/n)·ΣΦᵀΦ, accumulated over the
//     whole stream.
//   - [Nystrom]: m landmarks (the first m points of the stream), the
//     feature map ψ(x) = k_m(x)·K_mm^{-1/2}, and the exact top-k
//     eigenvectors of (1/n)·Σψᵀψ over the whole stream.
//
// # Invariants
//
// All three estimate the eigenfunctions of the uncentred kernel operator
// (the hermite streams' closed-form truth). Their matrix work goes through
// gonum's blas64, so a build that swaps in another BLAS implementation
// (the openblas build tag) speeds them up too. Eigenvalue problems larger
// than [DenseEigMax] are solved by block subspace iteration with
// Rayleigh–Ritz, warm-started from the previous Fit.
package baseline
