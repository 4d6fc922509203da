"""Live adaptive evaluation: a CAT session asking a real model, every step persisted.

Loop of one run (Algorithm 1 of the ATLAS paper, with a model in the loop, k items a round)::

    items = session.next_items(k)                    # select k jointly ([]: a stopping rule fired)
    store.begin_round(items, requests/prompts)       # transaction 1: the pending items
    log-likelihood subject (the leaderboard's protocol):
        outputs = subject.loglikelihood(all requests of the k items)   # ONE call, one batch
        score_i = ItemRequests_i.score(outputs_i)                      # acc_norm / acc / mc1 / ...
    prompt subject (chat; approximate protocol):
        reply_i = subject.ask(prompt_i)  (k at once)  ->  score_i = scorer(item_i, reply_i)
    session.record_many(items, scores)               # EAP theta, SE
    store.complete_round(replies, scores, theta, se, session snapshot)  # transaction 2

With k = 1 this is the classic CAT (``next_item`` / ``record``). The snapshot saved in
transaction 2 is the complete CAT state (responses, theta, SE, and the random generator's
state), so :func:`continue_run` of a stored run continues a killed run exactly where it stopped: answered items are
never asked again, the next selection draws the same random numbers, and the final theta, SE
and item sequence equal those of an uninterrupted run with the same seed. Only items that were
*pending* (asked, reply not yet saved) when the process died are asked again; a prompt
subject's answers that arrived before the crash are kept (status ``scored``) and not re-asked.

Every result carries ``protocol``: ``"leaderboard"`` (log-likelihood requests, as the bank was
calibrated), ``"approximate"`` (chat / text prompts, answers read from free text: the theta is
not on the bank's scale exactly), ``"simulated"``, or, for item-scored subjects (a bank without
requests, items scored by id: :mod:`atlascat.live.subjects.itemscored`), ``"item command"``
(the user's program) and ``"recorded"`` (recorded answers); ``"request command"``: the user's
program sent the bank's requests, its outputs scored by each item's rule
(:mod:`atlascat.live.subjects.cmdrequests`).

:func:`start_run` creates a run and :func:`continue_run` drives it; the live-run service
(:class:`atlascat.live.service.LiveRun`) runs several models concurrently (one thread each);
requests to one endpoint are bounded by the subjects' shared concurrency limiter. One run is run
by one process at a time (the store's run lock).
"""
from __future__ import annotations

import hashlib
import json
import weakref
from dataclasses import asdict, dataclass, field
from typing import Callable

import numpy as np

from ..errors import AtlasError, BankError, ConfigError, LiveRunError, RunStoppedError
from ..content.defaults import PROMPT_STYLE, PROMPT_STYLES, TEMPERATURE
from ..content.items import build_prompt, item_record
from .asking import (UNREADABLE_AFTER, as_score, ask_items, ask_loglikelihood, item_score,
                     outputs_from_text, readable, requests_hash, requests_render)
from .refusals import (NO_RECORDED_ANSWER, RefusalCount, ask_each, check_refusals, is_refused,
                       refused_summary)
from .scorers import score_answer
from .store import RunStore
from .subjects import (Answer, SubjectError, has_requests, is_item_scored, is_loglikelihood,
                       is_ordinal)
from .subjects.spec import NO_CONTENT

__all__ = ["PromptSettings", "RunResult", "StepInfo", "start_run", "continue_run", "bank_hash",
           "expected_accuracy", "subject_protocol", "check_content", "PROTOCOL_LABELS",
           "adaptive_session", "with_run_seed"]

#: how each protocol reads in results and reports
PROTOCOL_LABELS = {
    "leaderboard": "leaderboard (log-likelihood)",
    "approximate": "APPROXIMATE (chat; differs from the bank's)",
    "simulated": "simulated (the bank's own model)",
    "item command": "scored by your command (item ids in, 0/1 or a score in [0, 1] out)",
    "request command": "the logged requests answered by your command, its outputs scored by "
                       "each item's rule",
    "recorded": "recorded answers (by item id)",
}


def subject_protocol(subject) -> str:
    """``"leaderboard"`` for log-likelihood subjects, ``"approximate"`` for prompt subjects, or
    the subject's own ``protocol`` attribute."""
    proto = getattr(subject, "protocol", None)
    if proto:
        return str(proto)
    return "leaderboard" if is_loglikelihood(subject) else "approximate"


