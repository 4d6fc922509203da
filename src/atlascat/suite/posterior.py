"""The joint posterior of a suite's abilities: Laplace (Fisher scoring) + importance sampling.

Every answer y_j of member b(j)'s item j depends on that member's theta only (4PL,
P_j = c_j + (u_j - c_j) / (1 + exp(-a_j (theta_b - b_j)))); the thetas share the prior
N(mu, Sigma) of :class:`~atlascat.suite.prior.SuitePrior`. The log posterior

    l(theta) = sum_j [y_j log P_j + (1 - y_j) log(1 - P_j)] - (theta - mu)' Sigma^-1 (theta - mu) / 2

is maximized by Fisher scoring, vectorized over subjects: the likelihood's information is
diagonal (I_b = sum_{j in b} P_j'^2 / (P_j Q_j)), so each step solves (diag(I) + Sigma^-1)
delta = grad, a B x B system per subject. The Laplace approximation N(m, S),
S = (diag(I(m)) + Sigma^-1)^-1, drives the item selection; predictions use importance sampling
with that Gaussian (widened by :data:`PROPOSAL_SCALE`) as proposal over fixed scrambled-Sobol
normal draws (seeded), weights w_k ∝ exp(l(theta_k)) / q(theta_k) (Geweke, 1989).

Reference: Geweke, J. (1989). Bayesian inference in econometric models using Monte Carlo
integration. Econometrica, 57, 1317-1339.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError

__all__ = ["ItemPool", "GridLikelihood", "gaussian_posterior", "importance", "normal_draws",
           "PROPOSAL_SCALE", "GRID"]

#: proposal SD over the Laplace SD (a wider proposal keeps the weights bounded in the tails)
PROPOSAL_SCALE = 1.25
_EPS = 1e-9
#: theta grid of the per-member likelihoods (step 0.05: finer than the sharpest items' slope)
GRID = np.linspace(-6.0, 6.0, 241)


@dataclass
class ItemPool:
    """All items of a suite's members in one index: ``member[g]`` (0..B-1), ``item_ids[g]``,
    4PL parameters ``a, b, c, u`` (G,)."""

    member: np.ndarray
    item_ids: np.ndarray
    a: np.ndarray
    b: np.ndarray
    c: np.ndarray
    u: np.ndarray
    n_members: int

    @classmethod
    def from_banks(cls, banks) -> "ItemPool":
        member = np.concatenate([np.full(len(bk), i) for i, bk in enumerate(banks)])
        ids = np.concatenate([np.asarray(bk.item_ids, dtype=object).astype(str) for bk in banks])
        a, b, c, u = (np.concatenate([np.asarray(bk.params[k], float) for bk in banks])
                      for k in range(4))
        return cls(member, ids, a, b, c, u, len(banks))

    def __len__(self) -> int:
        return int(self.member.size)

    @property
    def onehot(self) -> np.ndarray:
        """(G, B) indicator of each item's member."""
        return (self.member[:, None] == np.arange(self.n_members)[None, :]).astype(float)

    def slices(self) -> list[slice]:
        """The pool columns of each member (members are stored contiguously)."""
        ends = np.cumsum(np.bincount(self.member, minlength=self.n_members))
        return [slice(int(e - n), int(e)) for e, n in
                zip(ends, np.bincount(self.member, minlength=self.n_members))]

    def irf(self, theta, cols=None):
        """P and dP/dtheta at ``theta`` (any shape ending in the items ``cols``)."""
        a, b, c, u = ((p if cols is None else p[cols]) for p in (self.a, self.b, self.c, self.u))
        s = 1.0 / (1.0 + np.exp(-np.clip(a * (theta - b), -35, 35)))
        return c + (u - c) * s, a * (u - c) * s * (1.0 - s)


