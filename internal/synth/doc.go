// Package synth generates synthetic streams with known answers and scores
// learned functions against them.
//
// # Hermite
//
// x ~ N(0, diag(s₁², …, s_d²)) with the isotropic Gaussian kernel
// exp(−‖x−y‖²/(2ℓ²)). In one dimension with s and ℓ, the eigenfunctions of
// the (uncentred) kernel operator are known in closed form (Rasmussen &
// Williams, GPML §4.3.1): with a = 1/(4s²), b = 1/(2ℓ²), c = √(a²+2ab),
// A = a+b+c, B = b/A,
//
//	λ_n = √(2a/A)·Bⁿ,   φ_n(x) ∝ exp(−(c−a)x²)·H_n(√(2c)·x)
//
// (H_n the physicists' Hermite polynomials). In d dimensions the operator
// factorises: eigenfunctions are products Π_i φ^{(i)}_{n_i}(x_i) with
// eigenvalues Π_i λ^{(i)}_{n_i}.
//
// # Subspace error
//
// The quality of k learned functions F against k true ones T is
// 1 − cos²θ_max between their spans in L2(p), measured on a held-out sample
// x₁…x_n ~ p: QR-factorise the n×k evaluation matrices, and take
// 1 − σ_min(Q_Fᵀ·Q_T)². It is 0 for equal spans and 1 when some direction
// of one span is orthogonal to the other.
package synth
