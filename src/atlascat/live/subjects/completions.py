"""Log-likelihood subjects over HTTP: the leaderboard's protocol read from a ``/v1/completions``
server's echoed prompt log-probabilities (``echo=true, logprobs=1, max_tokens=0``; vLLM).

``loglikelihood(context, continuation) = sum_t log p(token_t)`` over the echoed tokens whose
``text_offset`` lies in the continuation (:func:`continuation_logprob`), after the
lm-evaluation-harness whitespace move (:func:`harness_split`).
"""
from __future__ import annotations

import math
import threading
from typing import Callable, Mapping, Sequence

import numpy as np

from ...errors import ConfigError
from .base import SubjectError
from .http import RETRY_STATUS, _HTTPSubject, _safe_url

__all__ = ["OpenAICompletionsSubject", "NoPromptLogprobsError", "ShiftedPromptLogprobsError",
           "continuation_logprob", "harness_split", "echo_alignment"]


class NoPromptLogprobsError(ConfigError):
    """The server does not return log-probabilities of the prompt (echo): the leaderboard's
    log-likelihood protocol cannot be followed. Not resumable: use another server or subject."""


class ShiftedPromptLogprobsError(NoPromptLogprobsError):
    """The server's echoed prompt log-probabilities are one token late: each prompt token
    carries the distribution that predicts the token after it (llama-cpp-python's server,
    0.3.36, seen here). The continuation's log-likelihood cannot be read from them."""


#: the first reply with at least this many tokens with top log-probabilities is checked
ALIGNMENT_MIN_TOKENS = 30


def echo_alignment(logprobs) -> str:
    """Whether echoed prompt log-probabilities belong to their tokens: "aligned", "shifted"
    (each entry is the distribution of the NEXT token) or "unknown".

    With ``logprobs >= 1`` each position's ``top_logprobs`` is the model's distribution there.
    Count m0 = positions whose most likely token is the token at that position, and m1 = those
    whose most likely token is the one after it. A language model on text predicts a good share
    of its tokens, so an aligned reply has m0 well above m1 and a shifted one the reverse (a
    llama-cpp-python reply on 120 tokens of this README: m0 = 4, m1 = 37). A verdict needs the
    winning count to be at least 5, at least 10% of the positions checked and at least three
    times the other: a model that predicts nothing (a random toy LM: 5 chance hits among 955
    tokens of an ARC prompt) gives "unknown" and is let through."""
    if not isinstance(logprobs, Mapping):
        return "unknown"
    toks, tops = logprobs.get("tokens"), logprobs.get("top_logprobs")
    if not toks or not tops or len(toks) != len(tops):
        return "unknown"
    best = [max(t, key=t.get) if isinstance(t, Mapping) and t else None for t in tops]
    if sum(b is not None for b in best) < ALIGNMENT_MIN_TOKENS:
        return "unknown"
    m0 = sum(b == toks[i] for i, b in enumerate(best) if b is not None)
    m1 = sum(b == toks[i + 1] for i, b in enumerate(best[:-1]) if b is not None)
    need = max(5, 0.1 * sum(b is not None for b in best))
    if m1 >= need and m1 >= 3 * max(m0, 1):
        return "shifted"
    if m0 >= need and m0 >= 3 * max(m1, 1):
        return "aligned"
    return "unknown"


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
        #: "aligned" / "shifted" once a long enough reply was checked (:func:`echo_alignment`)
        self.echo_alignment = "unknown"
        #: a reply carried the prompt's log-probabilities: one without them later is malformed
        #: (retried), not a server that cannot give them
        self._echoes = False

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
            f"({why}); the log-likelihood protocol needs echo + prompt logprobs "
            "(vLLM serves them; llama.cpp's server and chat-only APIs do not). Use such a "
            "server, --subject hf:MODEL or lmeval:..., or openai:URL for the approximate chat "
            "protocol")

    def _check_alignment(self, logprobs) -> None:
        verdict = echo_alignment(logprobs)
        if verdict == "shifted":
            raise ShiftedPromptLogprobsError(
                f"{_safe_url(self.base_url)}/completions echoes the prompt's log-probabilities "
                "one token late (each token carries the distribution of the token after it, as "
                "llama-cpp-python's server does): the requests' log-likelihoods cannot be "
                "read from them. Use vLLM, --subject hf:MODEL.gguf (the same GGUF file, in "
                "process) or lmeval:...")
        if verdict == "aligned":
            self.echo_alignment = verdict

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
                # a list refused: HTTP 4xx, or a 500 (llama-cpp-python's server asserts one
                # prompt); a server that fails single prompts too still fails below
                status = getattr(exc, "status", None)
                if isinstance(exc, SubjectError) and not (
                        status is not None and (400 <= status < 500 or status == 500)):
                    raise
                out = [self._send(make_body(prompts[i], [i]), 1,
                                  lambda c, k, i=i: parse_one(c, i))[0] for i in idx]
                # the same prompts one at a time answered: the server does not take a list
                # (a prompt it refuses alone, e.g. past its context, says nothing of lists;
                # nor does a rate limit, 429, that let the list's retries run out)
                if status not in RETRY_STATUS:
                    self._lists_ok = False
                return out

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
            if self.echo_alignment == "unknown":
                self._check_alignment(choice.get("logprobs"))
            try:
                value = continuation_logprob(choice.get("logprobs"), *spans[i],
                                             text=choice.get("text"))
            except NoPromptLogprobs as exc:
                if self._echoes:   # this server echoed them before: a bad reply, retried
                    raise ValueError(f"a reply without the prompt's log-probabilities ({exc}) "
                                     "from a server that returned them before") from None
                raise self._no_logprobs_error(str(exc)) from None
            self._echoes = True
            return value

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
