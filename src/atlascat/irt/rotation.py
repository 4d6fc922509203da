"""Factor rotations of multidimensional 2PL loadings: varimax (orthogonal), oblimin and geomin
(oblique), and mirt's factor-loading summary.

A K-factor loading matrix A (J x K) with theta ~ N(0, I) is identified only up to rotation. An
oblique rotation by a K x K matrix T with unit-length columns,

    L = A (T^T)^{-1},    theta* = T^T theta,    Phi = cov(theta*) = T^T T,

leaves every prediction unchanged (A theta = L theta*) and lets the factors correlate (Phi has a
unit diagonal). The gradient projection algorithm (Jennrich 2002; Bernaards and Jennrich 2005,
GPArotation's ``GPFoblq``) minimizes a criterion Q(L) over such T: with G = -(L^T dQ/dL T^{-1})^T
the gradient in T, its projection onto the tangent space of the unit-column manifold is
Gp = G - T diag(1^T (T * G)); a step T - alpha Gp with its columns rescaled to unit length is
taken, alpha halved until Q falls by at least alpha ||Gp||_F^2 / 2, and the iteration stops when
||Gp||_F < tol. Criteria:

- oblimin (Jennrich 2002): Q(L) = 1/4 sum_jk l_jk^2 [(I - gamma/J 11^T) L^2 N]_jk, N = 11^T - I;
  gamma = 0 is quartimin (mirt's default rotation), 0.5 biquartimin, 1 covarimin.
- geomin (Yates 1987; Browne 2001): Q(L) = sum_j (prod_k (l_jk^2 + delta))^(1/K), delta = 0.01.

mirt's ``summary(mod, rotate=...)`` rotates the standardized loadings
F = a / 1.702 / sqrt(1 + |a|^2 / 1.702^2) (the normal-ogive factor loadings of the logistic
slopes) with GPArotation's defaults: no Kaiser normalization, tol 1e-5, at most 1000 iterations,
one start at T = I; each factor's sign is then set so that its largest |loading| is positive.
:func:`factor_loadings` does the same.

References
----------
Jennrich, R. I. (2002). A simple general method for oblique rotation. Psychometrika 67, 7-19.
Bernaards, C. A. and Jennrich, R. I. (2005). Gradient projection algorithms and software for
    arbitrary rotation criteria in factor analysis. Educational and Psychological Measurement
    65, 676-696.
Browne, M. W. (2001). An overview of analytic rotation in exploratory factor analysis.
    Multivariate Behavioral Research 36, 111-150.
Kaiser, H. F. (1958). The varimax criterion for analytic rotation in factor analysis.
    Psychometrika 23, 187-200.
Chalmers, R. P. (2012). mirt: A multidimensional item response theory package for the R
    environment. Journal of Statistical Software 48(6), 1-29.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import ConfigError

__all__ = ["ROTATIONS", "Rotation", "FactorLoadings", "varimax", "oblique", "oblimin", "geomin",
           "rotate", "standardized_loadings", "factor_loadings"]

ROTATIONS = ("oblimin", "geomin", "varimax", "none")
D = 1.702   # logistic-to-normal-ogive scale of mirt's standardized loadings
GPF_TOL, GPF_MAX_ITER = 1e-5, 1000   # GPArotation's eps and maxit (mirt passes them unchanged)


def varimax(loadings, *, normalize: bool = True, max_iter: int = 500, tol: float = 1e-10):
    """Varimax rotation (Kaiser 1958). Returns ``(rotated, R)`` with rotated = loadings @ R.

    Maximizes sum_k [ mean_j l_jk^4 - (mean_j l_jk^2)^2 ] over orthogonal R, with Kaiser row
    normalization (rows scaled to unit length during the rotation) when ``normalize``. Uses the
    SVD iteration of the orthomax family (gamma = 1). mirt's varimax (GPArotation's ``Varimax``)
    is ``normalize=False``.
    """
    A = np.asarray(loadings, dtype=float)
    n, k = A.shape
    if k < 2:
        return A.copy(), np.eye(k)
    h = np.sqrt((A**2).sum(axis=1, keepdims=True)) if normalize else np.ones((n, 1))
    h = np.where(h > 0, h, 1.0)
    L = A / h
    R = np.eye(k)
    obj = 0.0
    for _ in range(max_iter):
        LR = L @ R
        grad = L.T @ (LR**3 - LR @ np.diag((LR**2).sum(axis=0)) / n)
        u, s, vt = np.linalg.svd(grad)
        R = u @ vt
        new = s.sum()
        if new - obj < tol * max(new, 1.0):
            break
        obj = new
    return A @ R, R


@dataclass(frozen=True)
class Rotation:
    """A rotated loading matrix: ``loadings`` = A (T^T)^{-1} (the pattern matrix), ``phi`` = T^T T
    the factor correlations (the identity for an orthogonal rotation), ``T``, the criterion
    value, whether ||Gp|| fell below tol, and the iterations used."""

    loadings: np.ndarray
    phi: np.ndarray
    T: np.ndarray
    method: str
    criterion: float
    converged: bool
    n_iter: int


def _oblimin_criterion(gamma: float):
    def vgq(L):
        X = (L**2).sum(axis=1, keepdims=True) - L**2          # L^2 (11^T - I), row sums minus self
        if gamma != 0:
            X = X - gamma * X.mean(axis=0)                    # (I - gamma/J 11^T) X
        return float((L**2 * X).sum() / 4), L * X
    return vgq


def _geomin_criterion(delta: float):
    def vgq(L):
        L2 = L**2 + delta
        pro = np.exp(np.log(L2).mean(axis=1))
        return float(pro.sum()), (2.0 / L.shape[1]) * (L / L2) * pro[:, None]
    return vgq


def _gpf_oblique(A, vgq, T, tol, max_iter):
    """GPArotation's GPFoblq: gradient projection over T with unit-length columns."""
    def grad(L, Gq, Tinv):
        return -(L.T @ Gq @ Tinv).T

    Tinv = np.linalg.inv(T)
    L = A @ Tinv.T
    f, Gq = vgq(L)
    G = grad(L, Gq, Tinv)
    alpha, s, it = 1.0, np.inf, 0
    for it in range(max_iter + 1):
        Gp = G - T * (T * G).sum(axis=0)
        s = float(np.sqrt((Gp**2).sum()))
        if s < tol:
            break
        alpha *= 2
        for _ in range(11):
            X = T - alpha * Gp
            Tt = X / np.sqrt((X**2).sum(axis=0))
            Tinv = np.linalg.inv(Tt)
            L = A @ Tinv.T
            ft, Gq = vgq(L)
            if f - ft > 0.5 * s**2 * alpha:
                break
            alpha /= 2
        T, f = Tt, ft
        G = grad(L, Gq, Tinv)
    return L, T, f, s < tol, it


