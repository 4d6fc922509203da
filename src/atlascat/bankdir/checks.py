"""Whether a bank's items measure one thing: Horn's parallel analysis on the source models.

One latent trait shows as a first eigenvalue of the inter-item correlation matrix well above
what items of the same difficulties but unrelated to one another give. Horn's parallel
analysis (Horn 1965; Glorfeld 1995 for the 95th-percentile rule) compares the observed first
eigenvalue with the 95th percentile of the first eigenvalues of ``n_perm`` matrices in which
each item's column is permuted across the models independently (each item keeps its
difficulty, the items lose their common cause). The items measure one thing when the observed
eigenvalue lies above it by :data:`MARGIN` (a fifth): on 200 matrices of random answers (25
models x 40 items) the ratio was at most 1.15 (above 1 in 10% of them, the percentile being
estimated from 20 permutations); on 20-25 real models of the five BenchPred benchmarks in
``../shared/data/benchpred/`` at least 1.34 on 40 random items and 1.7 on all items. Pure
noise, and too few models to tell, do not pass.

The eigenvalues are those of the models x models matrix Z Z' / (n_items), Z the items'
standardised answers (a missing answer at its item's mean), whose nonzero eigenvalues equal
the item correlation matrix's: an n x n problem however many items a benchmark has.

References
----------
Horn, J. L. (1965). A rationale and test for the number of factors in factor analysis.
Psychometrika, 30, 179-185.
Glorfeld, L. W. (1995). An improvement on Horn's parallel analysis methodology for selecting
the correct number of factors to retain. Educational and Psychological Measurement, 55,
377-393.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError

__all__ = ["Dimensionality", "parallel_analysis", "MARGIN", "check_model",
           "check_score_range"]

#: how far above the parallel-analysis threshold the first eigenvalue must lie
MARGIN = 1.2


@dataclass(frozen=True)
class Dimensionality:
    """The first eigenvalue of the item correlations, the parallel-analysis threshold (the
    95th percentile of the permuted data's) and their verdict."""

    first: float
    threshold: float
    share: float            #: the first eigenvalue's share of the total (the items' count)
    n_models: int
    n_items: int

    @property
    def one_trait(self) -> bool:
        """Whether the first eigenvalue lies :data:`MARGIN` times above the threshold (True
        when there are too few items or models to compute it: nothing to say)."""
        return not self.first <= MARGIN * self.threshold

    def to_dict(self) -> dict:
        return {"first_eigenvalue": self.first, "parallel_threshold": self.threshold,
                "first_share": self.share, "one_trait": self.one_trait,
                "n_models": self.n_models, "n_items": self.n_items}

    def message(self) -> str:
        """One line saying that the items do not measure one thing ("" when they do)."""
        if self.one_trait:
            return ""
        return (f"the items do not measure one thing: their first eigenvalue "
                f"({self.first:.2f}) is not clearly larger than random answers of the same "
                f"difficulties give ({self.threshold:.2f}, Horn's parallel analysis on "
                f"{self.n_models} "
                "models); the predictions of this bank are not to be trusted (more models, or "
                "results that measure one skill)")


def _standardised(y: np.ndarray) -> np.ndarray:
    seen = np.isfinite(y)
    mean = np.where(seen, y, 0.0).sum(0) / np.maximum(seen.sum(0), 1)
    z = np.where(seen, y, mean[None, :]) - mean[None, :]
    sd = np.sqrt((z ** 2).mean(0))
    keep = sd > 0
    return z[:, keep] / sd[keep]


def _first_eigenvalue(z: np.ndarray) -> float:
    return float(np.linalg.eigvalsh(z @ z.T / z.shape[0])[-1])


def parallel_analysis(values, *, n_perm: int = 20, rng=None, max_models: int = 300,
                      max_items: int = 3000) -> Dimensionality:
    """Horn's parallel analysis of the first factor (module docstring) on ``values`` (models x
    items, NaN missing; constant items left out). Larger results are judged on a random
    ``max_models`` x ``max_items`` part (the cost is models^2 x items per eigenvalue)."""
    rng = np.random.default_rng(rng)
    y = np.asarray(values, float)
    if y.shape[0] > max_models:
        y = y[np.sort(rng.choice(y.shape[0], max_models, replace=False))]
    if y.shape[1] > max_items:
        y = y[:, np.sort(rng.choice(y.shape[1], max_items, replace=False))]
    z = _standardised(y)
    n, p = z.shape
    if p < 2 or n < 3:
        return Dimensionality(float("nan"), float("nan"), float("nan"), n, p)
    first = _first_eigenvalue(z)
    perm = [_first_eigenvalue(rng.permuted(z, axis=0)) for _ in range(int(n_perm))]
    return Dimensionality(first, float(np.quantile(perm, 0.95)), first / p, n, p)


def check_model(model) -> None:
    """One line for a ``model`` a bank folder cannot fit: its items are the binary models'
    (rasch, 1pl-4pl, or auto), each item's score on the folder's scale; ordinal ratings'
    categories (graded, gpcm) are :func:`atlascat.calibrate`'s, a bank file of its own."""
    from ..irt.defaults import MODELS, is_auto
    from ..irt.polytomous import ORDINAL_MODELS

    name = str(model).strip().lower() if isinstance(model, str) else model
    if is_auto(model) or name in MODELS:
        return
    if name in ORDINAL_MODELS:
        raise ConfigError(f"--model {name}: a bank folder reads ratings as a score on their scale "
                          "(--score-range 1 10, one slope and location per item) and fits auto, "
                          "rasch or 1pl-4pl; a graded or gpcm bank of the ratings' categories "
                          f"is calibrated from them (calibrate(ratings, model={name!r}); CLI: "
                          f"calibrate RATINGS --model {name} -o BANK.csv), a bank file that "
                          "simulate, score and evaluate take as --bank BANK.csv")
    raise ConfigError(f"--model {model!r}: a bank folder fits auto, rasch, 1pl, 2pl, 3pl or 4pl")


def check_score_range(score_range):
    """(low, high) as floats, or None; one line for a range that is not one."""
    if score_range is None:
        return None
    try:
        lo, hi = (float(v) for v in score_range)
    except (TypeError, ValueError):
        raise ConfigError(f"--score-range takes two numbers LO HI, got {score_range!r}") from None
    if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
        raise ConfigError(f"--score-range LO HI needs finite LO < HI, got {lo:g} {hi:g}")
    return lo, hi
