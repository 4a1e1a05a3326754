"""Projections of snapshots the Go learner made (one per kernel and
learner) against the Go snapshot.Model's, from the fixtures the Go test
clients/python/conformance_test.go writes to $STREAMKPCA_FIXTURES."""

import glob
import json
import os
import unittest

import numpy as np

import streamkpca


def bits(a):
    return np.asarray(a, dtype=np.float64).view(np.uint64)


class Conformance(unittest.TestCase):
    def test_every_fixture(self):
        d = os.environ.get("STREAMKPCA_FIXTURES")
        if not d:
            self.skipTest("STREAMKPCA_FIXTURES is not set: run `go test ./clients/python`, which makes the fixtures")
        paths = sorted(glob.glob(os.path.join(d, "*.json")))
        self.assertTrue(paths, f"no fixtures in {d}")
        for p in paths:
            with open(p) as f:
                fx = json.load(f)
            name = fx["name"]
            with self.subTest(case=name):
                model = streamkpca.Model(streamkpca.load(p[:-5] + ".skpca"))
                worst = 0.0
                scored = False
                for v, probe in enumerate(fx["views"]):
                    x = np.array(probe["x"]).reshape(-1, probe["dim"])
                    want = np.array(probe["proj"]).reshape(-1, model.k)
                    got = model.project(x, view=v)
                    if v == 0 and probe.get("residual"):
                        _, res, nov = model.score(x)
                        for what, g_, w_ in (("residual", res, probe["residual"]), ("novelty", nov, probe["novelty"])):
                            w_ = np.array(w_)
                            if fx["exact"]:
                                diff = int(np.count_nonzero(bits(g_) != bits(w_)))
                                self.assertEqual(diff, 0, f"{name}: {diff} of {w_.size} {what} values differ in their bits; max |diff| {np.max(np.abs(g_ - w_)):.3g}")
                            else:
                                self.assertLessEqual(float(np.max(np.abs(g_ - w_))), 1e-9, f"{name} {what}")
                        scored = True
                    if fx["exact"]:
                        diff = int(np.count_nonzero(bits(got) != bits(want)))
                        self.assertEqual(diff, 0, f"{name} view {v}: {diff} of {want.size} projections differ in their bits; max |diff| {np.max(np.abs(got - want)):.3g}")
                    else:
                        rel = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
                        worst = max(worst, rel)
                        self.assertLessEqual(rel, fx["rel_tol"], f"{name} view {v}")
                ev = model.eigenvalues_
                if fx.get("eigenvalues"):
                    self.assertEqual(list(ev), fx["eigenvalues"], f"{name}: eigenvalues_")
                else:
                    self.assertIsNone(ev, f"{name}: eigenvalues_ of a model that records none")
                how = "bit for bit" if fx["exact"] else f"relative difference {worst:.1e} <= {fx['rel_tol']:g}"
                print(f"case {name}: {len(fx['views'])} view(s){', scored' if scored else ''}, {how}")


if __name__ == "__main__":
    unittest.main()
