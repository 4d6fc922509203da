"""Ordinal item response functions: the graded response model and the generalized partial
credit model, in mirt's slope-intercept form.

An item j has K_j ordered categories k = 0..K_j-1 and the parameters ``a1, d1..d(K_j-1)``
(mirt's ``coef(mod, simplify=TRUE)`` columns). Banks with items of different K are stored as
one (n_items, K_max) parameter array ``[a, d1, ..., d(K_max-1)]`` padded with NaN.

Graded response model (Samejima, 1969; mirt ``itemtype="graded"``)::

    P(X >= k | theta) = P*_k = sigma(a theta + d_k),   k = 1..K-1,   d_1 > d_2 > ... > d_{K-1}
    P(X = k) = P*_k - P*_{k+1},   P*_0 = 1,  P*_K = 0.

Generalized partial credit model (Muraki, 1992; mirt ``itemtype="gpcm"``, scoring ak_k = k)::

    P(X = k | theta) = exp(k a theta + d_k) / sum_l exp(l a theta + d_l),   d_0 = 0.

With two categories both are the 2PL, P(X = 1) = sigma(a theta + d_1).

Contract for the generic machinery (standard errors, AIC/BIC, anova)
--------------------------------------------------------------------
:func:`log_prob` ``(model, params (n_items, n_par), nodes (n_nodes,)) -> (n_items, n_nodes,
K_max)``: log category probabilities at the nodes, ``-inf`` in the categories an item does not
have (its NaN parameters); :func:`param_names` gives each item's names in mirt's order
(``a1, d1..dk``). ``model`` is ``"graded"`` or ``"gpcm"`` (one string, or one per item).
:func:`jacobian` gives dP/d(params) for the M-step, :func:`dlog_prob` d log P / d(params) as
(n_items, n_par, n_nodes, K_max) for the information matrices.

Numerics: graded category probabilities are differences of adjacent cumulative logistics; they
are computed as ``sigma(z_k) - sigma(z_{k+1})`` = ``sigma(z_k) sigma(-z_{k+1}) (1 - exp(
z_{k+1} - z_k))`` in log space (``log_expit`` and ``log1p(-exp(.))``), so that a narrow
category keeps its relative precision; the GPCM is a softmax taken with its maximum subtracted.

References
----------
Samejima, F. (1969). Estimation of latent ability using a response pattern of graded scores.
Psychometrika Monograph Supplement 17.
Muraki, E. (1992). A generalized partial credit model: application of an EM algorithm.
Applied Psychological Measurement 16, 159-176.
Chalmers, R. P. (2012). mirt: A multidimensional item response theory package for the R
environment. Journal of Statistical Software 48(6).
"""
from __future__ import annotations

import numpy as np

from ..errors import ConfigError
from .special import expit, log_expit

__all__ = ["ORDINAL_MODELS", "is_poly_frame", "n_categories", "param_names", "log_prob", "prob", "jacobian",
           "item_information", "test_information", "expected_score", "dprob_dtheta",
           "d2prob_dtheta2", "sample", "category_at",
           "dlog_prob", "thresholds", "intercepts"]

ORDINAL_MODELS = ("graded", "gpcm")


def _models(model, n_items: int) -> np.ndarray:
    """Per-item boolean: True where the item is a GPCM item (model given once or per item)."""
    m = np.broadcast_to(np.asarray(model, dtype=object), (n_items,))
    bad = [v for v in set(m.tolist()) if v not in ORDINAL_MODELS]
    if bad:
        raise ConfigError(f"unknown ordinal model {bad[0]!r}; choose graded or gpcm")
    return m == "gpcm"


def n_categories(params) -> np.ndarray:
    """Number of categories per item: 1 + the number of non-NaN intercepts."""
    params = np.atleast_2d(np.asarray(params, dtype=float))
    return 1 + np.sum(~np.isnan(params[:, 1:]), axis=1)


