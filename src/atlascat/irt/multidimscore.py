"""Scores of subjects on a multidimensional 2PL bank: EAP and MAP with posterior SDs, ML and WLE
with their SEs, as mirt's ``fscores(mod, method = "EAP" | "MAP" | "ML" | "WLE",
full.scores.SE = TRUE)``.

Model and prior: P(y_ij = 1 | theta_i) = sigma(a_j . theta_i + d_j) with theta_i ~ N(0, I_K) on
the bank's own axes (the a1..aK columns; a bank ATLAS calibrates keeps varimax loadings, so its
axes are orthogonal, uncorrelated factors). Missing responses are skipped (they leave the
likelihood unchanged); a subject with no answer gets the prior (theta 0, SE 1).

- EAP: posterior mean and covariance on a product grid of ``quadpts`` points per dimension on
  [-6, 6], mirt's fscores defaults: 61 (K = 2), 31 (K = 3), 19 (K = 4), 11 (K = 5), 7 (K = 6),
  5 beyond (``quadpts^K`` nodes, computed in blocks of subjects). ``se`` are the posterior SDs.
- MAP: the posterior mode by Newton's method (the log posterior is strictly concave: the
  Hessian -sum_j p_j q_j a_j a_j^T - I is negative definite), ``se`` from the inverse of minus
  the Hessian at the mode (mirt's MAP SE).
- ML and WLE (no prior; :mod:`.multidimml`): the maximum of log L, and of log L + log det I / 2
  (mirt's multidimensional Warm estimator), by batched Newton steps; SE from the inverse of minus
  the Hessian of that objective (mirt's). ``flag`` marks the patterns without a finite estimate:
  ML +-inf for all-right / all-wrong answers (``perfect`` / ``zero``) and where the likelihood
  rises beyond ``bounds`` (``diverged``); WLE clipped to ``bounds`` (``at_bound``); NaN where the
  answered items' loadings do not span K dimensions (``singular``) or for no answer
  (``no_items``).

Rotation (``rotate``): "none" scores on the bank's axes (default). "oblimin", "geomin",
"varimax" score on the axes of mirt's ``summary(mod, rotate = ...)`` (:func:`.rotation.rotate`
of the standardized loadings): with T the rotation (unit-length columns), the rotated slopes are
A (T^T)^{-1}, theta* = T^T theta and theta* ~ N(0, Phi), Phi = T^T T. Both EAP and MAP are
equivariant under this linear map, so the rotated scores are T^T theta and their covariance
T^T C T, computed from the bank-axes posterior. ML and WLE are equivariant too (log det I
changes by a constant), an infinite ML coordinate rotating to the sign of T^T applied to its
direction. mirt's fscores rotates an exploratory model's
scores by default (rotate = "oblimin"), but mirt 1.45.1 uses the rotated standardized slopes
F / sqrt(1 - h^2) = a / 1.702 without restoring the 1.702 (mirt issue #280), so its rotated
scores of an exploratory fit are not those of the fitted model; ATLAS's are.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.special import expit

from ..errors import ConfigError, ResponseDataError
from .defaults import THETA_RANGE

__all__ = ["MultidimScores", "score_multidim", "fscores_quadpts", "METHODS"]

METHODS = ("eap", "map", "ml", "wle")
#: largest EAP grid (nodes): 5 points per dimension up to K = 9
MAX_NODES = 2_000_000
#: largest number of grid values (subjects x nodes) held at once by the EAP
_BLOCK_CELLS = 2_000_000


def fscores_quadpts(n_dims: int) -> int:
    """mirt's fscores default points per dimension: 61, 31, 19, 11, 7 for K = 2..6, 5 beyond
    (121 for K = 1)."""
    return {1: 121, 2: 61, 3: 31, 4: 19, 5: 11, 6: 7}.get(int(n_dims), 5)


@dataclass
class MultidimScores:
    """Scores of every subject: ``theta`` (n, K), ``se`` (n, K) posterior SDs, ``cov`` (n, K, K)
    posterior covariances (MAP, ML, WLE: inverse negative Hessian), ``n_items`` answered per
    subject, ``method`` ("eap" / "map" / "ml" / "wle"), ``rotate`` and ``phi`` (the prior
    covariance of the scores' axes: the identity unless an oblique rotation), ``quadpts`` (EAP),
    ``flag`` (ML, WLE: "ok" or why the estimate is not a finite interior maximum, see
    :data:`.multidimml.FLAGS`)."""

    subject_ids: np.ndarray
    theta: np.ndarray
    se: np.ndarray
    cov: np.ndarray
    n_items: np.ndarray
    method: str
    rotate: str = "none"
    phi: np.ndarray = field(default=None)
    quadpts: int | None = None
    flag: np.ndarray | None = None

    @property
    def n_dims(self) -> int:
        return self.theta.shape[1]

    def to_frame(self) -> pd.DataFrame:
        """subject_id, theta_1..theta_K, se_1..se_K, n_items (, flag: ML and WLE)."""
        df = pd.DataFrame({"subject_id": np.asarray(self.subject_ids).astype(str)})
        for k in range(self.n_dims):
            df[f"theta_{k + 1}"] = self.theta[:, k]
        for k in range(self.n_dims):
            df[f"se_{k + 1}"] = self.se[:, k]
        df["n_items"] = self.n_items
        if self.flag is not None:
            df["flag"] = self.flag
        return df


def score_multidim(responses, bank, method: str = "eap", *, quadpts: int | None = None,
                   theta_range=THETA_RANGE, rotate: str = "none", max_iter: int = 100,
                   tol: float = 1e-10, bounds=(-10.0, 10.0)) -> MultidimScores:
    """EAP, MAP, ML or WLE scores with per-dimension SEs of every subject on a
    :class:`~atlascat.irt.multidim.MultidimBank` (see the module's docstring for the prior, the
    quadrature, the flags and ``rotate``; ``bounds``: the box ML / WLE are sought in, as the
    unidimensional ``bounds``). ``responses``: a ResponseMatrix, a labelled DataFrame (aligned
    to the bank by item id; items the bank lacks are an error) or an array in the bank's item
    order; 0/1 with NaN for missing."""
    method = str(method).lower()
    if method not in METHODS:
        raise ConfigError(f"multidimensional scores are EAP, MAP, ML or WLE, not {method!r}")
    y, sids = _responses(responses, bank)
    obs = ~np.isnan(y)
    vals = y[obs]
    if vals.size and not np.all((vals == 0) | (vals == 1)):
        raise ResponseDataError("the multidimensional 2PL scores 0/1 answers; binarize partial "
                                "scores first (ResponseMatrix.binarize)")
    if method == "eap":
        q = fscores_quadpts(bank.n_dims) if quadpts is None else _check_quadpts(quadpts)
        if q ** bank.n_dims > MAX_NODES:
            raise ConfigError(f"an EAP grid of {q}^{bank.n_dims} nodes is over {MAX_NODES:,}; "
                              "use method='map' or fewer quadpts")
        from .multidim import grid_eap

        theta, cov = grid_eap(y, obs, bank, q, theta_range, _BLOCK_CELLS, MAX_NODES)
    elif method == "map":
        q = None
        theta, cov = _map(y, obs, bank, int(max_iter), float(tol))
    else:
        from .multidimml import ml_wle

        q = None
        _check_bounds(bounds)
        theta, cov, flag = ml_wle(y, obs, bank, method, bounds=bounds, max_iter=int(max_iter),
                                  tol=float(tol))
    phi = np.eye(bank.n_dims)
    if rotate != "none":
        T, phi = _rotation(bank, rotate)
        theta = _rotate_theta(theta, T)
        cov = np.einsum("ka,nkl,lb->nab", T, cov, T)
    se = np.sqrt(np.maximum(np.diagonal(cov, axis1=1, axis2=2), 0.0))
    if method in ("ml", "wle"):
        se[np.isinf(theta)] = np.inf
        se[np.isnan(theta).any(1)] = np.nan
    return MultidimScores(np.asarray(sids), theta, se, cov, obs.sum(1), method, rotate, phi, q,
                          flag if method in ("ml", "wle") else None)


def _check_bounds(bounds):
    try:
        lo, hi = (float(b) for b in bounds)
    except (TypeError, ValueError):
        raise ConfigError(f"bounds must be two numbers (low, high), got {bounds!r}") from None
    if not (np.isfinite(lo) and np.isfinite(hi) and lo < 0 < hi):
        raise ConfigError(f"bounds must be finite with low < 0 < high, got {bounds!r}")


def _rotate_theta(theta, T):
    """theta T row by row; a row with an infinite coordinate (ML) is the limit of t v, v its
    direction (the signs of the infinite coordinates): +-inf where v T is nonzero, the finite
    coordinates' part where it is 0."""
    out = np.where(np.isfinite(theta), theta, 0.0) @ T
    inf = np.isinf(theta).any(1)
    if inf.any():
        v = np.where(np.isinf(theta[inf]), np.sign(theta[inf]), 0.0) @ T
        out[inf] = np.where(np.abs(v) > 1e-12, np.sign(v) * np.inf, out[inf])
    out[np.isnan(theta).any(1)] = np.nan
    return out


def _check_quadpts(quadpts) -> int:
    if isinstance(quadpts, bool) or not isinstance(quadpts, (int, np.integer)) or quadpts < 3:
        raise ConfigError(f"quadpts must be a whole number >= 3, got {quadpts!r}")
    return int(quadpts)


def _responses(responses, bank):
    """(y in the bank's item order, subject ids)."""
    from ..responses import ResponseMatrix, as_labelled_responses

    labelled = as_labelled_responses(responses)
    if isinstance(labelled, ResponseMatrix):
        return labelled.aligned_values(bank.item_ids), np.asarray(labelled.subject_ids)
    y = np.asarray(labelled, dtype=float)
    if y.ndim != 2 or y.shape[1] != len(bank):
        raise ResponseDataError(f"responses must be a (subjects x {len(bank)} items) array in the "
                                f"bank's item order; got shape {y.shape}")
    return y, np.array([f"s{i}" for i in range(y.shape[0])], dtype=object)


def _map(y, obs, bank, max_iter: int, tol: float):
    """Posterior modes (n, K) by Newton's method, with the inverse negative Hessians."""
    A, d = bank.loadings, bank.intercepts
    y1 = np.where(obs, y, 0.0)
    w = obs.astype(float)
    n, k = y.shape[0], bank.n_dims
    theta = np.zeros((n, k))
    eye = np.eye(k)
    for _ in range(max(max_iter, 1)):
        p = expit(theta @ A.T + d)
        grad = (y1 - w * p) @ A - theta
        info = np.einsum("nj,jk,jl->nkl", w * p * (1 - p), A, A) + eye
        step = np.linalg.solve(info, grad[..., None])[..., 0]
        norm = np.sqrt((step**2).sum(1, keepdims=True))
        theta = theta + step * np.minimum(1.0, 2.0 / np.maximum(norm, 1e-300))  # damped far out
        if norm.max() < tol:
            break
    p = expit(theta @ A.T + d)
    info = np.einsum("nj,jk,jl->nkl", w * p * (1 - p), A, A) + eye
    return theta, np.linalg.inv(info)


def _rotation(bank, rotate: str):
    """(T, Phi) of mirt's summary rotation of the bank's standardized loadings: theta* = T^T
    theta on the rotated axes, Phi = T^T T their correlations."""
    from .rotation import ROTATIONS, rotate as _rotate, standardized_loadings

    if rotate not in ROTATIONS:
        raise ConfigError(f"rotate must be one of {', '.join(ROTATIONS)}, not {rotate!r}")
    if bank.n_dims < 2:
        return np.eye(bank.n_dims), np.eye(bank.n_dims)
    res = _rotate(standardized_loadings(bank.loadings), rotate)
    return res.T, res.phi
