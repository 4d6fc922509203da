"""The CAT engine: one core for batched simulation and step-by-step live sessions.

Algorithm (ATLAS paper, Algorithm 1), for every examinee::

    first item: uniform among items with |b - theta0| < window (nearest item if none)
    repeat:     administer, score, update the posterior, estimate theta and SE
                stop?  (SE <= tau and n >= min_items, or n = max_items, or another rule)
                next item: randomesque pick among the k best by the selection criterion

Estimation. The log-posterior of each examinee lives on a fixed quadrature grid and is updated
incrementally: answering item j with score y adds y log P_j(theta_q) + (1 - y) log Q_j(theta_q)
to node q (O(n_nodes) per answer). EAP theta = sum_q w_q theta_q / sum_q w_q and posterior SD
follow (Bock and Mislevy, 1982). The reported SE is either the posterior SD or, as catR's
``semTheta`` for a Bayesian estimate, 1 / sqrt(sum_j I_j(theta) + 1 / prior_sd^2) over the
administered items (``se_method``).

Batching. :class:`_Engine` holds the state of n examinees as arrays; :func:`simulate_cat` advances
all active examinees together (one step = one selection + one answer for each of them), so the
hot path is NumPy over (examinee x item) blocks with no Python loop over items or examinees.
:class:`CATSession` is the same engine with n = 1. Every computation is row-wise, and each
examinee draws its random numbers from its own generator in a fixed amount per selection
(``config.uniforms_per_step``), so with ``rng.spawn`` children a batched simulation and
sessions run one by one give identical item sequences and estimates.

References
----------
Bock, R. D. and Mislevy, R. J. (1982). Adaptive EAP estimation of ability in a microcomputer
environment. Applied Psychological Measurement, 6(4), 431-444.
Magis, D. and Raiche, G. (2012). Random generation of response patterns under computerized
adaptive testing with the R package catR. Journal of Statistical Software, 48(8).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..errors import BankError, ConfigError, LiveRunError, ResponseDataError
from ..irt.bank import ItemBank, normalize_item_id
from . import security
from .answers import CallableAnswers, ModelAnswers, ReplayAnswers, UniformStreams
from .config import CATConfig
from .core import _Engine
from .exposure_control import make_exposure_control
from .generators import _as_generator, examinee_generators
from .rounds import BATCH_METHODS
from .tables import _TABLE_CACHE, _Tables, _tables, bank_fingerprint  # noqa: F401 (re-export)

__all__ = ["CATSession", "CATResult", "simulate_cat", "bank_fingerprint", "examinee_generators",
           "BATCH_METHODS"]

_REPICK_EXTRA = 16  # ranked candidates kept beyond the pick size for re-picks after skips


# ------------------------------------------------------------------------------ session
class CATSession:
    """One examinee's adaptive test, driven one answer at a time.

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
        return float(self._engine.theta[0])

    @property
    def se(self) -> float:
        return float(self._engine.se[0])

    @property
    def posterior_sd(self) -> float:
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
        (docs/cat.md has the measurement behind the defaults). ``k = 1`` is exactly :meth:`next_item`.
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
        index = self._engine.tab.index
        key = str(item_id)
        j = index.get(key)
        if j is None:
            j = index.get(normalize_item_id(key))
            if j is None:
                raise LiveRunError(f"item {item_id!r} is not in the bank ({len(self.bank)} items)")
        return j

    @staticmethod
    def _score(item_id, score) -> float:
        try:
            y = float(score)
        except (TypeError, ValueError):
            raise ResponseDataError(f"score for item {item_id!r} must be a number in [0, 1], "
                                    f"got {score!r}") from None
        if not 0.0 <= y <= 1.0:
            raise ResponseDataError(f"score for item {item_id!r} must be in [0, 1], got {score!r}"
                                    " (use skip() for an item without an answer)")
        return y

    def _check_recordable(self, item_id, j):
        if self._engine.used[0, j] and j not in self._skipped:
            raise LiveRunError(f"item {item_id!r} was already administered in this session")

    def _record(self, j: int, y: float) -> None:
        """Score item j; the stopping rules are checked once no selected item is outstanding."""
        eng = self._engine
        t0 = time.perf_counter()
        if j in self._skipped:  # a previously skipped item gets an answer after all
            self._skipped.remove(j)
            eng.used[0, j] = False
            eng.n_skipped[0] -= 1
            eng.n_used[0] -= 1
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
            "rng": _jsonable_state(self.rng.bit_generator.state),
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
        state = d["rng"]
        bitgen = getattr(np.random, state["bit_generator"])()
        bitgen.state = state
        session = cls(bank, CATConfig.from_dict(d["config"]), np.random.Generator(bitgen),
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
                if j in session._skipped:
                    session._skipped.remove(j)
                    eng.used[0, j] = False
                    eng.n_skipped[0] -= 1
                    eng.n_used[0] -= 1
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


def _jsonable_state(state):
    if isinstance(state, dict):
        return {k: _jsonable_state(v) for k, v in state.items()}
    if isinstance(state, np.ndarray):
        return state.tolist()
    if isinstance(state, np.integer):
        return int(state)
    return state


# ------------------------------------------------------------------------------ simulation
@dataclass
class CATResult:
    """Outcome of :func:`simulate_cat`.

    Attributes
    ----------
    persons : DataFrame, one row per examinee: subject_id, theta, se, posterior_sd, n_items,
        n_skipped, seconds, stop_reason (+ theta_ref, error when reference thetas were given)
    administered : DataFrame (long), one row per scored item: subject_id, item_id, order, score,
        theta, se
    n_skipped : int, replayed items without an answer (selected, not scored)
    exposure : Series indexed by item id, share of examinees who were given the item
    wall_seconds : float, total wall time of the simulation
    """

    persons: pd.DataFrame
    administered: pd.DataFrame
    n_skipped: int
    exposure: pd.Series
    config: CATConfig
    wall_seconds: float
    item_matrix: np.ndarray = field(repr=False)   # (n, max_items) bank positions, -1 padded
    item_ids: np.ndarray = field(repr=False)
    sh_trials: np.ndarray | None = field(default=None, repr=False)
    batch_size: int = 1

    @property
    def n_examinees(self) -> int:
        return len(self.persons)

    def __repr__(self) -> str:
        p = self.persons
        n = len(p)
        items = f", mean items {p['n_items'].mean():.1f}" if n and "n_items" in p else ""
        se = f", mean SE {p['se'].mean():.3f}" if n and "se" in p else ""
        return (f"CATResult(n_examinees={n}{items}{se}, max_items={self.config.max_items}, "
                f"{self.wall_seconds:.2g} s)")

    def selected_items(self, subject_id) -> pd.DataFrame:
        """The items given to one examinee, in order: item_id, order, score, theta, se."""
        df = self.administered
        out = df[df["subject_id"] == str(subject_id)]
        if out.empty and str(subject_id) not in set(self.persons["subject_id"]):
            raise KeyError(f"no examinee {subject_id!r} in this result")
        return out.drop(columns="subject_id").reset_index(drop=True)

    def asked_mask(self) -> np.ndarray:
        """Boolean (examinees x bank items): True where the item was administered."""
        m = np.asarray(self.item_matrix)
        asked = np.zeros((m.shape[0], len(self.item_ids)), dtype=bool)
        rows, cols = np.nonzero(m >= 0)
        asked[rows, m[rows, cols]] = True
        return asked

    def item_exposure(self) -> pd.DataFrame:
        """item_id, n_administered, exposure rate (share of examinees)."""
        counts = np.bincount(self.item_matrix[self.item_matrix >= 0],
                             minlength=len(self.item_ids))
        return pd.DataFrame({"item_id": self.item_ids.astype(str), "n_administered": counts,
                             "exposure": counts / max(self.n_examinees, 1)})

    def item_positions(self) -> pd.DataFrame:
        """Per item: how often and where in the test it was given (see security.position_analysis)."""
        return security.position_analysis(self.item_matrix, self.item_ids)

    def overlap(self) -> dict:
        """Test overlap rate by the exposure formula and by pairwise counting (they agree)."""
        return security.overlap_report(self.item_matrix, len(self.item_ids))

    def summary(self) -> dict:
        """Headline figures: items, precision, accuracy vs reference, exposure, overlap, time."""
        p = self.persons
        rates = self.exposure.to_numpy()
        out = {
            "n_examinees": int(len(p)),
            "items_mean": float(p["n_items"].mean()),
            "items_sd": float(p["n_items"].std(ddof=1)) if len(p) > 1 else 0.0,
            "items_min": int(p["n_items"].min()),
            "items_max": int(p["n_items"].max()),
            "se_mean": float(p["se"].mean()),
            "n_skipped": int(self.n_skipped),
            "stop_reasons": {str(k): int(v) for k, v in p["stop_reason"].value_counts().items()},
            "batch_size": int(self.batch_size),
            "rounds_mean": float(p["rounds"].mean() if "rounds" in p.columns
                                 else (p["n_items"] + p["n_skipped"]).mean()),
            "exposure": security.exposure_summary(rates),
            "overlap": self.overlap(),
            "time_total_seconds": float(self.wall_seconds),
            "time_per_examinee_seconds": float(self.wall_seconds / max(len(p), 1)),
            "selection_time": security.selection_time(p["seconds"].to_numpy()),
            "config": self.config.to_dict(),
        }
        if "theta_ref" in p.columns:
            err = p["error"].to_numpy(float)
            ok = np.isfinite(err)
            out["mae"] = float(np.mean(np.abs(err[ok])))
            out["rmse"] = float(np.sqrt(np.mean(err[ok] ** 2)))
            out["bias"] = float(np.mean(err[ok]))
            if ok.sum() > 2:
                out["correlation"] = float(np.corrcoef(p["theta"][ok], p["theta_ref"][ok])[0, 1])
        return out


def simulate_cat(bank: ItemBank, config: CATConfig | None = None, *, responses=None, thetas=None,
                 answer_fn=None, rng=None, subject_ids=None, theta_ref=None,
                 progress=None, batch_size: int = 1, batch_cut: str = "predicted",
                 batch_method: str = "mepv") -> CATResult:
    """Run the adaptive test for many examinees at once.

    Exactly one answer source: ``responses`` (ResponseMatrix or (n, J) array in bank order:
    replay real answers; cells without an answer are skipped and counted, and an examinee whose
    pool holds no answered item any more is finished, ``bank_exhausted``), ``thetas`` (true
    abilities: answers drawn from the bank's model), or ``answer_fn(subject_ids, item_ids) ->
    scores`` (with ``subject_ids``). With ``thetas`` the true values are the reference for the
    error columns; ``theta_ref`` supplies reference values otherwise.

    Randomness: ``sel = rng.spawn(n)`` gives examinee i's selection generator (the one a
    :class:`CATSession` for it would get); with ``thetas``, a second ``ans = rng.spawn(n)`` gives
    its answer stream (answer k = 1{ans[i].random() < P}). So::

        rng = np.random.default_rng(s); sel = rng.spawn(n); ans = rng.spawn(n)
        CATSession(bank, config, sel[i])   # reproduces examinee i exactly

    ``batch_size=k`` runs the test in rounds of up to k items chosen jointly
    (:meth:`CATSession.next_items`, ``cut=batch_cut``, ``method=batch_method``), all answered before the next round;
    examinee i is then exactly a session driven by ``next_items(k)`` / ``record_many`` with
    ``sel[i]`` (answers with no value are skipped; no re-pick inside a round). The number of
    rounds per examinee is the ``rounds`` column of ``persons``. ``k = 1`` is the classic CAT.

    ``progress(n_done, n_total)`` is called after every step (round).
    """
    t_start = time.perf_counter()
    config = CATConfig() if config is None else config
    if not isinstance(config, CATConfig):
        raise ConfigError(f"config must be a CATConfig, got {type(config).__name__}")
    given = [x is not None for x in (responses, thetas, answer_fn)]
    if sum(given) != 1 and not (responses is not None and thetas is not None
                                and answer_fn is None):
        raise ConfigError("give exactly one answer source: responses=, thetas= or answer_fn=")
    rng = _as_generator(rng)
    if responses is not None:
        source = ReplayAnswers(responses, bank, subject_ids)
        sel_rngs = rng.spawn(source.n_examinees)
        if thetas is not None:  # thetas then only serve as the reference
            theta_ref = thetas
    elif thetas is not None:
        n = np.asarray(thetas).reshape(-1).size
        sel_rngs = rng.spawn(n)
        source = ModelAnswers(thetas, bank, rng.spawn(n), subject_ids)
        theta_ref = source.thetas if theta_ref is None else theta_ref
    else:
        if subject_ids is None:
            raise ConfigError("answer_fn needs subject_ids (one per examinee)")
        source = CallableAnswers(answer_fn, bank, subject_ids)
        sel_rngs = rng.spawn(source.n_examinees)
    n = source.n_examinees
    if theta_ref is not None:
        theta_ref = np.asarray(theta_ref, dtype=float).reshape(-1)
        if theta_ref.size != n:
            raise ConfigError(f"theta_ref has {theta_ref.size} values for {n} examinees")

    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) \
            or batch_size < 1:
        raise ConfigError(f"batch_size must be an integer >= 1, got {batch_size!r}")
    if batch_cut not in ("predicted", "none"):
        raise ConfigError(f"batch_cut must be 'predicted' or 'none', got {batch_cut!r}")
    if batch_method not in BATCH_METHODS:
        raise ConfigError(f"batch_method must be one of {BATCH_METHODS}, got {batch_method!r}")
    exp = make_exposure_control(bank, config, cohort=n)
    if exp is not None:
        exp.start(n)
    eng = _Engine(bank, config, n, exposure=exp)
    streams = UniformStreams(sel_rngs)
    seconds = np.zeros(n)
    if batch_size > 1:
        rounds = _simulate_rounds(eng, source, streams, exp, int(batch_size), batch_cut,
                                  batch_method, seconds, progress)
        wall = time.perf_counter() - t_start
        res = _collect(bank, config, eng, source.subject_ids, seconds, theta_ref, wall)
        res.persons.insert(res.persons.columns.get_loc("n_skipped") + 1, "rounds", rounds)
        res.batch_size = int(batch_size)
        return res
    k = config.uniforms_per_step
    # replayed answers: once an examinee has no answered item left in its pool it is finished
    # (instead of skipping through the rest of the bank one item per step)
    answerable = getattr(source, "answerable", None)
    left = None if answerable is None else answerable.copy()
    if left is not None:
        eng.finish(np.flatnonzero(left == 0), "bank_exhausted")
    # skipped items re-picked from the ranking already made (theta has not moved): replay only,
    # and not under exposure control (its state changes between picks)
    repick = answerable is not None and exp is None and config.selection != "random"
    active = np.flatnonzero(~eng.done)
    while active.size:
        t0 = time.perf_counter()
        u = streams.next(active, k)
        if repick:
            items, cache = eng.select(active, u, keep=True, extra=_REPICK_EXTRA)
        else:
            items = eng.select(active, u)
        if exp is not None and exp.caps_cohort:
            items = exp.resolve_conflicts(eng, active, items, u)
        none = items < 0
        if none.any():
            eng.finish(active[none], "bank_exhausted")
        where = np.flatnonzero(~none)
        rows, items = active[where], items[where]
        y = source.answers(rows, items)
        miss = np.isnan(y)
        if miss.any() and repick:
            y, items = _repick_skipped(eng, source, streams, cache, where, rows, items, y)
            miss = np.isnan(y)
        elif miss.any():
            eng.skip(rows[miss], items[miss])
        eng.record(rows[~miss], items[~miss], y[~miss])
        if left is not None:
            scored = rows[~miss]
            left[scored] -= 1
            eng.finish(scored[left[scored] == 0], "bank_exhausted")
        seconds[active] += (time.perf_counter() - t0) / active.size
        active = active[~eng.done[active]]
        if progress is not None:
            progress(int(eng.done.sum()), n)
    wall = time.perf_counter() - t_start
    return _collect(bank, config, eng, source.subject_ids, seconds, theta_ref, wall)


