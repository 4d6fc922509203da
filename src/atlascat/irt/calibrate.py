"""Item calibration by marginal maximum likelihood with the EM algorithm (Bock and Aitkin, 1981).

Model (as mirt, no 1.702 scaling), slope-intercept form used internally::

    P_j(theta) = c_j + (u_j - c_j) sigma(a_j theta + d_j),   b_j = -d_j / a_j,
    theta ~ N(0, 1)   (Rasch: a_j = 1 and theta ~ N(0, sigma^2) with sigma^2 estimated).

The latent trait is integrated on a fixed grid of Q nodes x_q with prior weights pi_q (default
61 nodes on [-6, 6], as mirt). With response y_ij, observed mask m_ij and row weight w_i (pattern
frequency), one EM iteration is:

E-step (three matrix products, no (subjects x items x nodes) temporaries)::

    L_iq    = sum_j m_ij [y_ij log P_j(x_q) + (1 - y_ij) log Q_j(x_q)]
            = Y (log P - log Q)^T + M (log Q)^T            (dense data: M log Q^T is a constant row)
    post_iq = pi_q exp(L_iq) / sum_q' pi_q' exp(L_iq')
    r_jq    = sum_i w_i y_ij post_iq   = (Y^T (w * post))_jq        expected correct at node q
    n_jq    = sum_i w_i m_ij post_iq   = (M^T (w * post))_jq        expected observed at node q
    log L   = sum_i w_i log sum_q pi_q exp(L_iq)

M-step: for every item at once maximize the complete-data log-likelihood plus log priors::

    l_j = sum_q r_jq log P_j(x_q) + (n_jq - r_jq) log Q_j(x_q) + log p(a_j) + log p(c_j)

over the internal parameters (a or log a, d, logit c, logit u) by a batched Newton method:
exact gradient and Hessian (written with the bounded ratios R s / P and R (1 - s) / Q), Newton
steps where the Hessian is negative definite (batched Cholesky) and Fisher scoring elsewhere (so
every step is an ascent direction), a step cap and a per-item backtracking line search that
never lets l_j decrease.
The whole sequence is therefore a (generalized) EM and the marginal log-likelihood never
decreases. The Rasch latent variance is updated from the posterior node masses N_q: the grid
second moment sum_q pi_q(sigma^2) x_q^2 is matched to sum_q N_q x_q^2 / N (the exact M-step for
weights proportional to the normal density at fixed nodes, as mirt does).

Acceleration: SQUAREM (Varadhan and Roland, 2008, scheme S3) over the internal parameter
vector, with one step length per item (alpha_j = -|r_j| / |v_j| from the item's own two EM
steps, capped by a common adaptive bound) and a monotonicity safeguard (an extrapolated point is
used only if its log-likelihood is not below the last EM iterate's).

Convergence: mirt's rule, the largest absolute change of any internal parameter between two
consecutive EM iterates is below ``tol`` (1e-4), or ``max_iter`` (1000) iterations. Internal parameters are kept in wide bounds
(|a| <= 50, |d| <= 150, |logit c|, |logit u| <= 15) so that parameters drifting to a boundary of
the likelihood (c -> 0, a -> infinity for a Guttman item) settle instead of moving forever.

Starting values come from classical statistics: item p-values and item-rest point-biserial
correlations converted to biserials r, then a = 1.702 r / sqrt(1 - r^2) and
d = 1.702 Phi^-1(p) / sqrt(1 - r^2) (Lord and Novick, 1968, ch. 16; logistic scaling), c = 0.1.

Partitioned calibration (the ATLAS paper, appendix C.2): the items are split at random into
K = floor(n_items / partition_size) partitions, each calibrated on all subjects; every
partition is linked to the first by mean-sigma on the subjects' EAP thetas (A = sd_ref / sd_k,
B = mean_ref - A mean_k; a* = a / A, b* = A b + B) or by mean-mean (A = 1, location only), and a
final fixed-parameter scoring pass computes EAP thetas on the linked bank.

References
----------
Bock, R. D. and Aitkin, M. (1981). Marginal maximum likelihood estimation of item parameters:
application of an EM algorithm. Psychometrika 46, 443-459.
Mislevy, R. J. (1986). Bayes modal estimation in item response models. Psychometrika 51, 177-195.
Varadhan, R. and Roland, C. (2008). Simple and globally convergent methods for accelerating the
convergence of any EM algorithm. Scandinavian Journal of Statistics 35, 335-353.
Chalmers, R. P. (2012). mirt: A multidimensional item response theory package for the R
environment. Journal of Statistical Software 48(6).
"""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import brentq
from scipy.special import expit, log_expit, logsumexp
from scipy.stats import norm

from ..errors import ConfigError, ConvergenceError, ResponseDataError
from .bank import ItemBank
from .priors import parse_prior
from .quadrature import normal_quadrature

__all__ = ["MODELS", "CalibrationResult", "Calibrator", "calibrate", "marginal_loglik"]

MODELS = ("rasch", "1pl", "2pl", "3pl", "4pl")
LINKS = ("mean-sigma", "mean-mean")

# bounds of the internal parameters: slope (raw), slope (log), intercept d, logit c, logit u
_A_MAX = 50.0
_D_MAX = 150.0
_LOGIT_MAX = 15.0
_LOG_A_MIN = np.log(1e-3)
_C_START = 0.1
_PRED_REL = 1e-12  # M-step: stop an item when its predicted gain is below this x |objective|

_U_START = 0.95


