"""mirt 1.45.1's ``collapseCells``: the cell collapsing of its S-X2 (``itemfit``), for one
item's table of observed and expected counts, score groups (rows) by categories (columns).

The rule, in mirt's order (Orlando and Thissen, 2000; Kang and Chen, 2008, for categories):

1. score groups where a category cannot occur (E NaN) are merged into the nearest group where
   all can: the first half of them (low scores) into the group above, the rest below;
2. score groups with no subject are dropped;
3. left to right, a group with exactly one subject is merged into the next one; a last group
   with one subject into the previous one;
4. (more than two categories) within a group with an expected count below ``mincell`` (as
   counted before step 3), the smallest category is merged into its smaller neighbour until
   all reach mincell; then a last category whose expected total is below mincell times
   ceil(groups / 10) is merged into the one before;
5. a category with a nonzero expected count in fewer than 5% of the groups is merged into
   the one before;
6. while some nonzero expected count is below ``mincell``, the first group holding one is
   merged into a neighbour: the first group into the second, the last into the one before,
   otherwise the neighbour with fewer subjects (ties: the lower score).

S-X2 = sum (O - E)^2 / E over the nonzero expected cells; df = cells - groups - parameters.
For two categories (binary items) steps 1 and 4 never apply.

References
----------
Orlando, M. and Thissen, D. (2000). Likelihood-based item-fit indices for dichotomous item
response theory models. Applied Psychological Measurement, 24, 50-64.
Kang, T. and Chen, T. T. (2008). Performance of the generalized S-X2 item fit index for
polytomous IRT models. Journal of Educational Measurement, 45, 391-406.
Chalmers, R. P. (2012). mirt: A multidimensional item response theory package for the R
environment. Journal of Statistical Software, 48(6).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["collapse_cells", "table_sx2", "sx2_frame"]


def collapse_cells(O, E, mincell: float = 1.0):
    """mirt 1.45.1's ``collapseCells`` for one item's (score groups x categories) table; E is
    NaN where a category cannot occur. Returns (O, E) with E NaN in the cells that carry no
    expectation, or None where fewer than two score groups or categories remain (mirt: NA)."""
    O = np.array(O, dtype=float)
    E = np.array(E, dtype=float)
    drop = np.flatnonzero(np.isnan(E).any(axis=1))
    E = np.nan_to_num(E)
    if drop.size:
        h = drop.size // 2                                       # R: drop[length / 2]
        if h == 0:
            return None
        up = np.arange(drop[0], drop[h - 1] + 1)
        low = np.arange(drop[h], drop[-1] + 1)
        for rows, into in ((up, up.max() + 1), (low, low.min() - 1)):
            if not 0 <= into < len(E):
                return None
            E[into] = E[np.append(rows, into)].sum(axis=0)
            O[into] = O[np.append(rows, into)].sum(axis=0)
        keep = np.setdiff1d(np.arange(len(E)), np.concatenate([up, low]))
        E, O = E[keep], O[keep]
    keep = O.sum(axis=1) != 0
    O, E = O[keep], E[keep]
    if len(O) < 2:
        return None
    small = E < mincell                                          # before the merges, as mirt
    O, E = _merge_single_subjects(O, E)
    if len(O) < 2:
        return None
    ncol = E.shape[1]
    if ncol > 2:
        for j in range(len(E)):
            if not small[j].any():
                continue
            e, o = list(E[j]), list(O[j])
            while len(e) > 2:
                mn = min(e)
                whc = max(i for i, v in enumerate(e) if v == mn)
                if whc == 0:
                    pick = 1
                elif whc == len(e) - 1:
                    pick = whc - 1
                else:
                    pick = whc - 1 if e[whc - 1] <= e[whc + 1] else whc + 1
                e[pick] += e[whc]
                o[pick] += o[whc]
                del e[whc], o[whc]
                if all(v >= mincell for v in e):
                    break
            E[j] = e + [0.0] * (ncol - len(e))
            O[j] = o + [0.0] * (ncol - len(o))
        while E.shape[1] > 2:
            if not E[:, -1].sum() < mincell * np.ceil(len(E) * 0.1):
                break
            E[:, -2] += E[:, -1]
            O[:, -2] += O[:, -1]
            E, O = E[:, :-1], O[:, :-1]
    dropcol = np.zeros(E.shape[1], dtype=bool)
    for j in range(E.shape[1] - 1, 0, -1):
        if np.sum(E[:, j] > 0) / len(E) < 0.05:
            dropcol[j] = True
            E[:, j - 1] += E[:, j]
            O[:, j - 1] += O[:, j]
    E, O = E[:, ~dropcol], O[:, ~dropcol]
    if E.shape[1] < 2:
        return None
    merged = _merge_low_groups(O, E, mincell)
    if merged is None:
        return None
    O, E = merged
    return O, np.where(E == 0, np.nan, E)


def _merge_single_subjects(O, E):
    """Step 3: left to right, a group with one subject joins the next; a last group with one
    subject joins the one before. A group that received one has more than one subject (the
    empty ones are gone), so only the groups of one subject are visited."""
    drop = []
    for j in np.flatnonzero(O[:-1].sum(axis=1) == 1):
        if drop and drop[-1] == j - 1:        # it received group j - 1
            continue
        O[j + 1] += O[j]
        E[j + 1] += E[j]
        drop.append(j)
    if drop:
        keep = np.setdiff1d(np.arange(len(O)), drop)
        O, E = O[keep], E[keep]
    if len(O) >= 2 and O[-1].sum() == 1:
        O[-2] += O[-1]
        E[-2] += E[-1]
        O, E = O[:-1], E[:-1]
    return O, E


def _merge_low_groups(O, E, mincell: float):
    """Step 6: while a group holds a nonzero expected count below mincell, the first such group
    joins a neighbour. A merge changes only the groups from the one before it on, so the search
    resumes there; the table is walked as column lists. Returns arrays, or None where one group
    is left."""
    K = E.shape[1]
    Oc, Ec = O.T.tolist(), E.T.tolist()
    n_obs = O.sum(axis=1).tolist()
    is_low = ((E < mincell) & (E != 0)).any(axis=1).tolist()
    j = 0
    while True:
        try:
            j = is_low.index(True, j)
        except ValueError:
            break
        n = len(is_low)
        if n < 2:
            return None
        if j == 0:
            pick = 1
        elif j == n - 1:
            pick = j - 1
        else:
            pick = j - 1 if n_obs[j - 1] <= n_obs[j + 1] else j + 1
        for c in range(K):
            Ec[c][pick] += Ec[c][j]
            Oc[c][pick] += Oc[c][j]
        n_obs[pick] = sum(Oc[c][pick] for c in range(K))
        is_low[pick] = any(Ec[c][pick] < mincell and Ec[c][pick] != 0 for c in range(K))
        for lst in (*Ec, *Oc, n_obs, is_low):
            del lst[j]
        j = max(j - 1, 0)
    if len(is_low) < 2:
        return None
    return np.array(Oc, dtype=float).T, np.array(Ec, dtype=float).T


def table_sx2(O, E, n_par: int, mincell: float = 1.0) -> tuple[float, float, int]:
    """(S-X2, df, groups) of one item's table after :func:`collapse_cells`: S-X2 = sum (O - E)^2
    / E over the nonzero expected cells, df = max(cells - groups - n_par, 0) (mirt's count of
    the item's free parameters in ``n_par``); (NaN, NaN, 0) where no table remains (mirt: NA)."""
    res = collapse_cells(O, E, mincell)
    if res is None:
        return np.nan, np.nan, 0
    o, e = res
    ok = ~np.isnan(e)
    x2 = float(np.sum((o[ok] - e[ok]) ** 2 / e[ok]))
    return x2, float(max(int(ok.sum()) - len(e) - n_par, 0)), len(e)


def sx2_frame(item_ids, x2, df, n: float, **extra) -> pd.DataFrame:
    """mirt's ``itemfit`` columns item_id, S_X2, df_S_X2, RMSEA_S_X2, p_S_X2 (then ``extra``):
    S-X2, RMSEA and p NaN where df = 0; RMSEA_S_X2 = sqrt(max(S-X2 / df - 1, 0) / (n - 1)),
    n the number of subjects."""
    from scipy.stats import chi2  # lazy: scipy.stats costs ~1 s at import

    df = np.asarray(df, dtype=float)
    x2 = np.where(df == 0, np.nan, np.asarray(x2, dtype=float))
    with np.errstate(invalid="ignore"):
        rmsea = np.where(df > 0, np.sqrt(np.maximum(x2 / df - 1.0, 0.0) / (n - 1.0)), np.nan)
        p = np.where(df > 0, chi2.sf(x2, np.where(df > 0, df, 1)), np.nan)
    return pd.DataFrame({"item_id": np.asarray(item_ids).astype(str), "S_X2": x2,
                         "df_S_X2": df, "RMSEA_S_X2": rmsea, "p_S_X2": p, **extra})
