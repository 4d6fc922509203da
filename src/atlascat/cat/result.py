"""The outcome of a simulated adaptive test (:func:`~atlascat.cat.simulate.simulate_cat`).

One row per examinee and one per administered item, the exposure rate of every item
(share of examinees given it), and the figures built on them: test overlap, item positions
(:mod:`atlascat.cat.security`), accuracy against reference thetas.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from . import security
from .config import CATConfig

__all__ = ["CATResult"]


@dataclass
class CATResult:
    """Outcome of :func:`simulate_cat`.

    Attributes
    ----------
    persons : DataFrame, one row per examinee: subject_id, theta, se, posterior_sd, n_items,
        n_skipped, seconds, stop_reason (+ theta_ref, error when reference thetas were given)
    administered : DataFrame (long), one row per scored item: subject_id, item_id, order, score,
        theta, se
    n_skipped : int, replayed items without an answer (selected, not scored)
    exposure : Series indexed by item id, share of examinees who were given the item
    wall_seconds : float, total wall time of the simulation
    """

    persons: pd.DataFrame
    administered: pd.DataFrame
    n_skipped: int
    exposure: pd.Series
    config: CATConfig
    wall_seconds: float
    item_matrix: np.ndarray = field(repr=False)   # (n, max_items) bank positions, -1 padded
    item_ids: np.ndarray = field(repr=False)
    sh_trials: np.ndarray | None = field(default=None, repr=False)
    batch_size: int = 1

    @property
    def n_examinees(self) -> int:
        return len(self.persons)

    def __repr__(self) -> str:
        p = self.persons
        n = len(p)
        items = f", mean items {p['n_items'].mean():.1f}" if n and "n_items" in p else ""
        se = f", mean SE {p['se'].mean():.3f}" if n and "se" in p else ""
        return (f"CATResult(n_examinees={n}{items}{se}, max_items={self.config.stopping.max_items}, "
                f"{self.wall_seconds:.2g} s)")

    def selected_items(self, subject_id) -> pd.DataFrame:
        """The items given to one examinee, in order: item_id, order, score, theta, se."""
        df = self.administered
        out = df[df["subject_id"] == str(subject_id)]
        if out.empty and str(subject_id) not in set(self.persons["subject_id"]):
            raise KeyError(f"no examinee {subject_id!r} in this result")
        return out.drop(columns="subject_id").reset_index(drop=True)

    def asked_mask(self) -> np.ndarray:
        """Boolean (examinees x bank items): True where the item was administered."""
        m = np.asarray(self.item_matrix)
        asked = np.zeros((m.shape[0], len(self.item_ids)), dtype=bool)
        rows, cols = np.nonzero(m >= 0)
        asked[rows, m[rows, cols]] = True
        return asked

    def item_exposure(self) -> pd.DataFrame:
        """item_id, n_administered, exposure rate (share of examinees)."""
        counts = np.bincount(self.item_matrix[self.item_matrix >= 0],
                             minlength=len(self.item_ids))
        return pd.DataFrame({"item_id": self.item_ids.astype(str), "n_administered": counts,
                             "exposure": counts / max(self.n_examinees, 1)})

    def item_positions(self) -> pd.DataFrame:
        """Per item: how often and where in the test it was given (see security.position_analysis)."""
        return security.position_analysis(self.item_matrix, self.item_ids)

    def overlap(self) -> dict:
        """Test overlap rate by the exposure formula and by pairwise counting (they agree)."""
        return security.overlap_report(self.item_matrix, len(self.item_ids))

    def summary(self) -> dict:
        """Headline figures: items, precision, accuracy vs reference, exposure, overlap, time."""
        p = self.persons
        rates = self.exposure.to_numpy()
        out = {
            "n_examinees": int(len(p)),
            "items_mean": float(p["n_items"].mean()),
            "items_sd": float(p["n_items"].std(ddof=1)) if len(p) > 1 else 0.0,
            "items_min": int(p["n_items"].min()),
            "items_max": int(p["n_items"].max()),
            "se_mean": float(p["se"].mean()),
            "n_skipped": int(self.n_skipped),
            "stop_reasons": {str(k): int(v) for k, v in p["stop_reason"].value_counts().items()},
            "batch_size": int(self.batch_size),
            "rounds_mean": float(p["rounds"].mean() if "rounds" in p.columns
                                 else (p["n_items"] + p["n_skipped"]).mean()),
            "exposure": security.exposure_summary(rates),
            "overlap": self.overlap(),
            "time_total_seconds": float(self.wall_seconds),
            "time_per_examinee_seconds": float(self.wall_seconds / max(len(p), 1)),
            "selection_time": security.selection_time(p["seconds"].to_numpy()),
            "config": self.config.to_dict(),
        }
        if "theta_ref" in p.columns:
            err = p["error"].to_numpy(float)
            ok = np.isfinite(err)
            out["mae"] = float(np.mean(np.abs(err[ok])))
            out["rmse"] = float(np.sqrt(np.mean(err[ok] ** 2)))
            out["bias"] = float(np.mean(err[ok]))
            if ok.sum() > 2:
                out["correlation"] = float(np.corrcoef(p["theta"][ok], p["theta_ref"][ok])[0, 1])
        return out
