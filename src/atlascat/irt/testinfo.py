"""Item and test information at chosen abilities: mirt's ``iteminfo`` / ``testinfo``.

For every item j and ability theta, I_j(theta) is the Fisher information of its answer
(binary: a^2 (P - c)^2 (u - P)^2 / ((u - c)^2 P (1 - P)); graded / GPCM: sum_k P_k'^2 / P_k,
Samejima 1969, Muraki 1992); the test information is I(theta) = sum_j I_j(theta), and
1 / sqrt(I(theta)) the standard error of the maximum-likelihood theta after every item
(Lord 1980, ch. 5). A bank of continuous scores with a ``dispersion`` column: each item's
information divided by its phi_j, as the adaptive test counts it (the extended
quasi-likelihood, :mod:`atlascat.irt.dispersion`). Works for an
:class:`~atlascat.irt.bank.ItemBank` and a :class:`~atlascat.irt.polybank.PolyBank` alike.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError

__all__ = ["InformationTable", "information_at", "parse_thetas"]


@dataclass(frozen=True)
class InformationTable:
    """``item`` (n_theta, n_items) I_j(theta), ``test`` and ``se`` (n_theta,)."""

    theta: np.ndarray
    item_ids: np.ndarray
    item: np.ndarray
    test: np.ndarray
    se: np.ndarray

    def most_informative(self, k: int = 3) -> list[list[str]]:
        """The ``k`` item ids of largest information at each theta (largest first)."""
        order = np.argsort(-self.item, axis=1, kind="stable")[:, :k]
        return [[str(self.item_ids[j]) for j in row] for row in order]

    def items_frame(self):
        """A frame of item_id and one ``info_<theta>`` column per theta."""
        import pandas as pd

        cols = {f"info_{t:g}": self.item[i] for i, t in enumerate(self.theta)}
        return pd.DataFrame({"item_id": [str(i) for i in self.item_ids], **cols})

    def to_dict(self) -> dict:
        return {"theta": self.theta.tolist(), "test_information": self.test.tolist(),
                "se": self.se.tolist(), "most_informative": self.most_informative()}


def information_at(bank, theta) -> InformationTable:
    """Item and test information of ``bank`` at each ``theta`` (module docstring)."""
    theta = np.atleast_1d(np.asarray(theta, dtype=float))
    if theta.ndim != 1 or not np.all(np.isfinite(theta)):
        raise ConfigError(f"theta must be finite numbers, got {theta.tolist()}")
    from .dispersion import bank_dispersion

    item = np.asarray(bank.information(theta), dtype=float).reshape(theta.size, -1)
    phi = bank_dispersion(bank)
    if phi is not None:
        item = item / phi[None, :]
    test = item.sum(axis=1)
    with np.errstate(divide="ignore"):
        se = np.where(test > 0, 1.0 / np.sqrt(test), np.inf)
    return InformationTable(theta, np.asarray(bank.item_ids), item, test, se)


def parse_thetas(text: str, option: str = "--theta") -> np.ndarray:
    """``"-2,0,2"`` -> array([-2., 0., 2.]); anything else is one line naming ``option``."""
    try:
        values = [float(v) for v in str(text).split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or not np.all(np.isfinite(values)):
        raise ConfigError(f"{option} takes comma-separated numbers (e.g. -2,0,2), got {text!r}")
    far = [v for v in values if abs(v) > 10]
    if far:   # past the estimates' search bounds: information 0, an infinite SE, for nothing
        raise ConfigError(f"{option} {far[0]:g} is outside [-10, 10], where abilities are "
                          "estimated (a theta is on the bank's logit scale, e.g. -2,0,2)")
    return np.asarray(values)