class GridLikelihood:
    """Per-member log likelihood of every subject on a theta grid, (B, N, Q), updated answer
    by answer (each answer adds log P_j or log Q_j at the grid of its member's theta)."""

    def __init__(self, pool, n_subjects: int, grid=GRID):
        self.pool = pool
        self.grid = np.asarray(grid, float)
        P, _ = pool.irf(self.grid[:, None])
        P = np.clip(P, _EPS, 1 - _EPS)
        self.log_p, self.log_q = np.log(P), np.log1p(-P)        # (Q, G)
        self.values = np.zeros((pool.n_members, n_subjects, self.grid.size))

    def add(self, rows, cols, y) -> None:
        y = np.asarray(y, float)[:, None]
        contrib = y * self.log_p[:, cols].T + (1 - y) * self.log_q[:, cols].T
        np.add.at(self.values, (self.pool.member[cols], rows), contrib)

    def at(self, theta) -> np.ndarray:
        """Sum over members of the log likelihood at ``theta`` (N, K, B), linear interpolation
        on the grid (held at the ends)."""
        g = self.grid
        h = g[1] - g[0]
        x = np.clip((theta - g[0]) / h, 0.0, g.size - 1 - 1e-9)
        i = np.floor(x).astype(int)
        f = x - i
        out = np.zeros(theta.shape[:2])
        for b in range(theta.shape[2]):
            v = self.values[b]
            lo = np.take_along_axis(v, i[..., b], 1)
            hi = np.take_along_axis(v, i[..., b] + 1, 1)
            out += lo + f[..., b] * (hi - lo)
        return out


def gaussian_posterior(prior, lik):
    """Gaussian joint posterior N(m, S) of every subject from the grid likelihoods.

    Each member's likelihood is matched by a normal message N(l_b, 1 / lambda_b): the 1-D
    posterior on the grid under the marginal prior N(mu_b, Sigma_bb) has mean a_b and variance
    v_b, so lambda_b = 1 / v_b - 1 / Sigma_bb and l_b = (a_b / v_b - mu_b / Sigma_bb) / lambda_b
    (expectation propagation's site update, Minka 2001). Then
    S = (Sigma^-1 + diag(lambda))^-1, m = S (Sigma^-1 mu + lambda l). Robust to the very
    discriminating items of LLM banks, whose likelihood is a step, not a parabola."""
    mu, cov = prior.mean, prior.cov
    lam_p = prior.precision
    g = lik.grid
    sd = np.sqrt(np.diag(cov))
    logpost = lik.values - 0.5 * ((g[None, None, :] - mu[:, None, None])
                                  / sd[:, None, None]) ** 2
    logpost -= logpost.max(-1, keepdims=True)
    w = np.exp(logpost)
    w /= w.sum(-1, keepdims=True)
    a = (w * g).sum(-1)                                            # (B, N)
    v = np.maximum((w * g * g).sum(-1) - a * a, 1e-6)
    prior_var = (sd ** 2)[:, None]
    lam = np.maximum(1.0 / v - 1.0 / prior_var, 0.0)               # (B, N)
    eta = np.where(lam > 0, a / v - mu[:, None] / prior_var, 0.0)  # lam * l
    S = np.linalg.inv(lam_p[None] + lam.T[:, :, None] * np.eye(mu.size)[None])
    m = np.einsum("nij,nj->ni", S, (lam_p @ mu)[None] + eta.T)
    return m, S


def normal_draws(n: int, dim: int, seed: int = 0) -> np.ndarray:
    """``n`` scrambled-Sobol standard normal points in ``dim`` dimensions (fixed by ``seed``)."""
    from scipy.stats import norm, qmc

    u = qmc.Sobol(dim, scramble=True, seed=seed).random(n)
    return norm.ppf(np.clip(u, 1e-12, 1 - 1e-12))


def importance(prior, lik, mode, cov, z):
    """Weighted posterior draws: ``theta`` (N, K, B) and normalized weights (N, K).

    ``z`` (K, B) standard normal draws; theta_k = m + PROPOSAL_SCALE L z_k (L L' = S); target
    N(theta; mu, Sigma) prod_b L_b(theta_b) with the grid likelihoods ``lik``."""
    b = mode.shape[1]
    if z.shape[1] != b:
        raise ConfigError("importance: draws must have one column per member")
    L = np.linalg.cholesky(cov + 1e-12 * np.eye(b)[None])
    thetas = mode[:, None, :] + PROPOSAL_SCALE * np.einsum("nij,kj->nki", L, z)
    d = thetas - prior.mean
    lp = -0.5 * np.einsum("nki,ij,nkj->nk", d, prior.precision, d)
    logw = lik.at(thetas) + lp + 0.5 * (z * z).sum(1)[None, :]
    logw -= logw.max(1, keepdims=True)
    w = np.exp(logw)
    return thetas, w / w.sum(1, keepdims=True)
