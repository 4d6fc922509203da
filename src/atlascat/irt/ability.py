"""Ability (theta) estimation, batched over all subjects at once: EAP, ML, MAP and WLE.

EAP (Bock and Mislevy, 1982): posterior mean and SD of theta on a fixed quadrature grid,

    post_i(q) ∝ prior(q) prod_j P_j(theta_q)^y_ij Q_j(theta_q)^(1 - y_ij)   (observed j only)
    theta_i = sum_q post_i(q) theta_q,   SE_i = sqrt(sum_q post_i(q) (theta_q - theta_i)^2).

:func:`eap` runs the calibration's array-API E-step kernel
(:func:`atlascat.irt.estep.bank_estep`: two matrix products, on NumPy or a GPU);
:func:`grid_posterior` writes the same posterior directly with ``models.loglik_matrix``.

ML, MAP and WLE solve an estimating equation g_i(theta) = 0 for every subject at once,

    ML   g = S(theta)                         S(theta) = sum_j (y_ij - P_j) P_j' / (P_j Q_j)
    MAP  g = S(theta) - (theta - mu) / sigma^2                (normal prior N(mu, sigma^2))
    WLE  g = S(theta) + J(theta) / (2 I(theta))               (Warm, 1989)

with I = sum_j P_j'^2 / (P_j Q_j) (test information) and J = sum_j P_j' P_j'' / (P_j Q_j), sums over
the items each subject answered. The solver is global and safeguarded, with no loop over subjects:

1. evaluate g and the objective (log L; log L + log prior; log L + log I / 2) for every subject on
   a grid over ``bounds`` by matrix products;
2. every downward sign change of g brackets a local maximum; these and the bounds where g points
   out of the interval are the candidates;
3. every bracket is refined by the Illinois variant of regula falsi, vectorized over the
   brackets still active, until the bracket or the Newton step |g| / I is below ``xtol`` (about
   five iterations from a 0.25-wide bracket), and the candidate with the largest objective at
   its refined root is kept: a 3PL/4PL likelihood with several modes gets its global one even
   where a narrow mode (steep items) looks lower on the grid.

Standard errors: ML and WLE 1 / sqrt(I(theta)); MAP 1 / sqrt(I(theta) + 1 / sigma^2); EAP the
posterior SD. With the 1PL/2PL, log L + log I / 2 is exactly the objective WLE maximizes (Warm's
correction is then the Jeffreys prior). Zero and perfect patterns: WLE, MAP and EAP are finite;
ML returns -inf / +inf with ``flag`` ``"zero"`` / ``"perfect"`` (``"diverged"`` for the rare 3PL
pattern whose likelihood keeps increasing towards a bound) and SE = inf; never NaN unless a
subject answered no item of the bank (``flag="no_items"``: NaN for ML/WLE, the prior for EAP/MAP).

References
----------
Bock, R. D. and Mislevy, R. J. (1982). Adaptive EAP estimation of ability in a microcomputer
environment. Applied Psychological Measurement, 6, 431-444.
Warm, T. A. (1989). Weighted likelihood estimation of ability in item response theory.
Psychometrika, 54, 427-450.
Baker, F. B. and Kim, S.-H. (2004). Item Response Theory: Parameter Estimation Techniques, ch. 7.
"""
from __future__ import annotations


import numpy as np
import pandas as pd
from .special import logsumexp

from .defaults import SCORE_QUADPTS, SCORE_QUADRATURE, THETA_RANGE
from .._blas import with_small_products
from ..errors import ConfigError, ResponseDataError
from . import arrays, models
from .abilityresult import AbilityResult, finish
from .adaptquad import check_quadrature, refine
from .bank import ItemBank
from .devicesolve import estimating_function, search_grid, solve_on_device
from .estep import bank_estep
from .inputs import response_array
from .quadrature import normal_quadrature

