"""Reading .skpca snapshots (format v1 to v4) and projecting with them.

The format (Go package snapshot, doc.go), little-endian:

    0       8   magic "SKPCASNP"
    8       4   uint32 format version (1 to 4)
    12      4   uint32 header length H
    16      H   JSON header
    16+H    8   uint64 number of payload values N
    24+H    8N  float64 payload: each view's coefficients (blocks*block_size
                rows by k), then each landmark view's points, then the
                learner state (not used for projecting)
    24+H+8N 4   uint32 CRC-32C of everything before it
"""

import bisect
import json
import math
import struct

import numpy as np

from . import features as ft
from . import generator as g

MAGIC = b"SKPCASNP"
MAX_HEADER_BYTES = 64 << 20
MAX_COEF = 1 << 30
CHUNK_BLOCKS = 8  # features.ChunkBlocks: blocks summed per partial result
GRAM_JITTER = 1e-12  # snapshot.gramJitter: Score's relative ridge on the components' Gram matrix


class SnapshotError(ValueError):
    """A file that is not a valid snapshot, or a model this client cannot
    project with."""


def _crc32c_table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


_TABLE = _crc32c_table()


def crc32c(data):
    """CRC-32C (Castagnoli) of data. Uses the crc32c or google_crc32c
    package when one is installed, else a table in pure Python."""
    try:
        import google_crc32c

        return google_crc32c.value(bytes(data))
    except ImportError:
        pass
    try:
        import crc32c as _c

        return _c.crc32c(bytes(data))
    except ImportError:
        pass
    crc = 0xFFFFFFFF
    t = _TABLE
    for b in bytes(data):
        crc = t[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


class View:
    """One input view: dimension, kernel, standardisation, centring."""

    def __init__(self, j, k):
        self.json = j
        self.dim = int(j["dim"])
        if not 1 <= self.dim <= 1 << 24:  # as the Go decoder (snapshot.Header.Validate)
            raise SnapshotError(f"view dimension {self.dim} outside 1 to 2**24")
        self.kernel = ft.Kernel.from_json(j.get("kernel", {}))
        pre = j.get("preprocess") or {}
        self.mean = np.array(pre.get("mean") or [], dtype=np.float64)
        self.scale = np.array(pre.get("scale") or [], dtype=np.float64)
        self.center = np.array(j.get("center") or [], dtype=np.float64)
        self.slices = [float(v) for v in (j.get("slices") or [])]
        self.precision = j.get("precision", "")
        self.compute = j.get("compute", "")
        self.features = j.get("features", "")
        self.frequencies = j.get("frequencies", "")
        self.seeds = [int(s, 16) for s in (j.get("seeds") or [])]
        self.block_size = int(j.get("block_size") or 0)
        if self.precision not in ("", "float32"):
            raise SnapshotError(f"unknown precision {self.precision!r}")
        if self.compute not in ("", "blas"):
            raise SnapshotError(f"unknown compute mode {self.compute!r}")
        if self.features not in ("", "landmarks"):
            raise SnapshotError(f"unknown feature source {self.features!r}")
        if self.frequencies not in ("", "orthogonal"):
            raise SnapshotError(f"unknown frequencies {self.frequencies!r}")
        if len(self.mean) not in (0, self.dim) or len(self.mean) != len(self.scale):
            raise SnapshotError("standardisation does not match the dimension")
        if len(self.center) not in (0, k):
            raise SnapshotError(f"centre has length {len(self.center)}, want k = {k}")

    @property
    def landmarks(self):
        return self.features == "landmarks"


class Snapshot:
    """A decoded snapshot: the JSON header (dict), its views, and each
    view's coefficients (blocks*block_size x k) and landmark points."""

    def __init__(self, header, version, coef, landmarks):
        self.header = header
        self.format_version = version
        self.coef = coef
        self.landmarks = landmarks

    @property
    def k(self):
        return int(self.header["k"])

    @property
    def version(self):
        """The model version: the learner step the snapshot was taken at."""
        return int(self.header["step"])

    @property
    def views(self):
        return [View(v, self.k) for v in self.header["views"]]

    def view_seeds(self, v):
        """Block seeds and block size of view v."""
        h = self.header
        vj = h["views"][v]
        if v == 0 or not vj.get("block_size"):
            return [int(s, 16) for s in h["seeds"]], int(h["block_size"])
        return [int(s, 16) for s in vj.get("seeds") or []], int(vj["block_size"])


def loads(data, verify=True):
    """Decodes a snapshot from bytes. verify checks the CRC-32C."""
    data = memoryview(bytes(data))
    if len(data) < 16:
        raise SnapshotError(f"truncated: {len(data)} bytes")
    if bytes(data[:8]) != MAGIC:
        raise SnapshotError("not a snapshot (bad magic)")
    version, hlen = struct.unpack_from("<II", data, 8)
    if version < 1 or version > 4:
        raise SnapshotError(f"unsupported format version {version} (this client reads 1 to 4)")
    if hlen > MAX_HEADER_BYTES:
        raise SnapshotError(f"header of {hlen} bytes exceeds {MAX_HEADER_BYTES}")
    if len(data) < 16 + hlen + 12:
        raise SnapshotError(f"truncated: {len(data)} bytes, the header alone needs {16 + hlen + 12}")
    (n,) = struct.unpack_from("<Q", data, 16 + hlen)
    if n > MAX_COEF or len(data) != 16 + hlen + 8 + 8 * n + 4:
        raise SnapshotError(f"sizes do not add up: {len(data)} bytes for {n} values")
    body = len(data) - 4
    if verify:
        (want,) = struct.unpack_from("<I", data, body)
        got = crc32c(data[:body])
        if got != want:
            raise SnapshotError(f"checksum mismatch (file corrupt): stored {want:08x}, computed {got:08x}")
    header = json.loads(bytes(data[16:16 + hlen]).decode("utf-8"))
    if header.get("generator") not in g.GENERATOR_IDS:
        raise SnapshotError(f"generator {header.get('generator')!r} (this client knows {', '.join(g.GENERATOR_IDS)})")
    payload = np.frombuffer(data[24 + hlen:body], dtype="<f8").astype(np.float64)
    if not np.all(np.isfinite(payload)):
        raise SnapshotError("non-finite value in the payload")
    snap = Snapshot(header, version, [], [])
    k = snap.k
    over = _oversample(header)
    cols = k + over  # a learner's columns: the first k served
    views = [View(v, cols) for v in header["views"]]
    if not 1 <= len(views) <= 2:
        raise SnapshotError(f"{len(views)} views")
    for i, view in enumerate(views):
        if view.frequencies == "orthogonal" and header.get("generator") != g.STRUCTURED_GENERATOR_ID:
            raise SnapshotError(f"view {i} has orthogonal frequencies but the generator is {header.get('generator')!r}")
    off = 0
    for v in range(len(views)):
        seeds, bs = snap.view_seeds(v)
        c = len(seeds) * bs * cols
        if off + c > n:
            raise SnapshotError("sizes do not add up: fewer values than the header implies")
        snap.coef.append(payload[off:off + c].reshape(len(seeds) * bs, cols))
        off += c
    for v, view in enumerate(views):
        if not view.landmarks:
            snap.landmarks.append(None)
            continue
        seeds, bs = snap.view_seeds(v)
        c = len(seeds) * bs * view.dim
        if off + c > n:
            raise SnapshotError("sizes do not add up: fewer values than the header implies")
        snap.landmarks.append(payload[off:off + c].reshape(len(seeds) * bs, view.dim))
        off += c
    state = _own_state_len(header, version, len(snap.coef[0].ravel())) + \
        _challenger_len(header, [v.dim for v in views], k, version, 0)
    if off + state != n:
        raise SnapshotError(f"sizes do not add up: {n} values, the header implies {off + state}")
    if over:
        # The served model: the first k components (Go's Snapshot.Served).
        snap.header = dict(header, oversample=0)
        snap.header["views"] = [dict(v) for v in header["views"]]
        for v in snap.header["views"]:
            if len(v.get("center") or []) == cols:
                v["center"] = v["center"][:k]
        snap.coef = [np.ascontiguousarray(c[:, :k]) for c in snap.coef]
    return snap


def _oversample(header):
    """The columns a learner learns beyond k (header "oversample")."""
    over = int(header.get("oversample") or 0)
    if over < 0 or over > 1 << 12 or (over and len(header.get("views") or []) != 1):
        raise SnapshotError(f"oversample {over}: want 0 to 4096, one view")
    return over


def _challenger_len(header, dims, k, version, depth):
    """The values of a header's challenger state (v4; learner.forget:
    follow): the comparison window (one view: its raw rows, the test's
    reference rows; two views: the test's reference pairs, x then y, or
    in a snapshot of the margin rule before the test the model's and the
    challenger's k values of u and v at each pair), the challenger's
    coefficients and its own state — with, one level deep, the
    challenger's own challenger (the shadow its test compares it with). Projections use the model's
    coefficients only."""
    ch = header.get("challenger")
    if not ch:
        return 0
    if version < 4:
        raise SnapshotError(f"challenger state in a format v{version} snapshot")
    m = ch.get("model") or {}
    mviews = m.get("views") or []
    if (m.get("challenger") and depth > 0) or len(mviews) != len(dims) or m.get("k") != k or \
            any(mv.get("dim") != d or mv.get("features") == "landmarks" for mv, d in zip(mviews, dims)):
        raise SnapshotError("a challenger must be a random-feature model of the same k, views and dimensions, nested at most one deep")
    if _oversample(m) != _oversample(header):
        raise SnapshotError("a challenger must learn the model's columns (oversample)")
    cols = k + _oversample(m)
    ccoef = 0
    for v, mv in enumerate(mviews):
        if v == 0 or not mv.get("block_size"):
            ccoef += len(m.get("seeds") or []) * m["block_size"] * cols
        else:
            ccoef += len(mv.get("seeds") or []) * mv["block_size"] * cols
    if len(dims) == 2:
        width = sum(dims) if ch.get("test") else 4 * k
    else:
        width = dims[0]
    return ch["rows"] * width + ccoef + _own_state_len(m, version, ccoef) + \
        _challenger_len(m, dims, k, version, depth + 1)


def _own_state_len(header, version, ncoef):
    """The learner's own state values: the covariance solver's, or the
    averaged solver's iterate and running average (v3; their centres when
    centred)."""
    cov = header.get("covariance")
    if cov:
        return _state_len(cov)
    if header.get("averaged"):
        if version < 3:
            raise SnapshotError(f"averaged state in a format v{version} snapshot")
        return 2 * ncoef + (2 * (header["k"] + _oversample(header)) if (header.get("settings") or {}).get("center") else 0)
    return 0


def _state_len(c):
    mx, my = c["features"]
    p = c["basis"]
    if my == 0:
        return mx * (mx + 1) // 2 + mx + mx * p
    return mx * (mx + 1) // 2 + my * (my + 1) // 2 + mx * my + mx + my + my * p


def load(path, verify=True):
    """Reads a snapshot file."""
    with open(path, "rb") as f:
        return loads(f.read(), verify=verify)


def slice_indicators(thresholds, t):
    """One-hot slice indicators of targets t: slice i holds
    thresholds[i-1] < t <= thresholds[i] (kernel sliced inverse regression)."""
    t = np.asarray(t, dtype=np.float64).reshape(-1)
    s = len(thresholds) + 1
    out = np.zeros((len(t), s))
    for r, v in enumerate(t.tolist()):
        i = 0
        while i < len(thresholds) and v > thresholds[i]:
            i += 1
        out[r, i] = 1
    return out


# Model's default bound on the memory of the generated feature blocks:
# a file of a few KB can declare a dimension of 2**24, whose blocks would
# take many GiB; the bound is checked before anything is allocated.
DEFAULT_MAX_BYTES = 1 << 30


def model_bytes(snap):
    """The bytes Model(snap) allocates for its feature blocks: per random
    feature block its frequencies and phases (in_dim x cols + cols
    float64), per landmark block its points (block_size x dim)."""
    total = 0
    for i, v in enumerate(snap.views):
        seeds, bs = snap.view_seeds(i)
        if v.landmarks:
            total += len(seeds) * bs * v.dim * 8
            continue
        m = ft.Map.__new__(ft.Map)  # sizes only: nothing generated
        m.kernel, m.dim, m.block_size = v.kernel, v.dim, bs
        total += len(seeds) * (m.in_dim() + 1) * max(m.cols(), 1) * 8
    return total


class Model:
    """Projects new points with a snapshot, as the Go snapshot.Model does:
    H(x) = sum over blocks of Phi_j(x) alpha_j, after the view's
    standardisation and minus its centring offset.

    exact=True (the default) evaluates with the Go code's operations in
    its order and gives the same bits as Go for float64 models. It costs
    one numpy operation per input coordinate and per feature of every
    block; exact=False uses matrix products instead (much faster, equal to
    rounding, about 1e-13 relative).
    """

    def __init__(self, snap, exact=True, max_bytes=DEFAULT_MAX_BYTES):
        need = model_bytes(snap)
        if max_bytes is not None and need > max_bytes:
            raise SnapshotError(
                f"this model's feature blocks need {need / 2**20:.0f} MiB "
                f"(dimensions {[v.dim for v in snap.views]}, {[len(snap.view_seeds(i)[0]) for i in range(len(snap.views))]} blocks), "
                f"over max_bytes = {max_bytes / 2**20:.0f} MiB: pass a larger max_bytes (or None) if you trust the file")
        self.snapshot = snap
        self.exact = exact
        self._views = snap.views
        self._maps = []
        self._blocks = []
        for v, view in enumerate(self._views):
            seeds, bs = snap.view_seeds(v)
            if view.landmarks:
                z = snap.landmarks[v]
                blocks = [ft.Landmarks(view.kernel, z[j * bs:(j + 1) * bs]) for j in range(len(seeds))]
                self._maps.append(None)
            else:
                m = ft.Map(view.kernel, view.dim, bs, float32=view.precision == "float32",
                           blas=view.compute == "blas" or not exact, structured=view.frequencies == "orthogonal")
                blocks = [m.generate(s) for s in seeds]
                self._maps.append(m)
            self._blocks.append(blocks)

    @property
    def k(self):
        return self.snapshot.k

    @property
    def version(self):
        return self.snapshot.version

    def views(self):
        return len(self._views)

    def dim(self, view=0):
        """Input dimension of a view (1 for a KSIR target view)."""
        v = self._views[view]
        return 1 if v.slices else v.dim

    @property
    def n_components_(self):
        """k, as scikit-learn names it."""
        return self.k

    @property
    def eigenvalues_(self):
        """The learner's estimates of the top-k eigenvalues of the kernel's
        covariance operator (centred when the model is), as scikit-learn's
        KernelPCA names them: a length-k array, largest first; None for a
        model that records none (two views, a snapshot from before they
        were recorded). Each component's share of the kernel's variance
        is its eigenvalue over E k(x, x) (1 for the Gaussian, Laplacian,
        Cauchy and Matern kernels, uncentred)."""
        e = ((self.snapshot.header.get("diagnostics") or {}).get("eigenvalues")) or []
        if not e:
            return None
        return np.asarray(e[:self.k], dtype=np.float64)

    @property
    def n_features_in_(self):
        """The input dimension of view x, as scikit-learn names it."""
        return self.dim(0)

    def fit(self, X=None, y=None):
        """The model is learned by the service or `streamkpca fit`; fit
        returns it unchanged, so that it can stand in a scikit-learn
        pipeline."""
        return self

    def transform(self, X, view=0):
        """scikit-learn's transform: X of shape (n_samples, n_features)
        -> an array of shape (n_samples, k), the same values, bit for bit,
        as project (and so as the Go service)."""
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2:
            raise ValueError(f"X must be 2-D (n_samples, n_features), got shape {X.shape}; "
                             "for one sample use X.reshape(1, -1)")
        return self.project(X, view=view)

    def project(self, x, view=0):
        """The k projections of each row of x (rows x dim, or one point)
        for the given view (0 = x, 1 = y): a rows x k array."""
        return self._evaluate(x, view, False)[0]

    def score(self, x):
        """Scores each row of x (view x), as the Go snapshot.Model.Score
        and the service's output topic and POST .../score do: returns
        (projections, residuals, novelty), a rows x k array, a rows array
        and a rows array (None when the version has no novelty reference).

        The residual is the squared distance in the model's feature space
        between the row's features and their projection onto the span of
        the k components, r = (|Phi(x)|^2 - h^T (A^T A + delta I)^-1 h) / J
        for J blocks (kernel PCA's reconstruction error, in the kernel's
        units); novelty is its place among the version's reference
        residuals, #{reference < r} / (n + 1). With exact=True these are
        the Go bits for float64 models. A centred model has no residual
        (ValueError)."""
        v = self._views[0]
        k = self.k
        if len(v.center) == k:
            raise ValueError("the residual of a centred model needs the features' mean, which snapshots do not keep "
                             "(learn with learner.center: false, or uncentered: true for two views)")
        proj, sq = self._evaluate(x, 0, True)
        chol = self._whitener()
        rows = proj.shape[0]
        y = np.zeros((rows, k))
        explained = np.zeros(rows)
        for i in range(k):
            val = proj[:, i].copy()
            for p in range(i):
                val = val - chol[i][p] * y[:, p]
            y[:, i] = val / chol[i][i]
            explained = explained + y[:, i] * y[:, i]
        blocks = float(max(1, len(self._blocks[0])))
        res = np.maximum(sq - explained, 0.0) / blocks
        ref = self._reference()
        if ref is None:
            return proj, res, None
        n = float(len(ref) + 1)
        nov = np.array([bisect.bisect_left(ref, r) / n for r in res])
        return proj, res, nov

    def _reference(self):
        """The version's novelty reference, sorted (None without one)."""
        if not hasattr(self, "_ref"):
            n = self.snapshot.header.get("novelty") or {}
            r = n.get("residuals") or []
            self._ref = sorted(float(v) for v in r) if r else None
        return self._ref

    def _whitener(self):
        """The Cholesky factor of the components' Gram matrix plus its
        jitter, with the Go code's operations in its order."""
        if getattr(self, "_chol", None) is not None:
            return self._chol
        k = self.k
        coef = self.snapshot.coef[0].reshape(-1, k)
        g = np.zeros((k, k))
        for c in coef:
            g = g + c[:, None] * c[None, :]
        tr = 0.0
        for a in range(k):
            tr += float(g[a, a])
        delta = (GRAM_JITTER * tr) / float(k)
        if not delta > 0:
            delta = GRAM_JITTER
        g = [[float(g[a, b]) for b in range(k)] for a in range(k)]
        for a in range(k):
            g[a][a] += delta
        chol = [[0.0] * k for _ in range(k)]
        for i in range(k):
            for j in range(i + 1):
                s = g[i][j]
                for p in range(j):
                    s -= chol[i][p] * chol[j][p]
                if i == j:
                    if not s > 0:
                        raise ValueError("the components' Gram matrix is not positive definite")
                    chol[i][i] = math.sqrt(s)
                else:
                    chol[i][j] = s / chol[j][j]
        self._chol = chol
        return chol

    def _evaluate(self, x, view, squares):
        """The projections of x for view, and with squares each row's
        squared feature norm summed block by block (else None)."""
        if not 0 <= view < len(self._views):
            raise ValueError(f"model has {len(self._views)} view(s), asked for view {view}")
        v = self._views[view]
        x = np.asarray(x, dtype=np.float64)
        in_dim = 1 if v.slices else v.dim
        if x.ndim == 1:
            if x.size % in_dim != 0:
                raise ValueError(f"input of {x.size} values is not a whole number of {in_dim}-dimensional points")
            x = x.reshape(-1, in_dim)
        if x.ndim != 2 or x.shape[1] != in_dim:
            raise ValueError(f"input has shape {x.shape}, want (rows, {in_dim})")
        if not np.all(np.isfinite(x)):
            raise ValueError("input has a NaN or infinite value")
        v.kernel.check_input(x)
        if v.slices:
            xs = slice_indicators(v.slices, x)
        elif len(v.mean):
            xs = (x - v.mean[None, :]) / v.scale[None, :]
        else:
            xs = x.copy()
        k = self.k
        rows = xs.shape[0]
        coef = self.snapshot.coef[view]
        blocks = self._blocks[view]
        m = self._maps[view]
        _, nb = self.snapshot.view_seeds(view)
        chunk = 1 if m is None else CHUNK_BLOCKS
        out = np.zeros((rows, k))
        sq = np.zeros(rows) if squares else None
        for c0 in range(0, len(blocks), chunk):
            part = np.zeros((rows, k))
            for j in range(c0, min(c0 + chunk, len(blocks))):
                b = blocks[j]
                a = coef[j * nb:(j + 1) * nb]
                phi = b.phi(xs) if m is None else m.phi(xs, b)
                if m is not None and m.blas:
                    part += phi @ a
                else:
                    ft.add_mul(part, phi, a)
                if squares:
                    # snapshot.addSquares: four running sums over the
                    # features f = l (mod 4), then (s0 + s1) + (s2 + s3).
                    s = [np.zeros(rows) for _ in range(4)]
                    for f in range(phi.shape[1]):
                        s[f % 4] = s[f % 4] + phi[:, f] * phi[:, f]
                    sq = sq + ((s[0] + s[1]) + (s[2] + s[3]))
            out += part
        if len(v.center) == k:
            out -= v.center[None, :]
        return out, sq