def thresholds(model, params) -> np.ndarray:
    """The threshold form ``b`` (n_items, K_max - 1) of mirt's ``[a1, d1..]``, as mirt's
    ``coef(IRTpars = TRUE)``: graded b_k = -d_k / a (P(X >= k) = 1/2 at theta = b_k); GPCM
    step thresholds b_k = -(d_k - d_(k-1)) / a with d_0 = 0, i.e. P(X = k) proportional to
    exp(sum_(v <= k) a (theta - b_v)) (Muraki, 1992). NaN beyond an item's categories."""
    params = np.atleast_2d(np.asarray(params, dtype=float))
    a, d = params[:, :1], params[:, 1:]
    gp = _models(model, len(a))
    step = np.diff(np.column_stack([np.zeros(len(a)), d]), axis=1)
    return -np.where(gp[:, None], step, d) / a


def intercepts(model, a, b) -> np.ndarray:
    """mirt's intercepts ``d`` (n_items, K_max - 1) from the threshold form (the inverse of
    :func:`thresholds`): graded d_k = -a b_k, GPCM d_k = -a sum_(v <= k) b_v."""
    a = np.asarray(a, dtype=float).reshape(-1, 1)
    b = np.atleast_2d(np.asarray(b, dtype=float))
    gp = _models(model, len(a))
    return np.where(gp[:, None], -a * np.cumsum(b, axis=1), -a * b)


def param_names(params) -> list[list[str]]:
    """Each item's parameter names in mirt's order: ``a1, d1..d(K-1)``."""
    return [["a1"] + [f"d{k}" for k in range(1, int(K))] for K in n_categories(params)]


def _z(params, nodes):
    """(a, d padded with NaN, K_max): z-independent pieces of both models."""
    params = np.atleast_2d(np.asarray(params, dtype=float))
    a = params[:, 0]
    d = params[:, 1:]
    return a, d, params.shape[1] + 1


def _graded_log(a, d, x):
    """log P(X = k) of the graded model, (n_items, n_nodes, K_max); -inf beyond an item's K."""
    n, km1 = d.shape
    z = a[:, None, None] * x[None, :, None] + d[:, None, :]              # (m, q, K-1)
    z = np.where(np.isnan(z), -np.inf, z)                               # P*_k = 0 beyond K
    inf = np.full(z.shape[:2] + (1,), np.inf)
    zl = np.concatenate([inf, z], axis=2)                                # z_k, k = 0..K-1
    zu = np.concatenate([z, -inf], axis=2)                               # z_{k+1}
    with np.errstate(invalid="ignore", divide="ignore"):
        # sigma(zl) - sigma(zu) = sigma(zl) sigma(-zu) (1 - exp(zu - zl)), zu <= zl
        gap = zu - zl
        gap = np.where(np.isnan(gap), -np.inf, gap)                     # inf - inf: P* = 1, 0
        out = log_expit(zl) + log_expit(-zu) + np.log1p(-np.exp(np.minimum(gap, 0.0)))
        out = np.where(gap > 0, np.nan, out)                             # disordered thresholds
    out[np.isneginf(zl)] = -np.inf
    return out


def _gpcm_log(a, d, x):
    """log P(X = k) of the GPCM, (n_items, n_nodes, K_max); -inf beyond an item's K."""
    n, km1 = d.shape
    k = np.arange(km1 + 1, dtype=float)
    dd = np.concatenate([np.zeros((n, 1)), d], axis=1)                   # d_0 = 0
    z = k[None, None, :] * (a[:, None, None] * x[None, :, None]) + dd[:, None, :]
    z = np.where(np.isnan(z), -np.inf, z)
    zmax = np.max(z, axis=2, keepdims=True)
    return z - (zmax + np.log(np.sum(np.exp(z - zmax), axis=2, keepdims=True)))


def log_prob(model, params, nodes) -> np.ndarray:
    """log P(X_j = k | theta = x_q): shape (n_items, n_nodes, K_max), -inf for absent categories.

    ``params``: (n_items, K_max) ``[a1, d1..d(K_max-1)]`` (NaN-padded); ``nodes``: (n_nodes,).
    A graded item with disordered intercepts (d_k <= d_{k+1}) has NaN log-probabilities.
    """
    a, d, _ = _z(params, None)
    x = np.atleast_1d(np.asarray(nodes, dtype=float))
    gp = _models(model, len(a))
    if gp.all():
        return _gpcm_log(a, d, x)
    if not gp.any():
        return _graded_log(a, d, x)
    out = np.empty((len(a), x.size, d.shape[1] + 1))
    out[gp] = _gpcm_log(a[gp], d[gp], x)
    out[~gp] = _graded_log(a[~gp], d[~gp], x)
    return out


