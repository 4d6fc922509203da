"""Multiple-group concurrent calibration: one set of item parameters, one latent normal per group.

As R mirt's ``multipleGroup(..., invariance = c("slopes", "intercepts", "free_means",
"free_var"))``: every item's parameters are the same in every group (items answered by one group
only are missing for the others), the reference group's trait is N(0, 1) and every other group
g's is N(mu_g, sigma_g^2), estimated with the items. A stacked one-group calibration of groups
that differ pulls them together (benchmarks/results/linking_groups.md: by 0.28-0.68 SD at
shifts of 1-2.5 SD); this fit does not.

The EM is the one-group EM (:mod:`atlascat.irt.em`) with one prior over the grid per group:

* E-step: each group's subjects through :func:`atlascat.irt.estep.estep` with that group's
  grid weights pi_gq (the N(mu_g, sigma_g^2) density at the nodes, normalized, as mirt); the
  expected counts r_jq, n_jq and the log-likelihoods are summed over the groups.
* M-step: the items as in a one-group fit (:func:`atlascat.irt.mstep.mstep`, on the summed
  counts); each other group's mean and variance the weighted mean and variance of its
  subjects' posterior over the nodes, sum_q N_gq x_q / N_g and sum_q N_gq (x_q - mu_g)^2 / N_g
  (:func:`posterior_moments`), as mirt. (The exact maximizer of the grid likelihood, whose
  normalized grid weights have those moments, differs by the grid's truncation at its ends: on
  tests/data/mirt_groups, a group at N(1, 1.38^2), by 0.017 in its variance and 0.005 in the
  log-likelihood; mirt's fixed point is the one kept, for parity.)
  Rasch: the reference group's variance is free too (its mean 0), as in a one-group Rasch fit,
  and the bank and group parameters are reported on its N(0, 1) scale.
* SQUAREM (Varadhan and Roland, 2008, one step length for all parameters) with the same
  monotonicity safeguard; convergence is mirt's rule on the item parameters and the group
  means and log-variances.

Binary models here (Rasch, 1PL-4PL); graded, GPCM and partial credit items (the last with the
reference variance free, as Rasch) take the same E-step priors and group M-step
(:func:`posterior_moments`, :func:`group_log_weights`) in
:func:`atlascat.irt.polyfit.fit_ordinal`. Standard errors of the items and of the groups'
means and variances: :mod:`atlascat.irt.groupse`.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import ConfigError, ConvergenceError
from . import arrays
from .defaults import CONVERGENCE, MAX_ITER, QUADPTS, THETA_RANGE, TOL
from .estep import DeviceData, estep, rasch_variance
from .grouplabels import (LOG_VAR_BOUNDS, MEAN_BOUND, MIN_GROUP_SIZE, GroupLabels,  # noqa: F401
                          add_group_errors, group_labels, group_log_weights, group_mapping,
                          group_summary, posterior_moments, read_groups)
from .itemmodel import ItemModel
from .mstep import mstep, set_free
from .quadrature import normal_quadrature
from .start import start_values

__all__ = ["GroupLabels", "group_labels", "group_mapping", "fit_groups", "posterior_moments",
           "group_log_weights", "group_result", "MIN_GROUP_SIZE"]


def fit_groups(values, weights, item_model: ItemModel, groups: GroupLabels, *,
               quadpts: int = QUADPTS, theta_range=THETA_RANGE, device="cpu",
               dtype: str = "float64", memory_limit=None, max_iter: int = MAX_ITER,
               tol: float = TOL, accelerate: bool = True, convergence: str = CONVERGENCE,
               max_newton: int = 8, callback=None, item_ids=None, counts=None,
               start_bank=None) -> dict:
    """Calibrate the items of ``values`` (subjects x items, NaN = missing) jointly over the
    groups ``groups`` by EM (module docstring). Settings as
    :func:`atlascat.irt.em.fit_joint`'s (``convergence`` "params" only, ``dtype`` float64
    only). Returns its dict (``var``: the reference group's variance, 1 unless Rasch) with
    ``group_means`` and ``group_vars`` (one per group, on the fit's own scale)."""
    if convergence != "params" or dtype != "float64":
        raise ConfigError("a multiple-group calibration runs in float64 with mirt's rule on "
                          "the parameters (convergence='params', dtype='float64')")
    quadpts = int(quadpts)
    xp, device = arrays.backend_for(device)
    quad = normal_quadrature(quadpts, theta_range)
    nodes = quad.nodes
    x = arrays.asarray(nodes, xp, "float64", device)
    G = len(groups.labels)
    rows = [np.flatnonzero(groups.index == g) for g in range(G)]
    w = None if weights is None else np.asarray(weights, float)
    datas = [DeviceData.build(np.ascontiguousarray(values[r]),
                              None if w is None else w[r], "float64", xp, device, None, False)
             for r in rows]
    rasch = item_model.model == "rasch"
    free = item_model.free
    k = len(free)
    n_items = values.shape[1]
    th0 = start_values(values, weights, item_model, counts=counts)
    if start_bank is not None and item_ids is not None:
        from .start import warm_start

        th0 = warm_start(th0, start_bank, item_ids, item_model)
    th0_fixed = th0.copy()
    th0 = np.where(np.isfinite(th0), th0, 0.0)
    th0_d = arrays.asarray(th0, xp, "float64", device)
    n_par = n_items * k
    # group parameters: (mean, log variance) of groups 1..G-1, then the reference's log
    # variance when Rasch
    n_grp = 2 * (G - 1) + (1 if rasch else 0)
    lo = np.concatenate([np.tile(item_model.lo[free], n_items),
                         np.tile([-MEAN_BOUND, LOG_VAR_BOUNDS[0]], G - 1),
                         [LOG_VAR_BOUNDS[0]] * (1 if rasch else 0)])
    hi = np.concatenate([np.tile(item_model.hi[free], n_items),
                         np.tile([MEAN_BOUND, LOG_VAR_BOUNDS[1]], G - 1),
                         [LOG_VAR_BOUNDS[1]] * (1 if rasch else 0)])

    def pack(th, gp):
        P = arrays.to_numpy(xp.stack([th[:, j] for j in free], axis=1))
        return np.concatenate([np.asarray(P, float).reshape(-1), gp])

    def unpack(p):
        P = arrays.asarray(p[:n_par].reshape(n_items, k), xp, "float64", device)
        th = set_free(th0_d, free, [P[:, i] for i in range(k)], xp)
        return th, p[n_par:]

    def latent(gp):
        """(means, variances) of all groups from the packed group parameters."""
        means = np.concatenate([[0.0], gp[0:2 * (G - 1):2]])
        var0 = math.exp(gp[-1]) if rasch else 1.0
        variances = np.concatenate([[var0], np.exp(gp[1:2 * (G - 1):2])])
        return means, variances

    def e_steps(th, gp, **kw):
        log_p, log_q = item_model.node_logs(th, x, xp)
        means, variances = latent(gp)
        return [estep(d, log_p, log_q,
                      arrays.asarray(group_log_weights(nodes, mu, v), xp, "float64", device),
                      **kw)
                for d, mu, v in zip(datas, means, variances)]

    def em_map(p, at_least=None):
        th, gp = unpack(p)
        ess = e_steps(th, gp)
        obj = float(sum(float(arrays.to_numpy(es.loglik)) for es in ess)) + \
            float(arrays.to_numpy(xp.sum(item_model.log_prior(th, xp))))
        if at_least is not None and not (math.isfinite(obj) and obj >= at_least):
            state["n_iter"] += 1
            return None, obj
        r = ess[0].r
        for es in ess[1:]:
            r = r + es.r
        if all(es.n.ndim == 1 for es in ess):
            nr = ess[0].n
            for es in ess[1:]:
                nr = nr + es.n
        else:
            n = 0.0
            for es in ess:
                n = n + (es.n if es.n.ndim == 2 else es.n[None, :])
            nr = n - r
        th_new = mstep(item_model, th, r, nr, x, max_newton)
        gp_new = np.empty(n_grp)
        for g in range(1, G):
            nm = np.asarray(arrays.to_numpy(ess[g].node_mass), float)
            gp_new[2 * g - 2], v = posterior_moments(nodes, nm)
            gp_new[2 * g - 1] = math.log(v)
        if rasch:
            gp_new[-1] = math.log(float(arrays.to_numpy(rasch_variance(x, ess[0].node_mass))))
        state["n_iter"] += 1
        return pack(th_new, gp_new), obj

    def report(obj, pa, pb):
        state["trace"].append(obj)
        if callback is not None:
            per_item = np.abs(pb - pa)[:n_par].reshape(n_items, k).max(axis=1)
            worst = int(np.argmax(per_item))
            callback({"iteration": state["n_iter"], "loglik": obj,
                      "max_change": float(np.max(np.abs(pb - pa))),
                      "worst_item": None if item_ids is None else str(item_ids[worst]),
                      "partition": 0, "n_partitions": 1})
        return float(np.max(np.abs(pb - pa)))

    state = {"n_iter": 0, "trace": []}
    p = pack(th0_d, np.zeros(n_grp))
    converged = False
    step_max = 1.0
    max_iter, tol = int(max_iter), float(tol)
    while state["n_iter"] < max_iter:
        p0 = p
        p1, f0 = em_map(p0)
        p = p1
        if report(f0, p0, p1) < tol:
            converged = True
            break
        if not accelerate or state["n_iter"] >= max_iter:
            continue
        p2, f1 = em_map(p1)
        p = p2
        if report(f1, p1, p2) < tol:
            converged = True
            break
        if state["n_iter"] >= max_iter:
            break
        r = p1 - p0
        v = (p2 - p1) - r
        vv = float(v @ v)
        if not vv > 0:
            continue
        alpha = -math.sqrt(float(r @ r) / vv)
        at_max = alpha <= -step_max
        alpha = min(-1.0, max(-step_max, alpha))
        if alpha == -1.0:
            continue
        pe = np.clip(p0 - 2.0 * alpha * r + alpha * alpha * v, lo, hi)
        if item_model.has_u and not bool(np.all(arrays.to_numpy(
                item_model.feasible(unpack(pe)[0], xp)))):
            continue
        p3, fe = em_map(pe, at_least=f1)
        if p3 is not None:
            p = p3
            if at_max:
                step_max *= 4.0
            if report(fe, pe, p3) < tol:
                converged = True
                break
        elif at_max:
            step_max = max(1.0, step_max / 4.0)
    th, gp = unpack(p)
    ess = e_steps(th, gp, x=x, stats=False)
    loglik = float(sum(float(arrays.to_numpy(es.loglik)) for es in ess))
    theta = np.empty(values.shape[0])
    theta_se = np.empty(values.shape[0])
    for r, es in zip(rows, ess):
        theta[r] = np.asarray(arrays.to_numpy(es.theta), float)
        theta_se[r] = np.asarray(arrays.to_numpy(es.se), float)
    th_h = np.array(arrays.to_numpy(th), dtype=float)
    fixed = [j for j in range(4) if j not in free]
    th_h[:, fixed] = th0_fixed[:, fixed]
    log_post = loglik + float(arrays.to_numpy(xp.sum(item_model.log_prior(th, xp))))
    if not math.isfinite(loglik) or not np.all(np.isfinite(th_h[:, free])):
        raise ConvergenceError("calibration produced non-finite values; check the data")
    means, variances = latent(gp)
    return {"th": th_h, "var": float(variances[0]), "loglik": loglik,
            "log_posterior": log_post, "trace": np.asarray(state["trace"]),
            "n_iter": state["n_iter"], "converged": converged, "float32_iterations": None,
            "theta": theta, "theta_se": theta_se, "nodes": nodes,
            "group_means": means, "group_vars": variances}


def group_result(values, w, item_model, item_ids, model, groups: GroupLabels, em_settings,
                 *, start=None, counts=None, se=False, se_callback=None, **result_fields):
    """A :class:`atlascat.irt.result.CalibrationResult` of :func:`fit_groups` (the bank on the
    reference group's N(0, 1) scale, the subjects' EAPs on it too, ``groups`` the groups'
    means and SDs from :func:`group_summary`; the subjects' EAPs as ``atlas score --groups``,
    each under its group's prior, :func:`atlascat.irt.groupscore.eap_by_prior`);
    ``result_fields``: its other fields.
    ``se``: with the standard errors (:mod:`atlascat.irt.groupse`) in ``se`` and each
    group's ``mean_se``, ``var``, ``var_se``, ``sd_se`` in ``groups``."""
    from .itemmodel import to_bank
    from .result import CalibrationResult

    fit = fit_groups(values, w, item_model, groups, item_ids=item_ids, counts=counts,
                     start_bank=start, **em_settings)
    bank = to_bank(item_ids, fit["th"], item_model, "1pl" if model == "rasch" else model,
                   fit["var"])
    summary = group_summary(groups, fit, w)
    from .grouplabels import with_group_priors
    from .groupscore import eap_by_prior

    bank = with_group_priors(bank, summary)   # its file says it was fitted with groups
    ses = None
    if se:
        from .groupse import group_standard_errors

        ses = group_standard_errors(values, w, fit, item_model, groups.index, groups.labels,
                                    item_ids=item_ids, model=model, progress=se_callback)
        add_group_errors(summary, ses)
    # the subjects' scores as atlas score --groups gives them (mirt's fscores on the fit with
    # --quadrature fixed): EAP under each one's group prior, 121 nodes on [-6, 6]
    mean, sd = (np.array([g[k] for g in summary["groups"]])[groups.index] for k in ("mean", "sd"))
    theta, theta_se = eap_by_prior(values, bank, mean, sd, device=em_settings.get("device", "cpu"),
                                   memory_limit=em_settings.get("memory_limit"))
    return CalibrationResult(
        bank=bank, model=model, loglik=fit["loglik"], loglik_trace=fit["trace"],
        n_iter=fit["n_iter"], converged=fit["converged"], seconds=0.0,
        theta=theta, theta_se=theta_se, latent_variance=fit["var"],
        log_posterior=fit["log_posterior"], groups=summary, se=ses, **result_fields)
