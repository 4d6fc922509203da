"""The EM loop of a joint calibration: E-step, M-step, SQUAREM, convergence, on one device.

One EM iteration is :func:`atlascat.irt.estep.estep` then :func:`atlascat.irt.mstep.mstep`
(and, for the Rasch model, the latent variance whose grid second moment sum_q pi_q(sigma^2)
x_q^2 matches the posterior's sum_q N_q x_q^2 / N, :func:`atlascat.irt.estep.rasch_variance`),
accelerated by :mod:`atlascat.irt.squarem` (a rejected extrapolation costs its E-step only).

Convergence: mirt's rule, the largest absolute change of any internal parameter between two
consecutive EM iterates is below ``tol`` (or of any item curve on the grid, ``convergence=
"icc"``), or ``max_iter`` iterations. The data is moved to the device once; the loop reads back
one small vector per EM iteration (two when an extrapolation is tried). With
``dtype="float32"`` the large products run in float32 until their rounding noise dominates,
then the EM finishes in float64.
"""
from __future__ import annotations

import math

import numpy as np

from .defaults import CONVERGENCE, MAX_ITER, QUADPTS, THETA_RANGE, TOL
from .._blas import large_products
from ..errors import ConvergenceError
from . import arrays, squarem
from .estep import DeviceData, estep, grid_log_weights, plan_blocks, rasch_variance
from .itemmodel import ItemModel
from .mstep import mstep, set_free
from .quadrature import normal_quadrature
from .start import start_values, warm_start

__all__ = ["fit_joint"]


def fit_joint(values, weights, item_model: ItemModel, **settings) -> dict:
    """Calibrate the items of ``values`` jointly by EM (:func:`_fit_joint`), with BLAS's
    threads given back to the E-step's products when they are large (:mod:`atlascat._blas`)."""
    cells = float(values.shape[0]) * values.shape[1] * int(settings.get("quadpts", QUADPTS))
    with large_products(cells):
        return _fit_joint(values, weights, item_model, **settings)


