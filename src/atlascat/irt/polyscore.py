"""Ability estimation on a bank of ordinal items (:class:`PolyBank`): EAP, MAP, ML and WLE.

With x_ij the category of subject i's rating of item j (observed items only)::

    log L_i(theta) = sum_j log P_j,x_ij(theta)
    EAP   posterior mean and SD on 61 nodes over [-6, 6], N(mu, sigma^2) prior (mirt's fscores)
    MAP   argmax log L_i - (theta - mu)^2 / (2 sigma^2),  SE = 1 / sqrt(O(theta) + 1 / sigma^2)
    ML    argmax log L_i,                                 SE = 1 / sqrt(O(theta))
    WLE   root of g = S(theta) + J(theta) / (2 I(theta)) = 0 (Warm, 1989; Samejima, 1998),
          SE = 1 / sqrt(-dg / dtheta);
          S = sum_j P'_jx / P_jx,  I = sum_jk P'_jk^2 / P_jk,  J = sum_jk P'_jk P''_jk / P_jk,
          O = -d2 log L / dtheta2 = sum_j (P'_jx / P_jx)^2 - P''_jx / P_jx (observed information)

(the SEs mirt's ``fscores`` gives; for the GPCM O = I, for the graded model they differ)

I, J over the items each subject answered. All subjects at once: the EAP is one matrix product
of the one-hot categories with the nodes' log-probabilities; ML / MAP / WLE start at the best
point of a 0.02-spaced grid over ``bounds`` (one product) and are refined by Newton steps with
central differences of the per-subject objective (a few vectorized evaluations, no loop over
subjects). ML of a pattern in the lowest (highest) category of every item is -inf (+inf),
flag ``zero`` (``perfect``).

References
----------
Bock, R. D. and Mislevy, R. J. (1982). Applied Psychological Measurement 6, 431-444.
Warm, T. A. (1989). Psychometrika 54, 427-450.
Samejima, F. (1998). Efficient nonparametric approaches for estimating the operating
characteristics of discrete item responses. Psychometrika 63, 111-130.
"""
from __future__ import annotations

import numpy as np

from ..errors import ConfigError
from . import polytomous as poly
from .adaptquad import check_quadrature
from .defaults import PREDICTION_PRIOR_SD, SCORE_QUADPTS, SCORE_QUADRATURE, THETA_RANGE
from .polybank import PolyBank
from .polyfit import eap_codes, indicators

__all__ = ["ordinal_codes", "aligned_ratings", "score_ordinal", "estimate_ordinal",
           "predict_mean_rating"]

METHODS = ("eap", "wle", "map", "ml")


def ordinal_codes(responses, bank: PolyBank, extra_items: str = "ignore") -> np.ndarray:
    """Category index (n, n_bank_items), NaN for missing, from ratings on the items' scales
    (:meth:`PolyBank.encode`); a labelled input is aligned to the bank by item id."""
    values, sids = aligned_ratings(responses, bank, extra_items)
    return bank.encode(values, sids)


def aligned_ratings(responses, bank: PolyBank, extra_items: str = "ignore"):
    """(ratings (n, n_bank_items) on the items' own scales, NaN for missing; the subject ids
    of a labelled input, else None): a labelled input aligned to the bank by item id, an
    unlabelled one taken in the bank's item order."""
    from .polycal import _as_ratings

    import pandas as pd

    from ..responses import ResponseMatrix

    values, sids, iids, _ = _as_ratings(responses, None)
    labelled = isinstance(responses, ResponseMatrix) or (
        isinstance(responses, pd.DataFrame)
        and not isinstance(responses.columns, pd.RangeIndex))
    if labelled:
        known = np.array([str(i) in bank for i in iids], dtype=bool)
        if not known.any():
            from ..errors import ResponseDataError

            raise ResponseDataError(
                f"none of the {len(iids)} response items is in the bank (responses: "
                f"{[str(i) for i in iids[:3]]}, bank: {list(bank.item_ids[:3])}); check that "
                "they belong together (R writes an id that starts with a digit as X514)")
        if not known.all() and extra_items == "error":
            unknown = [str(i) for i, k in zip(iids, known) if not k]
            raise ConfigError(f"{len(unknown)} response item(s) are not in the bank, e.g. "
                              f"{unknown[:5]}")
        out = np.full((values.shape[0], len(bank)), np.nan)
        out[:, bank.index_of([str(i) for i, k in zip(iids, known) if k])] = values[:, known]
        values = out
    elif values.shape[1] != len(bank):
        raise ConfigError(f"responses have {values.shape[1]} columns but the bank has "
                          f"{len(bank)} items; pass a labelled frame or the bank's item order")
    return values, (sids if labelled else None)


