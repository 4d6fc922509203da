"""The score table ``atlas score`` writes, and ``atlas calibrate --scores`` with it, column for
column: subject_id, theta, se, n_items, then mean_score (0/1 answers) or mean_rating with the
predicted mean rating score, score_lo, score_hi (an ordinal bank), flag [, group] [, freq]; a
multidimensional bank's: subject_id, theta_1..K, se_1..K, n_items, mean_score [, freq]."""
from __future__ import annotations


def with_mean_score(df, values, weights=None, at: int | None = 4):
    """``df`` (:func:`atlascat.irt.ability.estimate_ability`'s frame) with ``mean_score``, the
    mean item score over the answered items (``values``: subjects x bank items, NaN missing),
    at column ``at`` (after n_items; None: last, a multidimensional bank's table), and the
    pattern frequencies (``freq``) after it."""
    import numpy as np

    obs = ~np.isnan(values)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(obs, values, 0.0).sum(1) / obs.sum(1)
    df.insert(len(df.columns) if at is None else at, "mean_score", mean)
    if weights is not None:
        df["freq"] = weights
    return df


def with_ratings(df, known, aligned, bank, weights=None):
    """``df`` with ``mean_rating`` (the mean of ``known``, the ratings of the bank's items the
    responses hold, on their own scales) after n_items, the predicted mean rating over the whole
    bank with its 95% interval (``score``, ``score_lo``, ``score_hi``:
    :func:`atlascat.irt.polyscore.predict_mean_rating` of ``aligned``, the ratings in the
    bank's item order) and the pattern frequencies (``freq``) last."""
    import numpy as np

    from ..irt.polyscore import predict_mean_rating

    with np.errstate(invalid="ignore"):
        df.insert(4, "mean_rating", np.nanmean(known, axis=1) if known.shape[1] else np.nan)
    pred = predict_mean_rating(aligned, bank)   # whatever the method: what simulate writes
    for k, col in enumerate(("score", "score_lo", "score_hi")):
        df.insert(5 + k, col, pred[k])
    if weights is not None:
        df["freq"] = weights
    return df


def calibration_scores(res, values, groups=None):
    """A calibration's EAP scores (``res.theta``, ``res.theta_se``: the numbers ``atlas score``
    gives on the written bank) as :func:`atlascat.irt.ability.estimate_ability`'s frame:
    subject_id, theta, se, n_items (the answers in ``values``, subjects x bank items), flag
    (``no_items`` for none, else ``ok``) and, with ``groups`` (subject id -> group, a
    multiple-group fit's), the group column of :func:`atlascat.irt.groupscore.score_groups`."""
    import numpy as np
    import pandas as pd

    ids = np.asarray([str(s) for s in res.subject_ids], dtype=object)
    n_obs = (~np.isnan(np.asarray(values, float))).sum(1).astype(int)
    df = pd.DataFrame({"subject_id": ids, "theta": np.asarray(res.theta, float),
                       "se": np.asarray(res.theta_se, float), "n_items": n_obs,
                       "flag": np.where(n_obs == 0, "no_items", "ok").astype(object)})
    if groups:
        from ..irt.groupscore import subject_groups

        df["group"] = subject_groups(groups, ids, [g["group"] for g in res.groups["groups"]])
    return df


def write_calibration_scores(df, path) -> None:
    """``atlas calibrate --scores``: the table written whole or not at all, 10 significant
    digits (the numbers of the fit, to compare with ``atlas score``'s 8)."""
    from ._common import write_scores_csv

    write_scores_csv(df, path, digits=10)
