"""Model fit of ordinal (graded / GPCM) banks as mirt 1.45.1 computes it: ``M2(mod)`` (M2* and
C2) with RMSEA / SRMSR / TLI / CFI, and ``itemfit(mod)``'s S-X2.

Item j has categories x_j = 0..K_j-1 with P_jk(theta) (:mod:`atlascat.irt.polytomous`); all
integrals are sums over mirt's grid (61 nodes on [-6, 6], N(0, 1) weights w_q, normalized).

M2* and C2 (Maydeu-Olivares and Joe, 2006, 2014; Cai and Hansen, 2013)
----------------------------------------------------------------------
mirt's moments for polytomous items are those of the item *scores*, not of every category:

    M2* (mirt's default): E[x_j] = int E_j(theta) phi   and   E[x_i x_j] = int E_i E_j phi (i < j)
    C2:                   P(x_j = k), k = 1..K_j-1       and   E[x_i x_j] (i < j)

with E_j(theta) = sum_k k P_jk. Xi, the model covariance of the moment indicators, is exact:
overlapping moments use E2_j = sum_k k^2 P_jk (x_j^2), e.g. Cov(x_i, x_i x_j) = int E2_i E_j -
E[x_i] E[x_i x_j], and for C2 1{x_i = k} 1{x_i = l} = 0 (k != l), 1{x_i = k} x_i x_j = k 1{x_i =
k} x_j. Delta = d(moments)/d(a_j, d_j1..) (every item parameter estimated; ``estimated="none"``:
none). M2 = N (p - pi)' C (p - pi), C = Xi^-1 - Xi^-1 Delta (Delta' Xi^-1 Delta)^-1 Delta'
Xi^-1, computed as N ||z - Q Q'z||^2 with z = L^-1 (p - pi), Q an orthonormal basis of
L^-1 Delta (pivoted QR), L L' = Xi; df = moments - free parameters: M2* has
n + n(n-1)/2 moments, which for few items is below the sum(K_j) parameters (mirt: "too few
degrees of freedom"; Science, 4 items x 4 categories, has -6 df) and C2 has sum(K_j - 1) +
n(n-1)/2. RMSEA, its 90% interval (:func:`atlascat.irt.fit.rmsea_ci`) as for binary items;
SRMSR from the item-score correlations (observed vs model) for both statistics.

The GPCM slope column: d E_j / d a_j = theta (E2_j - E_j^2) = theta Var(x_j | theta). mirt
1.45.1's ``dP`` for gpcm items, which its M2* and its C2's bivariate rows use, has instead
theta (E2_j - E_j sum_k k exp(z_k - max z)), exp(z_k) not divided by its sum (its C2's
univariate rows take numerical derivatives, which are exact); ``gpcm_slope="mirt"`` uses that
column to reproduce mirt's value (Science GPCM C2: 19.05 exact, 16.42 mirt). Graded items
are not affected. A partial credit bank (model pcm, mirt's "Rasch": one slope sigma, fixed,
the latent variance estimated) has sum(K_j - 1) + 1 free parameters, the variance's Delta
column the items' slope columns summed; mirt 1.45.1 leaves the variance out of Delta (df
counts it), which ``gpcm_slope="mirt"`` reproduces (Science C2: 31.69 exact, 31.78 mirt).

TLI and CFI compare with mirt's null model (``computeNullModel``): slopes 0 and intercepts that
reproduce each item's observed category proportions (graded d_k = logit P(x >= k)), its own
M2* or C2 with the sum(K_j - 1) intercepts estimated. For M2* that Delta has rank n only (a
slope-free item moves E[x_j] alone, so its K_j - 1 columns are proportional); mirt's
complement is then the last s - sum(K_j - 1) columns of R's ``qr.Q(qr(Delta), complete =
TRUE)`` (LINPACK pivots the dependent columns to the end), which is reproduced here: one
Householder QR of the independent columns (LAPACK's reflectors are LINPACK's). ATLAS's null
intercepts are the exact maximum likelihood; mirt's EM stops at TOL 1e-4, so its null M2
differs by ~1e-4 relative (TLI by ~1e-6). TLI = (M2_0/df_0 - M2/df) / (M2_0/df_0 - 1), CFI
= 1 - (M2 - df)/(M2_0 - df_0) clipped to [0, 1], given when M2_0 > M2.

S-X2 (Orlando and Thissen, 2000; Kang and Chen, 2008)
------------------------------------------------------
Summed score s = sum_j x_j in 0..S, S = sum_j (K_j - 1). For item i, score s and category k:
O_isk = subjects with score s and x_i = k, and

    E_isk = N_s int P_ik(theta) f*_i(s - k | theta) phi / int f(s | theta) phi,

f and the leave-item-out f*_i the Lord-Wingersky (1984) recursion over categories, f(s) <-
sum_k f(s - k) P_jk. Scores 1..S-1 are used; cells are collapsed as mirt's ``collapseCells``
with ``mincell`` (default 1): impossible cells merged into the nearest possible score, empty
and single-subject score groups merged forward, categories merged within a score group where
an expected count is below mincell, rare last categories merged, then score groups merged
until every nonzero expected count is >= mincell. S-X2 = sum (O - E)^2 / E over the nonzero
expected cells, df = (cells - groups) - K_i (parameters of item i), RMSEA_S_X2 = sqrt(max(S-X2
/ df - 1, 0) / (N - 1)).

Missing ratings, as mirt 1.45.1: M2* and C2 take every rating, each moment from the rows that
rated its items (n_A of them) and its residual weighted by them, (1/N) r' C r with r_A = n_A
(p_A - pi_A) (:mod:`atlascat.irt.fit`); S-X2 uses the rows with every item rated (mirt's
``itemfit(mod, na.rm = TRUE)``). Rows may carry pattern frequencies (``weights``).

References
----------
Maydeu-Olivares, A. and Joe, H. (2006). Limited information goodness-of-fit testing in
multidimensional contingency tables. Psychometrika, 71, 713-732.
Maydeu-Olivares, A. and Joe, H. (2014). Assessing approximate fit in categorical data analysis.
Multivariate Behavioral Research, 49, 305-328.
Cai, L. and Hansen, M. (2013). Limited-information goodness-of-fit testing of hierarchical item
factor models. BJMSP, 66, 245-276.
Orlando, M. and Thissen, D. (2000). Likelihood-based item-fit indices for dichotomous item
response theory models. Applied Psychological Measurement, 24, 50-64.
Kang, T. and Chen, T. T. (2008). Performance of the generalized S-X2 item fit index for
polytomous IRT models. Journal of Educational Measurement, 45, 391-406.
Lord, F. M. and Wingersky, M. S. (1984). Comparison of IRT true-score and equipercentile
observed-score "equatings". Applied Psychological Measurement, 8, 453-461.
Chalmers, R. P. (2012). mirt: A multidimensional item response theory package for the R
environment. Journal of Statistical Software, 48(6).
"""
from __future__ import annotations