def _loglik_at(codes, bank: PolyBank, theta):
    """log L_i(theta_i) for per-subject thetas (n,)."""
    if (bank.models == "graded").all():
        return _graded_loglik_at(codes, bank, theta)
    lp = poly.log_prob(bank.models, bank.params, theta)                  # (m, n, K)
    obs = ~np.isnan(codes)
    idx = np.where(obs, codes, 0).astype(int).T[:, :, None]               # (m, n, 1)
    got = np.take_along_axis(lp, idx, axis=2)[..., 0].T                   # (n, m)
    return np.sum(np.where(obs, got, 0.0), axis=1)


def _graded_loglik_at(codes, bank: PolyBank, theta):
    """:func:`_loglik_at` of a graded bank from the answered categories alone: with
    z_k = a theta + d_k (d_0 = +inf, d_K = -inf), log P(X = k) = log(sigma(z_k) - sigma(z_k+1))
    = log sigma(z_k) + log sigma(-z_k+1) + log(1 - exp(z_k+1 - z_k)), as
    :func:`atlascat.irt.polytomous.log_prob` writes it, on (n, m) cells instead of (n, m, K)."""
    from scipy.special import log_expit

    obs = ~np.isnan(codes)
    k = np.where(obs, codes, 0).astype(np.intp)                           # (n, m)
    a, d = bank.params[:, 0], bank.params[:, 1:]
    m = len(a)
    edges = np.concatenate([np.full((m, 1), np.inf), np.where(np.isnan(d), -np.inf, d),
                            np.full((m, 1), -np.inf)], axis=1)            # (m, K + 1)
    cols = np.arange(m)[None, :]
    at = np.asarray(theta, dtype=float)[:, None] * a[None, :]
    zl, zu = at + edges[cols, k], at + edges[cols, k + 1]
    with np.errstate(invalid="ignore", divide="ignore"):
        gap = zu - zl
        gap = np.where(np.isnan(gap), -np.inf, gap)
        lp = log_expit(zl) + log_expit(-zu) + np.log1p(-np.exp(np.minimum(gap, 0.0)))
        lp = np.where(gap > 0, np.nan, lp)                               # disordered thresholds
    lp = np.where(np.isneginf(zl), -np.inf, lp)
    return np.sum(np.where(obs, lp, 0.0), axis=1)


def _observed_info(codes, bank: PolyBank, theta, h: float = 1e-5):
    """-d2 log L_i / dtheta2 = sum_j (P'_jx / P_jx)^2 - P''_jx / P_jx at each subject's theta
    (P'' by central differences of the analytic P')."""
    obs = ~np.isnan(codes)
    idx = np.where(obs, codes, 0).astype(int).T[:, :, None]
    take = lambda a: np.take_along_axis(a, idx, axis=2)[..., 0].T  # noqa: E731  (n, m)
    p = take(np.nan_to_num(poly.prob(bank.models, bank.params, theta)))
    d1 = take(poly.dprob_dtheta(bank.models, bank.params, theta))
    d2 = take((poly.dprob_dtheta(bank.models, bank.params, theta + h)
               - poly.dprob_dtheta(bank.models, bank.params, theta - h)) / (2 * h))
    safe = np.where(p > 0, p, 1.0)
    return np.sum(np.where(obs & (p > 0), (d1 / safe) ** 2 - d2 / safe, 0.0), axis=1)