# ====================================================================== item model
class _ItemModel:
    """Internal parameterization of one item type and its derivatives, batched over items.

    Internal parameter matrix ``th`` has shape (n_items, 4): columns slope (a, or log a when
    the slope has a log-normal prior), d, logit c, logit u. ``free`` lists the estimated columns.
    """

    def __init__(self, model: str, prior_a=None, prior_c=None):
        self.model = model
        self.prior_a = prior_a
        self.prior_c = prior_c
        self.log_slope = prior_a is not None and prior_a.internal == "log"
        self.has_c = model in ("3pl", "4pl")
        self.has_u = model == "4pl"
        self.free = {"rasch": [1], "1pl": [1], "2pl": [0, 1], "3pl": [0, 1, 2],
                     "4pl": [0, 1, 2, 3]}[model]
        a_lo, a_hi = (_LOG_A_MIN, np.log(_A_MAX)) if self.log_slope else (-_A_MAX, _A_MAX)
        self.lo = np.array([a_lo, -_D_MAX, -_LOGIT_MAX, -_LOGIT_MAX])
        self.hi = np.array([a_hi, _D_MAX, _LOGIT_MAX, _LOGIT_MAX])

    # ------------------------------------------------------------------ parameters
    def natural(self, th):
        """(a, d, c, u) from internal parameters."""
        a = np.exp(th[:, 0]) if self.log_slope else th[:, 0]
        c = expit(th[:, 2]) if self.has_c else np.zeros(th.shape[0])
        u = expit(th[:, 3]) if self.has_u else np.ones(th.shape[0])
        return a, th[:, 1], c, u

    def internal(self, a, d, c, u):
        th = np.empty((len(a), 4))
        th[:, 0] = np.log(np.maximum(a, 1e-3)) if self.log_slope else a
        th[:, 1] = d
        with np.errstate(divide="ignore"):
            th[:, 2] = np.log(c) - np.log1p(-c) if self.has_c else -np.inf
            th[:, 3] = np.log(u) - np.log1p(-u) if self.has_u else np.inf
        th[:, self.free] = np.clip(th[:, self.free], self.lo[self.free], self.hi[self.free])
        return th

    # ------------------------------------------------------------------ log-probabilities
    def node_logs(self, th, x):
        """(log P, log Q), each (n_items, n_nodes), finite for parameters inside the bounds."""
        a, d, c, u = self.natural(th)
        z = a[:, None] * x[None, :] + d[:, None]
        if not (self.has_c or self.has_u):
            return log_expit(z), log_expit(-z)
        rng = (u - c)[:, None]
        p = c[:, None] + rng * expit(z)
        q = (1.0 - u)[:, None] + rng * expit(-z)
        if self.has_u:
            return np.log(p), np.log(q)
        # 3PL: log Q = log(1 - c) + log sigma(-z) keeps full precision for large z
        return np.log(p), np.log1p(-c)[:, None] + log_expit(-z)

    def log_prior(self, th):
        """Sum of log prior densities per item (zeros without priors)."""
        out = np.zeros(th.shape[0])
        if self.prior_a is not None:
            out += self.prior_a.terms(th[:, 0])[0]
        if self.prior_c is not None and self.has_c:
            out += self.prior_c.terms(th[:, 2])[0]
        return out

    def objective(self, th, r, nr, x):
        """Complete-data log-likelihood + log prior per item, shape (n_items,)."""
        log_p, log_q = self.node_logs(th, x)
        return (r * log_p).sum(axis=1) + (nr * log_q).sum(axis=1) + self.log_prior(th)

    # ------------------------------------------------------------------ derivatives
    def derivatives(self, th, r, nr, x, fisher: bool = False, with_value: bool = False):
        """Gradient (n, k) and Hessian (n, k, k) of :meth:`objective` over the free columns.

        With e_k = (dP/dt_k) / P, f_k = (dP/dt_k) / Q and E_kl, F_kl the same for d2P:
        grad_k = sum_q r e_k - (n - r) f_k;
        hess_kl = sum_q r (E_kl - e_k e_l) - (n - r) (F_kl + f_k f_l).
        ``fisher=True`` returns minus the expected information instead of the Hessian,
        -sum_q n dP_k dP_l / (P Q) = -sum_q n e_k f_l (negative semi-definite; Fisher scoring).
        ``with_value=True`` also returns the objective (first element of the tuple).
        """
        a, d, c, u = self.natural(th)
        z = a[:, None] * x[None, :] + d[:, None]
        s, sm = expit(z), expit(-z)
        one2s = 1.0 - 2.0 * s
        if not (self.has_c or self.has_u):
            ez, fz = sm, s
            gz = r * ez - nr * fz
            hzz = -(r + nr) * s * sm
            if with_value:
                value = (r * np.log(s)).sum(axis=1) + (nr * np.log(sm)).sum(axis=1)
        else:
            rng = (u - c)[:, None]
            p_ = c[:, None] + rng * s
            q_ = (1.0 - u)[:, None] + rng * sm
            if with_value:
                value = (r * np.log(p_)).sum(axis=1) + (nr * np.log(q_)).sum(axis=1)
            ip = 1.0 / p_
            iq = 1.0 / q_
            ssm = rng * s * sm
            ez, fz = ssm * ip, ssm * iq
            gz = r * ez - nr * fz
            if fisher:
                hzz = -(r + nr) * ez * fz
            else:
                hzz = r * ez * (one2s - ez) - nr * fz * (one2s + fz)
        xs = np.stack([np.ones_like(x), x, x * x], axis=1)          # (q, 3)
        gz_m = gz @ xs[:, :2]                                        # sum_q gz, sum_q gz x
        hzz_m = hzz @ xs                                             # sum hzz, hzz x, hzz x^2
        n_items = th.shape[0]
        full_g = np.zeros((n_items, 4))
        full_h = np.zeros((n_items, 4, 4))
        # slope and intercept through z = a x + d
        if self.log_slope:
            full_g[:, 0] = a * gz_m[:, 1]
            full_h[:, 0, 0] = a * a * hzz_m[:, 2] + (0.0 if fisher else a * gz_m[:, 1])
            full_h[:, 0, 1] = a * hzz_m[:, 1]
            slope_scale = a
        else:
            full_g[:, 0] = gz_m[:, 1]
            full_h[:, 0, 0] = hzz_m[:, 2]
            full_h[:, 0, 1] = hzz_m[:, 1]
            slope_scale = np.ones(n_items)
        full_g[:, 1] = gz_m[:, 0]
        full_h[:, 1, 1] = hzz_m[:, 0]
        n = r + nr
        if self.has_c:
            cc = (c * (1.0 - c))[:, None]
            eg, fg = cc * sm * ip, cc * sm * iq
            full_g[:, 2] = (r * eg - nr * fg).sum(axis=1)
            if fisher:
                hgg = -n * eg * fg
                hgz = -n * eg * fz
            else:
                c12 = (1.0 - 2.0 * c)[:, None]
                hgg = r * eg * (c12 - eg) - nr * fg * (c12 + fg)
                hgz = -r * eg * (s + ez) + nr * fg * (s - fz)
            full_h[:, 2, 2] = hgg.sum(axis=1)
            hgz = hgz @ xs[:, :2]
            full_h[:, 0, 2] = slope_scale * hgz[:, 1]
            full_h[:, 1, 2] = hgz[:, 0]
        if self.has_u:
            uu = (u * (1.0 - u))[:, None]
            ev, fv = uu * s * ip, uu * s * iq
            full_g[:, 3] = (r * ev - nr * fv).sum(axis=1)
            if fisher:
                hvv = -n * ev * fv
                hvz = -n * ev * fz
                hgv = -n * eg * fv
            else:
                u12 = (1.0 - 2.0 * u)[:, None]
                hvv = r * ev * (u12 - ev) - nr * fv * (u12 + fv)
                hvz = r * ev * (sm - ez) - nr * fv * (sm + fz)
                hgv = -r * eg * ev - nr * fg * fv
            full_h[:, 3, 3] = hvv.sum(axis=1)
            hvz = hvz @ xs[:, :2]
            full_h[:, 0, 3] = slope_scale * hvz[:, 1]
            full_h[:, 1, 3] = hvz[:, 0]
            full_h[:, 2, 3] = hgv.sum(axis=1)
        if self.prior_a is not None:
            _, g, h = self.prior_a.terms(th[:, 0])
            full_g[:, 0] += g
            full_h[:, 0, 0] += h
        if self.prior_c is not None and self.has_c:
            _, g, h = self.prior_c.terms(th[:, 2])
            full_g[:, 2] += g
            full_h[:, 2, 2] += h
        iu = np.triu_indices(4, 1)
        full_h[:, iu[1], iu[0]] = full_h[:, iu[0], iu[1]]
        f = self.free
        if with_value:
            return value + self.log_prior(th), full_g[:, f], full_h[:, f][:, :, f]
        return full_g[:, f], full_h[:, f][:, :, f]


