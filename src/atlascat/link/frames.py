"""Predicted leaderboard scores for every examinee of a simulation (:func:`predict_frame`).

Each examinee's prediction is :meth:`ScoreLink.predict` on its own theta, SE, answers and stop
reason; what does not depend on the examinee is done once for all of them: the answers are
grouped by examinee in one pass of NumPy (pandas' groupby made a frame per examinee) and the
person fit (Snijders' lz*) of every examinee is one vectorized call
(:meth:`ScoreLink.lz_star_many`).
"""
from __future__ import annotations

import numpy as np

__all__ = ["predict_frame", "answers_by_subject"]

COLUMNS = ["leaderboard_accuracy", "leaderboard_lo", "leaderboard_hi", "leaderboard_percentile",
           "leaderboard_flag", "leaderboard_warning"]


def answers_by_subject(administered) -> dict:
    """subject_id -> {item_id (str): score} of a frame with subject_id, item_id, score, each
    examinee's answers in the frame's order."""
    import pandas as pd

    codes, subjects = pd.factorize(administered["subject_id"].to_numpy())
    order = np.argsort(codes, kind="stable")
    bounds = np.cumsum(np.bincount(codes, minlength=len(subjects)))[:-1]
    items = np.split(administered["item_id"].astype(str).to_numpy()[order], bounds)
    scores = np.split(administered["score"].to_numpy()[order], bounds)
    return {sid: dict(zip(i.tolist(), s.tolist())) for sid, i, s in zip(subjects, items, scores)}


def predict_frame(link, persons, administered):
    """Predicted leaderboard score per examinee of a ``simulate_cat`` result.

    ``link``: a :class:`atlascat.link.ScoreLink`; ``persons``: frame with subject_id, theta, se
    (and stop_reason, for the floor / ceiling note); ``administered``: frame with subject_id,
    item_id, score (the answers observed). Returns a frame with ``leaderboard_accuracy``,
    ``leaderboard_lo``, ``leaderboard_hi`` (0-1), ``leaderboard_percentile`` (0-100),
    ``leaderboard_flag`` (:attr:`ScorePrediction.flag`, "" when none) and
    ``leaderboard_warning`` (the warnings as one line, "" when none), in the order of
    ``persons``.
    """
    import pandas as pd

    answers = answers_by_subject(administered)
    reasons = (persons["stop_reason"] if "stop_reason" in persons.columns
               else pd.Series([None] * len(persons)))
    given = [answers.get(sid) for sid in persons["subject_id"]]
    lz = link.lz_star_many(persons["theta"].to_numpy(float), given)
    rows = []
    for resp, th, se, why, lz_i in zip(given, persons["theta"], persons["se"], reasons, lz):
        if not (np.isfinite(th) and np.isfinite(se)):
            rows.append((np.nan, np.nan, np.nan, np.nan, "", ""))
            continue
        p = link.predict(th, se, responses=resp, stop_reason=why if isinstance(why, str)
                         else None, lz_star=None if np.isnan(lz_i) else float(lz_i))
        rows.append((p.score, p.lo, p.hi, p.percentile, p.flag, p.warning))
    return pd.DataFrame(rows, columns=COLUMNS)