def _info_terms(codes, bank: PolyBank, theta):
    """(I, J) per subject at its theta over the items it answered: I = sum_k P'_k^2 / P_k,
    J = sum_k P'_k P''_k / P_k, P' and P'' analytic."""
    obs = ~np.isnan(codes)
    p = np.nan_to_num(poly.prob(bank.models, bank.params, theta))      # (m, n, K)
    d1 = poly.dprob_dtheta(bank.models, bank.params, theta, p=p)
    d2 = poly.d2prob_dtheta2(bank.models, bank.params, theta, p=p)
    safe = np.where(p > 0, p, 1.0)
    i_jn = np.sum(np.where(p > 0, d1 * d1 / safe, 0.0), axis=2).T      # (n, m)
    j_jn = np.sum(np.where(p > 0, d1 * d2 / safe, 0.0), axis=2).T
    return np.sum(np.where(obs, i_jn, 0.0), 1), np.sum(np.where(obs, j_jn, 0.0), 1)


def score_ordinal(codes, bank: PolyBank, method: str = "eap", *, prior_mean: float = 0.0,
                  prior_sd: float = 1.0, quadpts: int = SCORE_QUADPTS, theta_range=THETA_RANGE,
                  bounds=(-10.0, 10.0), newton: int = 30, quadrature: str = SCORE_QUADRATURE):
    """(theta, se, n_items, flag) for category codes (n, n_items) in the bank's item order;
    ``quadrature``: the EAP's, "fixed" or "adaptive" (:mod:`atlascat.irt.adaptquad`)."""
    method = str(method).lower()
    if method not in METHODS:
        raise ConfigError(f"unknown scoring method {method!r}; use one of {', '.join(METHODS)}")
    quadrature = check_quadrature(quadrature)
    codes = np.asarray(codes, dtype=float)
    obs = ~np.isnan(codes)
    n_obs = obs.sum(axis=1)
    if method == "eap":
        th, se = eap_codes(codes, bank.models, bank.params, quadpts, theta_range, prior_mean,
                           prior_sd, quadrature=quadrature)
        flag = np.where(n_obs == 0, "no_items", "ok").astype(object)
        return th, se, n_obs, flag
    kmax = bank.params.shape[1]
    Y = indicators(codes, kmax)
    m = len(bank)
    lo, hi = float(bounds[0]), float(bounds[1])
    if not hi > lo:
        raise ConfigError(f"bounds must satisfy low < high, got {bounds}")
    grid = np.linspace(lo, hi, int(round((hi - lo) / 0.02)) + 1)
    lp = poly.log_prob(bank.models, bank.params, grid)
    lp = np.where(np.isfinite(lp), lp, -1e300)
    G = Y @ lp.transpose(0, 2, 1).reshape(m * kmax, len(grid))              # (n, grid)
    prec = 1.0 / prior_sd**2

    def objective(c, th):
        f = _loglik_at(c, bank, th)
        if method == "map":
            f = f - 0.5 * (th - prior_mean) ** 2 * prec
        return f

    if method == "map":
        G = G - 0.5 * (grid - prior_mean) ** 2 * prec
    elif method == "wle":
        info_g = np.stack([poly.item_information(bank.models, bank.params, grid).T],
                          0)[0]                                             # (m, grid)
        G = G + 0.5 * np.log(np.maximum(obs.astype(float) @ info_g, 1e-300))
    th = grid[np.argmax(G, axis=1)]
    h = 1e-4
    act = np.arange(len(th))            # the subjects whose Newton steps still move
    for _ in range(newton):
        c, t = codes[act], th[act]
        if method == "wle":
            s_fd = (_loglik_at(c, bank, t + h) - _loglik_at(c, bank, t - h)) / (2 * h)
            i_, j_ = _info_terms(c, bank, t)
            g = s_fd + j_ / (2.0 * np.maximum(i_, 1e-300))
            t2 = t + h
            s2 = (_loglik_at(c, bank, t2 + h) - _loglik_at(c, bank, t2 - h)) / (2 * h)
            i2, j2 = _info_terms(c, bank, t2)
            dg = (s2 + j2 / (2.0 * np.maximum(i2, 1e-300)) - g) / h
        else:
            f0, fp, fm = (objective(c, t), objective(c, t + h), objective(c, t - h))
            g = (fp - fm) / (2 * h)
            dg = (fp - 2 * f0 + fm) / (h * h)
        step = np.where(dg < 0, -g / np.where(dg < 0, dg, -1.0), np.sign(g) * 0.1)
        step = np.clip(step, -0.5, 0.5)
        t_new = np.clip(t + step, lo, hi)
        th[act] = t_new
        act = act[np.abs(t_new - t) >= 1e-9]
        if act.size == 0:
            break
    with np.errstate(divide="ignore", invalid="ignore"):
        if method == "wle":                        # -dg/dtheta of the estimating function
            g_at = lambda t: ((_loglik_at(codes, bank, t + h) - _loglik_at(codes, bank, t - h))  # noqa: E731
                              / (2 * h) + (lambda ij: ij[1] / (2.0 * ij[0]))(
                                  _info_terms(codes, bank, t)))
            curv = -(g_at(th + 1e-3) - g_at(th - 1e-3)) / 2e-3
        else:
            curv = _observed_info(codes, bank, th) + (prec if method == "map" else 0.0)
        se = 1.0 / np.sqrt(curv)
    flag = np.full(len(th), "ok", dtype=object)
    if method != "map":
        flag[(th <= lo + 1e-9) | (th >= hi - 1e-9)] = "at_bound"
    if method == "ml":
        low = np.all(np.where(obs, codes == 0, True), axis=1)
        top = np.all(np.where(obs, codes == (bank.n_cat[None, :] - 1), True), axis=1)
        th = np.where(low, -np.inf, np.where(top, np.inf, th))
        se = np.where(low | top, np.inf, se)
        flag[low] = "zero"
        flag[top] = "perfect"
    nothing = n_obs == 0
    th = np.where(nothing, np.nan if method != "map" else prior_mean, th)
    se = np.where(nothing, np.nan if method != "map" else prior_sd, se)
    flag[nothing] = "no_items"
    return th, se, n_obs, flag


