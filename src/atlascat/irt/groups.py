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

Binary models here (Rasch, 1PL-4PL); graded and GPCM items take the same E-step priors and
group M-step (:func:`posterior_moments`, :func:`group_log_weights`) in
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
from .itemmodel import ItemModel
from .mstep import mstep, set_free
from .quadrature import normal_quadrature
from .start import start_values

__all__ = ["GroupLabels", "group_labels", "group_mapping", "fit_groups", "posterior_moments",
           "group_log_weights", "group_result", "MIN_GROUP_SIZE"]

#: fewest subjects a group may have (its mean and variance are estimated from them)
MIN_GROUP_SIZE = 10
LOG_VAR_BOUNDS = (math.log(1e-3), math.log(100.0))
MEAN_BOUND = 10.0


class GroupLabels:
    """The subjects' groups: ``labels`` (one per group, the reference first) and ``index``
    (each subject's group, 0 = the reference)."""

    def __init__(self, labels, index):
        self.labels = [str(v) for v in labels]
        self.index = np.asarray(index, dtype=np.intp)

    @property
    def reference(self) -> str:
        return self.labels[0]

    def sizes(self, weights=None) -> np.ndarray:
        return np.bincount(self.index, weights=weights, minlength=len(self.labels))


def group_labels(groups, subject_ids, reference=None) -> GroupLabels:
    """The groups of the subjects ``subject_ids`` from ``groups``: a dict subject id -> group
    (:func:`group_mapping`) or what that takes.
    ``reference``: the group whose trait is N(0, 1) (default: the first label in sorted
    order, as R's factor levels: numeric labels by value). A ConfigError of one line for an unknown or unlabelled
    subject, a single group, a group of fewer than :data:`MIN_GROUP_SIZE` subjects or an
    unknown reference."""
    ids = [str(s) for s in subject_ids]
    mapping = groups if isinstance(groups, dict) else group_mapping(groups, subject_ids)
    missing = [s for s in ids if s not in mapping]
    if missing:
        raise ConfigError(f"{len(missing)} subject(s) have no group, e.g. {missing[:3]}; "
                          "give every subject of the responses a group")
    raw = [mapping[s] for s in ids]
    text = []
    for s, v in zip(ids, raw):
        if v is None or (isinstance(v, float) and math.isnan(v)) or str(v).strip() == "":
            raise ConfigError(f"subject {s!r} has an empty group label")
        text.append(str(v).strip())
    labels = sorted(set(text), key=_level_order(set(text)))
    if len(labels) < 2:
        raise ConfigError(f"groups needs at least two groups, got one ({labels[0]!r}); "
                          "calibrate without groups")
    if reference is not None:
        if str(reference) not in labels:
            raise ConfigError(f"reference group {reference!r} is not one of the groups "
                              f"{labels[:10]}")
        labels.remove(str(reference))
        labels.insert(0, str(reference))
    pos = {g: i for i, g in enumerate(labels)}
    out = GroupLabels(labels, [pos[g] for g in text])
    counts = out.sizes()
    small = [(g, int(c)) for g, c in zip(labels, counts) if c < MIN_GROUP_SIZE]
    if small:
        raise ConfigError(f"group {small[0][0]!r} has {small[0][1]} subject(s); each group "
                          f"needs at least {MIN_GROUP_SIZE} (merge it or leave it out)")
    return out


def _level_order(labels):
    """The sort key of R's factor levels: numbers by value when every label is one (groups
    2 and 10: 2 first, as R's factor of a numeric column), else the text."""
    try:
        [float(v) for v in labels]
    except ValueError:
        return str
    return lambda v: (float(v), v)


def posterior_moments(nodes, node_mass):
    """(mean, variance) of the posterior mass ``node_mass`` on ``nodes`` (host arrays): a
    group's M-step, as mirt's (the variance kept within [1e-3, 100], the mean within +-10)."""
    x = np.asarray(nodes, float)
    m = np.asarray(node_mass, float)
    m = m / m.sum()
    mean = float(m @ x)
    var = float(m @ ((x - mean) ** 2))
    lo, hi = np.exp(LOG_VAR_BOUNDS)
    return float(np.clip(mean, -MEAN_BOUND, MEAN_BOUND)), float(np.clip(var, lo, hi))


def group_log_weights(nodes, mean, var):
    """log pi_q of N(``mean``, ``var``) at the ``nodes`` (host array), normalized: a group's
    grid weights in its E-step (mirt's)."""
    lw = -0.5 * (nodes - mean) ** 2 / var
    mx = np.max(lw)
    return lw - (mx + np.log(np.sum(np.exp(lw - mx))))


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


def group_summary(groups: GroupLabels, fit: dict, weights=None) -> dict:
    """The groups' latent means and SDs on the bank's N(0, 1) scale (the reference group's;
    a Rasch fit's divided by its SD), with their sizes as the fit's own (``n_subjects`` its
    rows, ``n_observations`` the subjects they stand for, the sum of the pattern frequencies):
    JSON-ready."""
    sd0 = math.sqrt(fit["var"])
    return {"reference": groups.reference,
            "groups": [{"group": g, "n_subjects": int(rows), "n_observations": float(n),
                        "mean": float(mu) / sd0, "sd": math.sqrt(float(v)) / sd0}
                       for g, rows, n, mu, v in zip(groups.labels, groups.sizes(),
                                                    groups.sizes(weights), fit["group_means"],
                                                    fit["group_vars"])]}


