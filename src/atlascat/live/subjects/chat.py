"""Prompt subjects over HTTP: OpenAI-style ``/v1/chat/completions`` or ``/v1/completions`` asked
with one prompt per item; the answer is read from the free text (approximate protocol)."""
from __future__ import annotations

import threading
import time
from typing import Callable, Mapping

from ...errors import ConfigError
from ...content.items import Prompt
from .base import Answer, SubjectError
from .http import MAX_REPLY_BYTES, _HTTPSubject, _safe_url

__all__ = ["OpenAICompatible"]


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
        if answer.finish_reason == "length" and not answer.text.strip():
            # the token limit ran out before any answer (a reasoning model thinks first):
            # scored wrong, it would measure the limit, not the model; a retry says the same
            raise SubjectError(
                f"model {self.model!r} used all {body.get('max_tokens')} tokens of its reply "
                "before writing any answer (empty content, finish_reason 'length'; a reasoning "
                "model thinks first); a larger --max-tokens needs a new run")
        answer.latency_s = latency
        answer.attempts = attempts
        answer.meta["total_s"] = time.perf_counter() - started
        return answer