# ====================================================================== M-step
def _pd_solve(A, g, rel_tol: float = 1e-8):
    """Solve A s = g for a batch of small symmetric matrices by Cholesky, (n, k, k) and (n, k).

    Returns ``(s, ok)``; ``ok`` is False where A is not numerically positive definite (pivot
    <= rel_tol * largest diagonal entry), and there ``s`` is meaningless. Loops run over the
    k <= 4 columns only, every operation is vectorized over the batch.
    """
    n, k, _ = A.shape
    L = np.zeros_like(A)
    ok = np.ones(n, dtype=bool)
    tiny = rel_tol * np.abs(A[:, np.arange(k), np.arange(k)]).max(axis=1) + 1e-300
    for j in range(k):
        d = A[:, j, j] - (L[:, j, :j] ** 2).sum(axis=1)
        ok &= d > tiny
        ljj = np.sqrt(np.maximum(d, tiny))
        L[:, j, j] = ljj
        for i in range(j + 1, k):
            L[:, i, j] = (A[:, i, j] - (L[:, i, :j] * L[:, j, :j]).sum(axis=1)) / ljj
    y = np.zeros_like(g)
    for i in range(k):
        y[:, i] = (g[:, i] - (L[:, i, :i] * y[:, :i]).sum(axis=1)) / L[:, i, i]
    s = np.zeros_like(g)
    for i in reversed(range(k)):
        s[:, i] = (y[:, i] - (L[:, i + 1:, i] * s[:, i + 1:]).sum(axis=1)) / L[:, i, i]
    return s, ok


def _mstep(model: _ItemModel, th, r, nr, x, max_newton: int = 8, step_tol: float = 1e-9,
           max_halvings: int = 8):
    """Batched Newton ascent of every item's complete-data objective (all items at once).

    For each item: gradient g and Hessian H; the Newton step s = -H^-1 g where H is negative
    definite (a batched Cholesky factorization decides), else the Fisher-scoring step
    s = I^-1 g with the expected information I (plus a tiny ridge), so every step is an ascent
    direction. Steps are capped at 2 internal units per coordinate and cut at the parameter
    bounds; a backtracking (Armijo) line search accepts t s only if the objective rises by at
    least 1e-4 t g.s (up to rounding). Items whose predicted gain g.s is at rounding level,
    whose step is below ``step_tol`` or whose line search fails stop iterating.
    """
    th = th.copy()
    f = model.free
    lo, hi = model.lo[f], model.hi[f]
    dense_n = nr.ndim == 1
    active = np.arange(th.shape[0])
    f0 = None
    for _ in range(max_newton):
        if active.size == 0:
            break
        ta = th[active]
        ra = r[active]
        nra = nr[None, :] - ra if dense_n else nr[active]
        if f0 is None:
            f0, g, h = model.derivatives(ta, ra, nra, x, with_value=True)
        else:
            g, h = model.derivatives(ta, ra, nra, x)
        step, ok = _pd_solve(-h, g)
        if not ok.all():  # Fisher scoring where the Hessian is not negative definite
            bad = ~ok
            _, hf = model.derivatives(ta[bad], ra[bad], nra[bad], x, fisher=True)
            info = -hf
            ridge = 1e-8 * np.abs(info).max(axis=(1, 2)) + 1e-12
            info[:, np.arange(len(f)), np.arange(len(f))] += ridge[:, None]
            step[bad], _ = _pd_solve(info, g[bad])
        big = np.abs(step).max(axis=1)
        step *= np.minimum(1.0, 2.0 / np.maximum(big, 1e-300))[:, None]
        # a step pushing a parameter through its bound is cut at the bound
        base = ta[:, f]
        step = np.clip(base + step, lo, hi) - base
        pred = (g * step).sum(axis=1)
        go = (pred > _PRED_REL * (1.0 + np.abs(f0))) & (np.abs(step).max(axis=1) > step_tol)
        t = np.ones(active.size)
        new_f = f0.copy()
        moved = np.zeros(active.size, dtype=bool)
        pending = go.copy()
        cand = ta.copy()
        for _ls in range(max_halvings):
            idx = np.flatnonzero(pending)
            if idx.size == 0:
                break
            trial = ta[idx].copy()
            trial[:, f] = base[idx] + t[idx, None] * step[idx]
            ft = model.objective(trial, ra[idx], nra[idx], x)
            # Armijo, with a rounding allowance so that converged items can still take their
            # last tiny Newton steps (|f| ~ 1e2-1e5, relative precision ~1e-16 per term)
            ok = np.isfinite(ft) & (ft >= f0[idx] + 1e-4 * t[idx] * pred[idx]
                                    - 1e-13 * np.abs(f0[idx]))
            if model.has_u:  # keep c < u
                ok &= expit(trial[:, 2]) < expit(trial[:, 3]) - 1e-6
            good = idx[ok]
            cand[good] = trial[ok]
            new_f[good] = ft[ok]
            moved[good] = True
            pending[good] = False
            t[idx[~ok]] *= 0.5
        th[active] = cand
        keep = moved & (t * np.abs(step).max(axis=1) > step_tol)
        active = active[keep]
        f0 = new_f[keep]
    return th


