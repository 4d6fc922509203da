"""Suites: several benchmarks as one adaptive test aimed at their aggregate.

- :class:`Suite`, :class:`SuiteMember`, :func:`load_suite`: the definition (plain data).
- :class:`SuitePrior`, :func:`fit_prior`: the joint normal prior over the members' thetas.
- :class:`SuiteSession`, :class:`SuiteConfig`: the test step by step (``next_items``,
  ``update``, ``prediction``), joint posterior by Laplace + importance sampling.
- :class:`SuiteLink`, :func:`fit_joint_link`: the joint score link (stacking on replays).
- :class:`NeighbourCorrection`: the joint link's correction from the calibration models that
  answered alike (:mod:`atlascat.suite.neighbours`).
- :func:`simulate_suite`: replay on recorded answers.
"""
from .._lazy import lazy_names

#: public name -> the submodule that defines it (loaded on first use: ``atlascat.suite.config``
#: alone stays light for the command line)
_LAZY = {"Suite": "definition", "SuiteMember": "definition", "load_suite": "definition",
         "bundled_suites": "definition", "suite_path": "definition", "SuitePrior": "prior",
         "fit_prior": "prior", "SuiteConfig": "config", "SuiteSession": "session",
         "SuiteLink": "link", "NeighbourCorrection": "neighbours", "SuiteResult": "simulate",
         "answer_matrix": "simulate", "fit_joint_link": "simulate",
         "published_averages": "simulate", "replay_summary": "simulate",
         "simulate_suite": "simulate", "member_matrices": "simulate"}

__all__ = list(_LAZY)

__getattr__, __dir__ = lazy_names(__name__, _LAZY)
