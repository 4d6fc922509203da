"""The HTTP plumbing every OpenAI-compatible subject shares (:class:`_HTTPSubject`).

One deadline for the *whole* request (a server trickling bytes cannot stretch it), a cap on the
reply size, retries with exponential backoff ``min(max_backoff, backoff * 2**(k-1))`` on 429 /
5xx / timeouts / connection errors / malformed or empty replies (honouring ``Retry-After``), a
concurrency limit shared by every subject given the same limiter, and the API key read from an
environment variable, sent only in the ``Authorization`` header and redacted from every reply.

``httpx`` is imported when an HTTP subject is built (optional extra ``atlascat[live]``).
"""
from __future__ import annotations

import json
import math
import os
import threading
import time
from typing import Callable, Mapping
from urllib.parse import urlsplit, urlunsplit

from ...errors import AtlasError, ConfigError
from .base import SubjectError

__all__ = ["RETRY_STATUS", "MAX_REPLY_BYTES"]

#: HTTP statuses retried with backoff (besides every 5xx)
RETRY_STATUS = frozenset({408, 409, 425, 429})

#: a reply longer than this is an error (what is stored is capped much lower by the store)
MAX_REPLY_BYTES = 64 * 1024 * 1024


def _safe_url(url: str) -> str:
    """The URL without user:password (never stored or printed with credentials)."""
    parts = urlsplit(url)
    netloc = parts.hostname or ""
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))


def _retry_after_s(value) -> float | None:
    """A ``Retry-After`` header in seconds: a number of seconds, or an HTTP date (RFC 9110,
    as some proxies send it) counted from now; None when absent or unreadable."""
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(str(value))
    except (TypeError, ValueError, IndexError):
        return None
    if when is None or when.tzinfo is None:
        return None
    import datetime

    return max(0.0, (when - datetime.datetime.now(datetime.timezone.utc)).total_seconds())


def _secs(x: float) -> str:
    """Seconds in a few digits (an hour as 3600, not 3.6e+03)."""
    return f"{x:.3g}" if x < 1000 else f"{x:.0f}"


def _error_body(data) -> tuple | None:
    """(status, message) of a reply whose JSON body is an error (``{"error": ...}``, no
    ``choices``), as some proxies answer with HTTP 200: the status its ``code`` / ``status``
    names when that is an HTTP error status, else 200 (an error of unknown kind: retried);
    None for any other body."""
    if not isinstance(data, dict) or data.get("error") in (None, "") or data.get("choices"):
        return None
    err = data["error"]
    message = (err.get("message") or json.dumps(err)) if isinstance(err, dict) else err
    code = None
    for key in ("code", "status", "status_code"):
        value = err.get(key) if isinstance(err, dict) else None
        value = data.get(key) if value is None else value
        if isinstance(value, (int, str)) and str(value).isdigit() \
                and 400 <= int(value) < 600:
            code = int(value)
            break
    return (code or 200), str(message)


def _said(text: str) -> str:
    """The server's own words in an error reply's body ``text``: its JSON error's message
    (``{"error": {"message": ...}}``, ``{"error": "..."}``, vLLM's ``{"message": ...}``,
    FastAPI's ``{"detail": ...}``), else the text itself; stripped, at most 300 characters."""
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    said = None
    if isinstance(data, dict):
        err = data.get("error")
        said = next((v for v in ((err.get("message") if isinstance(err, dict) else None),
                                 err, data.get("message"), data.get("detail"))
                     if isinstance(v, str) and v.strip()), None)
        if said is None and isinstance(data.get("detail"), list):   # FastAPI's 422
            said = "; ".join(str(d.get("msg", d)) if isinstance(d, dict) else str(d)
                             for d in data["detail"])
        if said is None and isinstance(err, dict):
            said = json.dumps(err)
    return (text if said is None else said).strip()[:300]


class _Transient(Exception):
    """One attempt failed in a way worth retrying (message = what happened)."""


def _check_http_settings(**values) -> None:
    """One line naming the first HTTP setting out of range (its option, its value);
    ``max_reply_bytes`` has no option."""
    rules = {"timeout": ("a finite number of seconds > 0", lambda v: math.isfinite(v) and v > 0,
                         float),
             "max_retries": ("an integer >= 0", lambda v: v >= 0, int),
             "backoff": ("a finite number of seconds >= 0",
                         lambda v: math.isfinite(v) and v >= 0, float),
             "max_concurrency": ("an integer >= 1", lambda v: v >= 1, int),
             "max_reply_bytes": ("an integer >= 1024", lambda v: v >= 1024, int)}
    for name, value in values.items():
        what, ok, kind = rules[name]
        try:
            good = ok(kind(value))
        except (TypeError, ValueError, OverflowError):
            good = False
        if not good:
            option = "" if name == "max_reply_bytes" else f" (--{name.replace('_', '-')})"
            raise ConfigError(f"{name}{option} must be {what}, got {value!r}")


