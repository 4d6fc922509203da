"""Content balancing by the maximum priority index (Cheng and Chang, 2009).

Every item belongs to one content area (a bank metadata column, e.g. the MMLU subject). With
target proportions p_k and a planned test length L, area k may take X_k = p_k L items; after x_k
of them were given its priority factor is

    f_k = (X_k - x_k) / X_k          (0 once the area is full, and for areas with p_k = 0)

and the priority index of item j in area k(j) is PI_j = criterion_j(theta) x f_k(j): the
information criterion is weighted by how much room the item's area still has, and items of
full areas are not eligible. Targets are two-sided, floor(X_k) <= x_k <= ceil(X_k) (Cheng and
Chang's MPI with lower and upper bounds): when the slots left are all needed to bring areas up
to their lower bounds, the other areas get priority 0. For a variable-length test,
L = max(content_length, n + 1): past the planned length the targets grow with the test, so the
areas stay in proportion.

When no item of an open area is left for an examinee, the priority is ignored for that
selection (the test never stops for lack of an area).

A fixed-length test of L items therefore ends with every area within one item of its target
p_k L (exactly on it when p_k L is an integer), as long as the bank has the items.

Reference
---------
Cheng, Y. and Chang, H.-H. (2009). The maximum priority index method for severely constrained
item selection in computerized adaptive testing. British Journal of Mathematical and Statistical
Psychology, 62(2), 369-383.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..errors import ConfigError

if TYPE_CHECKING:  # pandas loads where a frame is built
    import pandas as pd

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
        import pandas as pd

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
        """Priority factor of every area, (n, K + 1) (last column: items without a target).

        Upper bound (Cheng and Chang's f): (X_k - x_k) / X_k clipped at 0, X_k = p_k L,
        L = max(length, n + 1); it is 0 exactly when x_k >= ceil(X_k). Lower bound floor(X_k):
        with R = L - n slots left and D = sum_k max(floor(X_k) - x_k, 0) items still owed to
        areas below their lower bound, items of areas that owe nothing get the factor
        (R - D) / R, 0 once every remaining slot is owed.
        """
        n_items = np.asarray(n_items, dtype=float)
        horizon = np.maximum(self.length, n_items + 1)
        quota = self.targets[None, :] * horizon[:, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            upper = np.where(quota > 0, (quota - counts) / quota, 0.0)
        upper = np.clip(upper, 0.0, None)
        owed = np.maximum(np.floor(quota + 1e-9) - counts, 0.0)
        slots = horizon - n_items
        spare = np.clip((slots - owed.sum(axis=1)) / slots, 0.0, 1.0)
        f = np.where(owed > 0, upper, upper * spare[:, None])
        return np.concatenate([f, np.zeros((f.shape[0], 1))], axis=1)

    def apply(self, scores: np.ndarray, counts: np.ndarray, n_items: np.ndarray) -> np.ndarray:
        """Priority-weighted scores; items of full areas get -inf (unless nothing else is left)."""
        prio = self.priority(counts, n_items)[:, self.area_code]
        positive = scores > 0
        out = scores.copy()
        out[positive] *= prio[positive]
        out[prio <= 0] = -np.inf
        empty = ~np.isfinite(out).any(axis=1) & np.isfinite(scores).any(axis=1)
        if empty.any():
            out[empty] = scores[empty]
        return out

    def __repr__(self) -> str:
        return f"MaxPriorityIndex(areas={self.area_names}, length={self.length})"


def make_content_balancer(bank, config):
    """The balancer a config asks for (None without ``content_column``)."""
    content = config.content
    if content.column is None:
        return None
    meta = bank.metadata
    if meta is None or content.column not in meta.columns:
        have = [] if meta is None else list(meta.columns)
        raise ConfigError(f"content_column {content.column!r} is not a column of the bank "
                          f"metadata (columns: {have}); add the content area of every item")
    areas = meta[content.column]
    if areas.isna().any():
        bad = list(areas.index[areas.isna()][:5])
        raise ConfigError(f"content area missing for item(s) {bad}")
    length = content.length
    if length is None:
        stop = config.stopping
        length = stop.max_items if stop.is_fixed_length else max(stop.min_items, 1)
    return MaxPriorityIndex(areas.to_numpy(), content.targets, length)


def content_report(result, bank, column: str, targets) -> pd.DataFrame:
    """Per examinee and area: items given, target count, and the deviation.

    ``result``: a :class:`~atlascat.cat.result.CATResult`. Target count = p_k x n_items of that
    examinee. Columns: subject_id, area, n, target, deviation.
    """
    import pandas as pd

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