def _fit_joint(values, weights, item_model: ItemModel, *, quadpts: int = QUADPTS,
              theta_range=THETA_RANGE, device="cpu", dtype: str = "float64",
              memory_limit=None, max_iter: int = MAX_ITER, tol: float = TOL,
              accelerate: bool = True, convergence: str = CONVERGENCE, max_newton: int = 8,
              callback=None, part: int = 0, n_parts: int = 1, start_bank=None,
              item_ids=None, item_scale=None, counts=None) -> dict:
    """Calibrate the items of ``values`` (subjects x items, NaN = missing) jointly by EM.

    Settings as :class:`atlascat.irt.calibrate.Calibrator`'s; ``part`` / ``n_parts`` label the
    callback's reports; ``item_scale`` (one per item, default 1): each item's E-step term is
    multiplied by it (1 / phi_j, the extended quasi-likelihood of continuous scores,
    :mod:`atlascat.irt.dispersion`; the log-likelihood reported is then that one's, and
    each item's log prior is weighted by it too, see ``log_prior``);
    ``counts``: the :class:`atlascat.irt.colstats.BinaryCounts` of ``values`` when the caller
    holds them (the start values reuse them). Returns a dict: internal parameters ``th`` (host), latent variance
    ``var``, ``loglik``, ``log_posterior``, ``trace``, ``n_iter``, ``converged``,
    ``float32_iterations``, the subjects' EAP ``theta`` / ``theta_se`` and the grid ``nodes``.
    """
    quadpts = int(quadpts)
    xp, device = arrays.backend_for(device)
    block_rows, on_host = plan_blocks(values, xp, device, dtype, memory_limit, quadpts)
    data = DeviceData.build(values, weights, dtype, xp, device, block_rows, on_host)
    quad = normal_quadrature(quadpts, theta_range)
    x = arrays.asarray(quad.nodes, xp, "float64", device)
    log_w0 = arrays.asarray(quad.log_weights, xp, "float64", device)
    rasch = item_model.model == "rasch"
    free = item_model.free
    k = len(free)
    n_items = values.shape[1]
    th0 = start_values(values, weights, item_model, filled=data.host_scores(), counts=counts)
    if start_bank is not None and item_ids is not None:
        th0 = warm_start(th0, start_bank, item_ids, item_model)
    # fixed (non-free) columns hold +-inf for absent c/u; finite stand-ins keep the
    # arithmetic of every backend NaN-free (they are never read through natural())
    th0_fixed = th0.copy()
    th0 = np.where(np.isfinite(th0), th0, 0.0)
    th0_d = arrays.asarray(th0, xp, "float64", device)
    max_iter = int(max_iter)
    tol = float(tol)
    lo_np = np.tile(item_model.lo[free], n_items)
    hi_np = np.tile(item_model.hi[free], n_items)
    if rasch:
        lo_np, hi_np = np.append(lo_np, np.log(1e-3)), np.append(hi_np, np.log(100.0))
    lo = arrays.asarray(lo_np, xp, "float64", device)
    hi = arrays.asarray(hi_np, xp, "float64", device)
    n_par = n_items * k

    def pack(th, log_var):
        p = xp.reshape(xp.stack([th[:, j] for j in free], axis=1), (-1,))
        return arrays.concat([p, xp.reshape(log_var, (1,))], xp) if rasch else p

    def unpack(p):
        P = xp.reshape(p[:n_par], (n_items, k))
        th = set_free(th0_d, free, [P[:, i] for i in range(k)], xp)
        return th, (p[-1] if rasch else None)

    state = {"n_iter": 0, "trace": [], "data": data, "f32_iter": None}
    # continuous scores: each item's quasi-likelihood term divided by its dispersion
    # (:mod:`atlascat.irt.dispersion`); None for 0/1 answers
    scale = None if item_scale is None else arrays.asarray(
        np.asarray(item_scale, float).reshape(-1, 1), xp, "float64", device)

    def log_prior(th):
        """Each item's log prior, times its ``item_scale`` where one is given: the M-step
        below takes the unscaled expected counts, so item j's update maximizes its scaled
        data term plus log p(theta_j) / phi_j (the prior as strong against one item's
        information as on a 0/1 item). The objective EM and SQUAREM's safeguard read is that
        one (the prior at weight 1, measured: benchmarks/results/longbench.md)."""
        lp = item_model.log_prior(th, xp)
        return lp if scale is None else lp * scale[:, 0]

    def e_step(th, log_var, **kw):
        log_w = grid_log_weights(x, xp.exp(log_var)) if rasch else log_w0
        log_p, log_q = item_model.node_logs(th, x, xp)
        if scale is not None:
            log_p, log_q = log_p * scale, log_q * scale
        return estep(state["data"], log_p, log_q, log_w, **kw)

    def em_map(p, at_least=None):
        """One EM iteration from p: (new parameters, log-posterior at p), on the device.

        With ``at_least`` (SQUAREM's safeguard), the log-posterior at p is read first and,
        if it is below ``at_least``, the M-step is skipped: ``(None, value)``.
        """
        th, log_var = unpack(p)
        es = e_step(th, log_var)
        obj = es.loglik + xp.sum(log_prior(th))
        if at_least is not None:
            (objh,) = to_host(obj)
            if not (math.isfinite(objh) and objh >= at_least):
                state["n_iter"] += 1
                return None, objh
        nr = es.n - es.r if es.n.ndim == 2 else es.n
        th_new = mstep(item_model, th, es.r, nr, x, max_newton)
        log_var_new = xp.log(rasch_variance(x, es.node_mass)) if rasch else None
        state["n_iter"] += 1
        return pack(th_new, log_var_new), obj

    def change(pa, pb):
        """Largest parameter change (or item-curve change), a 0-d device array, and the
        per-item changes (for the callback's worst item)."""
        if convergence == "params":
            per_item = xp.max(xp.reshape(xp.abs(pb - pa)[:n_par], (n_items, k)), axis=1)
            extra = xp.abs(pb[-1] - pa[-1]) if rasch else None
        else:
            tha, lva = unpack(pa)
            thb, lvb = unpack(pb)
            pa_, pb_ = (xp.exp(item_model.node_logs(t, x, xp)[0]) for t in (tha, thb))
            per_item = xp.max(xp.abs(pb_ - pa_), axis=1)
            extra = xp.abs(lvb - lva) if rasch else None
        ch = xp.max(per_item)
        if extra is not None:
            ch = xp.maximum(ch, extra)
        return ch, per_item, extra

    def to_host(*vals):
        """One device->host transfer per EM iteration: the scalars the loop decides on."""
        vec = xp.stack([xp.reshape(arrays.astype(v, xp.float64, xp), ()) for v in vals])
        return [float(v) for v in arrays.to_numpy(vec)]

    def report(obj, ch, per_item, extra):
        trace = state["trace"]
        if state["f32_iter"] is None and dtype == "float32" and trace:
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
        if callback is not None:
            pi = arrays.to_numpy(per_item)
            worst = int(np.argmax(pi))
            ex = 0.0 if extra is None else float(arrays.to_numpy(extra))
            callback({"iteration": state["n_iter"], "loglik": obj, "max_change": ch,
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
        if not accelerate or state["n_iter"] >= max_iter:
            continue
        p2, f1 = em_map(p1)
        ch, per_item, extra = change(p1, p2)
        # SQUAREM S3 extrapolation: one step length per item (and one for the variance)
        r = p1 - p0
        v = (p2 - p1) - r
        al, at_max_d, trivial_d = squarem.step_lengths(r, v, n_items, k, rasch, step_max, xp)
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
        pe = squarem.extrapolate(p0, r, v, al, n_items, k, rasch, lo, hi, xp)
        if item_model.has_u:
            # an extrapolation may cross u below c: those items keep their EM iterate p2
            # (itself ordered: the M-step's line search accepts ordered points only)
            Pe = xp.reshape(pe, (n_items, k))
            ok_u = item_model.feasible(unpack(pe)[0], xp)
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
    var = float(arrays.to_numpy(xp.exp(log_var))) if rasch else 1.0
    if state["f32_iter"] is None and dtype == "float32":
        state["f32_iter"] = state["n_iter"]
        state["data"] = data.as_float64()   # scores, thetas and log-likelihood in float64
    es = e_step(th, log_var if rasch else zero, x=x, stats=False)
    loglik = float(arrays.to_numpy(es.loglik))
    th_h = np.array(arrays.to_numpy(th), dtype=float)
    fixed = [j for j in range(4) if j not in free]
    th_h[:, fixed] = th0_fixed[:, fixed]
    log_post = loglik + float(arrays.to_numpy(xp.sum(log_prior(th))))
    if not math.isfinite(loglik) or not np.all(np.isfinite(th_h[:, free])):
        raise ConvergenceError("calibration produced non-finite values; check the data")
    return {"th": th_h, "var": var, "loglik": loglik, "log_posterior": log_post,
            "trace": np.asarray(state["trace"]), "n_iter": state["n_iter"],
            "converged": converged, "float32_iterations": state["f32_iter"],
            "theta": np.asarray(arrays.to_numpy(es.theta), float),
            "theta_se": np.asarray(arrays.to_numpy(es.se), float), "nodes": quad.nodes}

