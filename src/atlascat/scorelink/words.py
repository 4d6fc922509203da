"""What a predicted score is of, in words: the one decision every output reads.

A prediction's *words* are a dict: ``benchmark`` (its name: a shipped bank's, a folder's task
or ``--name``, a bank file's), ``population`` (whose scores the percentile ranks among:
:data:`SOURCE` for a bank folder built from the user's source models, :data:`LEADERBOARD` for a
shipped bank or a bank file naming a shipped benchmark, None for a bank file of the user's own),
and for a bank folder ``metric`` and, on the metric's own scale, ``scale`` [low, high]; an
ordinal bank's add ``ratings``. :meth:`atlascat.catalogue.bankref.BankRef.prediction_words`
makes them for a bank; :func:`score_name` names the prediction from them (a live run's
headline, ``atlas runs``, the run page, compare-models, ``atlas design``, ``atlas simulate``'s
summary).
"""
from __future__ import annotations

__all__ = ["SOURCE", "LEADERBOARD", "score_name", "population_of"]

#: a prediction's ``population`` when its bank is a folder built from the user's source models
SOURCE = "source models"
#: ... when its bank is a shipped one (or names a shipped benchmark), linked to a leaderboard
LEADERBOARD = "leaderboard"


def score_name(words) -> str:
    """What a prediction is of: "predicted mean rating" for an ordinal bank's (``ratings``),
    "predicted <benchmark> score" for a bank folder's (``population`` :data:`SOURCE`) and for a
    bank file of the user's own (``population`` None: no leaderboard), "predicted leaderboard
    score" for a shipped link's (``population`` :data:`LEADERBOARD`, or none given)."""
    if words.get("ratings"):
        return "predicted mean rating"
    if words.get("population") == SOURCE or ("population" in words
                                             and words["population"] is None):
        return f"predicted {words.get('benchmark') or 'benchmark'} score"
    return "predicted leaderboard score"


def population_of(words) -> str:
    """Whose scores the percentile ranks among: "the source models" (a bank folder's) or
    "the leaderboard's models" (a shipped link's)."""
    return ("the source models" if words.get("population") == SOURCE
            else "the leaderboard's models")
