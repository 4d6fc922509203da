"""Replay a suite test on recorded answers (one response matrix per member).

The subjects are the union of the matrices' models; a model missing from a member's matrix
(or an item it did not answer) cannot be asked that item, and its score on that member is
predicted from the others through the joint prior. Rounds of :class:`SuiteSession` run for
all subjects at once until each stops.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import ConfigError
from .session import SuiteConfig, SuiteSession

__all__ = ["SuiteResult", "simulate_suite", "answer_matrix", "fit_joint_link"]


@dataclass
class SuiteResult:
    """``scores``: the :meth:`SuiteSession.prediction` frame; ``session`` the final state
    (``asked`` / ``y`` per pool column)."""

    scores: pd.DataFrame
    session: SuiteSession


def answer_matrix(suite, responses: dict, subject_ids=None):
    """(subject_ids, Y (N, G)) of the recorded answers in the suite's pool order (NaN: none)."""
    from .posterior import ItemPool

    missing = [n for n in responses if n not in suite.names]
    if missing:
        raise ConfigError(f"{missing} are not members of suite {suite.name!r} "
                          f"({', '.join(suite.names)})")
    if subject_ids is None:
        subject_ids = list(dict.fromkeys(str(s) for rm in responses.values()
                                         for s in rm.subject_ids))
    ids = pd.Index([str(s) for s in subject_ids])
    pool = ItemPool.from_banks([m.bank for m in suite.members])
    Y = np.full((len(ids), len(pool)), np.nan)
    for b, (m, sl) in enumerate(zip(suite.members, pool.slices())):
        rm = responses.get(m.name)
        if rm is None:
            continue
        vals = rm.aligned_values(m.bank.item_ids, extra="ignore")
        pos = ids.get_indexer(pd.Index(rm.subject_ids.astype(str)))
        ok = pos >= 0
        Y[pos[ok], sl] = vals[ok]
    return list(ids), Y


def simulate_suite(suite, responses: dict, config: SuiteConfig | None = None, *,
                   subject_ids=None) -> SuiteResult:
    """Run the suite test on recorded answers: ``responses`` member name -> ResponseMatrix."""
    suite = suite.resolved()
    ids, Y = answer_matrix(suite, responses, subject_ids)
    return _replay(suite, ids, Y, config)


def _replay(suite, ids, Y, config) -> SuiteResult:
    """The suite test of subjects ``ids`` answering from ``Y`` (N, G; NaN: not obtainable)."""
    session = SuiteSession(suite, config, ids, available=np.isfinite(Y))
    while True:
        cols = session.next_columns()
        rows, k = np.nonzero(cols >= 0)
        if rows.size == 0:
            break
        c = cols[rows, k]
        session.record(rows, c, Y[rows, c])
    return SuiteResult(session.prediction(), session)


def fit_joint_link(suite, responses: dict, scores: dict, config: SuiteConfig | None = None,
                   subject_ids=None, answers: bool = True, neighbours: bool = True):
    """Fit the suite's joint link (:class:`~atlascat.suite.link.SuiteLink`) on calibration
    models: replay the suite test (``config``) on ``responses`` and stack each member's
    published score (``scores``: member -> Series, 0-1) on the members' predicted scores
    (``answers``, default: and on the replays' answer residuals, the answer stacking; held-out
    MAE of the average 0.71 -> 0.65 / 0.79 -> 0.69 on two seeds, docs/leaderboard.md);
    ``neighbours`` (default): and the neighbour correction on top
    (:func:`~atlascat.suite.neighbours.fit_neighbours`; its residual model replaces the link's).
    Subjects: those with every published score (default: all in ``responses``)."""
    from .link import SuiteLink, residual_model
    from .neighbours import fit_neighbours

    suite = suite.replace(joint_link=None).resolved()
    ids, Y = answer_matrix(suite, responses, subject_ids)
    truth = np.column_stack([scores[n].reindex(ids).to_numpy(float) for n in suite.names])
    keep = np.isfinite(truth).all(1)
    s = _replay(suite, [i for i, k in zip(ids, keep) if k], Y[keep], config).session
    p = s.predict(joint=False)
    link, ok, resid = SuiteLink.fit_with_residuals(
        p["g_mean"], p["g_cov"], truth[keep], residuals=p["resid"] if answers else None,
        seed=s.config.seed)
    if not neighbours:
        return link
    scorer = SuiteSession(suite.replace(joint_link=link), s.config)
    nb, sub, corrected = fit_neighbours(
        scorer._plain_points, Y[keep][ok], truth[keep][ok], np.asarray(s.subject_ids)[ok],
        s.asked[ok], s.y[ok], resid, weights=suite.weights, plain_resid_cov=link.resid_cov,
        plain_post_scale=link.post_scale, seed=s.config.seed)
    D, scale = residual_model(link.coef[:, :-1], corrected, p["g_cov"][ok][sub])
    return SuiteLink(link.coef, D, link.n_models, link.answer_weights, scale, nb)
