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
used only if its log-likelihood is not below the last EM iterate's; a rejected point costs its
E-step only).

Arrays: every kernel (E-step, M-step, log-likelihood, Rasch variance, the final EAP pass) is
written against the Python array API standard and takes its namespace from its arguments
(:mod:`atlascat.irt._xp`), so NumPy (default), PyTorch and CuPy arrays run the same code
(``device="cuda"``). The data is moved to the device once; the loop reads back one small vector
per EM iteration (two when an extrapolation is tried). With ``dtype="float32"`` the large
products run in float32 until their rounding noise dominates, then the EM finishes in float64.

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

import math
import time
from dataclasses import dataclass, field

import numpy as np
from scipy.stats import norm

from ..errors import ConfigError, ConvergenceError, ResponseDataError, warn_user
from . import _xp
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
_LOG_A_MIN = math.log(1e-3)
_C_START = 0.1
_PRED_REL = 1e-12  # M-step: stop an item when its predicted gain is below this x |objective|

_U_START = 0.95
# 4PL: every iterate keeps u - c >= _UC_GAP (M-step line search, SQUAREM, start values), so
# the bank's 0 <= c < u <= 1 holds by construction
_UC_GAP = 1e-6


# ====================================================================== item model
def _prior_terms(prior, t, xp):
    """(log p, d/dt, d2/dt2) of a prior at internal parameter ``t``, in ``t``'s namespace.

    The formulas of :mod:`atlascat.irt.priors` (``prior.terms``) written with array-API
    operations only, so that they run on the device; log c and log(1 - c) are taken as
    log sigma(+-t), exact where ``prior.terms`` clips at 1e-300.
    """
    name = type(prior).__name__
    if name == "BetaPrior":
        from scipy.special import betaln

        al, be = float(prior.alpha), float(prior.beta)
        c = _xp.expit(t, xp)
        logp = ((al - 1.0) * _xp.log_expit(t, xp) + (be - 1.0) * _xp.log_expit(-t, xp)
                - float(betaln(al, be)))
        return logp, (al - 1.0) * (1.0 - c) - (be - 1.0) * c, -(al + be - 2.0) * c * (1.0 - c)
    mu, sd = float(prior.mu), float(prior.sigma)
    z = (t - mu) / sd
    const = -math.log(sd) - 0.5 * _xp.LOG_2PI
    hess = xp.zeros_like(t) - 1.0 / sd**2
    if name == "LogNormalPrior":
        return -t - 0.5 * z * z + const, -1.0 - z / sd, hess
    if name in ("LogitNormalPrior", "NormalPrior"):
        return -0.5 * z * z + const, -z / sd, hess
    raise ConfigError(f"prior {prior} has no array-API form; use beta, logitnorm, lognorm, norm")


