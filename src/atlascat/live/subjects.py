"""Subjects: the models a live adaptive test asks.

Two kinds of subject, told apart by ``subject.kind``:

- **log-likelihood subjects** (``kind = "loglikelihood"``; the leaderboard's protocol) answer the
  lm-evaluation-harness requests of a whole round in one call::

      subject.loglikelihood(requests) -> list[float]   # sum log p(continuation | context)
      subject.generate_until(requests) -> list[str]    # greedy generation up to a stop string

- **prompt subjects** (``kind = "chat"`` or ``"completion"``) answer one
  :class:`~atlascat.live.items.Prompt` at a time, ``subject.ask(prompt, item) -> Answer``; a
  letter or number is then extracted from the text. This is not how the banks were calibrated:
  their results are labelled ``protocol = "approximate"``.

Every subject has ``name`` (the model name), ``cache_key`` (what the answer cache is keyed on
besides item and prompt hash), ``protocol`` and ``describe()`` (a JSON-safe description; never
a secret).

Adapters
--------
OpenAICompletionsSubject  ``/v1/completions`` with ``echo`` + prompt ``logprobs`` (vLLM), the
                          leaderboard's log-likelihoods over HTTP; a server without prompt
                          log-probabilities is refused with :class:`NoPromptLogprobsError`.
OpenAICompatible          OpenAI-style ``/v1/chat/completions`` or ``/v1/completions`` asked with
                          prompts (approximate protocol).
ReplaySubject             answers from a recorded response matrix (``replay:MATRIX.csv#MODEL``).
CallableSubject           wraps a Python function ``fn(item, prompt) -> str``.
SimulatedSubject          answers correctly with the bank's probability at a fixed theta.
:func:`subject_from_spec` builds any of these (and ``hf:`` / ``lmeval:`` subjects from
:mod:`atlascat.live.hf` / :mod:`atlascat.live.lmeval_backend`) from a ``--subject`` string.

The HTTP subjects share: one deadline for the *whole* request (a server trickling bytes cannot
stretch it), retries with exponential backoff on 429 / 5xx / timeouts / connection errors /
malformed or empty replies (honouring ``Retry-After``), a concurrency limit shared by every
subject given the same limiter, and the API key read from an environment variable, sent only in
the ``Authorization`` header and redacted from every reply (``subject.redact``).

``httpx`` is imported by the HTTP subjects only (optional extra ``atlascat[live]``).
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping, Protocol, Sequence, runtime_checkable
from urllib.parse import urlsplit, urlunsplit

import numpy as np

from ..errors import AtlasError, ConfigError, LiveRunError
from .items import Prompt, correct_answer_text, wrong_answer_text

__all__ = ["Answer", "Subject", "SubjectError", "OpenAICompatible", "OpenAICompletionsSubject",
           "NoPromptLogprobsError", "ReplaySubject", "CallableSubject", "SimulatedSubject",
           "subject_from_spec", "parse_theta_spec", "continuation_logprob", "harness_split",
           "item_uniform", "RETRY_STATUS", "MAX_REPLY_BYTES", "SUBJECT_SPECS"]

#: HTTP statuses retried with backoff (besides every 5xx)
RETRY_STATUS = frozenset({408, 409, 425, 429})

#: a reply longer than this is an error (what is stored is capped much lower by the store)
MAX_REPLY_BYTES = 64 * 1024 * 1024


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


class _Transient(Exception):
    """One attempt failed in a way worth retrying (message = what happened)."""


class _HTTPSubject:
    """What every HTTP subject shares: URL and key handling, one whole-request deadline, a cap
    on reply size, retries with backoff, a concurrency limiter, redaction of the key."""

    #: the ``type`` written by ``describe()``
    _type = "openai"

    def __init__(self, base_url: str, model: str, *, api_key_env: str | None = "OPENAI_API_KEY",
                 timeout: float = 60.0, max_retries: int = 5, backoff: float = 1.0,
                 max_backoff: float = 30.0, max_concurrency: int = 4,
                 limiter: threading.Semaphore | None = None, sleep: Callable = time.sleep,
                 extra_body: Mapping | None = None, max_reply_bytes: int = MAX_REPLY_BYTES):
        try:
            import httpx  # noqa: F401  (optional dependency)
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ConfigError("live evaluation needs httpx: pip install 'atlascat[live]'") from exc
        if not model:
            raise ConfigError("give the model name (--llm NAME)")
        parts = urlsplit(str(base_url))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"base URL {_safe_url(str(base_url))!r} is not an http(s) URL, "
                              "e.g. http://127.0.0.1:8000/v1")
        if parts.path in ("", "/"):
            base_url = str(base_url).rstrip("/") + "/v1"
        try:
            ok = (math.isfinite(float(timeout)) and float(timeout) > 0 and int(max_retries) >= 0
                  and float(backoff) >= 0 and int(max_concurrency) >= 1
                  and int(max_reply_bytes) >= 1024)
        except (TypeError, ValueError):
            ok = False
        if not ok:
            raise ConfigError("timeout must be a finite number > 0, max_retries >= 0, "
                              "backoff >= 0, max_concurrency >= 1, max_reply_bytes >= 1024")
        self.base_url = str(base_url).rstrip("/")
        self.model = str(model)
        self.name = self.model
        self.api_key_env = api_key_env
        self.timeout = float(timeout)
        self.max_retries = int(max_retries)
        self.backoff = float(backoff)
        self.max_backoff = float(max_backoff)
        self.max_reply_bytes = int(max_reply_bytes)
        self.extra_body = dict(extra_body or {})
        self._limiter = limiter or threading.BoundedSemaphore(int(max_concurrency))
        self._max_concurrency = int(max_concurrency)
        self._sleep = sleep
        self._key = os.environ.get(api_key_env) if api_key_env else None
        self._client = None
        self._client_lock = threading.Lock()

    # never show the key, even by accident
    def __repr__(self) -> str:
        return (f"{type(self).__name__}(base_url={_safe_url(self.base_url)!r}, "
                f"model={self.model!r}, kind={self.kind!r}, api_key_env={self.api_key_env!r})")

    __str__ = __repr__

    def __getstate__(self):
        raise TypeError(f"{type(self).__name__} holds a secret and is not picklable")

    def describe(self) -> dict:
        return {"type": self._type, "base_url": _safe_url(self.base_url), "model": self.model,
                "kind": self.kind, "api_key_env": self.api_key_env, "timeout": self.timeout,
                "max_retries": self.max_retries, "backoff": self.backoff,
                "max_backoff": self.max_backoff}

    def redact(self, text):
        """``text`` with the API key (and its Bearer header form) replaced by ``***``."""
        if self._key and isinstance(text, str) and self._key in text:
            text = text.replace(self._key, "***")
        return text

    _redact = redact

    def _http(self):
        import httpx

        with self._client_lock:
            if self._client is None:
                headers = {"Content-Type": "application/json"}
                if self._key:
                    headers["Authorization"] = f"Bearer {self._key}"
                # the per-read timeout only bounds silences; _once() bounds the whole request
                limits = httpx.Limits(max_connections=max(4, 2 * self._max_concurrency))
                self._client = httpx.Client(timeout=httpx.Timeout(self.timeout), headers=headers,
                                            limits=limits)
            return self._client

    def close(self) -> None:
        with self._client_lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    def _delay(self, attempt: int, retry_after) -> float:
        delay = self.backoff * 2.0 ** (attempt - 1)
        if retry_after is not None:
            try:
                delay = max(delay, float(retry_after))
            except ValueError:
                pass
        return min(self.max_backoff, delay)

    def _once(self, url: str, body: dict):
        """One POST bounded as a whole by ``self.timeout`` seconds (connect, headers and body:
        a server trickling one byte at a time cannot stretch it); -> (status, headers, bytes).

        The request runs on a helper thread that the caller stops waiting for at the deadline;
        that thread gives up by itself at the next chunk (or silence) after the deadline."""
        import httpx

        client = self._http()
        deadline = time.monotonic() + self.timeout
        box: dict = {}
        done = threading.Event()
        cap = self.max_reply_bytes

        def work():
            try:
                with client.stream("POST", url, json=body) as resp:
                    chunks, size = [], 0
                    for chunk in resp.iter_bytes():
                        if time.monotonic() > deadline:
                            raise _Transient(f"timed out after {self.timeout:g} s (whole request)")
                        size += len(chunk)
                        if size > cap:
                            raise _Transient(f"reply larger than {cap} bytes (max_reply_bytes)")
                        chunks.append(chunk)
                    box["reply"] = (resp.status_code, resp.headers, b"".join(chunks))
            except _Transient as exc:
                box["error"] = str(exc)
            except httpx.TimeoutException:
                box["error"] = f"timed out after {self.timeout:g} s"
            except httpx.TransportError as exc:
                box["error"] = (f"connection error ({type(exc).__name__}: "
                                f"{self.redact(str(exc))[:200]})")
            except Exception as exc:  # noqa: BLE001 - reported, never raised on a helper thread
                box["error"] = f"{type(exc).__name__}: {self.redact(str(exc))[:200]}"
            finally:
                done.set()

        threading.Thread(target=work, daemon=True, name="atlas-http").start()
        if not done.wait(self.timeout):
            raise _Transient(f"timed out after {self.timeout:g} s (whole request)")
        if "error" in box:
            raise _Transient(box["error"])
        return box["reply"]

    def _post_json(self, path: str, body: dict, *, fatal_status=None, retries: int | None = None):
        """POST ``body`` to ``base_url + path`` with retries; -> (parsed JSON, latency, attempts).

        ``fatal_status(status, text) -> Exception | None`` may turn a 4xx into a specific error
        (raised as is, not retried)."""
        url = self.base_url + path
        last = "no attempt made"
        retries = self.max_retries if retries is None else int(retries)
        for attempt in range(1, retries + 2):
            retry_after = None
            with self._limiter:
                t0 = time.perf_counter()
                try:
                    status, headers, content = self._once(url, body)
                except _Transient as exc:
                    status, headers, content = None, {}, b""
                    last = str(exc)
                latency = time.perf_counter() - t0
            if status is not None:
                text = content.decode("utf-8", errors="replace")
                if status == 200:
                    try:
                        return json.loads(text), latency, attempt
                    except ValueError:
                        last = f"malformed response (not JSON: {self.redact(text[:120])!r})"
                elif status in (401, 403):
                    raise SubjectError(
                        f"HTTP {status} from {_safe_url(url)}: not authorized. Check that the "
                        f"environment variable {self.api_key_env} holds a valid key")
                elif status in RETRY_STATUS or status >= 500:
                    last = f"HTTP {status} ({self.redact(text[:200]).strip()!r})"
                    retry_after = headers.get("retry-after")
                else:
                    special = fatal_status(status, text) if fatal_status else None
                    if special is not None:
                        raise special
                    raise SubjectError(
                        f"HTTP {status} from {_safe_url(url)} for model {self.model!r}: "
                        f"{self.redact(text[:300]).strip()} (not retried; check the model name "
                        "and request settings)")
            if attempt <= retries:
                self._sleep(self._delay(attempt, retry_after))
        raise SubjectError(f"model {self.model!r} at {_safe_url(url)} failed "
                           f"{retries + 1} attempt(s); last: {last}")

    def _retrying(self, path: str, body: dict, parse: Callable, *, fatal_status=None):
        """POST with retries where a 200 whose content ``parse`` rejects (ValueError, KeyError,
        IndexError, TypeError) counts as a failed attempt too; -> (parse(data), latency, attempts)."""
        last = None
        total_attempts = 0
        budget = self.max_retries
        while True:
            data, latency, attempts = self._post_json(path, body, fatal_status=fatal_status,
                                                      retries=budget)
            total_attempts += attempts
            try:
                return parse(data), latency, total_attempts
            except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
                if isinstance(exc, AtlasError):
                    raise
                last = f"malformed response ({type(exc).__name__}: {self.redact(str(exc))[:160]})"
            budget -= attempts
            if budget < 0:
                raise SubjectError(f"model {self.model!r} at {_safe_url(self.base_url + path)} "
                                   f"failed {total_attempts} attempt(s); last: {last}")
            self._sleep(self._delay(total_attempts, None))


class OpenAICompatible(_HTTPSubject):
    """A model behind an OpenAI-compatible HTTP endpoint, asked with prompts (chat or text).

    The answers come from free text (a letter or a number extracted by the item's scorer), not
    from the log-likelihoods the banks were calibrated with: results are labelled
    ``protocol = "approximate"``. For the leaderboard's protocol use
    :class:`OpenAICompletionsSubject` (``--subject completions:URL``).

    Parameters
    ----------
    base_url : e.g. ``http://127.0.0.1:8000/v1`` (``/v1`` is appended when the URL has no path)
    model : model name sent in the request body
    api_key_env : name of the environment variable holding the API key (read once, here; the
        key is sent as ``Authorization: Bearer ...``, never stored, and redacted from every
        reply). Missing variable: no header is sent (fine for local servers).
    chat : True for ``/chat/completions``, False for ``/completions``
    timeout : seconds per request, for the *whole* request (connect, headers, body)
    max_retries : retries after the first attempt on 429, 408, 5xx, timeouts, connection errors,
        malformed JSON and replies without content (``"content": null``); then
        :class:`SubjectError`
    backoff, max_backoff : delay before retry k (1-based) is ``min(max_backoff, backoff * 2**(k-1))``,
        or the server's ``Retry-After`` when that is longer (still capped)
    max_concurrency : requests in flight at once through this subject's limiter
    limiter : a ``threading.Semaphore`` shared by several subjects (overrides max_concurrency)
    sleep : the sleep function used between retries (injectable for tests)
    max_reply_bytes : a longer reply is an error (what is *stored* is capped separately, see
        :class:`~atlascat.live.store.RunStore`)
    """

    protocol = "approximate"

    def __init__(self, base_url: str, model: str, *, api_key_env: str | None = "OPENAI_API_KEY",
                 chat: bool = True, timeout: float = 60.0, max_retries: int = 5,
                 backoff: float = 1.0, max_backoff: float = 30.0, max_concurrency: int = 4,
                 limiter: threading.Semaphore | None = None, sleep: Callable = time.sleep,
                 extra_body: Mapping | None = None, max_reply_bytes: int = MAX_REPLY_BYTES):
        self.kind = "chat" if chat else "completion"
        super().__init__(base_url, model, api_key_env=api_key_env, timeout=timeout,
                         max_retries=max_retries, backoff=backoff, max_backoff=max_backoff,
                         max_concurrency=max_concurrency, limiter=limiter, sleep=sleep,
                         extra_body=extra_body, max_reply_bytes=max_reply_bytes)

    @property
    def cache_key(self) -> str:
        return f"{self.model}@{_safe_url(self.base_url)}#{self.kind}"

    @property
    def endpoint(self) -> str:
        return self.base_url + ("/chat/completions" if self.kind == "chat" else "/completions")

    def _parse(self, data) -> Answer:
        choice = data["choices"][0]
        if self.kind == "chat":
            text = choice["message"].get("content")
        else:
            text = choice["text"]
        if text is None:
            # never scored: a null reply is a failed attempt, not a wrong answer
            raise ValueError(f"the reply has no content (null; finish_reason="
                             f"{choice.get('finish_reason')!r})")
        if not isinstance(text, str):
            raise TypeError("answer text is not a string")
        usage = data.get("usage") or {}
        return Answer(text=self.redact(text), latency_s=0.0,
                      prompt_tokens=usage.get("prompt_tokens"),
                      completion_tokens=usage.get("completion_tokens"),
                      finish_reason=choice.get("finish_reason"))

    def ask(self, prompt: Prompt, item: Mapping | None = None) -> Answer:
        """Send ``prompt``; retry transient failures; return the reply or raise SubjectError."""
        if prompt.kind != self.kind:
            raise ConfigError(f"a {prompt.kind} prompt cannot be sent to a {self.kind} endpoint")
        body = {"model": self.model, **prompt.payload(), **self.extra_body}
        path = "/chat/completions" if self.kind == "chat" else "/completions"
        started = time.perf_counter()
        answer, latency, attempts = self._retrying(path, body, self._parse)
        answer.latency_s = latency
        answer.attempts = attempts
        answer.meta["total_s"] = time.perf_counter() - started
        return answer


class NoPromptLogprobsError(ConfigError):
    """The server does not return log-probabilities of the prompt (echo): the leaderboard's
    log-likelihood protocol cannot be followed. Not resumable: use another server or subject."""


def harness_split(context: str, continuation: str) -> tuple[str, str]:
    """lm-evaluation-harness's ``_encode_pair`` rule: trailing whitespace of the context moves to
    the start of the continuation (the text sent is unchanged; only the boundary moves)."""
    n_spaces = len(context) - len(context.rstrip())
    if n_spaces > 0:
        return context[:-n_spaces], context[-n_spaces:] + continuation
    return context, continuation


def continuation_logprob(logprobs: Mapping, boundary: int, end: int, text: str | None = None) -> float:
    """Sum of the log-probabilities of the echoed tokens that belong to the continuation.

    Boundary rule: a token belongs to the continuation iff its ``text_offset`` lies in
    ``[boundary, end)`` (``boundary`` = context length after :func:`harness_split`, ``end`` = the
    prompt's length, so generated tokens are never counted). The harness instead tokenizes the
    context alone and takes the tokens of ``encode(context + continuation)`` past
    ``len(encode(context))``; the two agree whenever no token straddles the boundary, which the
    whitespace move makes the rule for BPE tokenizers (continuations start with a space). When a
    token does straddle it (``"Answer: 1" + "5"`` read as ``" 15"``), it is left to the context,
    as the harness does: the continuation's tokens are those after it, and a continuation that
    lies wholly inside the straddling token scores 0.0, the harness's (degenerate) value too."""
    if not isinstance(logprobs, Mapping):
        raise NoPromptLogprobs("no logprobs object")
    offsets = logprobs.get("text_offset")
    values = logprobs.get("token_logprobs")
    if not offsets or not values:
        raise NoPromptLogprobs("no token_logprobs / text_offset")
    if len(offsets) != len(values):
        raise ValueError("token_logprobs and text_offset differ in length")
    # echoed: offsets start at the prompt's start and the returned text holds the whole prompt
    if int(offsets[0]) != 0 or (isinstance(text, str) and len(text) < end):
        raise NoPromptLogprobs("the prompt was not echoed")
    picked = [i for i, off in enumerate(offsets) if boundary <= int(off) < end]
    picked_values = []
    for i in picked:
        v = values[i]
        if v is None:
            raise NoPromptLogprobs(f"token {i} of the continuation has a null log-probability")
        v = float(v)
        if not math.isfinite(v) and v != -math.inf:
            raise ValueError(f"log-probability {v} is not a number")
        picked_values.append(v)
    # numpy's (pairwise) sum, as in-process backends sum their arrays: same floats, same result
    return float(np.sum(np.asarray(picked_values, dtype=np.float64)))


class NoPromptLogprobs(Exception):
    """Internal: a reply without prompt log-probabilities (turned into NoPromptLogprobsError)."""


class OpenAICompletionsSubject(_HTTPSubject):
    """An OpenAI-compatible ``/v1/completions`` server asked the leaderboard's way: the
    log-likelihood of each continuation given its context, read from the echoed prompt's
    log-probabilities (``echo=true, logprobs=1, max_tokens=0``); vLLM serves this.

    ``loglikelihood(requests)`` sends ``prompt = context + continuation`` and sums the
    log-probabilities of the continuation's tokens (:func:`continuation_logprob` states the
    token-boundary rule and how it compares with the harness's). Up to ``batch_prompts`` prompts
    go in one request (a list ``prompt``); a server that refuses lists is asked one prompt per
    request. Requests run concurrently up to ``max_concurrency``. ``generate_until`` asks
    ``/v1/completions`` greedily (temperature 0) with the stop sequences.

    A server that returns no prompt log-probabilities (llama.cpp's server, chat-only APIs)
    raises :class:`NoPromptLogprobsError` at the first request: it is never scored at chance.
    If the server refuses ``max_tokens=0`` it is asked with ``max_tokens=1`` and the generated
    token is ignored.

    Other parameters are those of :class:`OpenAICompatible`.
    """

    kind = "loglikelihood"
    protocol = "leaderboard"
    _type = "completions"

    def __init__(self, base_url: str, model: str, *, batch_prompts: int = 16, **http):
        super().__init__(base_url, model, **http)
        if int(batch_prompts) < 1:
            raise ConfigError(f"batch_prompts must be >= 1, got {batch_prompts}")
        self.batch_prompts = int(batch_prompts)
        self._lists_ok = True
        self._max_tokens = 0
        self.usage = {"prompt_tokens": 0, "completion_tokens": 0, "requests": 0}
        self._usage_lock = threading.Lock()

    @property
    def cache_key(self) -> str:
        return f"{self.model}@{_safe_url(self.base_url)}#completions-loglikelihood"

    def describe(self) -> dict:
        return {**super().describe(), "batch_prompts": self.batch_prompts}

    # ------------------------------------------------------------------ plumbing
    def _fatal(self, status, text):
        if status in (400, 404, 422) and self._max_tokens == 0 and "max_tokens" in text:
            return _MaxTokensRefused()
        if status in (400, 422) and "echo" in text.lower():
            return self._no_logprobs_error(f"HTTP {status}: {self.redact(text[:160]).strip()}")
        return None

    def _no_logprobs_error(self, why: str) -> NoPromptLogprobsError:
        return NoPromptLogprobsError(
            f"{_safe_url(self.base_url)}/completions returned no log-probabilities for the prompt "
            f"({why}); the leaderboard's log-likelihood protocol needs echo + prompt logprobs "
            "(vLLM serves them; llama.cpp's server and chat-only APIs do not). Use such a "
            "server, --subject hf:MODEL or lmeval:..., or openai:URL for the approximate chat "
            "protocol")

    def _count(self, data):
        usage = data.get("usage") or {} if isinstance(data, Mapping) else {}
        with self._usage_lock:
            self.usage["requests"] += 1
            for k in ("prompt_tokens", "completion_tokens"):
                v = usage.get(k)
                if isinstance(v, int):
                    self.usage[k] += v

    def _choices(self, data, n: int) -> list:
        choices = data["choices"]
        if not isinstance(choices, list):
            raise ValueError("choices is not a list")
        if len(choices) != n:
            msg = f"{n} prompt(s) sent, {len(choices)} choice(s) returned"
            # a list the server did not take -> one prompt per request; else a malformed reply
            raise _WrongChoiceCount(msg) if n > 1 else ValueError(msg)
        if all(isinstance(c, Mapping) and isinstance(c.get("index"), int) for c in choices):
            choices = sorted(choices, key=lambda c: c["index"])
            if [c["index"] for c in choices] != list(range(n)):
                raise ValueError("choice indexes are not 0..n-1")
        return choices

    def _send(self, body: dict, n: int, parse_one: Callable):
        """One request for ``n`` prompts (retried); -> list of parsed choices."""
        def parse(data):
            choices = self._choices(data, n)
            out = [parse_one(c, i) for i, c in enumerate(choices)]
            self._count(data)
            return out

        try:
            out, _, _ = self._retrying("/completions", body, parse, fatal_status=self._fatal)
        except _MaxTokensRefused:
            self._max_tokens = 1
            body = {**body, "max_tokens": max(1, body.get("max_tokens") or 0)}
            out, _, _ = self._retrying("/completions", body, parse, fatal_status=self._fatal)
        return out

    def _batched(self, prompts: list, make_body: Callable, parse_one: Callable) -> list:
        """Send prompts in lists of ``batch_prompts`` concurrently; fall back to one prompt
        per request when the server does not take lists."""
        from concurrent.futures import ThreadPoolExecutor

        size = self.batch_prompts if self._lists_ok else 1
        chunks = [list(range(i, min(i + size, len(prompts)))) for i in range(0, len(prompts), size)]

        def one(idx):
            if len(idx) == 1:
                return self._send(make_body(prompts[idx[0]], idx), 1, lambda c, k: parse_one(c, idx[k]))
            try:
                return self._send(make_body([prompts[i] for i in idx], idx), len(idx),
                                  lambda c, k: parse_one(c, idx[k]))
            except (_WrongChoiceCount, SubjectError) as exc:
                if isinstance(exc, SubjectError) and "HTTP 4" not in str(exc):
                    raise
                self._lists_ok = False  # the server does not take a list of prompts
                return [self._send(make_body(prompts[i], [i]), 1,
                                   lambda c, k, i=i: parse_one(c, i))[0] for i in idx]

        if len(chunks) == 1:
            results = [one(chunks[0])]
        else:
            workers = min(len(chunks), self._max_concurrency)
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="atlas-ll") as pool:
                results = list(pool.map(one, chunks))
        return [v for part in results for v in part]

    # ------------------------------------------------------------------ requests
    def loglikelihood(self, requests: Sequence) -> list[float]:
        """Sum of log p(continuation | context) for each request, in order."""
        if not requests:
            return []
        prompts, spans = [], []
        for r in requests:
            if getattr(r, "kind", "loglikelihood") != "loglikelihood" or r.continuation is None:
                raise ConfigError("loglikelihood() takes loglikelihood requests "
                                  "(context + continuation)")
            ctx, cont = harness_split(str(r.context), str(r.continuation))
            if not ctx:
                raise ConfigError("a log-likelihood request with an empty context cannot be read "
                                  "from echoed prompt log-probabilities (the first token has none)")
            prompts.append(ctx + cont)
            spans.append((len(ctx), len(ctx) + len(cont)))

        def make_body(prompt, idx):
            return {"model": self.model, "prompt": prompt, "echo": True, "logprobs": 1,
                    "max_tokens": self._max_tokens, "temperature": 0, **self.extra_body}

        def parse_one(choice, i):
            try:
                return continuation_logprob(choice.get("logprobs"), *spans[i],
                                            text=choice.get("text"))
            except NoPromptLogprobs as exc:
                raise self._no_logprobs_error(str(exc)) from None

        return self._batched(prompts, make_body, parse_one)

    def generate_until(self, requests: Sequence) -> list[str]:
        """Greedy generations for ``(context, until)`` requests, cut at the first stop string."""
        if not requests:
            return []
        out: list = [None] * len(requests)
        groups: dict = {}
        for i, r in enumerate(requests):
            groups.setdefault((tuple(r.until), int(r.max_gen_toks)), []).append(i)
        for (until, max_toks), idx in groups.items():
            def make_body(prompt, _idx, until=until, max_toks=max_toks):
                body = {"model": self.model, "prompt": prompt, "max_tokens": max_toks,
                        "temperature": 0, **self.extra_body}
                if until:
                    body["stop"] = list(until)[:4]  # OpenAI accepts at most 4
                return body

            def parse_one(choice, i, until=until):
                text = choice["text"]
                if text is None:
                    raise ValueError("the reply has no text (null)")
                if not isinstance(text, str):
                    raise TypeError("the reply text is not a string")
                for stop in until:
                    if stop and stop in text:
                        text = text[:text.index(stop)]
                return self.redact(text)

            texts = self._batched([str(requests[i].context) for i in idx], make_body,
                                  lambda c, k, idx=idx: parse_one(c, k))
            for i, t in zip(idx, texts):
                out[i] = t
        return out


class _MaxTokensRefused(Exception):
    pass


class _WrongChoiceCount(Exception):
    """The server answered a list of prompts with another number of choices."""


class CallableSubject:
    """A subject backed by a Python function ``fn(item, prompt) -> str`` (prompt protocol).

    ``item`` is the item's content dict, ``prompt`` the :class:`Prompt` that would be sent.
    """

    def __init__(self, fn: Callable, name: str = "callable", *, kind: str = "chat"):
        if not callable(fn):
            raise ConfigError("CallableSubject needs a callable fn(item, prompt) -> str")
        if kind not in ("chat", "completion"):
            raise ConfigError(f"kind must be 'chat' or 'completion', not {kind!r}")
        self.fn, self.name, self.kind = fn, str(name), kind
        self.protocol = "approximate"

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
        if not math.isfinite(self.theta):
            raise ConfigError(f"the simulated subject's theta must be finite, got {theta!r}")
        self.seed = int(seed)
        self.kind = kind
        self.protocol = "simulated"
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


# ---------------------------------------------------------------------------- replay
_CORRECT_LL, _WRONG_LL = -1e-3, -1e3   # acc_norm divides by lengths: a 1e6 ratio survives it


class ReplaySubject:
    """Answers the leaderboard's requests from a recorded response matrix (one model's row), so
    the whole live path (requests, subject call, scoring rule, CAT) runs on real answers.

    For every bank item it builds the item's requests (:func:`atlascat.live.requests.
    build_item_requests`), finds which choice the item's rule scores correct (by probing the rule
    with one-hot outputs), and answers each request with log-likelihoods (or a generation) that
    the rule scores as the recorded 0/1 (a recorded value >= 0.5 counts as correct). An item the
    model has no recorded answer for raises an error naming it.

    Parameters
    ----------
    matrix : a :class:`~atlascat.responses.ResponseMatrix`, a matrix file, or a bundled name
    model : the subject id (row) to replay
    bank : the content bank the runner asks from (needed to map requests back to items)
    """

    kind = "loglikelihood"
    protocol = "leaderboard"

    def __init__(self, matrix, model: str, *, bank=None):
        from ..responses import ResponseMatrix

        source = matrix
        if not isinstance(matrix, ResponseMatrix):
            matrix = _read_matrix(matrix)
            source = str(source)
        else:
            source = "(in memory)"
        ids = [str(s) for s in matrix.subject_ids]
        if str(model) not in ids:
            near = [s for s in ids if str(model).lower() in s.lower()][:5]
            raise ConfigError(f"model {model!r} is not a subject of {source} ({len(ids)} subjects)"
                              + (f"; did you mean {', '.join(near)}?" if near else
                                 "; use a subject id from the matrix's first column"))
        row = np.asarray(matrix.values[ids.index(str(model))], dtype=float)
        self.source = source
        self.model = self.name = str(model)
        self._answers = {str(i): (None if np.isnan(v) else int(v >= 0.5))
                         for i, v in zip(matrix.item_ids, row)}
        self._bank = None
        self._keys: dict = {}
        self._first: dict = {}
        self._outputs: dict = {}
        self._used: set = set()
        self._lock = threading.Lock()
        if bank is not None:
            self.bind(bank)

    @property
    def cache_key(self) -> str:
        return f"{self.model}@replay:{self.source}"

    def describe(self) -> dict:
        return {"type": "replay", "model": self.model, "matrix": self.source,
                "kind": self.kind}

    def answer_of(self, item_id) -> int | None:
        return self._answers.get(str(item_id))

    def bind(self, bank) -> "ReplaySubject":
        """Index the bank's requests (done once; ``loglikelihood`` calls it lazily)."""
        with self._lock:
            if self._bank is bank:
                return self
            index = getattr(bank, "_atlas_replay_index", None)  # shared by every replayed model
            if index is None:
                from .requests import build_item_requests

                keys, first, outputs = {}, {}, {}
                for item_id in map(str, bank.item_ids):
                    ir = build_item_requests(bank, item_id)
                    outputs[item_id] = _probe(ir)
                    keys[item_id] = tuple(_request_key(r) for r in ir.requests)
                    if keys[item_id]:
                        first.setdefault(keys[item_id][0], []).append(item_id)
                index = (keys, first, outputs)
                try:
                    bank._atlas_replay_index = index
                except AttributeError:  # pragma: no cover - a bank type with __slots__
                    pass
            self._bank = bank
            self._keys, self._first, self._outputs = index
            self._used = set()
        return self

    def _answer(self, requests, what):
        """Outputs for ``requests``, which come item by item (all of an item's requests in a
        row, as the runner sends them): each run of requests is matched to the bank item with
        exactly those requests (among identical items, one not asked before)."""
        if self._bank is None:
            raise ConfigError("ReplaySubject needs the bank: ReplaySubject(..., bank=bank)")
        keys = [_request_key(r) for r in requests]
        out, i = [], 0
        while i < len(keys):
            cands = [it for it in self._first.get(keys[i], [])
                     if tuple(keys[i:i + len(self._keys[it])]) == self._keys[it]]
            if not cands:
                raise ConfigError(f"replay: {what} request {i} is not the start of a bank item's "
                                  "requests (requests must come item by item)")
            with self._lock:
                item_id = next((it for it in cands if it not in self._used), cands[0])
                self._used.add(item_id)
            ans = self._answers.get(item_id)
            if ans is None:
                raise ConfigError(f"replay: model {self.model!r} has no recorded answer for item "
                                  f"{item_id!r} in {self.source}; use a matrix without missing "
                                  "answers for this bank")
            out.extend(self._outputs[item_id][ans])
            i += len(self._keys[item_id])
        return out

    def loglikelihood(self, requests) -> list[float]:
        return [float(v) for v in self._answer(list(requests), "log-likelihood")]

    def generate_until(self, requests) -> list[str]:
        return [str(v) for v in self._answer(list(requests), "generation")]


def _request_key(r) -> tuple:
    return (r.kind, r.context, r.continuation, tuple(r.until))


def _probe(ir) -> dict:
    """Outputs the item's rule scores 0 and 1: {0: outputs, 1: outputs} (one per request)."""
    from ..errors import BankError

    n = len(ir.requests)
    if n and all(r.kind == "generate_until" for r in ir.requests):
        answer = str(_gold_text(ir))
        good, bad = [f"The answer is {answer}.\n#### {answer}"], ["#### -987654321"]
        if ir.score(good) == 1 and ir.score(bad) == 0:
            return {1: good, 0: bad}
        raise BankError(f"replay: cannot construct a correct generation for item {ir.item_id!r}")
    for gold in range(n):
        one = [_CORRECT_LL if i == gold else _WRONG_LL for i in range(n)]
        if ir.score(one) == 1:
            wrong_j = (gold + 1) % n
            other = [_CORRECT_LL if i == wrong_j else _WRONG_LL for i in range(n)]
            if n > 1 and ir.score(other) == 0:
                return {1: one, 0: other}
    raise BankError(f"replay: no choice of item {ir.item_id!r} is scored correct by its rule "
                    f"{ir.rule!r}")


def _gold_text(ir):
    gold = getattr(ir, "gold", None)
    if gold is None:
        raise AttributeError("no gold")
    return gold


def _read_matrix(spec):
    from pathlib import Path

    from ..responses import ResponseMatrix

    path = Path(str(spec))
    if path.exists():
        return ResponseMatrix.read(path, normalize_ids=True)
    from .. import datasets

    try:
        return datasets.load_responses(str(spec))
    except Exception as exc:  # noqa: BLE001 - reported as one line naming the spec
        raise ConfigError(f"replay matrix {str(spec)!r} is neither a file nor a bundled matrix "
                          f"({type(exc).__name__}: {exc})") from None


# ---------------------------------------------------------------------------- factory
SUBJECT_SPECS = ("openai:URL", "completions:URL", "hf:PATH_OR_NAME", "lmeval:MODEL,ARGS",
                 "replay:MATRIX.csv#MODEL", "simulate:THETA[:SEED]")

_HTTP_OPTS = ("api_key_env", "timeout", "max_retries", "backoff", "max_backoff",
              "max_concurrency", "limiter", "sleep", "extra_body", "max_reply_bytes")


def _construct(cls, *args, **kw):
    """``cls(*args, **kw)`` with only the keyword arguments its signature accepts."""
    import inspect

    try:
        params = inspect.signature(cls).parameters
    except (TypeError, ValueError):  # pragma: no cover
        return cls(*args, **kw)
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return cls(*args, **kw)
    return cls(*args, **{k: v for k, v in kw.items() if k in params})


def parse_theta_spec(text: str) -> tuple[float, int]:
    """``THETA[:SEED]`` of ``simulate:`` -> (finite theta, integer seed)."""
    theta_s, _, seed_s = str(text).partition(":")
    try:
        theta, seed = float(theta_s), int(seed_s or 0)
    except ValueError:
        theta, seed = float("nan"), 0
    if not math.isfinite(theta) or not -10 <= theta <= 10:
        raise ConfigError(f"--subject simulate:{text}: THETA must be a finite number in "
                          "[-10, 10] (e.g. simulate:0.5 or simulate:0.5:7 with a seed)")
    return theta, seed


def subject_from_spec(spec: str, *, bank=None, model: str | None = None, **kw):
    """Build a subject from a ``--subject`` string.

    ======================== ====================================================================
    ``openai:URL``           chat completions (approximate protocol), needs ``model``
    ``completions:URL``      ``/v1/completions`` with echo + logprobs (leaderboard protocol)
    ``hf:PATH_OR_NAME``      in-process transformers (``atlascat.live.hf.HFSubject``)
    ``lmeval:MODEL,ARGS``    an lm-evaluation-harness backend (``atlascat.live.lmeval_backend``)
    ``replay:MATRIX#MODEL``  answers recorded in a response matrix (file or bundled name)
    ``simulate:THETA[:SEED]`` the bank's own model at a fixed theta (needs ``bank``)
    ======================== ====================================================================

    Keyword arguments go to the subject's constructor where it accepts them (HTTP settings such
    as ``timeout`` to the HTTP subjects, ``device`` / ``batch_size`` to ``hf:``, ...).
    """
    if not isinstance(spec, str):
        raise ConfigError(f"--subject must be a string like {SUBJECT_SPECS[0]}, not {spec!r}")
    kind, sep, rest = spec.partition(":")
    kind = kind.strip().lower()
    rest = rest.strip()
    usage = "use one of " + ", ".join(SUBJECT_SPECS)
    if not sep or not rest:
        raise ConfigError(f"--subject {spec!r}: {usage}")
    http = {k: v for k, v in kw.items() if k in _HTTP_OPTS and v is not None}
    if kind in ("openai", "completions") and not model:
        raise ConfigError(f"--subject {kind}:URL needs the model name the server serves: "
                          "--llm NAME (repeat for several)")
    if kind == "openai":
        return OpenAICompatible(rest, model or "", chat=kw.get("chat", True), **http)
    if kind == "completions":
        extra = {k: kw[k] for k in ("batch_prompts",) if kw.get(k) is not None}
        return OpenAICompletionsSubject(rest, model or "", **http, **extra)
    if kind in ("simulate", "sim"):
        if bank is None:
            raise ConfigError("simulate: needs the bank (subject_from_spec(spec, bank=bank))")
        theta, seed = parse_theta_spec(rest)
        return SimulatedSubject(bank, theta, seed=seed,
                                name=model or f"simulated(theta={theta:g})",
                                kind="chat" if kw.get("chat", True) else "completion")
    if kind == "replay":
        matrix, _, who = rest.rpartition("#")
        if not matrix or not who:
            raise ConfigError(f"--subject {spec!r}: use replay:MATRIX.csv#MODEL (the model's id "
                              "in the matrix's first column)")
        return ReplaySubject(matrix, who, bank=bank)
    if kind in ("hf", "lmeval"):
        module, cls_name, extra = {"hf": ("hf", "HFSubject", "hf"),
                                   "lmeval": ("lmeval_backend", "LMEvalSubject", "lmeval")}[kind]
        try:
            import importlib

            cls = getattr(importlib.import_module(f"{__package__}.{module}"), cls_name)
        except ImportError as exc:
            raise ConfigError(f"--subject {kind}: needs optional packages ({exc.name or exc}): "
                              f"pip install 'atlascat[{extra}]'") from None
        except AttributeError:
            raise ConfigError(f"--subject {kind}: this ATLAS has no {cls_name}") from None
        opts = {k: v for k, v in kw.items()
                if k not in _HTTP_OPTS and k not in ("chat", "bank") and v is not None}
        if model:
            opts.setdefault("name", model)
        if hasattr(cls, "from_spec"):
            return _construct(cls.from_spec, rest, **opts)
        return _construct(cls, rest, **opts)
    raise ConfigError(f"--subject {spec!r}: unknown kind {kind!r}; {usage}")
