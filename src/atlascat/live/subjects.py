"""Subjects: the models a live adaptive test asks.

A subject answers one :class:`~atlascat.live.items.Prompt` at a time:

``subject.ask(prompt, item) -> Answer``   (raw text, latency, tokens, attempts)

plus ``subject.name`` (the model name), ``subject.kind`` ("chat" or "completion"),
``subject.cache_key`` (what the response cache is keyed on besides item and prompt hash) and
``subject.describe()`` (a JSON-safe description; never contains a secret).

Adapters
--------
OpenAICompatible   any server speaking OpenAI's ``/v1/chat/completions`` or ``/v1/completions``
                   (vLLM, llama.cpp server, Ollama, OpenAI, ...) over HTTP with ``httpx``:
                   timeouts, retries with exponential backoff on 429 / 5xx / timeouts /
                   connection errors / malformed JSON (honouring ``Retry-After``), a concurrency
                   limit shared by every subject given the same limiter, token and latency
                   capture. The API key is read from an environment variable (default
                   ``OPENAI_API_KEY``) and only ever sent in the ``Authorization`` header.
CallableSubject    wraps a Python function ``fn(item, prompt) -> str``.
SimulatedSubject   answers correctly with the bank's probability at a fixed theta, decided
                   deterministically per item from a seed (for demos and tests).

``httpx`` is imported inside :class:`OpenAICompatible` only (optional extra ``atlascat[live]``).
"""
from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping, Protocol, runtime_checkable
from urllib.parse import urlsplit, urlunsplit

import numpy as np

from ..errors import ConfigError, LiveRunError
from .items import Prompt, correct_answer_text, wrong_answer_text

__all__ = ["Answer", "Subject", "SubjectError", "OpenAICompatible", "CallableSubject",
           "SimulatedSubject", "item_uniform", "RETRY_STATUS"]

#: HTTP statuses retried with backoff (besides every 5xx)
RETRY_STATUS = frozenset({408, 409, 425, 429})


class SubjectError(LiveRunError):
    """A subject could not answer (after retries); the run can be resumed later."""


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
    name: str
    kind: str
    cache_key: str

    def ask(self, prompt: Prompt, item: Mapping) -> Answer: ...

    def describe(self) -> dict: ...


def _safe_url(url: str) -> str:
    """The URL without user:password (never stored or printed with credentials)."""
    parts = urlsplit(url)
    netloc = parts.hostname or ""
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))