import numpy as np
from scipy import linalg

from ..errors import ConfigError, ResponseDataError, warn_user
from . import polytomous as poly
from .sx2table import collapse_cells, sx2_frame, table_sx2
from .defaults import QUADPTS, THETA_RANGE
from .fit import M2Result, MAX_M2_ITEMS, rmsea_ci
from .fit import _check_pairs, _pair_index, _pairs_of, _weights_of
from .progress import stepper
from .polybank import PolyBank
from .quadrature import normal_quadrature

__all__ = ["M2_TYPES", "m2_df", "m2_ordinal", "sx2_ordinal", "ordinal_estimated", "null_params",
           "null_m2", "leave_one_out_scores", "collapse_cells"]

M2_TYPES = ("M2*", "C2", "auto")
ORDINAL_ESTIMATED = ("all", "none")
#: a parameter direction whose moments' change is under this share of its own size is not
#: determined by them (R's LINPACK ``qr`` tolerance, which mirt's M2 applies)
WEAK = 1e-7


# ---------------------------------------------------------------------------------- data
def ordinal_estimated(estimated) -> str:
    """``"all"`` (every item parameter estimated from these data, mirt's case; also None or the
    bank's model name) or ``"none"`` (a bank calibrated on other data)."""
    est = "all" if estimated is None else str(estimated).lower()
    if est in poly.ORDINAL_MODELS or est == "mixed":
        est = "all"
    if est not in ORDINAL_ESTIMATED:
        raise ConfigError(f"estimated={estimated!r} is not what an ordinal bank takes: all or none")
    return est


def _rated_codes(responses, bank: PolyBank, weights):
    """Category codes (N, n), NaN where not rated, and the row weights; every bank item must
    have some rating."""
    from .polyscore import ordinal_codes

    y = ordinal_codes(responses, bank)
    w = _weights_of(responses, y.shape[0], weights)
    empty = np.flatnonzero(np.isnan(y).all(axis=0))
    if empty.size:
        raise ResponseDataError(
            f"{empty.size} bank item(s) have no rating at all, e.g. "
            f"{bank.item_ids[empty[:5]].tolist()}; fit the bank subset the ratings cover")
    return y, w


def _complete_codes(responses, bank: PolyBank, weights, what: str):
    """Category codes (N, n) of the rows with every item rated, their weights and the number
    of rows left out."""
    y, w = _rated_codes(responses, bank, weights)
    keep = ~np.isnan(y).any(axis=1) & (w > 0)
    if not float(w[keep].sum()) >= 2.0:
        raise ResponseDataError(
            f"{what} needs at least 2 subjects who rated every item, got "
            f"{float(w[keep].sum()):g} (rows with a missing rating are left out)")
    return y[keep].astype(np.intp), w[keep], int(np.count_nonzero(~keep))


