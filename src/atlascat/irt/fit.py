"""Model fit: limited-information M2 with RMSEA / SRMSR / CFI / TLI, item fit S-X2, person fit
lz / lz*, Q3 residual correlations, and partition-wise M2 for banks too large for one M2.

M2 (Maydeu-Olivares and Joe, 2005, 2006)
-----------------------------------------
Moments: the n univariate and n(n-1)/2 bivariate proportions of correct answers,
p = (p_i, p_ij), against their model values pi = (pi_i, pi_ij), with

    pi_i = sum_q w_q P_i(theta_q),   pi_ij = sum_q w_q P_i(theta_q) P_j(theta_q)

on the quadrature grid (mirt's: 61 nodes on [-6, 6], N(0, 1) weights). With Xi the model
covariance of the moment indicators (Xi[A, B] = pi_{A u B} - pi_A pi_B, third and fourth order
moments included) and Delta = d pi / d gamma' the Jacobian in the *estimated* parameters gamma,

    M2 = N (p - pi)' C (p - pi),   C = Xi^-1 - Xi^-1 Delta (Delta' Xi^-1 Delta)^-1 Delta' Xi^-1,

computed stably as N || z - Z (Z^+ z) ||^2 with L L' = Xi, z = L^-1 (p - pi), Z = L^-1 Delta
(equal to mirt's orthogonal-complement form). df = n + n(n-1)/2 - (number of free parameters).
The Jacobian is analytic in the slope-intercept parameters (a, d = -a b, c, u):
dP/da = (u - c) s (1 - s) theta, dP/dd = (u - c) s (1 - s), dP/dc = 1 - s, dP/du = s.

Which parameters count as estimated is the caller's statement (``estimated``):
``"none"`` (the bank is known, e.g. simulated truth: df = number of moments), ``"rasch"``
(intercepts + the latent variance: mirt's Rasch, slopes fixed and theta ~ N(mu, sigma^2) with
sigma^2 estimated, sigma given as ``prior_sd``), ``"1pl"`` (intercepts + one common slope),
``"2pl"``, ``"3pl"``, ``"4pl"``. The Rasch variance column is the derivative of the quadrature
weights w_q ~ exp(-(x_q - mu)^2 / (2 sigma^2)) on the fixed grid (mirt's discretization):
d pi_A / d sigma^2 = sum_q w_q g_q K_A(x_q), g_q = h_q - sum_r w_r h_r,
h = (x - mu)^2 / (2 sigma^4);
it spans the same space as the common-slope column of the equivalent 1PL, so the Rasch and 1PL
forms of one fit give the same M2 on n + n(n-1)/2 - (n + 1) df (LSAT6: mirt's 5.2916 on 9 df).
Examples: LSAT7 2PL: 5 + 10 - 10 = 5 df (mirt's M2 11.938 on 5 df); the same data's 32-cell
table has 2^5 - 1 - 10 = 21 df, mirt's "model df" of the full-information G2, not of M2.

RMSEA = sqrt(max(M2/df - 1, 0) / (N - 1)); its 90% interval inverts the noncentral chi-square
(lambda with F(M2; df, lambda) = 0.95 and 0.05, RMSEA = sqrt(lambda / (N df))), as mirt does.
SRMSR: root mean square of observed minus model-implied inter-item correlations. CFI and TLI
compare with the independence model (item intercepts only: pi_i = p_i, pi_ij = p_i p_j), whose
M2 has n(n-1)/2 df.

S-X2 (Orlando and Thissen, 2000)
--------------------------------
For item i and summed score k = 1 .. n-1, the observed proportion correct among subjects with
score k against E_ik = int P_i f*_i(k-1 | theta) phi / int f(k | theta) phi, with f and the
leave-item-out f*_i from the Lord-Wingersky recursion. Score groups are collapsed as mirt
1.45.1's ``collapseCells`` with ``mincell`` (default 1; :mod:`atlascat.irt.sx2table`): empty
groups dropped, a group of one subject merged into the next, then while an expected count
(correct or incorrect) is below mincell, the first such group merged into its neighbour with
fewer subjects. S-X2 = sum_groups N_k (O_ik - E_ik)^2 / (E_ik (1 - E_ik)), df = groups - the
item's free parameters, counted as mirt does: a shared one (the 1PL's common slope, the Rasch
latent variance) counts for every item (Rasch and 1PL: 2). S-X2 is NaN where df = 0;
RMSEA_S_X2 = sqrt(max(S-X2 / df - 1, 0) / (N - 1)). On mirt's parameters this is mirt's
``itemfit(mod)`` to ~1e-13 (tests/test_sx2_parity.py).

Person fit
----------
lz (Drasgow, Levine and Williams, 1985) = (l0 - E l0) / sqrt(Var l0) at theta-hat, and Snijders'
(2001) lz*, which corrects mean and variance for the estimation of theta (ML, WLE or MAP).

Q3 (Yen, 1984)
--------------
Correlations across subjects of the residuals y_ij - P_j(theta_i), pairwise over co-observed
subjects; summary with Christensen et al.'s (2017) Q3* = Q3 - mean(Q3).

All of it accepts pattern frequencies (``ResponseMatrix.weights``): N = sum of weights.
Missing answers, as mirt 1.45.1: M2 takes every answer, each moment p_A from the rows that
answered its items (n_A of them; pairwise available cases), and weighs its residual by them:
M2 = (1/N) r' C r with r_A = n_A (p_A - pi_A), N the rows with an answer (= N (p - pi)' C
(p - pi) with complete data); SRMSR from the pairwise correlations, the null model's M2 as
(1/N) sum n_ij^2 (p_ij - p_i p_j)^2 / (v_i v_j). S-X2 uses the rows with every item answered
(mirt's ``itemfit(mod, na.rm = TRUE)``; mirt refuses without it).

References
----------
Maydeu-Olivares, A. and Joe, H. (2005). Limited- and full-information estimation and
goodness-of-fit testing in 2^n contingency tables. JASA, 100, 1009-1020.
Maydeu-Olivares, A. and Joe, H. (2006). Limited information goodness-of-fit testing in
multidimensional contingency tables. Psychometrika, 71, 713-732.
Orlando, M. and Thissen, D. (2000). Likelihood-based item-fit indices for dichotomous item
response theory models. Applied Psychological Measurement, 24, 50-64.
Lord, F. M. and Wingersky, M. S. (1984). Comparison of IRT true-score and equipercentile
observed-score "equatings". Applied Psychological Measurement, 8, 453-461.
Drasgow, F., Levine, M. V. and Williams, E. A. (1985). Appropriateness measurement with
polychotomous item response models and standardized indices. BJMSP, 38, 67-86.
Snijders, T. A. B. (2001). Asymptotic null distribution of person fit statistics with estimated
person parameter. Psychometrika, 66, 331-342.
Yen, W. M. (1984). Effects of local item dependence on the fit and equating performance of the
three-parameter logistic model. Applied Psychological Measurement, 8, 125-145.
Christensen, K. B., Makransky, G. and Horton, M. (2017). Critical values for Yen's Q3.
Applied Psychological Measurement, 41, 178-194.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd
from scipy import linalg
from scipy.special import expit

from .defaults import QUADPTS, THETA_RANGE
from ..errors import ConfigError, ResponseDataError, warn_user
from ..validation import as_generator
from . import models
from .ability import estimate_ability, irf_pieces, response_array
from .bank import ItemBank, check_bank
from .progress import stepper
from .quadrature import normal_quadrature
from .sx2table import sx2_frame, table_sx2

__all__ = ["ESTIMATED", "M2Result", "m2", "m2_partitioned", "partition_items", "rmsea_ci", "sx2",
           "summed_score_distribution", "person_fit", "q3", "free_parameters", "m2_df", "null_m2"]

ESTIMATED = ("none", "rasch", "1pl", "2pl", "3pl", "4pl")
# free parameters per item (the 1PL adds one common slope)
_PER_ITEM = {"none": 0, "rasch": 1, "1pl": 1, "2pl": 2, "3pl": 3, "4pl": 4}
# plus one shared parameter: the 1PL's common slope, the Rasch model's latent variance
_SHARED = {"rasch": 1, "1pl": 1}
MAX_M2_ITEMS = 150
_PAIRWISE_M2 = ("M2 with missing answers takes each moment from the subjects who answered its "
                "items (pairwise, as mirt's M2(mod)), but its covariance assumes one set of "
                "subjects: with near-constant items M2, RMSEA and SRMSR can be far off (dense "
                "ARC, 2193 x 60, 17% blanked at random: M2 5-9 times, SRMSR 2.6 times the "
                "complete data's); read them as rough, or fit the rows with every answer")


# ---------------------------------------------------------------------------------- helpers
def _estimated(bank: ItemBank, estimated) -> str:
    est = check_bank(bank).model if estimated is None else str(estimated).lower()
    if est not in ESTIMATED:
        raise ConfigError(f"estimated must be one of {', '.join(ESTIMATED)} (or None for the "
                          f"bank's model), got {estimated!r}")
    return est


def free_parameters(n_items: int, estimated: str) -> int:
    """Number of free item parameters of ``n_items`` items under ``estimated``."""
    if estimated not in _PER_ITEM:
        raise ConfigError(f"estimated must be one of {', '.join(ESTIMATED)}, got {estimated!r}")
    return n_items * _PER_ITEM[estimated] + _SHARED.get(estimated, 0)


def m2_df(n_items: int, estimated: str) -> tuple[int, int, int]:
    """(df, moments, free parameters) of :func:`m2` on ``n_items`` items: n + n(n-1)/2
    moments less the parameters ``estimated`` (:data:`ESTIMATED`) frees."""
    n_mom = n_items + n_items * (n_items - 1) // 2
    n_free = free_parameters(n_items, estimated)
    return n_mom - n_free, n_mom, n_free


def _weights_of(responses, n_rows, weights):
    if weights is None:
        weights = getattr(responses, "weights", None)
    if weights is None:
        return np.ones(n_rows)
    w = np.asarray(weights, dtype=float).reshape(-1)
    if w.shape != (n_rows,) or np.any(~np.isfinite(w)) or np.any(w < 0):
        raise ResponseDataError(f"weights must be {n_rows} finite non-negative frequencies")
    return w


_NOT_BINARY = ("tests right/wrong (0/1) answers, and these are continuous scores or ratings (a "
               "bank folder's metric, partial credit): make them 0/1 first (ResponseMatrix.binarize)")


def _complete_binary(y, w, what: str):
    """Rows with every item observed (listwise), checked to be 0/1."""
    keep = ~np.isnan(y).any(axis=1) & (w > 0)
    y, w = y[keep], w[keep]
    if y.shape[0] == 0:
        raise ResponseDataError(
            f"{what} needs subjects who answered every item; none did. Use a partition "
            "(--partition-size) or a subset of items with complete answers"
        )
    if np.any((y != 0) & (y != 1)):
        raise ResponseDataError(f"{what} {_NOT_BINARY}")
    return y, w, int(np.count_nonzero(~keep))


def _available_binary(y, w):
    """mirt 1.45.1's M2 moments with missing answers (pairwise available cases): every row
    that answered an item counts for its univariate moment and every row that answered both
    items of a pair for the pair's. Returns the means p_i (n,), the matrix of pairwise means
    P[i, j] = E[y_i y_j] (diagonal p_i), the counts n_i (n,) and n_ij (n, n), the rows kept
    (w > 0, at least one answer) and their number left out."""
    obs = ~np.isnan(y)
    keep = obs.any(axis=1) & (w > 0)
    y, w, obs = y[keep], w[keep], obs[keep]
    y0 = np.where(obs, y, 0.0)
    if np.any((y0 != 0) & (y0 != 1)):
        raise ResponseDataError(f"M2 {_NOT_BINARY}")
    wo = obs * w[:, None]
    n1 = w @ obs
    n2 = wo.T @ obs
    with np.errstate(invalid="ignore", divide="ignore"):
        p1 = (w @ y0) / n1
        cross = ((y0 * w[:, None]).T @ y0) / n2
    return p1, cross, n1, n2, w, int(np.count_nonzero(~keep))


def _subject_ids(responses, n):
    ids = getattr(responses, "subject_ids", None)
    return np.asarray([str(i) for i in (range(n) if ids is None else ids)])


def _aligned(responses, bank, weights):
    y = response_array(responses, bank)
    empty = np.flatnonzero(np.isnan(y).all(axis=0))
    if empty.size:
        raise ResponseDataError(
            f"{empty.size} bank item(s) have no response at all, e.g. "
            f"{bank.item_ids[empty[:5]].tolist()}; fit the bank subset the responses cover "
            "(bank.subset(...))")
    return y, _weights_of(responses, y.shape[0], weights)


def rmsea_ci(stat: float, df: float, n: float, ci: float = 0.9) -> tuple[float, float]:
    """RMSEA confidence interval by inverting the noncentral chi-square (as mirt's RMSEA.CI):
    lambda_l: F(stat; df, lambda_l) = 1 - alpha/2, lambda_u: F(stat; df, lambda_u) = alpha/2,
    RMSEA = sqrt(lambda / (n df)); a bound whose equation has no root is 0."""
    from scipy.optimize import brentq  # lazy: scipy.optimize costs ~0.1 s at import
    from scipy.stats import chi2, ncx2, norm  # lazy: scipy.stats costs ~1 s at import

    alpha = (1.0 - ci) / 2.0
    if not (df > 0 and np.isfinite(stat)):
        return float("nan"), float("nan")

    def cdf(lam):
        return ncx2.cdf(stat, df, lam) if lam > 0 else chi2.cdf(stat, df)

    def normal_approx(target):
        # F(stat; df, lam) = target with the noncentral chi-square ~ N(df + lam, 2 (df + 2 lam)):
        # for the huge statistics where ncx2.cdf loses all precision (or returns NaN)
        z = float(norm.ppf(target))
        s = -2.0 * z + 2.0 * np.sqrt(max(z * z + stat - df / 2.0, 0.0))
        return max((s * s - 2.0 * df) / 4.0, 0.0)

    def solve(target, upper):
        f0 = cdf(0.0) - target
        if not np.isfinite(f0):
            return normal_approx(target)
        if f0 <= 0:
            return 0.0
        hi = upper
        while True:
            f_hi = cdf(hi) - target
            if not np.isfinite(f_hi) or hi > 1e12:
                return normal_approx(target)
            if f_hi <= 0:
                break
            hi *= 2.0
        try:
            return brentq(lambda lam: cdf(lam) - target, 0.0, hi, xtol=1e-10, rtol=1e-12)
        except ValueError:  # a NaN inside the bracket
            return normal_approx(target)

    lam_l = solve(1.0 - alpha, max(stat, 1.0))
    lam_u = solve(alpha, max(n, 5.0 * stat, 1.0))
    return float(np.sqrt(lam_l / (n * df))), float(np.sqrt(lam_u / (n * df)))


# ------------------------------------------------------------------------------ M2 machinery
def _pair_index(n):
    i, j = np.triu_indices(n, 1)
    return i, j


def _check_pairs(n2, item_ids, what: str, verb: str = "answered"):
    """The pair index (i, j) of the items; every pair must have been ``verb`` together by some
    subject (``n2`` the pairwise counts), else one line: M2's pairwise moments need it."""
    i, j = _pair_index(n2.shape[0])
    never = np.flatnonzero(n2[i, j] <= 0)
    if never.size:
        k = never[0]
        raise ResponseDataError(
            f"{never.size} pair(s) of items were never {verb} by the same subject, e.g. "
            f"{item_ids[i[k]]!r} and {item_ids[j[k]]!r}; {what} needs every pair {verb} "
            "together by some subjects: fit a subset of the items")
    return i, j


def _pairs_of(n, pi, pj):
    """For every item k: the indices of the n-1 pairs that contain k and each pair's other item."""
    m = pi.size
    pid = np.arange(m)
    owner = np.concatenate([pi, pj])
    other = np.concatenate([pj, pi])
    pair = np.concatenate([pid, pid])
    order = np.lexsort((other, owner))
    return pair[order].reshape(n, n - 1), other[order].reshape(n, n - 1)


def _xi_matrix(P, w):
    """Model covariance of the univariate and bivariate moment indicators, (s, s), and pi.

    Xi[A, B] = pi_{A u B} - pi_A pi_B. For disjoint A, B this is sum_q w (K_A - pi_A)(K_B - pi_B)
    with the kernels K_A = prod_{k in A} P_k (one matrix product of centred kernels); entries of
    overlapping A, B (which share an item, y_k^2 = y_k) are then set explicitly."""
    n = P.shape[1]
    pi_i, pj = _pair_index(n)
    m = pi_i.size
    pi1 = w @ P
    Pw = P * w[:, None]
    E2full = Pw.T @ P                                   # sum_q w P_i P_j (i != j exact)
    pi2 = E2full[pi_i, pj]
    K2 = P[:, pi_i] * P[:, pj]                          # (Q, m) pair kernels
    pairs, others = _pairs_of(n, pi_i, pj)
    s = n + m
    xi = np.empty((s, s))
    # univariate block
    x11 = E2full - np.outer(pi1, pi1)
    x11[np.diag_indices(n)] = pi1 * (1.0 - pi1)
    xi[:n, :n] = x11
    # univariate x bivariate: E[y_k y_i y_j] - pi_k pi_ij; = pi_ij (1 - pi_k) when k is i or j
    R12 = Pw.T @ K2                                     # sum_q w P_k P_i P_j
    x12 = R12 - np.outer(pi1, pi2)
    rows = np.repeat(np.arange(n), n - 1)
    cols = pairs.reshape(-1)
    x12[rows, cols] = pi2[cols] * (1.0 - pi1[rows])
    xi[:n, n:] = x12
    xi[n:, :n] = x12.T
    # bivariate block, centred kernels
    Kc = K2 - pi2
    blk = (Kc * w[:, None]).T @ Kc
    del Kc
    # pairs p = (k, x_p), q = (k, x_q) sharing item k: union {k, x_p, x_q} -> R12[x_q, p]
    off = ~np.eye(n - 1, dtype=bool)
    pp = np.broadcast_to(pairs[:, :, None], (n, n - 1, n - 1))[:, off]
    qq = np.broadcast_to(pairs[:, None, :], (n, n - 1, n - 1))[:, off]
    xx = np.broadcast_to(others[:, None, :], (n, n - 1, n - 1))[:, off]
    blk[pp, qq] = R12[xx, pp] - pi2[pp] * pi2[qq]
    blk[np.diag_indices(m)] = pi2 * (1.0 - pi2)
    xi[n:, n:] = blk
    return xi, pi1, pi2, E2full


def _delta_matrix(P, w, blocks):
    """Jacobian d(pi_1, pi_2)/d gamma'. ``blocks``: list of (G, shared) with G = dP/dparam
    (Q, n); shared=True sums the item columns into one (a common slope); shared="weights" makes
    G a (Q,) derivative of the log quadrature weights (the Rasch latent variance), one column
    sum_q w_q G_q K_A(x_q)."""
    n = P.shape[1]
    pi_i, pj = _pair_index(n)
    m = pi_i.size
    cols = []
    ar = np.arange(n)
    for G, shared in blocks:
        if isinstance(shared, str) and shared == "weights":
            wg = w * G
            E2 = (P * wg[:, None]).T @ P
            cols.append(np.concatenate([wg @ P, E2[pi_i, pj]])[:, None])
            continue
        uni = w @ G
        B = (G * w[:, None]).T @ P                        # B[i, j] = sum_q w G_i P_j
        if shared:
            cols.append(np.concatenate([uni, B[pi_i, pj] + B[pj, pi_i]])[:, None])
        else:
            D = np.zeros((n + m, n))
            D[ar, ar] = uni
            D[n + np.arange(m), pi_i] = B[pi_i, pj]
            D[n + np.arange(m), pj] = B[pj, pi_i]
            cols.append(D)
    if not cols:
        return np.zeros((n + m, 0))
    return np.hstack(cols)


def _jacobian_blocks(nodes, bank: ItemBank, estimated: str, weights=None,
                     prior_mean: float = 0.0, prior_sd: float = 1.0):
    a, b, c, u = bank.params
    p, dp, r, curv = irf_pieces(nodes, a, b, c, u)
    s = expit(a * (nodes[:, None] - b))
    ds = (u - c) * s * (1.0 - s)                      # dP/dd
    blocks = []
    if estimated == "none":
        return p, blocks
    blocks.append((ds, False))                        # intercepts d
    if estimated == "1pl":
        blocks.append((ds * nodes[:, None], True))    # common slope
    if estimated == "rasch":                          # latent variance: d log w_q / d sigma^2
        if weights is None:
            weights = normal_quadrature(nodes.size, (nodes[0], nodes[-1]), prior_mean,
                                        prior_sd).weights
        sq = (nodes - prior_mean) ** 2 / (2.0 * prior_sd**4)
        blocks.append((sq - weights @ sq, "weights"))
    if estimated in ("2pl", "3pl", "4pl"):
        blocks.append((ds * nodes[:, None], False))   # slopes a
    if estimated in ("3pl", "4pl"):
        blocks.append((1.0 - s, False))               # lower asymptotes c
    if estimated == "4pl":
        blocks.append((s, False))                     # upper asymptotes u
    return p, blocks


def _m2_stat(resid, xi, delta, n_total):
    """N || z - Z Z^+ z ||^2 with z = L^-1 resid, Z = L^-1 delta (Cholesky L of Xi; Xi is
    overwritten)."""
    try:
        L = linalg.cholesky(xi, lower=True, overwrite_a=True, check_finite=False)
        z = linalg.solve_triangular(L, resid, lower=True, check_finite=False)
        Z = linalg.solve_triangular(L, delta, lower=True, check_finite=False) \
            if delta.shape[1] else delta
    except linalg.LinAlgError:
        # not numerically positive definite: symmetric inverse square root on the supported part
        vals, vecs = linalg.eigh(xi, check_finite=False)
        keep = vals > vals.max() * 1e-12
        W = vecs[:, keep] / np.sqrt(vals[keep])
        z = W.T @ resid
        Z = W.T @ delta
        warn_user("the moment covariance Xi is not positive definite (near-deterministic "
                  "items?); M2 uses its pseudo-inverse", RuntimeWarning)
    if Z.shape[1]:
        # project z off the column space of Z (normal equations, eigen-solved for rank safety)
        vals, vecs = linalg.eigh(Z.T @ Z, check_finite=False)
        keep = vals > max(vals.max(), 0.0) * 1e-13
        coef = vecs[:, keep] @ ((vecs[:, keep].T @ (Z.T @ z)) / vals[keep])
        z = z - Z @ coef
    return float(n_total * (z @ z))


def null_m2(p1: np.ndarray, p2: np.ndarray, n_total: float, pair_counts=None) -> float:
    """M2 of the independence model (item intercepts estimated): N sum_{i<j} phi_ij^2.

    With pi_i = p_i and pi_ij = p_i p_j, the linear map (y_i, y_i y_j) -> (y_i,
    (y_i - p_i)(y_j - p_j)) makes Xi diagonal (v_i; v_i v_j, v = p (1 - p)) and confines Delta to
    the univariate block, so the quadratic form reduces to the squared phi coefficients. With
    missing answers (``pair_counts`` n_ij, the rows that answered both items) each term is
    weighted as in :func:`m2`: (1/N) sum n_ij^2 (p_ij - p_i p_j)^2 / (v_i v_j)."""
    n = p1.size
    pi_i, pj = _pair_index(n)
    v = p1 * (1.0 - p1)
    r2 = (p2 - p1[pi_i] * p1[pj]) ** 2 / (v[pi_i] * v[pj])
    if pair_counts is None:
        return float(n_total * np.sum(r2))
    return float(np.sum(np.asarray(pair_counts, dtype=float) ** 2 * r2) / n_total)


def _corr(cov):
    sd = np.sqrt(np.clip(np.diag(cov), 1e-300, None))
    return cov / np.outer(sd, sd)


@dataclass
class M2Result:
    """M2 and the fit indices derived from it (mirt's names)."""

    M2: float
    df: int
    p: float
    RMSEA: float
    RMSEA_5: float
    RMSEA_95: float
    SRMSR: float
    TLI: float
    CFI: float
    n: float
    n_items: int
    n_free: int
    estimated: str
    M2_null: float = float("nan")
    df_null: int = 0
    n_dropped: int = 0
    statistic: str = "M2"   # ordinal banks: mirt's M2* or C2 (atlascat.irt.polyfitstats)
    residual_correlations: np.ndarray | None = field(default=None, repr=False)

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("residual_correlations")
        return {k: (float(v) if isinstance(v, (np.floating, float)) else v) for k, v in d.items()}


def m2(responses, bank: ItemBank, *, estimated=None, quadpts: int = QUADPTS,
       theta_range=THETA_RANGE, prior_mean: float = 0.0, prior_sd: float = 1.0,
       ci: float = 0.9, weights=None, null_model: bool = True, progress=None) -> M2Result:
    """M2 statistic, df, p-value, RMSEA with CI, SRMSR, TLI and CFI (see the module docstring).

    Parameters
    ----------
    responses : ResponseMatrix (aligned to the bank by id; pattern frequencies used as weights)
        or 0/1 array in bank order; NaN = missing (every answer is used: module docstring)
    bank : ItemBank with the parameters whose fit is tested (at most ``MAX_M2_ITEMS`` items;
        use :func:`m2_partitioned` for larger banks)
    estimated : which parameters were estimated from these data: "none", "rasch", "1pl",
        "2pl", "3pl", "4pl", or None for the bank's model
    weights : optional row frequencies (default: ``responses.weights``)
    progress : optional ``progress(done, total)``, called at the start and after the moments
        and the quadratic form (150 items: a few seconds each)
    """
    from scipy.stats import chi2  # lazy: scipy.stats costs ~1 s at import

    from ..validation import check_fit_sample

    est = _estimated(bank, estimated)
    y, w = _aligned(responses, bank, weights)
    p1, cross, n1, n2, w, dropped = _available_binary(y, w)
    check_fit_sample(w, "M2")
    n_items = y.shape[1]
    if n_items < 2:
        raise ConfigError("M2 needs at least 2 items")
    if n_items > MAX_M2_ITEMS:
        raise ConfigError(
            f"M2 on {n_items} items needs a {n_items * (n_items + 1) // 2}-square moment matrix; "
            f"use m2_partitioned (CLI: --partition-size 100) for banks over {MAX_M2_ITEMS} items"
        )
    N = float(w.sum())
    if np.any(n1 < N):   # mirt's M2(mod) too; its Xi assumes every moment from the same rows
        warn_user(_PAIRWISE_M2)
    pi_i, pj = _check_pairs(n2, bank.item_ids, "M2")
    p2 = cross[pi_i, pj]

    quad = normal_quadrature(quadpts, theta_range, prior_mean, prior_sd)
    wq = quad.weights
    step = stepper(progress, 2)
    P, blocks = _jacobian_blocks(quad.nodes, bank, est, wq, prior_mean, prior_sd)
    xi, pi1, pi2, e2 = _xi_matrix(P, wq)
    delta = _delta_matrix(P, wq, blocks)
    step()
    # each moment's residual weighted by the rows that answered it, n_A (p_A - pi_A) / N: with
    # complete answers N (p - pi)' C (p - pi); with missing ones mirt's (1/N) r' C r
    resid = np.concatenate([n1 * (p1 - pi1), n2[pi_i, pj] * (p2 - pi2)]) / N
    stat = _m2_stat(resid, xi, delta, N)
    step()
    df, n_mom, n_free = m2_df(n_items, est)
    if df <= 0:
        raise ConfigError(f"M2 has {df} degrees of freedom ({n_mom} moments, {n_free} free "
                          "parameters); use more items")
    pval = float(chi2.sf(stat, df))
    rmsea = float(np.sqrt(max(stat / df - 1.0, 0.0) / (N - 1.0))) if N > 1 else float("nan")
    lo, hi = rmsea_ci(stat, df, N, ci)

    # SRMSR: observed vs model-implied inter-item correlations
    obs_cov = cross - np.outer(p1, p1)
    mod = e2.copy()
    mod[np.diag_indices(n_items)] = pi1
    mod_cov = mod - np.outer(pi1, pi1)
    with np.errstate(invalid="ignore", divide="ignore"):
        rdiff = _corr(obs_cov) - _corr(mod_cov)
    srmsr = float(np.sqrt(np.mean(rdiff[pi_i, pj] ** 2)))
    resmat = np.full((n_items, n_items), np.nan)
    resmat[pj, pi_i] = rdiff[pj, pi_i]

    m2n, dfn, tli, cfi = float("nan"), n_mom - n_items, float("nan"), float("nan")
    if null_model:
        if np.any((p1 <= 0) | (p1 >= 1)):
            warn_user("an item has proportion correct 0 or 1; CFI/TLI are undefined",
                      RuntimeWarning)
        else:
            m2n = null_m2(p1, p2, N, n2[pi_i, pj])
            tli = float((m2n / dfn - stat / df) / (m2n / dfn - 1.0))
            denom = m2n - dfn
            cfi = float(np.clip(1.0 - (stat - df) / denom, 0.0, 1.0)) if denom > 0 else 1.0
    return M2Result(M2=stat, df=int(df), p=pval, RMSEA=rmsea, RMSEA_5=lo, RMSEA_95=hi,
                    SRMSR=srmsr, TLI=tli, CFI=cfi, n=N, n_items=n_items, n_free=n_free,
                    estimated=est, M2_null=m2n, df_null=int(dfn), n_dropped=dropped,
                    residual_correlations=resmat)


def partition_items(n_items: int, partition_size: int = 100, rng=None, *,
                    max_size: int | None = None) -> list[np.ndarray]:
    """Split item positions into round(n/size) nearly equal parts of about ``partition_size``
    items (in bank order, or shuffled by ``rng``, a Generator or a seed); with ``max_size``,
    into enough parts that none is larger (M2's partitions: ``MAX_M2_ITEMS``).

    839 items with size 100 give 8 parts of 105/104 items, the paper's ARC partitions."""
    if partition_size < 2:
        raise ConfigError(f"partition_size must be >= 2, got {partition_size}")
    if max_size is not None and partition_size > max_size:   # refused before any work
        raise ConfigError(f"partition size {partition_size} is over the {max_size} items one M2 "
                          f"takes; use at most {max_size} (CLI: --partition-size)")
    order = np.arange(n_items) if rng is None else as_generator(rng).permutation(n_items)
    k = max(1, int(np.floor(n_items / partition_size + 0.5)), -(-n_items // (max_size or max(n_items, 1))))
    return [np.sort(part) for part in np.array_split(order, k)]


def m2_partitioned(responses, bank: ItemBank, *, partition_size: int = 100, rng=None,
                   partitions=None, estimated=None, weights=None, progress=None, **kwargs):
    """M2 per item partition (the paper's procedure for banks too large for one M2).

    Each partition's M2 uses every answer to its items (pairwise, as :func:`m2`). Returns
    ``(table, summary)``: one row per partition (partition, n_items, n, M2, df, p, RMSEA,
    RMSEA_5, RMSEA_95, SRMSR, TLI, CFI) and the means over partitions (``RMSEA`` = average
    RMSEA, as reported in the paper), plus ``n_partitions``. ``progress``: optional
    ``progress(done, total)`` over the partitions.
    """
    est = _estimated(bank, estimated)
    y, w = _aligned(responses, bank, weights)
    parts = partitions if partitions is not None else partition_items(
        len(bank), partition_size, rng, max_size=MAX_M2_ITEMS)
    rows = []
    step = stepper(progress, len(parts))
    for k, idx in enumerate(parts):
        idx = np.asarray(idx, dtype=np.intp)
        sub = bank.subset(idx)
        res = m2(y[:, idx], sub, estimated=est, weights=w, **kwargs)
        step()
        d = res.to_dict()
        rows.append({"partition": k, "n_items": res.n_items, "n": res.n,
                     **{key: d[key] for key in ("M2", "df", "p", "RMSEA", "RMSEA_5", "RMSEA_95",
                                                "SRMSR", "TLI", "CFI")}})
    table = pd.DataFrame(rows)
    summary = {key: float(table[key].mean()) for key in
               ("M2", "df", "p", "RMSEA", "RMSEA_5", "RMSEA_95", "SRMSR", "TLI", "CFI")}
    summary["n_partitions"] = len(parts)
    summary["estimated"] = est
    return table, summary


# ------------------------------------------------------------------------------------- S-X2
def summed_score_distribution(P: np.ndarray) -> np.ndarray:
    """Lord-Wingersky: f(k | theta_q) for k = 0..n, from P (n_nodes, n_items); (n_nodes, n+1)."""
    nq, n = P.shape
    f = np.zeros((nq, n + 1))
    f[:, 0] = 1.0
    for j in range(n):  # the recursion is sequential in items; each step is vectorized
        pj = P[:, j:j + 1]
        f[:, 1:j + 2] = f[:, 1:j + 2] * (1.0 - pj) + f[:, 0:j + 1] * pj
        f[:, 0] *= 1.0 - P[:, j]
    return f


def _leave_one_out(f, P):
    """Score distributions without item i for items in P's columns: (n_nodes, n_block, n).

    Inverts f = f*(1 - P_i) (+) f*(k-1) P_i stably: forward where P_i <= 1/2 (dividing by
    Q_i >= 1/2), backward otherwise (dividing by P_i > 1/2), so errors never grow."""
    nq, n1 = f.shape
    n = n1 - 1
    blk = P.shape[1]
    Q = 1.0 - P
    fw = np.zeros((nq, blk, n))
    bw = np.zeros((nq, blk, n))
    # both directions are computed everywhere and the stable one is kept per (node, item): the
    # discarded one may overflow, harmlessly
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        qinv = np.where(Q > 0, 1.0 / Q, 0.0)
        pinv = np.where(P > 0, 1.0 / P, 0.0)
        prev = np.zeros((nq, blk))
        for k in range(n):
            prev = (f[:, k:k + 1] - P * prev) * qinv
            fw[:, :, k] = prev
        nxt = np.zeros((nq, blk))
        for k in range(n, 0, -1):
            nxt = (f[:, k:k + 1] - Q * nxt) * pinv
            bw[:, :, k - 1] = nxt
    out = np.where((P <= 0.5)[:, :, None], fw, bw)
    return np.clip(np.nan_to_num(out, nan=0.0, posinf=0.0, neginf=0.0), 0.0, None)


def sx2(responses, bank: ItemBank, *, estimated=None, mincell: float = 1.0, quadpts: int = QUADPTS,
        theta_range=THETA_RANGE, prior_mean: float = 0.0, prior_sd: float = 1.0,
        weights=None, block: int = 64) -> pd.DataFrame:
    """Orlando-Thissen S-X2 item fit of every item as mirt's ``itemfit(mod)`` (module
    docstring): columns item_id, S_X2, df_S_X2, RMSEA_S_X2, p_S_X2 (NaN where the collapsed
    table leaves no df), n_groups. Uses the subjects who answered every item (0/1 scores)."""
    est = _estimated(bank, estimated)
    y, w = _aligned(responses, bank, weights)
    y, w, _ = _complete_binary(y, w, "S-X2")
    n = y.shape[1]
    quad = normal_quadrature(quadpts, theta_range, prior_mean, prior_sd)
    P = bank.probability(quad.nodes)
    wq = quad.weights
    f = summed_score_distribution(P)
    den = wq @ f                                          # marginal P(score = k), k = 0..n
    score = y.sum(axis=1).astype(int)
    Nk = np.bincount(score, weights=w, minlength=n + 1)   # (n+1,)
    # observed correct counts O1[k, i] = sum of w over subjects with score k who got item i right
    O1 = np.zeros((n + 1, n))
    np.add.at(O1, score, y * w[:, None])
    # expected proportion correct E[k, i], k = 1..n-1
    E = np.zeros((n + 1, n))
    for start in range(0, n, block):
        sl = slice(start, min(start + block, n))
        loo = _leave_one_out(f, P[:, sl])                 # (Q, blk, n): f*_i(k) for k = 0..n-1
        num = np.einsum("q,qi,qik->ki", wq, P[:, sl], loo)  # k index = score - 1
        E[1:, sl] = num
    with np.errstate(divide="ignore", invalid="ignore"):
        E = np.where(den[:, None] > 0, E / den[:, None], 0.0)
    E = np.clip(E, 0.0, 1.0)
    ks = np.arange(1, n)                                  # scores 1..n-1 carry information
    nk = Nk[ks]
    n_par = _PER_ITEM[est] + _SHARED.get(est, 0)          # mirt counts a shared one per item
    fits = [table_sx2(np.column_stack([nk - O1[ks, i], O1[ks, i]]),
                      np.column_stack([nk * (1.0 - E[ks, i]), nk * E[ks, i]]), n_par, mincell)
            for i in range(n)]
    x2, df, groups = (np.array([fi[j] for fi in fits]) for j in range(3))
    return sx2_frame(bank.item_ids, x2, df, float(w.sum()), n_groups=groups.astype(int))


# ------------------------------------------------------------------------------- person fit
def person_fit(responses, bank: ItemBank, *, method: str = "wle", theta=None,
               prior_mean: float = 0.0, prior_sd: float = 1.0) -> pd.DataFrame:
    """Standardized log-likelihood lz and Snijders' lz* for every subject.

    lz = sum_j (y_j - P_j) w_j / sqrt(sum_j w_j^2 P_j Q_j), w_j = log(P_j / Q_j), at theta-hat.
    lz* = (W + c_n r_0) / sqrt(sum_j (w_j - c_n r_j)^2 P_j Q_j), c_n = sum P_j' w_j / sum P_j' r_j,
    r_j = P_j'/(P_j Q_j) and r_0 the estimator's own term: 0 (ML), J/(2I) (WLE),
    -(theta - mu)/sigma^2 (MAP). Small values signal misfit: ``p_lz_star`` = Phi(lz*), lower tail.
    ``"eap"``: mirt's ``personfit(mod)`` (Zh is lz) at estimate_ability's EAP; lz* NaN.

    ``theta`` may be given (then lz* assumes ``method``'s estimating equation). Subjects with
    infinite ML theta (perfect/zero patterns) get NaN (the statistics are undefined there).
    Columns subject_id, theta, n_items, lz, lz_star, p_lz_star and mirt's personfit() outfit,
    z_outfit, infit, z_infit (:mod:`atlascat.irt.meansquare`)."""
    from scipy.special import ndtr  # scipy.stats.norm.cdf's own function, without its import
    from .meansquare import mean_squares   # mirt's infit / outfit

    method = str(method).lower()
    if method not in ("ml", "wle", "map", "eap"):
        raise ConfigError(f"person_fit method must be ml, wle, map or eap, got {method!r}")
    y = response_array(responses, bank)
    ids = _subject_ids(responses, y.shape[0])
    if theta is None:
        theta = estimate_ability(y, bank, method, prior_mean=prior_mean,
                                 prior_sd=prior_sd)["theta"].to_numpy()
    theta = np.asarray(theta, dtype=float).reshape(-1)
    obs = ~np.isnan(y)
    n_obs = obs.sum(axis=1)
    finite = np.isfinite(theta)
    th = np.where(finite, theta, 0.0)
    p, dp, r, curv = irf_pieces(th, *bank.params)
    log_p, log_q = models.log_probability(th, *bank.params)   # finite, accurate near 0 and 1
    logit = np.where(obs, log_p - log_q, 0.0)
    y0 = np.where(obs, y, 0.0)
    pq = np.where(obs, np.exp(log_p + log_q), 0.0)
    W = ((y0 - p) * obs * logit).sum(axis=1)
    var = (logit**2 * pq).sum(axis=1)
    dpo = dp * obs
    rr = r * obs
    with np.errstate(divide="ignore", invalid="ignore"):
        lz = W / np.sqrt(var)
        cn = (dpo * logit).sum(axis=1) / (dpo * rr).sum(axis=1)
        wt = logit - cn[:, None] * rr
        tau2 = (wt**2 * pq).sum(axis=1)
        if method == "ml":
            r0 = np.zeros_like(th)
        elif method == "map":
            r0 = -(th - prior_mean) / prior_sd**2
        else:
            info = (dpo * rr).sum(axis=1)
            jj = (dpo * rr * curv).sum(axis=1)
            r0 = jj / (2.0 * info)
        lzs = (W + cn * r0) / np.sqrt(tau2) + (np.nan if method == "eap" else 0.0)
    bad = ~finite | (n_obs == 0) | ~(var > 0)
    lz = np.where(bad, np.nan, lz)
    lzs = np.where(bad | ~(tau2 > 0), np.nan, lzs)
    return pd.DataFrame({"subject_id": ids, "theta": theta, "n_items": n_obs, "lz": lz,
                         "lz_star": lzs, "p_lz_star": ndtr(lzs),
                         **mean_squares(y, bank.params, theta)})


# --------------------------------------------------------------------------------------- Q3
def q3(responses, bank: ItemBank, *, theta=None, method: str = "eap", weights=None,
       threshold: float = 0.2, top: int = 10):
    """Yen's Q3: correlations of residuals y_ij - P_j(theta_i) across subjects, pairwise over
    co-observed (weighted) subjects.

    Returns ``(matrix, summary)``: a DataFrame (items x items, NaN diagonal) and a dict with
    mean, sd, max_abs, max Q3* (= Q3 - mean Q3, Christensen et al. 2017), the number and share of
    pairs with |Q3| > ``threshold``, and the ``top`` pairs by |Q3|."""
    y, w = _aligned(responses, bank, weights)
    if theta is None:
        theta = estimate_ability(y, bank, method)["theta"].to_numpy()
    theta = np.asarray(theta, dtype=float).reshape(-1)
    use = np.isfinite(theta)
    y, w, theta = y[use], w[use], theta[use]
    obs = (~np.isnan(y)).astype(float)
    d = np.where(obs > 0, y - bank.probability(theta), 0.0)
    ow = obs * w[:, None]
    n_ij = ow.T @ obs
    s_i = (d * w[:, None]).T @ obs                        # sum of d_i over co-observed with j
    ss_i = (d**2 * w[:, None]).T @ obs
    s_ij = (d * w[:, None]).T @ d
    with np.errstate(divide="ignore", invalid="ignore"):
        mi = s_i / n_ij
        mj = s_i.T / n_ij
        cov = s_ij / n_ij - mi * mj
        vi = ss_i / n_ij - mi**2
        vj = ss_i.T / n_ij - mj**2
        r = cov / np.sqrt(vi * vj)
    r[np.diag_indices_from(r)] = np.nan
    r = np.where(n_ij >= 3, r, np.nan)
    ids = bank.item_ids.astype(str)
    mat = pd.DataFrame(r, index=ids, columns=ids)
    iu, ju = np.triu_indices(r.shape[0], 1)
    vals = r[iu, ju]
    ok = np.isfinite(vals)
    vals, iu, ju = vals[ok], iu[ok], ju[ok]
    if vals.size == 0:
        return mat, {"n_pairs": 0}
    mean = float(vals.mean())
    order = np.argsort(-np.abs(vals))[:top]
    summary = {
        "n_pairs": int(vals.size), "mean": mean, "sd": float(vals.std()),
        "max_abs": float(np.abs(vals).max()), "max_q3_star": float((vals - mean).max()),
        "threshold": threshold, "n_above": int(np.sum(np.abs(vals) > threshold)),
        "share_above": float(np.mean(np.abs(vals) > threshold)),
        "top_pairs": [{"item_1": ids[iu[k]], "item_2": ids[ju[k]], "q3": float(vals[k])}
                      for k in order],
    }
    return mat, summary
