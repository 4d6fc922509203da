"""Test security and diagnostics of a set of adaptive tests: exposure, overlap, positions, time.

Input everywhere is the item matrix of a simulation, (n_examinees, width) bank positions of the
administered items in order, padded with -1 (``CATResult.item_matrix``), or a list of item
position sequences.

Exposure rate of item j: r_j = m_j / N, the share of the N examinees who were given it.

Test overlap rate (Chen, Ankenmann and Spray, 2003; variable length: Chen, 2005): the expected
number of items two randomly drawn examinees share, divided by the expected test length,

    T = sum_{a<b} |A_a n A_b| / sum_{a<b} (L_a + L_b) / 2.

Counting every item over pairs gives sum_{a<b} |A_a n A_b| = sum_j m_j (m_j - 1) / 2 and
sum_{a<b} (L_a + L_b)/2 = (N - 1) N Lbar / 2, hence the exposure formula

    T = (N sum_j r_j^2 - Lbar) / ((N - 1) Lbar),             sum_j r_j = Lbar,

which, with the bank size n and the population variance S_r^2 of the rates, is the fixed-length
result of Chen et al. (2003), T = N/(N-1) (n S_r^2 / L + L / n) - 1/(N-1) (-> n S_r^2/L + L/n for
large N). :func:`overlap_pairwise` counts the shared items of the pairs of every two test lengths
(blocks of the incidence product X X^T); :func:`overlap_from_exposure` and
:func:`overlap_fixed_length` use the rates only. They agree to rounding.

References
----------
Chen, S.-Y., Ankenmann, R. D. and Spray, J. A. (2003). The relationship between item exposure and
test overlap in computerized adaptive testing. Journal of Educational Measurement, 40(2), 129-145.
Chen, S.-Y. (2005). Test overlap rate in variable-length computerized adaptive testing
(and Chen and Lei, 2005, Applied Psychological Measurement, 29(3), 204-217).
Way, W. D. (1998). Protecting the integrity of computerized testing item pools. Educational
Measurement: Issues and Practice, 17(4), 17-27.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # pandas loads where a frame is built
    import pandas as pd

__all__ = [
    "as_item_matrix",
    "exposure_rates",
    "test_lengths",
    "overlap_from_exposure",
    "overlap_fixed_length",
    "overlap_pairwise",
    "overlap_report",
    "exposure_summary",
    "position_analysis",
    "position_columns",
    "selection_time",
]


def as_item_matrix(tests) -> np.ndarray:
    """(N, width) int matrix padded with -1 from a matrix or a list of position sequences."""
    if isinstance(tests, np.ndarray) and tests.ndim == 2:
        return tests.astype(np.intp, copy=False)
    seqs = [np.asarray(t, dtype=np.intp).reshape(-1) for t in tests]
    width = max((s.size for s in seqs), default=0)
    out = np.full((len(seqs), max(width, 1)), -1, dtype=np.intp)
    for i, s in enumerate(seqs):
        out[i, :s.size] = s
    return out


def test_lengths(tests) -> np.ndarray:
    """Items given to every examinee."""
    return (as_item_matrix(tests) >= 0).sum(axis=1)


def exposure_rates(tests, n_items: int) -> np.ndarray:
    """r_j = (examinees given item j) / N for every bank position j."""
    m = as_item_matrix(tests)
    counts = np.bincount(m[m >= 0], minlength=n_items)
    return counts / max(m.shape[0], 1)


def overlap_from_exposure(rates, lengths) -> float:
    """T = (N sum_j r_j^2 - Lbar) / ((N - 1) Lbar) from exposure rates and test lengths."""
    rates = np.asarray(rates, dtype=float)
    lengths = np.asarray(lengths, dtype=float)
    n = lengths.size
    lbar = lengths.mean() if n else 0.0
    if n < 2 or lbar == 0:
        return float("nan")
    return float((n * np.sum(rates ** 2) - lbar) / ((n - 1) * lbar))


def overlap_fixed_length(rates, test_length: float, n_examinees: int) -> float:
    """Chen, Ankenmann and Spray (2003), exact in N: N/(N-1) (n S_r^2 / L + L / n) - 1/(N-1).

    ``rates`` over the whole bank (n items), S_r^2 their population variance, L the common test
    length.
    """
    rates = np.asarray(rates, dtype=float)
    n, big_n, length = rates.size, int(n_examinees), float(test_length)
    if big_n < 2:
        return float("nan")
    s2 = rates.var()
    return float(big_n / (big_n - 1) * (n * s2 / length + length / n) - 1.0 / (big_n - 1))


def overlap_pairwise(tests, n_items: int) -> dict:
    """Overlap by counting the items every pair of examinees shares.

    Returns ``{"overlap": T, "mean_shared": mean over pairs of |A_a n A_b|, "mean_pair_length":
    mean over pairs of (L_a + L_b) / 2, "mean_pair_ratio": mean over pairs of
    |A_a n A_b| / ((L_a + L_b) / 2)}``; T = mean_shared / mean_pair_length. The pairs are
    counted by their two test lengths: with C[g, j] the examinees of length l_g given item j,
    the pairs of lengths (l_g, l_h), g < h, share sum_j C[g, j] C[h, j] items and those within
    length l_g share sum_j C[g, j] (C[g, j] - 1) / 2, each pair's ratio dividing by its own
    (l_g + l_h) / 2 (the blocks of the incidence product X X^T summed by length group, without
    forming the N x N product).
    """
    m = as_item_matrix(tests)
    big_n = m.shape[0]
    if big_n < 2:
        nan = float("nan")
        return {"overlap": nan, "mean_shared": nan, "mean_pair_length": nan, "mean_pair_ratio": nan}
    rows, cols = np.nonzero(m >= 0)
    keys = np.sort(rows * n_items + m[rows, cols])   # each item once (np.unique, without the
    keys = keys[np.r_[True, keys[1:] != keys[:-1]]]   # numpy.ma module it loads)
    row, item = np.divmod(keys, n_items)
    lengths = np.bincount(row, minlength=big_n)
    lens, group = np.unique(lengths, return_inverse=True)
    counts = np.bincount(group[row] * n_items + item,
                         minlength=lens.size * n_items).reshape(lens.size, n_items).astype(float)
    given = counts.sum(axis=0)
    shared_total = float((given * (given - 1.0) / 2.0).sum())
    pair_len_total = (big_n - 1) * float(lengths.sum()) / 2.0
    shared = counts @ counts.T                                  # across length groups
    np.fill_diagonal(shared, (counts * (counts - 1.0) / 2.0).sum(axis=1))   # within one
    pair_len = (lens[:, None] + lens[None, :]) / 2.0
    upper = np.triu(np.ones(shared.shape, dtype=bool)) & (pair_len > 0)
    ratio_total = float((shared[upper] / pair_len[upper]).sum())
    n_pairs = big_n * (big_n - 1) / 2.0
    return {
        "overlap": float(shared_total / pair_len_total) if pair_len_total else float("nan"),
        "mean_shared": float(shared_total / n_pairs),
        "mean_pair_length": float(pair_len_total / n_pairs),
        "mean_pair_ratio": float(ratio_total / n_pairs),
    }


def overlap_report(tests, n_items: int) -> dict:
    """Overlap by the exposure formula and by pairwise counting (+ fixed-length formula)."""
    m = as_item_matrix(tests)
    lengths = test_lengths(m)
    rates = exposure_rates(m, n_items)
    pair = overlap_pairwise(m, n_items)
    out = {
        "formula": overlap_from_exposure(rates, lengths),
        "pairwise": pair["overlap"],
        "mean_shared_items": pair["mean_shared"],
        "mean_pair_ratio": pair["mean_pair_ratio"],
    }
    if lengths.size and np.all(lengths == lengths[0]):
        out["fixed_length_formula"] = overlap_fixed_length(rates, lengths[0], lengths.size)
    return out


def exposure_summary(rates, threshold: float = 0.2) -> dict:
    """Distribution of exposure rates over the bank (and over the items used at least once)."""
    rates = np.asarray(rates, dtype=float)
    used = rates[rates > 0]
    return {
        "max": float(rates.max()) if rates.size else 0.0,
        "mean": float(rates.mean()) if rates.size else 0.0,
        "sd": float(rates.std()) if rates.size else 0.0,
        "mean_used": float(used.mean()) if used.size else 0.0,
        "n_items": int(rates.size),
        "n_used": int(used.size),
        "share_unused": float(1 - used.size / rates.size) if rates.size else 0.0,
        f"n_over_{threshold:g}": int((rates > threshold).sum()),
    }


def position_analysis(tests, item_ids=None) -> pd.DataFrame:
    """Where in the tests every item appeared.

    Columns: item_id, n_administered, exposure, position_mean, position_sd (population),
    position_min, position_max (1-based; NaN if never given), first_count (times it was the
    first item), first_share (first_count / N).
    """
    import pandas as pd

    return pd.DataFrame(position_columns(tests, item_ids))


def position_columns(tests, item_ids=None) -> dict:
    """The columns of :func:`position_analysis` (name -> array)."""
    m = as_item_matrix(tests)
    big_n, width = m.shape
    n_items = (int(m.max()) + 1 if m.size else 0) if item_ids is None else len(item_ids)
    rows, cols = np.nonzero(m >= 0)
    items = m[rows, cols]
    pos = (cols + 1).astype(float)
    count = np.bincount(items, minlength=n_items)
    s1 = np.bincount(items, weights=pos, minlength=n_items)
    s2 = np.bincount(items, weights=pos * pos, minlength=n_items)
    pmin = np.full(n_items, np.inf)
    pmax = np.full(n_items, -np.inf)
    np.minimum.at(pmin, items, pos)
    np.maximum.at(pmax, items, pos)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = s1 / count
        sd = np.sqrt(np.maximum(s2 / count - mean ** 2, 0.0))
    first = m[:, 0] if width else np.empty(0, dtype=np.intp)
    first_count = np.bincount(first[first >= 0], minlength=n_items)
    ids = np.arange(n_items).astype(str) if item_ids is None else np.asarray(item_ids).astype(str)
    never = count == 0
    return {
        "item_id": ids,
        "n_administered": count,
        "exposure": count / max(big_n, 1),
        "position_mean": np.where(never, np.nan, mean),
        "position_sd": np.where(never, np.nan, sd),
        "position_min": np.where(never, np.nan, pmin),
        "position_max": np.where(never, np.nan, pmax),
        "first_count": first_count,
        "first_share": first_count / max(big_n, 1),
    }


def selection_time(seconds) -> dict:
    """Selection + estimation time per examinee (seconds)."""
    s = np.asarray(seconds, dtype=float)
    if s.size == 0:
        return {"mean": 0.0, "median": 0.0, "max": 0.0, "total": 0.0}
    srt, k = np.sort(s), s.size // 2  # the median as np.median (without its numpy.ma load)
    median = srt[k] if s.size % 2 else (srt[k - 1] + srt[k]) / 2.0
    return {"mean": float(s.mean()), "median": float(median), "max": float(s.max()),
            "total": float(s.sum())}