def _available_codes(responses, bank: PolyBank, weights, what: str):
    """Category codes (N, n), -1 where a rating is missing, of the rows with at least one
    rating (mirt 1.45.1's M2 uses every answer: pairwise available moments), their weights
    and the number of rows left out."""
    y, w = _rated_codes(responses, bank, weights)
    keep = ~np.isnan(y).all(axis=1) & (w > 0)
    if not float(w[keep].sum()) >= 2.0:
        raise ResponseDataError(f"{what} needs at least 2 subjects with a rating, got "
                                f"{float(w[keep].sum()):g}")
    codes = np.where(np.isnan(y[keep]), -1, y[keep]).astype(np.intp)
    obs = codes >= 0
    n2 = (obs * w[keep][:, None]).T @ obs
    _check_pairs(n2, bank.item_ids, what, "rated")
    return codes, w[keep], int(np.count_nonzero(~keep))


def _free_mask(n_cat, kmax) -> np.ndarray:
    """(n, kmax) True where item j has parameter l (a1 = 0, d_l = l < K_j)."""
    return np.arange(kmax)[None, :] < np.asarray(n_cat)[:, None]


# ---------------------------------------------------------------------------------- kernels
def _pieces(models, params, nodes, estimated: bool, gpcm_slope: str = "exact"):
    """Category probabilities P (n, Q, K), score kernels E, E2 (Q, n), dP/dparam J (n, Q, K, K)
    and dE/dparam G (n, Q, K); ``gpcm_slope="mirt"``: G's GPCM slope column as mirt 1.45.1's
    ``dP``, x (E2 - E sum_l l exp(z_l - max z))."""
    P = np.nan_to_num(poly.prob(models, params, nodes))
    k = np.arange(P.shape[2], dtype=float)
    E = np.einsum("nqk,k->qn", P, k)
    E2 = np.einsum("nqk,k->qn", P, k * k)
    if not estimated:
        return P, E, E2, None, None
    J = poly.jacobian(models, params, nodes, P)
    G = np.einsum("iqkl,k->iql", J, k)
    gp = np.broadcast_to(np.asarray(models, dtype=object), (P.shape[0],)) == "gpcm"
    if gpcm_slope == "mirt" and gp.any():
        a = params[gp, 0]
        d = np.column_stack([np.zeros(a.size), params[gp, 1:]])
        z = k[None, None, :] * a[:, None, None] * nodes[None, :, None] + d[:, None, :]
        z = np.where(np.isnan(z), -np.inf, z)
        num = np.exp(z - z.max(axis=2, keepdims=True))
        G[gp, :, 0] = nodes[None, :] * (E2.T[gp] - E.T[gp] * (num * k).sum(axis=2))
    return P, E, E2, J, G


def _pair_lookup(n, pi, pj):
    idx = np.full((n, n), -1, dtype=np.intp)
    idx[pi, pj] = np.arange(pi.size)
    idx[pj, pi] = np.arange(pi.size)
    return idx


def _xi22(E, E2, w, m2, pi, pj):
    """Cov of the bivariate indicators x_i x_j, (m, m): int (E_i E_j - m_ij)(E_k E_l - m_kl)
    for disjoint pairs, with E2 in the shared item of overlapping pairs."""
    n = E.shape[1]
    K2 = E[:, pi] * E[:, pj]
    Kc = K2 - m2
    blk = (Kc * w[:, None]).T @ Kc
    del Kc
    pairs, others = _pairs_of(n, pi, pj)
    T = (E2 * w[:, None]).T @ K2                     # T[k, (a, b)] = int E2_k E_a E_b
    lookup = _pair_lookup(n, pi, pj)
    off = ~np.eye(n - 1, dtype=bool)
    kk = np.broadcast_to(np.arange(n)[:, None, None], (n, n - 1, n - 1))[:, off]
    pp = np.broadcast_to(pairs[:, :, None], (n, n - 1, n - 1))[:, off]
    qq = np.broadcast_to(pairs[:, None, :], (n, n - 1, n - 1))[:, off]
    aa = np.broadcast_to(others[:, :, None], (n, n - 1, n - 1))[:, off]
    bb = np.broadcast_to(others[:, None, :], (n, n - 1, n - 1))[:, off]
    blk[pp, qq] = T[kk, lookup[aa, bb]] - m2[pp] * m2[qq]
    S22 = (E2 * w[:, None]).T @ E2
    blk[np.diag_indices(pi.size)] = S22[pi, pj] - m2 * m2
    return blk, K2