@dataclass(frozen=True)
class PromptSettings:
    """How items are turned into prompts (stored with the run; a resumed run reuses them)."""

    style: str = PROMPT_STYLE
    max_tokens: int | None = None
    temperature: float = TEMPERATURE
    system: str | None = None

    def __post_init__(self):
        if self.style not in PROMPT_STYLES:
            raise ConfigError(f"prompt style must be one of {PROMPT_STYLES}, not {self.style!r}")
        if self.max_tokens is not None and int(self.max_tokens) < 1:
            raise ConfigError(f"max_tokens must be >= 1, got {self.max_tokens}")
        if not 0 <= float(self.temperature) <= 2:
            raise ConfigError(f"temperature must be in [0, 2], got {self.temperature}")


@dataclass
class StepInfo:
    """What :func:`continue_run` reports after every answered item (``on_step`` callback)."""

    run_id: str
    model: str
    step: int
    item_id: str
    #: 0/1, a score in [0, 1] or a rating; None: the item got no score and was left out
    score: int | float | None
    theta: float
    se: float
    cached: bool
    latency_s: float
    #: a benchmark predictor's predicted score after the round, (score, lo, hi) 0-1; else None
    predicted: tuple | None = None
    #: ``score`` is an ordinal item's rating on its own scale (not 0/1)
    rated: bool = False


@dataclass
class RunResult:
    """Outcome of a live run (also readable later from the store).

    Its scores (``scores``, ``score_sum``, ``observed_score``, ``model_based_score``) read as
    ``results.json`` and ``atlas runs`` give them: 0/1 for right / wrong items, in [0, 1] for
    continuous scores, and on a bank folder built with ``--score-range LO HI`` on the metric's
    own scale, which ``scale`` names ([LO, HI]; None: not on a metric's scale). The run store
    keeps [0, 1] (:func:`atlascat.live.scale.on_metric_scale` maps, low + (high - low) x
    score); ``RunResult.from_store(store, run_id, unit=True)`` reads them so.
    """

    run_id: str
    model: str
    status: str
    theta: float | None
    se: float | None
    n_items: int
    #: the sum of the item scores asked: right answers for 0/1 items, the sum of the credits in
    #: [0, 1] for continuous scores and ratings
    score_sum: float
    #: the expected mean item score over the bank at theta (a model-based estimate, not
    #: observed): the expected proportion correct for 0/1 items
    model_based_score: float | None
    stop_reason: str | None
    items: list = field(default_factory=list)
    scores: list = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    error: str | None = None
    protocol: str | None = None
    batch_size: int = 1
    #: the mean item score over the items this run asked (right / asked for 0/1 items)
    observed_score: float | None = None
    #: [low, high] of the bank folder's metric scale the scores are given on, else None
    scale: list | None = None
    #: items asked that got no score (a judge's null, a request the server refused), left out
    n_skipped: int = 0
    #: of those, the items whose request the server refused (HTTP 400 / 413 / 422), and the
    #: first one's message (:mod:`atlascat.live.refusals`)
    n_refused: int = 0
    refused: str | None = None

    @property
    def n_asked(self) -> int:
        """The items asked: scored (``n_items``) and not (``n_skipped``, the refused among
        them)."""
        return self.n_items + self.n_skipped

    def __post_init__(self):
        if self.observed_score is None and self.n_items:
            self.observed_score = self.score_sum / self.n_items

    def __repr__(self) -> str:
        est = ("theta=None" if self.theta is None
               else f"theta={self.theta:.3f} +- {self.se:.3f}")
        return (f"RunResult(run_id={self.run_id!r}, model={self.model!r}, "
                f"status={self.status!r}, {est}, n_items={self.n_items}, "
                f"score_sum={self.score_sum})")

    def to_dict(self) -> dict:
        """The fields as a dict (``scale`` only when the scores are on a metric's scale)."""
        out = {**asdict(self), "n_asked": self.n_asked}
        if out["scale"] is None:
            del out["scale"]
        return out

    @classmethod
    def from_store(cls, store: RunStore, run_id: str, *, unit: bool = False) -> "RunResult":
        """The stored run's result, on its bank folder's metric scale when it has one (see the
        class); ``unit``: every score as stored, on [0, 1]. ``store``: a RunStore or its
        path."""
        from .scale import on_metric_scale, stored_scale
        from .store import RunStore

        if not isinstance(store, RunStore):   # a path: its store, closed once read
            with RunStore(store) as opened:
                return cls.from_store(opened, run_id, unit=unit)
        info = store.get_run(run_id)
        res = cls._stored(store, run_id, info)
        scale = None if unit else stored_scale(info["bank_ref"])
        if scale is None:
            return res
        fields = on_metric_scale(res.to_dict(), scale)
        del fields["n_asked"]   # derived (the property)
        return cls(**fields)

    @classmethod
    def _stored(cls, store: RunStore, run_id: str, info: dict) -> "RunResult":
        steps = store.steps(run_id)
        done = steps[steps["status"] == "answered"]
        n_refused, refused = refused_summary(steps)
        return cls(run_id=run_id, model=info["model"], status=info["status"], theta=info["theta"],
                   se=info["se"], n_items=int(info["n_items"]),
                   score_sum=as_score(info["score_sum"] or 0),
                   model_based_score=info["model_based_score"], stop_reason=info["stop_reason"],
                   items=done["item_id"].astype(str).tolist(),
                   scores=[as_score(v) for v in done["score"]],
                   prompt_tokens=int(info["prompt_tokens"]),
                   completion_tokens=int(info["completion_tokens"]),
                   latency_s=float(info["latency_s"]), error=info["error"],
                   protocol=info.get("protocol"), batch_size=int(info.get("batch_size") or 1),
                   n_skipped=int((steps["status"] == "skipped").sum()),
                   n_refused=n_refused, refused=refused)


