"""The score link: from an adaptive test's theta (+- SE) and answers to the published
score with a 95% interval (see ``docs/leaderboard.md``).

- :mod:`.fit`: :class:`ScoreLinkEstimator` (scikit-learn style: settings in ``__init__``,
  ``fit(bank, responses, scores)`` sets ``link_``).
- :mod:`.score_link`: :class:`ScoreLink`, the fitted link (predict, stop settings, JSON round
  trip; :func:`with_link_stops`: a CAT's settings with its stops); :mod:`.honesty`: what a
  prediction says outside the link's data.
- :mod:`.frames`: :func:`predict_frame`, the predictions of every examinee of a simulation,
  all at once (:mod:`.batch`: :meth:`ScoreLink.predict`'s arithmetic on arrays).
- :mod:`.prediction`: :class:`ScorePrediction` and the floor / ceiling stop notes.
- :mod:`.curve`, :mod:`.correction`: the curves over theta and the answers' correction.
- :mod:`.settings`: chance levels and the other constants.

A link is fitted by the evaluation code, shipped by the catalogue
(:func:`atlascat.catalogue.load_score_link`) and used by the live runner: it sits below all
three and knows nothing of files shipped.
"""
from .curve import fit_monotone_spline
from .fit import ScoreLinkEstimator
from .frames import predict_frame
from .prediction import ScorePrediction, stop_note
from .score_link import ScoreLink, with_link_stops
from .settings import ANSWER_CHANCE, CHANCE

__all__ = ["ScoreLink", "ScoreLinkEstimator", "ScorePrediction", "predict_frame", "stop_note", "fit_monotone_spline",
           "with_link_stops",
           "CHANCE", "ANSWER_CHANCE"]