def _simulate_rounds(eng: _Engine, source, streams, exp, k: int, cut: str, method: str,
                     seconds, progress) -> np.ndarray:
    """The batched loop of :func:`simulate_cat`: rounds of up to k items per examinee.

    Mirrors a session driven by ``next_items(k)`` / ``record_many``: the round's picks
    (:meth:`_Engine.select_batch`), then its answers in pick order (scored, or skipped when
    missing), then one stopping check for the rows that scored something. Replayed answers:
    an examinee with no answered item left in its pool is finished (``bank_exhausted``).
    Returns the number of rounds of every examinee.
    """
    n = eng.n
    ups = eng.config.uniforms_per_step
    answerable = getattr(source, "answerable", None)
    left = None if answerable is None else answerable.copy()
    if left is not None:
        eng.finish(np.flatnonzero(left == 0), "bank_exhausted")
    cohort = exp is not None and exp.caps_cohort
    resolve = (lambda r, items, u: exp.resolve_conflicts(eng, r, items, u)) if cohort else None
    reserve = exp.reserve if cohort else None
    rounds = np.zeros(n, dtype=np.intp)
    active = np.flatnonzero(~eng.done)
    while active.size:
        t0 = time.perf_counter()
        picks = eng.select_batch(active, k, lambda r: streams.next(r, ups), cut=cut,
                                 method=method, resolve=resolve, reserve=reserve)
        if cohort:
            exp.release()
        none = picks[:, 0] < 0
        eng.finish(active[none], "bank_exhausted")
        rounds[active[~none]] += 1
        scored = np.zeros(active.size, dtype=bool)
        for m in range(k):
            idx = np.flatnonzero(picks[:, m] >= 0)
            if idx.size == 0:
                break
            rows, items = active[idx], picks[idx, m]
            y = source.answers(rows, items)
            miss = np.isnan(y)
            eng.record(rows[~miss], items[~miss], y[~miss], check_stop=False)
            if miss.any():
                eng.skip(rows[miss], items[miss])
            scored[idx[~miss]] = True
            if left is not None:
                left[rows[~miss]] -= 1
        eng.check_stop(active[scored])
        if left is not None:
            eng.finish(active[left[active] == 0], "bank_exhausted")
        seconds[active] += (time.perf_counter() - t0) / active.size
        active = active[~eng.done[active]]
        if progress is not None:
            progress(int(eng.done.sum()), n)
    return rounds