def group_mapping(groups, subject_ids) -> dict:
    """``groups`` as a dict subject id -> label for the subjects ``subject_ids`` (before any
    filtering): a mapping (dict, pandas Series) must name only these subjects, a sequence
    must hold one label per subject, in their order. A ConfigError of one line otherwise."""
    ids = [str(s) for s in subject_ids]
    if hasattr(groups, "items") and not isinstance(groups, np.ndarray):
        mapping = {str(k): v for k, v in groups.items()}
        unknown = sorted(set(mapping) - set(ids))
        if unknown:
            raise ConfigError(f"groups names {len(unknown)} subject(s) not in the responses, "
                              f"e.g. {unknown[:3]}")
        return mapping
    raw = list(np.asarray(groups, dtype=object).reshape(-1))
    if len(raw) != len(ids):
        raise ConfigError(f"groups has {len(raw)} labels for {len(ids)} subjects; give one per "
                          "subject (or a mapping subject id -> group)")
    return dict(zip(ids, raw))


def group_result(values, w, item_model, item_ids, model, groups: GroupLabels, em_settings,
                 *, start=None, counts=None, se=False, se_callback=None, **result_fields):
    """A :class:`atlascat.irt.result.CalibrationResult` of :func:`fit_groups` (the bank on the
    reference group's N(0, 1) scale, the subjects' EAPs on it too, ``groups`` the groups'
    means and SDs from :func:`group_summary`; the subjects' EAPs as mirt's ``fscores``, each
    under its group's prior, :func:`atlascat.irt.groupscore.eap_by_prior`); ``result_fields``:
    its other fields.
    ``se``: with the standard errors (:mod:`atlascat.irt.groupse`) in ``se`` and each
    group's ``mean_se``, ``var``, ``var_se``, ``sd_se`` in ``groups``."""
    from .itemmodel import to_bank
    from .result import CalibrationResult

    fit = fit_groups(values, w, item_model, groups, item_ids=item_ids, counts=counts,
                     start_bank=start, **em_settings)
    bank = to_bank(item_ids, fit["th"], item_model, "1pl" if model == "rasch" else model,
                   fit["var"])
    summary = group_summary(groups, fit, w)
    ses = None
    if se:
        from .groupse import group_standard_errors

        ses = group_standard_errors(values, w, fit, item_model, groups.index, groups.labels,
                                    item_ids=item_ids, model=model, progress=se_callback)
        add_group_errors(summary, ses)
    # the subjects' scores as mirt's fscores on the fit gives them (and atlas score --groups):
    # EAP under each one's group prior on the bank's scale, 121 nodes on [-6, 6]
    from .groupscore import eap_by_prior

    mean, sd = (np.array([g[k] for g in summary["groups"]])[groups.index] for k in ("mean", "sd"))
    theta, theta_se = eap_by_prior(values, bank, mean, sd, device=em_settings.get("device", "cpu"),
                                   memory_limit=em_settings.get("memory_limit"))
    return CalibrationResult(
        bank=bank, model=model, loglik=fit["loglik"], loglik_trace=fit["trace"],
        n_iter=fit["n_iter"], converged=fit["converged"], seconds=0.0,
        theta=theta, theta_se=theta_se, latent_variance=fit["var"],
        log_posterior=fit["log_posterior"], groups=summary, se=ses, **result_fields)


def add_group_errors(summary: dict, ses) -> None:
    """Each group's ``mean_se``, ``var``, ``var_se``, ``sd_se`` (on the bank's scale, from
    :meth:`atlascat.irt.groupse.GroupStandardErrors.group_frame`) into the rows of
    :func:`group_summary`'s ``summary``."""
    table = ses.group_frame("standard")
    for row, t in zip(summary["groups"], table.itertuples()):
        row.update({"mean_se": _num(t.mean_se), "var": float(t.var),
                    "var_se": _num(t.var_se), "sd_se": _num(t.sd_se)})


def _num(v):
    """A float for JSON, None for NaN (a fixed parameter's standard error)."""
    return None if not math.isfinite(float(v)) else float(v)


def read_groups(path, option: str = "--groups") -> dict:
    """A groups file: a CSV whose first column is the subject id and whose ``group`` column
    (else its second column) is the subject's group, one row per subject, with a header; as
    a dict subject id -> group. A ConfigError of one line, naming ``option``, for a missing
    or unreadable file, fewer than two columns, a repeated subject or an empty label."""
    from pathlib import Path

    import pandas as pd

    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{option}: no such file: {path}")
    try:
        df = pd.read_csv(p, dtype=str, keep_default_na=False)
    except (ValueError, OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{option}: cannot read {path} as CSV ({str(exc).splitlines()[0]})"
                          ) from None
    if df.shape[1] < 2 or len(df) == 0:
        raise ConfigError(f"{option}: {path} needs a header and two columns, subject id and "
                          "group, with a row per subject")
    col = "group" if "group" in list(df.columns[1:]) else df.columns[1]
    ids = df.iloc[:, 0].str.strip()
    dup = ids[ids.duplicated()]
    if len(dup):
        raise ConfigError(f"{option}: subject {dup.iloc[0]!r} appears more than once in {path}")
    labels = df[col].str.strip()
    empty = ids[labels == ""]
    if len(empty):
        raise ConfigError(f"{option}: subject {empty.iloc[0]!r} has an empty group in {path}")
    return dict(zip(ids, labels))
