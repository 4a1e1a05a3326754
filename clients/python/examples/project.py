#!/usr/bin/env python3
"""Fetch the model a streamkpca service serves, project points locally with
numpy, and (with --check) confirm that the service projects them to the
same bits. Run it as a script or step through it like a notebook.

    python3 clients/python/examples/project.py --url http://127.0.0.1:8080 \\
        --model demo --csv points.csv [--plot out.png] [--check]

--csv takes a file of comma-separated rows (a header row is skipped);
--points takes a JSON list of vectors instead. With matplotlib installed,
--plot draws the first two components.
"""

import argparse
import json
import os
import sys

try:
    import numpy as np
except ImportError:
    raise SystemExit("this example needs numpy: Debian python3-numpy, or pip install numpy "
                     f"(for the interpreter {sys.executable})")

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import streamkpca  # noqa: E402


def read_points(args):
    if args.points:
        return np.array(json.loads(args.points), dtype=np.float64)
    rows = []
    with open(args.csv) as f:
        for i, line in enumerate(f):
            line = line.strip()
            if not line:
                continue
            try:
                rows.append([float(v) for v in line.split(",")])
            except ValueError:
                if i == 0:
                    print("skipping the header row", file=sys.stderr)
                    continue
                raise SystemExit(f"{args.csv}:{i + 1}: not a row of numbers: {line[:60]!r}")
    return np.array(rows, dtype=np.float64)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", required=True, help="the service's HTTP address, e.g. http://127.0.0.1:8080")
    ap.add_argument("--model", required=True, help="the model's name (GET /v1/models lists them)")
    ap.add_argument("--version", type=int, help="a stored version instead of the one served now")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--csv", help="a CSV file of points, one per row")
    src.add_argument("--points", help='a JSON list of points, e.g. "[[0.5],[1.5]]"')
    ap.add_argument("--view", choices=["x", "y"], default="x", help="two-view models: the points' view")
    ap.add_argument("--check", action="store_true", help="compare with the service's own projections, bit for bit")
    ap.add_argument("--plot", help="write a scatter plot of the first two components (needs matplotlib)")
    args = ap.parse_args()

    # 1. The model: seeds and coefficients, a few KB to a few MB.
    model = streamkpca.fetch(args.url, args.model, version=args.version)
    h = model.snapshot.header
    print(f"model {h['model']} version {model.version}: {h['algorithm']}, k = {model.k}, "
          f"{h['samples_seen']} samples learned")

    # 2. Project locally: every feature block is regenerated from its seed.
    x = read_points(args)
    view = 0 if args.view == "x" else 1
    p = model.project(x, view=view)
    for row in p[:5]:
        print(" ".join(f"{v: .6f}" for v in row))
    if len(p) > 5:
        print(f"... {len(p)} rows")

    # 3. The service projects with the same version: the same bits.
    if args.check:
        r = streamkpca.project_remote(args.url, args.model, x.tolist(), view=args.view, version=model.version)
        remote = np.array(r["projections"], dtype=np.float64).reshape(p.shape)
        differ = int(np.count_nonzero(remote.view(np.uint64) != p.view(np.uint64)))
        if differ:
            raise SystemExit(f"{differ} of {p.size} projections differ from the service's "
                             f"(max |diff| {np.max(np.abs(remote - p)):.3g})")
        print(f"the service's projections of version {r['version']} are the same bits")

    # 4. A picture, if matplotlib is there.
    if args.plot:
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            raise SystemExit("--plot needs matplotlib (Debian: python3-matplotlib)")
        fig, ax = plt.subplots(figsize=(5, 4))
        ax.scatter(p[:, 0], p[:, 1] if model.k > 1 else np.zeros(len(p)), s=6)
        ax.set_xlabel("component 1")
        ax.set_ylabel("component 2")
        ax.set_title(f"{h['model']} version {model.version}")
        fig.tight_layout()
        fig.savefig(args.plot)
        print(f"wrote {args.plot}")


if __name__ == "__main__":
    try:
        main()
    except (streamkpca.http.APIError, streamkpca.SnapshotError, ConnectionError, ValueError) as e:
        raise SystemExit(f"project.py: {e}")