def _repick_skipped(eng, source, streams, cache, where, rows, items, y):
    """Skip unanswered picks and pick again from the cached ranking until every row has an
    answer or its cached list no longer settles the pick (it then selects afresh next step).

    Exactly the picks a fresh selection would make: theta, n and costs are unchanged by a
    skip, so the ranking of the other items is too; the top k of what is left is the first k
    remaining entries of the cached list, provided it still has k of them (or holds every
    eligible item). Each pick consumes one uniform, as a fresh selection would.
    """
    cand_all, k_all, complete_all = cache
    cand, k, complete = cand_all[where], k_all[where], complete_all[where]
    removed = np.zeros(cand.shape, dtype=bool)
    items = items.copy()
    y = y.copy()
    todo = np.flatnonzero(np.isnan(y))
    while todo.size:
        eng.skip(rows[todo], items[todo])
        removed[todo] |= cand[todo] == items[todo][:, None]
        remaining = (cand[todo] >= 0) & ~removed[todo]
        n_rem = remaining.sum(axis=1)
        ok = ((complete[todo] | (n_rem >= k[todo])) & (n_rem > 0) & ~eng.done[rows[todo]])
        if not ok.any():
            break
        t, rem = todo[ok], remaining[ok]
        u = streams.next(rows[t], eng.config.uniforms_per_step)[:, 0]
        k_eff = np.minimum(k[t], n_rem[ok])
        target = np.minimum((u * k_eff).astype(np.intp), k_eff - 1)
        rank = np.cumsum(rem, axis=1) - 1
        pos = np.argmax(rem & (rank == target[:, None]), axis=1)
        items[t] = cand[t, pos]
        y[t] = source.answers(rows[t], items[t])
        todo = t[np.isnan(y[t])]
    return y, items


