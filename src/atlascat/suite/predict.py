"""From the joint posterior to published scores: each member's and the aggregate's.

Each weighted posterior draw theta_k is pushed through every member's score link curve g_b
(the whole-bank curve; below the link's data it falls towards the floor as the link does,
``ScoreLink.honest``) and given a residual e_bk = sd_b(theta_bk) r_bk, where r_k ~ N(0, R)
(R the residual correlation of :class:`~atlascat.suite.prior.SuitePrior`, fixed quasi-random
draws) and sd_b the link's residual SD. Then

    score_bk = g_b(theta_bk) + e_bk,   average_k = sum_b w_b score_bk,

so the aggregate keeps the correlations of the members. Where a member was asked items, its
link's observed-answer correction (evaluated at the posterior mean) shifts its draws
(:func:`answer_corrections`). Points are weighted means of g (the
residual has mean 0), 95% intervals weighted 2.5% / 97.5% quantiles. Where a member's theta
reaches beyond its link's support (posterior mean +- 1.96 SD), its interval extends to the
link's floor / top and the aggregate's interval by the weight times that extension. Where a
member's answers cannot be told from guessing (:func:`chance_bounds`), its interval reaches down
to the benchmark's chance score and the aggregate's down to the average with every such member
at chance.
"""
from __future__ import annotations

import numpy as np

from ..irt.models import probability
from ..scorelink.settings import Z95

__all__ = ["answer_corrections", "correction_weights", "answer_residuals", "weighted_quantiles",
           "predict_scores", "curve_slopes", "residual_sd", "chance_bounds"]



def weighted_quantiles(values, weights, qs) -> np.ndarray:
    """Weighted quantiles along the last axis: (..., len(qs)) (midpoint plotting positions)."""
    order = np.argsort(values, axis=-1)
    v = np.take_along_axis(values, order, -1)
    w = np.take_along_axis(np.broadcast_to(weights, values.shape), order, -1)
    cw = np.cumsum(w, -1)
    pos = (cw - 0.5 * w) / cw[..., -1:]
    cols = []
    for q in qs:
        hi = np.clip((pos < q).sum(-1, keepdims=True), 1, v.shape[-1] - 1)
        lo = hi - 1
        p0, p1 = np.take_along_axis(pos, lo, -1), np.take_along_axis(pos, hi, -1)
        v0, v1 = np.take_along_axis(v, lo, -1), np.take_along_axis(v, hi, -1)
        f = np.clip((q - p0) / np.maximum(p1 - p0, 1e-300), 0.0, 1.0)
        cols.append((v0 + f * (v1 - v0))[..., 0])
    out = np.stack(cols, -1)
    return out


def link_draws(links, thetas, shift=None) -> np.ndarray:
    """Every member's curve at its draws ``thetas`` (N, K, B), plus the answer corrections
    ``shift`` (N, B) when given: the draws g a prediction averages."""
    g = np.stack([l.honest_curve(thetas[..., j]) for j, l in enumerate(links)], -1)
    return g if shift is None else g + shift[:, None, :]


def residual_sd(link, theta) -> np.ndarray:
    """The score link's residual SD at ``theta``: sqrt of its variance grid interpolated
    linearly (flat beyond the grid's ends)."""
    return np.sqrt(np.interp(theta, link.theta_grid, link.var_grid))


_GH_X, _GH_W = np.polynomial.hermite_e.hermegauss(9)
_GH_W = _GH_W / _GH_W.sum()


def curve_slopes(links, theta, sd, h: float = 0.05) -> np.ndarray:
    """Slope of each member's curve g_b over the posterior N(theta_b, sd_b^2) (N, B): the
    statistical linearization Cov(g_b, theta_b) / Var(theta_b) = E[g_b(theta_b + sd_b x) x] /
    sd_b (Gauss-Hermite, 9 nodes; sd at least ``h``): a member whose curve is flat at the mode
    but steep within the posterior (a weak model at a benchmark's floor) still counts."""
    out = np.empty_like(theta)
    for b, link in enumerate(links):
        s = np.maximum(sd[:, b], h)
        g = np.interp(theta[:, b][:, None] + s[:, None] * _GH_X, link.theta_grid,
                      link.score_grid)
        out[:, b] = (g * _GH_X) @ _GH_W / s
    return out


