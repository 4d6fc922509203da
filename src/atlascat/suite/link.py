"""The suite's joint score link: each member's score recalibrated on all the members' scores.

A member's link curve g_b maps its own theta to its published score; pushed through a short
joint posterior, the six predictions carry the prior's pull and the links' misfit on the
population tested. The joint link is a linear stacking fitted on calibration models' replayed
suite tests (Wolpert, 1992):

    score_b = alpha_b + sum_c beta_bc ghat_c + e_b,

with ghat_c the posterior mean of g_c(theta_c) (ridge, small penalty). Prediction applies it to
every posterior draw of g (so the posterior's spread and correlations stay in the interval) and
adds a residual e_n ~ N(0, C_n) (V_n the subject's posterior covariance of g; C_n below): the
interval is as wide as the calibration replays' errors, split into what the posterior knows and
what it cannot.

Optionally (``residuals`` given to :meth:`SuiteLink.fit`) an *answer stacking* on top: each
member's remaining residual regressed (ridge, penalty by 5-fold cross-validation) on the
answer residuals of every item of the pool, y_j - P_j(theta_b) for the items asked (0 for the
others; theta_b the posterior mean),

    score_b = alpha_b + sum_c beta_bc ghat_c + sum_j W_bj (y_j - P_j) + e_b,

so the answers carry what the members' thetas cannot (the published score's item-level
content, across benchmarks); the residuals r below are then the out-of-fold ones.

The replays' squared errors grow faster than the posterior's own variance G_n = beta V_n beta'
(a subject with few answers, or none on a member, is off by more than its posterior says: on
the seed-0 calibration replays E[r^2] ~ 0.18 + 2.3 (w'G_n w) in points^2 for the average). So
the residual is heteroscedastic: member b's squared error is modelled as a_b + k_b G_n,bb
(gamma GLM with identity link, k_b >= 1), and a subject's residual covariance is

    C_n = D + K G_n K,   K = diag(sqrt(k_b - 1)),   D_bc = rho_bc sqrt(a_b a_c),

with rho the correlation of the standardized residuals r_nb / sqrt(a_b + k_b G_n,bb), on top
of the posterior draws' G_n: narrow for a model that answered many items on every member,
wide for one whose answers say little.

Optionally a neighbour correction on top (:mod:`atlascat.suite.neighbours`): the errors of the
calibration models that answered the subject's items most alike, scored by this link on those
items; D and K are then refitted on the corrected cross-validated residuals.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError
from .neighbours import NeighbourCorrection
from .prior import nearest_pd

__all__ = ["SuiteLink", "RIDGE", "variance_slope", "residual_model"]

#: ridge penalty on the stacking weights (scores are 0-1)
RIDGE = 1e-3
#: penalties tried (5-fold cross-validation) for the answer stacking's item weights
ANSWER_RIDGES = tuple(np.logspace(0.0, 4.0, 17))


def _ridge_cv(X, Y, alphas=ANSWER_RIDGES, folds: int = 5, seed: int = 0):
    """Ridge of each column of ``Y`` on ``X`` (intercepts unpenalized), each column's penalty by
    k-fold CV (squared error). Returns (W (p, k), intercepts (k,), out-of-fold fits (n, k),
    penalties (k,))."""
    fold = np.random.default_rng([seed, 18]).permutation(len(Y)) % folds
    alphas = np.asarray(alphas, float)
    fits = np.empty((len(alphas),) + Y.shape)
    for f in range(folds):
        tr, te = fold != f, fold == f
        xm, ym = X[tr].mean(0), Y[tr].mean(0)
        U, sv, Vt = np.linalg.svd(X[tr] - xm, full_matrices=False)
        uy = U.T @ (Y[tr] - ym)
        P = (X[te] - xm) @ Vt.T
        for k, a in enumerate(alphas):
            fits[k][te] = ym + P @ ((sv / (sv ** 2 + a))[:, None] * uy)
    best = np.argmin(((fits - Y) ** 2).sum(1), 0)
    xm, ym = X.mean(0), Y.mean(0)
    U, sv, Vt = np.linalg.svd(X - xm, full_matrices=False)
    uy = U.T @ (Y - ym)
    W = np.column_stack([Vt.T @ ((sv / (sv ** 2 + alphas[b])) * uy[:, k])
                         for k, b in enumerate(best)])
    oof = np.column_stack([fits[b][:, k] for k, b in enumerate(best)])
    return W, ym - xm @ W, oof, alphas[best]


def variance_slope(r2, pv, iters: int = 50) -> tuple[float, float]:
    """(a, k) of E[r^2] = a + k pv: gamma GLM with identity link (iteratively reweighted least
    squares, weights 1 / mu^2; McCullagh and Nelder, 1989, ch. 8), a >= 0, k >= 1."""
    r2, pv = np.asarray(r2, float), np.asarray(pv, float)
    A = np.column_stack([np.ones_like(pv), pv])
    a, k = max(float(np.mean(r2) - np.mean(pv)), 1e-12), 1.0
    for _ in range(iters):
        wt = 1.0 / np.maximum(a + k * pv, 1e-12) ** 2
        a_new, k_new = np.linalg.lstsq(A * np.sqrt(wt)[:, None], r2 * np.sqrt(wt), rcond=None)[0]
        a_new, k_new = max(a_new, 1e-12), max(k_new, 1.0)
        if abs(a_new - a) <= 1e-10 + 1e-8 * a and abs(k_new - k) <= 1e-8 * k:
            a, k = a_new, k_new
            break
        a, k = a_new, k_new
    return float(a), float(k)


def residual_model(beta, resid, post_cov):
    """(D, K's diagonal) of residuals ``resid`` (N, B) of a stacking with weights ``beta``
    (B, B) on subjects with posterior covariances ``post_cov`` (N, B, B) of g: member b's
    squared error a_b + k_b G_n,bb (:func:`variance_slope`), G_n = beta V_n beta', and
    D_bc = rho_bc sqrt(a_b a_c) (rho: the standardized residuals' correlation)."""
    G = np.einsum("ij,njk,lk->nil", beta, post_cov, beta)
    Gd = np.diagonal(G, axis1=1, axis2=2)
    a, k = np.array([variance_slope(resid[:, b] ** 2, Gd[:, b])
                     for b in range(len(beta))]).T
    z = resid / np.sqrt(a + k * Gd)
    rho = np.corrcoef(z.T)
    D = nearest_pd(np.sqrt(a)[:, None] * rho * np.sqrt(a)[None, :], 1e-6)
    return D, np.sqrt(k - 1.0)


@dataclass
class SuiteLink:
    """``coef`` (B, B + 1): weights on the members' ghat and an intercept; ``resid_cov`` D;
    ``answer_weights`` (B, G): the answer stacking's item weights in the suite's pool order
    (None: none); ``post_scale`` (B,): K's diagonal sqrt(k_b - 1) (None: 0, a homoscedastic
    residual D); ``neighbours``: the neighbour correction
    (:class:`~atlascat.suite.neighbours.NeighbourCorrection`; D and K are then the corrected
    prediction's)."""

    coef: np.ndarray
    resid_cov: np.ndarray
    n_models: int = 0
    answer_weights: np.ndarray | None = None
    post_scale: np.ndarray | None = None
    neighbours: NeighbourCorrection | None = None

    def __post_init__(self):
        self.coef = np.asarray(self.coef, float)
        b = self.coef.shape[0]
        if self.coef.shape != (b, b + 1):
            raise ConfigError("a suite link's coef must be (B, B + 1)")
        self.resid_cov = np.asarray(self.resid_cov, float).reshape(b, b)
        if self.answer_weights is not None:
            self.answer_weights = np.asarray(self.answer_weights, float)
            if self.answer_weights.ndim != 2 or self.answer_weights.shape[0] != b:
                raise ConfigError("a suite link's answer_weights must be (B, pool items)")
        if self.post_scale is not None:
            self.post_scale = np.asarray(self.post_scale, float).reshape(-1)
            if self.post_scale.shape != (b,) or (self.post_scale < 0).any():
                raise ConfigError("a suite link's post_scale must be B values >= 0")

    @classmethod
    def fit(cls, ghat, post_cov, truth, ridge: float = RIDGE, residuals=None,
            seed: int = 0) -> "SuiteLink":
        """Fit on calibration replays: ``ghat`` (N, B) posterior means of g, ``post_cov``
        (N, B, B) their posterior covariances, ``truth`` (N, B) published scores (0-1);
        ``residuals`` (N, G): the replays' answer residuals (:func:`answer_residuals`) for the
        answer stacking (None: without)."""
        return cls.fit_with_residuals(ghat, post_cov, truth, ridge, residuals, seed)[0]

    @classmethod
    def fit_with_residuals(cls, ghat, post_cov, truth, ridge: float = RIDGE, residuals=None,
                           seed: int = 0):
        """:meth:`fit`, and the rows it used (N,) bool with their (out-of-fold) residuals."""
        ghat, truth = np.asarray(ghat, float), np.asarray(truth, float)
        ok = np.isfinite(truth).all(1) & np.isfinite(ghat).all(1)
        if ok.sum() < 3 * ghat.shape[1] + 10:
            raise ConfigError(f"a suite link needs more calibration models with every score "
                              f"(got {int(ok.sum())})")
        X = np.hstack([ghat[ok], np.ones((ok.sum(), 1))])
        pen = ridge * np.eye(X.shape[1])
        pen[-1, -1] = 0.0
        coef = np.linalg.solve(X.T @ X + pen, X.T @ truth[ok]).T
        resid = truth[ok] - X @ coef.T
        W = None
        if residuals is not None:
            E = np.asarray(residuals, float)[ok]
            W, icpt, oof, _ = _ridge_cv(E, resid, seed=seed)
            coef[:, -1] += icpt
            resid = resid - oof
            W = W.T
        D, scale = residual_model(coef[:, :-1], resid, np.asarray(post_cov, float)[ok])
        return cls(coef, D, int(ok.sum()), W, scale), ok, resid

    def resid_covs(self, g_cov) -> np.ndarray:
        """Each subject's residual covariance C_n = D + K beta V_n beta' K (N, B, B) from the
        posterior covariance of g, ``g_cov`` (N, B, B)."""
        g_cov = np.asarray(g_cov, float)
        C = np.broadcast_to(self.resid_cov, g_cov.shape).copy()
        if self.post_scale is not None and self.post_scale.any():
            KB = self.post_scale[:, None] * self.coef[:, :-1]
            C += np.einsum("ij,njk,lk->nil", KB, g_cov, KB)
        return C

    def apply(self, g) -> np.ndarray:
        """Recalibrated scores of draws ``g`` (..., B)."""
        return g @ self.coef[:, :-1].T + self.coef[:, -1]

    def answer_shift(self, residuals) -> np.ndarray:
        """The answer stacking's shift (N, B) of answer residuals (N, G); 0 without one."""
        residuals = np.asarray(residuals, float)
        if self.answer_weights is None:
            return np.zeros((residuals.shape[0], self.coef.shape[0]))
        if residuals.shape[1] != self.answer_weights.shape[1]:
            raise ConfigError(f"the joint link's answer weights cover "
                              f"{self.answer_weights.shape[1]} items, the pool has "
                              f"{residuals.shape[1]}")
        return residuals @ self.answer_weights.T

    def without_neighbours(self) -> "SuiteLink":
        """The link without its neighbour correction (and with the residual model of the
        uncorrected prediction); itself when it has none."""
        nb = self.neighbours
        if nb is None:
            return self
        return SuiteLink(self.coef, nb.plain_resid_cov, self.n_models, self.answer_weights,
                         nb.plain_post_scale)

    def to_dict(self) -> dict:
        d = {"coef": np.round(self.coef, 6).tolist(),
             "resid_cov": np.round(self.resid_cov, 9).tolist(), "n_models": self.n_models}
        if self.answer_weights is not None:
            d["answer_weights"] = np.round(self.answer_weights, 7).tolist()
        if self.post_scale is not None:
            d["post_scale"] = np.round(self.post_scale, 6).tolist()
        if self.neighbours is not None:
            d["neighbours"] = self.neighbours.to_dict()
        return d

    @classmethod
    def from_dict(cls, d) -> "SuiteLink":
        nb = d.get("neighbours")
        return cls(d["coef"], d["resid_cov"], int(d.get("n_models", 0)),
                   d.get("answer_weights"), d.get("post_scale"),
                   NeighbourCorrection.from_dict(nb) if nb else None)
