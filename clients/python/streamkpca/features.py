"""Kernels and their feature maps (paper Table 1), as the Go package
features computes them: the same draws, the same operations, the
same order, so the features are the same bits.

A block of a random-feature map is generated from its seed (generate);
phi evaluates a block on rows of inputs. A landmark block is built from
its points (Landmarks) and evaluated the same way.
"""

import math

import numpy as np

from . import generator as g

SHIFT_INVARIANT = ("gaussian", "laplacian", "cauchy", "matern")
RADIAL = ("gaussian", "matern", "arccosine")
PART_BITS = 8  # features.structuredPartBits
PAIR_PHASE = 0.75  # cos 2pi(t + 3/4) = sin 2pi t
FAMILIES = SHIFT_INVARIANT + (
    "dotproduct",
    "polynomial",
    "expsemigroup",
    "recsemigroup",
    "arccosine",
    "linear",
)


class Kernel:
    """A kernel family with its parameters (the JSON of a snapshot view)."""

    def __init__(self, family="gaussian", bandwidth=0.0, nu=0.0, degree=0, offset=0.0,
                 coefficients=None, p=0.0, beta=0.0, lam=0.0):
        if family not in FAMILIES:
            raise ValueError(f"unknown kernel family {family!r} (known: {', '.join(FAMILIES)})")
        self.family = family
        self.bandwidth = float(bandwidth)
        self.nu = float(nu)
        self.degree = int(degree)
        self.offset = float(offset)
        self.coefficients = [float(a) for a in (coefficients or [])]
        self.p = float(p) if p else 2.0
        self.beta = float(beta)
        self.lam = float(lam)

    @classmethod
    def from_json(cls, j):
        return cls(family=j.get("family", "gaussian"), bandwidth=j.get("bandwidth", 0.0),
                   nu=j.get("nu", 0.0), degree=j.get("degree", 0), offset=j.get("offset", 0.0),
                   coefficients=j.get("coefficients"), p=j.get("p", 0.0), beta=j.get("beta", 0.0),
                   lam=j.get("lambda", 0.0))

    def check_input(self, x):
        """Raises ValueError for values outside the kernel's domain."""
        if self.family in ("expsemigroup", "recsemigroup") and np.any(x < 0):
            i = int(np.argmax(x.reshape(-1) < 0))
            raise ValueError(f"{self.family} kernel needs x >= 0, value {i} is {x.reshape(-1)[i]}")

    def eval_rows(self, x, z):
        """The exact kernel matrix k(x_r, z_f) (rows of x by rows of z), as
        features.Kernel.Eval computes it, with this platform's libm: the
        same to rounding, not always to the bit (see Landmarks)."""
        f = self.family
        l = self.bandwidth
        out = np.empty((x.shape[0], z.shape[0]))
        for r in range(x.shape[0]):
            xr = x[r]
            d = xr[None, :] - z
            if f == "laplacian":
                out[r] = np.exp(-np.abs(d).sum(axis=1) / l)
            elif f == "cauchy":
                v = np.ones(z.shape[0])
                for i in range(z.shape[1]):
                    di = d[:, i] / l
                    v = v / (1 + di * di)
                out[r] = v
            elif f == "matern":
                rr = np.sqrt((d * d).sum(axis=1)) / l
                if self.nu == 0.5:
                    out[r] = np.exp(-rr)
                elif self.nu == 1.5:
                    out[r] = (1 + math.sqrt(3) * rr) * np.exp(-math.sqrt(3) * rr)
                else:
                    out[r] = (1 + math.sqrt(5) * rr + 5 * rr * rr / 3) * np.exp(-math.sqrt(5) * rr)
            elif f == "dotproduct":
                dot = z @ xr
                v = np.zeros(z.shape[0])
                for n, a in enumerate(self.coefficients):
                    v = v + a * dot ** n
                out[r] = v
            elif f == "polynomial":
                out[r] = (z @ xr + self.offset) ** self.degree
            elif f == "expsemigroup":
                out[r] = np.exp(-self.beta * np.sqrt(xr[None, :] + z).sum(axis=1))
            elif f == "recsemigroup":
                v = np.ones(z.shape[0])
                for i in range(z.shape[1]):
                    v = v * (self.lam / (xr[i] + z[:, i] + self.lam))
                out[r] = v
            elif f == "arccosine":
                n1 = math.sqrt((xr * xr).sum())
                n2 = np.sqrt((z * z).sum(axis=1))
                dot = z @ xr
                with np.errstate(invalid="ignore", divide="ignore"):
                    c = np.clip(dot / (n1 * n2), -1, 1)
                th = np.arccos(c)
                n = self.degree
                if n == 0:
                    j = np.pi - th
                elif n == 1:
                    j = np.sin(th) + (np.pi - th) * c
                else:
                    j = 3 * np.sin(th) * c + (np.pi - th) * (1 + 2 * c * c)
                v = (n1 * n2) ** n * j / np.pi
                zero = (n1 == 0) | (n2 == 0)
                out[r] = np.where(zero, 0.5 if n == 0 else 0.0, v)
            else:
                raise ValueError(f"no exact kernel for family {f!r}")
        return out


