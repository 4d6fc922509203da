"""Calibration of ordinal items (graded response, generalized partial credit) by MML-EM.

The same marginal maximum likelihood EM as the binary models (Bock and Aitkin, 1981;
:mod:`atlascat.irt.em`), with category indicators in place of 0/1 scores. Data: ratings on any
integer scale; item j's observed levels become its categories 0..K_j-1 (:func:`encode`). With
Y the (subjects x sum_j K_j) one-hot matrix of the observed categories (missing cells all zero),
w_i the row weights (pattern frequencies) and pi_q the N(0, 1) weights of 61 nodes on [-6, 6]::

    L_iq    = sum_jk Y_ijk log P_jk(x_q)          = Y (log P)^T        one matrix product
    post_iq = pi_q exp(L_iq) / sum_q' pi_q' exp(L_iq'),   log L = sum_i w_i log sum_q pi_q e^L_iq
    r_jkq   = sum_i w_i Y_ijk post_iq             = Y^T (w * post)     expected counts

M-step: for every item at once, Fisher scoring of sum_qk r_jkq log P_jk(x_q) (+ log p(a_j)) with
gradient sum_qk (r_jkq / P_jk) dP_jk/dpar and expected information sum_qk n_jq dP dP^T / P_jk,
n_jq = sum_k r_jkq (:func:`atlascat.irt.polytomous.jacobian`), a per-item step-halving line
search that keeps the objective from decreasing and the graded intercepts ordered (a
generalized EM); SQUAREM (Varadhan and Roland, 2008) with one step length per item accelerates
it, an extrapolation kept only when the log-likelihood does not drop. Convergence: mirt's rule,
largest absolute change of any a1, d_k between two EM iterates below ``tol`` (1e-4).

References
----------
Bock, R. D. and Aitkin, M. (1981). Psychometrika 46, 443-459.
Muraki, E. (1992). Applied Psychological Measurement 16, 159-176.
Samejima, F. (1969). Psychometrika Monograph Supplement 17.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError, ConvergenceError, ResponseDataError
from . import polytomous as poly
from .defaults import MAX_ITER, QUADPTS, THETA_RANGE, TOL
from .polybank import PolyBank
from .quadrature import normal_quadrature

__all__ = ["OrdinalData", "encode", "fit_ordinal", "indicators"]

A_BOUND = 50.0
D_BOUND = 150.0


@dataclass
class OrdinalData:
    """Ratings turned into categories: ``codes`` (n, m) category index (NaN missing),
    ``levels`` per item (sorted observed values), ``n_cat`` per item."""
    codes: np.ndarray
    levels: list
    n_cat: np.ndarray


def encode(values, item_ids=None, value_range=None, subject_ids=None) -> OrdinalData:
    """Map each item's observed integer levels to categories 0..K_j-1.

    Refuses (one line, :class:`ConfigError`) a non-integer rating, a declared ``value_range =
    (lo, hi)`` that is not finite with lo < hi, a rating outside it and an item with a single
    observed category.
    """
    v = np.asarray(values, dtype=float)
    if v.ndim != 2:
        raise ResponseDataError(f"responses must be 2-D (subjects x items), got shape {v.shape}")
    ids = [str(i) for i in (range(v.shape[1]) if item_ids is None else item_ids)]
    sub = ("" if subject_ids is None else f" (subject {str(subject_ids[r])!r})"
           for r in range(v.shape[0]))
    who = list(sub)
    obs = ~np.isnan(v)
    bad = np.argwhere(obs & ((v != np.round(v)) | ~np.isfinite(v)))
    if bad.size:
        r, c = bad[0]
        raise ConfigError(
            f"rating {v[r, c]:g} at row {r}{who[r]}, item {ids[c]!r} is not an integer "
            f"({len(bad)} such cell(s)); the graded and gpcm models take ordered integer levels "
            "(e.g. 1-10, 0-3): round or rescale the ratings")
    if value_range is not None:
        from ..validation import check_finite

        if isinstance(value_range, str) or np.size(value_range) != 2:
            raise ConfigError(f"value_range must be two numbers (LO, HI), got {value_range!r}")
        lo, hi = (check_finite(x, "value_range") for x in value_range)
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise ConfigError(f"the declared rating range needs finite LO < HI, got [{lo:g}, "
                              f"{hi:g}]")
        out = np.argwhere(obs & ((v < lo) | (v > hi)))
        if out.size:
            r, c = out[0]
            raise ConfigError(
                f"rating {v[r, c]:g} at row {r}{who[r]}, item {ids[c]!r} is outside the declared range "
                f"[{lo:g}, {hi:g}] ({len(out)} such cell(s)); fix the data or the range")
    levels, codes = [], np.full(v.shape, np.nan)
    for j in range(v.shape[1]):
        col = v[obs[:, j], j]
        lev, inv = np.unique(col, return_inverse=True)
        if lev.size < 2:
            what = "no response" if lev.size == 0 else f"only the level {lev[0]:g}"
            raise ConfigError(
                f"item {ids[j]!r} has {what}: an ordinal item needs at least two observed "
                "categories; drop the item (CLI --drop-empty; Python: "
                "atlascat.irt.polycal.calibrate_ordinal(..., on_empty='drop'))")
        levels.append(lev)
        codes[obs[:, j], j] = inv
    return OrdinalData(codes, levels, np.array([len(lv) for lv in levels]))


def indicators(codes, kmax: int) -> np.ndarray:
    """One-hot (n, m * kmax) matrix of the categories, zero rows for missing cells."""
    n, m = codes.shape
    Y = np.zeros((n, m * kmax))
    r, c = np.nonzero(~np.isnan(codes))
    Y[r, c * kmax + codes[r, c].astype(int)] = 1.0
    return Y


def eap_codes(codes, models, params, quadpts: int, theta_range=THETA_RANGE,
              prior_mean: float = 0.0, prior_sd: float = 1.0, quadrature: str = "fixed"):
    """EAP theta and posterior SD of category codes (n, m; NaN = missing) under ordinal items
    ``models`` / ``params`` and a N(``prior_mean``, ``prior_sd``^2) prior on ``quadpts``
    nodes over ``theta_range`` (``atlas score``'s and the calibration result's scores);
    ``quadrature="adaptive"``: integrated again on a grid 8 times finer for the subjects the
    grid does not resolve (:mod:`atlascat.irt.adaptquad`)."""
    from .adaptquad import check_quadrature

    codes = np.asarray(codes, dtype=float)
    th, se = _grid_eap(codes, models, params, quadpts, theta_range, prior_mean, prior_sd)
    if check_quadrature(quadrature) == "adaptive":
        th, se = _refined_eap(codes, models, params, th, se, quadpts, theta_range, prior_mean,
                              prior_sd)
    return th, se


def _refined_eap(codes, models, params, th, se, quadpts, theta_range, prior_mean, prior_sd):
    """The fixed grid's EAP ``th``, ``se`` where the half grid agrees, a grid 8 times finer
    elsewhere (:func:`atlascat.irt.adaptquad.refine`), in blocks of subjects that bound the
    work arrays."""
    from .adaptquad import refine

    def score_on(n, rows):
        if rows is None:
            return _grid_eap(codes, models, params, n, theta_range, prior_mean, prior_sd)
        step = max(1, (1 << 24) // (n * params.shape[1] * params.shape[0]))
        out = [_grid_eap(codes[rows[i:i + step]], models, params, n, theta_range, prior_mean,
                         prior_sd) for i in range(0, rows.size, step)]
        return np.concatenate([t for t, _ in out]), np.concatenate([s for _, s in out])

    return refine(score_on, th, se, quadpts)


def _grid_eap(codes, models, params, quadpts, theta_range, prior_mean, prior_sd):
    """:func:`eap_codes` on the ``quadpts`` grid alone."""
    m, kmax = params.shape[0], params.shape[1]
    quad = normal_quadrature(int(quadpts), theta_range, prior_mean, prior_sd)
    x = quad.nodes
    lp = poly.log_prob(models, params, x)
    lp = np.where(np.isfinite(lp), lp, 0.0)
    L = indicators(codes, kmax) @ lp.transpose(0, 2, 1).reshape(m * kmax, len(x)) \
        + quad.log_weights
    post = np.exp(L - L.max(axis=1, keepdims=True))
    post /= post.sum(axis=1, keepdims=True)
    th = post @ x
    return th, np.sqrt(np.clip(post @ (x * x) - th * th, 0.0, None))


def start_params(data: OrdinalData, weights, models) -> np.ndarray:
    """Start values: a = 1; graded d_k = logit of the share of responses >= k, GPCM d_k =
    log(p_k / p_0) (the a = 0 solution), from the weighted category shares."""
    m, kmax = len(data.levels), int(data.n_cat.max())
    w = np.ones(data.codes.shape[0]) if weights is None else np.asarray(weights, float)
    p = np.full((m, kmax), np.nan)
    for k in range(kmax):
        p[:, k] = (w[:, None] * (data.codes == k)).sum(0)
    p = p / np.nansum(p, axis=1, keepdims=True)
    p = np.where(np.arange(kmax) < data.n_cat[:, None], np.maximum(p, 1e-4), np.nan)
    params = np.full((m, kmax), np.nan)
    params[:, 0] = 1.0
    gp = models == "gpcm"
    cum = np.cumsum(np.nan_to_num(p)[:, ::-1], axis=1)[:, ::-1]        # P(X >= k)
    cum = np.where(np.isnan(p), np.nan, np.clip(cum, 1e-4, 1 - 1e-4))
    params[~gp, 1:] = np.log(cum[~gp, 1:] / (1 - cum[~gp, 1:]))
    params[gp, 1:] = np.log(p[gp, 1:] / p[gp, :1])
    # one category observed in few rows may tie cumulative shares: keep d strictly decreasing
    for k in range(2, kmax):
        tie = ~gp & (params[:, k] >= params[:, k - 1] - 1e-3)
        params[tie, k] = params[tie, k - 1] - 1e-3
    return params


def _prior_a(prior, a):
    """(log p, d/da, d2/da2) of a slope prior at the natural slope a (zeros without one)."""
    if prior is None:
        z = np.zeros_like(a)
        return z, z, z
    if prior.internal == "log":
        with np.errstate(divide="ignore", invalid="ignore"):
            al = np.log(a)
            lp, g, h = prior.terms(al)
            ok = a > 0
            return (np.where(ok, lp, -np.inf), np.where(ok, g / a, 0.0),
                    np.where(ok, (h - g) / (a * a), 0.0))
    return prior.terms(a)


class _Items:
    """The M-step's view of the items: models, free-parameter mask, prior; ``fix_a``: the
    slopes stay where they are (the partial credit model's a = 1)."""

    def __init__(self, models, free, prior_a, fix_a: bool = False):
        self.models = models
        self.free = free                                   # (m, K_max): a and d1..d(K-1)
        self.prior_a = prior_a
        self.fix_a = fix_a

    def rows(self, idx) -> "_Items":
        return _Items(self.models[idx], self.free[idx], self.prior_a, self.fix_a)

    def value(self, params, lp, r):
        """sum_qk r log P + log p(a) per item from log P at the nodes; -inf where the graded
        order breaks (NaN log-probabilities)."""
        with np.errstate(invalid="ignore"):
            val = np.sum(np.where(r > 0, r * lp, 0.0), axis=(1, 2))
        val = np.where(np.isnan(val), -np.inf, val)
        return val + _prior_a(self.prior_a, params[:, 0])[0]

    def step(self, params, lp, r, x):
        """Fisher-scoring step (n_items, K_max) for every item at once: gradient
        sum_qk (r / P) dP and information sum_qk n_q dP dP^T / P as batched matrix products
        over the (node, category) axis."""
        p = np.exp(lp)                                                      # 0 where absent
        J = poly.jacobian(self.models, params, x, p)                       # (m, q, K, P)
        m, q, k, npar = J.shape
        safe = np.where(p > 0, p, 1.0)
        Jf = J.reshape(m, q * k, npar)
        wr = np.where(p > 0, r / safe, 0.0).reshape(m, 1, q * k)
        g = (wr @ Jf)[:, 0, :]
        wn = (r.sum(axis=2)[:, :, None] / safe).reshape(m, q * k, 1)
        info = np.swapaxes(Jf * wn, 1, 2) @ Jf
        _, ga, ha = _prior_a(self.prior_a, params[:, 0])
        g[:, 0] += ga
        info[:, 0, 0] += np.maximum(-ha, 0.0)
        fixed = ~self.free
        if self.fix_a:   # the slope out of the system: its row and column zero, its step 0
            fixed = fixed.copy()
            fixed[:, 0] = True
            info[:, 0, :] = 0.0
            info[:, :, 0] = 0.0
        g[fixed] = 0.0
        kk = np.arange(npar)
        info[:, kk, kk] += np.where(fixed, 1.0, 1e-10 * (1.0 + info[:, kk, kk]))
        return np.linalg.solve(info, g[..., None])[..., 0]


def mstep(items: _Items, params, r, x, max_newton: int = 8, max_halvings: int = 12,
          step_tol: float = 1e-8):
    """Batched Fisher scoring with a per-item step-halving line search (never decreasing an
    item's objective); loops run over Newton steps and halvings, never over items."""
    params = params.copy()
    lp = poly.log_prob(items.models, params, x)
    f = items.value(params, lp, r)
    active = np.ones(len(params), dtype=bool)
    for _ in range(max_newton):
        idx = np.flatnonzero(active)
        if idx.size == 0:
            break
        sub = items.rows(idx)
        s = np.where(sub.free, sub.step(params[idx], lp[idx], r[idx], x), 0.0)
        big = np.max(np.abs(s), axis=1)
        s *= np.minimum(1.0, 2.0 / np.maximum(big, 1e-300))[:, None]      # step cap
        t = np.ones(idx.size)
        todo = np.ones(idx.size, dtype=bool)
        f_old = f[idx]
        for _ in range(max_halvings):
            if not todo.any():
                break
            rows = idx[todo]
            cand = params[rows] + t[todo, None] * s[todo]
            cand[:, 0] = np.clip(cand[:, 0], -A_BOUND, A_BOUND)
            cand[:, 1:] = np.clip(cand[:, 1:], -D_BOUND, D_BOUND)
            part = items.rows(rows)
            lpc = poly.log_prob(part.models, np.where(part.free, cand, np.nan), x)
            fc = part.value(cand, lpc, r[rows])
            ok = np.isfinite(fc) & (fc >= f_old[todo] - 1e-12 * np.abs(f_old[todo]))
            params[rows[ok]] = cand[ok]
            lp[rows[ok]] = lpc[ok]
            f[rows[ok]] = fc[ok]
            todo[np.flatnonzero(todo)[ok]] = False
            t[todo] *= 0.5
        moved = np.max(np.abs(t[:, None] * s), axis=1)
        active[idx[todo | (moved < step_tol)]] = False
    return params


def fit_ordinal(data: OrdinalData, weights, models, *, prior_a=None, quadpts: int = QUADPTS,
                theta_range=THETA_RANGE, max_iter: int = MAX_ITER, tol: float = TOL,
                accelerate: bool = True, max_newton: int = 8, callback=None,
                start=None, latent_variance: bool = False, groups=None) -> dict:
    """Calibrate ordinal items by MML-EM (module docstring). ``models``: one per item.

    ``latent_variance``: the slopes stay at their start (1) and the trait is N(0, sigma^2),
    sigma^2 estimated: mirt's ``"Rasch"`` of ordinal items, the partial credit model of GPCM
    items (Masters, 1982); its M-step sets sigma^2 so that the grid's second moment is the
    posterior one (:func:`atlascat.irt.estep.rasch_variance`), a plain EM (no SQUAREM).

    ``groups``: each subject's group 0..G-1 for a multiple-group fit (mirt's
    ``multipleGroup``, :mod:`atlascat.irt.groups`): group 0's trait N(0, 1), every other
    group's N(mu_g, sigma_g^2) with its grid weights in its subjects' E-step and, in the
    M-step, the moments of their posterior mass on the nodes
    (:func:`atlascat.irt.groups.posterior_moments`); SQUAREM's step for the groups' means and
    log-variances one length for them all. With ``latent_variance`` too (the partial credit
    model, mirt's ``"Rasch"``), group 0's variance is estimated as a one-group fit's, on its
    mass, and every group's mean and variance are on the slope-1 scale (mirt's).

    Returns a dict: ``params`` (n_items, K_max), ``loglik``, ``log_posterior``, ``trace``,
    ``n_iter``, ``converged``, the subjects' EAP ``theta`` / ``theta_se`` (on the fitted
    trait's scale, each under its group's prior), the ``nodes``, ``latent_variance`` (1
    unless estimated) and, with ``groups``, ``group_means`` and ``group_vars`` (one per
    group; group 0's variance ``latent_variance``).
    """
    from .estep import grid_log_weights, rasch_variance

    models = np.asarray(models, dtype=object)
    m, kmax = len(data.levels), int(data.n_cat.max())
    quad = normal_quadrature(int(quadpts), theta_range)
    x, log_w = quad.nodes, quad.log_weights
    Y = indicators(data.codes, kmax)
    w = None if weights is None else np.asarray(weights, dtype=float)
    if w is not None and np.all(w == 1):
        w = None
    free = np.arange(kmax)[None, :] < data.n_cat[:, None]
    est_var = bool(latent_variance)
    items = _Items(models, free, prior_a, fix_a=est_var)
    nq = len(x)
    var, mass = [1.0], [None]     # the latent variance and the E-step's posterior mass per node
    if est_var:
        accelerate = False
    lat = _Latent(groups, x, len(Y))

    def estep(params, gp, stats=True):
        lp = poly.log_prob(models, params, x)                            # (m, q, K)
        # absent categories (Y = 0 there) count 0; a present category keeps its -inf or NaN
        # (tied or disordered graded intercepts), so such params give a non-finite log L
        lp = np.where(free[:, None, :], lp, 0.0)
        L = Y @ lp.transpose(0, 2, 1).reshape(m * kmax, nq) + lat.row_log_weights(log_w, gp)
        mx = L.max(axis=1, keepdims=True)
        post = np.exp(L - mx)
        tot = post.sum(axis=1)
        post /= tot[:, None]
        lse = mx[:, 0] + np.log(tot)
        ll = float(lse.sum() if w is None else w @ lse)
        if not stats:
            return ll, post
        wp = post if w is None else post * w[:, None]
        r = (wp.T @ Y).reshape(nq, m, kmax).transpose(1, 0, 2)           # (m, q, K)
        mass[0] = wp.sum(axis=0) if lat.G == 1 else lat.masses(wp)
        return ll, r

    def log_prior(params):
        return float(np.sum(_prior_a(prior_a, params[:, 0])[0])) if prior_a is not None else 0.0

    def em_map(params, gp, at_least=None):
        nonlocal log_w
        ll, r = estep(params, gp)
        obj = ll + log_prior(params)
        if at_least is not None and not (math.isfinite(obj) and obj >= at_least):
            return None, gp, obj
        if est_var:   # the reference group's variance (its mass with groups)
            var[0] = float(rasch_variance(x, mass[0] if lat.G == 1 else mass[0][0]))
            log_w = grid_log_weights(x, var[0])
        gp_new = lat.mstep(mass[0]) if lat.G > 1 else gp
        return mstep(items, params, r, x, max_newton), gp_new, obj

    def change(pa, pb):
        return float(np.max(np.abs(np.where(free, pb - pa, 0.0))))

    p = start_params(data, w, models) if start is None else np.array(start, float)
    p = np.where(free, p, 0.0)                                # NaN pads -> 0, never moved
    g = np.zeros(2 * (lat.G - 1))            # the groups' (mean, log variance) but the first
    trace, n_iter, converged, step_max = [], 0, False, 1.0

    def record(obj, ch):
        trace.append(obj)
        if callback is not None:
            callback({"iteration": n_iter, "loglik": obj, "max_change": ch, "worst_item": None,
                      "partition": 0, "n_partitions": 1})

    padded = lambda q: np.where(free, q, np.nan)  # noqa: E731

    def em_step(q, gq):
        """One EM update of ``q``, ``gq``, counted and recorded: (new params, new group
        parameters, objective at q, change)."""
        nonlocal n_iter
        v0 = var[0]
        q1, g1, f = em_map(padded(q), gq)
        n_iter += 1
        q1 = np.where(free, q1, 0.0)
        ch = max(change(q, q1), abs(var[0] - v0), _gap(gq, g1))
        record(f, ch)
        return q1, g1, f, ch

    while n_iter < max_iter:
        p0, g0 = p, g
        p1, g1, _, ch = em_step(p0, g0)
        p, g = p1, g1
        if ch < tol:
            converged = True
            break
        if not accelerate or n_iter >= max_iter:
            continue
        p2, g2, f1, ch = em_step(p1, g1)
        p, g = p2, g2
        if ch < tol:
            converged = True
            break
        if n_iter >= max_iter:
            break
        # SQUAREM S3, one step length per item (and one for the groups): r = p1 - p0,
        # v = p2 - 2 p1 + p0, alpha_j = -|r_j| / |v_j| clipped to [-step_max, -1]
        # (alpha = -1 gives p2 itself)
        r_ = p1 - p0
        v_ = p2 - 2.0 * p1 + p0
        rr_, vv_ = np.sum(r_ * r_, axis=1), np.sum(v_ * v_, axis=1)
        if lat.G > 1:   # the groups' parameters: one more step length, the last
            rg, vg = g1 - g0, g2 - 2.0 * g1 + g0
            rr_, vv_ = np.append(rr_, rg @ rg), np.append(vv_, vg @ vg)
        with np.errstate(divide="ignore", invalid="ignore"):
            al = -np.sqrt(rr_ / vv_)
        al = np.where((vv_ > 0) & np.isfinite(al), al, -1.0)
        at_max = bool(np.any(al <= -step_max))
        al = np.clip(al, -step_max, -1.0)
        if np.all(al == -1.0):
            if at_max:
                step_max *= 4.0
            continue
        pe = p0 - 2.0 * al[:m, None] * r_ + (al[:m] * al[:m])[:, None] * v_
        pe[:, 0] = np.clip(pe[:, 0], -A_BOUND, A_BOUND)
        pe[:, 1:] = np.clip(pe[:, 1:], -D_BOUND, D_BOUND)
        pe = np.where(free, pe, 0.0)
        # an item whose extrapolated graded intercepts are not strictly decreasing keeps p2
        pe = np.where(_ordered(models, padded(pe))[:, None], pe, p2)
        ge = lat.clip(g0 - 2.0 * al[-1] * rg + al[-1] ** 2 * vg) if lat.G > 1 else g
        p3, g3, fe = em_map(padded(pe), ge, at_least=f1)   # no M-step when rejected
        n_iter += 1
        if p3 is not None:
            p3 = np.where(free, p3, 0.0)
            ch = max(change(pe, p3), _gap(ge, g3))
            record(fe, ch)
            p, g = p3, g3
            if at_max:
                step_max *= 4.0
            if ch < tol:
                converged = True
                break
        elif at_max:
            step_max = max(1.0, step_max / 4.0)
    params = padded(p)
    ll, post = estep(params, g, stats=False)
    if not math.isfinite(ll) or not np.all(np.isfinite(p)):
        raise ConvergenceError("ordinal calibration produced non-finite values; check the data")
    theta = post @ x
    se = np.sqrt(np.clip(post @ (x * x) - theta * theta, 0.0, None))
    out = {"params": params, "loglik": ll, "log_posterior": ll + log_prior(params),
           "trace": np.asarray(trace), "n_iter": n_iter, "converged": converged,
           "theta": theta, "theta_se": se, "nodes": x, "latent_variance": var[0]}
    if lat.G > 1:
        out["group_means"], out["group_vars"] = lat.moments(g)
        out["group_vars"][0] = var[0]
    return out


def _gap(ga, gb) -> float:
    """Largest absolute change of the groups' parameters (0 without groups)."""
    return float(np.max(np.abs(gb - ga))) if len(ga) else 0.0


class _Latent:
    """The groups of a multiple-group fit (one group without ``groups``): each subject's
    group, its rows and the packed parameters, (mean, log variance) of groups 1..G-1."""

    def __init__(self, groups, nodes, n: int):
        self.nodes = nodes
        self.index = None if groups is None else np.asarray(groups, dtype=np.intp)
        self.G = 1 if self.index is None else int(self.index.max()) + 1
        if self.index is not None and self.index.shape != (n,):
            raise ConfigError(f"groups needs one group per subject ({n}), got "
                              f"{self.index.shape}")
        self.rows = [] if self.index is None else \
            [np.flatnonzero(self.index == k) for k in range(self.G)]

    def moments(self, gp):
        """(means, variances) of every group (the first: 0, 1)."""
        return (np.concatenate([[0.0], gp[0::2]]), np.concatenate([[1.0], np.exp(gp[1::2])]))

    def row_log_weights(self, log_w, gp):
        """The grid's log weights of each subject's prior: ``log_w`` for one group, else
        (n, Q), group 0's ``log_w``."""
        if self.G == 1:
            return log_w
        from .grouplabels import group_log_weights

        means, variances = self.moments(gp)
        lw = np.stack([log_w] + [group_log_weights(self.nodes, mu, v)
                                 for mu, v in zip(means[1:], variances[1:])])
        return lw[self.index]

    def masses(self, wp) -> np.ndarray:
        """(G, Q): each group's posterior mass on the nodes."""
        return np.stack([wp[r].sum(axis=0) for r in self.rows])

    def mstep(self, masses) -> np.ndarray:
        from .grouplabels import posterior_moments

        out = np.empty(2 * (self.G - 1))
        for k in range(1, self.G):
            out[2 * k - 2], v = posterior_moments(self.nodes, masses[k])
            out[2 * k - 1] = math.log(v)
        return out

    def clip(self, gp) -> np.ndarray:
        from .grouplabels import LOG_VAR_BOUNDS, MEAN_BOUND

        out = gp.copy()
        out[0::2] = np.clip(out[0::2], -MEAN_BOUND, MEAN_BOUND)
        out[1::2] = np.clip(out[1::2], *LOG_VAR_BOUNDS)
        return out


def _ordered(models, params) -> np.ndarray:
    """Per item: True for a GPCM item, or a graded item with d_1 > d_2 > ... (NaN-padded)."""
    d = params[:, 1:]
    with np.errstate(invalid="ignore"):
        step = np.diff(d, axis=1)
    ok = np.all(np.isnan(step) | (step < 0), axis=1)
    return ok | (np.asarray(models) == "gpcm")


def to_poly_bank(item_ids, data: OrdinalData, params, models) -> PolyBank:
    """The fitted bank, its categories' levels attached."""
    return PolyBank(item_ids, params, models, data.levels)