# ---------------------------------------------------------------------------- helpers
def bank_hash(bank) -> str:
    """SHA-256 over item ids and parameters (:func:`atlascat.cat.tables.bank_sha256`, whose
    first 16 hex digits are the CAT session's bank fingerprint), then item content (question,
    options, key, scorer, the request columns), column by column.

    Cached per bank object (banks are immutable value objects), weakly: the cache neither
    writes into the bank nor keeps it alive."""
    from ..cat.tables import bank_sha256

    cached = _BANK_HASHES.get(bank)
    if cached is not None:
        return cached
    h = bank_sha256(bank)
    if bank.metadata is not None:
        from ..content.requests import GENERATION_COLUMNS, REQUEST_COLUMNS

        request_cols = (*REQUEST_COLUMNS, *GENERATION_COLUMNS)  # the request data

        for col in ("question", "choices", "answer", "scorer", "fewshot",
                    *(c for c in request_cols if c not in ("question", "choices", "answer"))):
            if col in bank.metadata.columns:
                values = ("\x1f".join(map(str, v)) if isinstance(v, (list, tuple, np.ndarray))
                          else str(v) for v in bank.metadata[col])
                h.update(col.encode() + b"\x1e" + "\x1e".join(values).encode())
    digest = _BANK_HASHES[bank] = h.hexdigest()
    return digest


#: bank_hash's cache, keyed weakly by the bank object
_BANK_HASHES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def expected_accuracy(bank, theta: float) -> float:
    """Reconstructed accuracy: the expected proportion correct over the bank's items at theta."""
    return float(np.mean(bank.probability(float(theta))))


def _session_cls(bank):
    if is_ordinal(bank):
        from ..cat.ordinal import OrdinalCATSession

        return OrdinalCATSession
    from ..cat.session import CATSession

    return CATSession


def adaptive_session(bank, config, rng):
    """The adaptive test of ``bank`` with ``config`` (a CATConfig) drawing from ``rng``: an
    :class:`~atlascat.cat.ordinal.OrdinalCATSession` for an ordinal (graded / gpcm) bank,
    else a :class:`~atlascat.cat.session.CATSession`."""
    return _session_cls(bank)(bank, config=config, rng=rng)


def _restore_session(info: dict, bank):
    """The session of a stored run's snapshot, by the run's kind: a suite's, a bank folder's
    benchmark predictor's, or the CAT's."""
    state = info["session"]
    if info["kind"] == "suite":
        from .suite_session import SuiteLiveSession

        return SuiteLiveSession.from_dict(state, bank, subject=info.get("model"))
    if info["kind"] == "predictor":
        from .predictor_session import PredictorLiveSession

        return PredictorLiveSession.from_dict(state, bank)
    return _session_cls(bank).from_dict(state, bank)


