"""Live adaptive evaluation: a CAT session asking a real model, every step persisted.

Loop of one run (Algorithm 1 of the ATLAS paper, with a model in the loop)::

    item  = session.next_item()                      # select (None: a stopping rule fired)
    store.begin_step(item, prompt)                   # transaction 1: the pending item
    reply = cache.get(model, item, prompt hash) or subject.ask(prompt)
    score = scorer(item, reply)
    session.record(item, score)                      # EAP theta, SE
    store.complete_step(reply, score, theta, se, session snapshot)   # transaction 2

The snapshot saved in transaction 2 is the complete CAT state (responses, theta, SE, and the
random generator's state), so :func:`resume` continues a killed run exactly where it stopped:
answered items are never asked again, the next selection draws the same random numbers, and the
final theta, SE and item sequence equal those of an uninterrupted run with the same seed. Only an
item that was *pending* (asked, reply not yet saved) when the process died is asked again.

Several models run concurrently (one thread each, :func:`evaluate_many`); requests to one
endpoint are bounded by the subjects' shared concurrency limiter.
"""
from __future__ import annotations

import hashlib
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from ..errors import AtlasError, BankError, ConfigError, LiveRunError
from .items import PROMPT_STYLES, build_prompt, item_record
from .scorers import score_answer
from .store import RunStore
from .subjects import Answer, SubjectError

__all__ = ["PromptSettings", "RunResult", "StepInfo", "evaluate", "evaluate_many", "resume",
           "start_run", "continue_run", "bank_hash", "load_bank_ref", "subject_from_description",
           "expected_accuracy"]


@dataclass(frozen=True)
class PromptSettings:
    """How items are turned into prompts (stored with the run; a resumed run reuses them)."""

    style: str = "zero-shot"
    max_tokens: int | None = None
    temperature: float = 0.0
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
    score: int
    theta: float
    se: float
    cached: bool
    latency_s: float


@dataclass
class RunResult:
    """Outcome of a live run (also readable later from the store)."""

    run_id: str
    model: str
    status: str
    theta: float | None
    se: float | None
    n_items: int
    n_correct: int
    accuracy: float | None
    stop_reason: str | None
    items: list = field(default_factory=list)
    scores: list = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    error: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_store(cls, store: RunStore, run_id: str) -> "RunResult":
        info = store.get_run(run_id)
        steps = store.steps(run_id)
        done = steps[steps["status"] == "answered"]
        return cls(run_id=run_id, model=info["model"], status=info["status"], theta=info["theta"],
                   se=info["se"], n_items=int(info["n_items"]), n_correct=int(info["n_correct"]),
                   accuracy=info["accuracy"], stop_reason=info["stop_reason"],
                   items=done["item_id"].astype(str).tolist(),
                   scores=done["score"].astype(int).tolist(),
                   prompt_tokens=int(info["prompt_tokens"]),
                   completion_tokens=int(info["completion_tokens"]),
                   latency_s=float(info["latency_s"]), error=info["error"])


# ---------------------------------------------------------------------------- helpers
def bank_hash(bank) -> str:
    """SHA-256 over item ids, parameters and item content (question, options, key, scorer).

    Cached on the bank object (banks are immutable value objects)."""
    cached = getattr(bank, "_atlas_live_hash", None)
    if cached is not None:
        return cached
    h = hashlib.sha256()
    h.update("\x1f".join(map(str, bank.item_ids)).encode())
    for arr in bank.params:
        h.update(np.ascontiguousarray(arr, dtype="<f8").tobytes())
    if bank.metadata is not None:
        for col in ("question", "choices", "answer", "scorer", "fewshot"):
            if col in bank.metadata.columns:
                values = ("\x1f".join(map(str, v)) if isinstance(v, (list, tuple, np.ndarray))
                          else str(v) for v in bank.metadata[col])
                h.update(col.encode() + b"\x1e" + "\x1e".join(values).encode())
    digest = h.hexdigest()
    try:
        bank._atlas_live_hash = digest
    except AttributeError:  # pragma: no cover - a bank type with __slots__
        pass
    return digest


def load_bank_ref(ref: str):
    """The bank a run was started on: ``shipped:<bench>`` or a bank file path."""
    from .items import _normalize_loaded, load_content_bank

    if ref.startswith("shipped:"):
        return load_content_bank(ref.split(":", 1)[1])
    path = Path(ref)
    if not path.exists():
        raise BankError(f"the run's bank file {ref!r} no longer exists; pass the bank explicitly")
    from ..irt.bank import ItemBank

    return _normalize_loaded(ItemBank.read(path))