class _HTTPSubject:
    """What every HTTP subject shares: URL and key handling, one whole-request deadline, a cap
    on reply size, retries with backoff, a concurrency limiter, redaction of the key."""

    #: the ``type`` written by ``describe()``
    _type = "openai"
    #: its answers carry the tokens the server reports (``usage``): a run can keep a token budget
    reports_tokens = True

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
        endpoint = next((e for e in ("/chat/completions", "/completions")
                         if parts.path.rstrip("/").endswith(e)), None)
        if endpoint is not None:   # atlas adds the endpoint: it would be asked twice over
            raise ConfigError(f"base URL {_safe_url(str(base_url))!r} ends with the endpoint "
                              f"{endpoint}; give the server's base URL, e.g. "
                              f"{_safe_url(str(base_url)).rstrip('/')[:-len(endpoint)]!r}")
        _check_http_settings(timeout=timeout, max_retries=max_retries, backoff=backoff,
                             max_concurrency=max_concurrency, max_reply_bytes=max_reply_bytes)
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
        #: set (a threading.Event) by the run that asks this subject: once it is set, a retry
        #: waiting for its backoff gives up (StopRequestedError) instead of retrying on
        self.stop_event: threading.Event | None = None
        #: called with one line before each wait to retry (what failed, how long it waits)
        self.on_retry: Callable[[str], None] | None = None
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
        """Close the HTTP client and its connections (a later request opens them again)."""
        with self._client_lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:   # ``with OpenAICompatible(...) as subject:`` closes it
        self.close()

    def _delay(self, attempt: int, retry_after) -> float:
        """Seconds before retry ``attempt``: the backoff, or the server's ``Retry-After`` (in
        seconds, or an HTTP date) when longer; at most ``max_backoff``."""
        delay = self.backoff * 2.0 ** (attempt - 1)
        wait = _retry_after_s(retry_after)
        if wait is not None:
            delay = max(delay, wait)
        return min(self.max_backoff, delay)

    def _over_cap(self, retry_after) -> float | None:
        """The seconds a ``Retry-After`` asked for when longer than ``max_backoff`` (the wait
        is cut to it: the words must not read as if the server had asked for that), else None."""
        asked = _retry_after_s(retry_after)
        return asked if asked is not None and asked > self.max_backoff else None

    def _pause(self, seconds: float, last: str, asked: float | None = None) -> None:
        """Wait ``seconds`` before a retry, unless a stop is (or gets) requested: then give up
        the retries (a server down would otherwise keep a Ctrl-C waiting through them all).
        ``asked``: the longer wait the server asked for (:meth:`_over_cap`)."""
        from ...errors import StopRequestedError

        if self.on_retry is not None:
            self.on_retry(f"{self.model}: {last}; retrying in {seconds:.3g} s" + (
                f", not the {_secs(asked)} s its Retry-After asked for (a wait is capped at "
                f"{_secs(self.max_backoff)} s, max_backoff)" if asked is not None else ""))
        stop = self.stop_event
        if stop is not None and (stop.is_set() or (self._sleep is time.sleep
                                                   and stop.wait(seconds))):
            raise StopRequestedError(f"stopped while waiting to retry model {self.model!r} "
                                     f"(last: {last})")
        if stop is None or self._sleep is not time.sleep:
            self._sleep(seconds)

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
            except httpx.ConnectError as exc:     # nothing listening, a wrong host or port
                box["error"] = (f"cannot connect ({self.redact(str(exc))[:200]}): check that "
                                "a server runs at this URL and port")
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
        last, last_status = "no attempt made", None
        retries = self.max_retries if retries is None else int(retries)
        for attempt in range(1, retries + 2):
            retry_after, said = None, None
            with self._limiter:
                t0 = time.perf_counter()
                try:
                    status, headers, content = self._once(url, body)
                except _Transient as exc:
                    status, headers, content = None, {}, b""
                    last, last_status = str(exc), None
                latency = time.perf_counter() - t0
            if status is not None:
                text = content.decode("utf-8", errors="replace")
                said = None if status == 200 else self.redact(_said(text))
                shown = f"HTTP {status}" + (f": {said!r}" if said else " (empty reply)")
                if status == 200:
                    try:
                        data = json.loads(text)
                    except ValueError:
                        data = None
                        last = f"malformed response (not JSON: {self.redact(text[:120])!r})"
                        last_status = None
                    error = _error_body(data)
                    if data is not None and error is None:
                        return data, latency, attempt
                    if error is not None:   # 200 whose body is an error: as its code says
                        status, said = error[0], self.redact(error[1])[:300].strip()
                        code = f" (code {status})" if status != 200 else ""
                        shown = last = f"HTTP 200 whose body is an error{code}: {said!r}"
                        last_status = None
                if status == 200:
                    pass
                elif status in (401, 403):
                    raise SubjectError(
                        f"HTTP {status} from {_safe_url(url)}: not authorized. Check that the "
                        f"environment variable {self.api_key_env} holds a valid key",
                        status=status, said=said)
                elif status in RETRY_STATUS or status >= 500:
                    last, last_status = shown, status
                    retry_after = headers.get("retry-after")
                else:
                    special = fatal_status(status, text) if fatal_status else None
                    if special is not None:
                        raise special
                    raise SubjectError(
                        f"HTTP {status} from {_safe_url(url)} for model {self.model!r}: "
                        f"{self.redact(text[:300]).strip()} (not retried; check the model name "
                        "and request settings)", status=status, said=said)
            if attempt <= retries:
                self._pause(self._delay(attempt, retry_after), last, self._over_cap(retry_after))
        hint = ("; a server this slow needs a larger --timeout" if last.startswith("timed out")
                else "")
        asked = self._over_cap(retry_after)
        if asked is not None:   # it asked for a longer wait than the retries had
            hint = (f"; the server's Retry-After asked for {_secs(asked)} s, past the cap of "
                    f"{_secs(self.max_backoff)} s on a wait (max_backoff): try again later")
        raise SubjectError(f"model {self.model!r} at {_safe_url(url)} failed "
                           f"{retries + 1} attempt(s); last: {last}{hint}", status=last_status,
                           said=said)

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
            self._pause(self._delay(total_attempts, None), last)
