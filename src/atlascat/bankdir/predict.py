"""The predicted benchmark score of a model tested on a built bank folder: the ONE place.

``simulate`` (replayed answers) and ``evaluate`` (live answers) both call
:func:`predict_scores` with the loaded :class:`~atlascat.bankdir.folder.BankFolder` and what
the tests observed; it returns, per model, the score (0-1) with its 95% interval.

Today the prediction is the folder's score link (:meth:`atlascat.link.ScoreLink.predict`:
``g(theta, SE)`` plus the answered items' residual correction, interval from the source
models' replayed tests; ``docs/your_benchmark.md``). A predictor stored beside it
(``predictor.json``, a later release: for models unlike the source models) is to be hooked in
here, so that every command takes it up at once.
"""
from __future__ import annotations

import pandas as pd

__all__ = ["predict_scores", "PREDICTION_COLUMNS"]

#: columns of :func:`predict_scores` (the shipped banks' ``person_scores.csv`` names)
PREDICTION_COLUMNS = ("leaderboard_accuracy", "leaderboard_lo", "leaderboard_hi",
                      "leaderboard_percentile", "leaderboard_flag", "leaderboard_warning")


def predict_scores(folder, persons: pd.DataFrame, administered: pd.DataFrame) -> pd.DataFrame:
    """Predicted score per model of a bank folder's test.

    Parameters
    ----------
    folder : BankFolder (:func:`atlascat.bankdir.load_bank_dir`)
    persons : one row per model: ``subject_id``, ``theta``, ``se`` (and ``stop_reason``)
    administered : one row per answer: ``subject_id``, ``item_id``, ``score`` (0/1)

    Returns
    -------
    DataFrame in the order of ``persons`` with :data:`PREDICTION_COLUMNS`: the score, the
    lower and upper ends of its 95% interval (0-1), the percentile among the source models,
    a flag and a one-line warning ("" when none).
    """
    from ..link import predict_frame

    return predict_frame(folder.link, persons, administered)
