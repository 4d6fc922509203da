"""Predicted scores for every examinee of a simulation (:func:`predict_frame`).

Each examinee's prediction is :meth:`ScoreLink.predict` on its own theta, SE, answers and stop
reason, computed for all examinees at once by :func:`~atlascat.scorelink.batch.predict_batch` (the
same arithmetic on arrays; answers grouped by examinee in one pass of NumPy,
:func:`~atlascat.scorelink.batch.answer_table`). Only the text of the rows that carry a warning or
a floor / ceiling note is written one row at a time
(:func:`atlascat.scorelink.honesty.warnings_for`, :func:`~atlascat.scorelink.prediction.stop_note`,
the one source of those lines).
"""
from __future__ import annotations

import numpy as np

from . import honesty
from .batch import answer_table, predict_batch
from .prediction import ScorePrediction, stop_note

__all__ = ["predict_frame", "prediction_summary"]

#: the prediction's columns, the same for every bank (shipped or a folder): the score and its
#: 95% interval (0-1), its percentile among the link's population (0-100), flag and warning
#: (``score_`` keeps them apart from a theta's own ``flag``, as ``atlas score`` writes it)
COLUMNS = ["score", "score_lo", "score_hi", "percentile", "score_flag", "score_warning"]

#: stop reasons that add a note ("at or near chance / the top", see stop_note), and those that
#: add one where chance is in the interval (lo <= chance + 0.02)
NOTED = ("floor", "ceiling")
NOTED_NEAR_CHANCE = ("score_precision", "min_information")


def _texts(link, theta, se, pred, reasons):
    """(flag, warning) object arrays: ScorePrediction.flag and .warning of every row, "" when
    none."""
    import pandas as pd

    n = theta.size
    flag, warning = np.full(n, "", dtype=object), np.full(n, "", dtype=object)
    stops = pd.Series(reasons, dtype=object)
    noted = np.isfinite(pred.score) & (stops.isin(NOTED).to_numpy() | (
        stops.isin(NOTED_NEAR_CHANCE).to_numpy() & (pred.lo <= link.chance + 0.02)))
    misfit = pred.misfit
    for i in np.flatnonzero(pred.below | pred.above | misfit | pred.guess | noted):
        warnings, flags = honesty.warnings_for(link, 
            float(theta[i]), float(se[i]), bool(pred.below[i]), bool(pred.above[i]),
            float(pred.lz[i]) if misfit[i] else None,
            (int(pred.n_right[i]), int(pred.n_answered[i])) if pred.guess[i] else None)
        why = reasons[i] if isinstance(reasons[i], str) else None
        note = stop_note(ScorePrediction(float(pred.score[i]), float(pred.lo[i]),
                                         float(pred.hi[i])), why, link.chance,
                         link.metric_range, link.floor_word)
        if note is not None:
            warnings = [note, *warnings]
            flags = [str(why), "+".join(flags)]
        flag[i] = "+".join(f for f in flags if f)
        warning[i] = "; ".join(warnings)
    return flag, warning


def _reach(link, theta, se, pred):
    """``pred`` with its ``below`` / ``above`` and the interval's side towards the empty
    region read at ``se`` (:func:`~atlascat.scorelink.honesty.beyond_support`, as
    :func:`~atlascat.scorelink.honesty.honest` reads them at the SE it predicts from: the
    interval then reaches what the warning says the score may be); rows without a prediction
    keep False."""
    from dataclasses import replace

    ok = np.isfinite(theta) & np.isfinite(se) & np.isfinite(pred.score)
    lo, hi, below, above = honesty.beyond_support(link, theta, np.where(ok, se, np.nan),
                                                  pred.lo, pred.hi)
    return replace(pred, below=below, above=above, lo=lo, hi=hi)


def predict_frame(link, persons, administered, *, warn_se=None):
    """Predicted score per examinee of a ``simulate_cat`` result.

    ``link``: a :class:`atlascat.scorelink.ScoreLink`; ``persons``: frame with subject_id, theta, se
    (and stop_reason, for the floor / ceiling note); ``administered``: frame with subject_id,
    item_id, score (the answers observed). Returns a frame with ``score``, ``score_lo``,
    ``score_hi`` (0-1), ``percentile`` (0-100), ``score_flag`` (:attr:`ScorePrediction.flag`, ""
    when none) and ``score_warning`` (the warnings as one line, "" when none), in the order of
    ``persons``. ``warn_se``: the SE (one per row) the flag and warning read theta's 95%
    interval at, where it is not the one predicted from (a fixed form's, widened by its
    cross-fitted factor: :func:`atlascat.bankdir.formfactor.widened_se`); the score stays that
    of ``se``, and the interval's side beyond the support goes to the floor / top where theta's
    interval at ``warn_se`` reaches there.
    """
    import pandas as pd

    theta = persons["theta"].to_numpy(float)
    se = persons["se"].to_numpy(float)
    reasons = (persons["stop_reason"].to_numpy(object) if "stop_reason" in persons.columns
               else np.full(len(persons), None, dtype=object))
    answers = answer_table(link, persons["subject_id"].to_numpy(), administered)
    pred = predict_batch(link, theta, se, answers)
    if warn_se is None:
        flag, warning = _texts(link, theta, se, pred, reasons)
    else:
        said = np.asarray(warn_se, float).reshape(-1)
        pred = _reach(link, theta, said, pred)
        flag, warning = _texts(link, theta, said, pred, reasons)
    return pd.DataFrame({"score": pred.score, "score_lo": pred.lo,
                         "score_hi": pred.hi, "percentile": pred.percentile,
                         "score_flag": flag, "score_warning": warning},
                        columns=COLUMNS)


def prediction_summary(words: dict, persons) -> tuple[dict, str]:
    """The predicted scores of a simulation, summed up: (figures, name).

    ``words``: what the prediction is of: ``benchmark``; ``population`` "leaderboard" for a
    score through a shipped score link (a bundled bank's, a bank file's whose benchmark is a
    bundled one), else a bank folder's :func:`~atlascat.bankdir.predict.folder_words`
    (``metric``, ``scale`` when on the metric's own scale) or an ordinal bank's rating words
    (``ratings``: a predicted mean rating). ``persons``: a frame, or columns, with ``score``,
    ``score_lo``, ``score_hi``.

    ``figures`` (summary.json): ``benchmark``, ``metric`` / ``population`` where given, ``scale``
    (the score's and width's units; [0, 1] unless the metric's own), ``score_mean`` (the mean
    predicted score over the models that have one) and ``width_mean`` (the 95% intervals' mean
    width). ``name``: the summary row's, "predicted leaderboard score, mean over models" for a
    shipped link's, "predicted <benchmark> score, ..." for a bank folder's, the rating metric's
    for an ordinal bank's."""
    import pandas as pd

    score = pd.Series(np.asarray(persons["score"], dtype=float))
    width = (pd.Series(np.asarray(persons["score_hi"], dtype=float))
             - pd.Series(np.asarray(persons["score_lo"], dtype=float)))
    figures = {"benchmark": words["benchmark"],
               **{k: words[k] for k in ("metric", "population") if k in words},
               "scale": list(words.get("scale", [0.0, 1.0])),
               "score_mean": float(score.mean()), "width_mean": float(width.mean())}
    from .words import score_name

    name = f"predicted {words['metric']}" if words.get("ratings") else score_name(words)
    return figures, f"{name}, mean over models"
