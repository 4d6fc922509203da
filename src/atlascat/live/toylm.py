"""A deterministic pure-NumPy language model for tests, demos and offline checks.

:class:`ToyLM` is a hashed character n-gram model (random tables drawn from a seed, a fixed
bias towards letters and spaces) behind a GPT-2-like word-piece tokenizer (a regular
expression: words with their leading space, numbers, punctuation runs, whitespace). Each
token's log-probability is the sum of its characters' log-probabilities given everything
before them, so the scores are exact functions of the text and cost no model download.

It answers log-likelihood requests the way lm-evaluation-harness does (see
``shared/protocol/openllm_v1.md`` section 1, and :func:`harness_pair`):
``ctx = tok(context)``, ``whole = tok(context + continuation)``, ``cont = whole[len(ctx):]``,
score = sum of the continuation tokens' log-probabilities after ``ctx + cont``; and generation
requests by greedy decoding cut at the first stop string. :meth:`ToyLM.token_logprobs` gives
what an OpenAI ``/v1/completions`` server returns with ``echo=true, logprobs=N``, which is how
:class:`~atlascat.live.mockserver.MockOpenAIServer` uses it.
"""
from __future__ import annotations

import re
from typing import Sequence

import numpy as np

__all__ = ["ToyLM", "harness_pair", "cut_at_stop"]

#: GPT-2-like pre-tokenization (each match is one token)
_TOKEN = re.compile(r"'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+")

_N_CLASSES = 257          # code points 0-255, and one bucket for every other character
_START = 257              # the "before the text" symbol in the n-gram state
_HASH_ROWS = 2048


def harness_pair(context: str, continuation: str) -> tuple[str, str]:
    """Move the context's trailing whitespace to the continuation's start (harness
    ``_encode_pair`` step 1)."""
    n = len(context) - len(context.rstrip())
    if n:
        return context[:-n], context[-n:] + continuation
    return context, continuation


def cut_at_stop(text: str, until: Sequence[str]) -> str:
    """``text`` up to the first occurrence of any stop string (the harness splits on each stop
    string in turn and keeps the first part, which is the same thing)."""
    for term in until:
        if term:
            text = text.split(term)[0]
    return text


