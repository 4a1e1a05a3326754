"""streamkpca: read the models the streamkpca service learns and project
with them, bit for bit as the Go service does.

    import streamkpca
    model = streamkpca.Model(streamkpca.load("model.skpca"))
    h = model.project(x)            # rows x k

    model = streamkpca.fetch("http://localhost:8080", "demo")   # latest
    z = model.transform(X)          # scikit-learn's convention: (n_samples, k)
    for model in streamkpca.follow("http://localhost:8080", "demo"):
        ...                         # each new version as it is served
"""

from .features import Kernel, Landmarks, Map
from .generator import GENERATOR_ID
from .http import APIError, fetch, fetch_snapshot, follow, list_models, project_remote, score_remote
from .snapshot import Model, Snapshot, SnapshotError, load, loads

__all__ = [
    "GENERATOR_ID",
    "Kernel",
    "Landmarks",
    "Map",
    "Model",
    "Snapshot",
    "SnapshotError",
    "fetch",
    "fetch_snapshot",
    "follow",
    "APIError",
    "list_models",
    "load",
    "loads",
    "project_remote",
    "score_remote",
]
__version__ = "0.1.0"