def _model_based_score(session, bank) -> float:
    own = getattr(session, "expected_accuracy", None)
    return float(own()) if callable(own) else expected_accuracy(bank, session.theta)


# ---------------------------------------------------------------------------- runs
def check_content(bank, subject, probe_ids) -> None:
    """A clear error now, before any run is created, when ``bank`` cannot be asked of
    ``subject``: no item content, or (log-likelihood subjects) no request data for the items
    ``probe_ids`` (one per source of requests). An item-scored subject needs item ids only."""
    if is_item_scored(subject):
        return
    if not has_requests(bank):
        raise BankError(NO_CONTENT)
    if is_loglikelihood(subject):
        from ..content.requests import build_item_requests

        for item in probe_ids:
            build_item_requests(bank, item)
    elif "question" not in bank.metadata.columns:
        raise BankError("live evaluation with prompts needs a bank with item content (question, "
                        "choices, answer, scorer); see atlascat.content.items")
    elif "scorer" in bank.metadata.columns:
        scorers = bank.metadata["scorer"]
        none = [str(i) for i, v in zip(bank.metadata.index, scorers) if not isinstance(v, str)
                or not v]
        if none:
            rules = bank.metadata.loc[none, "rule"] if "rule" in bank.metadata.columns else []
            how = sorted({str(r) for r in rules if isinstance(r, str) and r})
            raise BankError(
                f"{len(none)} of the bank's {len(scorers)} items (e.g. {none[0]}) have no "
                "scorer for a text answer" + (f" (scored by {', '.join(how)})" if how else "")
                + ": a chat or text prompt cannot be scored as they were; ask them with a "
                "faithful subject (completions:URL, hf:, lmeval:) or by id (cmd:COMMAND)")


def start_run(store: RunStore, bank, subject, *, config=None, seed: int = 0,
              prompt: PromptSettings | None = None, bank_ref: str | None = None,
              run_id: str | None = None, batch_size: int = 1, session=None,
              kind: str = "adaptive", token_budget: int | None = None) -> str:
    """Create a run in ``store``; returns its id. The CAT session draws its random choices
    (the first item, the randomesque picks) from ``subject_generator(seed, subject.name)``
    (:func:`~atlascat.predict.session.subject_generator`): a model is asked what ``atlas
    simulate`` with ``seed`` asks it among any other models, on every kind of bank.

    ``batch_size`` k: items selected and asked per round (stored with the run; a resumed run
    uses the same k). ``session``: another session to drive instead of the CAT, with
    ``to_dict``: a :class:`~atlascat.live.predictor_session.PredictorLiveSession` (``kind``
    ``"predictor"``) or a :class:`~atlascat.live.suite_session.SuiteLiveSession` (``"suite"``);
    ``kind`` (:data:`~atlascat.live.store.RUN_KINDS`) is stored once with the run.
    ``token_budget``: the run stops before a round would take it past this many tokens
    (:func:`token_budget_stop`; a subject that reports token usage only). A ``simulate:THETA``
    subject without SEED answers as model ``subject.name`` of ``atlas simulate --thetas`` with
    ``seed`` (:func:`with_run_seed`)."""
    from ..cat.config import CATConfig

    with_run_seed(subject, seed)
    k = min(_check_batch_size(batch_size), len(bank))   # a round asks at most the whole bank
    check_content(bank, subject, bank.item_ids[:1])
    answerable_items(subject, bank)   # before the run exists: a failed start leaves nothing
    token_budget = check_token_budget(subject, token_budget)
    config = config if config is not None else CATConfig()
    prompt = prompt or PromptSettings()
    if k > 1 and is_ordinal(bank):
        raise ConfigError(f"an ordinal bank's adaptive test asks one item a round; drop the "
                          f"batch size {k} (batch_size, --batch-size)")
    if session is None:   # the model's own stream, as `atlas simulate` replays it
        from ..predict.session import subject_generator

        session = adaptive_session(bank, config, subject_generator(seed, subject.name))
    store.add_redactor(getattr(subject, "redact", None))
    return store.create_run(
        model=subject.name, subject=subject.describe(), cache_key=subject.cache_key,
        bank_ref=bank_ref, bank_hash=bank_hash(bank), n_bank_items=len(bank),
        config=config.to_dict(), prompt=asdict(prompt), seed=seed, session=session.to_dict(),
        run_id=run_id, protocol=subject_protocol(subject), batch_size=k, kind=kind,
        token_budget=token_budget)


