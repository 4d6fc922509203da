"""Content balancing by the maximum priority index (Cheng and Chang, 2009).

Every item belongs to one content area (a bank metadata column, e.g. the MMLU subject). With
target proportions p_k and a planned test length L, area k may take X_k = p_k L items; after x_k
of them were given its priority factor is

    f_k = (X_k - x_k) / X_k          (0 once the area is full, and for areas with p_k = 0)

and the priority index of item j in area k(j) is PI_j = criterion_j(theta) x f_k(j): the
information criterion is weighted by how much room the item's area still has, and items of
full areas are not eligible. For a variable-length test, L = max(content_length, n + 1): past the
planned length the targets grow with the test, so the areas stay in proportion.

When no item of an open area is left for an examinee, the priority is ignored for that
selection (the test never stops for lack of an area).

With integer targets X_k a fixed-length test of L items hits every target exactly: no area
exceeds ceil(X_k), and the counts add up to L = sum_k X_k.

Reference
---------
Cheng, Y. and Chang, H.-H. (2009). The maximum priority index method for severely constrained
item selection in computerized adaptive testing. British Journal of Mathematical and Statistical
Psychology, 62(2), 369-383.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import ConfigError

__all__ = ["MaxPriorityIndex", "make_content_balancer", "content_report"]


class MaxPriorityIndex:
    """Priority factors per content area and their application to selection scores.

    Parameters
    ----------
    areas : (J,) content area of every item (strings)
    targets : mapping area -> target proportion (sums to 1)
    length : planned test length L the proportions apply to
    """

    def __init__(self, areas, targets, length: int):
        areas = pd.Series(np.asarray(areas, dtype=object)).astype(str).to_numpy()
        self.area_names = [str(k) for k in targets]
        self.targets = np.array([float(targets[k]) for k in targets])
        self.length = int(length)
        self.n_areas = len(self.area_names)
        index = {name: i for i, name in enumerate(self.area_names)}
        # items of areas without a target get code n_areas (priority 0)
        self.area_code = np.array([index.get(a, self.n_areas) for a in areas], dtype=np.intp)
        missing = [name for name in self.area_names if name not in set(areas)]
        if missing:
            raise ConfigError(f"content target area(s) {missing} have no item in the bank; "
                              f"bank areas: {sorted(set(areas))[:20]}")

    def priority(self, counts: np.ndarray, n_items: np.ndarray) -> np.ndarray:
        """f (n, K + 1): (X_k - x_k) / X_k clipped at 0, with X_k = p_k max(L, n + 1)."""
        horizon = np.maximum(self.length, np.asarray(n_items) + 1).astype(float)
        quota = self.targets[None, :] * horizon[:, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            f = np.where(quota > 0, (quota - counts) / quota, 0.0)
        f = np.clip(f, 0.0, None)
        return np.concatenate([f, np.zeros((f.shape[0], 1))], axis=1)

    def apply(self, scores: np.ndarray, counts: np.ndarray, n_items: np.ndarray) -> np.ndarray:
        """Priority-weighted scores; items of full areas get -inf (unless nothing else is left)."""
        prio = self.priority(counts, n_items)[:, self.area_code]
        out = np.where(scores > 0, scores * prio, scores)
        out[prio <= 0] = -np.inf
        empty = ~np.isfinite(out).any(axis=1) & np.isfinite(scores).any(axis=1)
        if empty.any():
            out[empty] = scores[empty]
        return out

    def __repr__(self) -> str:
        return f"MaxPriorityIndex(areas={self.area_names}, length={self.length})"


def make_content_balancer(bank, config):
    """The balancer a config asks for (None without ``content_column``)."""
    if config.content_column is None:
        return None
    meta = bank.metadata
    if meta is None or config.content_column not in meta.columns:
        have = [] if meta is None else list(meta.columns)
        raise ConfigError(f"content_column {config.content_column!r} is not a column of the bank "
                          f"metadata (columns: {have}); add the content area of every item")
    areas = meta[config.content_column]
    if areas.isna().any():
        bad = list(areas.index[areas.isna()][:5])
        raise ConfigError(f"content area missing for item(s) {bad}")
    length = config.content_length
    if length is None:
        length = config.max_items if config.is_fixed_length else max(config.min_items, 1)
    return MaxPriorityIndex(areas.to_numpy(), config.content_targets, length)


def content_report(result, bank, column: str, targets) -> pd.DataFrame:
    """Per examinee and area: items given, target count, and the deviation.

    ``result``: a :class:`~atlascat.cat.engine.CATResult`. Target count = p_k x n_items of that
    examinee. Columns: subject_id, area, n, target, deviation.
    """
    areas = bank.metadata[column].astype(str)
    df = result.administered[["subject_id", "item_id"]].copy()
    df["area"] = areas.reindex(df["item_id"].to_numpy()).to_numpy()
    counts = df.groupby(["subject_id", "area"]).size().unstack(fill_value=0)
    for area in targets:
        if area not in counts.columns:
            counts[area] = 0
    counts = counts[list(targets)]
    length = counts.sum(axis=1)
    long = counts.stack().rename("n").reset_index()
    long.columns = ["subject_id", "area", "n"]
    p = pd.Series({str(k): float(v) for k, v in targets.items()})
    long["target"] = p.reindex(long["area"]).to_numpy() * length.reindex(long["subject_id"]).to_numpy()
    long["deviation"] = long["n"] - long["target"]
    return long