class ToyLM:
    """Deterministic character n-gram language model with a word-piece tokenizer.

    Parameters
    ----------
    seed : seeds the random tables (two models with the same seed give identical numbers)
    order : characters of history the next character depends on (1-3)
    name : model name reported to the runner and by the mock server
    """

    kind = "loglikelihood"

    def __init__(self, seed: int = 0, order: int = 3, name: str | None = None):
        if order not in (1, 2, 3):
            from ..errors import ConfigError
            raise ConfigError(f"ToyLM order must be 1, 2 or 3 (got {order!r})")
        self.seed = int(seed)
        self.order = int(order)
        self.name = name or f"toylm-{self.seed}"
        self.cache_key = f"toylm:seed={self.seed}:order={self.order}"
        rng = np.random.default_rng(self.seed)
        self._tables = [rng.standard_normal((_HASH_ROWS, _N_CLASSES)) * s
                        for s in (1.5, 1.0, 0.75)[:self.order]]
        bias = np.full(_N_CLASSES, -4.0)
        for ch in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ":
            bias[ord(ch)] = 1.0
        for ch in "0123456789.,:?!'#\n-":
            bias[ord(ch)] = -0.5
        bias[ord(" ")] = 2.0
        self._bias = bias
        gen = np.full(_N_CLASSES, False)
        gen[[ord(c) for c in map(chr, range(32, 127))] + [ord("\n")]] = True
        self._can_generate = gen
        self._last: tuple | None = None   # the last text, its classes, distinct rows, row index

    # ------------------------------------------------------------------ tokenizer
    @staticmethod
    def tokenize(text: str) -> list[str]:
        """The token strings of ``text`` (they concatenate back to ``text``)."""
        return _TOKEN.findall(text)

    # ------------------------------------------------------------------ character model
    @staticmethod
    def _classes(text: str) -> np.ndarray:
        a = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32).astype(np.int64)
        return np.where(a < 256, a, 256)

    def _rows(self, hist: np.ndarray) -> list[np.ndarray]:
        """Table rows for the states ``hist[:, -1]``, ``hist[:, -2:]``, ... (hist: (n, order))."""
        rows = []
        h = np.zeros(hist.shape[0], dtype=np.int64)
        for k in range(self.order):
            h = (h * 1_000_003 + hist[:, -1 - k] * 7_919 + k + 1) % (2**31 - 1)
            rows.append(h % _HASH_ROWS)
        return rows

    def _logits(self, hist: np.ndarray) -> np.ndarray:
        out = np.broadcast_to(self._bias, (hist.shape[0], _N_CLASSES)).copy()
        for table, rows in zip(self._tables, self._rows(hist)):
            out += table[rows]
        return out

    def _distinct_logprobs(self, text: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(classes of ``text``, log-probabilities of every class after each distinct history,
        the history index of every position). A position's distribution depends on its
        ``order`` characters of history only, so it is computed once per distinct history (a
        few-shot prompt repeats most of them); the last text's result is kept, since an echoed
        completion asks for its tokens' and its top log-probabilities of the same text."""
        last = self._last                     # one read: another thread may replace it
        if last is not None and last[0] == text:
            return last[1:]
        a = self._classes(text)
        n = a.size
        padded = np.concatenate([np.full(self.order, _START, dtype=np.int64), a])
        hist = np.lib.stride_tricks.sliding_window_view(padded, self.order)[:n]
        key = np.zeros(n, dtype=np.int64)
        for k in range(self.order):
            key = key * (_START + 1) + hist[:, k]
        _, first, where = np.unique(key, return_index=True, return_inverse=True)
        logits = self._logits(hist[first])
        mx = logits.max(axis=1, keepdims=True)
        lse = mx + np.log(np.exp(logits - mx).sum(axis=1, keepdims=True))
        last = (text, a, logits - lse, where.reshape(-1))
        self._last = last
        return last[1:]

    def char_logprobs(self, text: str) -> np.ndarray:
        """log p(text[t] | text[:t]) for every character (the first given the start state)."""
        if not text:
            return np.zeros(0)
        a, lp, where = self._distinct_logprobs(text)
        return lp[where, a]

    def _next_logprobs(self, text: str) -> np.ndarray:
        a = self._classes(text[-self.order:]) if text else np.zeros(0, dtype=np.int64)
        hist = np.concatenate([np.full(self.order - a.size, _START, dtype=np.int64), a])[None]
        logits = self._logits(hist)[0]
        mx = logits.max()
        return logits - (mx + np.log(np.exp(logits - mx).sum()))

    # ------------------------------------------------------------------ OpenAI-style scores
    def token_logprobs(self, text: str) -> tuple[list[str], list[float | None], list[int]]:
        """``(tokens, logprobs, offsets)`` of ``text`` as an OpenAI completions server echoes
        them: the first token has no log-probability (``None``); ``offsets`` are character
        positions in ``text``."""
        toks = self.tokenize(text)
        lp = self.char_logprobs(text)
        offsets, logprobs, at = [], [], 0
        for i, t in enumerate(toks):
            offsets.append(at)
            logprobs.append(None if i == 0 else float(lp[at:at + len(t)].sum()))
            at += len(t)
        return toks, logprobs, offsets

    def top_logprobs(self, text: str, n: int) -> list[dict[str, float] | None]:
        """Per token of ``text``: the ``n`` most likely next single characters after the text
        before it (``None`` for the first token)."""
        toks = self.tokenize(text)
        if not toks:
            return []
        starts = np.cumsum([0] + [len(t) for t in toks[:-1]])
        _, lp, where = self._distinct_logprobs(text)
        rows, at = np.unique(where[starts[1:]], return_inverse=True)
        k = max(int(n), 0)
        best = np.argsort(-lp[rows], axis=1, kind="stable")[:, :k]
        tops = [{(chr(int(c)) if c < 256 else "\ufffd"): float(v) for c, v in zip(b, r[b])}
                for b, r in zip(best, lp[rows])]          # one per distinct history, shared
        return [None] + [tops[j] for j in at.reshape(-1)]

    # ------------------------------------------------------------------ subject interface
    def loglikelihood_one(self, context: str, continuation: str) -> float:
        """The harness computation for one request (see the module docstring)."""
        context, continuation = harness_pair(context, continuation)
        n_ctx = len(self.tokenize(context))
        whole = self.tokenize(context + continuation)
        cont = "".join(whole[n_ctx:])
        lp = self.char_logprobs(context + cont)
        return float(lp[len(context):].sum())

    def loglikelihood(self, requests) -> list[float]:
        return [self.loglikelihood_one(r.context, r.continuation or "") for r in requests]

    def generate_one(self, context: str, until: Sequence[str] = (), max_gen_toks: int = 256) -> str:
        """Greedy generation (printable ASCII and newlines) until a stop string appears or
        ``max_gen_toks`` tokens were generated; returned up to the first stop string."""
        gen = ""
        max_chars = 16 * max(int(max_gen_toks), 0)
        while len(gen) < max_chars:
            lp = self._next_logprobs(context + gen)
            lp = np.where(self._can_generate, lp, -np.inf)
            gen += chr(int(np.argmax(lp)))
            if any(u and u in gen for u in until):
                break
            if len(gen) >= max_gen_toks and len(self.tokenize(gen)) > max_gen_toks:
                gen = "".join(self.tokenize(gen)[:max_gen_toks])
                break
        return cut_at_stop(gen, until)

    def generate_until(self, requests) -> list[str]:
        return [self.generate_one(r.context, tuple(r.until), r.max_gen_toks) for r in requests]

    def describe(self) -> dict:
        return {"type": "toylm", "name": self.name, "seed": self.seed, "order": self.order}

    def __repr__(self) -> str:
        return f"ToyLM(seed={self.seed}, order={self.order})"
