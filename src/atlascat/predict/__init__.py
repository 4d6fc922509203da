"""Predicted full-benchmark scores that stay right for models unlike the source models.

- :mod:`.estimators`: the sequential design (items drawn with probabilities from the IRT
  model's uncertainty, active inference), Des Raj's design-based estimate with the IRT
  prediction as a control variate, the IRT prediction, their combination and the interval,
  vectorized over targets (formulas and references there).
- :mod:`.predictor`: :class:`BenchmarkPredictor` (fit from a bank and the source models'
  answers, vectorized replay over a target matrix, ``to_dict`` / ``from_dict`` for
  ``predictor.json``).
- :mod:`.session`: :class:`PredictSession`, a live test of one target (next items / record /
  prediction) and :class:`BenchmarkPrediction`.

Floor 5 (beside ``scorelink/``): it reads the IRT bank and response matrices, and is read by the
bank folder's builder, simulate and the live runner.
"""
from .predictor import MIN_SOURCE_MODELS, BenchmarkPredictor
from .session import BenchmarkPrediction, PredictSession

__all__ = ["BenchmarkPredictor", "PredictSession", "BenchmarkPrediction", "MIN_SOURCE_MODELS"]