def _collect(bank, config, eng: _Engine, subject_ids, seconds, theta_ref, wall) -> CATResult:
    n = eng.n
    sids = np.asarray([str(s) for s in subject_ids], dtype=object)
    persons = pd.DataFrame({
        "subject_id": sids,
        "theta": eng.theta.copy(),
        "se": eng.se.copy(),
        "posterior_sd": eng.post_sd.copy(),
        "n_items": eng.n_items.copy(),
        "n_skipped": eng.n_skipped.copy(),
        "seconds": seconds,
        "stop_reason": eng.stop_reason.astype(str),
    })
    if theta_ref is not None:
        persons["theta_ref"] = theta_ref
        persons["error"] = persons["theta"] - theta_ref
    item_matrix = eng.items[:, :config.max_items].copy()
    mask = item_matrix >= 0
    rows, cols = np.nonzero(mask)
    administered = pd.DataFrame({
        "subject_id": sids[rows],
        "item_id": bank.item_ids[item_matrix[rows, cols]].astype(str),
        "order": cols + 1,
        "score": eng.scores[rows, cols],
        "theta": eng.theta_hist[rows, cols],
        "se": eng.se_hist[rows, cols],
    })
    counts = np.bincount(item_matrix[mask], minlength=len(bank))
    exposure = pd.Series(counts / max(n, 1), index=pd.Index(bank.item_ids.astype(str),
                                                            name="item_id"), name="exposure")
    return CATResult(persons=persons, administered=administered,
                     n_skipped=int(eng.n_skipped.sum()), exposure=exposure, config=config,
                     wall_seconds=wall, item_matrix=item_matrix,
                     item_ids=bank.item_ids.copy(), sh_trials=eng.sh_trials.copy())