def with_run_seed(subject, seed: int):
    """``subject`` in a run seeded ``seed``: a simulated subject whose answer seed follows the
    run's (``seed_from_run``: ``simulate:THETA`` without SEED) answers with ``answer_seed(seed,
    name)`` (``for_run``); any other subject as it is."""
    if getattr(subject, "seed_from_run", False):
        subject.for_run(seed)
    return subject


def check_token_budget(subject, budget) -> int | None:
    """``budget`` as a whole number of tokens >= 1 (None: no budget), for a subject whose
    answers carry the tokens its server reports (``reports_tokens``: the HTTP subjects)."""
    if budget is None:
        return None
    try:
        ok = (not isinstance(budget, bool) and float(budget).is_integer()
              and 1 <= float(budget) < 2 ** 63)
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ConfigError(f"a token budget is a whole number of tokens >= 1, got {budget!r}")
    if not getattr(subject, "reports_tokens", False):
        raise ConfigError(f"{subject.name} does not report the tokens it uses (only HTTP "
                          "subjects do: completions:, openai:); a token budget needs them: "
                          "bound the run by its number of items instead")
    return int(budget)


def token_budget_stop(budget: int | None, spent: int, n_items: int, k: int) -> bool:
    """Whether the next round of ``k`` items would take a run past ``budget`` tokens: ``spent``
    (prompt + completion tokens of its ``n_items`` answers, a cached answer's as recorded when
    it was asked) plus k times the mean per answer so far. The first round is always asked."""
    if budget is None or n_items < 1:
        return False
    return spent + k * spent / n_items > budget


def answerable_items(subject, bank):
    """The items a recorded subject (``replay:``) has answers for (None: any item); one line
    when it has none of the bank's."""
    answerable = getattr(subject, "answered_items", None)
    answerable = None if answerable is None else answerable()
    if answerable is not None and not any(str(i) in answerable for i in bank.item_ids):
        raise LiveRunError(f"{subject.name} has no recorded answer to any of the bank's "
                           f"{len(bank.item_ids)} items (e.g. {str(bank.item_ids[0])!r}); "
                           "check that the matrix and the bank belong together")
    return answerable


def _check_batch_size(k) -> int:
    try:
        k_int = int(k)
    except (TypeError, ValueError):
        k_int = 0
    if k_int < 1 or k_int != k:
        raise ConfigError(f"batch size must be an integer >= 1, got {k!r}")
    return k_int


def _next_round(session, k: int, answerable=None, blanks: list | None = None) -> list:
    """The next k items (k = 1: the classic ``next_item``); [] when the test is over.

    ``answerable``: the items a recorded subject has answers for (None: any item). An adaptive
    test skips the others as they come up, as ``atlas simulate`` replays a matrix with gaps:
    one at a time, picking again; in a round of k, taken out of the round. ``blanks``: the
    items so skipped are appended to it (the run keeps them as skipped steps)."""
    while True:
        if k == 1:
            item = session.next_item()
            items = [] if item is None else [str(item)]
        else:
            items = [str(i) for i in session.next_items(k)]
        if answerable is None or not hasattr(session, "skip"):
            return items
        keep = [i for i in items if i in answerable]
        if len(keep) == len(items):
            return items
        for i in items:
            if i not in answerable:
                session.skip(i)
                if blanks is not None:
                    blanks.append(i)
        if keep:
            return keep


def _store_blanks(store, run_id: str, session, blanks: list, step: int) -> int:
    """Keep ``blanks`` (items a recorded model has no answer to, skipped by the adaptive test)
    as closed skipped steps from ``step`` on, with the session that skipped them; -> the next
    step's number."""
    steps = list(range(step, step + len(blanks)))
    store.begin_round(run_id, [(s, i, "", "") for s, i in zip(steps, blanks)], round_no=step)
    store.complete_round(run_id, [dict(step=s, item_id=i, score=None, prompt_hash="",
                                       answer=Answer(text=NO_RECORDED_ANSWER, latency_s=0.0,
                                                     attempts=0))
                                  for s, i in zip(steps, blanks)],
                         theta=float(session.theta), se=float(session.se),
                         session=session.to_dict(), cache_key=None)
    return step + len(blanks)