class Block:
    """One generated block: omega (in_dim x cols), phase (cols) and, for
    the dot-product kernel, each feature's degree."""

    def __init__(self, seed, omega, phase, degree=None, signs=None, scale=None):
        self.seed = seed
        self.omega = omega
        self.phase = phase
        self.degree = degree
        self.signs = signs  # structured: 3 sign vectors of length p per stack
        self.scale = scale  # structured: one norm per frequency


class Map:
    """The random feature map of a kernel on inputs of dimension dim, in
    blocks of block_size features (features.Map)."""

    def __init__(self, kernel, dim, block_size, float32=False, blas=False, structured=False):
        self.kernel = kernel
        self.dim = dim
        self.block_size = block_size
        self.float32 = float32
        self.blas = blas
        self.structured = structured
        if kernel.family == "linear" and block_size != dim:
            raise ValueError(f"the linear map has exactly dim = {dim} features per block, got {block_size}")
        if structured:
            if kernel.family not in RADIAL:
                raise ValueError(f"structured orthogonal frequencies need a radial kernel, not {kernel.family}")
            if float32:
                raise ValueError("structured orthogonal frequencies compute in float64")
            if kernel.family in SHIFT_INVARIANT and block_size % 2:
                raise ValueError(f"structured [cos, sin] pairs need an even block size, got {block_size}")

    # Structured orthogonal random features (features/structured.go).

    def pad(self):
        p = 1
        while p < self.dim:
            p <<= 1
        return p

    def freqs(self):
        """Frequencies of a structured block: a [cos, sin] pair of
        features each for the shift-invariant kernels, one for arc-cosine."""
        return self.block_size // 2 if self.kernel.family in SHIFT_INVARIANT else self.block_size

    def stack_range(self, seed):
        """The block's first global frequency and its first and last stack."""
        p, nf = self.pad(), self.freqs()
        g0 = (seed & ((1 << PART_BITS) - 1)) * nf
        return g0, g0 // p, (g0 + nf - 1) // p

    def _generate_structured(self, seed):
        k, nb = self.kernel, self.block_size
        p, nf = self.pad(), self.freqs()
        g0, t0, t1 = self.stack_range(seed)
        base = seed & ~((1 << PART_BITS) - 1) & ((1 << 64) - 1)
        ko = g.key(base, g.STREAM_OMEGA)
        w = g.word(ko, np.arange(3 * t0 * p, 3 * (t1 + 1) * p, dtype=np.uint64))
        signs = np.where((w >> np.uint64(63)) == 1, -1.0, 1.0)
        pf = float(p)
        if k.family == "arccosine":
            norm = 1 / (pf * math.sqrt(pf))
        else:
            norm = 1 / (((g.TWO_PI * k.bandwidth) * pf) * math.sqrt(pf))
        kr = g.key(base, g.STREAM_EXTRA1)
        km = g.key(base, g.STREAM_EXTRA2)
        gi = np.arange(g0, g0 + nf, dtype=np.uint64)
        chi = np.sqrt(2 * g.gamma_draws(g.key(g.word(kr, gi), 0), pf / 2))
        if k.family == "matern":
            mix = 2 * g.gamma_draws(g.key(g.word(km, gi), 0), k.nu)
            chi = chi * np.sqrt(2 * k.nu / mix)
        scale = chi * norm
        phase = np.zeros(nb)
        if k.family in SHIFT_INVARIANT:
            phase[1::2] = PAIR_PHASE
        return Block(seed, None, phase, signs=signs, scale=scale)

    def _z_structured(self, x, b):
        """z of a structured block: per stack, v = H D3 H D2 H D1 x~ (x
        padded with zeros to p) by the same butterflies as fwht4Go (stage
        p/2 first, (a, b) -> (a + b, a - b)), then v times each
        frequency's scale, the second feature of a pair plus 3/4 turn."""
        rows, d = x.shape
        p, nf, nb = self.pad(), self.freqs(), self.block_size
        g0, t0, t1 = self.stack_range(b.seed)
        pair = nf < nb
        z = np.zeros((rows, nb))
        for t in range(t0, t1 + 1):
            sg = b.signs[3 * (t - t0) * p:3 * (t - t0 + 1) * p]
            v = np.zeros((rows, p))
            v[:, :d] = x * sg[None, :d]
            v = _fwht(v, p)
            v = _fwht(v * sg[None, p:2 * p], p)
            v = _fwht(v * sg[None, 2 * p:3 * p], p)
            j0, j1 = max(t * p - g0, 0), min((t + 1) * p - g0, nf)
            u = v[:, g0 + j0 - t * p:g0 + j1 - t * p] * b.scale[None, j0:j1]
            if pair:
                z[:, 2 * j0:2 * j1:2] = u
                z[:, 2 * j0 + 1:2 * j1:2] = u + PAIR_PHASE
            else:
                z[:, j0:j1] = u
        return z

    def in_dim(self):
        return self.dim + 1 if self.kernel.family == "polynomial" else self.dim

    def cols(self):
        k, nb = self.kernel, self.block_size
        if k.family == "dotproduct":
            return nb * (len(k.coefficients) - 1)
        if k.family == "polynomial":
            return nb * k.degree
        return nb

    def generate(self, seed):
        """The block of the given seed (features.Map.Generate)."""
        if self.structured:
            return self._generate_structured(seed)
        d, nb, din = self.dim, self.block_size, self.in_dim()
        cols = self.cols()
        k = self.kernel
        om = np.zeros((din, max(cols, 1)))
        phase = np.zeros(max(cols, 1))
        ko = g.key(seed, g.STREAM_OMEGA)
        # index f*d + c of the feature-major draws, laid out as [c, f]
        idx = (np.arange(nb, dtype=np.uint64)[None, :] * np.uint64(d)
               + np.arange(d, dtype=np.uint64)[:, None])
        degree = None
        fam = k.family
        if fam == "gaussian":
            scale = 1 / (g.TWO_PI * k.bandwidth)
            om[:d, :nb] = g.normal(ko, idx) * scale
        elif fam == "laplacian":
            scale = 1 / (g.TWO_PI * k.bandwidth)
            h = (g.uniform(g.word(ko, idx)) - 0.5) / 2
            t = g.cos2pi(h - 0.25) / g.cos2pi(h)
            om[:d, :nb] = t * scale
        elif fam == "cauchy":
            scale = 1 / (g.TWO_PI * k.bandwidth)
            u = g.uniform(g.word(ko, idx)) - 0.5
            w = -g.log(1 - 2 * np.abs(u))
            w = np.where(u < 0, -w, w)
            om[:d, :nb] = w * scale
        elif fam == "matern":
            kg = g.key(seed, g.STREAM_EXTRA1)
            z = g.normal(ko, idx)
            gam = 2 * g.gamma_draws(g.key(g.word(kg, np.arange(nb, dtype=np.uint64)), 0), k.nu)
            scale = np.sqrt(2 * k.nu / gam) / (g.TWO_PI * k.bandwidth)
            om[:d, :nb] = z * scale[None, :]
        elif fam == "dotproduct":
            mdeg = len(k.coefficients) - 1
            kn = g.key(seed, g.STREAM_EXTRA1)
            us = g.uniform(g.word(kn, np.arange(nb, dtype=np.uint64)))
            degree = [_degree_of(float(u), k.p) for u in us]
            if mdeg > 0:
                # column f*mdeg + i, row c: word (f*mdeg + i)*d + c
                col = np.arange(nb * mdeg, dtype=np.uint64)
                widx = col[None, :] * np.uint64(d) + np.arange(d, dtype=np.uint64)[:, None]
                sign = (g.word(ko, widx) >> np.uint64(63)) == 1
                om[:d, :] = np.where(sign, -1.0, 1.0)
        elif fam == "polynomial":
            for j in range(k.degree):
                w = g.word(ko, np.arange(j * din, (j + 1) * din, dtype=np.uint64))
                h = ((w >> np.uint64(1)) % np.uint64(nb)).astype(np.int64)
                s = np.where((w & np.uint64(1)) == 1, -1.0, 1.0)
                om[np.arange(din), j * nb + h] = s
        elif fam == "expsemigroup":
            z = g.normal(ko, idx)
            om[:d, :nb] = (k.beta * k.beta) / (2 * (z * z))
        elif fam == "recsemigroup":
            om[:d, :nb] = -g.log(g.uniform(g.word(ko, idx))) / k.lam
        elif fam == "arccosine":
            om[:d, :nb] = g.normal(ko, idx)
        elif fam == "linear":
            om[np.arange(d), np.arange(d)] = 1
        if fam in SHIFT_INVARIANT:
            phase[:nb] = g.uniform(g.word(g.key(seed, g.STREAM_PHASE), np.arange(nb, dtype=np.uint64)))
        return Block(seed, om, phase, degree)

    def z(self, x, b):
        """z = phase + x.Omega, accumulated over the input coordinates in
        order, every product and sum rounded (the tile kernels)."""
        if self.structured:
            return self._z_structured(x, b)
        rows = x.shape[0]
        if self.kernel.family == "polynomial":
            x = np.concatenate([x, np.full((rows, 1), math.sqrt(self.kernel.offset))], axis=1)
        cols = max(self.cols(), 1)
        if self.float32:
            om32 = b.omega.astype(np.float32)
            x32 = x.astype(np.float32)
            if self.blas:
                return (b.phase.astype(np.float32)[None, :] + x32 @ om32).astype(np.float64)
            z = np.tile(b.phase.astype(np.float32), (rows, 1))
            for c in range(x.shape[1]):
                z += x32[:, c, None] * om32[c, None, :]
            return z.astype(np.float64)
        if self.blas:
            return b.phase[None, :cols] + x @ b.omega
        z = np.tile(b.phase[:cols], (rows, 1))
        for c in range(x.shape[1]):
            z += x[:, c, None] * b.omega[c, None, :]
        return z

    def phi(self, x, b):
        """The block's features of rows x (rows x dim) -> rows x block_size."""
        return self.activate(self.z(x, b), b)

    def activate(self, z, b):
        k, nb = self.kernel, self.block_size
        fam = k.family
        if fam in SHIFT_INVARIANT:
            return math.sqrt(2 / nb) * g.cos2pi(z)
        if fam in ("expsemigroup", "recsemigroup"):
            return (1 / math.sqrt(nb)) * g.expneg(z)
        if fam == "arccosine":
            s = math.sqrt(2 / nb)
            if k.degree == 0:
                v = np.full_like(z, s)
            elif k.degree == 1:
                v = s * z
            else:
                v = (s * z) * z
            return np.where(z <= 0, 0.0, v)
        if fam == "linear":
            return z.copy()
        if fam == "dotproduct":
            mdeg = len(k.coefficients) - 1
            p = k.p
            out = np.zeros((z.shape[0], nb))
            for f in range(nb):
                deg = b.degree[f]
                if deg > mdeg or k.coefficients[deg] == 0:
                    continue
                v = np.full(z.shape[0], math.sqrt(k.coefficients[deg] / ((1 - 1 / p) * g.go_pow_int(p, -deg)))
                            / math.sqrt(nb))
                for i in range(deg):
                    v = v * z[:, f * mdeg + i]
                out[:, f] = v
            return out
        if fam == "polynomial":
            # circular convolution of the sketches, in sketch order: for
            # each a, t[(a + c) % nb] += out[a] * sk[c] over c, which is
            # one addition per element of t for each a.
            out = z[:, :nb].copy()
            for j in range(1, k.degree):
                sk = z[:, j * nb:(j + 1) * nb]
                t = np.zeros_like(out)
                for a in range(nb):
                    t += np.roll(out[:, a, None] * sk, a, axis=1)
                out = t
            return out
        raise ValueError(f"unknown family {fam!r}")


