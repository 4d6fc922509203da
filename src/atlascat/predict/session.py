"""A live test of one target with a :class:`~atlascat.predict.predictor.BenchmarkPredictor`.

The session runs the predictor's sequential design (:mod:`atlascat.predict.estimators`): each
item is drawn from the items not asked yet with a probability proportional to the models'
uncertainty about it given the answers recorded so far (the IRT model and the level model,
mixed with uniform), from a seeded Generator. ``next_items(k)`` draws a round of k items one
after another with the same posterior (the answers of a round are not known while it is
drawn), so each draw's probability depends on earlier answers only and Des Raj's estimator
stays unbiased at every length: stopping after any number of answers is allowed. The
prediction uses the draws in order up to the first one not answered yet; before
``SMALL_SAMPLE_DRAWS`` answers its interval is the small-sample one
(:meth:`BenchmarkPredictor.step_interval`), whatever the budget, as
:meth:`BenchmarkPredictor.replay`'s after as many answers.
``to_dict`` / ``from_dict`` save and restore a session exactly (the draws, the answers and the
generator's state), so a live run resumed after a crash draws the same items.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

import numpy as np

from ..cat.generators import generator_from_state, generator_state, subject_generator
from ..errors import ConfigError
from . import estimators as est

__all__ = ["PredictSession", "BenchmarkPrediction", "subject_generator"]


@dataclass(frozen=True, repr=False)
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
    #: G, the model part pooled with the design estimate (model_score: the IRT prediction M)
    model_part: float = float("nan")
    design_score: float = float("nan")
    theta: float = float("nan")
    #: (low, high) of the metric's own scale the prediction prints on (a ``--score-range``
    #: bank folder's predictor: :attr:`BenchmarkPredictor.metric_range_`), None: percent; the
    #: fields stay 0-1
    scale: tuple | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("scale")
        return d

    def __repr__(self) -> str:
        """The dataclass's, and ``scale`` where set: the 0-1 fields are shares of it."""
        text = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self) if f.repr)
        scale = "" if self.scale is None else f", scale={tuple(self.scale)!r}"
        return f"{type(self).__name__}({text}{scale})"

    def __str__(self) -> str:
        from ..scorelink.prediction import on_scale

        score, lo, hi = (on_scale(v, self.scale) for v in (self.score, self.lower, self.upper))
        text = f"{score} (95% {lo}-{hi}, {self.n_items} items, {self.method})"
        return text + (f" [warning: {self.warning}]" if self.warning else "")


