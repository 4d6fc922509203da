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
from .config import SuiteConfig
from .session import SuiteSession

__all__ = ["SuiteResult", "simulate_suite", "answer_matrix", "fit_joint_link", "replay_summary",
           "published_averages", "member_matrices"]


@dataclass
class SuiteResult:
    """``scores``: the :meth:`SuiteSession.prediction` frame; ``session`` the final state
    (``asked`` / ``y`` per pool column)."""

    scores: pd.DataFrame
    session: SuiteSession


def member_matrices(pairs, names, *, label: str = "BENCH", where: str = "") -> dict:
    """{member: matrix spec} of ``MEMBER=MATRIX`` pairs (a bare member name: its bundled
    matrix) for a suite of members ``names``; one line for a name that is not a member, one
    given twice, an empty matrix or no pair at all (``label``: how the message names a member,
    ``where``: what it is prefixed with)."""
    names = [str(n) for n in names]
    out = {}
    for p in pairs:
        name, sep, spec = str(p).partition("=")
        name, spec = name.strip().lower(), spec.strip() if sep else name.strip().lower()
        if name not in names:
            raise ConfigError(f"{where}{p!r}: {name!r} is not a member of the suite "
                              f"({', '.join(names)}); give {label}=MATRIX pairs")
        if not spec:
            raise ConfigError(f"{where}{p!r}: no matrix after '='; give {label}=MATRIX pairs")
        if name in out:
            raise ConfigError(f"{where}{name!r} is given twice")
        out[name] = spec
    if not out:
        raise ConfigError(f"{where}give the answers to replay: one {label}=MATRIX pair per "
                          f"member ({', '.join(names)}; bundled names allowed, e.g. arc=arc)")
    return out


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
                   subject_ids=None, on_progress=None) -> SuiteResult:
    """Run the suite test on recorded answers: ``responses`` member name -> ResponseMatrix.
    ``on_progress(phase, done, total)``: called after each round of items ("asking": items
    asked of the longest test so far, out of ``max_items``) and each block of predictions
    ("predicting"), for a progress bar."""
    suite = suite.resolved()
    ids, Y = answer_matrix(suite, responses, subject_ids)
    return _replay(suite, ids, Y, config, on_progress)


def _replay(suite, ids, Y, config, on_progress=None) -> SuiteResult:
    """The suite test of subjects ``ids`` answering from ``Y`` (N, G; NaN: not obtainable)."""
    session = SuiteSession(suite, config, ids, available=np.isfinite(Y))
    total = session.config.max_items
    while True:
        cols = session.next_columns()
        rows, k = np.nonzero(cols >= 0)
        if rows.size == 0:
            break
        c = cols[rows, k]
        session.record(rows, c, Y[rows, c])
        if on_progress is not None:
            on_progress("asking", int(session.n_items.max(initial=0)), total)
    block = None if on_progress is None else (lambda d, t: on_progress("predicting", d, t))
    return SuiteResult(session.prediction(on_block=block), session)


def replay_summary(result: SuiteResult, published=None) -> dict:
    """What a bulk replay says about itself: how many subjects, how many had answers on every
    member (the others are predicted from the members they have, with wider intervals), how
    many got no item at all (stop reason ``no_items``), items, the mean 95% width; and, where
    ``published`` (subject -> published average, 0-1; NaN or absent where unknown) is given,
    the error of the predicted average against it: n, MAE and RMSE in points, 95% coverage,
    over all subjects with a published average and over those with answers on every member."""
    scores = result.scores
    sess = result.session
    seen = sess.asked | sess.available  # answers that were, or could have been, asked
    has_all = np.stack([seen[:, sl].any(1) for sl in sess.pool.slices()], 1).all(1)
    out = {"n_subjects": int(len(scores)), "n_all_members": int(has_all.sum()),
           "n_no_items": int((scores["stop_reason"] == "no_items").sum()),
           "items_mean": float(scores["n_items"].mean()),
           "width_mean_points": float(100 * (scores["average_hi"] - scores["average_lo"]).mean()),
           "stop_reasons": scores["stop_reason"].value_counts().to_dict()}
    if published is not None:
        pub = pd.Series(published, dtype=float).reindex(scores["subject_id"].astype(str))
        known = np.isfinite(pub.to_numpy())
        for key, mask in (("error", known), ("error_all_members", known & has_all)):
            if not mask.any():
                continue
            p = pub.to_numpy()[mask]
            s = scores.loc[mask]
            err = 100 * (s["average"].to_numpy() - p)
            cover = (s["average_lo"].to_numpy() <= p) & (p <= s["average_hi"].to_numpy())
            out[key] = {"n": int(mask.sum()), "mae_points": float(np.mean(np.abs(err))),
                        "rmse_points": float(np.sqrt(np.mean(err ** 2))),
                        "coverage_95": float(cover.mean())}
    return out


def fit_joint_link(suite, responses: dict, scores: dict, config: SuiteConfig | None = None,
                   subject_ids=None, answers: bool = True, neighbours: bool = True):
    """Fit the suite's joint link (:class:`~atlascat.suite.link.SuiteLink`) on calibration
    models: replay the suite test (``config``) on ``responses`` and stack each member's
    published score (``scores``: member -> Series, 0-1) on the members' predicted scores
    (``answers``, default: and on the replays' answer residuals, the answer stacking;
    benchmarks/results/suite.md);
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


def published_averages(table: pd.DataFrame, suite) -> pd.Series:
    """Each model's published suite average (0-1) from a table of published scores: a model
    column (``model``, ``name`` or the first column) and one column per member (percent or
    0-1, as the leaderboard's score file); the suite-weighted mean where every member is
    known, NaN elsewhere."""
    key = next((c for c in ("model", "name") if c in table.columns), table.columns[0])
    missing = [n for n in suite.names if n not in table.columns]
    if missing:
        raise ConfigError(f"the published scores have no column for {missing}; they need a "
                          f"model column and one column per member ({', '.join(suite.names)})")
    vals = table[list(suite.names)].apply(pd.to_numeric, errors="coerce").to_numpy(float)
    if np.nanmax(vals, initial=0.0) > 1.0:
        vals = vals / 100.0
    avg = vals @ np.asarray(suite.weights, float) / float(np.sum(suite.weights))
    return pd.Series(avg, index=table[key].astype(str).to_numpy()).groupby(level=0).first()
