"""A response matrix on a metric's own scale (a bank folder's ``--score-range``: BLEU 0-100, a
judge's 1-10), read and mapped to [0, 1] once, with one line for a score off the scale or text
in a cell, worded for that scale."""
from __future__ import annotations

import os

import numpy as np

from ..errors import ResponseDataError, warn_user
from ..validation import zero_one_items

__all__ = ["read_scaled_matrix", "shares_of_one", "score_map_on_scale", "chance_words"]

#: where a folder's chance level came from (its manifest's ``settings["chance_from"]``)
CHANCE_FROM = {"given": "--chance", "benchmark": "the benchmark's",
               "options": "1 / options; true / options for mc2, 0 for a generation",
               "matrix": "a matrix's default; give --chance for multiple choice"}


def chance_words(settings: dict, scores: str | None = None) -> str:
    """A folder's chance level as its build summary reads it, with where it came from: in
    percent, or on the metric's own scale (``settings["score_range"]``, to the one digits
    rule). A matrix's default (the bottom of the scale) suggests ``--chance`` for multiple
    choice only where the scores are right / wrong: not on a ``--score-range`` scale nor for
    continuous ``scores`` (the manifest's ``source["scores"]``), whose lowest score is no
    guess among options."""
    from ..scorelink.prediction import score_text

    c, src = settings.get("chance"), settings.get("chance_from")
    if c is None:
        return "unknown"
    rng = settings.get("score_range")
    why = CHANCE_FROM.get(src, src)
    if src == "matrix" and (rng or scores == "continuous"):
        why = "a matrix's default: the bottom of the scale"
    if rng:  # the manifest's, on the metric's own scale
        return f"{score_text(float(c), rng)} on the metric's scale ({why})"
    return f"{100 * float(c):.1f}% ({why})"


def shares_of_one(values, lo: float, hi: float) -> bool:
    """Warn (and True) when scores on a wide scale (``hi - lo`` >= 10, BLEU 0-100) all lie within
    one point of its low end with fractions between: shares of 1 read as points would make
    every model look at the bottom of the scale."""
    obs = np.asarray(values, dtype=float)
    obs = obs[~np.isnan(obs)]
    if hi - lo < 10 or obs.size == 0 or obs.max() > lo + 1:
        return False
    if not np.any((obs > lo) & (obs < lo + 1)):
        return False
    warn_user(f"every score lies within {lo:g}-{lo + 1:g} on the {lo:g}-{hi:g} scale, with "
              f"fractions between: if they are shares of 1, not points of {hi - lo:g}, rescale "
              "them (as read, every model is at the bottom of the scale)")
    return True


def read_scaled_matrix(path, score_range, *, shares_warning: bool = True, folder: bool = False,
                       source: bool = False, **read_kwargs):
    """A response matrix whose scores lie on ``score_range`` (lo, hi) (BLEU 0-100, a 1-10
    rating), mapped to [0, 1] once: y = (x - lo) / (hi - lo). A cell outside the range, or
    text, is refused with one line on that scale (``folder``: the range is a built folder's,
    not an option of the command); scores that look like shares of 1 warn
    (:func:`shares_of_one`; ``shares_warning=False``: a build, which refuses them itself);
    ``source`` (a build's source models): items scored only 0 and 1 among ratings that use the
    scale warn (:func:`atlascat.validation.zero_one_items`)."""
    from ..responses import ResponseMatrix

    lo, hi = score_range
    where, fix = ((f"the bank folder's score range [{lo:g}, {hi:g}] (set when it was built, "
                   f"--score-range {lo:g} {hi:g})", "give each score on that scale")
                  if folder else (f"the declared range [{lo:g}, {hi:g}]", "check --score-range"))

    class _OnScale(ResponseMatrix):            # the readers build cls(values, ids, items)
        @staticmethod
        def _numeric_values(df):
            try:
                return ResponseMatrix._numeric_values(df)
            except ResponseDataError as exc:   # text: say the scale the scores are on
                raise ResponseDataError(str(exc).replace(
                    "scores must be numbers in [0, 1]",
                    f"scores must be numbers on the scale [{lo:g}, {hi:g}]")) from None

        def __init__(self, values, subject_ids=None, item_ids=None, **kw):
            v = np.asarray(values, dtype=float)
            bad = np.argwhere(~np.isnan(v) & ((v < lo) | (v > hi)))
            if bad.size:
                r, c = bad[0]
                who = "" if subject_ids is None else f" (model {list(subject_ids)[r]!r}"
                what = "" if item_ids is None else f", item {list(item_ids)[c]!r})"
                raise ResponseDataError(
                    f"{len(bad)} score(s) outside {where}, e.g. "
                    f"{v[r, c]:g} at row {r}{who}{what if who else ''}; {fix}")
            if shares_warning:
                shares_of_one(v, lo, hi)
            ids = list(range(v.shape[1]) if item_ids is None else item_ids)
            mixed = zero_one_items(v, ids, (lo, hi)) if source else None
            if mixed:
                warn_user(mixed)
            super().__init__((v - lo) / (hi - lo), subject_ids, item_ids, **kw)

    kw = {"on_empty": "drop", **read_kwargs}
    if isinstance(path, ResponseMatrix):     # results in memory: a matrix or a DataFrame
        kw.setdefault("freq_column", None if path.weights is None else "freq")
        path = path.to_frame()
    rm = _OnScale.read(path, **kw) if isinstance(path, (str, os.PathLike)) else \
        _OnScale.from_frame(path, **kw)
    return ResponseMatrix(rm.values, rm.subject_ids, rm.item_ids, weights=rm.weights,
                          on_empty=kw["on_empty"])


def score_map_on_scale(score_map: dict, score_range) -> dict:
    """The benchmark predictor's score map (``intercept``, ``slope``, ``resid_sd``: score =
    intercept + slope x item mean, both on 0-1, as predictor.json keeps it) on the metric's
    own scale (lo, hi), where a ``--score-range`` folder's ``--scores`` and item means are
    read: score = lo (1 - slope) + (hi - lo) intercept + slope x item mean, the residual SD
    times (hi - lo). Without a range (None), the map as it is."""
    if not score_range:
        return dict(score_map)
    lo, hi = (float(v) for v in score_range)
    slope = float(score_map["slope"])
    return {**score_map, "intercept": lo * (1.0 - slope) + (hi - lo) * float(score_map["intercept"]),
            "slope": slope, "resid_sd": (hi - lo) * float(score_map["resid_sd"])}