def prob(model, params, nodes) -> np.ndarray:
    """Category probabilities, (n_items, n_nodes, K_max); 0 for absent categories."""
    return np.exp(log_prob(model, params, nodes))


def _graded_jac(a, d, x, p):
    km1 = d.shape[1]
    z = a[:, None, None] * x[None, :, None] + d[:, None, :]
    s = expit(np.where(np.isnan(z), -np.inf, z))
    w = s * (1.0 - s)                                                   # dP*_k / dz_k, (m, q, K-1)
    zero = np.zeros(w.shape[:2] + (1,))
    wl = np.concatenate([zero, w], axis=2)                              # W_k, k = 0..K-1
    wu = np.concatenate([w, zero], axis=2)                              # W_{k+1}
    J = np.zeros(p.shape + (km1 + 1,))
    J[..., 0] = (wl - wu) * x[None, :, None]                            # dP_k / da
    for j in range(km1):                                                # dP_k / dd_{j+1}
        J[:, :, j + 1, j + 1] = w[:, :, j]
        J[:, :, j, j + 1] = -w[:, :, j]
    return J


def _gpcm_jac(a, d, x, p):
    km1 = d.shape[1]
    k = np.arange(km1 + 1, dtype=float)
    ek = np.sum(p * k, axis=2, keepdims=True)                           # E[k | x]
    J = np.empty(p.shape + (km1 + 1,))
    J[..., 0] = p * (k - ek) * x[None, :, None]                         # dP_k / da
    # dP_k / dd_l = P_k (delta_kl - P_l), l = 1..K-1
    J[..., 1:] = -p[..., :, None] * p[..., None, 1:]
    idx = np.arange(1, km1 + 1)
    J[:, :, idx, idx] += p[:, :, 1:]
    return J


def jacobian(model, params, nodes, p=None) -> np.ndarray:
    """dP(X_j = k | x_q) / d(param_l): shape (n_items, n_nodes, K_max, K_max), zero in the rows
    and columns of absent categories and parameters. ``p``: :func:`prob`, when at hand."""
    a, d, _ = _z(params, None)
    x = np.atleast_1d(np.asarray(nodes, dtype=float))
    p = prob(model, params, x) if p is None else p
    p = np.nan_to_num(p)
    gp = _models(model, len(a))
    dz = np.where(np.isnan(d), 0.0, d)
    J = np.empty(p.shape + (d.shape[1] + 1,))
    if gp.any():
        J[gp] = _gpcm_jac(a[gp], dz[gp], x, p[gp])
    if (~gp).any():
        J[~gp] = _graded_jac(a[~gp], d[~gp], x, p[~gp])
    absent = np.isnan(d)
    J[:, :, :, 1:][np.broadcast_to(absent[:, None, None, :], J[..., 1:].shape)] = 0.0
    return J


def dlog_prob(model, params, nodes) -> np.ndarray:
    """d log P_jk(x_q) / d(param_l): shape (n_items, K_max, n_nodes, K_max) (parameter axis
    second, as the generic information code takes it), 0 for absent categories / parameters.

    Exact, in closed form. Graded: d log P_k / d z_k = W_k / P_k and d log P_k / d z_(k+1) =
    -W_(k+1) / P_k with W_k = sigma(z_k) sigma(-z_k), each ratio taken as exp(log W - log P)
    so that it keeps its precision where P or 1 - P* underflows; z_k = a x + d_k, so
    d / d a1 = x (W_k - W_(k+1)) / P_k. GPCM: d log P_k / d a1 = x (k - E[k | x]) =
    x sum_l (k - l) P_l and d log P_k / d d_l = [k = l] - P_l."""
    a, d, _ = _z(params, None)
    x = np.atleast_1d(np.asarray(nodes, dtype=float))
    gp = _models(model, len(a))
    out = np.zeros((len(a), d.shape[1] + 1, x.size, d.shape[1] + 1))
    if gp.any():
        out[gp] = _gpcm_dlog(a[gp], d[gp], x)
    if (~gp).any():
        out[~gp] = _graded_dlog(a[~gp], d[~gp], x)
    return out