def _fwht(v, p):
    """features.fwht4Go on each row of v (rows x p): stages h = p/2 ... 1."""
    rows = v.shape[0]
    h = p // 2
    while h >= 1:
        w = v.reshape(rows, p // (2 * h), 2, h)
        a, b = w[:, :, 0, :], w[:, :, 1, :]
        v = np.stack((a + b, a - b), axis=2).reshape(rows, p)
        h //= 2
    return v


def _degree_of(u, p):
    n = 0
    c = 1 - 1 / p
    acc = c
    while u > acc and n < 64:
        n += 1
        c /= p
        acc += c
    return n


def add_mul(dst, phi, a):
    """dst += phi.a with each output summed over the features in order
    (features.AddMul): dst[r, q] += phi[r, f] * a[f, q] for f = 0, 1, ..."""
    for f in range(phi.shape[1]):
        dst += phi[:, f, None] * a[f, None, :]
    return dst


class Landmarks:
    """A landmark block (features.Landmarks): B points z and the Nystrom
    map psi(x) = L^-1 k(Z, x), L L^T = K_ZZ + eps I.

    For the Gaussian kernel every value is computed with the Go code's
    operations in its order (ExpNeg, sums in order, the same Cholesky and
    triangular inverse), so psi is the same bits. The other families call
    their exact kernel through numpy's libm (Go uses its own exp, pow,
    acos): the same to rounding, not always to the bit.
    """

    def __init__(self, kernel, z):
        self.kernel = kernel
        self.z = np.array(z, dtype=np.float64)
        nb, d = self.z.shape
        self.zt = self.z.T.copy()
        self.zn = np.array([_sq_norm(self.z[f]) for f in range(nb)])
        kzz = self.kernel_rows(self.z)
        tr = 0.0
        for f in range(nb):
            tr += float(kzz[f, f])
        if not (tr > 0) or math.isinf(tr):
            raise ValueError(f"the landmarks' kernel matrix has trace {tr}")
        eps = 1e-8 * tr / nb
        for tries in range(7):
            l = _cholesky(kzz, eps)
            if l is not None:
                break
            if tries == 6:
                raise ValueError(f"the landmarks' kernel matrix is not positive definite even with jitter {eps:g}")
            eps *= 100
        self.jitter = eps
        self.wt = _inv_lower_t(l)

    def kernel_rows(self, x):
        """k(x_r, z_f) as features.Map.kernelRows computes it."""
        k = self.kernel
        if k.family == "gaussian":
            dot = add_mul(np.zeros((x.shape[0], self.z.shape[0])), x, self.zt)
            inv = 1 / (2 * (k.bandwidth * k.bandwidth))
            xn = np.array([_sq_norm(r) for r in x])
            s = (xn[:, None] + self.zn[None, :]) - 2 * dot
            return g.expneg(np.maximum(s, 0) * inv)
        return k.eval_rows(x, self.z)

    def phi(self, x):
        kx = self.kernel_rows(x)
        return add_mul(np.zeros((x.shape[0], self.z.shape[0])), kx, self.wt)


def _sq_norm(v):
    s = 0.0
    for x in v.tolist():
        s += x * x
    return s


def _cholesky(a, eps):
    """features.cholesky: lower L with L L^T = a + eps I, or None at a
    pivot that is not positive. Sums run in the Go code's order."""
    n = a.shape[0]
    l = np.zeros((n, n))
    for j in range(n):
        lj = l[j, :j]
        s = (float(a[j, j]) + eps) - _sq_norm(lj)
        if not (s > 0):
            return None
        d = math.sqrt(s)
        l[j, j] = d
        if j + 1 < n:
            t = np.zeros(n - j - 1)
            for c in range(j):
                t += l[j + 1:, c] * lj[c]
            l[j + 1:, j] = (a[j + 1:, j] - t) / d
    return l


def _inv_lower_t(l):
    """features.invLowerT: (L^-1)^T by forward substitution on each unit
    vector, vectorised over the unit vectors (terms before a vector's own
    start subtract exact zeros, which leave the sums' bits unchanged)."""
    n = l.shape[0]
    w = np.zeros((n, n))  # w[c, i] = (L^-1)[i, c]
    for i in range(n):
        s = np.zeros(i + 1)
        s[i] = 1
        for j in range(i):
            s -= l[i, j] * w[:i + 1, j]
        w[:i + 1, i] = s / l[i, i]
    return w
