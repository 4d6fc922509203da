"""The suite's joint score link: each member's score recalibrated on all the members' scores.

A member's link curve g_b maps its own theta to its published score; pushed through a short
joint posterior, the six predictions carry the prior's pull and the links' misfit on the
population tested. The joint link is a linear stacking fitted on calibration models' replayed
suite tests (Wolpert, 1992):

    score_b = alpha_b + sum_c beta_bc ghat_c + e_b,   e ~ N(0, D),

with ghat_c the posterior mean of g_c(theta_c) (ridge, small penalty). Prediction applies it to
every posterior draw of g (so the posterior's spread and correlations stay in the interval) and
adds e with D = Cov(residuals) - mean_n beta V_n beta' (V_n the subject's posterior covariance
of g; floored positive definite): the interval is as wide as the calibration replays' errors,
split into what the posterior knows and what it cannot.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError
from .prior import nearest_pd

__all__ = ["SuiteLink", "RIDGE"]

#: ridge penalty on the stacking weights (scores are 0-1)
RIDGE = 1e-3


@dataclass
class SuiteLink:
    """``coef`` (B, B + 1): weights on the members' ghat and an intercept; ``resid_cov`` D."""

    coef: np.ndarray
    resid_cov: np.ndarray
    n_models: int = 0

    def __post_init__(self):
        self.coef = np.asarray(self.coef, float)
        b = self.coef.shape[0]
        if self.coef.shape != (b, b + 1):
            raise ConfigError("a suite link's coef must be (B, B + 1)")
        self.resid_cov = np.asarray(self.resid_cov, float).reshape(b, b)

    @classmethod
    def fit(cls, ghat, post_cov, truth, ridge: float = RIDGE) -> "SuiteLink":
        """Fit on calibration replays: ``ghat`` (N, B) posterior means of g, ``post_cov``
        (N, B, B) their posterior covariances, ``truth`` (N, B) published scores (0-1)."""
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
        beta = coef[:, :-1]
        known = np.einsum("ij,njk,lk->il", beta, np.asarray(post_cov, float)[ok], beta) / ok.sum()
        D = nearest_pd(np.cov(resid.T) - known, 1e-6)
        return cls(coef, D, int(ok.sum()))

    def apply(self, g) -> np.ndarray:
        """Recalibrated scores of draws ``g`` (..., B)."""
        return g @ self.coef[:, :-1].T + self.coef[:, -1]

    def to_dict(self) -> dict:
        return {"coef": np.round(self.coef, 6).tolist(),
                "resid_cov": np.round(self.resid_cov, 9).tolist(), "n_models": self.n_models}

    @classmethod
    def from_dict(cls, d) -> "SuiteLink":
        return cls(d["coef"], d["resid_cov"], int(d.get("n_models", 0)))