def correction_weights(links, pool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The member links' ``cat`` answer corrections in the pool's order: intercepts (B,), item
    weights (G,) (0 for an item the link does not weigh) and which members have one (B,)."""
    icpt, w = np.zeros(len(links)), np.zeros(len(pool))
    has = np.zeros(len(links), bool)
    for b, (link, sl) in enumerate(zip(links, pool.slices())):
        c = getattr(link, "corrections", {}).get("cat")
        if c is None or link.item_ids is None:
            continue
        index = {i: k for k, i in enumerate(link.item_ids)}
        cols = np.array([index.get(str(i), -1) for i in pool.item_ids[sl]])
        w[sl] = np.where(cols >= 0, c["weights"][np.maximum(cols, 0)], 0.0)
        icpt[b], has[b] = c["intercept"], True
    return icpt, w, has


def answer_corrections(corrections, pool, residuals, asked) -> np.ndarray:
    """Each member link's observed-answer correction (N, B) from the answer residuals
    (:func:`answer_residuals`, y_j - P_j at the posterior mean): c_0 + sum_{j asked} w_j
    (y_j - P_j(theta_b)) (the link's ``cat`` regression estimator,
    :class:`~atlascat.scorelink.score_link.ScoreLink`; ``corrections`` from
    :func:`correction_weights`); 0 for a member with no answer or a link without
    corrections."""
    icpt, w, has = corrections
    onehot = pool.onehot
    any_asked = (asked.astype(float) @ onehot) > 0
    return np.where(any_asked & has, icpt + (residuals * w) @ onehot, 0.0)


def answer_residuals(pool, theta, y, asked) -> np.ndarray:
    """(N, G) answer residuals y_j - P_j(theta_b) of the items asked (0 for the others) at the
    posterior mean ``theta`` (N, B): what the joint link's answer stacking reads."""
    out = np.zeros(asked.shape)
    for b, sl in enumerate(pool.slices()):
        P = probability(theta[:, b], pool.a[sl], pool.b[sl], pool.c[sl], pool.u[sl])
        out[:, sl] = np.where(asked[:, sl], np.nan_to_num(y[:, sl]) - P, 0.0)
    return out


def predict_scores(links, weights, thetas, w, e, resid_corr, joint=None, shift=None,
                   joint_shift=None):
    """Points and 95% intervals of the members and the aggregate, all 0-1.

    ``thetas`` (N, K, B) posterior draws with weights ``w`` (N, K); ``e`` (K, B) iid standard
    normal residual draws, correlated by ``resid_corr`` (R; or by the joint link's
    per-subject C_n when ``joint``, a :class:`~atlascat.suite.link.SuiteLink`, recalibrates
    the draws, :meth:`~atlascat.suite.link.SuiteLink.resid_covs`). Returns a
    dict: ``score``, ``lo``, ``hi`` (N, B), ``theta``, ``theta_sd`` (N, B), ``average``,
    ``average_lo``, ``average_hi``, ``average_sd`` (N,), and the raw link draws' posterior
    mean ``g_mean`` (N, B) and covariance ``g_cov`` (N, B, B) (what the joint link is fitted
    on). ``shift`` (N, B): added to every draw of g (the answer corrections); ``joint_shift``
    (N, B): added after the joint link (its answer stacking, :meth:`SuiteLink.answer_shift`)."""
    n, k, b = thetas.shape
    g = link_draws(links, thetas, shift)
    g_mean = np.einsum("nk,nkb->nb", w, g)
    dev = g - g_mean[:, None, :]
    g_cov = np.einsum("nk,nki,nkj->nij", w, dev, dev)
    if joint is None:
        base = g
        sd = np.stack([residual_sd(l, thetas[..., j]) for j, l in enumerate(links)], -1)
        s = np.clip(g + sd * (e @ np.linalg.cholesky(resid_corr + 1e-12 * np.eye(b)).T), 0, 1)
    else:
        base = joint.apply(g)
        if joint_shift is not None:
            base = base + joint_shift[:, None, :]
        chol = np.linalg.cholesky(joint.resid_covs(g_cov) + 1e-12 * np.eye(b))
        s = np.clip(base + np.einsum("kc,nbc->nkb", e, chol), 0.0, 1.0)
    g = base
    score = np.einsum("nk,nkb->nb", w, g)
    q = weighted_quantiles(np.moveaxis(s, 2, 1), w[:, None, :], [0.025, 0.975])
    lo, hi = q[..., 0], q[..., 1]
    theta = np.einsum("nk,nkb->nb", w, thetas)
    theta_sd = np.sqrt(np.maximum(np.einsum("nk,nkb->nb", w, thetas ** 2) - theta ** 2, 0.0))
    avg_draws = s @ weights
    average = score @ weights
    qa = weighted_quantiles(avg_draws, w, [0.025, 0.975])
    a_lo, a_hi = qa[:, 0], qa[:, 1]
    a_sd = np.sqrt(np.maximum((w * avg_draws ** 2).sum(1) - (w * avg_draws).sum(1) ** 2, 0.0))
    for j, link in enumerate(links):
        low, high = link.support_bounds()
        floor, top = link.support["floor"], link.support["top"]
        below = theta[:, j] - Z95 * theta_sd[:, j] < low
        above = theta[:, j] + Z95 * theta_sd[:, j] > high
        new_lo = np.where(below, np.minimum(lo[:, j], floor), lo[:, j])
        new_hi = np.where(above, np.maximum(hi[:, j], top), hi[:, j])
        a_lo = a_lo - weights[j] * (lo[:, j] - new_lo)
        a_hi = a_hi + weights[j] * (new_hi - hi[:, j])
        lo[:, j], hi[:, j] = new_lo, new_hi
    score = np.clip(score, lo, hi)
    return {"score": score, "lo": lo, "hi": hi, "theta": theta, "theta_sd": theta_sd,
            "average": average, "average_lo": a_lo, "average_hi": a_hi, "average_sd": a_sd,
            "g_mean": g_mean, "g_cov": g_cov}


def chance_bounds(links, weights, pool, asked, y, pred) -> dict:
    """``pred`` (:func:`predict_scores`) with a single bank's guessing bound
    (:func:`atlascat.scorelink.honesty.chance_not_excluded`: k right of the n items asked of a
    member cannot be told from guessing when P(X >= k | n, answer chance) >= 0.025) where it
    holds for every member asked: a pure guesser (a broken harness, a model that knows nothing)
    publishes chance on each benchmark whatever theta its lucky answers suggest, so each
    member's lower bound goes down to its chance score c_b and the aggregate's down to the
    average with all of them at chance at once,

        average_lo <= average - sum_b w_b max(score_b - c_b, 0).

    One member alone does not trigger it: an adaptive test asks items at the model's level,
    where a strong model answers about half right, which a benchmark with chance 0.5
    (WinoGrande) cannot tell from guessing. ``asked`` / ``y`` (N, G): the items asked and the
    answers (0/1) in the pool's order."""
    from ..scorelink.honesty import chance_not_excluded

    n = asked.astype(float) @ pool.onehot
    k = np.where(asked, np.nan_to_num(y), 0.0) @ pool.onehot
    score, lo = pred["score"], pred["lo"]
    has = np.array([getattr(link, "chance", None) is not None for link in links])
    guess = np.zeros(n.shape, bool)
    for j, link in enumerate(links):
        if has[j]:
            guess[:, j] = chance_not_excluded(link, n[:, j], k[:, j])
    asked_any = (n > 0) & has
    pure = asked_any.any(1) & (guess | ~asked_any).all(1)
    chance = np.array([link.chance if h else 0.0 for link, h in zip(links, has)])
    at = pure[:, None] & has[None, :]
    lo[:] = np.where(at, np.minimum(lo, chance), lo)
    drop = (np.where(at, np.maximum(score - chance, 0.0), 0.0) * weights).sum(1)
    pred["average_lo"] = np.minimum(pred["average_lo"], pred["average"] - drop)
    return pred