def _moment_system(y, w, P, E, E2, J, G, wq, free, n_cat, kind: str):
    """Observed moments p, model moments pi, Xi, Delta (free columns) and the SRMSR pieces."""
    n = E.shape[1]
    pi_i, pj = _pair_index(n)
    m = pi_i.size
    N = float(w.sum())
    obs = y >= 0                                      # -1: missing (pairwise moments, as mirt)
    yf = np.where(obs, y, 0).astype(float)
    n1 = w @ obs
    n2 = (obs * w[:, None]).T @ obs
    mean = (w @ yf) / n1
    cross = (yf * w[:, None]).T @ yf / n2
    m1 = wq @ E
    Ew = E * wq[:, None]
    EE = Ew.T @ E                                     # int E_i E_j
    m2 = EE[pi_i, pj]
    x22, K2 = _xi22(E, E2, wq, m2, pi_i, pj)
    S12 = (E2 * wq[:, None]).T @ E                    # S12[a, b] = int E2_a E_b
    cols = np.arange(m)
    if kind == "M2*":
        x11 = EE - np.outer(m1, m1)
        x11[np.diag_indices(n)] = wq @ E2 - m1 * m1
        x12 = Ew.T @ K2 - np.outer(m1, m2)
        x12[pi_i, cols] = S12[pi_i, pj] - m1[pi_i] * m2
        x12[pj, cols] = S12[pj, pi_i] - m1[pj] * m2
        p_uni, pi_uni = mean, m1
    else:                                             # C2: P(x_j = k), k >= 1
        K = P.shape[2]
        item = np.repeat(np.arange(n), n_cat - 1)
        cat = np.concatenate([np.arange(1, k) for k in n_cat])
        Pc = P[item, :, cat].T                        # (Q, nK)
        pic = wq @ Pc
        Pw = Pc * wq[:, None]
        x11 = Pw.T @ Pc - np.outer(pic, pic)
        same = item[:, None] == item[None, :]
        x11[same] = (np.where(cat[:, None] == cat[None, :], pic[:, None], 0.0)
                     - np.outer(pic, pic))[same]
        x12 = Pw.T @ K2 - np.outer(pic, m2)
        U = Pw.T @ E                                  # U[r, b] = int P_r E_b
        pairs, others = _pairs_of(n, pi_i, pj)
        rr = np.repeat(np.arange(item.size), n - 1)
        pp = pairs[item].reshape(-1)
        oo = others[item].reshape(-1)
        x12[rr, pp] = cat[rr] * U[rr, oo] - pic[rr] * m2[pp]
        onehot = np.zeros((y.shape[0], n, K))
        onehot[np.arange(y.shape[0])[:, None], np.arange(n)[None, :], np.maximum(y, 0)] = obs
        p_all = np.einsum("r,rjk->jk", w, onehot) / n1[:, None]
        p_uni, pi_uni = p_all[item, cat], pic
        n1 = n1[item]
    s1 = p_uni.size
    xi = np.empty((s1 + m, s1 + m))
    xi[:s1, :s1] = x11
    xi[:s1, s1:] = x12
    xi[s1:, :s1] = x12.T
    xi[s1:, s1:] = x22
    # each moment's residual weighted by the rows that answered it, n_A (p_A - pi_A) / N (mirt's
    # M2 with missing ratings; N (p - pi) / N with complete ones)
    resid = np.concatenate([n1 * (p_uni - pi_uni), n2[pi_i, pj] * (cross[pi_i, pj] - m2)]) / N
    delta = _delta(J, G, E, wq, free, n_cat, pi_i, pj, kind) if J is not None \
        else np.zeros((s1 + m, 0))
    model_cov = EE.copy()
    model_cov[np.diag_indices(n)] = wq @ E2
    model_cov -= np.outer(m1, m1)
    obs_cov = cross - np.outer(mean, mean)
    return resid, xi, delta, N, obs_cov, model_cov


def _delta(J, G, E, wq, free, n_cat, pi_i, pj, kind):
    """d moments / d(free item parameters), items in bank order, a1 then d1.. per item."""
    n = E.shape[1]
    m = pi_i.size
    L = J.shape[3]
    B = np.einsum("iql,qj->ilj", G * wq[None, :, None], E)   # int dE_i/dl E_j
    bi = np.zeros((m, n, L))
    bi[np.arange(m), pi_i] = B[pi_i, :, pj]
    bi[np.arange(m), pj] = B[pj, :, pi_i]
    if kind == "M2*":
        uni = np.zeros((n, n, L))
        uni[np.arange(n), np.arange(n)] = np.einsum("q,iql->il", wq, G)
    else:
        item = np.repeat(np.arange(n), n_cat - 1)
        cat = np.concatenate([np.arange(1, c) for c in n_cat])
        dP = np.einsum("q,iqkl->ikl", wq, J)          # int dP_ik / dl
        uni = np.zeros((item.size, n, L))
        uni[np.arange(item.size), item] = dP[item, cat]
    D = np.concatenate([uni, bi]).reshape(-1, n * L)
    return D[:, free.reshape(-1)]


