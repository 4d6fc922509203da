"""Item fit (S-X2, one table per group) and M2 of a multiple-group calibration, as R mirt's
``itemfit`` and ``M2`` on a ``multipleGroup`` model (:func:`m2_groups` for the latter).

mirt's itemfit takes each group apart: the group's subjects, its latent N(mu_g, sigma_g^2)
(:mod:`atlascat.irt.groupscore`'s priors) in the summed-score expectations, and the group's
free latent parameters (a non-reference group's mean and variance: 2; the Rasch model's
reference variance) counted with the item's own in each item's df. :func:`sx2_groups` is :func:`atlascat.irt.fit.sx2` per group with those
three; items a group never answered are left out of its table (S-X2 takes the subjects who
answered every item).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["sx2_groups", "sx2_combined", "m2_groups", "m2_ordinal_groups", "aligned_subjects"]


def sx2_groups(responses, bank, groups, priors, *, estimated=None, pcm: bool = False,
               **settings) -> pd.DataFrame:
    """S-X2 of every item within each group (:func:`atlascat.irt.fit.sx2`'s columns, then
    ``group``; the groups in the fit's order): ``groups`` each subject's group and ``priors``
    the fit's groups, as :func:`atlascat.irt.groupscore.score_groups` takes them (the first
    group the reference). A non-reference group's df is 2 fewer than a one-group fit's (its
    latent mean and variance, as mirt counts them; a Rasch bank's 1 fewer, one-group Rasch
    counting the latent variance already). An ordinal bank
    (:class:`atlascat.irt.polybank.PolyBank`, graded / gpcm): ``responses`` the ratings on the
    items' own scales, labelled (a DataFrame indexed by subject id), and each group's table
    :func:`atlascat.irt.polyfitstats.sx2_ordinal`'s (no ``n_groups``); ``pcm``: the bank is a
    partial credit fit's (GPCM items of one slope, its reference group's variance estimated:
    1 fewer, as a Rasch bank's; a bank that says it is pcm, ``bank.is_pcm``, is one without
    it). ``settings``: sx2's ``mincell``, ``quadpts``,
    ``theta_range``, ``weights``."""
    from .groupscore import group_priors, subject_groups
    from .polybank import PolyBank
    from .sx2table import sx2_frame

    table = group_priors(priors)
    y, ids, weights, one_sx2, extra = (_ordinal if isinstance(bank, PolyBank) else _binary)(
        responses, bank, estimated)
    labels = subject_groups(groups, ids, list(table))
    weights = settings.pop("weights", weights)
    out = []
    for k, (label, (mean, sd)) in enumerate(table.items()):
        rows = labels == label
        if not rows.any():
            continue
        seen = np.flatnonzero((~np.isnan(y[rows])).any(axis=0))
        w = None if weights is None else np.asarray(weights, dtype=float)[rows]
        one = one_sx2(y[np.ix_(rows, seen)], bank.subset(seen), prior_mean=mean, prior_sd=sd,
                      weights=w, **settings)
        pcm_bank = isinstance(bank, PolyBank) and (bool(pcm) or bank.is_pcm)
        latent = extra - int(pcm_bank) if k > 0 else 0
        complete = ~np.isnan(y[np.ix_(rows, seen)]).any(axis=1)    # the subjects sx2 used
        n = float(complete.sum() if w is None else w[complete].sum())
        df = np.maximum(one["df_S_X2"].to_numpy() - latent, 0)
        more = {"n_groups": one["n_groups"]} if "n_groups" in one else {}
        frame = sx2_frame(one["item_id"], one["S_X2"], df, n, **more)
        frame["group"] = label
        out.append(frame)
    return pd.concat(out, ignore_index=True)


def sx2_combined(per_group: pd.DataFrame, item_ids) -> pd.DataFrame:
    """One row per item of ``item_ids`` from :func:`sx2_groups`'s table: the groups' S-X2
    summed on the summed df (the groups' subjects are independent, so the sum of independent
    chi-squares is one on the summed df), its p (``chi2.sf``), ``n_groups_S_X2`` (the groups
    that tested the item: answered it, df > 0) and ``worst_group`` (the group whose own S-X2 p
    is smallest, "" where none tested it). An item no group tested: S-X2, df and p NaN."""
    from scipy.stats import chi2

    t = per_group[np.isfinite(per_group["S_X2"].to_numpy(dtype=float))
                  & (per_group["df_S_X2"].to_numpy(dtype=float) > 0)]
    ids = pd.Index(np.asarray(item_ids).astype(str))
    by = t.groupby("item_id", sort=False)
    x2 = by["S_X2"].sum().reindex(ids)
    df = by["df_S_X2"].sum().reindex(ids)
    worst = t.loc[by["p_S_X2"].idxmin(), ["item_id", "group"]].set_index("item_id")["group"]
    with np.errstate(invalid="ignore"):
        p = np.where(df > 0, chi2.sf(x2, np.where(df > 0, df, 1)), np.nan)
    return pd.DataFrame({"item_id": ids, "S_X2": x2.to_numpy(), "df_S_X2": df.to_numpy(),
                         "p_S_X2": p, "n_groups_S_X2": by.size().reindex(ids).fillna(0)
                         .astype(int).to_numpy(),
                         "worst_group": worst.reindex(ids).fillna("").astype(str).to_numpy()})


def aligned_subjects(responses, bank):
    """(subject ids, weights) of labelled ``responses`` read against ``bank`` (binary or graded /
    gpcm), as the per-group item fit reads them."""
    from .polybank import PolyBank

    _, ids, w, _, _ = (_ordinal if isinstance(bank, PolyBank) else _binary)(responses, bank, None)
    return ids, w


def _binary(responses, bank, estimated):
    """(0/1 answers aligned to the bank, subject ids, weights, the one-group S-X2, the
    latent parameters a non-reference group adds to an item's df) of a binary bank."""
    from functools import partial

    from ..errors import ConfigError
    from ..responses import ResponseMatrix, as_labelled_responses
    from .fit import _SHARED, _estimated, sx2

    rm = as_labelled_responses(responses)
    if not isinstance(rm, ResponseMatrix):
        raise ConfigError("sx2_groups matches subjects to groups by id: give labelled "
                          "responses (a ResponseMatrix or DataFrame)")
    # a non-reference group's mean and variance, beyond the latent variance a one-group Rasch
    # fit counts already (its reference group's)
    extra = 2 - _SHARED.get(_estimated(bank, estimated), 0)
    return (rm.aligned_values(bank.item_ids, extra="ignore"), rm.subject_ids, rm.weights,
            partial(sx2, estimated=estimated), extra)


def _ordinal(responses, bank, estimated):
    """:func:`_binary`'s pieces of an ordinal bank: the ratings on the items' own scales."""
    from functools import partial

    from ..errors import ConfigError
    from ..responses import ResponseMatrix
    from .polyfitstats import sx2_ordinal
    from .polyscore import aligned_ratings

    values, ids = aligned_ratings(responses, bank)
    if ids is None:
        raise ConfigError("sx2_groups matches subjects to groups by id: give labelled "
                          "ratings (a DataFrame indexed by subject id)")
    weights = responses.weights if isinstance(responses, ResponseMatrix) else None
    return values, ids, weights, partial(sx2_ordinal, estimated=estimated), 2


def m2_groups(responses, bank, groups, priors, *, estimated=None, quadpts=None,
              theta_range=None, ci: float = 0.9, group_delta: bool = True) -> dict:
    """M2 of a multiple-group fit, as R mirt's ``M2`` on a ``multipleGroup`` model: each
    group's univariate and bivariate moments (its own items, its prior's quadrature), stacked;
    Xi block-diagonal (group g's Xi_g / N_g); Delta the derivatives in the joint parameters
    (the items' shared across the groups, each non-reference group's mean and variance, a
    Rasch bank's reference variance); M2 = e' (Xi^-1 - Xi^-1 D (D' Xi^-1 D)^-1 D' Xi^-1) e on
    sum_g moments_g - free parameters df; RMSEA on the total N; SRMSR per group; TLI and CFI
    against the null model of independent items in each group (M2 and df summed over the
    groups). ``group_delta=False``: the latent parameters (the groups' means and variances, a
    Rasch bank's reference variance) left out of Delta (still counted in df), as mirt 1.45.1's
    M2 on a multipleGroup fit (to 1e-9 at its parameters; with them, the default, M2 differs
    by 3e-5 relative here). Returns a JSON-ready dict: M2, df, p, RMSEA, RMSEA_5, RMSEA_95,
    SRMSR (group -> value), TLI, CFI, n, M2_null, df_null."""
    from scipy import linalg
    from scipy.stats import chi2

    from ..errors import ConfigError
    from ..responses import ResponseMatrix, as_labelled_responses
    from .defaults import QUADPTS, THETA_RANGE
    from .fit import (_available_binary, _check_pairs, _corr, _delta_matrix, _estimated,
                      _jacobian_blocks, _xi_matrix, free_parameters, null_m2, rmsea_ci)
    from .groupscore import group_priors, subject_groups
    from .quadrature import normal_quadrature

    table = group_priors(priors)
    rm = as_labelled_responses(responses)
    if not isinstance(rm, ResponseMatrix):
        raise ConfigError("m2_groups matches subjects to groups by id: give labelled "
                          "responses (a ResponseMatrix or DataFrame)")
    est = _estimated(bank, estimated)
    labels = subject_groups(groups, rm.subject_ids, list(table))
    y = rm.aligned_values(bank.item_ids, extra="ignore")
    weights = np.ones(len(y)) if rm.weights is None else np.asarray(rm.weights, dtype=float)
    n = len(bank)
    quadpts, theta_range = quadpts or QUADPTS, theta_range or THETA_RANGE
    zs, Zs, own, n_mom, N, srmsr, m2n, dfn = [], [], [], 0, 0.0, {}, 0.0, 0
    for k, (label, (mean, sd)) in enumerate(table.items()):
        rows = labels == label
        seen = np.flatnonzero((~np.isnan(y[rows])).any(axis=0))
        p1, cross, n1, n2, w, _ = _available_binary(y[np.ix_(rows, seen)], weights[rows])
        pi_i, pj = _check_pairs(n2, bank.item_ids[seen], "M2")
        quad = normal_quadrature(quadpts, theta_range, mean, sd)
        x, wq = quad.nodes, quad.weights
        P, blocks = _jacobian_blocks(x, bank.subset(seen), est, wq, mean, sd)
        if k > 0 or not group_delta:   # the group's mean and variance: its grid weights
            blocks = [b for b in blocks if not isinstance(b[1], str)]
            for G in ((x - mean) / sd**2, (x - mean) ** 2 / (2.0 * sd**4)) if group_delta \
                    else ():
                blocks.append((G - wq @ G, "weights"))
        xi, pi1, pi2, e2 = _xi_matrix(P, wq)
        items, mine = [], []
        for G, shared in blocks:
            D = _delta_matrix(P, wq, [(G, shared)])
            if isinstance(shared, str):
                mine.append(D)
            elif shared:
                items.append(D)
            else:
                full = np.zeros((D.shape[0], n))
                full[:, seen] = D
                items.append(full)
        Ng = float(w.sum())
        resid = np.concatenate([n1 * (p1 - pi1), n2[pi_i, pj] * (cross[pi_i, pj] - pi2)]) / Ng
        L = linalg.cholesky(xi, lower=True, check_finite=False)
        zs.append(np.sqrt(Ng) * linalg.solve_triangular(L, resid, lower=True))
        Zs.append(np.sqrt(Ng) * linalg.solve_triangular(L, np.hstack(items), lower=True))
        own.append(np.sqrt(Ng) * linalg.solve_triangular(L, np.hstack(mine), lower=True)
                   if mine else np.zeros((len(resid), 0)))
        n_mom, N = n_mom + len(resid), N + Ng
        # the null model: independent items in each group (its M2 and df summed, as mirt's)
        m2n, dfn = m2n + null_m2(p1, cross[pi_i, pj], Ng, n2[pi_i, pj]), dfn + len(pi_i)
        mod = e2.copy()
        mod[np.diag_indices(len(seen))] = pi1
        with np.errstate(invalid="ignore", divide="ignore"):
            rdiff = _corr(cross - np.outer(p1, p1)) - _corr(mod - np.outer(pi1, pi1))
        srmsr[label] = float(np.sqrt(np.mean(rdiff[pi_i, pj] ** 2)))
    z = np.concatenate(zs)
    n_own = [o.shape[1] for o in own]
    n_shared = Zs[0].shape[1]                  # the items' columns, then each group's own
    Z = np.zeros((len(z), n_shared + sum(n_own)))
    r0, c0 = 0, n_shared
    for Zg, og in zip(Zs, own):
        Z[r0:r0 + len(Zg), :n_shared] = Zg
        Z[r0:r0 + len(Zg), c0:c0 + og.shape[1]] = og
        r0, c0 = r0 + len(Zg), c0 + og.shape[1]
    vals, vecs = linalg.eigh(Z.T @ Z, check_finite=False)
    keep = vals > max(vals.max(), 0.0) * 1e-13
    z = z - Z @ (vecs[:, keep] @ ((vecs[:, keep].T @ (Z.T @ z)) / vals[keep]))
    stat = float(z @ z)
    df = n_mom - free_parameters(n, est) - 2 * (len(table) - 1)
    if df <= 0:
        raise ConfigError(f"M2 has {df} degrees of freedom ({n_mom} moments); use more items")
    rmsea = float(np.sqrt(max(stat / df - 1.0, 0.0) / (N - 1.0)))
    lo, hi = rmsea_ci(stat, df, N, ci)
    tli = float((m2n / dfn - stat / df) / (m2n / dfn - 1.0))
    cfi = float(np.clip(1.0 - (stat - df) / (m2n - dfn), 0.0, 1.0)) if m2n > dfn else 1.0
    return {"M2": stat, "df": int(df), "p": float(chi2.sf(stat, df)), "RMSEA": rmsea,
            "RMSEA_5": lo, "RMSEA_95": hi, "SRMSR": srmsr, "TLI": tli, "CFI": cfi, "n": N,
            "M2_null": m2n, "df_null": dfn}


def m2_ordinal_groups(responses, bank, groups, priors, *, statistic: str = "M2*",
                      quadpts=None, theta_range=None, ci: float = 0.9,
                      gpcm_slope: str = "exact", group_delta: bool = True,
                      pcm: bool = False) -> dict:
    """M2* or C2 (``statistic``) of a multiple-group graded / GPCM fit, as mirt's
    ``M2(mod, type)`` on a ``multipleGroup`` model: :func:`atlascat.irt.polyfitstats.
    m2_ordinal`'s moments, Xi and Delta within each group (its prior's quadrature; every item
    rated in every group), stacked as :func:`m2_groups` stacks the binary ones (the items'
    parameters shared, each non-reference group's mean and variance its own columns; the
    projection by a pivoted QR, as the one-group ordinal M2's); df = sum_g moments_g - the items'
    parameters - 2 (G - 1); RMSEA on the total N, SRMSR per group, TLI / CFI against the null
    models of the groups (M2 and df summed). ``responses``: labelled ratings on the items'
    own scales; ``gpcm_slope``: :func:`~atlascat.irt.polyfitstats.m2_ordinal`'s;
    ``group_delta=False``: the groups' means and variances left out of Delta (still counted in
    df), as mirt 1.45.1's M2 on a multipleGroup fit does (binary items too); ``pcm``: the bank
    is a partial credit fit's (mirt's "Rasch": GPCM items of one slope sigma, the reference
    group's variance sigma^2 estimated): the intercepts and sigma^2 counted, Delta the
    intercepts' columns and, with ``group_delta``, one of the slopes together (a bank that
    says it is pcm, ``bank.is_pcm``, is one without it). Returns
    :func:`m2_groups`'s dict with ``statistic``."""
    from scipy import linalg
    from scipy.stats import chi2

    from ..errors import ConfigError
    from .defaults import QUADPTS, THETA_RANGE
    from .fit import MAX_M2_ITEMS, rmsea_ci
    from .polyfitstats import (_available_codes, _free_mask, _moment_system, _pieces, _srmsr,
                               common_slope, m2_df)
    from .groupscore import group_priors, subject_groups
    from .quadrature import normal_quadrature

    table = group_priors(priors)
    values, ids, weights, _, _ = _ordinal(responses, bank, "all")
    labels = subject_groups(groups, ids, list(table))
    weights = np.ones(len(values)) if weights is None else np.asarray(weights, dtype=float)
    kind, _, n_mom, n_free = m2_df(bank, statistic, "all")
    if kind not in ("M2*", "C2"):
        raise ConfigError(f"statistic must be M2* or C2, got {statistic!r}")
    if pcm and not bank.is_pcm:   # the intercepts and the reference variance, not n slopes
        n_free = n_free - len(bank) + 1   # (m2_df counts so for a bank that says it is pcm)
    pcm = bool(pcm) or bank.is_pcm
    df = len(table) * n_mom - n_free - 2 * (len(table) - 1)
    if df <= 0 or len(bank) > MAX_M2_ITEMS:
        raise ConfigError(f"{kind} has {df} degrees of freedom on {len(bank)} items" if df <= 0
                          else f"M2 on {len(bank)} items is too large (at most {MAX_M2_ITEMS})")
    n_cat = bank.n_cat.astype(int)
    free = _free_mask(n_cat, bank.params.shape[1])
    quadpts, theta_range = quadpts or QUADPTS, theta_range or THETA_RANGE
    zs, Zs, N, srmsr, nulls, G = [], [], 0.0, {}, [], len(table)
    for k, (label, (mean, sd)) in enumerate(table.items()):
        rows = labels == label
        y, w, _ = _available_codes(values[rows], bank, weights[rows], f"M2 of group {label}")
        quad = normal_quadrature(quadpts, theta_range, mean, sd)
        x, wq = quad.nodes, quad.weights
        P, E, E2, J, Gd = _pieces(bank.models, bank.params, x, True, gpcm_slope)
        resid, xi, delta, Ng, obs_cov, model_cov = _moment_system(y, w, P, E, E2, J, Gd, wq,
                                                                  free, n_cat, kind)
        if pcm:   # the slopes' columns (each item's first) as one: the reference variance's
            delta = common_slope(delta, n_cat)
            delta = delta if group_delta else delta[:, :-1]
        # the group's mean and variance: the moments' derivatives through its grid weights
        pi_i, pj = np.triu_indices(len(bank), 1)
        uni = E if kind == "M2*" else np.column_stack(
            [P[j, :, c] for j in range(len(bank)) for c in range(1, n_cat[j])])
        kern = np.column_stack([uni, E[:, pi_i] * E[:, pj]])       # (Q, moments)
        own = np.zeros((len(resid), 2 * (G - 1)))
        if k > 0 and group_delta:
            for c, D in enumerate(((x - mean) / sd**2, (x - mean) ** 2 / (2.0 * sd**4))):
                own[:, 2 * (k - 1) + c] = (wq * (D - wq @ D)) @ kern
        L = linalg.cholesky(xi, lower=True, check_finite=False)
        zs.append(np.sqrt(Ng) * linalg.solve_triangular(L, resid, lower=True))
        Zs.append(np.sqrt(Ng) * linalg.solve_triangular(L, np.hstack([delta, own]), lower=True))
        N += Ng
        srmsr[label] = _srmsr(obs_cov, model_cov)
        nulls.append((y, w))
    z, Z = np.concatenate(zs), np.vstack(Zs)
    q, r, _ = linalg.qr(Z, mode="economic", pivoting=True, check_finite=False)
    diag = np.abs(np.diag(r))
    q = q[:, diag > 1e-10 * diag[0]]
    z = z - q @ (q.T @ z)
    stat = float(z @ z)
    rmsea = float(np.sqrt(max(stat / df - 1.0, 0.0) / (N - 1.0)))
    lo, hi = rmsea_ci(stat, df, N, ci)
    m2n, dfn = _null_groups(nulls, n_cat, kind)
    tli = cfi = float("nan")
    if np.isfinite(m2n) and m2n > stat:
        tli = float((m2n / dfn - stat / df) / (m2n / dfn - 1.0))
        cfi = float(np.clip(1.0 - (stat - df) / (m2n - dfn), 0.0, 1.0))
    return {"statistic": kind, "M2": stat, "df": int(df), "p": float(chi2.sf(stat, df)),
            "RMSEA": rmsea, "RMSEA_5": lo, "RMSEA_95": hi, "SRMSR": srmsr, "TLI": tli,
            "CFI": cfi, "n": N, "M2_null": m2n, "df_null": dfn}


def _null_groups(groups, n_cat, kind: str):
    """(M2, df) of mirt's null model of a multiple-group ordinal fit: each group's own null
    intercepts (:func:`atlascat.irt.polyfitstats.null_params`), the groups' moments stacked
    with Xi block-diagonal (Xi_g / N_g) and Delta block-diagonal, and mirt's complement of the
    stacked Delta (:func:`~atlascat.irt.polyfitstats._m2_qr_complement`: for M2*, whose null
    Delta is rank-deficient, not the sum of the groups' own); (nan, df) where a group's null
    model is undefined. ``groups``: each group's (codes, weights)."""
    from scipy import linalg

    from .defaults import THETA_RANGE
    from .polyfitstats import (_free_mask, _m2_qr_complement, _moment_system, _pieces,
                               null_params)
    from .quadrature import normal_quadrature

    n = len(n_cat)
    free = _free_mask(n_cat, int(n_cat.max()))
    free[:, 0] = False                                # slopes fixed at 0
    per = (n if kind == "M2*" else int(np.sum(n_cat - 1))) + n * (n - 1) // 2 - int(free.sum())
    df = per * len(groups)
    quad = normal_quadrature(2, THETA_RANGE)
    resid, xi, delta = [], [], []
    for y, w in groups:
        params = null_params(y, w, n_cat)
        if params is None or per <= 0:
            return float("nan"), df
        P, E, E2, J, G = _pieces("graded", params, quad.nodes, True)
        r, x, d, N, _, _ = _moment_system(y, w, P, E, E2, J, G, quad.weights, free, n_cat, kind)
        resid.append(r)
        xi.append(x / N)
        delta.append(d)
    return _m2_qr_complement(np.concatenate(resid), linalg.block_diag(*xi),
                             linalg.block_diag(*delta), 1.0), df
