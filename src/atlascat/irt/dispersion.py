"""The dispersion of continuous item scores about the IRT model, and the tempered E-step.

A score y in [0, 1] (F1, ROUGE, mc2, a rating mapped to [0, 1]) enters the calibration through
the Bernoulli quasi-likelihood y log P + (1 - y) log(1 - P) (Wedderburn 1974; the fractional
response model of Papke and Wooldridge 1996): its score equation is unbiased for the mean
function E[y | theta] = P(theta) whatever y's distribution. A continuous score varies less than
a coin with the same mean, Var(y | theta) = phi_j P (1 - P) with phi_j < 1, so the plain
quasi-likelihood, read as a likelihood of theta, is too flat: the E-step's posterior of theta is
wider than the data allow, and the slopes come out low (10-20% on zero/one-inflated beta scores,
tests/test_continuous_scores.py). The extended quasi-likelihood (Nelder and Pregibon 1987;
McCullagh and Nelder 1989, section 9.6) divides each item's term by its dispersion:

    L_iq = sum_j m_ij [y_ij log P_j(x_q) + (1 - y_ij) log Q_j(x_q)] / phi_j,

which is what :func:`atlascat.irt.em.fit_joint` takes as ``item_scale`` = 1 / phi_j. Its
E-step's posterior uses the scaled terms; each item's log prior is divided by phi_j too (the
M-step takes the unscaled expected counts), so the estimates maximize sum_s log sum_q pi_q
exp(L_sq) + sum_j log p(a_j) / phi_j, the objective reported: the prior as strong against an
item's information as on a 0/1 item (lognormal(0, 1) acts about as lognormal(0, sqrt(phi_j))).
With few source models the slopes shrink towards the prior's median, which keeps the
adaptive test on continuous banks from claiming more precision than it has (the prior at its
stated weight, measured: benchmarks/results/longbench.md). phi_j is
:func:`item_dispersion`, the Pearson ratio of each item's residuals on the posterior predictive
of the subject's other answers. For 0/1 answers phi_j = 1 and nothing changes.

A bank calibrated with a dispersion carries it in its metadata column ``dispersion``
(:func:`bank_dispersion`), and the adaptive test (:mod:`atlascat.cat.tables`) reads it: each
answer adds [y log P_j + (1 - y) log Q_j] / phi_j to the log-posterior of theta, and the item's
information is the quasi-likelihood's, a^2 (u - c)^2 s^2 (1 - s)^2 / (P Q phi_j) (for the 2PL
a^2 P Q / phi_j; McCullagh and Nelder 1989, section 9.2: the information of a quasi-likelihood
is the derivative of the mean squared over the variance, here phi_j P Q).

Simulated answers (:func:`draw_scores`, what ``atlas simulate --thetas`` and the live
``simulate:THETA`` subject answer with) follow the same two moments: a Beta draw with mean
P_j(theta) and variance phi_j P Q on a bank with a dispersion column, a 0/1 coin without one.

References: Wedderburn (1974), Biometrika 61, 439-447. Papke and Wooldridge (1996), J. Applied
Econometrics 11, 619-632. Nelder and Pregibon (1987), Biometrika 74, 221-232.
"""
from __future__ import annotations

import numpy as np

__all__ = ["estimated_dispersion", "item_dispersion", "is_binary", "bank_dispersion",
           "with_dispersion", "without_dispersion", "draw_scores", "COLUMN"]

COLUMN = "dispersion"   # the bank metadata column holding phi_j


def is_binary(values) -> bool:
    """Whether every observed score is 0 or 1."""
    v = np.asarray(values, float)
    v = v[np.isfinite(v)]
    return bool(np.all((v == 0.0) | (v == 1.0)))


def item_dispersion(y, p, log_prior, lo=0.05, hi=1.0, chunk=128):
    """phi_j: sum_s (y_sj - f_sj)^2 / sum_s f_sj (1 - f_sj) over the subjects s (``y`` with NaN
    for no answer), f_sj the posterior-mean probability of item j given subject s's OTHER
    answers (``p`` the (nodes, items) probabilities on the grid, ``log_prior`` the nodes' log
    weights). Clipped to [lo, hi]; items in chunks of ``chunk`` (memory subjects x chunk x
    nodes)."""
    from scipy.special import logsumexp

    y = np.asarray(y, float)
    p = np.clip(np.asarray(p, float), 1e-9, 1 - 1e-9)
    log_p, log_q = np.log(p), np.log1p(-p)
    seen = np.isfinite(y)
    yv = np.nan_to_num(y)
    lp = (np.where(seen, yv, 0.0) @ log_p.T + np.where(seen, 1.0 - yv, 0.0) @ log_q.T
          + np.asarray(log_prior)[None, :])                               # (S, nodes)
    num = np.zeros(y.shape[1])
    den = np.zeros(y.shape[1])
    for c in range(0, y.shape[1], int(chunk)):
        j = slice(c, c + int(chunk))
        own = (yv[:, j, None] * log_p[None, :, j].transpose(0, 2, 1)
               + (1.0 - yv[:, j, None]) * log_q[None, :, j].transpose(0, 2, 1))
        rest = lp[:, None, :] - np.where(seen[:, j, None], own, 0.0)      # (S, chunk, nodes)
        w = np.exp(rest - logsumexp(rest, axis=2, keepdims=True))
        f = np.einsum("sjq,qj->sj", w, p[:, j])
        num[j] = np.where(seen[:, j], (yv[:, j] - f) ** 2, 0.0).sum(0)
        den[j] = np.where(seen[:, j], f * (1.0 - f), 0.0).sum(0)
    return np.clip(num / np.maximum(den, 1e-12), lo, hi)