def _graded_dlog(a, d, x):
    lp = _graded_log(a, d, x)                                           # (m, q, K)
    z = a[:, None, None] * x[None, :, None] + d[:, None, :]             # (m, q, K-1)
    lw = log_expit(z) + log_expit(-z)                                   # log W_k
    lw = np.where(np.isnan(lw), -np.inf, lw)                            # absent: W = 0
    ninf = np.full(lw.shape[:2] + (1,), -np.inf)
    ok = np.isfinite(lp)
    lp = np.where(ok, lp, 0.0)
    rl = np.where(ok, np.exp(np.concatenate([ninf, lw], axis=2) - lp), 0.0)  # W_k / P_k
    ru = np.where(ok, np.exp(np.concatenate([lw, ninf], axis=2) - lp), 0.0)  # W_(k+1) / P_k
    out = np.zeros((len(a), d.shape[1] + 1) + lp.shape[1:])
    out[:, 0] = x[None, :, None] * (rl - ru)
    for l in range(1, d.shape[1] + 1):                                  # d_l moves z_l
        out[:, l, :, l] = rl[:, :, l]
        out[:, l, :, l - 1] = -ru[:, :, l - 1]
    return out


def _gpcm_dlog(a, d, x):
    lp = _gpcm_log(a, d, x)                                             # (m, q, K)
    ok = np.isfinite(lp)
    p = np.where(ok, np.exp(np.where(ok, lp, 0.0)), 0.0)
    k = np.arange(lp.shape[2], dtype=float)
    out = np.empty((len(a), lp.shape[2]) + lp.shape[1:])
    # k - E[k] as sum_l (k - l) P_l: no cancellation in the extreme categories' tails
    out[:, 0] = x[None, :, None] * (p @ (k[:, None] - k[None, :]).T)
    for l in range(1, lp.shape[2]):
        out[:, l] = (k == l) - p[:, :, l:l + 1]
    return np.where(ok[:, None], out, 0.0)


def dprob_dtheta(model, params, nodes, p=None) -> np.ndarray:
    """dP(X_j = k | theta) / dtheta at the nodes, (n_items, n_nodes, K_max).

    Graded: a (W_k - W_{k+1}) with W = P*(1 - P*); GPCM: a P_k (k - E[k | theta]).
    ``p``: :func:`prob` at the same nodes, when at hand.
    """
    a, d, _ = _z(params, None)
    x = np.atleast_1d(np.asarray(nodes, dtype=float))
    p = np.nan_to_num(prob(model, params, x) if p is None else p)
    gp = _models(model, len(a))
    out = np.empty_like(p)
    if gp.any():
        k = np.arange(p.shape[2], dtype=float)
        pg = p[gp]
        out[gp] = a[gp, None, None] * pg * (k - np.sum(pg * k, axis=2, keepdims=True))
    if (~gp).any():
        ag, dg = a[~gp], d[~gp]
        z = ag[:, None, None] * x[None, :, None] + dg[:, None, :]
        s = expit(np.where(np.isnan(z), -np.inf, z))
        w = s * (1.0 - s)
        zero = np.zeros(w.shape[:2] + (1,))
        out[~gp] = ag[:, None, None] * (np.concatenate([zero, w], axis=2)
                                        - np.concatenate([w, zero], axis=2))
    return out


