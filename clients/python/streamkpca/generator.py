"""The random-feature generator "splitmix64-bm-v1", as documented in the Go
package features (doc.go).

Every random number is a pure function of (seed, stream, index). Log,
Cos2Pi and ExpNeg are the Go package's own polynomials, evaluated here with
the same operations in the same order: numpy's element-wise operations round
every product and sum separately (no fused multiply-add), exactly as the Go
code does, so the results are the same bits.

All functions take and return numpy arrays (uint64 for words, float64 for
values); indices may be arrays, so a whole block is generated at once.
"""

import math

import numpy as np

GENERATOR_ID = "splitmix64-bm-v1"
# The generator of structured orthogonal random features (features.
# StructuredGeneratorID): a snapshot with an "orthogonal" view carries it.
STRUCTURED_GENERATOR_ID = "splitmix64-sorf-v1"
GENERATOR_IDS = (GENERATOR_ID, STRUCTURED_GENERATOR_ID)

# Streams of the generator.
STREAM_OMEGA = 1  # frequencies (standard normals, Box-Muller)
STREAM_PHASE = 2  # phases (uniform in turns)
STREAM_SEEDS = 3  # block seeds derived from a model seed
STREAM_INIT = 4  # initial coefficients
STREAM_EXTRA1 = 5  # kernel-specific extra draws
STREAM_EXTRA2 = 6  # a second stream of them (structured Matern mixing)

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)

# Constants written as the float64 bits Go's constants round to.
LN2 = float.fromhex("0x1.62e42fefa39efp-1")  # math.Ln2
INV_LN2 = float.fromhex("0x1.71547652b82fep+0")  # 1/math.Ln2
SQRT2_2 = float.fromhex("0x1.6a09e667f3bcdp-1")  # math.Sqrt2/2
TWO_PI = float.fromhex("0x1.921fb54442d18p+2")  # 2*math.Pi
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10


def _u64(v):
    return np.asarray(v, dtype=np.uint64)


def fmix64(z):
    """SplitMix64's finaliser, element-wise (arithmetic mod 2**64)."""
    z = _u64(z).copy()
    with np.errstate(over="ignore"):
        z ^= z >> np.uint64(30)
        z *= _M1
        z ^= z >> np.uint64(27)
        z *= _M2
        z ^= z >> np.uint64(31)
    return z


def key(seed, stream):
    """key(seed, stream) = fmix64(seed ^ fmix64(stream + golden))."""
    with np.errstate(over="ignore"):
        return fmix64(_u64(seed) ^ fmix64(_u64(stream) + _GOLDEN))


def word(k, i):
    """The i-th 64-bit word of the stream with key k."""
    with np.errstate(over="ignore"):
        return fmix64(_u64(k) + (_u64(i) + np.uint64(1)) * _GOLDEN)


def uniform(w):
    """Maps words to float64 in the open interval (0, 1)."""
    return ((_u64(w) >> np.uint64(11)).astype(np.float64) + 0.5) * (1.0 / (1 << 53))


def log(x):
    """features.Log: log m = 2(s + s^3/3 + ... + s^21/21), x = m 2^e."""
    x = np.asarray(x, dtype=np.float64)
    m, e = np.frexp(x)
    low = m < SQRT2_2
    m = np.where(low, m * 2, m)
    e = np.where(low, e - 1, e)
    s = (m - 1) / (m + 1)
    s2 = s * s
    p = np.full_like(s, 1.0 / 21)
    for n in range(19, 0, -2):
        p = p * s2 + 1.0 / n
    out = e.astype(np.float64) * LN2 + 2 * (s * p)
    bad = ~(x > 0) | np.isinf(x)
    if np.any(bad):
        out = np.where(bad, np.nan, out)
    return out


# (-1)^n/(2n+1)!, n = 1..9: int/int division is correctly rounded, as
# Go's constant expressions are, so these are the same float64 values.
_SIN = [(-1) ** n / math.factorial(2 * n + 1) for n in range(1, 10)]