# ====================================================================== data and E-step
@dataclass
class _Data:
    y: np.ndarray            # (n, m) scores with 0 in missing cells, compute dtype
    mask: np.ndarray | None  # (n, m) observed mask (compute dtype), None when dense
    w: np.ndarray | None     # (n,) row weights, None when all 1
    n_eff: float

    @classmethod
    def build(cls, values: np.ndarray, weights=None, dtype=np.float64):
        obs = ~np.isnan(values)
        dense = bool(obs.all())
        y = np.where(obs, values, 0.0).astype(dtype)
        mask = None if dense else obs.astype(dtype)
        w = None if weights is None else np.asarray(weights, dtype=float)
        if w is not None and np.all(w == 1):
            w = None
        n_eff = float(values.shape[0] if w is None else w.sum())
        return cls(y, mask, w, n_eff)


@dataclass
class _EStep:
    loglik: float
    r: np.ndarray          # (m, q)
    n: np.ndarray          # (m, q), or (q,) for dense data
    node_mass: np.ndarray  # (q,)
    post: np.ndarray       # (n, q)


def _estep(data: _Data, log_p, log_q, log_w) -> _EStep:
    """E-step from (n_items, n_nodes) log-probabilities and the nodes' log prior weights."""
    dt = data.y.dtype
    L = (data.y @ (log_p - log_q).astype(dt, copy=False)).astype(np.float64, copy=False)
    if data.mask is None:
        L += log_q.sum(axis=0)
    else:
        L += data.mask @ log_q.astype(dt, copy=False)
    L += log_w
    mx = L.max(axis=1, keepdims=True)
    np.subtract(L, mx, out=L)
    np.exp(L, out=L)
    tot = L.sum(axis=1, keepdims=True)
    L /= tot
    lse = mx[:, 0] + np.log(tot[:, 0])
    post = L
    if data.w is None:
        loglik = float(lse.sum())
        wp = post
    else:
        loglik = float(data.w @ lse)
        wp = post * data.w[:, None]
    wpd = wp.astype(dt, copy=False)
    r = (data.y.T @ wpd).astype(np.float64, copy=False)
    node_mass = wp.sum(axis=0)
    n = node_mass.copy() if data.mask is None else (data.mask.T @ wpd).astype(np.float64)
    return _EStep(loglik, r, n, node_mass, post)


def _grid_log_weights(nodes, var):
    lw = -0.5 * nodes**2 / var
    return lw - logsumexp(lw)


def _rasch_variance(nodes, node_mass, lo=1e-3, hi=100.0):
    """Latent variance whose grid weights match the posterior second moment on the nodes."""
    target = float(node_mass @ nodes**2 / node_mass.sum())

    def gap(log_v):
        return float(np.exp(_grid_log_weights(nodes, np.exp(log_v))) @ nodes**2) - target

    a, b = np.log(lo), np.log(hi)
    ga, gb = gap(a), gap(b)
    if ga >= 0:
        return lo
    if gb <= 0:
        return hi
    return float(np.exp(brentq(gap, a, b, xtol=1e-12)))


# ====================================================================== starting values
def _start_values(values: np.ndarray, weights, model: _ItemModel, prior_c=None):
    """Classical starting values (p-values, item-rest biserials), see the module docstring."""
    obs = ~np.isnan(values)
    y = np.where(obs, values, 0.0)
    w = np.ones(values.shape[0]) if weights is None else np.asarray(weights, float)
    W = obs * w[:, None]
    sw = W.sum(axis=0)
    p = (y * w[:, None]).sum(axis=0) / sw
    tot = y.sum(axis=1)
    k = obs.sum(axis=1).astype(float)
    # item-rest correlation: rest_ij = (T_i - y_ij) / (K_i - 1), over subjects who saw item j
    inv = 1.0 / np.maximum(k - 1.0, 1.0)
    yw = y * w[:, None]
    yyw = yw * y
    e_rest = (W.T @ (tot * inv) - inv @ yw) / sw
    e_rest2 = (W.T @ (tot * inv) ** 2 - 2.0 * (tot * inv**2) @ yw + inv**2 @ yyw) / sw
    e_yrest = ((tot * inv) @ yw - inv @ yyw) / sw
    var_rest = np.maximum(e_rest2 - e_rest**2, 1e-12)
    var_y = np.maximum(p * (1 - p), 1e-12)
    r_pb = (e_yrest - p * e_rest) / np.sqrt(var_y * var_rest)
    pc = np.clip(p, 0.01, 0.99)
    r_bis = r_pb * np.sqrt(pc * (1 - pc)) / norm.pdf(norm.ppf(pc))
    lam = np.clip(np.nan_to_num(r_bis, nan=0.3), -0.9, 0.9)
    root = np.sqrt(1 - lam**2)
    n = len(p)
    if model.model in ("rasch", "1pl"):
        a = np.ones(n)
        # E sigma(theta + d) ~ sigma(d / sqrt(1 + pi / 8)) for theta ~ N(0, 1)
        d = np.log(pc / (1 - pc)) * np.sqrt(1 + np.pi / 8)
        c, u = np.zeros(n), np.ones(n)
    else:
        a = 1.702 * lam / root
        if model.log_slope:
            a = np.maximum(a, 0.25)
        c = np.full(n, prior_c.mode if prior_c is not None else _C_START) if model.has_c else np.zeros(n)
        c = np.minimum(c, 0.5)
        u = np.full(n, _U_START) if model.has_u else np.ones(n)
        p_adj = np.clip((pc - c) / (u - c), 0.02, 0.98)
        d = 1.702 * norm.ppf(p_adj) / root
    return model.internal(a, d, c, u)