class PredictSession:
    """Next items / record / prediction for one target (see module docstring)."""

    def __init__(self, predictor, *, budget: int, rng=None, available=None):
        from ..validation import check_finite

        self.predictor = predictor
        self.budget = int(check_finite(budget, "budget"))
        if self.budget < 1:
            raise ConfigError(f"budget must be at least 1, got {budget}")
        n = len(predictor.item_ids_)
        from ..validation import as_generator

        self._rng = as_generator(rng)
        self._index = {str(i): k for k, i in enumerate(predictor.item_ids_)}
        self._y = np.full(n, np.nan)
        self._drawn = np.zeros(n, dtype=bool)
        # the items this target can be asked (a recorded model's answered ones; default all):
        # the score predicted is its mean over them, as BenchmarkPredictor.replay's
        self._avail = np.ones(n, dtype=bool)
        if available is not None:
            self._avail[:] = False
            self._avail[[self._index[i] for i in map(str, available) if i in self._index]] = True
            if not self._avail.any():
                raise ConfigError("none of the predictor's items can be asked of this model "
                                  "(it has no recorded answer to any)")
        # (item, q, f, f_rest, g, g_rest): the draw, its probability, the two models'
        # predictions of it and their sums over the items not drawn before it
        self._draws: list[tuple[int, float, float, float, float, float]] = []
        self._tables, self._nodes, self._log_prior = predictor._grid()
        self._theta_se = None                       # (theta, SE) of the answers so far

    def __repr__(self) -> str:
        state = self.stop_reason or "running"
        return (f"PredictSession(answered={self.n_items}, drawn={len(self._draws)}, "
                f"budget={self.budget}, {state})")

    @property
    def n_items(self) -> int:
        return int(np.isfinite(self._y).sum())

    @property
    def exhausted(self) -> tuple[int, int] | None:
        """(answered, items) when this target could be asked only ``answered`` of the
        predictor's ``items`` (a recorded row with blanks) and was asked every one of them:
        the score is then their mean, with no sampling left; else None."""
        k, n = int(self._avail.sum()), len(self._avail)
        return (k, n) if k < n and bool(self._drawn[self._avail].all()) else None

    @property
    def done(self) -> bool:
        return len(self._draws) >= self.budget or bool(self._drawn[self._avail].all())

    @property
    def stop_reason(self) -> str | None:
        """"budget" (``budget`` items drawn), "all_items" (every item drawn), or None."""
        if len(self._draws) >= self.budget:
            return "budget"
        return "all_items" if bool(self._drawn[self._avail].all()) else None

    def theta_se(self) -> tuple[float, float]:
        """The EAP theta and posterior SD of the answers recorded so far (N(0, 1) prior);
        computed once per answer."""
        if self._theta_se is None:
            answered = np.isfinite(self._y)[None, :]
            lp = est.log_posterior(self._y[None, :], answered, self._tables, self._log_prior)
            w = est.posterior(lp)[0]
            mean = float(w @ self._nodes)
            self._theta_se = mean, float(np.sqrt(max(w @ (self._nodes - mean) ** 2, 0.0)))
        return self._theta_se

    def next_items(self, k: int = 1) -> list[str]:
        """The next (up to) ``k`` item ids to ask, never past the budget."""
        room = max(0, min(int(k), self.budget - len(self._draws),
                          int((self._avail & ~self._drawn).sum())))
        if room == 0:
            return []
        answered = np.isfinite(self._y)[None, :]
        lp = est.log_posterior(self._y[None, :], answered, self._tables, self._log_prior)
        f = est.posterior(lp) @ self._tables[0]
        g, level = f, self.predictor._level()
        if level is not None:
            done = np.flatnonzero(answered[0])[None, :]
            g = est.level_prediction(level, done, self._y[done], np.ones(done.shape, dtype=bool))
        out = []
        for _ in range(room):
            remaining = (self._avail & ~self._drawn)[None, :]
            q = est.draw_probabilities(f, remaining, float(self.predictor.mix),
                                       None if level is None else g,
                                       float(self.predictor.share),
                                       getattr(self.predictor, "dispersion_", None))[0]
            j = int(est.draw_items(q[None, :], remaining, self._rng)[0])
            self._draws.append((j, float(q[j]), float(f[0, j]),
                                float(np.where(remaining[0], f[0], 0.0).sum()),
                                float(g[0, j]), float(np.where(remaining[0], g[0], 0.0).sum())))
            self._drawn[j] = True
            out.append(str(self.predictor.item_ids_[j]))
        return out

    def record(self, item_id, score: float) -> None:
        """Record the score (0/1, or a continuous score in [0, 1]: F1, ROUGE, a rating mapped
        from the predictor's ``score_range``) of an item handed out by :meth:`next_items`."""
        j = self._index.get(str(item_id))
        if j is None or not self._drawn[j]:
            raise ConfigError(f"item {item_id!r} was not handed out by next_items; record only "
                              "the items the session asked")
        if np.isfinite(self._y[j]):   # a second answer would silently replace the first
            raise ConfigError(f"item {item_id!r} was already recorded (score {self._y[j]:g}); "
                              "each item takes one answer: record the items next_items hands "
                              "out once each")
        from ..validation import check_finite

        s = check_finite(score, f"score of item {item_id!r}")
        if not 0.0 <= s <= 1.0:
            scale = self.predictor.metric_range_
            hint = "" if scale is None else (
                f"; on the metric's scale {scale[0]:g}-{scale[1]:g}, record (score - "
                f"{scale[0]:g}) / {scale[1] - scale[0]:g}")
            raise ConfigError(f"score of item {item_id!r} must be in [0, 1], got {score!r}"
                              + hint)
        self._y[j] = s
        self._theta_se = None

    def to_dict(self) -> dict:
        """JSON-serialisable state (without the predictor: :meth:`from_dict` takes it)."""
        ids = self.predictor.item_ids_
        out = {"format": "atlascat.PredictSession/2", "budget": self.budget,
               "draws": [[str(ids[j]), *rest] for j, *rest in self._draws],
               "answers": {str(ids[j]): float(self._y[j]) for j in np.flatnonzero(
                   np.isfinite(self._y))},
               "rng": generator_state(self._rng)}
        if not self._avail.all():
            out["available"] = [str(ids[j]) for j in np.flatnonzero(self._avail)]
        return out

    @classmethod
    def from_dict(cls, predictor, d: dict) -> "PredictSession":
        """The session :meth:`to_dict` saved, with the same ``predictor``."""
        try:
            out = cls(predictor, budget=int(d["budget"]), rng=generator_from_state(d["rng"]),
                      available=d.get("available"))
            for item, q, f, r, *gr in d["draws"]:   # format 1: no level model (g = f)
                j = out._index[str(item)]
                g, g_rest = gr if gr else (f, r)
                out._draws.append((j, float(q), float(f), float(r), float(g), float(g_rest)))
                out._drawn[j] = True
            for item, v in d["answers"].items():
                out.record(item, v)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ConfigError(f"not a saved predictor session ({type(exc).__name__}: {exc}); "
                              "the run's snapshot is damaged or from another bank") from None
        return out

    def _answered_draws(self):
        n = 0
        while n < len(self._draws) and np.isfinite(self._y[self._draws[n][0]]):
            n += 1
        return self._draws[:n]

    def trajectory(self) -> list[BenchmarkPrediction]:
        """The prediction after each answered draw in order (the k-th from the first k
        answers, as :meth:`prediction` gave it then): what a run's report plots."""
        draws = self._answered_draws()
        return [self._predict(draws[:k]) for k in range(1, len(draws) + 1)]

    def prediction(self) -> BenchmarkPrediction:
        """The prediction from the answers recorded so far (the draws up to the first one
        without an answer)."""
        return self._predict(self._answered_draws())

    def _predict(self, draws) -> BenchmarkPrediction:
        p = self.predictor
        if not draws:
            raise ConfigError("no answers recorded yet; record the answer to the first item "
                              "next_items handed out before asking for a prediction")
        cols = [np.asarray([d[c] for d in draws])[None, :] for c in range(6)]
        y = np.full_like(self._y, np.nan)
        y[cols[0][0]] = self._y[cols[0][0]]
        avail = self._avail[None, :]
        r = p.predict_draws(y[None, :], cols[0].astype(int), *cols[1:], avail=avail)
        r["lower"], r["upper"] = p.step_interval(y[None, :], cols[0].astype(int), r,
                                                 avail=avail)
        outside = bool(r["outside"][0])
        n = int(r["n_items"][0])
        warning = ""
        if outside:
            z = float(r["z"][0])
            why = (f"its design-based and model predictions differ by {z:.1f} combined SEs, "
                   f"more than {p.z_cut:g}" if z > p.z_cut else
                   "its score, model prediction or theta lies beyond the source models'")
            warning = (f"the model looks outside the source models ({why}): the "
                       "design-based estimate is used")
        elif n < 10:
            warning = f"only {n} items answered: the interval is wide"
        return BenchmarkPrediction(
            score=float(r["score"][0]), lower=float(r["lower"][0]), upper=float(r["upper"][0]),
            se=float(r["se"][0]), n_items=n, method="design" if outside else "combined",
            warning=warning, model_score=float(r["model_score"][0]),
            model_part=float(r["model_part"][0]),
            design_score=float(r["design_score"][0]), theta=float(r["theta"][0]),
            scale=p.metric_range_)

