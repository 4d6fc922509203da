"""A live test of one target with a :class:`~atlascat.predict.predictor.BenchmarkPredictor`.

The items are asked in the order of one random permutation of the benchmark drawn when the
session starts (seeded Generator), so the answered items are a simple random sample at every
length: stopping after any number of answers keeps the design-based estimate unbiased. Item k of
the permutation belongs to cross-fitting fold k mod K. The prediction is the predictor's
(:mod:`atlascat.predict.estimators`), computed on the answers recorded so far.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from ..errors import ConfigError

__all__ = ["PredictSession", "BenchmarkPrediction"]


@dataclass(frozen=True)
class BenchmarkPrediction:
    """Predicted benchmark score (0-1) with its 95% interval."""

    score: float
    lower: float
    upper: float
    se: float
    n_items: int
    #: "combined" (model and design agree) or "design" (target outside the source population)
    method: str
    warning: str = ""
    model_score: float = float("nan")
    design_score: float = float("nan")
    theta: float = float("nan")

    def to_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        text = (f"{100 * self.score:.1f} (95% {100 * self.lower:.1f}-{100 * self.upper:.1f}, "
                f"{self.n_items} items, {self.method})")
        return text + (f" [warning: {self.warning}]" if self.warning else "")


class PredictSession:
    """Next items / record / prediction for one target (see module docstring)."""

    def __init__(self, predictor, *, budget: int, rng=None):
        self.predictor = predictor
        self.budget = int(budget)
        if self.budget < 1:
            raise ConfigError(f"budget must be at least 1, got {budget}")
        n = len(predictor.item_ids_)
        self._order = np.random.default_rng(rng).permutation(n)
        self._index = {str(i): k for k, i in enumerate(predictor.item_ids_)}
        self._pos = np.empty(n, dtype=int)
        self._pos[self._order] = np.arange(n)
        self._y = np.full(n, np.nan)
        self._next = 0                      # position in the permutation of the next item

    @property
    def n_items(self) -> int:
        return int(np.isfinite(self._y).sum())

    @property
    def done(self) -> bool:
        return self.n_items >= self.budget or self._next >= len(self._order)

    def next_items(self, k: int = 1) -> list[str]:
        """The next (up to) ``k`` item ids to ask, never past the budget."""
        room = max(0, min(int(k), self.budget - self._next, len(self._order) - self._next))
        ids = self.predictor.item_ids_[self._order[self._next:self._next + room]]
        self._next += room
        return [str(i) for i in ids]

    def record(self, item_id, score: float) -> None:
        """Record a 0/1 answer to an item handed out by :meth:`next_items`."""
        j = self._index.get(str(item_id))
        if j is None or self._pos[j] >= self._next:
            raise ConfigError(f"item {item_id!r} was not handed out by next_items; record only "
                              "the items the session asked")
        s = float(score)
        if s not in (0.0, 1.0):
            raise ConfigError(f"score of item {item_id!r} must be 0 or 1, got {score!r}")
        self._y[j] = s

    def prediction(self) -> BenchmarkPrediction:
        """The prediction from the answers recorded so far."""
        p = self.predictor
        asked = np.isfinite(self._y)[None, :]
        folds = (self._pos % int(p.n_folds))[None, :]
        r = p.predict_arrays(self._y[None, :], asked, folds)
        outside = bool(r["outside"][0])
        n = int(r["n_items"][0])
        warning = ""
        if outside:
            warning = ("the model looks outside the source models (beyond their scores, or "
                       "design and model predictions differ by "
                       f"{float(r['z'][0]):.1f} SE): the design-based estimate is used")
        elif n < 2 * int(p.n_folds):
            warning = f"only {n} items answered: the interval is wide"
        return BenchmarkPrediction(
            score=float(r["score"][0]), lower=float(r["lower"][0]), upper=float(r["upper"][0]),
            se=float(r["se"][0]), n_items=n, method="design" if outside else "combined",
            warning=warning, model_score=float(r["model_score"][0]),
            design_score=float(r["design_score"][0]), theta=float(r["theta"][0]))