def _record_round(session, items, scores) -> None:
    """Enter a round's scores into the session (None: the item is left out unscored); a
    session of one item at a time (ordinal) records it alone."""
    if hasattr(session, "record_many"):
        session.record_many(items, scores)
    else:
        session.record(items[0], scores[0])


#: a run stops (saved, resumable) once this many items in a row got no score
SKIPS_IN_A_ROW = 10


def _count_skips(session, items, scores, in_a_row: int) -> int:
    """The items in a row that got no score (``null`` from an item-scored subject: a judge
    that could not rate one) after this round. Such an item leaves the adaptive test unscored,
    as a gap in a response matrix does; a benchmark predictor's draw (a bank folder) needs the
    score of every item it draws, and :data:`SKIPS_IN_A_ROW` in a row mean a broken program:
    both stop the run (saved; ``--resume`` asks the round again)."""
    missing = [i for i, sc in zip(items, scores) if sc is None]
    if missing and not hasattr(session, "skip"):
        raise SubjectError(f"item {missing[0]!r} got no score (null); a bank folder's "
                           "prediction needs the score of every item it draws: have the "
                           "program retry its judge")
    for sc in scores:
        in_a_row = in_a_row + 1 if sc is None else 0
    if in_a_row >= SKIPS_IN_A_ROW:
        raise SubjectError(f"the last {in_a_row} items asked got no score (null); a run "
                           "leaves out an item now and then, not every one: check the program")
    return in_a_row


