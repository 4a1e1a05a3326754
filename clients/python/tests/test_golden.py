"""Independent truths recorded by the Go code when it was written: the
generator's golden values (features/golden_test.go) and the golden
snapshots with their projections (snapshot/testdata)."""

import json
import os
import unittest

import numpy as np

import streamkpca
from streamkpca import features as ft
from streamkpca import generator as g

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "..")
TESTDATA = os.path.join(ROOT, "snapshot", "testdata")

# features/golden_test.go
GOLDEN_WORDS = [0x33AA906D7B87BF0E, 0xDF307A5B580BBDC1, 0x901A197AFCAAE09B]
GOLDEN_NORMALS = [1.2396400231236315, -1.289975714495629, 0.9330112434193633, 0.5197700185467364, 0.793284342928164]
GOLDEN_SEED = 0x8B6C9198506B188
GOLDEN_OMEGA = [0.05754118497712302, -0.013816809397280957, -0.04836925013041218]
GOLDEN_PHASE3 = 0.4500370364608974
GOLDEN_PHI = [-0.14103893827846767, 0.030258033010332315, -0.12252415962399134, -0.48146614319402614]
# generator splitmix64-sorf-v1 (features/golden_test.go, goldenSORF*)
GOLDEN_SORF_SEED = 0x649E25419B48AC05
GOLDEN_SORF_SIGNS = [1, -1, 1, 1, -1, 1, -1, -1]
GOLDEN_SORF_SCALE = [0.002223435538723729, 0.002237443707916882, 0.0021736063104816268, 0.0017814602391056087]
GOLDEN_SORF_PHI = [0.1934625852150696, -0.461055558606446, -0.29145046707548844, -0.4062716151067899,
                   0.10182235212903064, -0.48952242911526705, -0.49931745451144754, 0.026116654077588602]