def _m2_quadratic(resid, xi, delta, n_total, tol: float = 1e-10) -> tuple[float, int]:
    """N || z - Q Q' z ||^2, z = L^-1 r, Q an orthonormal basis (pivoted QR) of L^-1 Delta, L L'
    = Xi: M2's C-form without normal equations, which lose a column as ill-conditioned as
    mirt's GPCM slope (condition number ~1e7). Also the number of parameter directions the
    moments do not determine: pivoted columns whose residual is under :data:`WEAK` of their
    own norm (LINPACK's rule, which mirt's ``qr`` drops)."""
    try:
        L = linalg.cholesky(xi, lower=True, check_finite=False)
        z = linalg.solve_triangular(L, resid, lower=True, check_finite=False)
        Z = linalg.solve_triangular(L, delta, lower=True, check_finite=False)
    except linalg.LinAlgError:
        # not numerically positive definite (a category no one can reach?): the symmetric
        # inverse square root on the supported part
        vals, vecs = linalg.eigh(xi, check_finite=False)
        keep = vals > vals.max() * 1e-12
        W = vecs[:, keep] / np.sqrt(vals[keep])
        z, Z = W.T @ resid, W.T @ delta
        warn_user("the moment covariance Xi is not positive definite; M2 uses its "
                  "pseudo-inverse", RuntimeWarning)
    weak = 0
    if delta.shape[1]:
        q, r, piv = linalg.qr(Z, mode="economic", pivoting=True, check_finite=False)
        diag = np.abs(np.diag(r))
        norms = np.linalg.norm(Z[:, piv], axis=0)
        weak = int(np.sum(diag < WEAK * np.where(norms > 0, norms, 1.0)))
        q = q[:, diag > tol * diag[0]]
        z = z - q @ (q.T @ z)
    return float(n_total * (z @ z)), weak


def _m2_qr_complement(resid, xi, delta, n_total, tol: float = 1e-7):
    """mirt's quadratic form with R's ``qr`` (LINPACK: a column whose residual norm falls below
    ``tol`` of its own is dependent, pivoted to the end) and the last s - ncol(Delta) columns
    Qc of the complete Q: N r' Qc (Qc' Xi Qc)^-1 Qc' r. Q = H_1..H_k of the k independent
    columns, in compact WY form I - V T V' (LAPACK's reflectors are LINPACK's), so that Qc =
    E_m - V T V_m' is never formed: O(s^2 k), not O(s^3)."""
    s, m = delta.shape
    basis = np.zeros((s, m))
    keep = []
    for c in range(m):
        v = delta[:, c]
        r = v - basis[:, :len(keep)] @ (basis[:, :len(keep)].T @ v)
        r = r - basis[:, :len(keep)] @ (basis[:, :len(keep)].T @ r)
        if np.linalg.norm(r) >= tol * np.linalg.norm(v):
            basis[:, len(keep)] = r / np.linalg.norm(r)
            keep.append(c)
    (qr, tau), _ = linalg.qr(delta[:, keep], mode="raw")
    k = len(keep)
    V = np.tril(qr[:, :k], -1)
    V[np.arange(k), np.arange(k)] = 1.0
    T = np.zeros((k, k))
    for i in range(k):   # LAPACK dlarft, forward columnwise: Q = I - V T V'
        T[i, i] = tau[i]
        if i:
            T[:i, i] = -tau[i] * (T[:i, :i] @ (V[:, :i].T @ V[:, i]))
    Y = T @ V[m:].T                                   # Qc = E_m - V Y
    XV = xi @ V
    A = XV[m:].T                                      # V' Xi E_m
    inner = xi[m:, m:] - A.T @ Y - Y.T @ A + Y.T @ (V.T @ XV) @ Y
    z = resid[m:] - Y.T @ (V.T @ resid)
    return float(abs(n_total * (z @ linalg.solve(inner, z, assume_a="pos"))))


def _srmsr(obs_cov, model_cov):
    def corr(c):
        sd = np.sqrt(np.clip(np.diag(c), 1e-300, None))
        return c / np.outer(sd, sd)

    i, j = np.tril_indices(obs_cov.shape[0], -1)
    with np.errstate(invalid="ignore", divide="ignore"):
        d = corr(obs_cov)[i, j] - corr(model_cov)[i, j]
    return float(np.sqrt(np.mean(d * d)))