class _ItemModel:
    """Internal parameterization of one item type and its derivatives, batched over items.

    Internal parameter matrix ``th`` has shape (n_items, 4): columns slope (a, or log a when
    the slope has a log-normal prior), d, logit c, logit u. ``free`` lists the estimated columns.
    Every method takes arrays of any array-API namespace (NumPy, PyTorch, CuPy) and returns
    arrays of the same namespace; nothing leaves the device.
    """

    def __init__(self, model: str, prior_a=None, prior_c=None, prior_u=None):
        self.model = model
        self.prior_a = prior_a
        self.prior_c = prior_c
        self.prior_u = prior_u if model == "4pl" else None
        self.log_slope = prior_a is not None and prior_a.internal == "log"
        self.has_c = model in ("3pl", "4pl")
        self.has_u = model == "4pl"
        self.free = {"rasch": [1], "1pl": [1], "2pl": [0, 1], "3pl": [0, 1, 2],
                     "4pl": [0, 1, 2, 3]}[model]
        a_lo, a_hi = (_LOG_A_MIN, math.log(_A_MAX)) if self.log_slope else (-_A_MAX, _A_MAX)
        self.lo = np.array([a_lo, -_D_MAX, -_LOGIT_MAX, -_LOGIT_MAX])
        self.hi = np.array([a_hi, _D_MAX, _LOGIT_MAX, _LOGIT_MAX])

    # ------------------------------------------------------------------ parameters
    def natural(self, th):
        """(a, d, c, u) from internal parameters (c, u as arrays even when fixed)."""
        xp = _xp.namespace(th)
        a = xp.exp(th[:, 0]) if self.log_slope else th[:, 0]
        c = _xp.expit(th[:, 2], xp) if self.has_c else xp.zeros_like(th[:, 1])
        u = _xp.expit(th[:, 3], xp) if self.has_u else xp.ones_like(th[:, 1])
        return a, th[:, 1], c, u

    def internal(self, a, d, c, u):
        """Internal parameters (host NumPy, used once for start values)."""
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
        xp = _xp.namespace(th, x)
        a, d, c, u = self.natural(th)
        z = a[:, None] * x[None, :] + d[:, None]
        if not (self.has_c or self.has_u):
            return _xp.log_expit(z, xp), _xp.log_expit(-z, xp)
        rng = (u - c)[:, None]
        if self.has_u:
            p = c[:, None] + rng * _xp.expit(z, xp)
            q = (1.0 - u)[:, None] + rng * _xp.expit(-z, xp)
            return xp.log(p), xp.log(q)
        # 3PL: log P = log(c + (1 - c) s) = log sigma(z) + log1p(c e^-z) written with
        # log sigma(-gamma) etc. would cost more; c + (1 - c) s is exact to rounding here.
        # log Q = log(1 - c) + log sigma(-z) keeps full precision for large z.
        p = c[:, None] + rng * _xp.expit(z, xp)
        return xp.log(p), _xp.log_expit(-th[:, 2], xp)[:, None] + _xp.log_expit(-z, xp)

    def feasible(self, th):
        """Per item: True where the asymptotes are ordered, u - c >= ``_UC_GAP`` (always True
        below the 4PL)."""
        xp = _xp.namespace(th)
        if not self.has_u:
            return xp.zeros_like(th[:, 1]) == 0.0
        return _xp.expit(th[:, 2], xp) <= _xp.expit(th[:, 3], xp) - _UC_GAP

    def log_prior(self, th):
        """Sum of log prior densities per item (zeros without priors)."""
        xp = _xp.namespace(th)
        out = xp.zeros_like(th[:, 1])
        if self.prior_a is not None:
            out = out + _prior_terms(self.prior_a, th[:, 0], xp)[0]
        if self.prior_c is not None and self.has_c:
            out = out + _prior_terms(self.prior_c, th[:, 2], xp)[0]
        if self.prior_u is not None:
            out = out + _prior_terms(self.prior_u, th[:, 3], xp)[0]
        return out

    def objective(self, th, r, nr, x):
        """Complete-data log-likelihood + log prior per item, shape (n_items,)."""
        xp = _xp.namespace(th)
        log_p, log_q = self.node_logs(th, x)
        return xp.sum(r * log_p, axis=1) + xp.sum(nr * log_q, axis=1) + self.log_prior(th)

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
        xp = _xp.namespace(th)
        out = self._derivs(th, r, nr, x, fisher, with_value)
        g, h = out[-2], out[-1]
        g = xp.stack(g, axis=1)
        h = xp.stack([xp.stack(row, axis=1) for row in h], axis=1)
        return (out[0], g, h) if with_value else (g, h)

    def _derivs(self, th, r, nr, x, fisher: bool = False, with_value: bool = False,
                both: bool = False):
        """:meth:`derivatives` as lists: g[k] and h[k][l], each of shape (n_items,).

        ``both=True`` returns the observed Hessian and minus the Fisher information together,
        ``(value?, g, h, h_fisher)``, from one pass over the (items x nodes) intermediates.
        """
        xp = _xp.namespace(th, r)
        a, d, c, u = self.natural(th)
        z = a[:, None] * x[None, :] + d[:, None]
        s, sm = _xp.expit_pair(z, xp)
        ssum = lambda v: xp.sum(v, axis=1)  # noqa: E731
        kinds = (False, True) if both else (bool(fisher),)
        n = r + nr
        # (items x nodes) second-derivative terms, per kind (observed / Fisher)
        T = {kind: {} for kind in kinds}
        if not (self.has_c or self.has_u):
            ez, fz = sm, s
            gz = r * ez - nr * fz
            hzz = -n * s * sm               # observed = Fisher for the 1PL/2PL
            for kind in kinds:
                T[kind]["zz"] = hzz
            if with_value:
                value = ssum(r * _xp.log_expit(z, xp)) + ssum(nr * _xp.log_expit(-z, xp))
        else:
            rng = (u - c)[:, None]
            p_ = c[:, None] + rng * s
            q_ = (1.0 - u)[:, None] + rng * sm
            if with_value:
                value = ssum(r * xp.log(p_)) + ssum(nr * xp.log(q_))
            ip = 1.0 / p_
            iq = 1.0 / q_
            ssm = rng * s * sm
            ez, fz = ssm * ip, ssm * iq
            gz = r * ez - nr * fz
            for kind in kinds:
                if kind:
                    T[kind]["zz"] = -n * ez * fz
                else:
                    one2s = 1.0 - 2.0 * s
                    T[kind]["zz"] = r * ez * (one2s - ez) - nr * fz * (one2s + fz)
        G = {1: ssum(gz)}
        gz1 = gz @ x
        G[0] = a * gz1 if self.log_slope else gz1
        slope_scale = a if self.log_slope else 1.0
        if self.has_c:
            cc = (c * (1.0 - c))[:, None]
            eg, fg = cc * sm * ip, cc * sm * iq
            G[2] = ssum(r * eg - nr * fg)
            for kind in kinds:
                if kind:
                    T[kind]["gg"] = -n * eg * fg
                    T[kind]["gz"] = -n * eg * fz
                else:
                    c12 = (1.0 - 2.0 * c)[:, None]
                    T[kind]["gg"] = r * eg * (c12 - eg) - nr * fg * (c12 + fg)
                    T[kind]["gz"] = -r * eg * (s + ez) + nr * fg * (s - fz)
        if self.has_u:
            uu = (u * (1.0 - u))[:, None]
            ev, fv = uu * s * ip, uu * s * iq
            G[3] = ssum(r * ev - nr * fv)
            for kind in kinds:
                if kind:
                    T[kind]["vv"] = -n * ev * fv
                    T[kind]["vz"] = -n * ev * fz
                    T[kind]["gv"] = -n * eg * fv
                else:
                    u12 = (1.0 - 2.0 * u)[:, None]
                    T[kind]["vv"] = r * ev * (u12 - ev) - nr * fv * (u12 + fv)
                    T[kind]["vz"] = r * ev * (sm - ez) - nr * fv * (sm + fz)
                    T[kind]["gv"] = -r * eg * ev - nr * fg * fv
        prior_a = prior_c = prior_u = None
        if self.prior_a is not None:
            _, ga, prior_a = _prior_terms(self.prior_a, th[:, 0], xp)
            G[0] = G[0] + ga
        if self.prior_c is not None and self.has_c:
            _, gc, prior_c = _prior_terms(self.prior_c, th[:, 2], xp)
            G[2] = G[2] + gc
        if self.prior_u is not None:
            _, gu, prior_u = _prior_terms(self.prior_u, th[:, 3], xp)
            G[3] = G[3] + gu
        f = self.free
        hessians = []
        for kind in kinds:
            t = T[kind]
            hzz = t["zz"]
            hz0, hz1, hz2 = ssum(hzz), hzz @ x, hzz @ (x * x)   # sum hzz, hzz x, hzz x^2
            H = {}
            # slope and intercept through z = a x + d
            if self.log_slope:
                H[0, 0] = a * a * hz2 + (0.0 if kind else a * gz1)
                H[0, 1] = a * hz1
            else:
                H[0, 0] = hz2
                H[0, 1] = hz1
            H[1, 1] = hz0
            if self.has_c:
                H[2, 2] = ssum(t["gg"])
                H[0, 2] = slope_scale * (t["gz"] @ x)
                H[1, 2] = ssum(t["gz"])
            if self.has_u:
                H[3, 3] = ssum(t["vv"])
                H[0, 3] = slope_scale * (t["vz"] @ x)
                H[1, 3] = ssum(t["vz"])
                H[2, 3] = ssum(t["gv"])
            if prior_a is not None:
                H[0, 0] = H[0, 0] + prior_a
            if prior_c is not None:
                H[2, 2] = H[2, 2] + prior_c
            if prior_u is not None:
                H[3, 3] = H[3, 3] + prior_u
            hessians.append([[H[min(k, l), max(k, l)] for l in f] for k in f])
        out = ((value + self.log_prior(th),) if with_value else ()) + ([G[k] for k in f],)
        return out + tuple(hessians)


# ====================================================================== M-step
def _pd_solve(A, g, rel_tol: float = 1e-8):
    """Solve A s = g for a batch of small symmetric matrices by Cholesky.

    ``A`` is a k x k nested list and ``g`` a length-k list of arrays of shape (n,) (or an
    (n, k, k) and an (n, k) array, then the result is an (n, k) array). Returns ``(s, ok)``;
    ``ok`` is False where A is not numerically positive definite (pivot <= rel_tol * largest
    diagonal entry), and there ``s`` is meaningless. Loops run over the k <= 4 columns only.
    """
    as_arrays = not isinstance(g, list)
    if as_arrays:
        xp0 = _xp.namespace(g)
        k0 = g.shape[1]
        A = [[A[:, i, j] for j in range(k0)] for i in range(k0)]
        g = [g[:, i] for i in range(k0)]
    xp = _xp.namespace(g[0])
    k = len(g)
    diag = [xp.abs(A[i][i]) for i in range(k)]
    big = diag[0]
    for v in diag[1:]:
        big = xp.maximum(big, v)
    tiny = rel_tol * big + 1e-300
    L = [[None] * k for _ in range(k)]
    ok = None
    for j in range(k):
        d = A[j][j]
        for p in range(j):
            d = d - L[j][p] * L[j][p]
        okj = d > tiny
        ok = okj if ok is None else xp.logical_and(ok, okj)
        ljj = xp.sqrt(xp.maximum(d, tiny))
        L[j][j] = ljj
        for i in range(j + 1, k):
            v = A[i][j]
            for p in range(j):
                v = v - L[i][p] * L[j][p]
            L[i][j] = v / ljj
    y = [None] * k
    for i in range(k):
        v = g[i]
        for p in range(i):
            v = v - L[i][p] * y[p]
        y[i] = v / L[i][i]
    s = [None] * k
    for i in reversed(range(k)):
        v = y[i]
        for p in range(i + 1, k):
            v = v - L[p][i] * s[p]
        s[i] = v / L[i][i]
    if as_arrays:
        return xp0.stack(s, axis=1), ok
    return s, ok