__all__ = [
    "METHODS",
    "AbilityResult",
    "response_array",
    "grid_posterior",
    "eap",
    "ml",
    "map_estimate",
    "wle",
    "estimating_terms",
    "estimate_ability",
    "irf_pieces",
]

METHODS = ("eap", "wle", "map", "ml")

# |z| beyond this gives P = c or u to machine precision; clipping keeps every ratio finite.
_Z_CLIP = 300.0


# ------------------------------------------------------------------------------------------ EAP
def grid_posterior(y: np.ndarray, bank: ItemBank, quad) -> np.ndarray:
    """Normalized posterior over the quadrature nodes, shape (n_subjects, n_nodes)."""
    log_p, log_q = bank.log_probability(quad.nodes)
    log_post = models.loglik_matrix(y, log_p, log_q) + quad.log_weights
    return np.exp(log_post - logsumexp(log_post, axis=1, keepdims=True))


@with_small_products
def eap(responses, bank: ItemBank, *, quadpts: int = SCORE_QUADPTS, theta_range=THETA_RANGE,
        prior_mean: float = 0.0, prior_sd: float = 1.0, device="cpu", dtype: str = "float64",
        memory_limit=None, quadrature: str = SCORE_QUADRATURE):
    """EAP theta and posterior SD for every subject; defaults are mirt's fscores' (121 nodes, [-6, 6], N(0,1)).

    theta_i = sum_q x_q post_iq, SD_i^2 = sum_q x_q^2 post_iq - theta_i^2, with
    post_iq proportional to pi_q prod_j P_j(x_q)^y_ij Q_j(x_q)^(1 - y_ij) over the observed
    items (Bock and Mislevy, 1982). Computed by the calibration's array-API E-step kernel, so
    ``device="cuda"`` (PyTorch or CuPy, as :func:`atlascat.irt.calibrate.calibrate`) scores
    on a GPU; ``dtype="float32"`` runs the one large product in float32 (the posterior is
    float64); ``memory_limit`` (bytes) bounds the device memory by scoring blocks of subjects.
    ``responses`` of another array library (a torch / CuPy tensor on its GPU, in the bank's item
    order, NaN = missing) are scored where they lie: nothing but the thetas and SEs crosses to
    the host (and, with ``quadrature="adaptive"``, the answers of the subjects refined).
    ``quadrature``: "fixed" (the grid alone, mirt's numbers) or "adaptive" (the grid where it
    resolves the posterior, bit for bit; a grid 8 times finer for the others,
    :mod:`atlascat.irt.adaptquad`).

    Returns ``(theta, se)``, NumPy arrays of shape (n_subjects,).
    """
    from ..validation import check_ability_settings

    check_ability_settings(prior_mean=prior_mean, prior_sd=prior_sd, quadpts=quadpts,
                           theta_range=theta_range)
    y = (_resident_scores(responses, bank) if arrays.is_resident(responses)
         else response_array(responses, bank))
    return _eap_array(y, bank, quadpts, theta_range, prior_mean, prior_sd, device=device,
                      dtype=dtype, memory_limit=memory_limit,
                      quadrature=check_quadrature(quadrature))


def fscores(y: np.ndarray, bank: ItemBank, *, device="cpu", memory_limit=None,
            quadrature: str = SCORE_QUADRATURE):
    """(theta, se): EAP scores of ``y`` (subjects x the bank's items, NaN = missing) as
    :func:`eap` and ``atlas score`` give them by default (N(0, 1), 121 nodes on [-6, 6], the
    default ``quadrature``; "fixed": mirt's ``fscores``; float64 on ``device``): the scores a
    calibration result carries, whatever grid the fit used."""
    return _eap_array(np.asarray(y, dtype=float), bank, SCORE_QUADPTS, THETA_RANGE, 0.0, 1.0,
                      device=device, memory_limit=memory_limit,
                      quadrature=check_quadrature(quadrature))