def subject_from_description(desc: dict, bank=None, **overrides):
    """Rebuild a subject from its stored description (the API key comes from the environment)."""
    from .subjects import OpenAICompatible, SimulatedSubject

    kind = desc.get("type")
    if kind == "openai":
        opts = {k: desc[k] for k in ("timeout", "max_retries", "backoff", "max_backoff") if k in desc}
        opts.update({k: v for k, v in overrides.items() if v is not None})
        return OpenAICompatible(desc["base_url"], desc["model"], api_key_env=desc.get("api_key_env"),
                                chat=desc.get("kind", "chat") == "chat", **opts)
    if kind == "simulated":
        if bank is None:
            raise ConfigError("a simulated subject needs the bank to be rebuilt")
        return SimulatedSubject(bank, desc["theta"], seed=desc["seed"], name=desc["model"],
                                kind=desc.get("kind", "chat"))
    raise ConfigError(f"cannot rebuild a {kind!r} subject from the database; pass subject=...")


def expected_accuracy(bank, theta: float) -> float:
    """Reconstructed accuracy: the expected proportion correct over the bank's items at theta."""
    return float(np.mean(bank.probability(float(theta))))


def _session_cls():
    from ..cat.engine import CATSession

    return CATSession


# ---------------------------------------------------------------------------- runs
def start_run(store: RunStore, bank, subject, *, config=None, seed: int = 0,
              prompt: PromptSettings | None = None, bank_ref: str | None = None,
              run_id: str | None = None) -> str:
    """Create a run (CAT session seeded with ``seed``) in ``store``; returns its id."""
    from ..cat.config import CATConfig

    if bank.metadata is None or "question" not in bank.metadata.columns:
        raise BankError("live evaluation needs a bank with item content (question, choices, "
                        "answer, scorer); see atlascat.live.items")
    config = config if config is not None else CATConfig()
    prompt = prompt or PromptSettings()
    session = _session_cls()(bank, config=config, rng=np.random.default_rng(seed))
    return store.create_run(
        model=subject.name, subject=subject.describe(), cache_key=subject.cache_key,
        bank_ref=bank_ref, bank_hash=bank_hash(bank), n_bank_items=len(bank),
        config=config.to_dict(), prompt=asdict(prompt), seed=seed, session=session.to_dict(),
        run_id=run_id)


def continue_run(store: RunStore, run_id: str, bank, subject, *, cache: bool = True,
                 on_step: Callable[[StepInfo], None] | None = None) -> RunResult:
    """Drive a stored run to its end (a fresh run or a resumed one).

    Raises :class:`LiveRunError` (run marked ``error``, resumable) when the subject fails
    after its retries.
    """
    info = store.get_run(run_id)
    if info["status"] == "done":
        return RunResult.from_store(store, run_id)
    if bank_hash(bank) != info["bank_hash"]:
        raise BankError(f"run {run_id} was started on a different bank (items, parameters or "
                        "content differ); resume it with the same bank")
    if subject.cache_key != info["cache_key"]:
        raise ConfigError(f"run {run_id} asks {info['cache_key']!r}, not {subject.cache_key!r}")
    session = _session_cls().from_dict(info["session"], bank)
    settings = PromptSettings(**info["prompt"])
    store.claim(run_id)
    pending = store.pending_step(run_id)
    try:
        while True:
            item_id = session.next_item()
            if item_id is None:
                break
            step = int(session.n_items)
            if pending is not None and (pending["step"] != step or pending["item_id"] != item_id):
                raise LiveRunError(
                    f"run {run_id}: the CAT picked item {item_id!r} at step {step} but the database "
                    f"has item {pending['item_id']!r} pending at step {pending['step']}; the bank "
                    "or the engine changed since the run started")
            pending = None
            item = item_record(bank, item_id)
            prompt = build_prompt(item, kind=subject.kind, style=settings.style,
                                  max_tokens=settings.max_tokens,
                                  temperature=settings.temperature, system=settings.system)
            phash = prompt.hash()
            store.begin_step(run_id, step, item_id, prompt.render(), phash)
            hit = store.cache_get(subject.cache_key, item_id, phash) if cache else None
            if hit is not None:
                answer = Answer(text=hit["answer"], latency_s=float(hit["latency_s"] or 0.0),
                                prompt_tokens=hit["prompt_tokens"],
                                completion_tokens=hit["completion_tokens"], attempts=0,
                                cached=True)
            else:
                answer = subject.ask(prompt, item)
            score = score_answer(item, answer.text)
            session.record(item_id, score)
            theta, se = float(session.theta), float(session.se)
            store.complete_step(run_id, step, item_id=item_id, answer=answer, score=score,
                                theta=theta, se=se, session=session.to_dict(),
                                cache_key=subject.cache_key if cache else None, prompt_hash=phash)
            if on_step is not None:
                on_step(StepInfo(run_id, subject.name, step, item_id, score, theta, se,
                                 answer.cached, float(answer.latency_s)))
    except SubjectError as exc:
        store.fail_run(run_id, str(exc))
        raise LiveRunError(f"{exc}. Run {run_id} is saved with {session.n_items} answered item(s); "
                           f"resume it with: atlas evaluate --resume {run_id} --db {store.path}") from exc
    except KeyboardInterrupt:
        store.fail_run(run_id, "interrupted (Ctrl-C)")
        raise
    except AtlasError as exc:
        store.fail_run(run_id, str(exc))
        raise
    store.finish_run(run_id, stop_reason=getattr(session, "stop_reason", None),
                     accuracy=expected_accuracy(bank, session.theta))
    return RunResult.from_store(store, run_id)


