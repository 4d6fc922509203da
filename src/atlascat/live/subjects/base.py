"""What every subject shares: the :class:`Answer` a prompt subject returns, the :class:`Subject`
protocol and :class:`SubjectError` (a subject could not answer; the run can be resumed).

A subject has ``name``, ``kind`` (``"loglikelihood"``, ``"chat"``, ``"completion"`` or ``"item"``),
``cache_key``, ``protocol`` and ``describe()`` (a JSON-safe description; never a secret).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Protocol, runtime_checkable

from ...errors import LiveRunError
from ...content.items import Prompt

__all__ = ["Answer", "Subject", "LogLikelihoodSubject", "ItemScoredSubject", "SubjectError",
           "reply_records",
           "is_loglikelihood", "is_item_scored"]


class SubjectError(LiveRunError):
    """A subject could not answer (after retries); the run can be resumed later. ``status``:
    the HTTP status that ended it (the last attempt's), None when none did; ``said``: the
    server's own error text in that reply (its JSON error's message, else the reply's text),
    None when it sent none."""

    def __init__(self, *args, status: int | None = None, said: str | None = None):
        super().__init__(*args)
        self.status = status
        self.said = said


@dataclass
class Answer:
    """A model's reply to one prompt."""

    text: str
    latency_s: float
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    attempts: int = 1
    finish_reason: str | None = None
    cached: bool = False
    meta: dict = field(default_factory=dict)


@runtime_checkable
class Subject(Protocol):
    """A prompt subject: ``ask(prompt, item) -> Answer`` (log-likelihood subjects have
    ``loglikelihood(requests)`` / ``generate_until(requests)`` instead)."""

    name: str
    kind: str
    cache_key: str

    def ask(self, prompt: Prompt, item: Mapping) -> Answer: ...

    def describe(self) -> dict: ...


@runtime_checkable
class LogLikelihoodSubject(Protocol):
    """A subject asked the leaderboard's requests themselves (``kind == "loglikelihood"``):
    ``loglikelihood(requests)`` -> one log-likelihood per (context, continuation) request,
    ``generate_until(requests)`` -> one generation per request."""

    name: str
    kind: str
    cache_key: str

    def loglikelihood(self, requests) -> list: ...

    def generate_until(self, requests) -> list: ...

    def describe(self) -> dict: ...


@runtime_checkable
class ItemScoredSubject(Protocol):
    """A subject that scores items itself (``kind == "item"``): ``score_items(item_ids)`` ->
    one (score 0/1, raw reply text) per item id, for a bank without requests (built from a
    response matrix) whose items the user's own harness can run."""

    name: str
    kind: str
    cache_key: str

    def score_items(self, item_ids) -> list: ...

    def describe(self) -> dict: ...


def is_item_scored(subject) -> bool:
    """Whether ``subject`` scores items by id itself (:class:`ItemScoredSubject`): no item
    content or requests are needed."""
    return getattr(subject, "kind", None) == "item"


def is_loglikelihood(subject) -> bool:
    """Whether ``subject`` is asked the bank's requests (the leaderboard's protocol) rather than
    text prompts: its ``kind`` (every subject has one, see :class:`Subject`)."""
    return subject.kind == "loglikelihood"


def reply_records(text: str, who: str, needs: tuple, named: str):
    """(line number, line, object) of each non-blank line of a command's reply ``text``; one
    :class:`LiveRunError` for a line that is not a JSON object holding every key of ``needs``
    (``named``: what a line must hold, in the message)."""
    import json

    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            rec = None
        if not isinstance(rec, dict) or any(k not in rec for k in needs):
            raise LiveRunError(f"{who}: reply line {n} is not a JSON object with {named}: "
                               f"{line[:120]!r} (the program's other output, a log or "
                               "progress line, goes to standard error)")
        yield n, line, rec