def _resident_scores(y, bank: ItemBank):
    """Scores on a device, checked there: (subjects, bank items), in [0, 1] or NaN."""
    xp = arrays.namespace(y)
    if len(y.shape) != 2 or y.shape[1] != len(bank):
        raise ResponseDataError(f"responses on the device have shape {tuple(y.shape)} but the "
                                f"bank has {len(bank)} items; pass (subjects, items) scores in "
                                "the bank's item order")
    bad = xp.logical_or(y < 0, y > 1)
    if bool(xp.any(bad)):
        raise ResponseDataError("responses on the device hold scores outside [0, 1]; use 0/1, "
                                "partial credit in [0, 1], or NaN for a missing answer")
    return y


def _eap_array(y, bank, quadpts, theta_range, prior_mean, prior_sd, *, device="cpu",
               dtype="float64", memory_limit=None, quadrature=SCORE_QUADRATURE):
    """:func:`eap` on scores already in the bank's item order (checked settings)."""
    if dtype not in ("float32", "float64"):
        raise ConfigError(f"dtype must be 'float32' or 'float64', got {dtype!r}")
    quad = normal_quadrature(quadpts, theta_range, prior_mean, prior_sd)
    w = _item_weights(bank)                  # the E-step kernel scales the terms on any device
    es = bank_estep(y, None, bank, quad, device=device, dtype=dtype, memory_limit=memory_limit,
                    item_scale=w)
    theta, se = arrays.to_numpy(es.theta), arrays.to_numpy(es.se)
    if check_quadrature(quadrature) == "adaptive":
        def score_on(n, rows):
            grid = normal_quadrature(n, theta_range, prior_mean, prior_sd)
            part = y if rows is None else arrays.to_numpy(y)[rows]
            res = bank_estep(part, None, bank, grid, device=device, dtype=dtype,
                             memory_limit=memory_limit or (None if rows is None
                                                           else _REFINE_MEMORY),
                             item_scale=w)
            return arrays.to_numpy(res.theta), arrays.to_numpy(res.se)

        theta, se = refine(score_on, theta, se, quadpts)
    return theta, se

_REFINE_MEMORY = 1 << 28    # bytes of work arrays for the refined grid (blocks of subjects)


def _item_weights(bank, device="cpu"):
    """1 / phi_j of a bank of continuous scores (its ``dispersion`` column): each item's term of
    the log-likelihood, score and information is divided by its dispersion, the extended
    quasi-likelihood the adaptive test uses (:mod:`atlascat.irt.dispersion`); None otherwise.
    The root search (ML / MAP / WLE) takes them on the CPU only (``device``)."""
    from .dispersion import bank_dispersion

    phi = bank_dispersion(bank)
    if phi is None:
        return None
    if str(device).lower() != "cpu":
        raise ConfigError("a bank with a dispersion column (continuous scores) is scored on the "
                          "CPU; drop device")
    return 1.0 / phi


# ------------------------------------------------------------------------ IRF pieces, log-safe
def irf_pieces(theta, a, b, c, u):
    """P, P', r = P'/(P Q) and P''/P' = a (1 - 2 sigma) for every (theta, item).

    ``theta`` of any shape; results have shape ``theta.shape + (n_items,)``. With z clipped to
    [-300, 300] (P is then at its asymptote to machine precision), e = exp(-z) is finite and
    sigma = 1/(1 + e), 1 - sigma = e sigma are both accurate (no cancellation), so Q is accurate
    when P is close to 1 and the ratio r never evaluates 0/0. Equal to ``models.probability`` /
    ``dprobability`` / ``d2probability`` (tested).
    """
    z = (np.asarray(theta, dtype=float)[..., None] - b) * a
    np.clip(z, -_Z_CLIP, _Z_CLIP, out=z)
    e = np.exp(np.negative(z, out=z), out=z)   # exp(-z), reusing z's memory
    s = np.add(e, 1.0)
    np.reciprocal(s, out=s)                    # sigma(z)
    t = np.multiply(e, s, out=e)               # 1 - sigma(z)
    rng_ = u - c
    p = c + rng_ * s
    q = (1.0 - u) + rng_ * t
    dp = (a * rng_) * s * t
    r = dp / (p * q)
    curv = np.subtract(t, s, out=t)
    curv *= a                                  # P''/P' = a (1 - 2 sigma)
    return p, dp, r, curv


