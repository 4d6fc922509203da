"""Sympson-Hetter exposure parameters set by iterative simulation (Sympson and Hetter, 1985).

K_j = P(administer j | j selected); since P(A_j) = K_j P(S_j), start with K = 1, simulate the CAT,
set K_j = r_max / P(S_j) where the selection rate exceeds r_max, repeat. The components and the
theory are in :mod:`atlascat.cat.exposure`; this module runs the engine
(:func:`~atlascat.cat.simulate.simulate_cat`), which imports those components, so it sits above
both.

Sympson, J. B. and Hetter, R. D. (1985). Controlling item-exposure rates in computerized adaptive
testing. Proceedings of the 27th annual meeting of the Military Testing Association, 973-977.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import ConfigError
from .generators import _as_generator
from .simulate import simulate_cat

__all__ = ["SympsonHetterCalibration", "calibrate_sympson_hetter"]


@dataclass
class SympsonHetterCalibration:
    """Result of :func:`calibrate_sympson_hetter`.

    k : Series item_id -> exposure parameter K_j
    history : DataFrame per iteration: max_exposure, max_selection_rate, n_restricted,
        mean_items (of the simulation run with that iteration's K)
    """

    k: pd.Series
    history: pd.DataFrame

    def params(self) -> dict:
        """``{item_id: K}`` for ``CATConfig(exposure="sympson_hetter", exposure_params=...)``."""
        return {str(i): float(v) for i, v in self.k.items()}


def calibrate_sympson_hetter(bank, config, thetas, rng=None, *, r_max: float | None = None,
                             n_iter: int = 10, rule: str = "monotone", margin: float = 0.05,
                             progress=None) -> SympsonHetterCalibration:
    """Set Sympson-Hetter exposure parameters by iterative simulation.

    Simulates the CAT with ``config`` (answers drawn from the model at ``thetas``, the
    population the bank serves) and updates the K from the selection rates P(S_j) (the share of
    examinees for whom item j came up for a trial):

    ``rule="classic"`` (Sympson and Hetter, 1985): K_j <- r_max / P(S_j) if P(S_j) > r_max, else 1.
        Restricting some items raises the selection rates of others, so the classic iteration
        oscillates around the target (items released to K = 1 overshoot at the next round); the
        K of the iteration with the smallest maximum exposure is returned.
    ``rule="monotone"`` (default): K_j <- min(K_j, r_max (1 - margin) / P(S_j)): a K never goes
        back up, so the exposure rates settle at or below r_max (the margin makes up for the
        rates that still creep up as more items are restricted); the last K is returned.

    Use a few thousand thetas (resampled from the population if need be): the exposure rate of
    an item at r_max has a sampling SD of sqrt(r_max (1 - r_max) / N).
    """
    r = config.exposure.r_max if r_max is None else float(r_max)
    if not 0 < r <= 1:
        raise ConfigError(f"r_max must be in (0, 1], got {r}")
    if rule not in ("classic", "monotone"):
        raise ConfigError(f"rule must be 'classic' or 'monotone', got {rule!r}")
    if not 0 <= margin < 1:
        raise ConfigError(f"margin must be in [0, 1), got {margin}")
    thetas = np.asarray(thetas, dtype=float).reshape(-1)
    rng = _as_generator(rng)
    ids = [str(i) for i in bank.item_ids]
    k = np.ones(len(bank))
    rows, best, best_k = [], np.inf, k.copy()
    for it in range(int(n_iter)):
        cfg = config.replace(exposure="sympson_hetter", r_max=r, exposure_params=dict(zip(ids, k)))
        res = simulate_cat(bank, cfg, thetas=thetas, rng=rng.spawn(1)[0])
        sel = res.sh_trials / thetas.size
        max_exp = float(res.exposure.max())
        rows.append({"iteration": it, "max_exposure": max_exp,
                     "max_selection_rate": float(sel.max()), "n_restricted": int((k < 1).sum()),
                     "mean_items": float(res.persons["n_items"].mean())})
        if max_exp <= best:
            best, best_k = max_exp, k.copy()
        if progress is not None:
            progress(it + 1, n_iter)
        target = r * (1.0 - margin) if rule == "monotone" else r
        with np.errstate(divide="ignore"):
            new = np.where(sel > target, target / sel, 1.0)
        k = np.minimum(k, new) if rule == "monotone" else new
    final = best_k if rule == "classic" else k
    return SympsonHetterCalibration(pd.Series(final, index=pd.Index(ids, name="item_id"),
                                              name="k"), pd.DataFrame(rows))