def d2prob_dtheta2(model, params, nodes, p=None) -> np.ndarray:
    """d2P(X_j = k | theta) / dtheta2 at the nodes, (n_items, n_nodes, K_max).

    Graded: a^2 (V_k - V_{k+1}) with V = P*(1 - P*)(1 - 2 P*) (V_0 = V_K = 0); GPCM:
    a^2 P_k ((k - E)^2 - Var), E and Var the mean and variance of k given theta.
    ``p``: :func:`prob` at the same nodes, when at hand (GPCM items use it).
    """
    a, d, _ = _z(params, None)
    x = np.atleast_1d(np.asarray(nodes, dtype=float))
    gp = _models(model, len(a))
    shape = (len(a), x.size, d.shape[1] + 1)
    out = np.empty(shape)
    if gp.any():
        pg = np.nan_to_num(prob(model, params, x) if p is None else p)[gp]
        k = np.arange(shape[2], dtype=float)
        mean = np.sum(pg * k, axis=2, keepdims=True)
        var = np.sum(pg * k * k, axis=2, keepdims=True) - mean * mean
        out[gp] = a[gp, None, None] ** 2 * pg * ((k - mean) ** 2 - var)
    if (~gp).any():
        ag, dg = a[~gp], d[~gp]
        z = ag[:, None, None] * x[None, :, None] + dg[:, None, :]
        s = expit(np.where(np.isnan(z), -np.inf, z))
        v = s * (1.0 - s) * (1.0 - 2.0 * s)
        zero = np.zeros(v.shape[:2] + (1,))
        out[~gp] = ag[:, None, None] ** 2 * (np.concatenate([zero, v], axis=2)
                                             - np.concatenate([v, zero], axis=2))
    return out


def item_information(model, params, theta) -> np.ndarray:
    """Fisher information of every item at every theta, shape ``theta.shape + (n_items,)``.

    I_j(theta) = sum_k P'_jk(theta)^2 / P_jk(theta) (Samejima, 1969); for the GPCM this equals
    a^2 Var(k | theta) (Muraki, 1993). Categories with P = 0 (absent) contribute nothing.
    """
    theta = np.asarray(theta, dtype=float)
    x = theta.reshape(-1)
    p = prob(model, params, x)
    dp = dprob_dtheta(model, params, x, p)
    with np.errstate(divide="ignore", invalid="ignore"):
        term = np.where(p > 0, dp * dp / np.where(p > 0, p, 1.0), 0.0)
    info = term.sum(axis=2).T                                           # (n_theta, n_items)
    return info.reshape(theta.shape + (info.shape[1],))


def test_information(model, params, theta) -> np.ndarray:
    """Sum of the item information over items; shape ``theta.shape``."""
    return item_information(model, params, theta).sum(axis=-1)


def expected_score(model, params, theta) -> np.ndarray:
    """Expected category index sum_k k P_jk(theta) per item, ``theta.shape + (n_items,)``."""
    theta = np.asarray(theta, dtype=float)
    x = theta.reshape(-1)
    p = np.nan_to_num(prob(model, params, x))
    e = np.sum(p * np.arange(p.shape[2]), axis=2).T
    return e.reshape(theta.shape + (e.shape[1],))


def sample(model, params, theta, rng: np.random.Generator) -> np.ndarray:
    """Draw a category for every (theta_i, item j): (n_theta, n_items) integer array, by
    inverting each item's cumulative category distribution at one uniform draw. ``rng``: a
    Generator or a seed."""
    from ..validation import as_generator

    rng = as_generator(rng)
    p = np.nan_to_num(prob(model, params, np.atleast_1d(theta)))            # (m, n, K)
    return category_at(p, rng.random(p.shape[:2]), n_categories(params)[:, None]).T


def category_at(p, u, n_cat) -> np.ndarray:
    """The category drawn at uniform ``u`` from category probabilities ``p`` (last axis; NaN
    or 0 for absent categories): the first k with P(X <= k) >= u, by inversion, capped at
    ``n_cat`` - 1 (rounding); ``p`` of shape ``u.shape + (K,)``, ``n_cat`` broadcast to
    ``u.shape``. What :func:`sample`, the ordinal adaptive test's drawn answers and the live
    ``simulate:`` subject on a graded / gpcm bank draw."""
    cum = np.cumsum(np.nan_to_num(p), axis=-1)
    return np.minimum(np.sum(cum < np.asarray(u, float)[..., None], axis=-1),
                      np.asarray(n_cat) - 1)


def is_poly_frame(df) -> bool:
    """True when a bank frame holds ordinal items (columns d1 or b1, or a model column naming
    graded / gpcm / pcm)."""
    cols = {str(c) for c in df.columns}
    if "d1" in cols or "b1" in cols:
        return True
    return "model" in cols and df["model"].astype(str).str.lower().isin(
        (*ORDINAL_MODELS, "pcm")).any()