# ---------------------------------------------------------------------------- runs
def continue_run(store: RunStore, run_id: str, bank, subject, *, cache: bool = True,
                 on_step: Callable[[StepInfo], None] | None = None) -> RunResult:
    """Drive a stored run to its end (a fresh run or a resumed one).

    Raises :class:`~atlascat.errors.RunStoppedError` (run marked ``error``, resumable) when
    the subject fails after its retries, :class:`LiveRunError` when another process is running
    the same run.
    """
    info = store.get_run(run_id)
    if info["status"] == "done":
        return RunResult.from_store(store, run_id)
    if bank_hash(bank) != info["bank_hash"]:
        raise BankError(f"run {run_id} was started on a different bank (items, parameters or "
                        "content differ); resume it with the same bank")
    if subject.cache_key != info["cache_key"]:
        raise ConfigError(f"run {run_id} asks {info['cache_key']!r}, not {subject.cache_key!r}")
    store.add_redactor(getattr(subject, "redact", None))
    k = int(info.get("batch_size") or 1)
    loglik = is_loglikelihood(subject)
    by_id = is_item_scored(subject)
    if loglik:
        from ..content.requests import build_item_requests
    # the requests each item is sent as: the bank's (a log-likelihood subject), or a command's
    # own (``cmd:`` on a bank that holds them); None: a prompt, or the item id alone
    request_of = ((lambda i: build_item_requests(bank, i)) if loglik else
                  subject.item_requests if subject_protocol(subject) == "request command"
                  else None)
    store.claim(run_id)  # one process per run (raises if another one is running it)
    try:   # the run as it is now, under its lock: another process may have asked more of it,
        info = store.get_run(run_id)   # or finished it, since it was read above
        if info["status"] == "done":
            store.release(run_id)
            return RunResult.from_store(store, run_id)
        session = _restore_session(info, bank)
    except BaseException:
        store.release(run_id)
        raise
    settings = PromptSettings(**info["prompt"])
    unread, n_read = [], 0
    budget, stop_reason = info.get("token_budget"), None
    next_step, in_a_row, refusals = store.closed_steps(run_id), 0, RefusalCount()
    spent = int(info["prompt_tokens"] or 0) + int(info["completion_tokens"] or 0)
    try:
        opened = store.open_steps(run_id)
        answerable = answerable_items(subject, bank)
        if answerable is not None and hasattr(session, "restrict_to"):
            session.restrict_to(answerable)   # a suite knows its blanks up front, as simulate
        while True:
            if not opened and token_budget_stop(budget, spent, int(session.n_items), k):
                stop_reason = "token_budget"
                break
            blanks: list = []
            items = _next_round(session, k, answerable, blanks)
            if blanks:   # a recorded model's blanks: skipped steps, as simulate counts them
                next_step = _store_blanks(store, run_id, session, blanks, next_step)
            if not items:
                break
            first = next_step
            steps = list(range(first, first + len(items)))
            if opened:
                got = [(int(o["step"]), o["item_id"]) for o in opened]
                if got != list(zip(steps, items)):
                    raise LiveRunError(
                        f"run {run_id}: the CAT picked {list(zip(steps, items))} but the database "
                        f"has {got} pending; the bank or the engine changed since the run started")
                scored = store.scored_steps(run_id)
            else:
                scored = {}
            opened = []
            if request_of is not None:
                irs = [request_of(i) for i in items]
                hashes = [requests_hash(ir) for ir in irs]
                texts = [requests_render(ir) for ir in irs]
            elif by_id:
                texts = [json.dumps({"item_id": i}) for i in items]
                hashes = [hashlib.sha256(t.encode()).hexdigest() for t in texts]
            else:
                records = [item_record(bank, i) for i in items]
                prompts = [build_prompt(it, kind=subject.kind, style=settings.style,
                                        max_tokens=settings.max_tokens,
                                        temperature=settings.temperature, system=settings.system)
                           for it in records]
                hashes = [p.hash() for p in prompts]
                texts = [p.render() for p in prompts]
            store.begin_round(run_id, list(zip(steps, items, texts, hashes)), round_no=first)
            answers: list = [None] * len(items)
            scores: list = [None] * len(items)
            stored = [False] * len(items)
            for n, step in enumerate(steps):
                row = scored.get(step)
                if row is not None:  # answered before a crash: kept, not asked again
                    answers[n] = Answer(text=row["answer"] or "", latency_s=float(row["latency_s"] or 0),
                                        prompt_tokens=row["prompt_tokens"],
                                        completion_tokens=row["completion_tokens"],
                                        attempts=int(row["attempts"] or 1),
                                        cached=bool(row["cached"]))
                    scores[n], stored[n] = as_score(row["score"]), True
                    continue
                hit = store.cache_get(subject.cache_key, items[n], hashes[n]) if cache else None
                if hit is not None:
                    answers[n] = Answer(text=hit["answer"], latency_s=float(hit["latency_s"] or 0.0),
                                        prompt_tokens=hit["prompt_tokens"],
                                        completion_tokens=hit["completion_tokens"], attempts=0,
                                        cached=True)
                    scores[n] = (as_score(irs[n].score(outputs_from_text(irs[n], hit["answer"])))
                                 if loglik else item_score(hit["answer"], subject) if by_id
                                 else score_answer(records[n], hit["answer"]))
            todo = [n for n in range(len(items)) if answers[n] is None]
            if todo and loglik:   # an item the server refuses (HTTP 400): left out, unscored
                got = ask_each(lambda ns: ask_loglikelihood(subject, [irs[n] for n in ns]), todo)
                for n, one in zip(todo, got):
                    answers[n], scores[n] = ((one, None) if is_refused(one) else
                                             (one[1], as_score(irs[n].score(one[0]))))
            elif todo and by_id:
                for n, (score, answer) in zip(todo, ask_items(subject, [items[n] for n in todo])):
                    answers[n], scores[n] = answer, score
            elif todo and len(todo) == 1:
                n = todo[0]
                answers[n] = ask_each(lambda ns: [subject.ask(prompts[n], records[n])], todo)[0]
                scores[n] = (None if is_refused(answers[n]) else
                             score_answer(records[n], answers[n].text))
            elif todo:
                _ask_prompts_concurrently(store, run_id, subject, todo, steps, items, prompts,
                                          records, hashes, answers, scores, stored, cache)
            if not loglik and not by_id:
                asked = [n for n in todo if not is_refused(answers[n])]
                unread += [n for n in asked if not readable(records[n], answers[n].text)]
                n_read += len(asked)
                if n_read >= UNREADABLE_AFTER and len(unread) == n_read:
                    raise LiveRunError(
                        f"none of the model's first {n_read} replies holds an answer the scorer "
                        f"can read (e.g. {answers[todo[-1]].text[:80]!r}); refusing to score "
                        "them all wrong. Check --prompt-style / --max-tokens / --system")
            round_tokens = sum((a.prompt_tokens or 0) + (a.completion_tokens or 0)
                               for a in answers)
            if budget is not None and spent + round_tokens == 0 and any(
                    not a.cached for a in answers):
                raise LiveRunError(f"{subject.name}'s server reported no token usage; the run's "
                                   f"token budget ({budget}) cannot be kept. Start it again "
                                   "without one, bounded by its number of items")
            spent += round_tokens
            refusals = check_refusals(session, items, answers, refusals)
            in_a_row = _count_skips(session, items, scores, in_a_row)
            credits = _check_scores(session, items, scores,
                                    fixable=getattr(subject, "protocol", "") == "item command")
            rated = hasattr(session, "credit")
            _record_round(session, items, scores)
            theta, se = float(session.theta), float(session.se)
            store.complete_round(run_id, [dict(step=s, item_id=i, answer=a, score=sc,
                                               prompt_hash=h, stored=st, credit=c)
                                          for s, i, a, sc, h, st, c in zip(
                                              steps, items, answers, scores, hashes, stored,
                                              credits)],
                                 theta=theta, se=se, session=session.to_dict(),
                                 cache_key=subject.cache_key if cache else None)
            next_step += len(items)
            if on_step is not None:
                from .predictor_session import PredictorLiveSession

                predicted = None
                if isinstance(session, PredictorLiveSession):
                    pred = session.prediction()
                    predicted = (pred.score, pred.lower, pred.upper)
                for s, i, a, sc in zip(steps, items, answers, scores):
                    on_step(StepInfo(run_id, subject.name, s, i, sc, theta, se, a.cached,
                                     float(a.latency_s), predicted, rated=rated))
    except SubjectError as exc:
        store.fail_run(run_id, str(exc))
        raise RunStoppedError(f"{exc}. Run {run_id} is saved with {session.n_items} answered "
                              "item(s) and can be resumed", run_id=run_id, store=store.path,
                              n_items=session.n_items) from exc
    except KeyboardInterrupt:
        store.interrupt_run(run_id)
        raise
    except AtlasError as exc:
        store.fail_run(run_id, str(exc))
        raise
    finally:
        store.release(run_id)
    store.finish_run(run_id, stop_reason=stop_reason or getattr(session, "stop_reason", None),
                     model_based_score=_model_based_score(session, bank))
    return RunResult.from_store(store, run_id)


