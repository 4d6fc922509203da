"""The result of ML, MAP and WLE (:mod:`atlascat.irt.ability`, :mod:`atlascat.irt.devicesolve`):
thetas, standard errors and flags, set by one rule wherever the roots were found."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

__all__ = ["AbilityResult", "finish"]


@dataclass
class AbilityResult:
    """Result of :func:`atlascat.irt.ability.estimate_ability` (also returned by
    :func:`atlascat.irt.ability.ml`, :func:`atlascat.irt.ability.map_estimate`,
    :func:`atlascat.irt.ability.wle`): arrays of shape (n_subjects,)."""

    theta: np.ndarray
    se: np.ndarray
    n_items: np.ndarray
    flag: np.ndarray
    method: str

    def __repr__(self) -> str:
        ok = int(np.sum(np.asarray(self.flag) == "ok"))
        return (f"AbilityResult(method={self.method!r}, n_subjects={np.size(self.theta)}, "
                f"{ok} flagged ok)")

    def to_frame(self, subject_ids=None) -> pd.DataFrame:
        n = self.theta.size
        ids = np.asarray([str(s) for s in (range(n) if subject_ids is None else subject_ids)])
        return pd.DataFrame({"subject_id": ids, "theta": self.theta, "se": self.se,
                             "n_items": self.n_items.astype(int), "flag": self.flag})


def finish(method, theta, info, at_low, at_high, n_obs, all_right, all_wrong, *,
           prior_mean=0.0, prior_sd=1.0) -> AbilityResult:
    """Standard errors and flags of the roots ``theta`` (host arrays; ``at_low`` / ``at_high``:
    the bound won the bracket search; ``all_right`` / ``all_wrong``: perfect and zero patterns,
    read by ML only). SE = 1 / sqrt(I) (ML, WLE) or 1 / sqrt(I + 1 / sigma^2) (MAP)."""
    theta = np.array(theta, dtype=float)
    flag = np.full(theta.size, "ok", dtype=object)
    with np.errstate(divide="ignore"):
        if method == "map":
            se = 1.0 / np.sqrt(info + 1.0 / prior_sd**2)
        else:
            se = 1.0 / np.sqrt(info)
    bound = at_low | at_high
    if method == "ml":
        theta[at_low], theta[at_high] = -np.inf, np.inf
        se[bound] = np.inf
        flag[bound] = "diverged"
        flag[at_high & all_right] = "perfect"
        flag[at_low & all_wrong] = "zero"
    else:
        flag[bound] = "at_bound"
    empty = n_obs == 0
    if empty.any():
        flag[empty] = "no_items"
        if method == "map":
            theta[empty], se[empty] = prior_mean, prior_sd
        else:
            theta[empty], se[empty] = np.nan, np.nan
    return AbilityResult(theta, se, n_obs, flag, method)
