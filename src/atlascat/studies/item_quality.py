"""Item quality report: flawed items made visible, and how much weight each item really gets.

Flags (thresholds are arguments):

- ``negative_a``: a < 0, the item is answered correctly more often by weaker models (a wrong
  answer key, an ambiguous question);
- ``low_a``: 0 <= a < ``a_min`` (0.2): the item barely separates abilities;
- ``high_c``: c >= ``c_max`` (0.5): near-certain success by guessing (or leaked answer);
  ``c_near_max``: ``c_warn`` (0.4) <= c < ``c_max``;
- ``low_u``: u < ``u_min`` (0.9): strong models still fail it (label noise, 4PL);
- ``extreme_b``: |b| > ``b_max`` (4): far outside the models' ability range;
- ``poor_fit``: S-X2 p-value below ``alpha`` after Benjamini-Hochberg over items (only with
  responses; an ordinal bank's ratings: mirt's itemfit S-X2 for graded / GPCM items).

The paper's point that flawed items are down-weighted by the model: an item's *information share*
is its Fisher information averaged over the N(0, 1) ability distribution, as a share of the test's,

    info_j = sum_q w_q I_j(theta_q),    share_j = info_j / sum_k info_k;

(a bank of continuous scores with a ``dispersion`` column: I_j / phi_j, the quasi-likelihood's
information, :mod:`atlascat.irt.dispersion`);

items with near-zero or negative a, or huge c, carry almost no weight in theta even though they
count fully in raw accuracy (weight 1/n each). ``weight_ratio`` = share_j / (1/n).

A multiple-group bank (``groups`` and ``priors``: each subject's group and the groups' priors
N(mu_g, sigma_g^2), as ``atlas calibrate --groups --summary`` writes them; R mirt's
``multipleGroup``): S-X2 is computed within each group under its prior
(:func:`atlascat.irt.groupfit.sx2_groups`, mirt's ``itemfit`` per group) and an item's row
reports the groups' S-X2 summed on the summed df (independent groups: a chi-square on that df),
its p, the Benjamini-Hochberg flag on that p as in the one-group report, the number of groups
that tested the item and ``worst_group`` (the group whose own p is smallest); the information
share averages I_j over the groups' priors, each weighted by its share of the subjects (the
population the responses are), not over N(0, 1).

References
----------
Baker, F. B. (2001). The Basics of Item Response Theory, ch. 3 and 6.
Benjamini, Y. and Hochberg, Y. (1995). Controlling the false discovery rate. JRSS B, 57, 289-300.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..irt.defaults import QUADPTS
from ..irt.bank import ItemBank
from ..irt.quadrature import normal_quadrature

__all__ = ["item_quality", "benjamini_hochberg", "FLAGS"]

FLAGS = ("negative_a", "low_a", "high_c", "c_near_max", "low_u", "extreme_b", "poor_fit")


def benjamini_hochberg(p) -> np.ndarray:
    """BH-adjusted p-values (NaN stays NaN)."""
    p = np.asarray(p, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = np.isfinite(p)
    m = int(ok.sum())
    if m == 0:
        return out
    pv = p[ok]
    order = np.argsort(pv)
    ranked = pv[order] * m / np.arange(1, m + 1)
    adj = np.minimum.accumulate(ranked[::-1])[::-1]
    res = np.empty(m)
    res[order] = np.minimum(adj, 1.0)
    out[ok] = res
    return out


def _check_thresholds(**values) -> None:
    """Each flag's threshold on its parameter's scale: a NaN would silently flag nothing, a c or
    u outside [0, 1] or an alpha outside (0, 1) flags everything or nothing."""
    from ..errors import ConfigError
    from ..validation import check_finite

    def name(key):
        return f"{key} (CLI --{key.replace('_', '-')})"

    for key, v in values.items():
        check_finite(v, name(key))
    for key in ("c_warn", "c_max", "u_min"):
        if not 0.0 <= values[key] <= 1.0:
            raise ConfigError(f"{name(key)} must be in [0, 1] (an asymptote is a probability), "
                              f"got {values[key]:g}")
    for key in ("a_min", "b_max"):
        if values[key] < 0:
            raise ConfigError(f"{name(key)} must be >= 0, got {values[key]:g}")
    if not 0.0 < values["alpha"] < 1.0:
        raise ConfigError(f"{name('alpha')} must be in (0, 1) (a significance level such as "
                          f"0.01), got {values['alpha']:g}")
    if values["c_warn"] > values["c_max"]:
        raise ConfigError(f"{name('c_warn')} {values['c_warn']:g} is above {name('c_max')} "
                          f"{values['c_max']:g}: c_near_max flags c in [c_warn, c_max); give "
                          "c_warn <= c_max")


def _binary(responses) -> bool:
    """True when every observed answer of ``responses`` (anything a ResponseMatrix is read
    from) is 0 or 1."""
    from ..responses import as_response_matrix

    y = np.asarray(as_response_matrix(responses).values, dtype=float)
    y = y[np.isfinite(y)]
    return bool(np.all((y == 0) | (y == 1)))


def item_quality(bank: ItemBank, responses=None, *, a_min: float = 0.2, c_warn: float = 0.4,
                 c_max: float = 0.5, u_min: float = 0.9, b_max: float = 4.0,
                 alpha: float = 0.01, estimated=None, quadpts: int = QUADPTS,
                 groups=None, priors=None, pcm: bool = False) -> pd.DataFrame:
    """One row per item: parameters, information share, S-X2 (with responses) and flags.

    Columns: item_id, a, b, c, u, info, info_share, weight_ratio, [S_X2, df_S_X2, p_S_X2,
    p_S_X2_bh,] issues (comma-separated flags, "" when clean), n_issues. Sorted as the bank.
    S-X2 needs subjects who answered every item (see :func:`atlascat.irt.fit.sx2`).
    ``groups`` (each subject's group: a mapping subject id -> label) and ``priors`` (the
    groups' priors, anything :func:`atlascat.irt.groupscore.group_priors` reads): a
    multiple-group bank's report (the module's notes; needs labelled ``responses``): S_X2,
    df_S_X2, p_S_X2 the groups' combined (:func:`atlascat.irt.groupfit.sx2_combined`), then
    n_groups_S_X2 and worst_group. An ordinal bank (graded / gpcm): ``responses`` its ratings
    (a DataFrame indexed by subject id), S-X2 as mirt's itemfit, with or without groups;
    ``pcm``: with groups, the bank is a partial credit fit's (its df as mirt's "Rasch":
    :func:`~atlascat.irt.groupfit.sx2_groups`).
    """
    _check_thresholds(a_min=a_min, c_warn=c_warn, c_max=c_max, u_min=u_min, b_max=b_max,
                      alpha=alpha)
    from ..irt.polybank import PolyBank

    grouping = _grouping(responses, bank, groups, priors, pcm)
    if isinstance(bank, PolyBank):
        return _ordinal_quality(bank, responses, a_min=a_min, b_max=b_max, quadpts=quadpts,
                                grouping=grouping, alpha=alpha, estimated=estimated)
    a, b, c, u = bank.params
    info = _mean_information(bank, quadpts, grouping)
    from ..irt.dispersion import bank_dispersion

    phi = bank_dispersion(bank)   # continuous scores: the quasi-likelihood's a^2 P Q / phi_j,
    if phi is not None:           # as atlas info --theta and the adaptive test weigh items
        info = info / phi
    df = pd.DataFrame({"item_id": bank.item_ids.astype(str), "a": a, "b": b, "c": c, "u": u,
                       **_info_columns(info)})
    flags = {
        "negative_a": a < 0,
        "low_a": (a >= 0) & (a < a_min),
        "high_c": c >= c_max,
        "c_near_max": (c >= c_warn) & (c < c_max),
        "low_u": u < u_min,
        "extreme_b": np.abs(b) > b_max,
    }
    if responses is not None and not _binary(responses):
        from ..errors import warn_user

        warn_user("S-X2 tests right/wrong (0/1) answers and these are continuous scores or "
                  "ratings: the item fit (S-X2) is left out, the other flags stand")
        responses = None
    if grouping is not None and responses is None:
        grouping = None                                   # continuous scores: no S-X2
    if grouping is not None:
        _group_fit(df, flags, responses, bank, grouping, estimated, alpha)
    elif responses is not None:
        from ..irt.fit import sx2

        _add_sx2(df, flags, sx2(responses, bank, estimated=estimated), alpha)
    return _with_issues(df, flags)


def _add_sx2(df, flags: dict, fit, alpha: float) -> None:
    """``fit``'s S_X2, df_S_X2, p_S_X2 (and any n_groups_S_X2, worst_group) into ``df``, with
    p_S_X2_bh (Benjamini-Hochberg over the items) and the poor_fit flag (p_S_X2_bh < alpha)."""
    for col in ("S_X2", "df_S_X2", "p_S_X2"):
        df[col] = fit[col].to_numpy()
    df["p_S_X2_bh"] = benjamini_hochberg(df["p_S_X2"])
    for col in ("n_groups_S_X2", "worst_group"):
        if col in fit:
            df[col] = fit[col].to_numpy()
    flags["poor_fit"] = np.nan_to_num(df["p_S_X2_bh"].to_numpy(), nan=1.0) < alpha


def _grouping(responses, bank, groups, priors, pcm: bool = False):
    """None without ``groups`` and ``priors``; else (the priors {label: (mean, sd)}, the
    groups, each group's share of the subjects of ``responses``, weighted as they are, ``pcm``).
    One-line errors where one comes without the other or without responses."""
    from ..errors import ConfigError

    if groups is None and priors is None:
        return None
    if groups is None or priors is None:
        raise ConfigError("groups and priors go together: each subject's group and the groups' "
                          "priors (each group's latent mean and sd)")
    if responses is None:
        raise ConfigError("groups need the responses: each group's item fit and its share of "
                          "the subjects come from them")
    from ..irt.groupfit import aligned_subjects
    from ..irt.groupscore import group_priors, subject_groups

    table = group_priors(priors)
    ids, w = aligned_subjects(responses, bank)
    labels = subject_groups(groups, ids, list(table))
    w = np.ones(len(labels)) if w is None else np.asarray(w, dtype=float)
    share = {g: float(w[labels == g].sum() / w.sum()) for g in table}
    return table, groups, share, bool(pcm)


def _mean_information(bank, quadpts: int, grouping) -> np.ndarray:
    """Each item's information averaged over N(0, 1), or over the groups' priors weighted by
    their shares of the subjects (``grouping``, :func:`_grouping`'s)."""
    mix = [(1.0, 0.0, 1.0)] if grouping is None else [
        (grouping[2][g], m, s) for g, (m, s) in grouping[0].items()]
    info = 0.0
    for share, mean, sd in mix:
        quad = normal_quadrature(quadpts, (-6.0, 6.0), mean, sd)
        info = info + share * (quad.weights @ np.asarray(bank.information(quad.nodes),
                                                         dtype=float))
    return info


def _group_fit(df, flags: dict, responses, bank, grouping, estimated, alpha: float) -> None:
    """The S-X2 columns and the poor_fit flag of a multiple-group bank (into ``df`` and
    ``flags``): within each group under its prior, combined per item."""
    from ..irt.groupfit import sx2_combined, sx2_groups

    table, groups, _, pcm = grouping
    fit = sx2_combined(sx2_groups(responses, bank, groups, table, estimated=estimated, pcm=pcm),
                       df["item_id"])
    _add_sx2(df, flags, fit, alpha)


def _info_columns(info: np.ndarray) -> dict:
    """info, info_share (of the bank's total) and weight_ratio (share over 1/n)."""
    total = info.sum()
    share = info / total if total > 0 else np.zeros_like(info)
    return {"info": info, "info_share": share, "weight_ratio": share * len(info)}


def _with_issues(df: pd.DataFrame, flags: dict) -> pd.DataFrame:
    """``df`` with ``issues`` (the names of the true flags, comma-separated) and ``n_issues``."""
    names = np.array(list(flags))
    mat = np.column_stack([flags[k] for k in names])
    df["issues"] = [",".join(names[row]) for row in mat]
    df["n_issues"] = mat.sum(axis=1)
    return df


def _ordinal_quality(bank, responses, *, a_min: float, b_max: float, quadpts: int,
                     grouping=None, alpha: float = 0.01, estimated=None) -> pd.DataFrame:
    """:func:`item_quality` of a graded / GPCM / mixed bank: item_id, model, n_categories, a,
    location (mean threshold), info (each item's Fisher information over its categories,
    averaged over N(0, 1)), info_share, weight_ratio, [S_X2, df_S_X2, p_S_X2, p_S_X2_bh,]
    issues (negative_a, low_a, extreme_b on the location, poor_fit), n_issues. Asymptote flags
    do not apply. With ``responses`` (ratings on the items' own scales): mirt's itemfit S-X2
    (:func:`atlascat.irt.polyfitstats.sx2_ordinal`; ``estimated`` all or none), flagged as a
    binary bank's; a multiple-group bank (``grouping``): the groups' S-X2 combined."""
    df = _ordinal_columns(bank, quadpts, grouping)
    flags = _ordinal_flags(df, a_min, b_max)
    if grouping is not None:
        _group_fit(df, flags, responses, bank, grouping, estimated, alpha)
    elif responses is not None:
        from ..irt.polyfitstats import sx2_ordinal

        _add_sx2(df, flags, sx2_ordinal(responses, bank, estimated=estimated), alpha)
    return _with_issues(df, flags)


def _ordinal_columns(bank, quadpts: int, grouping) -> pd.DataFrame:
    """An ordinal bank's item_id, model, n_categories, a, location and information columns."""
    info = _mean_information(bank, quadpts, grouping)
    return pd.DataFrame({"item_id": bank.item_ids.astype(str),
                         "model": bank.kinds.astype(str), "n_categories": bank.n_cat,
                         "a": np.asarray(bank.a, dtype=float), "location": bank.locations(),
                         **_info_columns(info)})


def _ordinal_flags(df: pd.DataFrame, a_min: float, b_max: float) -> dict:
    a, loc = df["a"].to_numpy(), df["location"].to_numpy()
    return {"negative_a": a < 0, "low_a": (a >= 0) & (a < a_min),
            "extreme_b": np.abs(loc) > b_max}
