"""The step-wise adaptive test of one examinee (what live runs drive).

:class:`CATSession` is the engine core with n = 1: ``next_item`` selects (drawing
``config.uniforms_per_step`` uniforms from the session's generator), ``record`` scores and
updates the posterior, ``next_items(k)`` / ``record_many`` run joint rounds of k items. With
the generator ``rng.spawn(n)[i]`` a session reproduces examinee i of
:func:`~atlascat.cat.simulate.simulate_cat` exactly. ``to_dict`` / ``from_dict`` persist and
resume it (answers replayed, RNG state restored).
"""
from __future__ import annotations

import time

import numpy as np
import pandas as pd

from ..errors import BankError, ConfigError, LiveRunError, ResponseDataError, UnknownItemError
from ..irt.bank import ItemBank, normalize_item_id
from .config import CATConfig, tested_under_one_prior
from .state import _Engine
from .exposure import make_exposure_control
from .generators import _as_generator, generator_from_state, generator_state
from .tables import bank_fingerprint

__all__ = ["CATSession"]


class CATSession:
    """One examinee's adaptive test, driven one answer at a time.

    The reference design (catR; Magis & Raiche, 2012): after each answer theta is the EAP
    under the N(prior_mean, prior_sd^2) prior (Bock & Mislevy, 1982; or catR's BM, ML, WL:
    ``CATConfig(estimator="map" | "ml" | "wle")``), the next item maximizes
    Fisher information I_j(theta) = P_j'(theta)^2 / (P_j Q_j) among the unused ones (randomesque:
    one of the best k at random; Kingsbury & Zara, 1989), and the test stops once
    SE = 1 / sqrt(sum_j I_j(theta) + 1 / prior_sd^2) <= se_stop after min_items, or at
    max_items; :class:`CATConfig` chooses other selection and stopping rules.

    Parameters
    ----------
    bank : ItemBank
    config : CATConfig, default ``CATConfig()``
    rng : numpy Generator or int seed; the session draws ``config.uniforms_per_step`` uniforms
        from it per selection (so it can be persisted and resumed exactly).
    tracker : ExposureTracker shared by the sessions of one population, for
        ``exposure="eligibility"`` (a private one if None).

    Usage::

        session = CATSession(bank, CATConfig(se_stop=0.2), rng=np.random.default_rng(1))
        while (item := session.next_item()) is not None:
            session.record(item, ask_model(item))
        session.theta, session.se, session.stop_reason

    Batched rounds (k items asked concurrently, e.g. to keep a GPU server busy)::

        while items := session.next_items(8):
            session.record_many(items, ask_model_concurrently(items))   # None = no answer

    ``record`` also accepts items the caller chose (they count like selected ones, and drop an
    outstanding selection); ``skip(item)`` takes an item out of the pool without scoring it.
    ``to_dict()`` gives a JSON-serializable snapshot (config, answers, RNG state, the round's
    unanswered items) and ``CATSession.from_dict(d, bank)`` resumes it exactly.
    """

    def __init__(self, bank: ItemBank, config: CATConfig | None = None, rng=None, *,
                 tracker=None):
        self.bank = bank
        self.config = CATConfig() if config is None else config
        if not isinstance(self.config, CATConfig):
            raise ConfigError(f"config must be a CATConfig, got {type(self.config).__name__}")
        tested_under_one_prior(bank, self.config)
        self.rng = _as_generator(rng)
        exposure = make_exposure_control(bank, self.config, tracker=tracker)
        if exposure is not None:
            exposure.start(1)
        self._engine = _Engine(bank, self.config, 1, exposure=exposure)
        self._engine.sh_rejected = [[]]
        self._pending: list[int] = []   # selected, not answered yet (a round of next_items)
        self._pending_share = 0.0       # selection seconds charged to each pending item
        self._unchecked = False         # answers recorded since the last stopping check
        self._seconds: list[float] = []
        self._skipped: list[int] = []
        self._events: list[tuple[str, int]] = []  # ("r" | "s", item) in order, for resuming
        self._row = np.zeros(1, dtype=np.intp)

    # -------------------------------------------------------------- properties
    @property
    def theta(self) -> float:
        """The config's estimate (EAP by default) after the answers recorded so far."""
        return float(self._engine.theta[0])

    @property
    def se(self) -> float:
        """The config's ``se_method``: 1 / sqrt(test information + 1 / prior_sd^2) (catR's,
        the default) or the posterior SD; :attr:`posterior_sd` is always the latter (what
        :func:`~atlascat.irt.ability.estimate_ability`'s EAP reports)."""
        return float(self._engine.se[0])

    @property
    def posterior_sd(self) -> float:
        """The SD of theta's posterior on the quadrature grid."""
        return float(self._engine.post_sd[0])

    @property
    def n_items(self) -> int:
        return int(self._engine.n_items[0])

    @property
    def n_skipped(self) -> int:
        return int(self._engine.n_skipped[0])

    @property
    def done(self) -> bool:
        return bool(self._engine.done[0])

    @property
    def stop_reason(self) -> str | None:
        return self._engine.stop_reason[0] or None

    @property
    def administered(self) -> list[str]:
        h = self._engine.history_of(0)
        return [str(self.bank.item_ids[j]) for j in h["items"]]

    @property
    def skipped(self) -> list[str]:
        return [str(self.bank.item_ids[j]) for j in self._skipped]

    @property
    def history(self) -> pd.DataFrame:
        """One row per scored item: item_id, order, score, theta, se, seconds."""
        h = self._engine.history_of(0)
        return pd.DataFrame({
            "item_id": pd.Series(self.bank.item_ids[h["items"]], dtype=object).astype(str),
            "order": np.arange(1, h["items"].size + 1),
            "score": h["scores"],
            "theta": h["theta"],
            "se": h["se"],
            "seconds": np.asarray(self._seconds, dtype=float),
        })

    def __repr__(self) -> str:
        state = f"done ({self.stop_reason})" if self.done else "running"
        return (f"CATSession(n_items={self.n_items}, theta={self.theta:.4f}, se={self.se:.4f}, "
                f"{state})")

    # -------------------------------------------------------------- stepping
    def next_item(self) -> str | None:
        """The item to administer next, or None once the test is over.

        Calling it again before ``record`` returns the same item (no randomness consumed);
        while a round from :meth:`next_items` is outstanding, its first unanswered item.
        """
        if self.done:
            return None
        if self._pending:
            return str(self.bank.item_ids[self._pending[0]])
        t0 = time.perf_counter()
        u = self.rng.random(self.config.uniforms_per_step)
        item = int(self._engine.select(self._row, u[None, :])[0])
        if item < 0:
            self._engine.finish(self._row, "bank_exhausted")
            return None
        self._pending = [item]
        self._pending_share = time.perf_counter() - t0
        return str(self.bank.item_ids[item])

    def next_items(self, k: int, *, cut: str = "predicted", method: str = "mepv") -> list[str]:
        """A round of up to ``k`` items chosen jointly, to administer concurrently; [] once the
        test is over.

        Greedy sequential selection (the engine's batch selection): each pick is an ordinary
        selection (criterion, randomesque, exposure control, content balancing, budget) after
        the posterior was updated with the expected answers of the round's earlier picks.
        The round is shorter than k where it reaches ``max_items``, the budget or the end of
        the bank, and (``cut="predicted"``, default) where the test is predicted to stop: the
        stopping rules fire on that expected state. ``method`` scores picks 2..k:
        "mepv" (default) by the expected reduction of the posterior variance over the
        posterior at the start of the round, "expected" by the criterion at the updated theta,
        "preposterior" by the expected information under the preposterior of the estimate
        (benchmarks/results/cat_batch.md has the measurement behind the default). ``k = 1`` is exactly :meth:`next_item`.
        Answer the round with :meth:`record_many` (or :meth:`record` / :meth:`skip` item by
        item, in any order); the stopping rules are checked once the whole round is answered.
        Calling it again before then returns the round's unanswered items (no randomness
        consumed). Uses ``config.uniforms_per_step`` uniforms per pick.
        """
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise ConfigError(f"batch size k must be an integer >= 1, got {k!r}")
        if self.done:
            return []
        if self._pending:
            return [str(self.bank.item_ids[j]) for j in self._pending]
        if k == 1:
            item = self.next_item()
            return [] if item is None else [item]
        t0 = time.perf_counter()
        ups = self.config.uniforms_per_step
        picks = self._engine.select_batch(self._row, int(k),
                                          lambda r: self.rng.random(ups)[None, :], cut=cut,
                                          method=method)[0]
        picks = picks[picks >= 0]
        if picks.size == 0:
            self._engine.finish(self._row, "bank_exhausted")
            return []
        self._pending = [int(j) for j in picks]
        self._pending_share = (time.perf_counter() - t0) / picks.size
        return [str(self.bank.item_ids[j]) for j in self._pending]

    @property
    def pending(self) -> list[str]:
        """Items selected (by next_item / next_items) and not answered yet."""
        return [str(self.bank.item_ids[j]) for j in self._pending]

    def _position(self, item_id) -> int:
        for key in (str(item_id), normalize_item_id(str(item_id))):
            if key in self.bank:
                return int(self.bank.index_of(key))
        raise UnknownItemError(f"item {item_id!r} is not in the bank ({len(self.bank)} items)")

    @staticmethod
    def _score(item_id, score) -> float:
        try:
            y = float(score)
        except (TypeError, ValueError):
            raise ResponseDataError(f"score for item {item_id!r} must be a number in [0, 1], "
                                    f"got {score!r}" + (" (use skip() for an item without an "
                                                        "answer)" if score is None or
                                                        str(score) == "<NA>" else "")) from None
        if not 0.0 <= y <= 1.0:
            raise ResponseDataError(f"score for item {item_id!r} must be in [0, 1], got {score!r}"
                                    " (use skip() for an item without an answer)")
        return y

    def _check_recordable(self, item_id, j):
        if self._engine.used[0, j] and j not in self._skipped:
            raise LiveRunError(f"item {item_id!r} was already administered in this session")

    def _unskip(self, j: int) -> None:
        """A previously skipped item gets an answer after all."""
        if j in self._skipped:
            self._skipped.remove(j)
            self._engine.unskip(0, j)

    def _record(self, j: int, y: float) -> None:
        """Score item j; the stopping rules are checked once no selected item is outstanding."""
        eng = self._engine
        t0 = time.perf_counter()
        self._unskip(j)
        eng.record_one(0, j, y)
        share = 0.0
        if j in self._pending:
            self._pending.remove(j)
            share = self._pending_share
        elif self._pending:  # an item the caller chose: the outstanding selection is dropped
            self._pending = []
        self._unchecked = True
        if not self._pending:
            eng.check_stop(self._row)
            self._unchecked = False
        self._seconds.append(time.perf_counter() - t0 + share)
        self._events.append(("r", j))

    def record(self, item_id, score) -> None:
        """Record the score (0/1, or partial credit in [0, 1]) of an administered item."""
        if self.done:
            raise LiveRunError(f"the session is finished ({self.stop_reason}); start a new one "
                               "to administer more items")
        j = self._position(item_id)
        y = self._score(item_id, score)
        self._check_recordable(item_id, j)
        self._record(j, y)

    def record_many(self, item_ids, scores) -> None:
        """Record the answers of a round: ``scores[i]`` (0/1 or partial credit) for
        ``item_ids[i]``; None or NaN = no answer (the item is skipped). Everything is checked
        before anything is recorded; the answers enter in the order given and the stopping
        rules are checked once, when no item of the round is outstanding."""
        if self.done:
            raise LiveRunError(f"the session is finished ({self.stop_reason}); start a new one "
                               "to administer more items")
        item_ids = list(item_ids)
        scores = list(scores)
        if len(item_ids) != len(scores):
            raise ResponseDataError(f"record_many got {len(item_ids)} item ids and {len(scores)} "
                                    "scores; give one score (or None) per item")
        plan, seen = [], set()
        for item_id, score in zip(item_ids, scores):
            j = self._position(item_id)
            if j in seen:
                raise LiveRunError(f"item {item_id!r} appears twice in record_many")
            seen.add(j)
            missing = score is None or (isinstance(score, (float, np.floating))
                                        and np.isnan(score))
            if missing:
                if self._engine.used[0, j]:
                    raise LiveRunError(f"item {item_id!r} was already used in this session")
                plan.append((j, None))
            else:
                y = self._score(item_id, score)
                self._check_recordable(item_id, j)
                plan.append((j, y))
        for j, y in plan:
            if y is None:
                self._skip(j)
            else:
                self._record(j, y)

    def _skip(self, j: int) -> None:
        self._engine.skip(self._row, np.array([j]))
        self._skipped.append(j)
        self._events.append(("s", j))
        if j in self._pending:
            self._pending.remove(j)
            if not self._pending and self._unchecked and not self.done:
                self._engine.check_stop(self._row)
                self._unchecked = False

    def skip(self, item_id) -> None:
        """Take an item out of the pool without scoring it (e.g. the model gave no answer)."""
        if self.done:
            raise LiveRunError(f"the session is finished ({self.stop_reason})")
        j = self._position(item_id)
        if self._engine.used[0, j]:
            raise LiveRunError(f"item {item_id!r} was already used in this session")
        self._skip(j)

    # -------------------------------------------------------------- persistence
    def to_dict(self) -> dict:
        """JSON-serializable snapshot; ``from_dict(d, bank)`` resumes exactly (RNG included)."""
        eng = self._engine
        h = eng.history_of(0)
        ids = self.bank.item_ids
        return {
            "format": "atlascat.CATSession/1",
            "config": self.config.to_dict(),
            "bank": {"n_items": len(self.bank), "fingerprint": bank_fingerprint(self.bank)},
            "events": [[kind, str(ids[j])] for kind, j in self._events],
            "scores": [float(v) for v in h["scores"]],
            "seconds": [float(v) for v in self._seconds],
            "sh_rejected": [str(ids[j]) for j in eng.sh_rejected[0]],
            "pending": str(ids[self._pending[0]]) if self._pending else None,
            "pending_seconds": self._pending_share,
            "pending_batch": [str(ids[j]) for j in self._pending],
            "unchecked": self._unchecked,
            "done": self.done,
            "stop_reason": self.stop_reason,
            "theta": self.theta,
            "se": self.se,
            "rng": generator_state(self.rng),
        }

    @classmethod
    def from_dict(cls, d: dict, bank: ItemBank, *, tracker=None) -> "CATSession":
        """Resume a session from ``to_dict()`` output with the same bank.

        ``tracker``: the shared ExposureTracker of an ``exposure="eligibility"`` population (the
        resumed answers are not counted again)."""
        from ..validation import check_snapshot

        check_snapshot(d)  # truncated / edited snapshots: one clear ConfigError
        fp = d["bank"]["fingerprint"]
        if fp != bank_fingerprint(bank):
            raise BankError("the bank differs from the one the session was run with "
                            f"(fingerprint {bank_fingerprint(bank)} != {fp}); pass the same bank")
        session = cls(bank, CATConfig.from_dict(d["config"]), generator_from_state(d["rng"]),
                      tracker=tracker)
        eng = session._engine
        exposure, eng.exposure = eng.exposure, None  # replaying: nothing new is administered
        if exposure is not None and hasattr(exposure, "tracker"):
            exposure.tracker.n_examinees -= 1  # this examinee was counted when it started
        scores = iter(d["scores"])
        seconds = iter(d["seconds"])
        for kind, item in d["events"]:
            j = session._position(item)
            if kind == "s":
                eng.skip(session._row, np.array([j]))
                session._skipped.append(j)
            else:
                session._unskip(j)
                y, sec = next(scores, None), next(seconds, None)
                if y is None or sec is None:
                    raise ConfigError("CATSession snapshot is truncated: fewer scores/seconds "
                                      "than answer events; save it again with to_dict()")
                eng.record_one(0, j, float(y))
                session._seconds.append(sec)
            session._events.append((kind, j))
        for item in d.get("sh_rejected", []):
            j = session._position(item)
            eng.used[0, j] = True
            eng.n_used[0] += 1
            eng.sh_rejected[0].append(j)
        eng.exposure = exposure
        eng.done[0] = bool(d["done"])
        eng.stop_reason[0] = d["stop_reason"] or ""
        batch = d.get("pending_batch")
        if batch is None:  # snapshots written before batched rounds
            batch = [] if d.get("pending") is None else [d["pending"]]
        session._pending = [session._position(item) for item in batch]
        session._pending_share = float(d.get("pending_seconds", 0.0))
        session._unchecked = bool(d.get("unchecked", False))
        return session