def estimated_dispersion(values, bank, quadpts: int | None = None, theta_range=None):
    """phi_j of every item of ``bank`` from the scores ``values`` (subjects x the bank's items,
    NaN for no answer) on the calibration's grid (:func:`item_dispersion`), or None when every
    score is 0 or 1 (a coin: nothing to estimate)."""
    from .defaults import QUADPTS, THETA_RANGE
    from .quadrature import normal_quadrature

    if is_binary(values):
        return None
    quad = normal_quadrature(int(QUADPTS if quadpts is None else quadpts),
                             THETA_RANGE if theta_range is None else theta_range)
    return item_dispersion(values, bank.probability(quad.nodes), quad.log_weights)


def bank_dispersion(bank):
    """phi_j of every item from the bank's metadata column ``dispersion``, or None: no such
    column, or every value exactly 1 (0/1 answers: the Bernoulli likelihood). Raises
    :class:`~atlascat.errors.BankError` unless every value is a positive finite number."""
    meta = getattr(bank, "metadata", None)
    if meta is None or COLUMN not in meta.columns:
        return None
    import pandas as pd

    from ..errors import BankError

    phi = pd.to_numeric(meta[COLUMN], errors="coerce").to_numpy(float)
    if not np.all(np.isfinite(phi) & (phi > 0)):
        raise BankError(f"bank column {COLUMN!r} must hold a positive number for every item "
                        "(each item's dispersion phi_j; 1 for 0/1 answers)")
    return None if np.all(phi == 1.0) else phi


def with_dispersion(bank, phi):
    """``bank`` with each item's dispersion phi_j in its metadata column ``dispersion`` (its
    other metadata kept)."""
    import pandas as pd

    from .bank import ItemBank

    meta = (pd.DataFrame(index=range(len(bank.item_ids))) if bank.metadata is None
            else bank.metadata.reset_index(drop=True).copy())
    meta[COLUMN] = np.asarray(phi, float)
    return ItemBank(bank.item_ids, *bank.params, model=bank.model, metadata=meta)


def without_dispersion(bank):
    """The bank without its ``dispersion`` column (the same object when it has none)."""
    meta = getattr(bank, "metadata", None)
    if meta is None or COLUMN not in meta.columns:
        return bank
    from .bank import ItemBank

    rest = meta.drop(columns=[COLUMN])
    return ItemBank(bank.item_ids, *bank.params, model=bank.model,
                    metadata=rest.reset_index(drop=True) if len(rest.columns) else None)


def draw_scores(p, phi, u):
    """Simulated scores in [0, 1] with mean ``p`` and variance ``phi`` p (1 - p): the answers a
    model at theta gives on a bank whose items have dispersion phi_j (``p`` = P_j(theta)), one
    uniform(0, 1) ``u`` per answer (all three broadcast).

    phi_j < 1 (continuous scores): the Beta(p k, (1 - p) k) quantile at ``u``, k = 1 / phi - 1,
    whose mean is p and variance p (1 - p) / (k + 1) = phi p (1 - p), the variance function of
    the extended quasi-likelihood the bank is scored by (McCullagh and Nelder 1989, section
    9.6; the beta regression of Ferrari and Cribari-Neto 2004, J. Applied Statistics 31,
    799-815, precision k); drawn by inversion, so one uniform gives one score and a given
    uniform always the same score. ``phi`` None or phi_j >= 1 (0/1 answers, the Bernoulli
    likelihood): 1 if u < p else 0, the limit of the Beta as k -> 0. A score on a metric's
    own scale [lo, hi] is lo + (hi - lo) y."""
    p, u = np.asarray(p, float), np.asarray(u, float)
    coin = (u < p).astype(float)
    if phi is None:
        return coin
    phi = np.asarray(phi, float)
    k = np.broadcast_to(1.0 / np.minimum(phi, 1.0) - 1.0, np.broadcast(p, u, phi).shape)
    p, u, coin = np.broadcast_arrays(p, u, coin)
    inner = (k > 0) & (p > 0) & (p < 1)
    if not inner.any():
        return np.array(coin, float)
    from scipy.special import betaincinv   # lazy: only continuous scores need it

    out = np.array(coin, float)
    out[inner] = betaincinv(p[inner] * k[inner], (1.0 - p[inner]) * k[inner], u[inner])
    return np.clip(out, 0.0, 1.0)