def oblique(loadings, method: str = "oblimin", *, gamma: float = 0.0, delta: float = 0.01,
            normalize: bool = False, tol: float = GPF_TOL, max_iter: int = GPF_MAX_ITER,
            start=None) -> Rotation:
    """Oblique rotation by gradient projection (Jennrich 2002): ``method`` "oblimin" (``gamma``;
    0 = quartimin) or "geomin" (``delta``). ``normalize``: Kaiser row normalization during the
    rotation (mirt/GPArotation default: off); ``start``: the initial T (default I)."""
    A = np.asarray(loadings, dtype=float)
    if A.ndim != 2 or A.shape[1] < 2 or not np.isfinite(A).all():
        raise ConfigError(f"an oblique rotation needs a finite loading matrix with 2 or more "
                          f"factors; got shape {A.shape}")
    if method == "oblimin":
        vgq = _oblimin_criterion(float(gamma))
    elif method == "geomin":
        if not delta > 0:
            raise ConfigError(f"geomin's delta must be positive, got {delta!r}")
        vgq = _geomin_criterion(float(delta))
    else:
        raise ConfigError(f"unknown oblique rotation {method!r}; use 'oblimin' or 'geomin'")
    if not (isinstance(tol, (int, float)) and tol > 0) or isinstance(max_iter, bool) \
            or not isinstance(max_iter, (int, np.integer)) or max_iter < 0:
        raise ConfigError(f"tol must be positive and max_iter a whole number >= 0; got {tol!r}, "
                          f"{max_iter!r}")
    k = A.shape[1]
    T = np.eye(k) if start is None else np.array(start, dtype=float)
    if T.shape != (k, k):
        raise ConfigError(f"start must be a {k}x{k} matrix, got shape {T.shape}")
    w = np.sqrt((A**2).sum(axis=1, keepdims=True)) if normalize else np.ones((A.shape[0], 1))
    w = np.where(w > 0, w, 1.0)
    L, T, f, ok, it = _gpf_oblique(A / w, vgq, T / np.sqrt((T**2).sum(axis=0)), tol, max_iter)
    if not ok:
        from ..errors import warn_user

        warn_user(f"the {method} rotation did not converge in {max_iter} iterations", UserWarning)
    return Rotation(L * w, T.T @ T, T, method, f, bool(ok), it)


