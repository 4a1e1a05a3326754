"""Baselines for `streamkpca bench novelty`: the stream it wrote with
--stream-out PREFIX scored by scikit-learn's KernelPCA reconstruction
error (the same Gaussian kernel, bandwidth and k; fitted on the stream's
first --train rows, as PyOD's KPCA detector scores), linear PCA's
reconstruction error and an Isolation Forest, each fitted on the same
rows; the ROC AUC of each on the rows after them. Needs numpy and
scikit-learn (Debian: python3-sklearn).

    python3 docs/novelty/baselines.py PREFIX D TRAIN K BANDWIDTH [SEED]
"""

import sys

import numpy as np
from sklearn.decomposition import PCA, KernelPCA
from sklearn.ensemble import IsolationForest
from sklearn.metrics import roc_auc_score


def main():
    prefix, d, train, k, bw = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
    seed = int(sys.argv[6]) if len(sys.argv) > 6 else 1
    x = np.fromfile(prefix + ".f64", dtype="<f8").reshape(-1, d)
    rare = np.array([line.strip() == "true" for line in open(prefix + ".labels")])
    xt, xs, ys = x[:train], x[train:], rare[train:]
    out = {}
    gamma = 1.0 / (2 * bw * bw)  # exp(-|x-y|^2 / (2 l^2)), the service's Gaussian
    kp = KernelPCA(n_components=k, kernel="rbf", gamma=gamma, eigen_solver="arpack", random_state=seed).fit(xt)
    # Reconstruction error in the centred feature space: k~(x, x) - |z|^2,
    # z the projections onto the unit eigenvectors (transform).
    def rbf(a, b):
        sq = (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2 * a @ b.T
        return np.exp(-gamma * np.maximum(sq, 0))
    mean_row = np.zeros(train)
    for i in range(0, train, 2000):
        mean_row[i:i + 2000] = rbf(xt[i:i + 2000], xt).mean(1)
    mean_all = mean_row.mean()
    res = np.empty(len(xs))
    for i in range(0, len(xs), 2000):
        kx = rbf(xs[i:i + 2000], xt)
        kxx = 1 - 2 * kx.mean(1) + mean_all
        z = kp.transform(xs[i:i + 2000])
        res[i:i + 2000] = kxx - (z * z).sum(1)
    out["kernel PCA (scikit-learn, centred)"] = roc_auc_score(ys, res)
    # The same uncentred, as the service's default model: k(x, x) = 1 minus
    # the projections onto the top-k eigenvectors of the uncentred K.
    kt = np.empty((train, train))
    for i in range(0, train, 2000):
        kt[i:i + 2000] = rbf(xt[i:i + 2000], xt)
    w, v = np.linalg.eigh(kt)
    top = np.argsort(w)[::-1][:k]
    w, v = w[top], v[:, top]
    resu = np.empty(len(xs))
    for i in range(0, len(xs), 2000):
        z = rbf(xs[i:i + 2000], xt) @ v / np.sqrt(w)[None, :]
        resu[i:i + 2000] = 1 - (z * z).sum(1)
    out["kernel PCA (exact, uncentred)"] = roc_auc_score(ys, resu)
    p = PCA(n_components=k, random_state=seed).fit(xt)
    rec = p.inverse_transform(p.transform(xs))
    out["linear PCA"] = roc_auc_score(ys, ((xs - rec) ** 2).sum(1))
    f = IsolationForest(random_state=seed).fit(xt)
    out["Isolation Forest"] = roc_auc_score(ys, -f.score_samples(xs))
    for name, auc in out.items():
        print(f"{name}\t{auc:.4f}")


if __name__ == "__main__":
    main()