def null_params(y, w, n_cat):
    """mirt's null model as graded items: slope 0, d_k = logit P(x >= k) of the observed shares
    (its maximum likelihood); None where an item has an unobserved category."""
    n = y.shape[1]
    kmax = int(n_cat.max())
    counts = np.zeros((n, kmax))
    np.add.at(counts, (np.broadcast_to(np.arange(n), y.shape), np.maximum(y, 0)),
              np.broadcast_to(w[:, None], y.shape) * (y >= 0))
    has = _free_mask(n_cat, kmax)
    if np.any(has & ~(counts > 0)):
        return None
    upper = np.cumsum((counts / counts.sum(axis=1, keepdims=True))[:, ::-1], axis=1)[:, ::-1]
    params = np.full((n, kmax), np.nan)
    params[:, 0] = 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        params[:, 1:] = np.where(has[:, 1:], np.log(upper[:, 1:]) - np.log1p(-upper[:, 1:]),
                                 np.nan)
    return params


def null_m2(y, w, n_cat, kind: str, params=None, step=None):
    """M2* / C2 of mirt's null model (:func:`null_params`, or ``params`` given: mirt's
    ``computeNullModel`` coefficients) on mirt's 2-node grid, with its sum(K_j - 1)
    intercepts estimated, and its df; (nan, df) where the null model is undefined.
    ``step()``, if given, is called after the moments and after the quadratic form."""
    n = y.shape[1]
    free = _free_mask(n_cat, int(n_cat.max()))
    free[:, 0] = False                                # slopes fixed at 0
    df = (n if kind == "M2*" else int(np.sum(n_cat - 1))) + n * (n - 1) // 2 - int(free.sum())
    params = null_params(y, w, n_cat) if params is None else np.asarray(params, dtype=float)
    if params is None or df <= 0:
        return float("nan"), df
    quad = normal_quadrature(2, THETA_RANGE)
    P, E, E2, J, G = _pieces("graded", params, quad.nodes, True)
    resid, xi, delta, N, _, _ = _moment_system(y, w, P, E, E2, J, G, quad.weights, free,
                                               n_cat, kind)
    if step is not None:
        step()
    stat = _m2_qr_complement(resid, xi, delta, N)
    if step is not None:
        step()
    return stat, df


def common_slope(delta, n_cat, variance: bool = True) -> np.ndarray:
    """Delta of a partial credit bank (mirt's "Rasch": one slope sigma, fixed at 1 with the
    latent variance sigma^2 estimated): each item's slope column (its first) summed into one,
    the last (the variance's direction: d/d sigma^2 = d/d sigma / (2 sigma), the same span);
    ``variance=False``: left out, as mirt 1.45.1's M2 leaves the latent variance out of Delta
    (its df counts it)."""
    slopes = np.concatenate([[0], np.cumsum(np.asarray(n_cat, dtype=int))[:-1]])
    common = delta[:, slopes].sum(axis=1, keepdims=True)
    rest = np.delete(delta, slopes, axis=1)
    return np.hstack([rest, common]) if variance else rest


def m2_df(bank: PolyBank, statistic: str = "M2*", estimated=None) -> tuple[str, int, int, int]:
    """(statistic used, df, moments, free parameters) of :func:`m2_ordinal` on ``bank``:
    ``"auto"`` is M2* where it has degrees of freedom, else C2. A partial credit bank
    (``bank.is_pcm``) has its intercepts and one latent variance free, as mirt's "Rasch"."""
    est = ordinal_estimated(estimated)
    kind = str(statistic).upper()
    n = len(bank)
    n_cat = bank.n_cat.astype(int)
    n_free = int(n_cat.sum()) if est == "all" else 0
    if n_free and getattr(bank, "is_pcm", False):
        n_free += 1 - n
    pairs = n * (n - 1) // 2
    if kind == "AUTO":
        kind = "M2*" if n + pairs - n_free > 0 else "C2"
    n_mom = (n if kind == "M2*" else int(np.sum(n_cat - 1))) + pairs
    return kind, n_mom - n_free, n_mom, n_free


