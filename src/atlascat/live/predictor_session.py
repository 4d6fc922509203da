"""A live run on a bank folder's benchmark predictor (``predictor.json``).

The runner (:mod:`atlascat.live.runner`) drives any session with ``next_item`` /
``next_items(k)``, ``record`` / ``record_many``, ``n_items``, ``theta``, ``se``, ``done``,
``stop_reason`` and ``to_dict``; :class:`PredictorLiveSession` gives it those over a
:class:`~atlascat.predict.session.PredictSession`: the items are drawn one after another with
known probabilities (:mod:`atlascat.predict.estimators`), every answer is stored as it comes,
and the prediction is Des Raj's design-based estimate pooled with the calibrated model
prediction (IRT and ridge) while the model looks like the source models (the design-based
estimate alone when it does not), with its 95% interval valid by design. ``theta`` / ``se`` are
the IRT posterior's (EAP and posterior SD), for the run's trajectory; the predicted score is
:meth:`prediction`.

The snapshot (``type: "predict"``) holds the predictor's description and the session's state
(draws, answers, generator), so a run resumes exactly and its prediction is recomputed from the
store alone (:func:`atlascat.live.service.predict_run`).
"""
from __future__ import annotations

from ..errors import ConfigError

__all__ = ["PredictorLiveSession"]

_TYPE = "predict"


class PredictorLiveSession:
    """The runner's session protocol over a benchmark predictor's live test (module docstring).

    Parameters
    ----------
    predictor : a fitted :class:`~atlascat.predict.BenchmarkPredictor`
    budget : items to ask (default the predictor's)
    rng : seed or Generator of the draws
    available : the item ids this model can be asked (a recorded model's answered ones;
        default all): the prediction is of its mean over them, as ``atlas simulate``'s
    """

    kind = _TYPE

    def __init__(self, predictor, *, budget: int | None = None, rng=None, available=None,
                 _inner=None):
        self.predictor = predictor
        self._predictor_state = None   # the predictor's description, made once (it is fixed)
        self.inner = _inner if _inner is not None else predictor.session(
            budget=budget, rng=rng, available=available)

    # ------------------------------------------------------------ the runner's protocol
    @property
    def budget(self) -> int:
        return self.inner.budget

    @property
    def n_items(self) -> int:
        return self.inner.n_items

    @property
    def done(self) -> bool:
        return self.inner.done

    @property
    def stop_reason(self) -> str | None:
        return self.inner.stop_reason

    @property
    def theta(self) -> float:
        return self.inner.theta_se()[0]

    @property
    def se(self) -> float:
        return self.inner.theta_se()[1]

    def next_item(self):
        items = self.inner.next_items(1)
        return items[0] if items else None

    def next_items(self, k: int) -> list[str]:
        return self.inner.next_items(k)

    def record(self, item_id, score) -> None:
        self.inner.record(item_id, score)

    def record_many(self, items, scores) -> None:
        for item, score in zip(items, scores):
            self.inner.record(item, score)

    def expected_accuracy(self) -> float:
        """The predictor's model part (G: the IRT prediction, with the ridge's where stacked,
        calibrated on the source models), for the run's ``model_based_score``: the value the
        prediction pools with the design estimate, so the score lies between the two."""
        return float(self.inner.prediction().model_part)

    # ------------------------------------------------------------ the prediction
    def prediction(self):
        """The :class:`~atlascat.predict.session.BenchmarkPrediction` of the answers so far."""
        return self.inner.prediction()

    def predicted(self, link=None) -> dict:
        """The prediction as every reader shows it ({score, lo, hi, percentile, flag,
        warning, method, n_items, se, model_score, model_part, design_score}, 0-1; ``se``: the
        predicted score's SE, as ``person_scores.csv``'s); ``link``: the folder's
        score link, for the percentile among the source models."""
        from ..bankdir.predict import exhausted_warning

        p = self.prediction()
        gone = self.inner.exhausted    # a recorded row with blanks, every answer asked
        return {"score": p.score, "lo": p.lower, "hi": p.upper,
                "percentile": float(link.percentile(p.score)) if link is not None else None,
                "flag": "outside_source" if p.method == "design" else "",
                "warning": exhausted_warning(*gone) if gone else p.warning,
                "method": p.method, "n_items": p.n_items, "se": p.se,
                "model_score": p.model_score, "model_part": p.model_part,
                "design_score": p.design_score,
                "design": "benchmark predictor"}

    # ------------------------------------------------------------ persistence
    def to_dict(self) -> dict:
        """The snapshot stored after every answer: the predictor's description is made once
        per session (packing the source models' answers took 1 s a step on 424 x 756)."""
        if self._predictor_state is None:
            self._predictor_state = self.predictor.to_dict()
        return {"type": _TYPE, "predictor": self._predictor_state,
                "session": self.inner.to_dict()}

    @classmethod
    def from_dict(cls, state: dict, bank=None) -> "PredictorLiveSession":
        """The session of a snapshot written by :meth:`to_dict` (``bank``: unused, the
        snapshot holds the predictor; the runner checks the bank's hash itself)."""
        from ..predict import BenchmarkPredictor
        from ..predict.session import PredictSession

        if not (isinstance(state, dict) and state.get("type") == _TYPE):
            raise ConfigError("not a predictor run's snapshot")
        predictor = BenchmarkPredictor.from_dict(state.get("predictor"))
        session = cls(predictor, _inner=PredictSession.from_dict(predictor, state.get("session")))
        session._predictor_state = state.get("predictor")   # the description it was read from
        return session