class OpenAICompatible:
    """A model behind an OpenAI-compatible HTTP endpoint.

    Parameters
    ----------
    base_url : e.g. ``http://127.0.0.1:8000/v1`` (``/v1`` is appended when the URL has no path)
    model : model name sent in the request body
    api_key_env : name of the environment variable holding the API key (read once, here; the
        key is sent as ``Authorization: Bearer ...`` and never stored). Missing variable: no
        header is sent (fine for local servers).
    chat : True for ``/chat/completions``, False for ``/completions``
    timeout : seconds per request (connect, read, write, pool)
    max_retries : retries after the first attempt on 429, 408, 5xx, timeouts, connection errors
        and malformed JSON; then :class:`SubjectError`
    backoff, max_backoff : delay before retry k (1-based) is ``min(max_backoff, backoff * 2**(k-1))``,
        or the server's ``Retry-After`` when that is longer (still capped)
    max_concurrency : requests in flight at once through this subject's limiter
    limiter : a ``threading.Semaphore`` shared by several subjects (overrides max_concurrency)
    sleep : the sleep function used between retries (injectable for tests)
    """

    def __init__(self, base_url: str, model: str, *, api_key_env: str = "OPENAI_API_KEY",
                 chat: bool = True, timeout: float = 60.0, max_retries: int = 5,
                 backoff: float = 1.0, max_backoff: float = 30.0, max_concurrency: int = 4,
                 limiter: threading.Semaphore | None = None, sleep: Callable = time.sleep,
                 extra_body: Mapping | None = None):
        try:
            import httpx  # noqa: F401  (optional dependency)
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ConfigError("live evaluation needs httpx: pip install 'atlascat[live]'") from exc
        if not model:
            raise ConfigError("give the model name (--model NAME)")
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"base URL {_safe_url(base_url)!r} is not an http(s) URL, "
                              "e.g. http://127.0.0.1:8000/v1")
        if parts.path in ("", "/"):
            base_url = base_url.rstrip("/") + "/v1"
        if timeout <= 0 or max_retries < 0 or backoff < 0 or max_concurrency < 1:
            raise ConfigError("timeout must be > 0, max_retries >= 0, backoff >= 0, "
                              "max_concurrency >= 1")
        self.base_url = base_url.rstrip("/")
        self.model = str(model)
        self.name = self.model
        self.kind = "chat" if chat else "completion"
        self.api_key_env = api_key_env
        self.timeout = float(timeout)
        self.max_retries = int(max_retries)
        self.backoff = float(backoff)
        self.max_backoff = float(max_backoff)
        self.extra_body = dict(extra_body or {})
        self._limiter = limiter or threading.BoundedSemaphore(int(max_concurrency))
        self._sleep = sleep
        self._key = os.environ.get(api_key_env) if api_key_env else None
        self._client = None
        self._client_lock = threading.Lock()

    # never show the key, even by accident
    def __repr__(self) -> str:
        return (f"OpenAICompatible(base_url={_safe_url(self.base_url)!r}, model={self.model!r}, "
                f"kind={self.kind!r}, api_key_env={self.api_key_env!r})")

    __str__ = __repr__

    def __getstate__(self):
        raise TypeError("OpenAICompatible holds a secret and is not picklable")

    @property
    def cache_key(self) -> str:
        return f"{self.model}@{_safe_url(self.base_url)}#{self.kind}"

    @property
    def endpoint(self) -> str:
        return self.base_url + ("/chat/completions" if self.kind == "chat" else "/completions")

    def describe(self) -> dict:
        return {"type": "openai", "base_url": _safe_url(self.base_url), "model": self.model,
                "kind": self.kind, "api_key_env": self.api_key_env, "timeout": self.timeout,
                "max_retries": self.max_retries, "backoff": self.backoff,
                "max_backoff": self.max_backoff}

    def _http(self):
        import httpx

        with self._client_lock:
            if self._client is None:
                headers = {"Content-Type": "application/json"}
                if self._key:
                    headers["Authorization"] = f"Bearer {self._key}"
                self._client = httpx.Client(timeout=httpx.Timeout(self.timeout), headers=headers)
            return self._client

    def close(self) -> None:
        with self._client_lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    def _redact(self, text: str) -> str:
        if self._key:
            text = text.replace(self._key, "***")
        return text

    def _parse(self, data) -> Answer:
        choice = data["choices"][0]
        if self.kind == "chat":
            text = choice["message"].get("content")
        else:
            text = choice["text"]
        if text is None:
            text = ""
        if not isinstance(text, str):
            raise TypeError("answer text is not a string")
        usage = data.get("usage") or {}
        return Answer(text=text, latency_s=0.0, prompt_tokens=usage.get("prompt_tokens"),
                      completion_tokens=usage.get("completion_tokens"),
                      finish_reason=choice.get("finish_reason"))

    def _delay(self, attempt: int, retry_after) -> float:
        delay = self.backoff * 2.0 ** (attempt - 1)
        if retry_after is not None:
            try:
                delay = max(delay, float(retry_after))
            except ValueError:
                pass
        return min(self.max_backoff, delay)

    def ask(self, prompt: Prompt, item: Mapping | None = None) -> Answer:
        """Send ``prompt``; retry transient failures; return the reply or raise SubjectError."""
        import httpx

        if prompt.kind != self.kind:
            raise ConfigError(f"a {prompt.kind} prompt cannot be sent to a {self.kind} endpoint")
        body = {"model": self.model, **prompt.payload(), **self.extra_body}
        client = self._http()
        last = "no attempt made"
        started = time.perf_counter()
        for attempt in range(1, self.max_retries + 2):
            retry_after = None
            with self._limiter:
                t0 = time.perf_counter()
                try:
                    resp = client.post(self.endpoint, json=body)
                except httpx.TimeoutException:
                    last = f"timed out after {self.timeout:g} s"
                    resp = None
                except httpx.TransportError as exc:
                    last = f"connection error ({type(exc).__name__}: {self._redact(str(exc))[:200]})"
                    resp = None
                latency = time.perf_counter() - t0
            if resp is not None:
                if resp.status_code == 200:
                    try:
                        answer = self._parse(resp.json())
                    except (json.JSONDecodeError, ValueError, KeyError, IndexError, TypeError) as exc:
                        last = f"malformed response ({type(exc).__name__}: {self._redact(resp.text[:120])!r})"
                    else:
                        answer.latency_s = latency
                        answer.attempts = attempt
                        answer.meta["total_s"] = time.perf_counter() - started
                        return answer
                elif resp.status_code in (401, 403):
                    raise SubjectError(
                        f"HTTP {resp.status_code} from {_safe_url(self.endpoint)}: not authorized. "
                        f"Check that the environment variable {self.api_key_env} holds a valid key")
                elif resp.status_code in RETRY_STATUS or resp.status_code >= 500:
                    last = f"HTTP {resp.status_code} ({self._redact(resp.text[:200]).strip()!r})"
                    retry_after = resp.headers.get("retry-after")
                else:
                    raise SubjectError(
                        f"HTTP {resp.status_code} from {_safe_url(self.endpoint)} for model "
                        f"{self.model!r}: {self._redact(resp.text[:300]).strip()} (not retried; "
                        "check the model name and request settings)")
            if attempt <= self.max_retries:
                self._sleep(self._delay(attempt, retry_after))
        raise SubjectError(f"model {self.model!r} at {_safe_url(self.endpoint)} failed "
                           f"{self.max_retries + 1} attempt(s); last: {last}")