def m2_ordinal(responses, bank: PolyBank, *, statistic: str = "M2*", estimated=None,
               quadpts: int = QUADPTS, theta_range=THETA_RANGE, prior_mean: float = 0.0,
               prior_sd: float = 1.0, ci: float = 0.9, weights=None,
               null_model: bool = True, gpcm_slope: str = "exact",
               progress=None) -> M2Result:
    """mirt's ``M2(mod, type=statistic)`` for an ordinal bank (see the module docstring).

    ``responses``: ratings on the items' own scales (a ResponseMatrix, a labelled DataFrame
    aligned by item id, or an array in bank order; NaN missing: every rating is used);
    ``statistic``: ``"M2*"`` (mirt's default), ``"C2"``, or ``"auto"`` (M2*, or C2 where M2*
    has no degrees of freedom or its moments leave parameter directions undetermined,
    :data:`WEAK`: warned); ``estimated``: ``"all"`` (default) or ``"none"``;
    ``gpcm_slope``: ``"exact"`` (default) or ``"mirt"``, the GPCM slope derivative mirt 1.45.1's
    ``dP`` gives (its exp(z_k) unnormalized: module docstring), to reproduce mirt's value. A
    partial credit bank (``bank.is_pcm``, mirt's "Rasch"): its intercepts and the latent
    variance are the free parameters (df), Delta their columns, the variance's the items'
    common slope; ``"mirt"`` leaves the variance out of Delta, as mirt 1.45.1 (df the same).
    The result's ``statistic`` is the one used (M2* or C2), ``estimated`` all or none.
    ``progress``: optional ``progress(done, total)``, called at the start and after each of the
    steps (moments, quadratic form, and the null model's two): 150 items take about a minute.
    """
    from scipy.stats import chi2  # lazy: scipy.stats costs ~1 s at import

    kind = str(statistic).upper()
    if kind not in M2_TYPES and kind != "AUTO":
        raise ConfigError(f"statistic must be one of {', '.join(M2_TYPES)}, got {statistic!r}")
    est = ordinal_estimated(estimated)
    y, w, dropped = _available_codes(responses, bank, weights, "M2")
    n = len(bank)
    if n < 2:
        raise ConfigError("M2 needs at least 2 items")
    if n > MAX_M2_ITEMS:
        raise ConfigError(f"M2 on {n} ordinal items is too large (at most {MAX_M2_ITEMS}); "
                          "fit a subset of the items (PolyBank.subset)")
    n_cat = bank.n_cat.astype(int)
    kind, df, n_mom, n_free = m2_df(bank, kind, est)
    if df <= 0:
        hint = "; use statistic='C2'" if kind == "M2*" else ""
        raise ConfigError(f"{kind} has {df} degrees of freedom ({n_mom} moments, {n_free} "
                          f"free parameters): too few items{hint}")
    quad = normal_quadrature(quadpts, theta_range, prior_mean, prior_sd)
    free = _free_mask(n_cat, bank.params.shape[1])
    if gpcm_slope not in ("exact", "mirt"):
        raise ConfigError(f"gpcm_slope must be exact or mirt, got {gpcm_slope!r}")
    step = stepper(progress, 4 if null_model else 2)
    P, E, E2, J, G = _pieces(bank.models, bank.params, quad.nodes, est == "all", gpcm_slope)
    resid, xi, delta, N, obs_cov, model_cov = _moment_system(y, w, P, E, E2, J, G, quad.weights,
                                                             free, n_cat, kind)
    pcm = est == "all" and bank.is_pcm
    if pcm:
        delta = common_slope(delta, n_cat, gpcm_slope != "mirt")
    step()
    stat, weak = _m2_quadratic(resid, xi, delta, N)
    if weak and kind == "M2*":
        auto = str(statistic).upper() == "AUTO"
        warn_user(_undetermined(weak, n_free, auto), RuntimeWarning)
        if auto:   # the category shares determine C2: mirt's M2(mod, type = "C2")
            kind, df = m2_df(bank, "C2", est)[:2]
            resid, xi, delta, N, obs_cov, model_cov = _moment_system(
                y, w, P, E, E2, J, G, quad.weights, free, n_cat, kind)
            delta = common_slope(delta, n_cat, gpcm_slope != "mirt") if pcm else delta
            stat = _m2_quadratic(resid, xi, delta, N)[0]
    step()
    pval = float(chi2.sf(stat, df))
    rmsea = float(np.sqrt(max(stat / df - 1.0, 0.0) / (N - 1.0)))
    lo, hi = rmsea_ci(stat, df, N, ci)
    srmsr = _srmsr(obs_cov, model_cov)
    m2n, dfn, tli, cfi = float("nan"), 0, float("nan"), float("nan")
    if null_model:
        m2n, dfn = null_m2(y, w, n_cat, kind, step=step)
        if not np.isfinite(m2n):
            warn_user("an item has an unobserved category; the null model, and with it TLI "
                      "and CFI, is undefined", RuntimeWarning)
        elif m2n > stat:
            tli = float((m2n / dfn - stat / df) / (m2n / dfn - 1.0))
            cfi = float(np.clip(1.0 - (stat - df) / (m2n - dfn), 0.0, 1.0))
        else:
            warn_user("the null model's M2 is below the fitted model's; TLI and CFI are not "
                      "given", RuntimeWarning)
    if progress is not None:   # done, also where the null model was undefined
        progress(4 if null_model else 2, 4 if null_model else 2)
    return M2Result(M2=stat, df=int(df), p=pval, RMSEA=rmsea, RMSEA_5=lo, RMSEA_95=hi,
                    SRMSR=srmsr, TLI=tli, CFI=cfi, n=N, n_items=n, n_free=n_free,
                    estimated=est, M2_null=m2n, df_null=int(dfn), n_dropped=dropped,
                    statistic=kind)


