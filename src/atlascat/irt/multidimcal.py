"""Calibrate an exploratory multidimensional 2PL as mirt's ``mirt(data, K, itemtype = "2PL")``:
the fit, its log-likelihood and information criteria, and mirt's rotated summary.

:func:`calibrate_multidim` fits :class:`~atlascat.irt.multidim.MultidimIRT` (K >= 2) and returns
a :class:`MultidimCalibration` that :func:`atlascat.irt.compare.anova` compares with the
unidimensional fits of :func:`atlascat.calibrate` (mirt's ``anova(mod1, mod2)``).

Estimation follows mirt's defaults for an exploratory model: Bock-Aitkin EM on a product grid on
[-6, 6] with 31 points per dimension for K = 2 and 15 for K = 3; for K >= 4 (where a grid has
9^K nodes or more) Metropolis-Hastings Robbins-Monro (Cai 2010, mirt's ``method = "MHRM"``), whose
log-likelihood is then integrated by quasi-Monte Carlo over N(0, I) (8192 scrambled Sobol points;
mirt's ``draws = 5000`` Monte Carlo ones): an estimate, to about a tenth of a unit on moderate
data.

Parameters: with theta ~ N(0, I) the loadings are identified up to a rotation, K (K - 1) / 2
constraints, so the model has J (K + 1) - K (K - 1) / 2 free parameters (mirt's count, its
``anova`` df). Priors: by default MultidimIRT's weak N(0, 3^2) on every loading and N(0, 5^2) on
every intercept (posterior modes); ``prior_a_sd=None, prior_d_sd=None`` is mirt's plain maximum
likelihood. The log-likelihood reported is the marginal one, without the priors, as mirt's.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..errors import ConfigError
from .criteria import CriteriaMixin

__all__ = ["MultidimCalibration", "calibrate_multidim", "marginal_loglik", "PRIOR_A_SD",
           "PRIOR_D_SD"]

#: MultidimIRT's default priors: N(0, sd^2) on every loading and on every intercept
PRIOR_A_SD = 3.0
PRIOR_D_SD = 5.0
#: largest K fitted by EM on a product grid (mirt's 31 / 15 points per dimension)
EM_MAX_DIMS = 3
#: quasi-Monte Carlo points of the MH-RM fit's log-likelihood (mirt's draws)
LOGLIK_DRAWS = 2**13


@dataclass
class MultidimCalibration(CriteriaMixin):
    """A K-dimensional exploratory 2PL fit (``model`` "2pl", ``n_dims`` K >= 2).

    bank : :class:`~atlascat.irt.multidim.MultidimBank` (varimax-rotated loadings a1..aK, d)
    loglik : marginal log-likelihood (without the priors); n_parameters : J (K + 1) - K (K - 1)
    / 2; n_observations : subjects (sum of pattern frequencies); settings : the fit's settings
    (priors, method, quadrature, tolerance, data fingerprint).
    """

    bank: object
    loglik: float
    n_parameters: int
    n_observations: float
    n_iter: int
    converged: bool
    seconds: float
    subject_ids: np.ndarray
    settings: dict = field(default_factory=dict)
    model: str = "2pl"
    log_posterior: float | None = None   # loglik + log prior (loglik without priors)
    dropped_items: list = field(default_factory=list)   # answered alike by all: left out
    se: object | None = None   # se=True: MultidimStandardErrors (atlascat.irt.multidimse)

    @property
    def n_dims(self) -> int:
        return self.bank.n_dims

    def information_criteria(self) -> dict:
        """loglik, n_parameters, n_observations, aic, bic, sabic, hq (mirt's definitions)."""
        from .compare import information_criteria

        return information_criteria(self.loglik, self.n_parameters, self.n_observations)

    def to_frame(self, format: str | None = None):
        """The item table, one row per item (as :meth:`atlascat.CalibrationResult.to_frame`):
        "ours" (the default) ``item_id, a1..aK, d``, the bank file; "mirt" mirt's ``coef(mod,
        simplify = TRUE)$items``, ``X, a1..aK, d, g, u`` (both on the bank's varimax axes)."""
        if format in (None, "ours"):
            return self.bank.to_frame()
        if format == "mirt":
            from .multidimframe import mirt_frame

            return mirt_frame(self.bank)
        raise ConfigError(f"unknown bank format {format!r}; use 'ours' or 'mirt'")

    def factor_loadings(self, rotate: str = "oblimin", **kwargs):
        """mirt's ``summary(mod, rotate=...)``: rotated standardized loadings, communalities
        and factor correlations (:meth:`MultidimBank.factor_loadings`)."""
        return self.bank.factor_loadings(rotate, **kwargs)

    def standard_errors(self, rotate: str = "bank"):
        """``item_id, a1, a1_se, ..., d, d_se`` (se=True): "bank" the bank's varimax loadings,
        "none" mirt's ``coef(mod, printSE = TRUE)`` (:mod:`atlascat.irt.multidimse`)."""
        if self.se is None:
            raise ConfigError("this fit has no standard errors: calibrate_multidim(..., se=True)")
        return self.se.frame(rotate)

    def to_dict(self, rotate: str | None = "oblimin") -> dict:
        """JSON-ready summary: the fit, its criteria, settings and (unless ``rotate`` is None)
        the rotated loadings and factor correlations."""
        crit = self.information_criteria()
        out = {"model": self.model, "n_dims": self.n_dims, "n_items": len(self.bank),
               "n_subjects": int(len(self.subject_ids)), "loglik": self.loglik,
               "log_posterior": self.log_posterior,
               "n_iter": int(self.n_iter), "converged": bool(self.converged),
               "seconds": round(float(self.seconds), 3),
               **{k: v for k, v in crit.items() if k != "loglik"},
               "dropped_items": list(self.dropped_items), "settings": self.settings}
        if rotate is not None:
            out["factor_loadings"] = self.factor_loadings(rotate).to_dict()
        return out

    def __repr__(self) -> str:
        state = "converged" if self.converged else "not converged"
        return (f"MultidimCalibration(n_dims={self.n_dims}, n_items={len(self.bank)}, "
                f"n_subjects={self.n_observations:g}, loglik={self.loglik:.4g}, "
                f"n_iter={self.n_iter}, {state}, {self.seconds:.2g} s)")


def calibrate_multidim(responses, n_dims: int, *, prior_a_sd: float | None = PRIOR_A_SD,
                       prior_d_sd: float | None = PRIOR_D_SD, quadpts: int | None = None,
                       max_iter: int | None = None, tol: float | None = None,
                       callback=None, random_state=None, se: bool = False) -> MultidimCalibration:
    """Fit the exploratory ``n_dims``-dimensional 2PL (mirt's ``mirt(data, K)``) to 0/1
    responses (a ResponseMatrix, a labelled DataFrame or an array; missing cells allowed).

    ``quadpts``: points per dimension of the EM grid (default mirt's: 31 for K = 2, 15 for
    K = 3); ``max_iter``, ``tol``: MultidimIRT's (EM: largest change of A A^T and d);
    ``callback``: called after each iteration with ``{"iteration", "change"}``;
    ``random_state``: the MH-RM draws' seed (K >= 4); ``se``: standard errors from the observed
    information (K <= 3, Louis' identity on the EM grid; :mod:`atlascat.irt.multidimse`).
    """
    from .multidim import MultidimIRT, _as_arrays, _check_binary

    if isinstance(n_dims, bool) or not isinstance(n_dims, (int, np.integer)) or n_dims < 2:
        raise ConfigError(f"n_dims must be a whole number >= 2 (the unidimensional 2PL is "
                          f"atlascat.calibrate's), got {n_dims!r}")
    y, sids, item_ids, w = _as_arrays(responses)
    _check_binary(y)
    y, item_ids, dropped, responses = _without_constant_items(y, sids, item_ids, w, responses)
    _check_degrees_of_freedom(y.shape[1], int(n_dims))
    method = "em" if n_dims <= EM_MAX_DIMS else "mhrm"
    if se and method != "em":
        raise ConfigError(f"standard errors are available for K <= {EM_MAX_DIMS} dimensions "
                          f"(fitted by EM on a grid), not K = {n_dims}")
    kw = {} if tol is None else ({"tol": tol} if method == "em" else {"mhrm_tol": tol})
    model = MultidimIRT(int(n_dims), method=method, quadpts=quadpts, max_iter=max_iter,
                        prior_a_sd=prior_a_sd, prior_d_sd=prior_d_sd, callback=callback,
                        rng=np.random.default_rng(random_state), **kw)
    start = time.perf_counter()
    model.fit(responses)
    bank = model.bank_
    loglik = model.loglik_ if method == "em" else marginal_loglik(
        bank, y, w, rng=np.random.default_rng(random_state))
    from .calibrate import _fingerprint

    settings = {"n_dims": int(n_dims), "method": method, "prior_a": _prior(prior_a_sd),
                "prior_d": _prior(prior_d_sd),
                "quadpts": (quadpts or {2: 31, 3: 15}[n_dims]) if method == "em" else None,
                "tol": model.tol if method == "em" else model.mhrm_tol,
                "max_iter": max_iter or (500 if method == "em" else 2000), "loglik": "grid" if method == "em" else
                f"quasi-Monte Carlo, {LOGLIK_DRAWS} points",
                "data_fingerprint": _fingerprint(y, w, item_ids)}
    n = float(y.shape[0] if w is None else np.sum(w))
    errors = None
    if se:
        from .multidim import product_grid
        from .multidimse import multidim_standard_errors

        nodes, logw = product_grid(int(n_dims), settings["quadpts"])
        t_se = time.perf_counter()
        errors = multidim_standard_errors(bank, y, w, nodes, logw, prior_a_sd=prior_a_sd,
                                          prior_d_sd=prior_d_sd)
        settings["se"] = "observed information (Louis)"
        settings["se_seconds"] = round(time.perf_counter() - t_se, 3)
    log_prior = _log_prior(bank.loadings, prior_a_sd) + _log_prior(bank.intercepts, prior_d_sd)
    return MultidimCalibration(
        bank, float(loglik), int(model.n_parameters_), n, int(model.n_iter_),
        bool(model.converged_), time.perf_counter() - start, np.asarray(sids), settings,
        log_posterior=float(loglik) + log_prior,   # no priors: the log-likelihood, as the 1-D fit
        dropped_items=dropped, se=errors)


def _without_constant_items(y, sids, item_ids, w, responses):
    """``(y, item_ids, dropped, responses)`` without the items every subject who saw them
    answered alike (or nobody saw): left out with the 1-D fit's warning (mirt refuses them: "only
    one response category"); their intercepts would run to the prior's bound or to infinity."""
    from ..errors import warn_user

    lo, hi = np.fmin.reduce(y, axis=0), np.fmax.reduce(y, axis=0)
    constant = ~(lo < hi)
    if not constant.any():
        return y, item_ids, [], responses
    dropped = [str(i) for i in item_ids[constant]]
    warn_user(f"{len(dropped)} item(s) have the same response from every subject who saw them "
              f"(their MLE is at infinity) and were left out: {dropped[:10]}")
    from ..responses import ResponseMatrix

    keep = ~constant
    y, item_ids = y[:, keep], item_ids[keep]
    if y.shape[1] == 0:
        from ..errors import ResponseDataError

        raise ResponseDataError("no item with variation in its responses is left to calibrate")
    return y, item_ids, dropped, ResponseMatrix(y, sids, item_ids, weights=w, on_empty="keep")


def _check_degrees_of_freedom(n_items: int, n_dims: int) -> None:
    """Refuse, as mirt does ("Too few degrees of freedom"), a model with more free parameters,
    J (K + 1) - K (K - 1) / 2, than the 2^J - 1 of the answer patterns' table: it is not
    identified (3 items, K = 2: 8 parameters, 7 degrees of freedom; the EM never converged)."""
    k = n_items * (n_dims + 1) - n_dims * (n_dims - 1) // 2
    if n_items < 64 and k > 2 ** n_items - 1:
        raise ConfigError(f"the {n_dims}-dimensional 2PL on {n_items} items has {k} parameters "
                          f"but their answer patterns only {2 ** n_items - 1} degrees of "
                          "freedom (as mirt: too few degrees of freedom): fit fewer dimensions "
                          "or more items")


def marginal_loglik(bank, y, weights=None, *, n_draws: int = LOGLIK_DRAWS, rng=None) -> float:
    """The marginal log-likelihood sum_i w_i log E[P(y_i | theta)], theta ~ N(0, I_K),
    integrated by quasi-Monte Carlo (``n_draws``, rounded up to a power of 2, scrambled Sobol
    points mapped to N(0, I))."""
    from scipy.special import log_expit, logsumexp
    from scipy.stats import norm, qmc

    k = bank.n_dims
    m = max(int(np.ceil(np.log2(max(int(n_draws), 2)))), 1)
    u = qmc.Sobol(k, scramble=True, seed=rng).random_base2(m)
    theta = norm.ppf(np.clip(u, 1e-12, 1 - 1e-12))
    z = theta @ bank.loadings.T + bank.intercepts           # (Q, J)
    lp, lq = log_expit(z).T, log_expit(-z).T
    obs = ~np.isnan(y)
    y1 = np.where(obs, y, 0.0)
    y0 = obs - y1
    out = np.empty(y.shape[0])
    for s in range(0, y.shape[0], 256):                      # (256, Q) blocks
        ll = y1[s:s + 256] @ lp + y0[s:s + 256] @ lq
        out[s:s + 256] = logsumexp(ll, axis=1) - np.log(theta.shape[0])
    return float(out.sum() if weights is None else np.asarray(weights, float) @ out)


def _log_prior(values, sd) -> float:
    """The N(0, sd^2) log density summed over ``values`` (0 without a prior)."""
    if sd is None:
        return 0.0
    from scipy.stats import norm

    return float(norm.logpdf(np.asarray(values), scale=float(sd)).sum())


def _prior(sd) -> str | None:
    return None if sd is None else f"norm(0,{float(sd):g})"
