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
from .definition import Suite, SuiteMember, bundled_suites, load_suite, suite_path
from .prior import SuitePrior, fit_prior
from .session import SuiteConfig, SuiteSession
from .link import SuiteLink
from .neighbours import NeighbourCorrection
from .simulate import (SuiteResult, answer_matrix, fit_joint_link, published_averages,
                       replay_summary, simulate_suite)

__all__ = ["Suite", "SuiteMember", "load_suite", "bundled_suites", "suite_path", "SuitePrior",
           "fit_prior", "SuiteConfig", "SuiteSession", "SuiteResult", "simulate_suite",
           "replay_summary", "published_averages",
           "answer_matrix", "SuiteLink", "fit_joint_link", "NeighbourCorrection"]
