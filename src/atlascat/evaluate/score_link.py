"""Moved: the score link lives in :mod:`atlascat.link` (below the evaluation code and the live
runner, which both use it); the shipped links are found by name in :mod:`atlascat.catalogue`."""
from .._moved import moved

_LINK = ("ScoreLink", "predict_frame")
_PREDICTION = ("ScorePrediction", "stop_note")
_SETTINGS = ("CHANCE", "SUPPORT_BANDWIDTH", "MIN_SUPPORT", "ANSWER_CHANCE", "CHANCE_ALPHA",
             "COVERAGE_TARGET", "PRECISION_RATIO", "MIN_INFO_STOP", "PRECISION_FLOOR",
             "BOTTOM_TOLERANCE", "LZ_CRITICAL", "MIN_FIT_ITEMS")
_CATALOGUE = ("score_link_path", "load_score_link", "bundled_link", "load_bundled_bank",
              "LINK_BENCHMARKS")
__getattr__ = moved(__name__, namespace=globals(), new_homes={
    **{n: "atlascat.link.score_link" for n in _LINK},
    **{n: "atlascat.link.prediction" for n in _PREDICTION},
    **{n: "atlascat.link.settings" for n in _SETTINGS},
    **{n: "atlascat.catalogue" for n in _CATALOGUE},
    "fit_monotone_spline": "atlascat.link.curve",
    "_isotonic": "atlascat.link.curve:isotonic",
    "_Z95": "atlascat.link.settings:Z95", "_GRID": "atlascat.link.settings:GRID",
})
