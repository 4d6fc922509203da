"""Psychometric item filtering and a score-stratified train/test split (ATLAS paper, section 3.2).

Filtering, in this order:

1. items with response SD < ``min_sd`` (0.01) or mean > ``max_mean`` (0.95) are dropped
   (no variance / ceiling items carry almost no information);
2. items whose point-biserial correlation with the subjects' total score is below
   ``min_point_biserial`` (0.1) are dropped (they do not order subjects like the rest), when
   N >= ``min_subjects_point_biserial`` (100): the sampling SD of a correlation is about
   1 / sqrt(N), 0.1 at N = 100, so below that the rule drops good items by noise (on a simulated
   22-subject board of good 3PL items it dropped 647 of 2854);
3. subjects below the ``subject_percentile``-th percentile (0.1, i.e. the bottom 0.1%) of total
   score are dropped (broken or degenerate models), but only when the bottom ``p``% holds at
   least one whole subject: N >= ``min_subjects`` (default ceil(100 / p), i.e. 1000 subjects for
   the paper's 0.1). Below that the interpolated percentile lies between the lowest and the
   second-lowest subject, so the rule would always drop the weakest subject, whoever it is (one
   of a 22-model leaderboard), which is information a small sample needs, not a broken model.
   The percentile is weighted by pattern frequencies (equal to the expanded rows' percentile).

With missing data the total score is the proportion correct over administered items, and every
statistic of an item uses only the subjects who saw it. Pattern frequencies (``weights``) count.

Point-biserial r_j = corr(y_j, t) over subjects with y_j observed (Pearson correlation of the 0/1
item score with the total score; Lord and Novick, 1968, ch. 15).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .errors import ConfigError, ResponseDataError
from .responses import ResponseMatrix
from .validation import N_BINS, TEST_SIZE, as_generator

__all__ = ["FilterReport", "filter_items", "point_biserial", "stratified_split",
           "weighted_percentile"]


@dataclass
class FilterReport:
    """What :func:`filter_items` dropped and why."""

    thresholds: dict
    n_items_before: int
    n_subjects_before: int
    dropped_items: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(
        columns=["item_id", "reason", "value"]))
    dropped_subjects: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(
        columns=["subject_id", "reason", "value"]))

    @property
    def n_items_after(self) -> int:
        return self.n_items_before - len(self.dropped_items)

    @property
    def n_subjects_after(self) -> int:
        return self.n_subjects_before - len(self.dropped_subjects)

    def to_dict(self) -> dict:
        return {
            "thresholds": self.thresholds,
            "items_before": self.n_items_before,
            "items_after": self.n_items_after,
            "subjects_before": self.n_subjects_before,
            "subjects_after": self.n_subjects_after,
            "dropped_items": self.dropped_items.to_dict(orient="records"),
            "dropped_subjects": self.dropped_subjects.to_dict(orient="records"),
            "dropped_items_by_reason": self.dropped_items["reason"].value_counts().to_dict(),
        }


def _weighted_item_stats(y: np.ndarray, w: np.ndarray):
    obs = ~np.isnan(y)
    wo = obs * w[:, None]
    n = wo.sum(axis=0)
    y0 = np.where(obs, y, 0.0)
    mean = (y0 * w[:, None]).sum(axis=0) / n
    var = ((np.where(obs, y - mean, 0.0) ** 2) * w[:, None]).sum(axis=0) / n
    return mean, np.sqrt(var)


def point_biserial(responses: ResponseMatrix, total=None) -> np.ndarray:
    """Correlation of every item with the total score (proportion correct), observed cells only.

    Vectorized over items: weighted sums of y, t, y*t, y^2, t^2 restricted to each item's
    observed subjects. Items with zero variance (or a constant total among their subjects) get NaN.
    """
    y = responses.values
    w = responses.subject_weights()
    t = responses.accuracy if total is None else np.asarray(total, float)
    obs = ~np.isnan(y)
    wo = obs * w[:, None]
    y0 = np.where(obs, y, 0.0)
    n = wo.sum(0)
    sy = (y0 * w[:, None]).sum(0)
    st = wo.T @ t
    syt = (y0 * w[:, None]).T @ t
    syy = (y0**2 * w[:, None]).sum(0)
    stt = wo.T @ (t**2)
    cov = syt / n - (sy / n) * (st / n)
    vy = syy / n - (sy / n) ** 2
    vt = stt / n - (st / n) ** 2
    with np.errstate(invalid="ignore", divide="ignore"):
        r = cov / np.sqrt(vy * vt)
    r[(vy <= 1e-15) | (vt <= 1e-15)] = np.nan
    return r


def weighted_percentile(x: np.ndarray, q: float, weights=None) -> float:
    """``np.percentile(x, q)`` (linear interpolation) of the rows expanded by integer ``weights``.

    Position h = q/100 (N - 1) among the N = sum(weights) sorted expanded values; the k-th
    expanded order statistic is the first value whose cumulative weight exceeds k."""
    x = np.asarray(x, float)
    if weights is None:
        return float(np.nanpercentile(x, q))
    w = np.asarray(weights, float)
    ok = ~np.isnan(x) & (w > 0)
    x, w = x[ok], w[ok]
    order = np.argsort(x, kind="stable")
    x, cw = x[order], np.cumsum(w[order])
    h = q / 100.0 * (cw[-1] - 1.0)
    lo, frac = np.floor(h), h - np.floor(h)

    def stat(k):
        return x[min(int(np.searchsorted(cw, k, side="right")), x.size - 1)]

    return float(stat(lo) + frac * (stat(lo + 1) - stat(lo)))


def filter_items(responses: ResponseMatrix, *, min_sd: float = 0.01, max_mean: float = 0.95,
                 min_point_biserial: float = 0.1, subject_percentile: float = 0.1,
                 min_subjects: float | None = None, min_subjects_point_biserial: float = 100):
    """Apply the paper's psychometric filter; returns ``(filtered ResponseMatrix, FilterReport)``.

    Set a threshold to ``None`` to skip that rule. ``min_subjects``: the subject-percentile rule
    applies only to samples of at least this many subjects (sum of pattern frequencies); default
    ceil(100 / subject_percentile), the smallest N whose bottom percentile holds a whole subject
    (1000 for 0.1). ``min_subjects_point_biserial``: the same for the point-biserial rule.
    ``report.thresholds["subject_rule_applied"]`` and ``["point_biserial_rule_applied"]`` say
    whether they ran.
    """
    from .responses import as_response_matrix

    responses = as_response_matrix(responses)  # DataFrames keep their labels
    if subject_percentile is not None and not 0 <= subject_percentile < 100:
        raise ConfigError(f"subject_percentile must be in [0, 100), got {subject_percentile}")
    if min_subjects is None and subject_percentile:
        min_subjects = float(np.ceil(100.0 / subject_percentile - 1e-9))
    n_total = float(responses.subject_weights().sum())
    apply_subjects = bool(subject_percentile) and n_total >= (min_subjects or 0)
    apply_pb = min_point_biserial is not None and n_total >= (min_subjects_point_biserial or 0)
    report = FilterReport(
        thresholds={"min_sd": min_sd, "max_mean": max_mean,
                    "min_point_biserial": min_point_biserial,
                    "subject_percentile": subject_percentile,
                    "subject_percentile_min_subjects": min_subjects,
                    "subject_rule_applied": apply_subjects,
                    "min_subjects_point_biserial": min_subjects_point_biserial,
                    "point_biserial_rule_applied": apply_pb},
        n_items_before=responses.n_items, n_subjects_before=responses.n_subjects)
    ids = responses.item_ids
    mean, sd = _weighted_item_stats(responses.values, responses.subject_weights())
    rows = []
    drop = np.zeros(responses.n_items, bool)
    if min_sd is not None:
        low_sd = sd < min_sd
        rows += [(ids[j], "sd_below_min", sd[j]) for j in np.flatnonzero(low_sd)]
        drop |= low_sd
    if max_mean is not None:
        ceil = (mean > max_mean) & ~drop
        rows += [(ids[j], "mean_above_max", mean[j]) for j in np.flatnonzero(ceil)]
        drop |= ceil
    kept = responses.subset(items=~drop) if drop.any() else responses
    if apply_pb and kept.n_items > 1:
        r = point_biserial(kept)
        low = ~(r >= min_point_biserial)
        kid = kept.item_ids
        rows += [(kid[j], "point_biserial_below_min", r[j]) for j in np.flatnonzero(low)]
        if low.all():
            raise ResponseDataError(
                "every item fails the point-biserial filter; check the data or lower "
                "min_point_biserial (or skip filtering)"
            )
        kept = kept.subset(items=~low)
    report.dropped_items = pd.DataFrame(rows, columns=["item_id", "reason", "value"])
    if kept.n_items == 0:
        raise ResponseDataError("every item was dropped by the filter; relax the thresholds")
    if apply_subjects:
        acc = kept.accuracy
        cut = weighted_percentile(acc, subject_percentile, kept.weights)
        low = acc < cut
        report.dropped_subjects = pd.DataFrame(
            {"subject_id": kept.subject_ids[low].astype(str),
             "reason": f"total_below_p{subject_percentile:g}", "value": acc[low]})
        if low.any():
            kept = kept.subset(subjects=~low)
    return kept, report


def _bin_quotas(sizes, test_size: float, rng: np.random.Generator) -> list[int]:
    """Test subjects per score bin: each bin's share rounded, then, where the total strays from
    ``test_size * n`` by more than one subject and 1% of n (rounding slack, so large matrices keep
    the splits their studies published), brought back within one (at least one subject when a
    bin has two or more) by adding to the bins rounded down most (or taking from those rounded
    up most; ties at random): on a small matrix 10 bins of 4 give 4 test subjects, not 10."""
    sizes = np.asarray(sizes, int)
    want = test_size * sizes.sum()
    k = np.rint(test_size * sizes).astype(int)
    slack = int(0.01 * sizes.sum())
    need_one = want >= 1 or bool((sizes >= 2).any())
    if abs(k.sum() - want) <= max(1, slack) and (k.sum() > 0 or not need_one):
        return k.tolist()
    lo = max(int(np.floor(want)), 1 if (sizes >= 2).any() else 0)
    hi = max(int(np.ceil(want)), lo)
    if lo <= k.sum() <= hi:
        return k.tolist()   # the usual case: each bin's rounded share (no draw)
    rest = test_size * sizes - k + rng.random(sizes.size) * 1e-9   # random ties
    if k.sum() < lo:   # bins that keep a train subject first, then single-subject bins
        order = np.lexsort((-rest, k >= sizes - 1))
        for b in [b for b in order if k[b] < sizes[b]][: lo - k.sum()]:
            k[b] += 1
    else:
        order = [b for b in np.argsort(rest, kind="stable") if k[b] > 0]
        for b in order[: k.sum() - hi]:
            k[b] -= 1
    return k.tolist()


def stratified_split(responses: ResponseMatrix, *, test_size: float = TEST_SIZE,
                     n_bins: int = N_BINS,
                     rng: np.random.Generator | None = None):
    """Split subjects into train/test, stratified by total score (proportion correct).

    Subjects are put into ``n_bins`` quantile bins of total score; within each bin a share
    ``test_size`` (rounded) goes to test, the total kept within one of ``test_size`` x n (at
    least one subject): 40 subjects at 0.1 give 4 test subjects, not one per bin.
    Returns ``(train, test)`` ResponseMatrix objects. ``rng``: a numpy Generator, a seed (the
    same seed, the same split) or None (fresh entropy).
    """
    from .responses import as_response_matrix

    responses = as_response_matrix(responses)  # DataFrames keep their labels
    from .validation import check_finite

    if not 0 < check_finite(test_size, "test_size") < 1:
        raise ConfigError(f"test_size must be in (0, 1), got {test_size}")
    if responses.n_subjects < 2:
        raise ResponseDataError("need at least two subjects to split")
    rng = as_generator(rng)
    acc = responses.accuracy
    edges = np.unique(np.quantile(acc, np.linspace(0, 1, n_bins + 1)))
    bins = np.clip(np.searchsorted(edges, acc, side="right") - 1, 0, max(len(edges) - 2, 0))
    test = np.zeros(responses.n_subjects, bool)
    groups = [np.flatnonzero(bins == b) for b in np.unique(bins)]
    for members, k in zip(groups, _bin_quotas([g.size for g in groups], test_size, rng)):
        test[rng.choice(members, size=k, replace=False)] = True
    if test.all() or not test.any():
        where = ("all", "test", "none in the train set; lower it") if test.all() else \
            ("none of the", "test", "raise it")
        raise ConfigError(f"test_size {test_size} puts {where[0]} {test.size} subjects in the "
                          f"{where[1]} set: {where[2]}")
    return responses.subset(subjects=~test), responses.subset(subjects=test)
