"""The joint posterior of a suite's abilities: grid likelihoods, normal messages, importance
sampling.

Every answer y_j of member b(j)'s item j depends on that member's theta only (4PL,
P_j = c_j + (u_j - c_j) / (1 + exp(-a_j (theta_b - b_j)))); the thetas share the prior of
:class:`~atlascat.suite.prior.SuitePrior` (a normal or a normal mixture). The posterior is

    p(theta | y) ∝ prior(theta) prod_b L_b(theta_b),   log L_b = sum_{j in b} log P_j^y Q_j^(1-y)

- each L_b is kept on a fine theta grid (:class:`GridLikelihood`, updated answer by answer);
- for item selection and stopping, each L_b is replaced by a normal message (moment matching
  on the grid, :func:`site_messages`) and combined exactly with each prior component
  (:func:`component_posteriors`; :func:`gaussian_posterior` their moments);
- predictions use importance sampling (Geweke, 1989) with those component posteriors (widened
  by :data:`PROPOSAL_SCALE`) as a deterministic-mixture proposal over fixed scrambled-Sobol
  normal draws (seeded) and the exact target (:func:`importance`).

References: Geweke, J. (1989). Bayesian inference in econometric models using Monte Carlo
integration. Econometrica, 57, 1317-1339. Minka, T. (2001). Expectation propagation for
approximate Bayesian inference. UAI. Owen, A. and Zhou, Y. (2000). Safe and effective
importance sampling. JASA, 95, 135-143.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp

from ..errors import ConfigError
from ..irt.models import probability

__all__ = ["ItemPool", "GridLikelihood", "site_messages", "component_posteriors",
           "gaussian_posterior", "importance", "normal_draws", "PROPOSAL_SCALE", "GRID"]

#: proposal SD over the normal posterior's SD (wider keeps the weights bounded in the tails)
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


class GridLikelihood:
    """Per-member log likelihood of every subject on a theta grid, (B, N, Q), updated answer
    by answer (each answer adds log P_j or log Q_j at the grid of its member's theta)."""

    def __init__(self, pool, n_subjects: int, grid=GRID):
        self.pool = pool
        self.grid = np.asarray(grid, float)
        P = probability(self.grid, pool.a, pool.b, pool.c, pool.u)
        P = np.clip(P, _EPS, 1 - _EPS)
        self.log_p, self.log_q = np.log(P), np.log1p(-P)        # (Q, G)
        self.values = np.zeros((pool.n_members, n_subjects, self.grid.size))

    def add(self, rows, cols, y) -> None:
        y = np.asarray(y, float)[:, None]
        contrib = y * self.log_p[:, cols].T + (1 - y) * self.log_q[:, cols].T
        np.add.at(self.values, (self.pool.member[cols], rows), contrib)

    def add_matrix(self, asked, y) -> None:
        """Add every subject's answers at once: ``asked`` (N, G) bool, ``y`` (N, G) 0/1 (read
        where asked); one matrix product per member (bulk replays)."""
        asked = np.asarray(asked, bool)
        y1 = np.where(asked, np.nan_to_num(np.asarray(y, float)), 0.0)
        y0 = asked - y1
        for b, sl in enumerate(self.pool.slices()):
            self.values[b] += y1[:, sl] @ self.log_p[:, sl].T + y0[:, sl] @ self.log_q[:, sl].T

    def rows(self, rows) -> "GridLikelihood":
        """The likelihoods of some subjects (a view sharing the tables)."""
        out = object.__new__(GridLikelihood)
        out.pool, out.grid, out.log_p, out.log_q = self.pool, self.grid, self.log_p, self.log_q
        out.values = self.values[:, rows]
        return out

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


def site_messages(prior, lik):
    """Each member's likelihood as a normal message: precision lambda_b and lambda_b l_b,
    (B, N) each. The 1-D posterior on the grid under the marginal prior N(mu_b, Sigma_bb) has
    mean a_b and variance v_b, so lambda_b = 1 / v_b - 1 / Sigma_bb and
    lambda_b l_b = a_b / v_b - mu_b / Sigma_bb (expectation propagation's site update, Minka
    2001): robust to the very discriminating items of LLM banks, whose likelihood is a step,
    not a parabola."""
    mu, cov = prior.mean, prior.cov
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
    lam = np.maximum(1.0 / v - 1.0 / prior_var, 0.0)
    eta = np.where(lam > 0, a / v - mu[:, None] / prior_var, 0.0)
    return lam, eta


def component_posteriors(prior, lam, eta):
    """Per prior component c: the normal posterior N(m_c, S_c) given the site messages,
    S_c = (Sigma_c^-1 + diag(lambda))^-1, m_c = S_c (Sigma_c^-1 mu_c + lambda l), and the
    posterior component weights r_c ∝ pi_c |S_c|^1/2 |Sigma_c|^-1/2
    exp((m_c' S_c^-1 m_c - mu_c' Sigma_c^-1 mu_c) / 2). Shapes (N, C, B), (N, C, B, B), (N, C)."""
    w, mus, covs = prior.components
    b = mus.shape[1]
    precs = np.linalg.inv(covs)                                    # (C, B, B)
    H = precs[None] + (lam.T[:, None, :, None] * np.eye(b)[None, None])
    S = np.linalg.inv(H)
    rhs = np.einsum("cij,cj->ci", precs, mus)[None] + eta.T[:, None, :]
    m = np.einsum("ncij,ncj->nci", S, rhs)
    logr = (np.log(w)[None] + 0.5 * np.linalg.slogdet(S)[1]
            - 0.5 * np.linalg.slogdet(covs)[1][None]
            - 0.5 * np.einsum("ci,ci->c", mus, np.einsum("cij,cj->ci", precs, mus))[None]
            + 0.5 * np.einsum("nci,nci->nc", m, rhs))
    r = np.exp(logr - logr.max(1, keepdims=True))
    return m, S, r / r.sum(1, keepdims=True)


def gaussian_posterior(prior, lik):
    """Normal approximation N(m, S) of every subject's joint posterior (N, B), (N, B, B): the
    moments of the mixture of :func:`component_posteriors`."""
    m, S, r = component_posteriors(prior, *site_messages(prior, lik))
    mean = np.einsum("nc,nci->ni", r, m)
    d = m - mean[:, None, :]
    cov = np.einsum("nc,ncij->nij", r, S + d[..., :, None] * d[..., None, :])
    return mean, cov


def normal_draws(n: int, dim: int, seed: int = 0) -> np.ndarray:
    """``n`` scrambled-Sobol standard normal points in ``dim`` dimensions (fixed by ``seed``)."""
    from scipy.stats import norm, qmc

    u = qmc.Sobol(dim, scramble=True, seed=seed).random(n)
    return norm.ppf(np.clip(u, 1e-12, 1 - 1e-12))


def importance(prior, lik, z, *, block: int = 128):
    """Weighted posterior draws: ``theta`` (N, K, B) and normalized weights (N, K).

    Proposal: the equal mixture of the prior components' normal posteriors
    (:func:`component_posteriors`), each widened by :data:`PROPOSAL_SCALE`; the K draws ``z``
    (K, B) are split evenly among the components (deterministic-mixture importance sampling,
    Owen and Zhou, 2000). Target: prior density times prod_b L_b(theta_b) (grid likelihoods)."""
    m, S, _ = component_posteriors(prior, *site_messages(prior, lik))
    n, c, b = m.shape
    if z.shape[1] != b:
        raise ConfigError("importance: draws must have one column per member")
    L = np.linalg.cholesky(S + 1e-12 * np.eye(b)[None, None])      # (N, C, B, B)
    comp = np.arange(z.shape[0]) % c
    thetas = m[:, comp, :] + PROPOSAL_SCALE * np.einsum("nkij,kj->nki", L[:, comp], z)
    # log proposal: mean over components of N(theta; m_c, s^2 S_c); blocks of subjects bound
    # the (n, K, C, B) temporaries
    Sinv = np.linalg.inv(S) / PROPOSAL_SCALE ** 2
    logdet = np.linalg.slogdet(S)[1] + 2 * b * np.log(PROPOSAL_SCALE)   # (N, C)
    lq = np.empty(thetas.shape[:2])
    for s0 in range(0, n, block):
        r = slice(s0, min(n, s0 + block))
        d = thetas[r, None, :, :] - m[r, :, None, :]                   # (n, C, K, B)
        q = ((d @ Sinv[r]) * d).sum(-1)                                 # (n, C, K)
        lq[r] = logsumexp(-0.5 * logdet[r, :, None] - 0.5 * q, axis=1)
    logw = lik.at(thetas) + prior.log_density(thetas) - lq
    logw -= logw.max(1, keepdims=True)
    w = np.exp(logw)
    return thetas, w / w.sum(1, keepdims=True)