def oblimin(loadings, gamma: float = 0.0, **kwargs) -> Rotation:
    """Oblimin rotation (gamma = 0: quartimin, mirt's default); see :func:`oblique`."""
    return oblique(loadings, "oblimin", gamma=gamma, **kwargs)


def geomin(loadings, delta: float = 0.01, **kwargs) -> Rotation:
    """Oblique geomin rotation (mirt's "geominQ"); see :func:`oblique`."""
    return oblique(loadings, "geomin", delta=delta, **kwargs)


def rotate(loadings, method: str = "oblimin", **kwargs) -> Rotation:
    """Rotate as mirt's summary does: "oblimin", "geomin", "varimax" (no Kaiser normalization,
    as GPArotation's Varimax) or "none"; then each factor's sign so that its largest |loading|
    is positive, ``phi`` flipped to match."""
    A = np.asarray(loadings, dtype=float)
    k = A.shape[1] if A.ndim == 2 else 0
    if method not in ROTATIONS:
        raise ConfigError(f"unknown rotation {method!r}; use one of {', '.join(ROTATIONS)}")
    if method in ("oblimin", "geomin") and k >= 2:
        res = oblique(A, method, **kwargs)
    else:
        L, R = varimax(A, normalize=False) if method == "varimax" else (A.copy(), np.eye(k))
        res = Rotation(L, np.eye(k), R, method if k >= 2 else "none", float("nan"), True, 0)
    L = res.loadings
    s = np.sign(L[np.abs(L).argmax(axis=0), np.arange(k)])
    s = np.where(s == 0, 1.0, s)
    return Rotation(L * s, res.phi * np.outer(s, s), res.T * s, res.method, res.criterion,
                    res.converged, res.n_iter)


_rotate = rotate   # for factor_loadings, whose ``rotate`` argument (mirt's name) shadows it


def standardized_loadings(loadings) -> np.ndarray:
    """mirt's factor loadings of 2PL slopes: F = a / 1.702 / sqrt(1 + |a|^2 / 1.702^2)."""
    A = np.asarray(loadings, dtype=float)
    return A / D / np.sqrt(1.0 + (A**2).sum(axis=1, keepdims=True) / D**2)


@dataclass(frozen=True)
class FactorLoadings:
    """mirt's ``summary(mod, rotate=...)``: ``table`` (rotated standardized loadings F1..FK and
    the communalities h2, one row per item), ``phi`` (factor correlations), the rotation."""

    table: pd.DataFrame
    phi: pd.DataFrame
    rotation: Rotation

    def to_dict(self) -> dict:
        return {"rotation": self.rotation.method, "converged": self.rotation.converged,
                "loadings": {str(i): {c: float(v) for c, v in row.items()}
                             for i, row in self.table.iterrows()},
                "factor_correlations": self.phi.to_numpy().tolist()}


def factor_loadings(loadings, item_ids=None, rotate: str = "oblimin", **kwargs) -> FactorLoadings:
    """Standardized loadings of a multidimensional 2PL, rotated as mirt's summary (default
    "oblimin", quartimin, mirt's default), with communalities and factor correlations."""
    F = standardized_loadings(loadings)
    res = _rotate(F, rotate, **kwargs)
    k = F.shape[1]
    names = [f"F{i + 1}" for i in range(k)]
    ids = [str(i) for i in (range(1, F.shape[0] + 1) if item_ids is None else item_ids)]
    table = pd.DataFrame(res.loadings, columns=names, index=pd.Index(ids, name="item_id"))
    table["h2"] = (F**2).sum(axis=1)
    return FactorLoadings(table, pd.DataFrame(res.phi, index=names, columns=names), res)
