"""What a bank folder refuses before building: a model it cannot fit, a score range that is
not one. Whether the results measure one thing is :mod:`atlascat.irt.dimensionality`'s
parallel analysis (re-exported here), which every calibration runs."""
from __future__ import annotations

import re

import numpy as np

from ..errors import ConfigError
from ..irt.dimensionality import MARGIN, Dimensionality, parallel_analysis

__all__ = ["Dimensionality", "parallel_analysis", "MARGIN", "check_model",
           "check_score_range", "check_scores_scale", "chance_note", "range_note",
           "in_source_models"]


def check_model(model) -> None:
    """One line for a ``model`` a bank folder cannot fit: its items are the binary models'
    (rasch, 1pl-4pl, or auto), each item's score on the folder's scale; ordinal ratings'
    categories (graded, gpcm, pcm) are :func:`atlascat.calibrate`'s, a bank file of its own."""
    from ..irt.defaults import MODELS, is_auto
    from ..irt.polytomous import ORDINAL_MODELS

    name = str(model).strip().lower() if isinstance(model, str) else model
    if is_auto(model) or name in MODELS:
        return
    if name in (*ORDINAL_MODELS, "pcm"):
        raise ConfigError(f"--model {name}: a bank folder reads ratings as a score on their scale "
                          "(--score-range 1 10, one slope and location per item) and fits auto, "
                          "rasch or 1pl-4pl; a graded, gpcm or pcm bank of the ratings' categories "
                          f"is calibrated from them (CLI: calibrate RATINGS --model {name} -o "
                          f"BANK.csv; Python: calibrate(ratings, model={name!r})), a bank file "
                          "that simulate, score and evaluate take as --bank BANK.csv")
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


def check_scores_scale(scores, item_mean, score_range, path) -> None:
    """One line for published ``scores`` given as 0-1 fractions with a ``score_range`` wider
    than 1 (BLEU's 0 100): every score within [0, 1] while the models' mean item scores, on the
    same scale, reach above 1. ``scores`` and ``item_mean`` are mapped to 0-1 by the range."""
    if score_range is None:
        return
    lo, hi = (float(v) for v in score_range)
    raw, means = lo + (hi - lo) * np.asarray(scores, float), lo + (hi - lo) * np.asarray(
        item_mean, float)
    raw, top = raw[np.isfinite(raw)], np.nanmax(means)
    if hi - lo > 1 and raw.size and raw.min() >= 0 and raw.max() <= 1 < top:
        raise ConfigError(f"--scores {str(path)!r}: every score is within 0-1 (at most "
                          f"{raw.max():g}) while the models' mean item scores reach {top:.3g} "
                          f"on --score-range {lo:g} {hi:g}: give the published scores on "
                          "that scale, as the results are (not as 0-1 fractions)")


def chance_note(chance: float, score_range) -> str | None:
    """The warning for a ``--chance`` that looks like a 0-1 fraction on a ``score_range`` of
    10 or more points from 0 (0.25 on BLEU's 0 100: a quarter of a point), else None."""
    if score_range is None or not 0 < float(chance) < 1:
        return None
    lo, hi = (float(v) for v in score_range)
    if lo != 0 or hi < 10:
        return None
    return (f"--chance {float(chance):g} on --score-range {lo:g} {hi:g} is {float(chance):g} "
            f"of {hi:g} points: a 0-1 fraction? give it on the metric's scale "
            f"({float(chance) * hi:g})")


def range_note(values, score_range) -> str | None:
    """The warning for results (``values`` mapped to 0-1 by ``score_range``) whose every score
    lies in the bottom quarter of a declared range (a typo as --score-range 0 1000 for 0-100
    scores; a metric whose items every model scores low says so too), else None."""
    if score_range is None or not np.isfinite(values).any():
        return None
    top = float(np.nanmax(values))
    if top >= 0.25:
        return None
    lo, hi = (float(v) for v in score_range)
    return (f"every score lies in the bottom quarter of --score-range {lo:g} {hi:g} (the "
            f"highest {lo + top * (hi - lo):g}): check that the range is the metric's scale; "
            "the predictions are read on it")


def in_source_models(message: str) -> str:
    """A calibration's warning worded for a bank folder, whose subjects are its source models:
    "40 subjects" -> "40 source models", the held-out ones "held-out models", and its override
    the folder's option (``--model``)."""
    out = re.sub(r"\b(\d[\d,.]*) subjects\b", r"\1 source models", message)
    out = re.sub(r"\bheld-out subjects\b", "held-out models", out)
    return out.replace("pass model= (CLI --model) to override", "--model overrides it")
