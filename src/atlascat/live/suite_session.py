"""A suite asked live as one run: the members' banks as one composite bank, and a
:class:`~atlascat.suite.SuiteSession` behind the session interface the live runner drives.

The composite bank concatenates the members' content banks; item ids become
``<member>/<item_id>`` and each item keeps its metadata, so it is asked with its own benchmark's
protocol (requests, scorer). :class:`SuiteLiveSession` gives the runner what a
:class:`~atlascat.cat.session.CATSession` gives it: ``next_item`` / ``next_items``, ``record`` /
``record_many``, ``n_items``, ``theta`` and ``se`` for the step log (here the predicted
average, 0-1, and the average's SE, 0-1), ``stop_reason`` and a JSON snapshot
(``to_dict`` / ``from_dict``). The snapshot holds the answers round by round and the random
generator's state: a resumed run replays the answers into a fresh SuiteSession, restores the
generator and picks exactly what the uninterrupted run would have picked.
"""
from __future__ import annotations

import functools
import math
from pathlib import Path

import numpy as np
import pandas as pd

from ..catalogue.bankref import BankRef
from ..catalogue.suites import SEP
from ..errors import ConfigError
from ..scorelink.prediction import chance_reach
from ..scorelink.score_link import percentile_of

__all__ = ["SuiteLiveSession", "composite_for", "load_live_suite", "suite_ref", "split_item",
           "average_percentile", "percentile_columns", "SEP"]



@functools.lru_cache(maxsize=8)
def _load(ref: str):
    from ..suite import load_suite

    return load_suite(ref)


def suite_ref(name_or_path) -> str:
    """How a run names its suite (:class:`~atlascat.catalogue.BankRef`'s name of a suite: a
    bundled name lower-cased, a file as its absolute path)."""
    return BankRef.from_option(name_or_path, option="--suite", kinds=("suite",)).name


def load_live_suite(ref: str):
    """The suite (banks and links loaded) a run was started on; cached per process."""
    suite = _load(str(ref))
    if suite.prior is None:
        raise ConfigError(f"suite {ref!r} has no joint prior; a live suite run needs one")
    return suite


def split_item(item_id: str) -> tuple[str, str]:
    """``"arc/17"`` -> ``("arc", "17")``."""
    member, sep, item = str(item_id).partition(SEP)
    if not sep:
        raise ConfigError(f"item {item_id!r} is not a suite item (<member>{SEP}<item_id>)")
    return member, item


def average_percentile(ref: str, score) -> float | None:
    """Percentile (0-100) of an average (0-1) among the leaderboard models' published averages
    (``<suite>_averages.csv`` beside the suite file: quantiles, built by
    ``benchmarks/build_suite_averages.py``); None when the suite ships none."""
    from ..suite import suite_path

    p = Path(str(ref))
    try:
        path = p if p.suffix == ".json" else suite_path(str(ref))
    except ConfigError:
        return None
    q_path = path.with_name(f"{path.stem}_averages.csv")
    if score is None or not q_path.exists():
        return None
    if not math.isfinite(float(score)):
        return None
    return percentile_of(_quantiles(str(q_path)), score)


@functools.lru_cache(maxsize=8)
def _quantiles(path: str) -> np.ndarray:
    q = pd.read_csv(path)["average"].to_numpy(float)
    return np.maximum.accumulate(q)