class CallableSubject:
    """A subject backed by a Python function ``fn(item, prompt) -> str``.

    ``item`` is the item's content dict, ``prompt`` the :class:`Prompt` that would be sent.
    """

    def __init__(self, fn: Callable, name: str = "callable", *, kind: str = "chat"):
        if not callable(fn):
            raise ConfigError("CallableSubject needs a callable fn(item, prompt) -> str")
        if kind not in ("chat", "completion"):
            raise ConfigError(f"kind must be 'chat' or 'completion', not {kind!r}")
        self.fn, self.name, self.kind = fn, str(name), kind

    @property
    def cache_key(self) -> str:
        return f"{self.name}@callable#{self.kind}"

    def describe(self) -> dict:
        return {"type": "callable", "model": self.name, "kind": self.kind,
                "function": getattr(self.fn, "__qualname__", type(self.fn).__name__)}

    def ask(self, prompt: Prompt, item: Mapping) -> Answer:
        t0 = time.perf_counter()
        out = self.fn(item, prompt)
        if isinstance(out, Answer):
            return out
        return Answer(text="" if out is None else str(out), latency_s=time.perf_counter() - t0)


def item_uniform(seed: int, item_id: str) -> float:
    """A uniform(0, 1) number fixed by ``(seed, item_id)``: the same item always draws the same.

    Lets a scripted subject answer deterministically per item, so an interrupted and resumed
    run sees exactly the answers an uninterrupted one would.
    """
    digest = hashlib.sha256(f"{int(seed)}:{item_id}".encode()).digest()
    return (int.from_bytes(digest[:8], "little") >> 11) / float(1 << 53)


class SimulatedSubject:
    """Answers item i correctly iff ``item_uniform(seed, i) < P_i(theta)`` under ``bank``.

    The replies are texts the item's scorer reads (the key letter / ``#### n`` or a wrong one),
    so the full live path (prompt, reply, scorer) is exercised.
    """

    def __init__(self, bank, theta: float, *, seed: int = 0, name: str | None = None,
                 kind: str = "chat"):
        self.theta = float(theta)
        self.seed = int(seed)
        self.kind = kind
        self.name = name or f"simulated(theta={self.theta:g},seed={self.seed})"
        self._p = dict(zip(bank.item_ids.tolist(), np.asarray(bank.probability(self.theta)).tolist()))

    @property
    def cache_key(self) -> str:
        return f"{self.name}@simulated(theta={self.theta!r},seed={self.seed})#{self.kind}"

    def describe(self) -> dict:
        return {"type": "simulated", "model": self.name, "kind": self.kind, "theta": self.theta,
                "seed": self.seed}

    def correct(self, item_id: str) -> bool:
        return item_uniform(self.seed, item_id) < self._p[str(item_id)]

    def ask(self, prompt: Prompt, item: Mapping) -> Answer:
        ok = self.correct(item["item_id"])
        return Answer(text=correct_answer_text(item) if ok else wrong_answer_text(item),
                      latency_s=0.0)