def _mstep(model: _ItemModel, th, r, nr, x, max_newton: int = 8, step_tol: float = 1e-9,
           max_halvings: int = 8, sync: bool | None = None):
    """Batched Newton ascent of every item's complete-data objective (all items at once).

    For each item: gradient g and Hessian H; the Newton step s = -H^-1 g where H is negative
    definite (a batched Cholesky factorization decides), else the Fisher-scoring step
    s = I^-1 g with the expected information I (plus a tiny ridge), so every step is an ascent
    direction. Steps are capped at 2 internal units per coordinate and cut at the parameter
    bounds; a backtracking (Armijo) line search accepts t s only if the objective rises by at
    least 1e-4 t g.s (up to rounding). Items whose predicted gain g.s is at rounding level,
    whose step is below ``step_tol`` or whose line search fails stop iterating.

    ``nr`` is n - r, (n_items, n_nodes), or the node masses n, (n_nodes,), for dense data.
    ``sync`` (default: True on host arrays) lets the loops read scalars back to exit early and
    restrict work to the items still active; with ``sync=False`` (accelerators) every loop runs
    its full count with masks and nothing is read back. Both give the same iterates.
    """
    xp = _xp.namespace(th, r)
    sync = _xp.can_sync(xp) if sync is None else sync
    f = model.free
    k = len(f)
    lo = [float(model.lo[j]) for j in f]
    hi = [float(model.hi[j]) for j in f]
    dense_n = nr.ndim == 1
    nr_full = nr[None, :] - r if dense_n else nr
    th = th + 0.0  # a copy: the host path updates rows in place
    active = xp.zeros_like(th[:, 1]) == 0.0
    f0 = None
    for _ in range(max_newton):
        if sync:
            if not bool(xp.any(active)):
                break
            sub = not bool(xp.all(active))
        else:
            sub = False
        ta = th[active] if sub else th
        ra = r[active] if sub else r
        nra = nr_full[active] if sub else nr_full
        fa = (f0[active] if sub else f0) if f0 is not None else None
        if fa is None:
            fa, g, h, hf = model._derivs(ta, ra, nra, x, with_value=True, both=True)
            f0 = fa
        else:
            g, h, hf = model._derivs(ta, ra, nra, x, both=True)
        step, ok = _pd_solve([[-v for v in row] for row in h], g)
        if not sync or not bool(xp.all(ok)):  # Fisher scoring where H is not negative definite
            info = [[-v for v in row] for row in hf]
            big = xp.abs(info[0][0])
            for i in range(k):
                for j in range(k):
                    big = xp.maximum(big, xp.abs(info[i][j]))
            ridge = 1e-8 * big + 1e-12
            for i in range(k):
                info[i][i] = info[i][i] + ridge
            sf, _ = _pd_solve(info, g)
            step = [xp.where(ok, s_, t_) for s_, t_ in zip(step, sf)]
        big = xp.abs(step[0])
        for s_ in step[1:]:
            big = xp.maximum(big, xp.abs(s_))
        scale = xp.minimum(xp.ones_like(big), 2.0 / xp.maximum(big, xp.full_like(big, 1e-300)))
        # a step pushing a parameter through its bound is cut at the bound
        base = [ta[:, j] for j in f]
        step = [xp.clip(b_ + s_ * scale, lo[i], hi[i]) - b_
                for i, (b_, s_) in enumerate(zip(base, step))]
        pred = step[0] * g[0]
        smax = xp.abs(step[0])
        for i in range(1, k):
            pred = pred + step[i] * g[i]
            smax = xp.maximum(smax, xp.abs(step[i]))
        go = xp.logical_and(pred > _PRED_REL * (1.0 + xp.abs(fa)), smax > step_tol)
        if not sync:
            go = xp.logical_and(go, active)
        if sync:
            cand_cols, new_f, moved, t = _line_search_host(model, ta, ra, nra, x, base, step,
                                                           fa, pred, go, max_halvings)
        else:
            cand_cols, new_f, moved, t = _line_search_masked(model, ta, ra, nra, x, base, step,
                                                             fa, pred, go, max_halvings)
        cand = _set_free(ta, f, cand_cols)
        keep = xp.logical_and(moved, t * smax > step_tol)
        if sub:
            th[active] = cand
            f0[active] = new_f
            act_new = xp.zeros_like(active)
            act_new[active] = keep
            active = act_new
        else:
            th = cand
            f0 = new_f
            active = xp.logical_and(active, keep)
    return th


def _armijo_ok(model, trial, ft, fa, t, pred):
    """Armijo acceptance of trial points, with a rounding allowance so that converged items
    can still take their last tiny Newton steps (|f| ~ 1e2-1e5, relative precision ~1e-16 per
    term); a 4PL trial must also keep c < u."""
    xp = _xp.namespace(ft)
    ok = xp.logical_and(xp.isfinite(ft), ft >= fa + 1e-4 * t * pred - 1e-13 * xp.abs(fa))
    if model.has_u:
        ok = xp.logical_and(ok, model.feasible(trial))
    return ok


def _line_search_masked(model, ta, r, nr, x, base, step, fa, pred, go, max_halvings):
    """Backtracking on t = 1, 1/2, ..., 2^-(max_halvings-1) with masks and a fixed count
    (nothing read back: the accelerator path). Returns (columns, objective, moved, t)."""
    xp = _xp.namespace(fa)
    free = model.free
    t = xp.ones_like(fa)
    new_f, moved, pending, cand_cols = fa, xp.zeros_like(go), go, base
    for _ in range(max_halvings):
        trial_cols = [b_ + t * s_ for b_, s_ in zip(base, step)]
        trial = _set_free(ta, free, trial_cols)
        ft = model.objective(trial, r, nr, x)
        okt = _armijo_ok(model, trial, ft, fa, t, pred)
        acc = xp.logical_and(pending, okt)
        cand_cols = [xp.where(acc, tc, cc) for tc, cc in zip(trial_cols, cand_cols)]
        new_f = xp.where(acc, ft, new_f)
        moved = xp.logical_or(moved, acc)
        pending = xp.logical_and(pending, xp.logical_not(okt))
        t = xp.where(pending, 0.5 * t, t)
    return cand_cols, new_f, moved, t


