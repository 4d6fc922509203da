"""ML, MAP and WLE on a device: the solver of :mod:`atlascat.irt.ability` in array-API form.

The same estimating functions and the same global, safeguarded root search as the CPU solver
(:func:`atlascat.irt.ability._solve`):

1. g and the objective (log L; log L + log prior; log L + log I / 2) of every subject at every
   node of a grid over ``bounds``, by matrix products;
2. every downward sign change of g brackets a local maximum; with the bounds where g points out
   of the interval, these are the candidates;
3. Illinois regula falsi on every candidate bracket until the bracket or the Newton step |g| / I
   is below ``xtol``; the candidate with the largest refined objective is kept.

Every subject iterates under a mask (no compaction, so nothing is read back but one flag per
iteration: whether any subject is still moving); the score, information and Warm terms are
taken in blocks of subjects so that the (subjects x items) temporaries stay within a few
hundred MB. Standard errors and flags are set on the host by the CPU solver's own rules
(:func:`atlascat.irt.abilityresult.finish`). Thetas equal the CPU solver's to its tolerance (tested
under ``array_api_strict``).
"""
from __future__ import annotations

import numpy as np

from ..errors import ConfigError
from . import arrays, models
from .abilityresult import finish
from .bank import ItemBank

__all__ = ["solve_on_device", "estimating_function", "search_grid"]

_Z_CLIP = 300.0
_BLOCK_CELLS = 1 << 25        # subjects x items per block of the terms at one theta each


def _pq(theta, a, b, c, u, xp):
    """(P, Q, sigma(z), 1 - sigma(z)) for every (theta, item), z = a (theta - b) clipped:
    P = c + (u - c) sigma(z), Q = (1 - u) + (u - c) (1 - sigma(z)), the latter without
    forming 1 - P (exact near P = 1)."""
    z = xp.clip((theta[..., None] - b) * a, -_Z_CLIP, _Z_CLIP)
    e = xp.exp(-z)
    s = 1.0 / (e + 1.0)
    t = e * s
    rng = u - c
    return c + rng * s, (1.0 - u) + rng * t, s, t


def _irf(theta, a, b, c, u, xp):
    """(P, P', r = P'/(PQ), P''/P') for every (theta, item): the CPU solver's irf_pieces."""
    p, q, s, t = _pq(theta, a, b, c, u, xp)
    dp = (a * (u - c)) * s * t
    return p, dp, dp / (p * q), (t - s) * a