def evaluate(bank, subject, *, store, config=None, seed: int = 0,
             prompt: PromptSettings | None = None, cache: bool = True,
             bank_ref: str | None = None, run_id: str | None = None,
             on_step: Callable[[StepInfo], None] | None = None) -> RunResult:
    """Run one adaptive test of ``subject`` on ``bank``, persisted in ``store`` (path or RunStore).

    Parameters
    ----------
    bank : ItemBank with content metadata (:func:`atlascat.live.items.load_content_bank`)
    subject : a :class:`~atlascat.live.subjects.Subject`
    config : CATConfig (default: the paper's settings, SE stop 0.1)
    seed : seeds the CAT's generator (first item and randomesque picks)
    prompt : PromptSettings (style, max_tokens, temperature, system message)
    cache : reuse stored answers of the same model to the same prompt
    bank_ref : how to find the bank again on resume (``shipped:arc`` or a file path)
    """
    store = store if isinstance(store, RunStore) else RunStore(store)
    rid = start_run(store, bank, subject, config=config, seed=seed, prompt=prompt,
                    bank_ref=bank_ref, run_id=run_id)
    return continue_run(store, rid, bank, subject, cache=cache, on_step=on_step)


def resume(store, run_id: str, *, bank=None, subject=None, cache: bool = True,
           on_step: Callable[[StepInfo], None] | None = None, **subject_overrides) -> RunResult:
    """Continue a run that was killed or failed; bank and subject default to the stored ones."""
    store = store if isinstance(store, RunStore) else RunStore(store)
    info = store.get_run(run_id)
    if bank is None:
        if not info["bank_ref"]:
            raise ConfigError(f"run {run_id} has no bank reference; pass bank=...")
        bank = load_bank_ref(info["bank_ref"])
    if subject is None:
        subject = subject_from_description(info["subject"], bank, **subject_overrides)
    return continue_run(store, run_id, bank, subject, cache=cache, on_step=on_step)


def evaluate_many(bank, subjects: Sequence, *, store, config=None, seed: int = 0,
                  prompt: PromptSettings | None = None, cache: bool = True,
                  bank_ref: str | None = None, resume_ids: Sequence[str] | None = None,
                  on_step: Callable[[StepInfo], None] | None = None,
                  max_workers: int | None = None) -> list:
    """Evaluate several subjects concurrently (one thread per run).

    Every run is created first (so all ids exist even if one fails early); a failing run is
    returned with ``status='error'`` and its message instead of stopping the others. With
    ``resume_ids`` (one per subject), those runs are continued instead of new ones started.
    """
    store = store if isinstance(store, RunStore) else RunStore(store)
    if resume_ids is None:
        ids = [start_run(store, bank, s, config=config, seed=seed, prompt=prompt,
                         bank_ref=bank_ref) for s in subjects]
    else:
        if len(resume_ids) != len(subjects):
            raise ConfigError("give one run id per subject")
        ids = list(resume_ids)
    lock = threading.Lock()

    def step_cb(info):
        if on_step is not None:
            with lock:
                on_step(info)

    def one(rid, subject):
        try:
            return continue_run(store, rid, bank, subject, cache=cache, on_step=step_cb)
        except AtlasError as exc:
            res = RunResult.from_store(store, rid)
            res.status, res.error = "error", str(exc)
            return res

    workers = max_workers or len(subjects)
    with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="atlas-live") as pool:
        futures = [pool.submit(one, rid, s) for rid, s in zip(ids, subjects)]
        results = [f.result() for f in futures]
    store.close()
    return results