def estimate_ordinal(responses, bank: PolyBank, method: str = "eap", *, subject_ids=None,
                     extra_items: str = "ignore", **settings):
    """:func:`atlascat.irt.ability.estimate_ability` for a :class:`PolyBank`: a DataFrame
    ``subject_id, theta, se, n_items, flag``."""
    from ..responses import one_subject_frame
    from .polycal import _as_ratings

    responses = one_subject_frame(responses)   # a dict or Series: one subject's ratings
    if subject_ids is None and not isinstance(responses, np.ndarray):
        subject_ids = _as_ratings(responses, None)[1]
    import pandas as pd

    codes = ordinal_codes(responses, bank, extra_items)
    th, se, n_obs, flag = score_ordinal(codes, bank, method, **settings)
    ids = np.arange(len(th)).astype(str) if subject_ids is None else \
        np.asarray([str(s) for s in subject_ids])
    df = pd.DataFrame({"subject_id": ids, "theta": th, "se": se,
                       "n_items": n_obs.astype(int), "flag": flag})
    df.attrs["method"] = str(method).lower()
    return df


def predict_mean_rating(responses, bank: PolyBank, *, prior_sd: float = PREDICTION_PRIOR_SD,
                        z: float = 1.96):
    """(score, lo, hi), one per subject: the mean rating over all the bank's items predicted
    from each subject's ratings (a labelled frame, a dict of one subject's, or an array in the
    bank's item order; NaN = not asked), with its 95% interval: the asked items as rated, the
    others expected at the EAP under a N(0, ``prior_sd``^2) prior (a model under test is not
    drawn from the calibration population N(0, 1), and under it one stronger than every
    source model is shrunk toward them; :data:`~atlascat.irt.defaults.PREDICTION_PRIOR_SD`)
    (:meth:`PolyBank.full_mean_rating`)."""
    from ..responses import one_subject_frame

    ratings, sids = aligned_ratings(one_subject_frame(responses), bank)
    theta, se, _, _ = score_ordinal(bank.encode(ratings, sids), bank, "eap", prior_sd=prior_sd)
    return bank.full_mean_rating(ratings, theta, se, z)