_irf_pieces = irf_pieces   # former name


def estimating_terms(theta, y: np.ndarray, bank: ItemBank):
    """Score S, information I and Warm's J at one theta per subject.

    ``theta`` shape (n_subjects,), ``y`` (n_subjects, n_items) in bank order with NaN = missing.
    Returns ``(S, I, J)`` each of shape (n_subjects,), summed over each subject's observed items:
    S = sum (y - P) P'/(PQ), I = sum P'^2/(PQ), J = sum P' P''/(PQ).
    """
    y = np.asarray(y, dtype=float)
    obs = ~np.isnan(y)
    y1 = np.where(obs, y, 0.0)
    return _terms_at(np.asarray(theta, dtype=float), y1, obs, bank.params)


_CHUNK_CELLS = 1 << 17     # subjects x items per block: temporaries stay in cache


def _terms_at(theta, y1, obs, params, rows=None):
    """S, I, J at one theta per subject; ``rows`` selects the subjects of y1/obs (theta is given
    for the selected rows only). Works in blocks of subjects so temporaries stay small."""
    n_items = y1.shape[1]
    n_sub = y1.shape[0] if rows is None else rows.size
    step = max(1, _CHUNK_CELLS // max(n_items, 1))
    out = np.empty((3, n_sub))
    for start in range(0, n_sub, step):  # blocks of subjects, not one subject at a time
        sl = slice(start, start + step)
        src = sl if rows is None else rows[sl]
        out[:, sl] = _terms_block(theta[sl], y1[src], obs[src], params)
    return out[0], out[1], out[2]


def _score_parts(p, dp, r):
    """(Q r, P r) = (P'/P, P'/Q): the score is S = sum y Q r - (1 - y) P r, which equals
    sum (y - P) r without forming y - P, whose cancellation makes S exactly 0 where P rounds
    to 1 (steep items far above b), faking a finite ML estimate for a perfect pattern."""
    return dp / p, p * r


def _terms_block(theta, y1, obs, params):
    p, dp, r, curv = irf_pieces(theta, *params)
    qr, pr = _score_parts(p, dp, r)
    s = np.einsum("ij,ij->i", y1, qr) - np.einsum("ij,ij->i", np.subtract(obs, y1), pr)
    dp *= r
    dp *= obs                                  # P'^2/(PQ) on observed cells
    i = dp.sum(axis=1)
    j = np.einsum("ij,ij->i", dp, curv)
    return s, i, j


def _terms_grid(nodes, y1, obs, params):
    """S, I, J for every subject at every grid node by matrix products: (n_subjects, n_nodes)."""
    p, dp, r, curv = irf_pieces(nodes, *params)          # (G, n_items)
    qr, pr = _score_parts(p, dp, r)
    s = y1 @ qr.T - np.subtract(obs, y1) @ pr.T
    info = dp * r
    i = obs @ info.T
    j = obs @ (info * curv).T
    return s, i, j


# ---------------------------------------------------------------------------- the root finder
def _g_and_obj(method, s, i, j, loglik, theta, prior_mean, prior_sd):
    """:func:`atlascat.irt.devicesolve.estimating_function` on NumPy arrays."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return estimating_function(method, s, i, j, loglik, theta, prior_mean, prior_sd)


def _loglik_at(x, y1, obs_f, params, rows):
    """log L of the subjects ``rows`` of y1/obs_f at one theta each (x), in blocks."""
    out = np.empty(rows.size)
    step = max(1, _CHUNK_CELLS // max(y1.shape[1], 1))
    for start in range(0, rows.size, step):
        sl = slice(start, start + step)
        log_p, log_q = models.log_probability(x[sl], *params)
        yb, ob = y1[rows[sl]], obs_f[rows[sl]]
        out[sl] = np.einsum("ij,ij->i", yb, log_p) + np.einsum("ij,ij->i", ob - yb, log_q)
    return out


def _refine(method, idx, a_x, b_x, a_g, b_g, y1, obs_f, params, prior_mean, prior_sd, xtol,
            max_iter):
    """The root of each bracket [a_x, b_x] (g(a_x) > 0 >= g(b_x)) of the subjects ``idx``
    (repeats allowed: one entry per bracket): :func:`~atlascat.irt.rootfind.regula_falsi`,
    converged where the bracket is tiny or the Newton step |g| / |g'| (g' ~ -I, the expected
    information, plus the prior precision for MAP) is below xtol."""
    from .rootfind import regula_falsi

    def fun(pos, x):
        s_x, i_x, j_x = _terms_at(x, y1, obs_f, params, rows=idx[pos])
        g_x, _ = _g_and_obj(method, s_x, i_x, j_x, 0.0, x, prior_mean, prior_sd)
        return g_x, i_x + (1.0 / prior_sd**2 if method == "map" else 0.0)

    return regula_falsi(fun, a_x, b_x, a_g, b_g, xtol=xtol, max_iter=max_iter,
                        relative_step=False)


def _solve(y, bank: ItemBank, method: str, *, prior_mean=0.0, prior_sd=1.0,
           bounds=(-10.0, 10.0), grid_step=0.25, xtol=1e-9, max_iter=100) -> AbilityResult:
    nodes = search_grid(bounds, grid_step)
    lo, hi = float(nodes[0]), float(nodes[-1])
    if method == "map" and not prior_sd > 0:
        raise ConfigError(f"prior_sd must be positive, got {prior_sd}")
    y = np.asarray(y, dtype=float)
    n_sub = y.shape[0]
    obs = ~np.isnan(y)
    y1 = np.where(obs, y, 0.0)
    obs_f = obs.astype(float)
    n_obs = obs.sum(axis=1)
    params = bank.params
    log_p, log_q = models.log_probability(nodes, *params)
    w = _item_weights(bank)
    if w is not None:       # continuous scores: every term divided by the item's dispersion
        y1, obs_f = y1 * w, obs_f * w
        log_p, log_q = log_p * w, log_q * w

    # 1. grid: estimating function and objective for everyone at every node
    s_g, i_g, j_g = _terms_grid(nodes, y1, obs_f, params)
    loglik = models.loglik_matrix(y, log_p, log_q, observed=obs)
    g, obj = _g_and_obj(method, s_g, i_g, j_g, loglik, nodes[None, :], prior_mean, prior_sd)

    # 2. candidates: interior brackets with g > 0 at the left node and g <= 0 at the right one,
    #    the lower bound when g < 0 there, the upper bound when g > 0 there; keep the best
    down = (g[:, :-1] > 0) & (g[:, 1:] <= 0)
    score = np.full((n_sub, nodes.size + 1), -np.inf)
    score[:, 1:-1] = np.where(down, np.maximum(obj[:, :-1], obj[:, 1:]), -np.inf)
    score[:, 0] = np.where(g[:, 0] < 0, obj[:, 0], -np.inf)
    score[:, -1] = np.where(g[:, -1] > 0, obj[:, -1], -np.inf)
    # a subject with no candidate (g == 0 everywhere, e.g. no information) keeps the better bound
    none = ~np.isfinite(score).any(axis=1)
    score[none, 0] = np.where(obj[none, 0] >= obj[none, -1], 0.0, -np.inf)
    score[none, -1] = np.where(obj[none, 0] >= obj[none, -1], -np.inf, 0.0)
    # 3. refine every candidate bracket, then keep each subject's largest refined objective:
    #    the grid's objective ranks narrow modes (steep items) wrongly, the roots' does not
    rows, cols = np.nonzero(np.isfinite(score))
    x_pair = np.where(cols == 0, lo, hi)
    obj_pair = np.where(cols == 0, obj[rows, 0], obj[rows, -1])
    mid = (cols > 0) & (cols < nodes.size)
    if mid.any():
        r, k = rows[mid], cols[mid] - 1
        x = _refine(method, r, nodes[k], nodes[k + 1], g[r, k], g[r, k + 1], y1, obs_f, params,
                    prior_mean, prior_sd, xtol, max_iter)
        s_x, i_x, j_x = _terms_at(x, y1, obs_f, params, rows=r)
        _, obj_x = _g_and_obj(method, s_x, i_x, j_x, _loglik_at(x, y1, obs_f, params, r), x,
                              prior_mean, prior_sd)
        x_pair[mid], obj_pair[mid] = x, np.where(np.isnan(obj_x), -np.inf, obj_x)
    order = np.lexsort((-obj_pair, rows))          # by subject, best objective first
    first = order[np.r_[True, rows[order][1:] != rows[order][:-1]]]
    theta = np.empty(n_sub)
    theta[rows[first]] = x_pair[first]
    best = np.empty(n_sub, dtype=int)
    best[rows[first]] = cols[first]
    at_low, at_high = best == 0, best == nodes.size

    _, info, _ = _terms_at(theta, y1, obs_f, params)
    all_right = all_wrong = None
    if method == "ml":
        all_right = (n_obs > 0) & np.all(~obs | (y >= 1.0), axis=1)
        all_wrong = (n_obs > 0) & np.all(~obs | (y <= 0.0), axis=1)
    return finish(method, theta, info, at_low, at_high, n_obs, all_right, all_wrong,
                  prior_mean=prior_mean, prior_sd=prior_sd)


def ml(responses, bank: ItemBank, *, bounds=(-10.0, 10.0), grid_step: float = 0.25,
       xtol: float = 1e-9, device="cpu") -> AbilityResult:
    """Maximum likelihood theta with SE 1/sqrt(I(theta)); +-inf (flagged) where the likelihood
    has no interior maximum within ``bounds`` (perfect and zero patterns). ``device="cuda"``
    (or a tensor on its GPU as ``responses``) solves there (:mod:`atlascat.irt.devicesolve`)."""
    return _solve_where(responses, bank, "ml", device, bounds=bounds, grid_step=grid_step,
                        xtol=xtol)


def map_estimate(responses, bank: ItemBank, *, prior_mean: float = 0.0, prior_sd: float = 1.0,
                 bounds=(-10.0, 10.0), grid_step: float = 0.25,
                 xtol: float = 1e-9, device="cpu") -> AbilityResult:
    """Posterior mode under a N(prior_mean, prior_sd^2) prior; SE 1/sqrt(I(theta) + 1/prior_sd^2).
    ``device`` as :func:`ml`."""
    from ..validation import check_ability_settings

    check_ability_settings(prior_mean=prior_mean, prior_sd=prior_sd, bounds=bounds)
    return _solve_where(responses, bank, "map", device, prior_mean=prior_mean,
                        prior_sd=prior_sd, bounds=bounds, grid_step=grid_step, xtol=xtol)


def wle(responses, bank: ItemBank, *, bounds=(-10.0, 10.0), grid_step: float = 0.25,
        xtol: float = 1e-9, device="cpu") -> AbilityResult:
    """Warm's (1989) weighted likelihood estimate, root of S + J/(2I) = 0; SE 1/sqrt(I(theta)).

    Finite for zero and perfect patterns; flagged ``"at_bound"`` only if the root lies outside
    ``bounds``.
    """
    return _solve_where(responses, bank, "wle", device, bounds=bounds, grid_step=grid_step,
                        xtol=xtol)


def _solve_where(responses, bank, method, device, **kw) -> AbilityResult:
    """The root search on the CPU, or on a device (``device`` other than "cpu", or a tensor
    already on its GPU)."""
    if arrays.is_resident(responses):
        _item_weights(bank, "cuda")         # a bank of continuous scores: refused there
        return solve_on_device(_resident_scores(responses, bank), bank, method, **kw)
    return _solve_on(response_array(responses, bank), bank, method, device, **kw)


def _solve_on(y, bank, method, device, **kw) -> AbilityResult:
    """:func:`_solve` of scores in the bank's item order, or its device form."""
    if str(device).lower() != "cpu":
        _item_weights(bank, device)         # a bank of continuous scores: refused there
        return solve_on_device(y, bank, method, device=device, **kw)
    return _solve(y, bank, method, **kw)