class Generator(unittest.TestCase):
    def test_golden_structured(self):
        m = ft.Map(ft.Kernel("gaussian", bandwidth=2), 20, 8, structured=True)
        # block 5 of model seed 7: four blocks of 4 frequencies share a
        # stack of p = 32 (features.Map.BlockSeed)
        base = int(g.derive_seed(7, 5 // 8))
        seed = (base & ~0xFF) | 5
        self.assertEqual(seed, GOLDEN_SORF_SEED)
        b = m.generate(seed)
        self.assertEqual(list(b.signs[:8]), GOLDEN_SORF_SIGNS)
        self.assertEqual(list(b.scale), GOLDEN_SORF_SCALE)
        x = np.array([[float(i % 5) - 1.5 for i in range(20)]])
        self.assertEqual(list(m.phi(x, b)[0]), GOLDEN_SORF_PHI)

    def test_golden_values(self):
        k = g.key(42, g.STREAM_OMEGA)
        self.assertEqual([int(w) for w in g.word(k, [0, 1, 1 << 40])], GOLDEN_WORDS)
        draws = list(g.normal(k, np.arange(4))) + [float(g.uniform(g.word(g.key(42, g.STREAM_PHASE), 7)))]
        self.assertEqual(draws, GOLDEN_NORMALS)
        seed = int(g.derive_seed(7, 2))
        self.assertEqual(seed, GOLDEN_SEED)
        m = ft.Map(ft.Kernel("gaussian", bandwidth=2), 3, 4)
        b = m.generate(seed)
        # Omega[c*cols + j]: the first three values of row 0.
        self.assertEqual(list(b.omega.reshape(-1)[:3]), GOLDEN_OMEGA)
        self.assertEqual(b.phase[3], GOLDEN_PHASE3)
        self.assertEqual(list(m.phi(np.array([[0.5, -1, 2]]), b)[0]), GOLDEN_PHI)

    def test_polynomials_against_libm(self):
        # Log, Cos2Pi and ExpNeg are polynomials of their own; they agree
        # with the platform's to the bounds the Go tests state.
        x = np.linspace(1e-6, 50, 10001)
        self.assertLess(np.max(np.abs(g.log(x) - np.log(x)) / np.abs(np.log(x) + 1e-300)), 1e-14)
        t = np.linspace(-1000, 1000, 10001) / (2 * np.pi)
        self.assertLess(np.max(np.abs(g.cos2pi(t) - np.cos(t * 2 * np.pi))), 1e-12)
        u = np.linspace(0, 700, 10001)
        self.assertLess(np.max(np.abs(g.expneg(u) / np.exp(-u) - 1)), 4e-16)
        self.assertTrue(np.isnan(g.expneg(-1.0)))
        self.assertTrue(np.isnan(g.log(0.0)))

    def test_go_pow(self):
        for p in (2.0, 3.0, 1.5, 7.25):
            for n in range(-12, 13):
                self.assertAlmostEqual(g.go_pow_int(p, n) / p ** n, 1, places=14)


class GoldenSnapshots(unittest.TestCase):
    def test_golden_v2(self):
        snap = streamkpca.load(os.path.join(TESTDATA, "golden.skpca"))
        self.assertEqual(snap.format_version, 2)
        with open(os.path.join(TESTDATA, "golden_projections.json")) as f:
            want = json.load(f)
        got = streamkpca.Model(snap).project(np.array([[0, 0], [1, -1], [2.5, 0.25]]))
        self.assertEqual(got.reshape(-1).tolist(), want)  # bit for bit

    def test_golden_v1_projects_the_same(self):
        snap = streamkpca.load(os.path.join(TESTDATA, "golden_v1.skpca"))
        self.assertEqual(snap.format_version, 1)
        with open(os.path.join(TESTDATA, "golden_projections.json")) as f:
            want = json.load(f)
        got = streamkpca.Model(snap).project([0, 0, 1, -1, 2.5, 0.25])
        self.assertEqual(got.reshape(-1).tolist(), want)

    def test_golden_v1_kcca_both_views(self):
        snap = streamkpca.load(os.path.join(TESTDATA, "golden_v1_kcca.skpca"))
        with open(os.path.join(TESTDATA, "golden_v1_kcca.json")) as f:
            j = json.load(f)
        m = streamkpca.Model(snap)
        self.assertEqual(m.project(j["x"], view=0).reshape(-1).tolist(), j["proj_x"])
        self.assertEqual(m.project(j["y"], view=1).reshape(-1).tolist(), j["proj_y"])

    def test_fast_mode_agrees_to_rounding(self):
        snap = streamkpca.load(os.path.join(TESTDATA, "golden_v1_kcca.skpca"))
        with open(os.path.join(TESTDATA, "golden_v1_kcca.json")) as f:
            j = json.load(f)
        got = streamkpca.Model(snap, exact=False).project(j["x"])
        want = np.array(j["proj_x"]).reshape(got.shape)
        self.assertLess(np.max(np.abs(got - want)) / np.max(np.abs(want)), 1e-13)


class Format(unittest.TestCase):
    def setUp(self):
        with open(os.path.join(TESTDATA, "golden.skpca"), "rb") as f:
            self.data = f.read()

    def test_rejects_damage(self):
        bad = bytearray(self.data)
        bad[len(bad) // 2] ^= 1
        with self.assertRaisesRegex(streamkpca.SnapshotError, "checksum"):
            streamkpca.loads(bytes(bad))
        with self.assertRaisesRegex(streamkpca.SnapshotError, "magic"):
            streamkpca.loads(b"XXXXXXXX" + self.data[8:])
        with self.assertRaisesRegex(streamkpca.SnapshotError, "sizes"):
            streamkpca.loads(self.data[:-8])
        with self.assertRaisesRegex(streamkpca.SnapshotError, "version"):
            streamkpca.loads(self.data[:8] + b"\x09\x00\x00\x00" + self.data[12:])

    def test_crc32c_check_value(self):
        from streamkpca.snapshot import crc32c

        self.assertEqual(crc32c(b"123456789"), 0xE3069283)  # the CRC-32C check value

    def test_bad_input(self):
        m = streamkpca.Model(streamkpca.loads(self.data))
        with self.assertRaisesRegex(ValueError, "NaN"):
            m.project([[0, float("nan")]])
        with self.assertRaisesRegex(ValueError, "whole number"):
            m.project([1, 2, 3])
        with self.assertRaisesRegex(ValueError, "view"):
            m.project([[0, 0]], view=1)


if __name__ == "__main__":
    unittest.main()


def encode(header, payload, version=2):
    """A checksum-valid snapshot of header (a dict) and payload (float64s)."""
    import struct
    from streamkpca.snapshot import MAGIC, crc32c
    h = json.dumps(header).encode()
    body = MAGIC + struct.pack("<II", version, len(h)) + h + struct.pack("<Q", len(payload))
    body += np.asarray(payload, dtype="<f8").tobytes()
    return body + struct.pack("<I", crc32c(body))


class MemoryBound(unittest.TestCase):
    """A few KB of checksum-valid file declaring a huge dimension: the
    client refuses it, naming the figure, before allocating (before: 4.1
    GiB then MemoryError at 2**18; a bare MemoryError at 2**24)."""

    def huge(self, dim):
        with open(os.path.join(TESTDATA, "golden.skpca"), "rb") as f:
            h = dict(streamkpca.loads(f.read()).header)
        h["views"] = [{"dim": dim, "kernel": {"family": "gaussian", "bandwidth": 1.5}}]
        h["seeds"], h["block_size"] = ["0000000000000001"], 512
        return encode(h, np.zeros(512 * h["k"]))

    def test_refused_before_allocating(self):
        import tracemalloc
        for dim in (1 << 18, 1 << 24):
            data = self.huge(dim)
            self.assertLess(len(data), 16 << 10)
            snap = streamkpca.loads(data)
            tracemalloc.start()
            try:
                with self.assertRaisesRegex(streamkpca.SnapshotError, r"need \d+ MiB.*over max_bytes"):
                    streamkpca.Model(snap)
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
            self.assertLess(peak, 100 << 20, f"dimension {dim}: {peak >> 20} MiB allocated before refusing")

    def test_bound_is_what_generation_takes(self):
        # A dimension the bound admits is built, and the figure matches
        # the blocks' arrays.
        snap = streamkpca.loads(self.huge(64))
        m = streamkpca.Model(snap)
        blocks = m._blocks[0]
        got = sum(b.omega.nbytes + b.phase.nbytes for b in blocks)
        self.assertEqual(got, streamkpca.snapshot.model_bytes(snap))


class SklearnAndFollow(unittest.TestCase):
    def setUp(self):
        with open(os.path.join(TESTDATA, "golden.skpca"), "rb") as f:
            self.data = f.read()
        self.model = streamkpca.Model(streamkpca.loads(self.data))

    def test_transform_is_project(self):
        X = np.array([[0.5, 1.0], [2.0, -1.0], [0.0, 0.0]])
        got = self.model.transform(X)
        self.assertEqual(got.shape, (3, self.model.n_components_))
        self.assertTrue(np.array_equal(got, self.model.project(X)))  # bit for bit
        self.assertIs(self.model.fit(X), self.model)
        self.assertEqual(self.model.n_features_in_, 2)
        with self.assertRaisesRegex(ValueError, "2-D"):
            self.model.transform([0.5, 1.0])

    def test_follow_polls_with_etags(self):
        """follow yields the served version, nothing while it is unchanged
        (a 304 each poll), then the next, even when its version is lower (a
        new incarnation)."""
        import http.server
        import threading

        h = dict(streamkpca.loads(self.data).header)
        versions = [encode(dict(h, step=7), self._payload()), encode(dict(h, step=2), self._payload())]
        state = {"served": 0, "polls": 0, "not_modified": 0}

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                state["polls"] += 1
                if state["not_modified"] >= 3:
                    state["served"] = 1  # a new incarnation, at a lower version
                body = versions[state["served"]]
                tag = '"%d"' % [7, 2][state["served"]]
                if self.headers.get("If-None-Match") == tag:
                    state["not_modified"] += 1
                    self.send_response(304)
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("ETag", tag)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        try:
            stop = threading.Event()
            got = []
            for m in streamkpca.follow(f"http://127.0.0.1:{srv.server_address[1]}", "golden", interval=0.02, stop=stop):
                got.append(m.version)
                if len(got) == 2:
                    stop.set()
            self.assertEqual(got, [7, 2])
            self.assertGreaterEqual(state["not_modified"], 3)
        finally:
            srv.shutdown()

    def test_follow_raises_for_an_unknown_model(self):
        """follow on a model the service does not serve raises APIError
        with the 404 at once, instead of polling forever in silence."""
        import http.server

        def not_found(handler):
            handler.send_error(404, "no model nosuch")

        handler = type("Handler", (http.server.BaseHTTPRequestHandler,),
                       {"do_GET": not_found, "log_message": lambda self, *a: None})
        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        import threading
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        with self.assertRaises(streamkpca.APIError) as cm:
            next(streamkpca.follow(f"http://127.0.0.1:{srv.server_address[1]}", "nosuch", interval=0.01))
        srv.shutdown()
        self.assertIn("404", str(cm.exception))

    def _payload(self):
        s = streamkpca.loads(self.data)
        return np.concatenate([c.ravel() for c in s.coef])