class SuiteLiveSession:
    """One subject's suite test with the live runner's session interface (see the module)."""

    def __init__(self, ref: str, config=None, subject: str | None = None):
        from ..suite import SuiteConfig, SuiteSession

        self.ref = str(ref)
        self.suite = load_live_suite(self.ref)
        self.config = config if config is not None else SuiteConfig()
        #: the model's name: a calibration model of that name is not its own neighbour (a
        #: replayed leaderboard model is predicted as a new model, as atlas simulate --suite)
        self.subject = str(subject) if subject else "subject"
        self.inner = SuiteSession(self.suite, self.config, subject_ids=[self.subject])
        self.rounds: list = []
        self.skipped: list = []
        self.theta = float("nan")
        self.se = float("inf")

    # ------------------------------------------------------------------ the runner's interface
    @property
    def n_items(self) -> int:
        return int(self.inner.n_items[0])

    @property
    def stop_reason(self) -> str | None:
        return str(self.inner.stop_reason[0]) or None

    def next_items(self, k=None) -> list[str]:
        """The next round's items (the suite's own batch size; ``k`` is the run's, the same)."""
        return [f"{m}{SEP}{i}" for m, i in self.inner.next_items()[0]]

    def next_item(self):
        items = self.next_items()
        return items[0] if items else None

    def record_many(self, items, scores) -> None:
        """A round's scores; an item scored None (no score) is skipped (:meth:`skip`)."""
        for i in [i for i, s in zip(items, scores) if s is None]:
            self.skip(i)
        kept = [(i, s) for i, s in zip(items, scores) if s is not None]
        items, scores = [i for i, _ in kept], [s for _, s in kept]
        answers = {split_item(i): float(s) for i, s in zip(items, scores)}
        self.inner.update(answers)
        self.rounds.append([[str(i), int(s)] for i, s in zip(items, scores)])
        self._estimate()

    def record(self, item, score) -> None:
        self.record_many([item], [score])

    def restrict_to(self, answerable) -> None:
        """Never pick an item outside ``answerable`` (the item ids a recorded subject has
        answers for), known before the first pick as ``atlas simulate --suite`` knows its
        matrices' blanks: the same items and prediction as simulate with the same seed. Not in
        the snapshot: the runner restricts a resumed run again."""
        pool, names = self.inner.pool, self.suite.names
        keep = np.array([f"{names[int(m)]}{SEP}{i}" in answerable
                         for m, i in zip(pool.member, pool.item_ids)], bool)
        self.inner.available[0] &= keep

    def skip(self, item) -> None:
        """Never pick ``item`` (a recorded subject has no answer to it, as a blank of
        ``atlas simulate --suite``'s matrices); kept in the snapshot."""
        self.inner.update({split_item(item): None})
        self.skipped.append(str(item))

    def _estimate(self) -> None:
        """theta / se of the step log: the predicted average and its SE (0-1)."""
        self.inner.refresh()
        self.se = float(self.inner.se[0]) / 100.0
        self.theta = float(self.inner.predict()["average"][0])

    def expected_accuracy(self) -> float:
        """Expected proportion correct over the composite bank at the members' posterior modes."""
        mode = self.inner.mode[0]
        p = [np.asarray(m.bank.probability(float(mode[b]))) for b, m in
             enumerate(self.suite.members)]
        return float(np.mean(np.concatenate(p)))

    # ------------------------------------------------------------------ snapshot
    def to_dict(self) -> dict:
        return {"type": "suite", "suite": self.ref, "subject": self.subject,
                "config": self.config.to_dict(),
                "rounds": self.rounds, "skipped": self.skipped,
                "rng": self.inner.rngs[0].bit_generator.state,
                "theta": self.theta, "se": self.se,
                "stop_reason": self.stop_reason}

    @classmethod
    def from_dict(cls, state: dict, bank=None, subject: str | None = None) -> "SuiteLiveSession":
        """Replay the stored answers round by round into a fresh session (same sums in the same
        order), then restore the generator: the next picks are the uninterrupted run's.
        ``subject``: the run's model, for a snapshot that does not name it."""
        from ..suite import SuiteConfig

        out = cls(state["suite"], SuiteConfig(**state["config"]),
                  subject=state.get("subject") or subject)
        for item in state.get("skipped", []):
            out.skip(item)
        for rnd in state.get("rounds", []):
            out.inner.update({split_item(i): float(s) for i, s in rnd})
            out.rounds.append([[str(i), int(s)] for i, s in rnd])
        out.inner.rngs[0].bit_generator.state = state["rng"]
        if state.get("theta") is not None:
            out.theta, out.se = float(state["theta"]), float(state["se"])
        return out

    # ------------------------------------------------------------------ the result
    def _guessing(self) -> bool:
        """Whether no member's answers (k right of n asked) can be told from guessing
        (:func:`~atlascat.scorelink.honesty.chance_not_excluded`; members not asked aside), as
        the suite's chance bound (:func:`atlascat.suite.predict.chance_bounds`) reads them."""
        from ..scorelink.honesty import chance_not_excluded

        pool = self.inner.pool
        n = self.inner.asked[0].astype(float) @ pool.onehot
        k = np.where(self.inner.asked[0], np.nan_to_num(self.inner.y[0]), 0.0) @ pool.onehot
        return all(bool(chance_not_excluded(m.link, n[b], k[b]))
                   for b, m in enumerate(self.suite.members) if n[b] > 0)

    def prediction(self, stop_reason: str | None = None) -> dict:
        """The suite's result: ``average`` {score, lo, hi, percentile}, ``benchmarks``
        [{name, weight, score, lo, hi, items, percentile[, warning]}] (scores 0-1; the warning
        as a single bank's: the interval reaches chance, outside the link's calibration models)
        and
        ``nearest_models`` [{model, agreement}]: the leaderboard models whose answers to the
        asked items were most alike (the joint link's neighbour correction reads their
        errors)."""
        self.inner.refresh()
        row = self.inner.prediction().iloc[0]
        avg = {"score": float(row["average"]), "lo": float(row["average_lo"]),
               "hi": float(row["average_hi"])}
        avg["percentile"] = average_percentile(self.ref, avg["score"])
        members = [{"name": m.name, "weight": float(m.weight), "score": float(row[m.name]),
                    "lo": float(row[f"{m.name}_lo"]), "hi": float(row[f"{m.name}_hi"]),
                    "items": int(row[f"{m.name}_items"]),
                    "percentile": _link_percentile(m.link, float(row[m.name]))}
                   for m in self.suite.members]
        guessing = self._guessing()
        for m, b in zip(self.suite.members, members):
            warning = (NOT_ASKED if b["items"] == 0 else
                       member_warning(m.link, b["score"], b["lo"], b["hi"], guessing=guessing))
            if warning:
                b["warning"] = warning
        nearest = [{"model": m, "agreement": a} for m, a in self.inner.nearest_models()[0]]
        return {"suite": self.suite.name, "average": avg, "benchmarks": members,
                "n_items": self.n_items, "se_points": float(self.inner.se[0]),
                "stop_reason": stop_reason or self.stop_reason, "nearest_models": nearest}


