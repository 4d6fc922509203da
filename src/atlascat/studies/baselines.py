"""Static (fixed-form) baselines that ATLAS's adaptive test is compared against.

Every baseline picks a set of items from a calibrated bank using only the bank and the *train*
models' responses; the test models are then scored on those items with the same EAP settings as
every other method (see :mod:`atlascat.studies.protocol`).

- :func:`random_forms`: Random-k, ``n_replicates`` independent uniform draws of k items (the
  comparison figures average over the replicates).
- :func:`anchor_points`: tinyBenchmarks-style anchor points (Polo et al., 2024, section 3.1,
  "correctness" clustering). Each item is a point in R^n_train (its column of 0/1 answers of the
  train models); k-means with k clusters; the anchor of a cluster is its member nearest the
  centroid; its weight is the cluster's share of the items. The weighted anchor accuracy

      acc_hat_i = sum_c w_c y_{i, anchor_c},    w_c = |cluster c| / n_items,

  estimates the model's accuracy on the whole bank (each anchor stands for its whole cluster).
- :func:`aipw_accuracy`: BenchPred's AIPW on a random form (Zhang, Dorner and Hardt, 2025): a
  ridge regression learned on the train models predicts each item's score from the form's
  answers, f_j(x_A); the estimate is the regression's mean over the bank plus the mean residual
  on the form's own items (the difference / augmented IPW estimator of a uniform sample),

      acc_hat = (1/N) sum_j f_j(x_A) + (1/k) sum_{j in A} (y_j - f_j(x_A)).

  The ridge is linear in the target, so the two means are two ridge fits of the train models'
  mean score on the bank and on A, with one penalty chosen by exact leave-one-out error.
- :func:`information_form`: metabench-style information subset (Kipnis et al., 2025): the k items
  with the largest Fisher information averaged over the train models' theta distribution,

      score_j = (1 / n) sum_i I_j(theta_i).

The greedy D/A/E-optimal forms live in :mod:`atlascat.design.optimal`.

References
----------
Zhang, G., Dorner, F. E. and Hardt, M. (2025). How benchmark prediction from fewer data misses
the mark. NeurIPS.
Robins, J. M., Rotnitzky, A. and Zhao, L. P. (1994). Estimation of regression coefficients when
some regressors are not always observed. JASA 89, 846-866.
Polo, F. M. et al. (2024). tinyBenchmarks: evaluating LLMs with fewer examples. ICML.
Kipnis, A. et al. (2025). metabench: a sparse benchmark of reasoning and knowledge in LLMs. ICLR.
Arthur, D. and Vassilvitskii, S. (2007). k-means++: the advantages of careful seeding. SODA.
Lloyd, S. (1982). Least squares quantization in PCM. IEEE Trans. Inf. Theory 28(2).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import sparse

from ..errors import ConfigError, ResponseDataError
from ..irt.bank import ItemBank

__all__ = ["FixedForm", "KMeansResult", "kmeans", "random_forms", "anchor_points",
           "information_form", "aipw_accuracy"]


@dataclass(frozen=True)
class FixedForm:
    """A fixed set of items given to every test model.

    Attributes
    ----------
    name : method label (e.g. ``"Random-100"``)
    item_ids : item ids in the bank, in selection order
    weights : optional per-item weights (sum 1) for the direct accuracy estimate; ``None`` means
        equal weights (plain mean score on the form)
    replicate : replicate number for randomized methods (0 otherwise)
    info : free-form details (criterion, cluster sizes, ...)
    """

    name: str
    item_ids: np.ndarray
    weights: np.ndarray | None = None
    replicate: int = 0
    info: dict = field(default_factory=dict)

    def __post_init__(self):
        ids = np.asarray([str(i) for i in self.item_ids], dtype=object)
        object.__setattr__(self, "item_ids", ids)
        if self.weights is not None:
            w = np.asarray(self.weights, dtype=float)
            if w.shape != ids.shape or np.any(w < 0) or not np.isclose(w.sum(), 1.0):
                raise ConfigError(f"form {self.name!r}: weights must be non-negative, one per "
                                  "item, and sum to 1")
            object.__setattr__(self, "weights", w)

    def __len__(self) -> int:
        return len(self.item_ids)

    def direct_accuracy(self, scores: np.ndarray) -> np.ndarray:
        """Accuracy estimate from the form's own answers, ``scores`` (n_subjects, len(form)).

        Weighted mean with :attr:`weights` (equal weights when None) over observed cells,
        renormalized per subject when some answers are missing.
        """
        y = np.asarray(scores, dtype=float)
        w = np.full(len(self), 1.0 / len(self)) if self.weights is None else self.weights
        obs = ~np.isnan(y)
        num = np.where(obs, y, 0.0) @ w
        den = obs @ w
        out = np.full(y.shape[0], np.nan)
        np.divide(num, den, out=out, where=den > 0)
        return out


# ----------------------------------------------------------------------------- k-means
@dataclass(frozen=True)
class KMeansResult:
    """Centroids (k, d), labels (n,), within-cluster sum of squares, Lloyd iterations."""

    centers: np.ndarray
    labels: np.ndarray
    inertia: float
    n_iter: int


def _sq_dist(x: np.ndarray, x_sq: np.ndarray, centers: np.ndarray) -> np.ndarray:
    """Squared Euclidean distances (n, k) by one matrix product: |x|^2 - 2 x.c + |c|^2."""
    d = x_sq[:, None] - 2.0 * (x @ centers.T) + np.einsum("kd,kd->k", centers, centers)[None, :]
    return np.maximum(d, 0.0)


def _kmeans_pp(x: np.ndarray, x_sq: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """k-means++ seeding: each new centre drawn with probability proportional to D(x)^2."""
    n = x.shape[0]
    centers = np.empty((k, x.shape[1]))
    centers[0] = x[rng.integers(n)]
    d2 = _sq_dist(x, x_sq, centers[:1])[:, 0]
    for j in range(1, k):  # k seeding steps, each vectorized over all points
        total = d2.sum()
        idx = rng.integers(n) if total <= 0 else rng.choice(n, p=d2 / total)
        centers[j] = x[idx]
        d2 = np.minimum(d2, _sq_dist(x, x_sq, centers[j:j + 1])[:, 0])
    return centers


def kmeans(x, k: int, *, rng: np.random.Generator, n_init: int = 4, max_iter: int = 100,
           tol: float = 1e-8) -> KMeansResult:
    """Lloyd's k-means with k-means++ seeding; the best of ``n_init`` restarts by inertia.

    Each iteration assigns every point to its nearest centre (one (n x k) distance matrix from a
    matrix product) and moves each centre to the mean of its points (one sparse-indicator product).
    A centre left without points is moved to the point farthest from its own centre. Stops when the
    inertia improves by less than ``tol`` relative, or at ``max_iter``.
    """
    x = np.asarray(x, dtype=float)
    n = x.shape[0]
    if not 1 <= k <= n:
        raise ConfigError(f"k-means needs 1 <= k <= n_points; got k={k}, n_points={n}")
    x_sq = np.einsum("nd,nd->n", x, x)
    best = None
    for _ in range(max(1, int(n_init))):
        centers = _kmeans_pp(x, x_sq, k, rng)
        prev = np.inf
        for it in range(1, max_iter + 1):
            d = _sq_dist(x, x_sq, centers)
            labels = d.argmin(axis=1)
            dmin = d[np.arange(n), labels]
            counts = np.bincount(labels, minlength=k)
            empty = np.flatnonzero(counts == 0)
            if empty.size:
                far = np.argsort(dmin)[::-1][: empty.size]
                labels[far] = empty
                dmin[far] = 0.0
                counts = np.bincount(labels, minlength=k)
            onehot = sparse.csr_matrix((np.ones(n), (labels, np.arange(n))), shape=(k, n))
            centers = np.asarray(onehot @ x) / counts[:, None]
            inertia = float(dmin.sum())
            if np.isfinite(prev) and prev - inertia <= tol * max(prev, 1e-300):
                break
            prev = inertia
        d = _sq_dist(x, x_sq, centers)
        labels = d.argmin(axis=1)
        inertia = float(d[np.arange(n), labels].sum())
        if best is None or inertia < best.inertia:
            best = KMeansResult(centers, labels, inertia, it)
    return best


# ----------------------------------------------------------------------------- baselines
def _check_k(k: int, bank: ItemBank, what: str) -> int:
    k = int(k)
    if not 1 <= k <= len(bank):
        raise ConfigError(f"{what}: k must be between 1 and the bank size ({len(bank)}), got {k}")
    return k


def random_forms(bank: ItemBank, k: int = 100, *, n_replicates: int = 10,
                 rng: np.random.Generator) -> list[FixedForm]:
    """``n_replicates`` forms of k items drawn uniformly without replacement from the bank."""
    k = _check_k(k, bank, "random_forms")
    if n_replicates < 1:
        raise ConfigError(f"n_replicates must be >= 1, got {n_replicates}")
    return [FixedForm(f"Random-{k}", bank.item_ids[rng.choice(len(bank), size=k, replace=False)],
                      replicate=r)
            for r in range(int(n_replicates))]


def _train_matrix(train, bank: ItemBank) -> np.ndarray:
    from ..irt.ability import response_array

    y = response_array(train, bank)
    obs = ~np.isnan(y)
    if not obs.any(axis=0).all():
        missing = bank.item_ids[~obs.any(axis=0)]
        raise ResponseDataError(f"{missing.size} bank item(s) have no train answers, e.g. "
                                f"{list(missing[:5])}; anchor points need every item answered")
    if obs.all():
        return y
    means = np.nanmean(y, axis=0)  # missing cells -> the item's mean (documented imputation)
    return np.where(obs, y, means[None, :])


def anchor_points(train, bank: ItemBank, k: int = 100, *, rng: np.random.Generator,
                  n_init: int = 4, max_iter: int = 100, name: str | None = None) -> FixedForm:
    """tinyBenchmarks anchor points from the train models' correctness patterns.

    ``train``: ResponseMatrix (aligned to the bank by item id) or array in bank order
    (n_train, n_items). Missing answers are replaced by the item's mean before clustering.
    Returns a :class:`FixedForm` whose weights are the cluster shares.
    """
    k = _check_k(k, bank, "anchor_points")
    x = _train_matrix(train, bank).T  # items are the points
    km = kmeans(x, k, rng=rng, n_init=n_init, max_iter=max_iter)
    d = _sq_dist(x, np.einsum("nd,nd->n", x, x), km.centers)
    own = np.where(km.labels[:, None] == np.arange(k)[None, :], d, np.inf)
    anchors = own.argmin(axis=0)  # nearest member of each cluster to its centroid
    sizes = np.bincount(km.labels, minlength=k).astype(float)
    return FixedForm(name or f"Anchor-{k}", bank.item_ids[anchors], weights=sizes / sizes.sum(),
                     info={"cluster_sizes": sizes.astype(int).tolist(), "inertia": km.inertia})


def information_form(bank: ItemBank, k: int = 100, *, thetas, name: str | None = None) -> FixedForm:
    """The k items with the largest mean Fisher information over ``thetas`` (train abilities)."""
    k = _check_k(k, bank, "information_form")
    thetas = np.asarray(thetas, dtype=float).reshape(-1)
    thetas = thetas[np.isfinite(thetas)]
    if thetas.size == 0:
        raise ConfigError("information_form needs at least one finite theta")
    score = bank.information(thetas).mean(axis=0)
    order = np.argsort(-score, kind="stable")[:k]
    return FixedForm(name or f"Info-{k}", bank.item_ids[order],
                     info={"mean_information": score[order].tolist()})


def aipw_accuracy(train, form_idx, target, *, penalties=None) -> np.ndarray:
    """BenchPred's AIPW accuracy of every target row from its answers on the form (module
    docstring).

    ``train``: the train models' answers (S, N) in bank order (NaN: the item's mean, as for
    anchor points); ``form_idx``: the form's item positions (k); ``target``: the targets'
    answers (T, N) in bank order (only the form's are read). Returns (T,) estimates of the mean
    score on the N items. A target's missing form answers are the train mean in the regression's
    features and left out of the residual mean. The penalty is the grid value
    (``predict.regression.PENALTIES``) with the smallest leave-one-out error of the train models'
    mean score on their answered items (Allen's PRESS), every form item's regression fitted at
    it: :func:`atlascat.predict.regression.ridge_press`, the benchmark predictor's ridge.
    """
    from ..predict.regression import ridge_press

    y = np.asarray(train, dtype=float)
    if np.isnan(y).all(axis=0).any():
        raise ResponseDataError("AIPW needs every bank item answered by some train model")
    answered = ~np.isnan(y)
    own = np.where(answered, y, 0.0).sum(1) / np.maximum(answered.sum(1), 1)   # observed mean
    y = np.where(answered, y, np.nanmean(y, axis=0)[None, :])
    idx = np.asarray(form_idx, dtype=int)
    t = np.asarray(target, dtype=float)
    if t.ndim != 2 or t.shape[1] != y.shape[1]:
        raise ConfigError(f"target answers must be (n_targets, {y.shape[1]}) in bank order, "
                          f"got shape {t.shape}")
    y_a = t[:, idx]
    x_t = np.where(np.isnan(y_a), y[:, idx].mean(0)[None, :], y_a)   # features: imputed
    x = y[:, idx]
    # the mean on the bank (whose PRESS picks the one penalty) and each form item, on the form
    fit = ridge_press(x[None], np.column_stack([own, x]), penalties)
    pred = fit.predict(x_t[None])[0]                                     # (T, 1 + k)
    resid = y_a - pred[:, 1:]                      # on the form's answered items only
    seen = ~np.isnan(resid)
    correction = np.where(seen, resid, 0.0).sum(1) / np.maximum(seen.sum(1), 1)
    return pred[:, 0] + correction