def _check_scores(session, items, scores, fixable: bool = False) -> list:
    """Each answer's credit in [0, 1] (what ``score_sum`` adds up): the score itself, or an
    ordinal item's rating as a share of its scale (``session.credit``); a score outside
    [0, 1], or a rating off its item's scale, is one clear error (``fixable``: the user's
    command rated it, so the run resumes once it is fixed: a SubjectError; a recorded rating
    stays what it is); None (no score) stays None."""
    credit = getattr(session, "credit", None)
    if credit is None:
        for item, sc in zip(items, scores):
            if sc is not None and not 0 <= sc <= 1:
                raise LiveRunError(f"item {item!r}: the scoring rule gave {sc!r}, not a score "
                                   "in [0, 1]")
        return list(scores)
    bank = session.bank
    for item, sc in zip(items, scores):   # off the item's scale: one line
        why = None if sc is None else bank.rating_problem(item, sc)
        if why is not None:
            raise (SubjectError if fixable else LiveRunError)(
                f"item {item!r} was rated {sc!r}, which {why}")
    return [None if sc is None else credit(i, sc) for i, sc in zip(items, scores)]


def _ask_prompts_concurrently(store, run_id, subject, todo, steps, items, prompts, records,
                              hashes, answers, scores, stored, cache) -> None:
    """Ask a round's prompts at once; each answer is stored as soon as it arrives, so a crash
    loses only the ones still in flight. The first failure is raised after the others end."""
    from concurrent.futures import ThreadPoolExecutor

    def one(n):
        answer = ask_each(lambda ns: [subject.ask(prompts[n], records[n])], [n])[0]
        return n, answer, None if is_refused(answer) else score_answer(records[n], answer.text)

    errors = []
    with ThreadPoolExecutor(max_workers=len(todo), thread_name_prefix="atlas-round") as pool:
        futures = [pool.submit(one, n) for n in todo]
        for fut in futures:
            try:
                n, answer, score = fut.result()
            except BaseException as exc:  # noqa: BLE001 - re-raised below
                errors.append(exc)
                continue
            answers[n], scores[n], stored[n] = answer, score, True
            store.record_answer(run_id, steps[n], item_id=items[n], answer=answer, score=score,
                                cache_key=subject.cache_key if cache and score is not None
                                else None,
                                prompt_hash=hashes[n])
    if errors:
        raise errors[0]