def _line_search_host(model, ta, r, nr, x, base, step, fa, pred, go, max_halvings):
    """:func:`_line_search_masked`'s result in at most two objective calls (host arrays).

    t = 1 for every item in ``go``; then, for the items that failed, every remaining step
    length 2^-h (h = 1, ..., max_halvings - 1) stacked into one call, the largest acceptable
    one winning: the same point as trying them one after another, without one pass of
    Python overhead per halving (items at rounding level fail every halving).
    """
    xp = _xp.namespace(fa)
    free = model.free
    t = xp.ones_like(fa)
    new_f, moved, cand_cols = fa, xp.zeros_like(go), list(base)
    pending = go
    for ts in ([1.0], [0.5 ** h for h in range(1, max_halvings)]):
        if not ts or not bool(xp.any(pending)):
            break
        whole = bool(xp.all(pending))
        sel = (lambda v: v) if whole else (lambda v: v[pending])  # noqa: E731
        b_s, s_s, fa_s, pr_s = [sel(v) for v in base], [sel(v) for v in step], sel(fa), sel(pred)
        n_s, H = int(fa_s.shape[0]), len(ts)
        tcol = _xp.concat([xp.full_like(fa_s, tv) for tv in ts], xp)          # (H n_s,)
        trial_cols = [_xp.concat([b_] * H, xp) + tcol * _xp.concat([s_] * H, xp)
                      for b_, s_ in zip(b_s, s_s)]
        tile = (lambda v: v) if H == 1 else (lambda v: _xp.concat([v] * H, xp))  # noqa: E731
        trial = _set_free(tile(sel(ta)), free, trial_cols)
        ft = model.objective(trial, tile(sel(r)), tile(sel(nr)), x)
        ok = _armijo_ok(model, trial, ft, tile(fa_s), tcol, tile(pr_s))
        # the first acceptable step length of each item (H = none)
        chosen = xp.full_like(fa_s, float(H))
        for h in reversed(range(H)):
            chosen = xp.where(ok[h * n_s:(h + 1) * n_s], float(h), chosen)
        got = chosen < H
        new_t = xp.full_like(fa_s, 0.5 ** (max_halvings if H > 1 else 1))
        pick_f, pick_cols = fa_s, b_s
        for h in range(H):
            at = chosen == float(h)
            seg = slice(h * n_s, (h + 1) * n_s)
            new_t = xp.where(at, ts[h], new_t)
            pick_f = xp.where(at, ft[seg], pick_f)
            pick_cols = [xp.where(at, tc[seg], pc) for tc, pc in zip(trial_cols, pick_cols)]
        if whole:
            t, new_f, moved, cand_cols = new_t, pick_f, got, pick_cols
        else:
            t, new_f, moved = t + 0.0, new_f + 0.0, moved | False
            t[pending], new_f[pending], moved[pending] = new_t, pick_f, got
            for i, pc in enumerate(pick_cols):
                col = cand_cols[i] + 0.0
                col[pending] = pc
                cand_cols[i] = col
            got_full = xp.zeros_like(pending)
            got_full[pending] = got
            got = got_full
        pending = xp.logical_and(pending, xp.logical_not(got))
    return cand_cols, new_f, moved, t


def _set_free(th, free, cols):
    """``th`` with its ``free`` columns replaced by ``cols`` (a new array, no setitem)."""
    xp = _xp.namespace(th)
    out = [th[:, j] for j in range(th.shape[1])]
    for j, col in zip(free, cols):
        out[j] = col
    return xp.stack(out, axis=1)


