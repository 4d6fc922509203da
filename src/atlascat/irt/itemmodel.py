"""The item model of the EM: internal parameters, node log-probabilities, priors, derivatives.

Model (as mirt, no 1.702 scaling), slope-intercept form used internally::

    P_j(theta) = c_j + (u_j - c_j) sigma(a_j theta + d_j),   b_j = -d_j / a_j.

Internal parameters per item: slope a (or log a under a log-normal prior), intercept d,
logit c, logit u, kept in wide bounds (|a| <= 50, |d| <= 150, |logit c|, |logit u| <= 15) so
that parameters drifting to a boundary of the likelihood settle instead of moving forever.
Every method is written against the Python array API standard (:mod:`atlascat.irt.arrays`).
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import ConfigError
from . import arrays
from .bank import ItemBank

__all__ = ["ItemModel", "prior_terms", "to_bank", "at_bounds", "A_MAX", "D_MAX", "LOGIT_MAX",
           "LOG_A_MIN", "C_START", "U_START", "UC_GAP"]

# bounds of the internal parameters: slope (raw), slope (log), intercept d, logit c, logit u
A_MAX = 50.0
D_MAX = 150.0
LOGIT_MAX = 15.0
LOG_A_MIN = math.log(1e-3)
C_START = 0.1
U_START = 0.95
# 4PL: every iterate keeps u - c >= UC_GAP (M-step line search, SQUAREM, start values), so
# the bank's 0 <= c < u <= 1 holds by construction
UC_GAP = 1e-6


def prior_terms(prior, t, xp):
    """(log p, d/dt, d2/dt2) of a prior at internal parameter ``t``, in ``t``'s namespace.

    The formulas of :mod:`atlascat.irt.priors` (``prior.terms``) written with array-API
    operations only, so that they run on the device; log c and log(1 - c) are taken as
    log sigma(+-t), exact where ``prior.terms`` clips at 1e-300.
    """
    name = type(prior).__name__
    if name == "BetaPrior":
        from scipy.special import betaln

        al, be = float(prior.alpha), float(prior.beta)
        c = arrays.expit(t, xp)
        logp = ((al - 1.0) * arrays.log_expit(t, xp) + (be - 1.0) * arrays.log_expit(-t, xp)
                - float(betaln(al, be)))
        return logp, (al - 1.0) * (1.0 - c) - (be - 1.0) * c, -(al + be - 2.0) * c * (1.0 - c)
    mu, sd = float(prior.mu), float(prior.sigma)
    z = (t - mu) / sd
    const = -math.log(sd) - 0.5 * arrays.LOG_2PI
    hess = xp.zeros_like(t) - 1.0 / sd**2
    if name == "LogNormalPrior":
        return -t - 0.5 * z * z + const, -1.0 - z / sd, hess
    if name in ("LogitNormalPrior", "NormalPrior"):
        return -0.5 * z * z + const, -z / sd, hess
    raise ConfigError(f"prior {prior} has no array-API form; use beta, logitnorm, lognorm, norm")


class ItemModel:
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
        a_lo, a_hi = (LOG_A_MIN, math.log(A_MAX)) if self.log_slope else (-A_MAX, A_MAX)
        self.lo = np.array([a_lo, -D_MAX, -LOGIT_MAX, -LOGIT_MAX])
        self.hi = np.array([a_hi, D_MAX, LOGIT_MAX, LOGIT_MAX])

    # ------------------------------------------------------------------ parameters
    def natural(self, th, xp=None):
        """(a, d, c, u) from internal parameters (c, u as arrays even when fixed)."""
        xp = arrays.namespace(th) if xp is None else xp
        a = xp.exp(th[:, 0]) if self.log_slope else th[:, 0]
        c = arrays.expit(th[:, 2], xp) if self.has_c else xp.zeros_like(th[:, 1])
        u = arrays.expit(th[:, 3], xp) if self.has_u else xp.ones_like(th[:, 1])
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
    def node_logs(self, th, x, xp=None):
        """(log P, log Q), each (n_items, n_nodes), finite for parameters inside the bounds."""
        xp = arrays.namespace(th, x) if xp is None else xp
        a, d, c, u = self.natural(th, xp)
        z = a[:, None] * x[None, :] + d[:, None]
        if not (self.has_c or self.has_u):
            return arrays.log_expit(z, xp), arrays.log_expit(-z, xp)
        rng = (u - c)[:, None]
        if self.has_u:
            p = c[:, None] + rng * arrays.expit(z, xp)
            q = (1.0 - u)[:, None] + rng * arrays.expit(-z, xp)
            return xp.log(p), xp.log(q)
        # 3PL: log P = log(c + (1 - c) s) = log sigma(z) + log1p(c e^-z) written with
        # log sigma(-gamma) etc. would cost more; c + (1 - c) s is exact to rounding here.
        # log Q = log(1 - c) + log sigma(-z) keeps full precision for large z.
        p = c[:, None] + rng * arrays.expit(z, xp)
        return xp.log(p), arrays.log_expit(-th[:, 2], xp)[:, None] + arrays.log_expit(-z, xp)

    def feasible(self, th, xp=None):
        """Per item: True where the asymptotes are ordered, u - c >= ``UC_GAP`` (always True
        below the 4PL)."""
        xp = arrays.namespace(th) if xp is None else xp
        if not self.has_u:
            return xp.zeros_like(th[:, 1]) == 0.0
        return arrays.expit(th[:, 2], xp) <= arrays.expit(th[:, 3], xp) - UC_GAP

    def log_prior(self, th, xp=None):
        """Sum of log prior densities per item (zeros without priors)."""
        xp = arrays.namespace(th) if xp is None else xp
        out = xp.zeros_like(th[:, 1])
        if self.prior_a is not None:
            out = out + prior_terms(self.prior_a, th[:, 0], xp)[0]
        if self.prior_c is not None and self.has_c:
            out = out + prior_terms(self.prior_c, th[:, 2], xp)[0]
        if self.prior_u is not None:
            out = out + prior_terms(self.prior_u, th[:, 3], xp)[0]
        return out

    def objective(self, th, r, nr, x, xp=None):
        """Complete-data log-likelihood + log prior per item, shape (n_items,)."""
        xp = arrays.namespace(th) if xp is None else xp
        log_p, log_q = self.node_logs(th, x, xp)
        return xp.sum(r * log_p, axis=1) + xp.sum(nr * log_q, axis=1) + self.log_prior(th, xp)

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
        xp = arrays.namespace(th)
        out = self.derivative_terms(th, r, nr, x, fisher, with_value)
        g, h = out[-2], out[-1]
        g = xp.stack(g, axis=1)
        h = xp.stack([xp.stack(row, axis=1) for row in h], axis=1)
        return (out[0], g, h) if with_value else (g, h)

    def derivative_terms(self, th, r, nr, x, fisher: bool = False, with_value: bool = False,
                         both: bool = False):
        """:meth:`derivatives` as lists: g[k] and h[k][l], each of shape (n_items,).

        ``both=True`` returns the observed Hessian and minus the Fisher information together,
        ``(value?, g, h, h_fisher)``, from one pass over the (items x nodes) intermediates.
        """
        xp = arrays.namespace(th, r)
        a, d, c, u = self.natural(th, xp)
        z = a[:, None] * x[None, :] + d[:, None]
        s, sm = arrays.expit_pair(z, xp)
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
                value = ssum(r * arrays.log_expit(z, xp)) + ssum(nr * arrays.log_expit(-z, xp))
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
        log_prior = xp.zeros_like(th[:, 1])      # as :meth:`log_prior`, from the same terms
        if self.prior_a is not None:
            la, ga, prior_a = prior_terms(self.prior_a, th[:, 0], xp)
            log_prior, G[0] = log_prior + la, G[0] + ga
        if self.prior_c is not None and self.has_c:
            lc, gc, prior_c = prior_terms(self.prior_c, th[:, 2], xp)
            log_prior, G[2] = log_prior + lc, G[2] + gc
        if self.prior_u is not None:
            lu, gu, prior_u = prior_terms(self.prior_u, th[:, 3], xp)
            log_prior, G[3] = log_prior + lu, G[3] + gu
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
        out = ((value + log_prior,) if with_value else ()) + ([G[k] for k in f],)
        return out + tuple(hessians)

    _derivs = derivative_terms   # former name


def to_bank(item_ids, th, item_model: ItemModel, model: str, var: float) -> ItemBank:
    """The bank of fitted internal parameters ``th`` (host NumPy): b = -d / a; the Rasch fit
    keeps a = 1 (variance ``var`` apart), the 1PL reports the common slope a = sqrt(var)."""
    a, d, c, u = item_model.natural(th)
    if model == "1pl":
        a = np.full_like(d, np.sqrt(var))
    elif model == "rasch":
        a = np.ones_like(d)
    b = -d / np.where(a == 0, 1e-12, a)
    return ItemBank(item_ids, a, b, c, u, model="1pl" if model in ("rasch", "1pl") else model)


def at_bounds(bank: ItemBank, model: str) -> str | None:
    """One line naming the items whose estimate ended at a bound of the internal parameters
    (|a| = A_MAX, |d| = D_MAX, logit c = -LOGIT_MAX, logit u = LOGIT_MAX), or None.

    There the likelihood still rises toward a degenerate limit (c -> 0 on an item no weak
    subject guesses, a -> infinity on a near-Guttman item): the parameter and its standard error
    are not identified. mirt's EM stops short of the limit (LSAT7 3PL: logit g -9.6, SE 132)."""
    a, b, c, u = (np.asarray(v, dtype=float) for v in bank.params)
    edge = 1.0 - 1e-9
    found = [("a -> infinity", np.abs(a) >= A_MAX * edge),
             ("|d| -> infinity", np.abs(a * b) >= D_MAX * edge)]
    if model in ("3pl", "4pl"):
        found.append(("c -> 0", c <= (1.0 + 1e-6) / (1.0 + math.exp(LOGIT_MAX))))
    if model == "4pl":
        found.append(("u -> 1", 1.0 - u <= (1.0 + 1e-6) / (1.0 + math.exp(LOGIT_MAX))))
    parts = [f"{what}: {', '.join(map(str, bank.item_ids[hit][:5]))}"
             + (f" and {int(hit.sum()) - 5} more" if hit.sum() > 5 else "")
             for what, hit in found if hit.any()]
    if not parts:
        return None
    n = int(np.logical_or.reduce([hit for _, hit in found]).sum())
    return (f"{n} item(s) ended at a bound of the estimation ({'; '.join(parts)}): the "
            "likelihood still rises toward that limit, so these parameters and their standard "
            "errors are not identified; a prior (prior_c / prior_a, CLI --prior-c / --prior-a) "
            "or a simpler model fits them")