# ====================================================================== results
@dataclass
class CalibrationResult:
    """What a calibration produced (the estimator's fitted attributes, as a plain object)."""

    bank: ItemBank
    model: str
    loglik: float
    loglik_trace: np.ndarray
    n_iter: int
    converged: bool
    seconds: float
    theta: np.ndarray
    theta_se: np.ndarray
    subject_ids: np.ndarray
    latent_variance: float = 1.0
    log_posterior: float | None = None
    dropped_items: list = field(default_factory=list)
    filter_report: object = None
    partitions: list | None = None
    linking: list | None = None
    settings: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        """JSON-ready summary (no per-subject arrays)."""
        out = {
            "model": self.model,
            "n_items": len(self.bank),
            "n_subjects": int(len(self.subject_ids)),
            "loglik": self.loglik,
            "log_posterior": self.log_posterior,
            "n_iter": int(self.n_iter),
            "converged": bool(self.converged),
            "seconds": round(float(self.seconds), 3),
            "latent_variance": self.latent_variance,
            "dropped_items": [str(i) for i in self.dropped_items],
            "settings": self.settings,
            "loglik_trace": [float(v) for v in self.loglik_trace],
        }
        if self.filter_report is not None:
            out["filtering"] = self.filter_report.to_dict()
        if self.partitions is not None:
            out["partitions"] = [{"n_items": len(p), **lk} for p, lk in zip(self.partitions, self.linking)]
        return out