def _by_blocks(n, m, block, xp):
    """``block(slice)`` (a tuple of per-subject vectors) over blocks of at most
    ``_BLOCK_CELLS`` subjects x items, the pieces joined: one tuple of (n,) vectors."""
    step = max(1, _BLOCK_CELLS // max(m, 1))
    parts = [block(slice(start, min(n, start + step))) for start in range(0, n, step)]
    return tuple(arrays.concat(list(v), xp) if len(v) > 1 else v[0] for v in zip(*parts))


def _terms_grid(nodes, y1, y0, obs, params, xp):
    """S, I, J and log L of every subject at every node: (n_subjects, n_nodes) each."""
    p, dp, r, curv = _irf(nodes, *params, xp)                      # (G, m)
    info = dp * r
    s = y1 @ (dp / p).T - y0 @ (p * r).T
    return s, obs @ info.T, obs @ (info * curv).T


def _terms_at(theta, y1, y0, obs, params, xp):
    """S, I, J at one theta per subject, in blocks of subjects."""
    def block(sl):
        p, dp, r, curv = _irf(theta[sl], *params, xp)
        s = xp.sum(y1[sl, ...] * (dp / p) - y0[sl, ...] * (p * r), axis=1)
        info = dp * r * obs[sl, ...]
        return s, xp.sum(info, axis=1), xp.sum(info * curv, axis=1)

    return _by_blocks(*y1.shape, block, xp)


def estimating_function(method, s, i, j, loglik, theta, prior_mean, prior_sd, xp=np):
    """Estimating function g and the objective whose local maxima are g's downward roots, in
    ``xp``: ML (S, log L), MAP (S - (theta - mu) / sigma^2, log L + log prior), WLE
    (S + J / (2 I), log L + log I / 2), with I kept >= 1e-300."""
    if method == "ml":
        return s, loglik
    if method == "map":
        prec = 1.0 / prior_sd**2
        return s - (theta - prior_mean) * prec, loglik - 0.5 * (theta - prior_mean) ** 2 * prec
    safe_i = xp.clip(i, 1e-300, None)
    return s + j / (2.0 * safe_i), loglik + 0.5 * xp.log(safe_i)


def _pick(mat, col, xp):
    """mat[i, col[i]] for every row i."""
    n, g = mat.shape
    rows = xp.arange(n, dtype=col.dtype, device=arrays.device_of(col))
    return xp.take(xp.reshape(mat, (-1,)), rows * g + col)


def _on_device(y, device):
    """(y1, y0, observed) as float64 arrays of the device's namespace, and the namespace."""
    if arrays.is_resident(y):
        xp, dev = arrays.namespace(y), arrays.device_of(y)
        obs_b = xp.logical_not(xp.isnan(y))
        y1 = xp.where(obs_b, arrays.astype(y, xp.float64, xp), xp.zeros_like(y, dtype=xp.float64))
    else:
        xp, dev = arrays.backend_for(device)
        yh = np.asarray(y, dtype=float)
        obs_h = ~np.isnan(yh)
        y1 = arrays.asarray(np.where(obs_h, yh, 0.0), xp, "float64", dev)
        obs_b = arrays.asarray(obs_h, xp, xp.bool, dev)
    obs = arrays.astype(obs_b, xp.float64, xp)
    return xp, dev, y1, obs - y1, obs


def solve_on_device(y, bank: ItemBank, method: str, *, prior_mean=0.0, prior_sd=1.0,
                    bounds=(-10.0, 10.0), grid_step=0.25, xtol=1e-9, max_iter=100,
                    device="cuda"):
    """ML / MAP / WLE of every subject on ``device`` (or where the tensor ``y`` lies).

    ``y``: (subjects, bank items) scores in [0, 1] with NaN = missing, a NumPy array (moved to
    ``device``) or a tensor on its device. Returns an :class:`~atlascat.irt.ability.AbilityResult`
    (NumPy arrays), equal to the CPU solver's to ``xtol``.
    """
    with np.errstate(divide="ignore", invalid="ignore"):   # NumPy-backed namespaces
        return _solve(y, bank, method, prior_mean, prior_sd, bounds, grid_step, xtol, max_iter,
                      device)


def search_grid(bounds, grid_step) -> np.ndarray:
    """The nodes over ``bounds`` at most ``grid_step`` apart (at least 3) on which the root
    search evaluates g first; one line for bounds or a step that make no grid."""
    lo, hi = float(bounds[0]), float(bounds[1])
    if not hi > lo:
        raise ConfigError(f"bounds must satisfy low < high, got {bounds}")
    if not grid_step > 0:
        raise ConfigError(f"grid_step must be positive, got {grid_step}")
    return np.linspace(lo, hi, max(int(np.ceil((hi - lo) / grid_step)) + 1, 3))


def _loglik_at(theta, y1, y0, params, xp):
    """log L of every subject at its own theta, in blocks of subjects (:func:`_terms_at`'s
    P and Q)."""
    def block(sl):
        p, q, _, _ = _pq(theta[sl], *params, xp)
        return (xp.sum(y1[sl, ...] * xp.log(p) + y0[sl, ...] * xp.log(q), axis=1),)

    return _by_blocks(*y1.shape, block, xp)[0]


def _illinois(method, k, active, nodes, g, y1, y0, obs, params, prior_mean, prior_sd, xtol,
              max_iter, xp):
    """Illinois regula falsi on the brackets [nodes[k], nodes[k + 1]] of the ``active`` subjects,
    under a mask; the others get nodes[k]."""
    a_x, b_x = xp.take(nodes, k), xp.take(nodes, k + 1)
    a_g, b_g = _pick(g, k, xp), _pick(g, k + 1, xp)
    side = xp.zeros_like(a_x)
    theta = a_x
    slope_add = 1.0 / prior_sd**2 if method == "map" else 0.0
    for _ in range(max_iter):
        if not bool(xp.any(active)):
            break
        x = b_x - b_g * (b_x - a_x) / (b_g - a_g)
        bad = xp.logical_or(xp.logical_not(xp.isfinite(x)),
                            xp.logical_or(x <= xp.minimum(a_x, b_x), x >= xp.maximum(a_x, b_x)))
        x = xp.where(bad, 0.5 * (a_x + b_x), x)
        x = xp.where(active, x, a_x)              # finished subjects: any finite point
        s_x, i_x, j_x = _terms_at(x, y1, y0, obs, params, xp)
        g_x, _ = estimating_function(method, s_x, i_x, j_x, 0.0, x, prior_mean, prior_sd, xp)
        left = g_x > 0
        b_g = xp.where(xp.logical_and(left, side == 1), 0.5 * b_g, b_g)
        a_g = xp.where(xp.logical_and(xp.logical_not(left), side == -1), 0.5 * a_g, a_g)
        a_x, a_g, b_x, b_g = (xp.where(left, x, a_x), xp.where(left, g_x, a_g),
                              xp.where(left, b_x, x), xp.where(left, b_g, g_x))
        side = xp.where(left, xp.ones_like(side), -xp.ones_like(side))
        at_x = xp.abs(g_x) <= xtol * (i_x + slope_add)
        done = xp.logical_and(active, xp.logical_or(
            xp.abs(b_x - a_x) <= xtol * (1.0 + xp.abs(x)), at_x))
        theta = xp.where(done, xp.where(at_x, x, 0.5 * (a_x + b_x)), theta)
        active = xp.logical_and(active, xp.logical_not(done))
    return xp.where(active, 0.5 * (a_x + b_x), theta)   # not converged: the bracket's middle


def _solve(y, bank, method, prior_mean, prior_sd, bounds, grid_step, xtol, max_iter, device):
    nodes_h = search_grid(bounds, grid_step)
    lo, hi = float(nodes_h[0]), float(nodes_h[-1])
    xp, dev, y1, y0, obs = _on_device(y, device)

    def put(v):
        return arrays.asarray(np.ascontiguousarray(v, dtype=float), xp, "float64", dev)

    params = tuple(put(v) for v in bank.params)

    # 1. the grid
    G = nodes_h.size
    nodes = put(nodes_h)
    s_g, i_g, j_g = _terms_grid(nodes, y1, y0, obs, params, xp)
    log_p, log_q = models.log_probability(nodes_h, *bank.params)
    loglik = y1 @ put(log_p).T + y0 @ put(log_q).T
    g, obj = estimating_function(method, s_g, i_g, j_g, loglik, nodes[None, :], prior_mean, prior_sd, xp)

    # 2. the candidates: downward brackets, and the bounds where g points outward
    ninf = xp.full_like(obj[:, :1], -xp.inf)
    down = xp.logical_and(g[:, :-1] > 0, g[:, 1:] <= 0)
    inner = xp.where(down, xp.maximum(obj[:, :-1], obj[:, 1:]), xp.full_like(down, -xp.inf,
                                                                             dtype=obj.dtype))
    first = xp.where(g[:, :1] < 0, obj[:, :1], ninf)
    last = xp.where(g[:, -1:] > 0, obj[:, -1:], ninf)
    score = arrays.concat([first, inner, last], xp, axis=1)
    none = xp.logical_not(xp.any(xp.isfinite(score), axis=1))[:, None]
    low_wins = obj[:, :1] >= obj[:, -1:]
    zero = xp.zeros_like(ninf)
    score = arrays.concat([xp.where(none, xp.where(low_wins, zero, ninf), score[:, :1]),
                           score[:, 1:-1],
                           xp.where(none, xp.where(low_wins, ninf, zero), score[:, -1:])], xp,
                          axis=1)
    # 3. every candidate, best grid value first: refine the interior brackets (Illinois regula
    #    falsi under a mask) and keep each subject's largest refined objective
    order = xp.argsort(score, axis=1, descending=True)
    n_cand = xp.sum(arrays.astype(xp.isfinite(score), xp.int64, xp), axis=1)
    theta = xp.full_like(obj[:, 0], lo)
    best_obj = xp.full_like(obj[:, 0], -xp.inf)
    at_low = at_high = xp.zeros_like(obj[:, 0], dtype=xp.bool)
    for rank in range(int(xp.max(n_cand))):
        col = order[:, rank]
        has = rank < n_cand
        low, high = xp.logical_and(has, col == 0), xp.logical_and(has, col == G)
        active = xp.logical_and(has, xp.logical_not(xp.logical_or(col == 0, col == G)))
        x = _illinois(method, xp.clip(col - 1, 0, G - 2), active, nodes, g, y1, y0, obs, params,
                      prior_mean, prior_sd, xtol, max_iter, xp)
        x = xp.where(low, xp.full_like(x, lo), xp.where(high, xp.full_like(x, hi), x))
        s_x, i_x, j_x = _terms_at(x, y1, y0, obs, params, xp)
        _, obj_x = estimating_function(method, s_x, i_x, j_x, _loglik_at(x, y1, y0, params, xp),
                                       x, prior_mean, prior_sd, xp)
        bound = xp.where(low, obj[:, 0], obj[:, G - 1])
        obj_x = xp.where(xp.logical_or(low, high), bound, obj_x)
        obj_x = xp.where(xp.isnan(obj_x), xp.full_like(obj_x, -xp.inf), obj_x)
        if rank == 0:     # the first candidate is kept whatever its value (none: a bound)
            take = has
        else:
            take = xp.logical_and(has, obj_x > best_obj)
        theta, best_obj = xp.where(take, x, theta), xp.where(take, obj_x, best_obj)
        at_low = xp.where(take, low, at_low)
        at_high = xp.where(take, high, at_high)
    _, info, _ = _terms_at(theta, y1, y0, obs, params, xp)
    n_obs = xp.sum(obs, axis=1)
    seen = obs > 0
    all_right = xp.logical_and(n_obs > 0, xp.logical_not(
        xp.any(xp.logical_and(seen, y1 < 1.0), axis=1)))
    all_wrong = xp.logical_and(n_obs > 0, xp.logical_not(
        xp.any(xp.logical_and(seen, y1 > 0.0), axis=1)))
    host = [np.asarray(arrays.to_numpy(v)) for v in (theta, info, at_low, at_high, n_obs,
                                                     all_right, all_wrong)]
    host[4] = host[4].astype(np.int64)
    return finish(method, *host, prior_mean=prior_mean, prior_sd=prior_sd)