def cos2pi(t):
    """features.Cos2Pi: cos(2 pi t) by an odd polynomial of degree 19."""
    t = np.asarray(t, dtype=np.float64)
    y = t - np.rint(t)  # rint rounds half to even, as math.RoundToEven
    u = np.abs(y) - 0.25
    v = u * TWO_PI
    v2 = v * v
    p = np.full_like(v, _SIN[8])
    for c in reversed(_SIN[:8]):
        p = p * v2 + c
    return -(v + (v * v2) * p)


_FACT = [1.0]
for _i in range(1, 15):
    _FACT.append(_FACT[-1] * _i)


def expneg(t):
    """features.ExpNeg: exp(-t) for t >= 0, Taylor series to degree 14."""
    t = np.asarray(t, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        ok = t >= 0
    tt = np.where(ok, t, 0.0)
    tt = np.minimum(tt, 747.0)
    k = np.rint(tt * INV_LN2)
    r = (tt - k * _LN2_HI) - k * _LN2_LO
    p = np.full_like(r, 1.0 / 87178291200)
    for n in range(13, 0, -1):
        p = p * (-r) + 1 / _FACT[n]
    p = p * (-r) + 1
    out = np.ldexp(p, -k.astype(np.int64))
    out = np.where(t > 746, 0.0, out)
    return np.where(ok, out, np.nan)


def normal(k, i):
    """The i-th standard normal of the stream with key k (Box-Muller pairs)."""
    i = _u64(i)
    j = i // np.uint64(2)
    u1 = uniform(word(k, np.uint64(2) * j))
    u2 = uniform(word(k, np.uint64(2) * j + np.uint64(1)))
    r = np.sqrt(-2 * log(u1))
    even = (i % np.uint64(2)) == 0
    return np.where(even, r * cos2pi(u2), r * cos2pi(u2 - 0.25))


def derive_seed(model_seed, i):
    """The seed of block i of a model with the given seed."""
    return word(key(model_seed, STREAM_SEEDS), i)


def gamma_draws(keys, a):
    """Gamma(a, 1) by Marsaglia-Tsang for each stream key of an array
    (features.gammaDraw): for each key the draws of the Go code in its
    order — attempt i reads normal(k, i) and uniform(word(k, 2**41 + i)),
    a < 1 first uniform(word(k, 2**40)) for the boost — so the same bits,
    vectorised over the keys: a few numpy operations per round of
    attempts (at a >= 1 nearly every draw is accepted in the first),
    not per draw (a model of 18,432 structured features at d = 64 was
    built in 2.3 s, now 0.03 s)."""
    keys = _u64(keys).ravel()
    n = keys.size
    out = np.empty(n)
    boost = np.ones(n)
    if a < 1:
        u = uniform(word(keys, np.uint64(1 << 40)))
        boost = expneg(-log(u) / a)
        a = a + 1
    d = a - 1.0 / 3
    c = 1 / np.sqrt(9 * d)
    pending = np.arange(n)
    i = 0
    while pending.size:
        k = keys[pending]
        z = normal(k, np.full(pending.size, i, dtype=np.uint64))
        u = uniform(word(k, np.uint64((1 << 41) + i)))
        i += 1
        v = 1 + c * z
        pos = v > 0
        v = (v * v) * v
        lv = log(np.where(pos, v, 1.0))
        acc = pos & (log(u) < (0.5 * (z * z)) + (d - d * v) + d * lv)
        out[pending[acc]] = (d * v[acc]) * boost[pending[acc]]
        pending = pending[~acc]
    return out


def go_pow_int(x, n):
    """Go's math.Pow(x, n) for finite x > 0 and an integer n, operation for
    operation (successive squarings of the mantissa, then Ldexp)."""
    if n == 0 or x == 1:
        return 1.0
    if n == 1:
        return float(x)
    yi = abs(n)
    a1, ae = 1.0, 0
    x1, xe = math.frexp(x)
    i = yi
    while i != 0:
        if xe < -(1 << 12) or (1 << 12) < xe:
            ae += xe
            break
        if i & 1 == 1:
            a1 *= x1
            ae += xe
        x1 *= x1
        xe <<= 1
        if x1 < 0.5:
            x1 += x1
            xe -= 1
        i >>= 1
    if n < 0:
        a1 = 1 / a1
        ae = -ae
    return math.ldexp(a1, ae)