# ====================================================================== estimator
class Calibrator:
    """Marginal maximum likelihood (MAP with priors) item calibration, scikit-learn style.

    Parameters
    ----------
    model : "auto" (default) | "rasch" | "1pl" | "2pl" | "3pl" | "4pl"
        "auto" chooses the model from the number of subjects (:mod:`atlascat.irt.defaults`:
        1PL below 100, 2PL below 1000, else 3PL) and says which and why (a warning, and
        ``result_.settings["defaults"]``).
        "rasch" is mirt's Rasch: slopes fixed at 1 and the latent variance estimated; the bank
        keeps a = 1 and ``latent_variance_`` holds sigma^2. "1pl" is the same fit expressed on
        the N(0, 1) scale: common slope a = sigma, b = -d / sigma.
    quadpts, theta_range : quadrature grid (61 nodes on [-6, 6], mirt's default)
    prior_a, prior_c : "auto" (default: the held-out winner's weak priors for the chosen model,
        a ~ lognorm(0,1), c ~ beta(2,8)), None for no prior (mirt), or a prior (spec string or
        object from :mod:`atlascat.irt.priors`), e.g. ``prior_c="beta(5,17)"``
    mirt_defaults : True resolves "auto" to mirt's defaults (3PL, no priors) for parity
    max_iter, tol : EM iteration cap (1000; mirt's is 500, but banks with many near-degenerate
        items need more) and convergence tolerance (max abs internal parameter change, 1e-4)
    accelerate : use SQUAREM (default True)
    partition_size : None for joint calibration, else partitioned calibration with partitions of
        at least this many items
    link : "mean-sigma" (default) or "mean-mean", for partitioned calibration
    filter : apply :func:`atlascat.filtering.filter_items` before calibrating (default False in
        the library; the CLI filters by default)
    dtype : "float64" (default) or "float32" for the large matrix products of the E-step
    random_state : seed or numpy Generator (partition assignment)
    callback : optional callable ``callback(info: dict)`` called after every recorded EM
        iteration with keys ``iteration``, ``loglik``, ``max_change``, ``worst_item`` (the item
        with the largest change), ``partition``, ``n_partitions``
    max_newton : Newton iterations per M-step
    start : optional ItemBank holding starting values for (some of) the items (warm start)
    convergence : "params" (mirt's rule: largest internal parameter change < tol) or "icc"
        (largest change of any item characteristic curve on the grid < tol)

    Fitted attributes
    -----------------
    bank_, loglik_, loglik_trace_, n_iter_, converged_, seconds_, latent_variance_, theta_,
    theta_se_, dropped_items_, filter_report_, defaults_ (the resolved model, priors, reason and
    warnings), result_ (a :class:`CalibrationResult`).
    """

    def __init__(self, model: str = "auto", *, quadpts: int = 61, theta_range=(-6.0, 6.0),
                 prior_a="auto", prior_c="auto", max_iter: int = 1000, tol: float = 1e-4,
                 accelerate: bool = True, partition_size: int | None = None,
                 link: str = "mean-sigma", filter: bool = False, dtype: str = "float64",
                 random_state=None, callback=None, max_newton: int = 8, start=None,
                 convergence: str = "params", mirt_defaults: bool = False):
        self.model = model
        self.mirt_defaults = mirt_defaults
        self.quadpts = quadpts
        self.theta_range = theta_range
        self.prior_a = prior_a
        self.prior_c = prior_c
        self.max_iter = max_iter
        self.tol = tol
        self.accelerate = accelerate
        self.partition_size = partition_size
        self.link = link
        self.filter = filter
        self.dtype = dtype
        self.random_state = random_state
        self.callback = callback
        self.max_newton = max_newton
        self.start = start
        self.convergence = convergence

    # ------------------------------------------------------------------ validation
    def _check_settings(self, choice=None):
        # "auto" model / priors are resolved from the data's size in fit (irt/defaults.py)
        from .defaults import _is_auto

        model = str(self.model if choice is None else choice.model).lower()
        pa, pc = ((self.prior_a, self.prior_c) if choice is None
                  else (choice.prior_a, choice.prior_c))
        if choice is None and (_is_auto(model) or _is_auto(pa) or _is_auto(pc)):
            pa, pc = (None if _is_auto(pa) else pa), (None if _is_auto(pc) else pc)
            if _is_auto(model):
                model = "3pl"      # validate the rest; the model is chosen in fit
        if model not in MODELS:
            raise ConfigError(f"unknown model {self.model!r}; choose one of {', '.join(MODELS)}")
        if int(self.quadpts) < 5:
            raise ConfigError(f"quadpts must be at least 5, got {self.quadpts}")
        if not int(self.max_iter) >= 1:
            raise ConfigError(f"max_iter must be >= 1, got {self.max_iter}")
        if not float(self.tol) > 0:
            raise ConfigError(f"tol must be positive, got {self.tol}")
        if self.link not in LINKS:
            raise ConfigError(f"unknown link {self.link!r}; choose one of {', '.join(LINKS)}")
        if self.convergence not in ("params", "icc"):
            raise ConfigError(f"convergence must be 'params' or 'icc', not {self.convergence!r}")
        if self.dtype not in ("float64", "float32"):
            raise ConfigError(f"dtype must be 'float64' or 'float32', got {self.dtype!r}")
        if self.partition_size is not None:
            if int(self.partition_size) < 2:
                raise ConfigError(f"partition_size must be >= 2, got {self.partition_size}")
            if model == "rasch":
                raise ConfigError(
                    "partitioned calibration links partitions on the N(0, 1) scale; use model "
                    "'1pl' (the same fit with a common slope) instead of 'rasch'"
                )
        prior_a = parse_prior(None if pa == "none" else pa, "a")
        prior_c = parse_prior(None if pc == "none" else pc, "c")
        if prior_a is not None and model in ("rasch", "1pl"):
            raise ConfigError(f"a prior on the slope needs a 2PL/3PL/4PL model, not {model!r}")
        if prior_c is not None and model not in ("3pl", "4pl"):
            raise ConfigError(f"a prior on c needs a 3PL or 4PL model, not {model!r}")
        return model, prior_a, prior_c

    # ------------------------------------------------------------------ fit
    def fit(self, responses, weights=None):
        """Calibrate on a ResponseMatrix (or an array, NaN = missing) and set the fitted attributes."""
        from ..responses import ResponseMatrix

        start = time.perf_counter()
        model, prior_a, prior_c = self._check_settings()
        if not isinstance(responses, ResponseMatrix):
            arr = np.asarray(responses, dtype=float)
            if arr.ndim != 2:
                raise ResponseDataError(f"responses must be 2-D (subjects x items), got shape {arr.shape}")
            responses = ResponseMatrix(arr, weights=weights, on_empty="drop")
        elif weights is not None:
            responses = ResponseMatrix(responses.values, responses.subject_ids, responses.item_ids,
                                       weights=weights)
        report = None
        if self.filter:
            from ..filtering import filter_items

            responses, report = filter_items(responses)
        values = responses.values
        item_ids = responses.item_ids
        obs = ~np.isnan(values)
        lo = np.where(obs, values, np.inf).min(axis=0)
        hi = np.where(obs, values, -np.inf).max(axis=0)
        constant = lo == hi
        dropped = [str(i) for i in item_ids[constant]]
        if dropped:
            warnings.warn(
                f"{len(dropped)} item(s) have the same response from every subject who saw them "
                f"(their MLE is at infinity) and were left out: {dropped[:10]}", stacklevel=2)
            values = values[:, ~constant]
            item_ids = item_ids[~constant]
        if values.shape[1] == 0:
            raise ResponseDataError("no item with variation in its responses is left to calibrate")
        w = responses.weights
        from .defaults import resolve as _resolve_defaults

        choice = _resolve_defaults(self.model, self.prior_a, self.prior_c, values, w,
                                   mirt_defaults=self.mirt_defaults, stacklevel=4)
        model, prior_a, prior_c = self._check_settings(choice)
        self.defaults_ = choice
        rng = self.random_state if isinstance(self.random_state, np.random.Generator) \
            else np.random.default_rng(self.random_state)
        item_model = _ItemModel(model if model != "1pl" else "rasch", prior_a, prior_c)
        settings = {"model": model, "quadpts": int(self.quadpts),
                    "theta_range": [float(v) for v in self.theta_range],
                    "prior_a": None if prior_a is None else str(prior_a),
                    "prior_c": None if prior_c is None else str(prior_c),
                    "max_iter": int(self.max_iter), "tol": float(self.tol),
                    "accelerate": bool(self.accelerate), "partition_size": self.partition_size,
                    "link": self.link if self.partition_size else None, "dtype": self.dtype,
                    "defaults": choice.to_dict()}
        if self.partition_size is None or values.shape[1] < 2 * int(self.partition_size):
            start_bank = None if self.start is None else self.start
            fit = self._fit_joint(values, w, item_model, 0, 1, start_bank=start_bank,
                                  item_ids=item_ids)
            bank = self._to_bank(item_ids, fit["th"], item_model, model, fit["var"])
            if model == "1pl":  # report thetas on the N(0, 1) scale of the 1PL bank
                sd = np.sqrt(fit["var"])
                fit["theta"], fit["theta_se"] = fit["theta"] / sd, fit["theta_se"] / sd
            result = CalibrationResult(
                bank=bank, model=model, loglik=fit["loglik"], loglik_trace=fit["trace"],
                n_iter=fit["n_iter"], converged=fit["converged"], seconds=0.0,
                theta=fit["theta"], theta_se=fit["theta_se"], subject_ids=responses.subject_ids,
                latent_variance=fit["var"], log_posterior=fit["log_posterior"],
                dropped_items=dropped, filter_report=report, settings=settings)
        else:
            result = self._fit_partitioned(values, w, item_ids, item_model, model, rng)
            result.subject_ids = responses.subject_ids
            result.dropped_items = dropped
            result.filter_report = report
            result.settings = settings
        result.seconds = time.perf_counter() - start
        self.result_ = result
        self.bank_ = result.bank
        self.loglik_ = result.loglik
        self.loglik_trace_ = result.loglik_trace
        self.n_iter_ = result.n_iter
        self.converged_ = result.converged
        self.seconds_ = result.seconds
        self.latent_variance_ = result.latent_variance
        self.theta_ = result.theta
        self.theta_se_ = result.theta_se
        self.dropped_items_ = dropped
        self.filter_report_ = report
        return self

    # ------------------------------------------------------------------ joint EM
    def _fit_joint(self, values, weights, item_model: _ItemModel, part: int, n_parts: int,
                   max_iter: int | None = None, start_bank: ItemBank | None = None,
                   item_ids=None):
        dt = np.float32 if self.dtype == "float32" else np.float64
        data = _Data.build(values, weights, dt)
        quad = normal_quadrature(int(self.quadpts), self.theta_range)
        x = quad.nodes
        rasch = item_model.model == "rasch"
        free = item_model.free
        n_items = values.shape[1]
        th0 = _start_values(values, weights, item_model, item_model.prior_c)
        if start_bank is not None and item_ids is not None:
            have = np.array([i in start_bank for i in item_ids])
            if have.any():
                sb = start_bank.subset([str(i) for i in item_ids[have]])
                given = item_model.internal(sb.a, sb.d, np.clip(sb.c, 1e-6, 1 - 1e-6),
                                            np.clip(sb.u, 1e-6, 1 - 1e-6))
                th0[np.ix_(np.flatnonzero(have), free)] = given[:, free]
        max_iter = int(self.max_iter if max_iter is None else max_iter)
        tol = float(self.tol)
        lo_v, hi_v = np.log(1e-3), np.log(100.0)

        def pack(th, log_var):
            p = th[:, free].ravel()
            return np.append(p, log_var) if rasch else p

        def unpack(p):
            th = th0.copy()
            k = len(free)
            th[:, free] = p[: n_items * k].reshape(n_items, k)
            return th, (float(p[-1]) if rasch else 0.0)

        lo = np.tile(item_model.lo[free], n_items)
        hi = np.tile(item_model.hi[free], n_items)
        if rasch:
            lo, hi = np.append(lo, lo_v), np.append(hi, hi_v)

        state = {"n_iter": 0, "trace": [], "worst": None}

        def estep(th, log_w):
            log_p, log_q = item_model.node_logs(th, x)
            return _estep(data, log_p, log_q, log_w)

        def em_map(p):
            """One EM iteration from p: (new parameters, log-posterior at p)."""
            th, log_var = unpack(p)
            log_w = _grid_log_weights(x, np.exp(log_var)) if rasch else quad.log_weights
            es = estep(th, log_w)
            obj = es.loglik + float(item_model.log_prior(th).sum())
            nr = es.n - es.r if es.n.ndim == 2 else es.n
            th_new = _mstep(item_model, th, es.r, nr, x, self.max_newton)
            log_var_new = np.log(_rasch_variance(x, es.node_mass)) if rasch else 0.0
            state["n_iter"] += 1
            return pack(th_new, log_var_new), obj

        def report(obj, change):
            state["trace"].append(obj)
            if self.callback is not None:
                worst = state["worst"]
                self.callback({"iteration": state["n_iter"], "loglik": obj, "max_change": change,
                               "worst_item": None if worst is None or item_ids is None
                               else str(item_ids[worst]),
                               "partition": part, "n_partitions": n_parts})

        def change(pa, pb):
            """Largest parameter change (or item-curve change); remembers the item."""
            k = len(free)
            if self.convergence == "params":
                per_item = np.abs(pb - pa)[: n_items * k].reshape(n_items, k).max(axis=1)
                extra = abs(pb[-1] - pa[-1]) if rasch else 0.0
            else:
                tha, lva = unpack(pa)
                thb, lvb = unpack(pb)
                pa_, pb_ = (np.exp(item_model.node_logs(t, x)[0]) for t in (tha, thb))
                per_item = np.abs(pb_ - pa_).max(axis=1)
                extra = abs(lvb - lva)
            worst = int(np.argmax(per_item))
            state["worst"] = worst if per_item[worst] >= extra else None
            return max(float(per_item[worst]), float(extra))

        p = pack(th0, 0.0)
        converged = False
        step_max = 1.0
        while state["n_iter"] < max_iter:
            p0 = p
            p1, f0 = em_map(p0)
            ch = change(p0, p1)
            report(f0, ch)
            p = p1
            if ch < tol:
                converged = True
                break
            if not self.accelerate or state["n_iter"] >= max_iter:
                continue
            p2, f1 = em_map(p1)
            ch = change(p1, p2)
            report(f1, ch)
            p = p2
            if ch < tol:
                converged = True
                break
            if state["n_iter"] >= max_iter:
                break
            # SQUAREM S3 extrapolation with a monotonicity safeguard
            r = p1 - p0
            v = (p2 - p1) - r
            k = len(free)
            rr_ = (r[: n_items * k].reshape(n_items, k) ** 2).sum(axis=1)
            vv_ = (v[: n_items * k].reshape(n_items, k) ** 2).sum(axis=1)
            if rasch:
                rr_, vv_ = np.append(rr_, r[-1] ** 2), np.append(vv_, v[-1] ** 2)
            with np.errstate(divide="ignore", invalid="ignore"):
                al = -np.sqrt(rr_ / vv_)
            al = np.where(np.isfinite(al), al, -1.0)
            at_max = bool(np.any(al <= -step_max))
            al = np.clip(al, -step_max, -1.0)
            if np.all(al == -1.0):  # the extrapolation is p2 itself
                if at_max:
                    step_max *= 4.0
                continue
            alpha = np.repeat(al[:n_items], k)
            if rasch:
                alpha = np.append(alpha, al[-1])
            pe = np.clip(p0 - 2.0 * alpha * r + alpha * alpha * v, lo, hi)
            p3, fe = em_map(pe)
            if np.isfinite(fe) and fe >= f1:
                ch = change(pe, p3)
                report(fe, ch)
                p = p3
                if at_max:
                    step_max *= 4.0
                if ch < tol:
                    converged = True
                    break
            elif at_max:
                step_max = max(1.0, step_max / 4.0)
        th, log_var = unpack(p)
        var = float(np.exp(log_var)) if rasch else 1.0
        log_w = _grid_log_weights(x, var) if rasch else quad.log_weights
        es = estep(th, log_w)
        theta = es.post @ x
        se = np.sqrt(np.maximum(es.post @ x**2 - theta**2, 0.0))
        log_post = es.loglik + float(item_model.log_prior(th).sum())
        if not np.isfinite(es.loglik) or not np.all(np.isfinite(th[:, free])):
            raise ConvergenceError("calibration produced non-finite values; check the data")
        return {"th": th, "var": var, "loglik": es.loglik, "log_posterior": log_post,
                "trace": np.asarray(state["trace"]), "n_iter": state["n_iter"],
                "converged": converged, "theta": theta, "theta_se": se, "post": es.post,
                "nodes": x}

    # ------------------------------------------------------------------ banks
    @staticmethod
    def _to_bank(item_ids, th, item_model: _ItemModel, model: str, var: float) -> ItemBank:
        a, d, c, u = item_model.natural(th)
        if model == "1pl":
            a = np.full_like(d, np.sqrt(var))
        elif model == "rasch":
            a = np.ones_like(d)
        b = -d / np.where(a == 0, 1e-12, a)
        return ItemBank(item_ids, a, b, c, u, model="1pl" if model in ("rasch", "1pl") else model)

    # ------------------------------------------------------------------ partitions
    def _fit_partitioned(self, values, weights, item_ids, item_model: _ItemModel, model: str, rng):
        from .linking import mean_sigma, transform_bank

        n_items = values.shape[1]
        size = int(self.partition_size)
        n_parts = max(1, n_items // size)
        parts = [np.sort(p) for p in np.array_split(rng.permutation(n_items), n_parts)]
        w = np.ones(values.shape[0]) if weights is None else np.asarray(weights, float)
        banks, linking = [], []
        traces, n_iter, converged = [], 0, True
        ref_theta = ref_seen = None
        for k, idx in enumerate(parts):
            sub = values[:, idx]
            fit = self._fit_joint(sub, weights, item_model, k, n_parts, item_ids=item_ids[idx])
            bank = self._to_bank(item_ids[idx], fit["th"], item_model, model, fit["var"])
            theta = fit["theta"] / np.sqrt(fit["var"]) if model == "1pl" else fit["theta"]
            seen = (~np.isnan(sub)).any(axis=1)
            traces.append(fit["trace"])
            n_iter = max(n_iter, fit["n_iter"])
            converged &= fit["converged"]
            if k == 0:
                ref_theta, ref_seen = theta, seen
                A, B, n_common = 1.0, 0.0, int(seen.sum())
            else:
                common = seen & ref_seen
                n_common = int(common.sum())
                if n_common < 3:
                    raise ConfigError(
                        f"partition {k} shares only {n_common} subjects with partition 0; "
                        "common-person linking needs overlapping subjects (use a larger "
                        "partition_size or joint calibration)"
                    )
                if self.link == "mean-sigma":
                    A, B = mean_sigma(ref_theta[common], theta[common], weights=w[common])
                else:
                    mref = np.average(ref_theta[common], weights=w[common])
                    mk = np.average(theta[common], weights=w[common])
                    A, B = 1.0, float(mref - mk)
                bank = transform_bank(bank, A, B)
            banks.append(bank)
            linking.append({"partition": k, "A": float(A), "B": float(B), "n_common": n_common,
                            "n_iter": int(fit["n_iter"]), "converged": bool(fit["converged"]),
                            "loglik": float(fit["loglik"])})
        order = np.concatenate(parts)
        inv = np.empty_like(order)
        inv[order] = np.arange(order.size)
        cat = lambda attr: np.concatenate([getattr(b, attr) for b in banks])[inv]  # noqa: E731
        bank = ItemBank(item_ids, cat("a"), cat("b"), cat("c"), cat("u"),
                        model="1pl" if model in ("rasch", "1pl") else model)
        # fixed-parameter scoring pass on the linked bank
        quad = normal_quadrature(int(self.quadpts), self.theta_range)
        es = _bank_estep(values, weights, bank, quad)
        theta = es.post @ quad.nodes
        se = np.sqrt(np.maximum(es.post @ quad.nodes**2 - theta**2, 0.0))
        return CalibrationResult(
            bank=bank, model=model, loglik=es.loglik, loglik_trace=np.concatenate(traces),
            n_iter=n_iter, converged=bool(converged), seconds=0.0, theta=theta, theta_se=se,
            subject_ids=None, latent_variance=1.0, log_posterior=None,
            partitions=[item_ids[p].tolist() for p in parts], linking=linking)


# ====================================================================== public helpers
def _bank_estep(values, weights, bank: ItemBank, quad, latent_sd: float = 1.0) -> _EStep:
    """E-step of a fixed bank on an array in the bank's item order."""
    from . import models

    data = _Data.build(values, weights)
    log_p, log_q = models.log_probability(quad.nodes, *bank.params)   # (q, m)
    log_w = quad.log_weights if latent_sd == 1.0 else _grid_log_weights(quad.nodes, latent_sd**2)
    return _estep(data, log_p.T, log_q.T, log_w)


def marginal_loglik(responses, bank: ItemBank, quadpts: int = 61, theta_range=(-6.0, 6.0), *,
                    latent_sd: float = 1.0, weights=None) -> float:
    """Marginal log-likelihood of a bank on response data.

    log L = sum_i w_i log sum_q pi_q prod_{j observed} P_j(x_q)^y_ij Q_j(x_q)^(1 - y_ij), on the
    grid of ``quadpts`` equally spaced nodes over ``theta_range`` with weights pi_q proportional
    to the N(0, latent_sd^2) density (mirt's definition of the log-likelihood of an EM fit).

    ``responses``: a ResponseMatrix (aligned to the bank by item id; its pattern weights are
    used unless ``weights`` is given) or an array in the bank's item order.
    """
    from ..responses import ResponseMatrix
    from .ability import response_array

    if isinstance(responses, ResponseMatrix) and weights is None:
        weights = responses.weights
    values = response_array(responses, bank)
    quad = normal_quadrature(quadpts, theta_range)
    return _bank_estep(values, weights, bank, quad, latent_sd).loglik


def calibrate(responses, model: str = "auto", **settings) -> CalibrationResult:
    """Calibrate an item bank: ``Calibrator(model, **settings).fit(responses).result_``.

    See :class:`Calibrator` for the settings. Returns a :class:`CalibrationResult` with the
    bank, log-likelihood (and its trace per EM iteration), iterations, convergence flag, time,
    EAP thetas of the subjects and what filtering dropped.
    """
    weights = settings.pop("weights", None)
    return Calibrator(model, **settings).fit(responses, weights=weights).result_