# --------------------------------------------------------------------------------- public entry
@with_small_products
def estimate_ability(responses, bank: ItemBank, method: str = "eap", *, prior_mean: float = 0.0,
                     prior_sd: float = 1.0, quadpts: int = SCORE_QUADPTS, theta_range=THETA_RANGE,
                     bounds=(-10.0, 10.0), extra_items: str = "warn",
                     subject_ids=None, device="cpu",
                     quadrature: str = SCORE_QUADRATURE) -> pd.DataFrame:
    """Theta and SE for every subject, one row each.

    With L(theta) = prod_j P_j(theta)^y_j (1 - P_j(theta))^(1 - y_j) over the items answered
    and a N(mu, sigma^2) prior phi: EAP = int theta L phi / int L phi, SE its posterior SD, by
    quadrature (Bock & Mislevy, 1982); MAP maximizes L phi; ML maximizes L, SE = 1 / sqrt(I);
    WLE solves d log L / d theta + J / (2 I) = 0 with I the test information and
    J = sum_j P_j' P_j'' / (P_j Q_j) (Warm, 1989). Ordinal items: the same with the graded /
    GPCM category probabilities (Samejima, 1969; Muraki, 1992).

    Parameters
    ----------
    responses : ResponseMatrix or labelled DataFrame (aligned to the bank by item id), one
        subject's answers as a Series or dict ``{item_id: score}``, or an array in bank item order
    bank : ItemBank, or a PolyBank (graded / gpcm items; responses are ratings on the items'
        own scales, e.g. 1-10)
    method : "eap" (posterior mean, SE = posterior SD; mirt's defaults), "wle" (Warm),
        "map" (posterior mode) or "ml" (maximum likelihood)
    prior_mean, prior_sd : normal prior for EAP and MAP (one for every subject: a bank of a
        multiple-group fit, which records its groups' priors, is warned of, a
        :class:`~atlascat.irt.grouplabels.GroupPriorWarning`;
        :func:`~atlascat.irt.groupscore.score_groups` scores each under its group's)
    quadpts, theta_range : EAP quadrature (equally spaced nodes)
    quadrature : EAP: "adaptive" (the grid where it resolves the posterior, a grid 8 times
        finer for the others, :mod:`atlascat.irt.adaptquad`) or "fixed" (the grid alone:
        mirt's fscores)
    bounds : search interval of ML / MAP / WLE
    extra_items : what to do with response items the bank does not contain (e.g. the constant
        items :func:`~atlascat.calibrate` leaves out): "warn" (default: left out, with a warning
        naming them), "ignore" (left out silently) or "error" (strict: raise)
    subject_ids : ids for an array input (a ResponseMatrix brings its own)
    device : where the scores are computed: "cpu" (NumPy) or "cuda" (see :func:`eap`; ML, MAP
        and WLE by :mod:`atlascat.irt.devicesolve`)

    Returns
    -------
    DataFrame with columns ``subject_id, theta, se, n_items, flag``. ``flag`` is ``"ok"``, or for
    ML ``"perfect"`` / ``"zero"`` / ``"diverged"`` (theta = +-inf, se = inf), ``"at_bound"``
    (WLE/MAP root beyond ``bounds``), ``"no_items"`` (no response to any bank item).
    """
    from ..responses import ResponseMatrix

    from ..responses import as_labelled_responses
    from ..validation import check_ability_settings

    method = str(method).lower()
    if method not in METHODS:
        raise ConfigError(f"unknown scoring method {method!r}; use one of {', '.join(METHODS)}")
    quadrature = check_quadrature(quadrature)
    from .polybank import PolyBank

    if isinstance(responses, (ItemBank, PolyBank)) and not isinstance(bank, (ItemBank, PolyBank)):
        raise ConfigError(f"estimate_ability(responses, bank): the bank came first and the "
                          f"{type(bank).__name__} second; give the responses first (mirt's "
                          "fscores takes the model, this the answers, then the bank)")
    if not isinstance(bank, PolyBank):
        from .bank import check_bank, warn_negative_slopes

        check_bank(bank)   # a name, a path or a frame: a ConfigError saying how to load it
        warn_negative_slopes(bank)
    if method in ("eap", "map"):   # a multiple-group fit's bank under one prior: said
        from .grouplabels import warn_single_prior

        warn_single_prior(bank, "scored", (prior_mean, prior_sd))
    if isinstance(bank, PolyBank):   # ordinal items: ratings on their own scale
        from .polyscore import estimate_ordinal

        check_ability_settings(prior_mean=prior_mean, prior_sd=prior_sd, quadpts=quadpts,
                               theta_range=theta_range, bounds=bounds, extra_items=extra_items)
        return estimate_ordinal(responses, bank, method, subject_ids=subject_ids,
                                extra_items="error" if extra_items == "error" else "ignore",
                                prior_mean=prior_mean, prior_sd=prior_sd, quadpts=quadpts,
                                theta_range=theta_range, bounds=bounds, quadrature=quadrature)
    check_ability_settings(prior_mean=prior_mean, prior_sd=prior_sd, quadpts=quadpts,
                           theta_range=theta_range, bounds=bounds, extra_items=extra_items)
    responses = as_labelled_responses(responses)
    if isinstance(responses, ResponseMatrix) and subject_ids is None:
        subject_ids = responses.subject_ids
    if isinstance(responses, ResponseMatrix) and responses.n_items:
        known = {str(i) for i in bank.item_ids}
        unknown = [str(i) for i in responses.item_ids if str(i) not in known]
        if len(unknown) == responses.n_items:   # every score would be the prior's
            raise ResponseDataError(
                f"none of the responses' {responses.n_items} items is in the bank (e.g. "
                f"{unknown[:3]} vs {[str(i) for i in bank.item_ids[:3]]}); check the id format "
                "(R-style 'X514' vs '514': normalize_item_ids) or score with the bank these "
                "items were calibrated in")
        if extra_items == "warn" and unknown:
            from ..errors import warn_user

            warn_user(f"{len(unknown)} item(s) of the responses are not in the bank and were "
                      f"left out of the scores, e.g. {unknown[:5]} (calibrate drops items "
                      "everyone answered alike); pass extra_items='ignore' to silence this "
                      "or 'error' to refuse")
    if extra_items == "warn":
        extra_items = "ignore"
    y = response_array(responses, bank, extra=extra_items)
    if method == "eap":
        theta, se = _eap_array(y, bank, quadpts, theta_range, prior_mean, prior_sd,
                               device=device, quadrature=quadrature)
        n_obs = (~np.isnan(y)).sum(axis=1)
        flag = np.where(n_obs == 0, "no_items", "ok").astype(object)
        res = AbilityResult(theta, se, n_obs, flag, "eap")
    else:
        res = _solve_on(y, bank, method, device, prior_mean=prior_mean, prior_sd=prior_sd,
                        bounds=bounds)
    df = res.to_frame(subject_ids)
    df.attrs["method"] = method
    return df
