"""The outcome of a simulated adaptive test (:func:`~atlascat.cat.simulate.simulate_cat`).

One row per examinee and one per administered item, the exposure rate of every item
(share of examinees given it), and the figures built on them: test overlap, item positions
(:mod:`atlascat.cat.security`), accuracy against reference thetas. The tables are held as
columns (name -> array) and become DataFrames when first asked for, so a caller that writes
the columns itself (``atlas simulate``) never loads pandas.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from . import security
from .config import CATConfig

if TYPE_CHECKING:
    import pandas as pd

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
    person_columns, administered_columns : the columns of ``persons`` and ``administered``
        (name -> 1-D array, in order)
    """

    person_columns: dict = field(repr=False)
    administered_columns: dict = field(repr=False)
    n_skipped: int
    exposure_rates: np.ndarray = field(repr=False)
    config: CATConfig
    wall_seconds: float
    item_matrix: np.ndarray = field(repr=False)   # (n, max_items) bank positions, -1 padded
    item_ids: np.ndarray = field(repr=False)
    sh_trials: np.ndarray | None = field(default=None, repr=False)
    batch_size: int = 1

    def __post_init__(self):
        self._frames = {}

    def _frame(self, name: str, columns: dict):
        if name not in self._frames:
            import pandas as pd

            self._frames[name] = pd.DataFrame(columns)
        return self._frames[name]

    @property
    def persons(self) -> pd.DataFrame:
        """One row per examinee (built once; changes to it are kept)."""
        return self._frame("persons", self.person_columns)

    @property
    def administered(self) -> pd.DataFrame:
        """One row per administered item (built once)."""
        return self._frame("administered", self.administered_columns)

    @property
    def exposure(self) -> pd.Series:
        """Share of examinees given each item, indexed by item id."""
        import pandas as pd

        return pd.Series(self.exposure_rates, index=pd.Index(self.item_ids.astype(str),
                                                             name="item_id"), name="exposure")

    def insert_person_column(self, after: str, name: str, values) -> None:
        """Add a column to ``persons`` right after the column ``after``."""
        cols = {}
        for key, v in self.person_columns.items():
            cols[key] = v
            if key == after:
                cols[name] = np.asarray(values)
        self.person_columns = cols
        self._frames.pop("persons", None)

    @property
    def n_examinees(self) -> int:
        return len(self.person_columns["subject_id"])

    def __repr__(self) -> str:
        p = self.person_columns
        n = self.n_examinees
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

    def item_exposure_columns(self) -> dict:
        """The columns of :meth:`item_exposure`."""
        counts = np.bincount(self.item_matrix[self.item_matrix >= 0],
                             minlength=len(self.item_ids))
        return {"item_id": self.item_ids.astype(str), "n_administered": counts,
                "exposure": counts / max(self.n_examinees, 1)}

    def item_exposure(self) -> pd.DataFrame:
        """item_id, n_administered, exposure rate (share of examinees)."""
        import pandas as pd

        return pd.DataFrame(self.item_exposure_columns())

    def item_positions(self) -> pd.DataFrame:
        """Per item: how often and where in the test it was given (see security.position_analysis)."""
        return security.position_analysis(self.item_matrix, self.item_ids)

    def item_positions_columns(self) -> dict:
        """The columns of :meth:`item_positions`."""
        return security.position_columns(self.item_matrix, self.item_ids)

    def overlap(self) -> dict:
        """Test overlap rate by the exposure formula and by pairwise counting (they agree)."""
        return security.overlap_report(self.item_matrix, len(self.item_ids))

    def summary(self) -> dict:
        """Headline figures: items, precision, accuracy vs reference, exposure, overlap, time."""
        # the persons frame when it was built (a caller may have changed it), else its columns
        p = self._frames.get("persons", self.person_columns)
        col = {name: np.asarray(p[name]) for name in p if name != "subject_id"}
        n = self.n_examinees if p is self.person_columns else len(p)
        items = col["n_items"]
        out = {
            "n_examinees": int(n),
            "items_mean": float(np.mean(items)),
            "items_sd": float(np.std(items, ddof=1)) if n > 1 else 0.0,
            "items_min": int(np.min(items)),
            "items_max": int(np.max(items)),
            "se_mean": float(np.mean(col["se"])),
            "n_skipped": int(self.n_skipped),
            "stop_reasons": {str(k): int(v) for k, v in
                             Counter(col["stop_reason"].tolist()).most_common()},
            "batch_size": int(self.batch_size),
            "rounds_mean": float(np.mean(col["rounds"] if "rounds" in col
                                         else items + col["n_skipped"])),
            "exposure": security.exposure_summary(self.exposure_rates),
            "overlap": self.overlap(),
            "time_total_seconds": float(self.wall_seconds),
            "time_per_examinee_seconds": float(self.wall_seconds / max(n, 1)),
            "selection_time": security.selection_time(col["seconds"]),
            "config": self.config.to_dict(),
        }
        if "cost" in col:   # cost-aware stopping: what the tests spent
            out["cost_mean"] = float(np.mean(col["cost"]))
            out["cost_max"] = float(np.max(col["cost"])) if n else 0.0
        if "theta_ref" in col:
            err = col["error"].astype(float)
            ok = np.isfinite(err)
            out["mae"] = float(np.mean(np.abs(err[ok])))
            out["rmse"] = float(np.sqrt(np.mean(err[ok] ** 2)))
            out["bias"] = float(np.mean(err[ok]))
            if ok.sum() > 2:
                out["correlation"] = float(np.corrcoef(col["theta"][ok],
                                                       col["theta_ref"][ok])[0, 1])
        return out