#: a member the test asked nothing of (a replayed model without its answers, a test stopped
#: early): its score is the joint prior's guess from the other members' answers
NOT_ASKED = "not asked: predicted from the other benchmarks' answers"


def member_warning(link, score: float, lo: float, hi: float, *,
                   guessing: bool = True) -> str | None:
    """A member's one-line warning, worded as a single bank's (:func:`atlascat.scorelink.prediction.
    stop_note`, :func:`~atlascat.scorelink.prediction.chance_reach`): "its 95% interval (lo% to
    hi%) reaches down to chance (c%): the score may be no better than guessing" when the 95%
    interval reaches within 2 points of
    the benchmark's chance level (on a benchmark whose models publish well below chance,
    TruthfulQA's mc2: only when no answer of the test can be told from guessing, ``guessing``;
    a strong model that picks the misconceptions publishes 30-46% and is not at chance), else
    "outside the link's calibration models" when the score lies beyond every calibration
    model's published score; None otherwise."""
    support = getattr(link, "support", None) or {}
    chance = support.get("chance")
    floor = support.get("floor")
    below = chance is not None and floor is not None and floor < chance - 0.05
    if chance is not None and lo <= chance + 0.02 and (guessing or not below):
        return chance_reach(lo, hi, chance)
    low_high = support.get("score_range")
    if low_high is not None and not low_high[0] <= score <= low_high[1]:
        return (f"outside the link's calibration models (their scores "
                f"{100 * low_high[0]:.0f}-{100 * low_high[1]:.0f}%)")
    return None


def percentile_columns(ref: str, suite, table) -> dict:
    """The percentiles of a suite replay's predictions (``table``: :func:`~atlascat.suite.
    simulate_suite`'s scores, ``atlas simulate --suite``'s suite_scores.csv), as a live run's
    result gives them: ``average_percentile`` among the leaderboard models' published
    averages (:func:`average_percentile`), ``<member>_percentile`` through each member's link
    (None where there is none)."""
    out = {"average_percentile": [average_percentile(ref, float(v)) for v in table["average"]]}
    for m in suite.members:
        out[f"{m.name}_percentile"] = [_link_percentile(m.link, float(v)) for v in table[m.name]]
    return out


def _link_percentile(link, score: float) -> float | None:
    try:
        return float(link.percentile(score))
    except Exception:  # noqa: BLE001 - a link without the leaderboard's distribution
        return None


def composite_for(ref: str):
    """The composite bank of a suite run's suite (:meth:`BankRef.load` of the suite, cached per
    process); the suite must have the joint prior a live run needs."""
    load_live_suite(ref)
    return BankRef("suite", str(ref)).load()