# ====================================================================== data and E-step
def _plan_blocks(values, xp, device, dtype, memory_limit, quadpts):
    """(rows per block, keep the data on the host) for a memory bound of ``memory_limit`` bytes.

    The data takes n m b bytes (b = 4 or 8) per array, twice with missing cells (scores and
    mask); each block of subjects needs about 6 (rows x nodes) float64 work arrays. Without a
    bound: everything in one block, except on a CUDA device, where the bound is 80% of its free
    memory. Data that fits within half the bound is moved to the device once and worked on in
    blocks whose work arrays fit in the other half; larger data stays on the host and is moved
    one block per E-step (the only per-iteration transfer, needed only when the device is too
    small for the matrix).
    """
    n, m = values.shape
    item = 4 if dtype == "float32" else 8
    n_arrays = 1 if not np.isnan(values).any() else 2
    limit = memory_limit
    if limit is None and device is not None and "cuda" in str(device):
        try:
            import torch

            limit = 0.8 * torch.cuda.mem_get_info(device)[0]
        except Exception:  # pragma: no cover - no torch / no CUDA runtime
            limit = None
    if limit is None:
        return None, False
    limit = float(limit)
    row_data = m * item * n_arrays
    row_work = 6 * quadpts * 8
    if n * row_data <= 0.5 * limit:
        rows = int(max(1, (0.5 * limit) // row_work))
        return (None if rows >= n else rows), False
    rows = int(max(1, (0.5 * limit) // (row_data + row_work)))
    return rows, not _xp.is_numpy(xp)



@dataclass
class _Data:
    """Response data on the compute device, in row blocks of at most ``block_rows`` subjects.

    ``blocks`` holds (y, mask, w) per block: scores with 0 in missing cells (compute dtype),
    the observed mask (compute dtype) or None when the block is dense, and row weights (float64)
    or None when all 1. ``host_blocks`` keeps the same blocks on the host when the data does not
    fit on the device; they are then moved one block at a time during each E-step.
    """
    xp: object
    device: object
    dtype: object
    blocks: list
    n_eff: float
    dense: bool
    on_host: bool = False

    @classmethod
    def build(cls, values: np.ndarray, weights=None, dtype="float64", xp=np, device=None,
              block_rows: int | None = None, on_host: bool = False):
        obs = ~np.isnan(values)
        dense = bool(obs.all())
        n = values.shape[0]
        w = None if weights is None else np.asarray(weights, dtype=float)
        if w is not None and np.all(w == 1):
            w = None
        n_eff = float(n if w is None else w.sum())
        step = n if not block_rows else max(1, int(block_rows))
        np_dt = np.dtype(dtype if isinstance(dtype, str) else "float64")
        blocks = []
        for s in range(0, n, step):
            sl = slice(s, min(n, s + step))
            o = obs[sl]
            y = np.where(o, values[sl], 0.0).astype(np_dt)
            msk = None if dense else o.astype(np_dt)
            wb = None if w is None else w[sl]
            if on_host:
                blocks.append((y, msk, wb))
            else:
                blocks.append(tuple(None if v is None else
                                    _xp.asarray(v, xp, dt, device)
                                    for v, dt in ((y, dtype), (msk, dtype), (wb, "float64"))))
        xdt = getattr(xp, dtype) if isinstance(dtype, str) else dtype
        return cls(xp, device, xdt, blocks, n_eff, dense, on_host)

    def as_float64(self) -> "_Data":
        """The same data in float64 (converted where it lies: no host transfer on a device)."""
        f64 = self.xp.float64
        if self.on_host:
            blocks = [(y.astype(np.float64), None if m is None else m.astype(np.float64), w)
                      for y, m, w in self.blocks]
        else:
            blocks = [(_xp.astype(y, f64, self.xp),
                       None if m is None else _xp.astype(m, f64, self.xp), w)
                      for y, m, w in self.blocks]
        return _Data(self.xp, self.device, f64, blocks, self.n_eff, self.dense, self.on_host)

    def iter_blocks(self):
        for y, msk, wb in self.blocks:
            if self.on_host:
                dt = self.dtype
                y = _xp.asarray(y, self.xp, dt, self.device)
                msk = None if msk is None else _xp.asarray(msk, self.xp, dt, self.device)
                wb = None if wb is None else _xp.asarray(wb, self.xp, "float64", self.device)
            yield y, msk, wb


@dataclass
class _EStep:
    loglik: object         # 0-d array (float64) on the device
    r: object              # (m, q)
    n: object              # (m, q), or (q,) for dense data
    node_mass: object      # (q,)
    theta: object = None   # (n,) posterior means, when asked for
    se: object = None      # (n,) posterior SDs, when asked for
    post: object = None    # (n, q), when asked for


def _estep(data: _Data, log_p, log_q, log_w, x=None, want_post: bool = False,
           stats: bool = True) -> _EStep:
    """E-step from (n_items, n_nodes) log-probabilities and the nodes' log prior weights.

    The large products run in the data's dtype; everything after them (posterior, sums,
    log-likelihood) is float64. Subjects are processed block by block (``data.iter_blocks``).
    With ``x`` the posterior mean and SD of every subject are returned as well; with
    ``stats=False`` the item statistics r, n are not computed (scoring only: one product).
    """
    xp = data.xp
    f64 = xp.float64
    dt = data.dtype
    diff = log_p - log_q
    D = _xp.astype(diff, dt, xp)
    lq = _xp.astype(log_q, dt, xp)
    lq_sum = xp.sum(log_q, axis=0)
    loglik = None
    r = n_obs = node_mass = None
    thetas, ses, posts = [], [], []
    # The products are taken in the orientation BLAS runs fastest for these shapes (many
    # subjects and items, ~61 nodes): the (nodes x subjects) and (nodes x items) results,
    # L^T = D^T Y^T and r^T = post^T Y, measured 1.3-1.7x faster than Y D and Y^T post with
    # OpenBLAS on 3467 x 5257 x 61 (docs/calibration.md); the transposes are views.
    Dt, lqt = D.T, lq.T
    for y, msk, wb in data.iter_blocks():
        L = _xp.astype((Dt @ y.T).T, f64, xp)
        L = L + (lq_sum if msk is None else _xp.astype((lqt @ msk.T).T, f64, xp))
        L = L + log_w
        lse, e, tot = _xp.logsumexp_rows(L, xp)
        post = e / tot
        if x is not None:
            th_ = post @ x
            thetas.append(th_)
            ses.append(xp.sqrt(xp.clip(post @ (x * x) - th_ * th_, 0.0, None)))
        if want_post:
            posts.append(post)
        if wb is None:
            ll = xp.sum(lse)
            wp = post
        else:
            ll = xp.sum(wb * lse)
            wp = post * wb[:, None]
        nm = xp.sum(wp, axis=0)
        rb = nb = None
        if stats:
            wpt = _xp.astype(wp, dt, xp).T
            rb = _xp.astype(wpt @ y, f64, xp)                              # (nodes, items)
            nb = None if msk is None else _xp.astype(wpt @ msk, f64, xp)
        if loglik is None:
            loglik, r, node_mass, n_obs = ll, rb, nm, nb
        else:
            loglik, node_mass = loglik + ll, node_mass + nm
            r = None if rb is None else r + rb
            n_obs = None if nb is None else n_obs + nb
    r = None if r is None else _xp.contiguous(r.T, xp)
    n = node_mass if data.dense or n_obs is None else _xp.contiguous(n_obs.T, xp)
    out = _EStep(loglik, r, n, node_mass)
    if x is not None:
        out.theta = _xp.concat(thetas, xp) if len(thetas) > 1 else thetas[0]
        out.se = _xp.concat(ses, xp) if len(ses) > 1 else ses[0]
    if want_post:
        out.post = _xp.concat(posts, xp) if len(posts) > 1 else posts[0]
    return out


def _grid_log_weights(nodes, var):
    """log pi_q for N(0, var) weights on the grid, normalized (array or float ``var``)."""
    xp = _xp.namespace(nodes)
    lw = -0.5 * nodes * nodes / var
    mx = xp.max(lw)
    return lw - (mx + xp.log(xp.sum(xp.exp(lw - mx))))


def _rasch_variance(nodes, node_mass, lo=1e-3, hi=100.0, n_bisect: int = 64):
    """Latent variance whose grid weights match the posterior second moment on the nodes.

    The grid second moment is increasing in the variance; bisection on log v over
    [log lo, log hi] with a fixed number of halvings (2^-64 of the bracket, below rounding)
    runs on the device without reading anything back. Returns a 0-d float64 array.
    """
    xp = _xp.namespace(nodes, node_mass)
    x2 = nodes * nodes
    target = xp.sum(node_mass * x2) / xp.sum(node_mass)
    a = xp.zeros_like(target) + math.log(lo)
    b = xp.zeros_like(target) + math.log(hi)
    for _ in range(n_bisect):
        mid = 0.5 * (a + b)
        gap = xp.sum(xp.exp(_grid_log_weights(nodes, xp.exp(mid))) * x2) - target
        a = xp.where(gap < 0, mid, a)
        b = xp.where(gap < 0, b, mid)
    return xp.exp(0.5 * (a + b))


# ====================================================================== starting values
def _start_values(values: np.ndarray, weights, model: _ItemModel, prior_c=None):
    """Classical starting values (p-values, item-rest biserials), see the module docstring.

    Every per-item sum is one matrix-vector product over the data (no full-size temporaries
    beyond the squared scores, and the zero-filled copy and mask when cells are missing).
    """
    n_rows, n_items = values.shape
    w = np.ones(n_rows) if weights is None else np.asarray(weights, float)
    missing = bool(np.isnan(values).any())
    if missing:
        obs = ~np.isnan(values)
        y = np.where(obs, values, 0.0)
        k = obs.sum(axis=1).astype(float)
    else:
        y, k = values, np.full(n_rows, float(n_items))
    tot = y.sum(axis=1)
    # item-rest correlation: rest_ij = (T_i - y_ij) / (K_i - 1), over subjects who saw item j
    inv = 1.0 / np.maximum(k - 1.0, 1.0)
    ti = tot * inv
    # sum_i over the subjects who saw j, of w, w ti, w ti^2
    W_cols = np.stack([w, w * ti, w * ti * ti], axis=1)
    sw, s_ti, s_ti2 = (obs.T @ W_cols if missing else
                       np.broadcast_to(W_cols.sum(axis=0), (n_items, 3))).T
    # sum_i w y_ij (1, inv, tot inv^2, tot inv) and sum_i w y_ij^2 (inv^2, inv)
    s_y, s_y_inv, s_y_tinv2, s_y_ti = (y.T @ np.stack([w, w * inv, w * tot * inv**2, w * ti],
                                                      axis=1)).T
    s_yy_inv2, s_yy_inv = ((y * y).T @ np.stack([w * inv**2, w * inv], axis=1)).T
    p = s_y / sw
    e_rest = (s_ti - s_y_inv) / sw
    e_rest2 = (s_ti2 - 2.0 * s_y_tinv2 + s_yy_inv2) / sw
    e_yrest = (s_y_ti - s_yy_inv) / sw
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
        if model.has_u and model.prior_u is not None:
            u = np.full(n, max(float(model.prior_u.mode), 0.6))
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

    def __repr__(self) -> str:
        state = "converged" if self.converged else "NOT converged"
        drop = f", {len(self.dropped_items)} dropped" if len(self.dropped_items) else ""
        return (f"CalibrationResult(model={self.model!r}, n_items={len(self.bank)}, "
                f"n_subjects={len(self.subject_ids)}, loglik={self.loglik:.4g}, "
                f"n_iter={self.n_iter} {state}{drop}, {self.seconds:.2g} s)")

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
    prior_u : prior on the 4PL's upper asymptote u (a beta or logit-normal density on u, as for
        c), e.g. ``"beta(17,5)"``; "auto" (default) is the 4PL's measured prior beta(10,2)
        (none under ``mirt_defaults``), None is no prior. Whatever
        the prior, the 4PL's EM keeps u - c >= 1e-6 on every item (M-step line search,
        SQUAREM extrapolations and start values), so the bank's c < u always holds.
    mirt_defaults : True resolves "auto" to mirt's defaults (3PL, no priors) for parity
    max_iter, tol : EM iteration cap (1000; mirt's is 500, but banks with many near-degenerate
        items need more) and convergence tolerance (max abs internal parameter change, 1e-4)
    accelerate : use SQUAREM (default True)
    partition_size : None for joint calibration, else partitioned calibration with partitions of
        at least this many items
    link : "mean-sigma" (default) or "mean-mean", for partitioned calibration
    filter : apply :func:`atlascat.filtering.filter_items` before calibrating (default False;
        ``atlas calibrate`` uses the same default, ``--filter`` turns it on)
    dtype : "float64" (default) or "float32" for the large matrix products of the E-step
        (everything else, the M-step included, runs in float64). float32 E-steps run while
        they make progress; once their rounding noise dominates (the log-likelihood falls, or
        gains less than 1e-5 per subject over 10 iterations) the EM finishes in float64, so
        the result meets the same stopping rule as a float64 fit
        (``settings["float32_iterations"]`` says how many ran in float32)
    device : "cpu" (NumPy, default) or "cuda" (PyTorch, else CuPy, through array_api_compat):
        where the EM runs; the data is moved there once and the loop reads back one small
        vector per iteration
    memory_limit : bytes the E-step may use on the device (default: no bound on the CPU, 80%
        of the free memory on a GPU); larger data is processed in blocks of subjects
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
                 prior_a="auto", prior_c="auto", prior_u="auto", max_iter: int = 1000, tol: float = 1e-4,
                 accelerate: bool = True, partition_size: int | None = None,
                 link: str = "mean-sigma", filter: bool = False, dtype: str = "float64",
                 random_state=None, callback=None, max_newton: int = 8, start=None,
                 convergence: str = "params", mirt_defaults: bool = False, device="cpu",
                 memory_limit: float | None = None):
        self.model = model
        self.mirt_defaults = mirt_defaults
        self.quadpts = quadpts
        self.theta_range = theta_range
        self.prior_a = prior_a
        self.prior_c = prior_c
        self.prior_u = prior_u
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
        self.device = device
        self.memory_limit = memory_limit

    # ------------------------------------------------------------------ validation
    def _check_settings(self, choice=None):
        # "auto" model / priors are resolved from the data's size in fit (irt/defaults.py)
        from .defaults import _is_auto

        model = str(self.model if choice is None else choice.model).lower()
        pa, pc, pu = ((self.prior_a, self.prior_c, self.prior_u) if choice is None
                      else (choice.prior_a, choice.prior_c, choice.prior_u))
        if choice is None and (_is_auto(model) or _is_auto(pa) or _is_auto(pc) or _is_auto(pu)):
            pa, pc = (None if _is_auto(pa) else pa), (None if _is_auto(pc) else pc)
            pu = None if _is_auto(pu) else pu
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
        _xp.backend_for(self.device)  # unknown device / missing GPU library -> ConfigError
        if self.memory_limit is not None and not float(self.memory_limit) > 0:
            raise ConfigError(f"memory_limit must be a positive number of bytes, got "
                              f"{self.memory_limit!r}")
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
        prior_u = parse_prior(None if pu == "none" else pu, "c")  # beta / logitnorm, as c
        if prior_a is not None and model in ("rasch", "1pl"):
            raise ConfigError(f"a prior on the slope needs a 2PL/3PL/4PL model, not {model!r}")
        if prior_c is not None and model not in ("3pl", "4pl"):
            raise ConfigError(f"a prior on c needs a 3PL or 4PL model, not {model!r}")
        if prior_u is not None and model != "4pl":
            raise ConfigError(f"a prior on u needs the 4PL model, not {model!r}; drop prior_u "
                              "(CLI --prior-u) or pass model='4pl'")
        return model, prior_a, prior_c, prior_u

    # ------------------------------------------------------------------ fit
    def fit(self, responses, weights=None):
        """Calibrate on a ResponseMatrix (or an array, NaN = missing) and set the fitted attributes."""
        from .._heap import retained_heap

        with retained_heap():  # the EM's temporaries reuse freed memory (atlascat._heap)
            return self._fit(responses, weights)

    def _fit(self, responses, weights=None):
        from ..responses import ResponseMatrix

        from ..validation import as_labelled_responses, check_identified, check_subjects

        start = time.perf_counter()
        model, prior_a, prior_c, prior_u = self._check_settings()
        responses = as_labelled_responses(responses, on_empty="drop")  # DataFrames keep labels
        if not isinstance(responses, ResponseMatrix):
            arr = responses if isinstance(responses, np.ndarray) else \
                np.asarray(responses, dtype=object)
            if arr.ndim != 2:
                raise ResponseDataError(f"responses must be 2-D (subjects x items), got shape {arr.shape}")
            responses = ResponseMatrix(arr, weights=weights, on_empty="drop")
        elif weights is not None:
            responses = ResponseMatrix(responses.values, responses.subject_ids, responses.item_ids,
                                       weights=weights)
        check_subjects(responses.n_subjects)
        report = None
        if self.filter:
            from ..filtering import filter_items

            responses, report = filter_items(responses)
        values = responses.values
        item_ids = responses.item_ids
        # NaN-ignoring column extremes, no temporaries (every column has a response)
        constant = np.fmin.reduce(values, axis=0) == np.fmax.reduce(values, axis=0)
        dropped = [str(i) for i in item_ids[constant]]
        if dropped:
            warn_user(
                f"{len(dropped)} item(s) have the same response from every subject who saw them "
                f"(their MLE is at infinity) and were left out: {dropped[:10]}")
            values = values[:, ~constant]
            item_ids = item_ids[~constant]
        if values.shape[1] == 0:
            raise ResponseDataError("no item with variation in its responses is left to calibrate")
        check_identified(values, model)  # e.g. one item under a 2PL: refuse, never "converge"
        w = responses.weights
        from .defaults import resolve as _resolve_defaults

        choice = _resolve_defaults(self.model, self.prior_a, self.prior_c, values, w,
                                   mirt_defaults=self.mirt_defaults, stacklevel=4,
                                   prior_u=self.prior_u)
        model, prior_a, prior_c, prior_u = self._check_settings(choice)
        self.defaults_ = choice
        rng = self.random_state if isinstance(self.random_state, np.random.Generator) \
            else np.random.default_rng(self.random_state)
        item_model = _ItemModel(model if model != "1pl" else "rasch", prior_a, prior_c, prior_u)
        settings = {"model": model, "quadpts": int(self.quadpts),
                    "theta_range": [float(v) for v in self.theta_range],
                    "prior_a": None if prior_a is None else str(prior_a),
                    "prior_c": None if prior_c is None else str(prior_c),
                    "prior_u": None if prior_u is None else str(prior_u),
                    "max_iter": int(self.max_iter), "tol": float(self.tol),
                    "accelerate": bool(self.accelerate), "partition_size": self.partition_size,
                    "link": self.link if self.partition_size else None, "dtype": self.dtype,
                    "defaults": choice.to_dict(), "device": str(self.device)}
        if self.partition_size is None or values.shape[1] < 2 * int(self.partition_size):
            start_bank = None if self.start is None else self.start
            fit = self._fit_joint(values, w, item_model, 0, 1, start_bank=start_bank,
                                  item_ids=item_ids)
            bank = self._to_bank(item_ids, fit["th"], item_model, model, fit["var"])
            if self.dtype == "float32":  # iterations before the float64 finish
                settings["float32_iterations"] = fit["float32_iterations"]
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
        xp, device = _xp.backend_for(self.device)
        block_rows, on_host = _plan_blocks(values, xp, device, self.dtype, self.memory_limit,
                                           int(self.quadpts))
        data = _Data.build(values, weights, self.dtype, xp, device, block_rows, on_host)
        quad = normal_quadrature(int(self.quadpts), self.theta_range)
        x = _xp.asarray(quad.nodes, xp, "float64", device)
        log_w0 = _xp.asarray(quad.log_weights, xp, "float64", device)
        rasch = item_model.model == "rasch"
        free = item_model.free
        k = len(free)
        n_items = values.shape[1]
        th0 = _start_values(values, weights, item_model, item_model.prior_c)
        if start_bank is not None and item_ids is not None:
            have = np.array([i in start_bank for i in item_ids])
            if have.any():
                sb = start_bank.subset([str(i) for i in item_ids[have]])
                c_sb = np.clip(sb.c, 1e-6, 1 - 1e-6)
                u_sb = np.clip(sb.u, 1e-6, 1 - 1e-6)
                if item_model.has_u:  # an unordered start (u <= c + gap): c halfway below u
                    bad = u_sb - c_sb < 1e3 * _UC_GAP
                    c_sb = np.where(bad, np.minimum(c_sb, u_sb) / 2.0, c_sb)
                    u_sb = np.where(bad, np.maximum(u_sb, 2e3 * _UC_GAP), u_sb)
                given = item_model.internal(sb.a, sb.d, c_sb, u_sb)
                th0[np.ix_(np.flatnonzero(have), free)] = given[:, free]
        # fixed (non-free) columns hold +-inf for absent c/u; finite stand-ins keep the
        # arithmetic of every backend NaN-free (they are never read through natural())
        th0_fixed = th0.copy()
        th0 = np.where(np.isfinite(th0), th0, 0.0)
        th0_d = _xp.asarray(th0, xp, "float64", device)
        max_iter = int(self.max_iter if max_iter is None else max_iter)
        tol = float(self.tol)
        lo_np = np.tile(item_model.lo[free], n_items)
        hi_np = np.tile(item_model.hi[free], n_items)
        if rasch:
            lo_np, hi_np = np.append(lo_np, np.log(1e-3)), np.append(hi_np, np.log(100.0))
        lo = _xp.asarray(lo_np, xp, "float64", device)
        hi = _xp.asarray(hi_np, xp, "float64", device)
        n_par = n_items * k

        def pack(th, log_var):
            p = xp.reshape(xp.stack([th[:, j] for j in free], axis=1), (-1,))
            return _xp.concat([p, xp.reshape(log_var, (1,))], xp) if rasch else p

        def unpack(p):
            P = xp.reshape(p[:n_par], (n_items, k))
            th = _set_free(th0_d, free, [P[:, i] for i in range(k)])
            return th, (p[-1] if rasch else None)

        state = {"n_iter": 0, "trace": [], "data": data, "f32_iter": None}

        def estep(th, log_var, **kw):
            log_w = _grid_log_weights(x, xp.exp(log_var)) if rasch else log_w0
            log_p, log_q = item_model.node_logs(th, x)
            return _estep(state["data"], log_p, log_q, log_w, **kw)

        def em_map(p, at_least=None):
            """One EM iteration from p: (new parameters, log-posterior at p), on the device.

            With ``at_least`` (SQUAREM's safeguard), the log-posterior at p is read first and,
            if it is below ``at_least``, the M-step is skipped: ``(None, value)``.
            """
            th, log_var = unpack(p)
            es = estep(th, log_var)
            obj = es.loglik + xp.sum(item_model.log_prior(th))
            if at_least is not None:
                (objh,) = to_host(obj)
                if not (math.isfinite(objh) and objh >= at_least):
                    state["n_iter"] += 1
                    return None, objh
            nr = es.n - es.r if es.n.ndim == 2 else es.n
            th_new = _mstep(item_model, th, es.r, nr, x, self.max_newton)
            log_var_new = xp.log(_rasch_variance(x, es.node_mass)) if rasch else None
            state["n_iter"] += 1
            return pack(th_new, log_var_new), obj

        def change(pa, pb):
            """Largest parameter change (or item-curve change), a 0-d device array, and the
            per-item changes (for the callback's worst item)."""
            if self.convergence == "params":
                per_item = xp.max(xp.reshape(xp.abs(pb - pa)[:n_par], (n_items, k)), axis=1)
                extra = xp.abs(pb[-1] - pa[-1]) if rasch else None
            else:
                tha, lva = unpack(pa)
                thb, lvb = unpack(pb)
                pa_, pb_ = (xp.exp(item_model.node_logs(t, x)[0]) for t in (tha, thb))
                per_item = xp.max(xp.abs(pb_ - pa_), axis=1)
                extra = xp.abs(lvb - lva) if rasch else None
            ch = xp.max(per_item)
            if extra is not None:
                ch = xp.maximum(ch, extra)
            return ch, per_item, extra

        def to_host(*vals):
            """One device->host transfer per EM iteration: the scalars the loop decides on."""
            vec = xp.stack([xp.reshape(_xp.astype(v, xp.float64, xp), ()) for v in vals])
            return [float(v) for v in _xp.to_numpy(vec)]

        def report(obj, ch, per_item, extra):
            trace = state["trace"]
            if state["f32_iter"] is None and self.dtype == "float32" and trace:
                # float32 E-steps stop paying once their rounding noise (about 1e-6 of the
                # log-likelihood, enough to move parameters on the likelihood's flat ridges by
                # more than tol) dominates the EM's progress: a decrease, impossible in exact
                # arithmetic, or less than 1e-5 per subject over the last 10 iterations. The
                # remaining iterations then run in float64, so that mirt's rule is met and the
                # solution is the float64 one.
                stalled = len(trace) >= 10 and obj - trace[-10] < 1e-5 * data.n_eff
                if obj < max(trace) or stalled:
                    state["data"] = data.as_float64()
                    state["f32_iter"] = state["n_iter"]
            trace.append(obj)
            if self.callback is not None:
                pi = _xp.to_numpy(per_item)
                worst = int(np.argmax(pi))
                ex = 0.0 if extra is None else float(_xp.to_numpy(extra))
                self.callback({"iteration": state["n_iter"], "loglik": obj, "max_change": ch,
                               "worst_item": None if pi[worst] < ex or item_ids is None
                               else str(item_ids[worst]),
                               "partition": part, "n_partitions": n_parts})

        zero = xp.zeros_like(x[0])
        p = pack(th0_d, zero)
        converged = False
        step_max = 1.0
        while state["n_iter"] < max_iter:
            p0 = p
            p1, f0 = em_map(p0)
            ch, per_item, extra = change(p0, p1)
            f0h, chh = to_host(f0, ch)
            report(f0h, chh, per_item, extra)
            p = p1
            if chh < tol:
                converged = True
                break
            if not self.accelerate or state["n_iter"] >= max_iter:
                continue
            p2, f1 = em_map(p1)
            ch, per_item, extra = change(p1, p2)
            # SQUAREM S3 extrapolation: one step length per item (and one for the variance)
            r = p1 - p0
            v = (p2 - p1) - r
            rr_ = xp.sum(xp.reshape(r[:n_par] ** 2, (n_items, k)), axis=1)
            vv_ = xp.sum(xp.reshape(v[:n_par] ** 2, (n_items, k)), axis=1)
            if rasch:
                rr_ = _xp.concat([rr_, xp.reshape(r[-1] ** 2, (1,))], xp)
                vv_ = _xp.concat([vv_, xp.reshape(v[-1] ** 2, (1,))], xp)
            ok_v = vv_ > 0
            al = -xp.sqrt(rr_ / xp.where(ok_v, vv_, xp.ones_like(vv_)))
            al = xp.where(xp.logical_and(ok_v, xp.isfinite(al)), al, -xp.ones_like(al))
            at_max_d = xp.any(al <= -step_max)
            al = xp.clip(al, -step_max, -1.0)
            trivial_d = xp.all(al == -1.0)
            f1h, chh, at_max, trivial = to_host(f1, ch, at_max_d, trivial_d)
            report(f1h, chh, per_item, extra)
            p = p2
            if chh < tol:
                converged = True
                break
            if state["n_iter"] >= max_iter:
                break
            if trivial:  # the extrapolation is p2 itself
                if at_max:
                    step_max *= 4.0
                continue
            alpha = xp.reshape(xp.stack([al[:n_items]] * k, axis=1), (-1,))
            if rasch:
                alpha = _xp.concat([alpha, al[-1:]], xp)
            pe = xp.clip(p0 - 2.0 * alpha * r + alpha * alpha * v, lo, hi)
            if item_model.has_u:
                # an extrapolation may cross u below c: those items keep their EM iterate p2
                # (itself ordered: the M-step's line search accepts ordered points only)
                Pe = xp.reshape(pe, (n_items, k))
                ok_u = item_model.feasible(unpack(pe)[0])
                pe = xp.reshape(xp.where(ok_u[:, None], Pe, xp.reshape(p2, (n_items, k))),
                                (-1,))
            p3, fe = em_map(pe, at_least=f1h)   # no M-step for a rejected extrapolation
            if p3 is not None:
                ch, per_item, extra = change(pe, p3)
                feh, chh = to_host(fe, ch)
                report(feh, chh, per_item, extra)
                p = p3
                if at_max:
                    step_max *= 4.0
                if chh < tol:
                    converged = True
                    break
            elif at_max:
                step_max = max(1.0, step_max / 4.0)
        th, log_var = unpack(p)
        var = float(_xp.to_numpy(xp.exp(log_var))) if rasch else 1.0
        if state["f32_iter"] is None and self.dtype == "float32":
            state["f32_iter"] = state["n_iter"]
            state["data"] = data.as_float64()   # scores, thetas and log-likelihood in float64
        es = estep(th, log_var if rasch else zero, x=x)
        loglik = float(_xp.to_numpy(es.loglik))
        th_h = np.array(_xp.to_numpy(th), dtype=float)
        fixed = [j for j in range(4) if j not in free]
        th_h[:, fixed] = th0_fixed[:, fixed]
        log_post = loglik + float(_xp.to_numpy(xp.sum(item_model.log_prior(th))))
        if not math.isfinite(loglik) or not np.all(np.isfinite(th_h[:, free])):
            raise ConvergenceError("calibration produced non-finite values; check the data")
        return {"th": th_h, "var": var, "loglik": loglik, "log_posterior": log_post,
                "trace": np.asarray(state["trace"]), "n_iter": state["n_iter"],
                "converged": converged, "float32_iterations": state["f32_iter"],
                "theta": np.asarray(_xp.to_numpy(es.theta), float),
                "theta_se": np.asarray(_xp.to_numpy(es.se), float), "nodes": quad.nodes}

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
        theta, se = es.theta, es.se
        return CalibrationResult(
            bank=bank, model=model, loglik=float(es.loglik), loglik_trace=np.concatenate(traces),
            n_iter=n_iter, converged=bool(converged), seconds=0.0, theta=theta, theta_se=se,
            subject_ids=None, latent_variance=1.0, log_posterior=None,
            partitions=[item_ids[p].tolist() for p in parts], linking=linking)


# ====================================================================== public helpers
def _bank_estep(values, weights, bank: ItemBank, quad, latent_sd: float = 1.0, *,
                device="cpu", dtype: str = "float64", memory_limit=None,
                stats: bool = True) -> _EStep:
    """E-step of a fixed bank on an array in the bank's item order, on ``device`` (the array-API
    kernel of the EM; the bank's node log-probabilities are moved there once). The results
    stay on the device. ``stats=False`` skips the item statistics (scoring only)."""
    from . import models

    xp, dev = _xp.backend_for(device)
    block_rows, on_host = _plan_blocks(values, xp, dev, dtype, memory_limit, len(quad.nodes))
    data = _Data.build(values, weights, dtype, xp, dev, block_rows, on_host)
    log_p, log_q = models.log_probability(quad.nodes, *bank.params)   # (q, m)
    log_w = quad.log_weights if latent_sd == 1.0 else _grid_log_weights(quad.nodes, latent_sd**2)

    def put(a):
        return _xp.asarray(np.ascontiguousarray(a), xp, "float64", dev)

    return _estep(data, put(log_p.T), put(log_q.T), put(log_w), x=put(quad.nodes), stats=stats)


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
    return float(_bank_estep(values, weights, bank, quad, latent_sd).loglik)


def calibrate(responses, model: str = "auto", **settings) -> CalibrationResult:
    """Calibrate an item bank: ``Calibrator(model, **settings).fit(responses).result_``.

    See :class:`Calibrator` for the settings. Returns a :class:`CalibrationResult` with the
    bank, log-likelihood (and its trace per EM iteration), iterations, convergence flag, time,
    EAP thetas of the subjects and what filtering dropped.
    """
    weights = settings.pop("weights", None)
    return Calibrator(model, **settings).fit(responses, weights=weights).result_