def _undetermined(weak: int, n_free: int, auto: bool) -> str:
    """The warning for an M2* whose Delta has ``weak`` undetermined directions."""
    return (f"M2* is not determined by these ratings: {weak} of the {n_free} item parameters' "
            "directions barely move the item-score moments (items of many categories, some "
            "rarely given), so its value and df rest on a rank tolerance (mirt's M2(mod) differs "
            "by it); " + ("C2 is given instead (mirt: M2(mod, type = 'C2')), which the category "
                          "shares determine" if auto else
                          "C2 is determined (statistic 'C2', CLI --m2 C2: the category "
                          "shares)"))


# ------------------------------------------------------------------------------------- S-X2
def leave_one_out_scores(P, n_cat) -> np.ndarray:
    """Lord-Wingersky summed-score distributions over categories: (n + 1, Q, S + 1), slot 0
    f(s | theta_q) of all items, slot i + 1 f*_i without item i; P is (n, Q, K)."""
    n, Q, _ = P.shape
    S = int(np.sum(np.asarray(n_cat) - 1))
    G = np.zeros((n + 1, Q, S + 1))
    G[0, :, 0] = 1.0
    top = 0
    for j in range(n):  # sequential in items; each step updates every distribution at once
        G[j + 1] = G[0]
        kj = int(n_cat[j])
        X = G[:j + 1, :, :top + 1].copy()
        new = np.zeros((j + 1, Q, top + kj))
        for c in range(kj):
            new[:, :, c:c + top + 1] += X * P[j, :, c][None, :, None]
        G[:j + 1, :, :top + kj] = new
        top += kj - 1
    return G


def _sx2_tables(y, w, P, n_cat, wq):
    """Observed and expected counts (n, S-1, K) over scores 1..S-1; expected NaN where the
    category cannot occur at that score."""
    n, Q, K = P.shape
    S = int(np.sum(n_cat - 1))
    G = leave_one_out_scores(P, n_cat)
    total = wq @ G[0]                                            # P(s), s = 0..S
    A = np.einsum("q,iqc,iqt->ict", wq, P, G[1:])                # int P_ic f*_i(t)
    s = np.arange(S + 1)
    c = np.arange(K)
    t = s[:, None] - c[None, :]                                  # (S+1, K)
    Si = S - (n_cat - 1)
    valid = (t[None] >= 0) & (t[None] <= Si[:, None, None]) & (c[None, None, :] < n_cat[:, None, None])
    tc = np.clip(t, 0, S)
    Ei = A[:, c[None, :], tc]                                    # (n, S+1, K)
    with np.errstate(divide="ignore", invalid="ignore"):
        Ei = np.where(valid, Ei / total[None, :, None], np.nan)
    score = y.sum(axis=1)
    Ns = np.bincount(score, weights=w, minlength=S + 1)
    flat = (np.arange(n)[None, :] * (S + 1) + score[:, None]) * K + y
    O = np.bincount(flat.reshape(-1), weights=np.repeat(w, n),
                    minlength=n * (S + 1) * K).reshape(n, S + 1, K)
    rows = slice(1, S)
    return O[:, rows], Ei[:, rows] * Ns[rows][None, :, None]


def sx2_ordinal(responses, bank: PolyBank, *, estimated=None, mincell: float = 1.0,
                quadpts: int = QUADPTS, theta_range=THETA_RANGE, prior_mean: float = 0.0,
                prior_sd: float = 1.0, weights=None):
    """mirt's ``itemfit(mod)`` S-X2 for every item of an ordinal bank (module docstring):
    a DataFrame with item_id, S_X2, df_S_X2, RMSEA_S_X2, p_S_X2 (NaN where the collapsed
    table leaves no degrees of freedom). ``responses`` as :func:`m2_ordinal`."""
    est = ordinal_estimated(estimated)
    y, w, _ = _complete_codes(responses, bank, weights, "S-X2")
    n_cat = bank.n_cat.astype(int)
    if len(bank) < 2:
        raise ConfigError("S-X2 needs at least 2 items (the rest score of each item)")
    quad = normal_quadrature(quadpts, theta_range, prior_mean, prior_sd)
    P = np.nan_to_num(bank.probability(quad.nodes))
    O, E = _sx2_tables(y, w, P, n_cat, quad.weights)
    # the collapsing is a per-table walk (small tables)
    fits = [table_sx2(O[i, :, :k], E[i, :, :k], k if est == "all" else 0, mincell)
            for i, k in enumerate(n_cat)]
    x2, df = (np.array([f[j] for f in fits]) for j in (0, 1))
    return sx2_frame(bank.item_ids, x2, df, float(w.sum()))
