"""How one round is asked of each kind of subject, and what is kept of it.

A log-likelihood subject gets all the round's requests in one call (:func:`ask_loglikelihood`;
its outputs checked by :func:`check_outputs`, its reported tokens shared out by
:func:`round_tokens`); an item-scored subject gets the round's item ids in one call
(:func:`ask_items`). :func:`requests_hash` keys the answer cache, :func:`requests_render` is
what the steps table keeps of an item's requests.
"""
from __future__ import annotations

import hashlib
import json
import math
import time

import numpy as np

from ..errors import LiveRunError
from .store import as_score
from .subjects import Answer

__all__ = ["requests_hash", "requests_render", "check_outputs", "ask_loglikelihood",
           "ask_items", "as_score", "item_score", "round_tokens", "readable",
           "outputs_from_text", "UNREADABLE_AFTER"]


def requests_hash(ir) -> str:
    payload = {"rule": ir.rule, "requests": [
        [r.kind, r.context, r.continuation, list(r.until), r.max_gen_toks]
        + ([r.gen_kwargs] if r.gen_kwargs else []) for r in ir.requests]}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def requests_render(ir) -> str:
    """What the steps table keeps of an item's requests: the rule, a hash of each context, its
    last 200 characters, and the continuations / stop strings (contexts are long and shared)."""
    rows = []
    for r in ir.requests:
        rows.append({"kind": r.kind,
                     "context_sha256": hashlib.sha256(r.context.encode()).hexdigest()[:16],
                     "context_tail": r.context[-200:], "continuation": r.continuation,
                     "until": list(r.until) or None})
    return json.dumps({"rule": ir.rule, "requests": rows}, ensure_ascii=False)


def check_outputs(values, n: int, what: str) -> list:
    """A subject's outputs for n requests: n finite numbers (or -inf), never silently bad."""
    values = list(values) if values is not None else []
    if len(values) != n:
        raise LiveRunError(f"the subject returned {len(values)} {what} for {n} request(s)")
    out = []
    for v in values:
        try:
            f = float(v)
        except (TypeError, ValueError):
            raise LiveRunError(f"the subject returned a non-numeric log-likelihood {v!r}") from None
        if math.isnan(f) or f == math.inf:
            raise LiveRunError(f"the subject returned log-likelihood {f}; check the model "
                               "(a NaN usually means overflow in its dtype)")
        out.append(f)
    if n >= 2 and len(set(out)) == 1:
        raise LiveRunError(f"the subject returned the same log-likelihood ({out[0]}) for all {n} "
                           "requests of the round: it is not reading the continuations (a server "
                           "that ignores echo / logprobs?); refusing to score at chance")
    return out


def ask_loglikelihood(subject, irs: list) -> list:
    """One round of log-likelihood items: all their requests in ONE subject call (one for the
    generations); -> [(outputs, Answer)] per item."""
    ll, gen = [], []
    for n, ir in enumerate(irs):
        for j, r in enumerate(ir.requests):
            (ll if r.kind == "loglikelihood" else gen).append((n, j, r))
    results = [[None] * len(ir.requests) for ir in irs]
    before = dict(getattr(subject, "usage", None) or {})
    t0 = time.perf_counter()
    if ll:
        values = check_outputs(subject.loglikelihood([r for _, _, r in ll]), len(ll),
                                "log-likelihood(s)")
        for (n, j, _), v in zip(ll, values):
            results[n][j] = v
    if gen:
        texts = list(subject.generate_until([r for _, _, r in gen]))
        if len(texts) != len(gen) or any(t is None or not isinstance(t, str) for t in texts):
            raise LiveRunError(f"the subject returned {len(texts)} generation(s) (or a null one) "
                               f"for {len(gen)} request(s)")
        for (n, j, _), t in zip(gen, texts):
            results[n][j] = t
    latency = (time.perf_counter() - t0) / max(1, len(irs))
    tokens = round_tokens(before, getattr(subject, "usage", None), irs)
    out = []
    for vals, (prompt, completion) in zip(results, tokens):
        text = vals[0] if len(vals) == 1 and isinstance(vals[0], str) else json.dumps(vals)
        out.append((vals, Answer(text=text, latency_s=latency, attempts=1, prompt_tokens=prompt,
                                 completion_tokens=completion)))
    return out


def ask_items(subject, items: list) -> list:
    """One round of an item-scored subject: every item id in ONE call; -> [(0/1, Answer)]."""
    t0 = time.perf_counter()
    got = list(subject.score_items(items))
    if len(got) != len(items):
        raise LiveRunError(f"the subject scored {len(got)} item(s) for {len(items)} asked")
    latency = (time.perf_counter() - t0) / max(1, len(items))
    return [(as_score(score), Answer(text=str(text), latency_s=latency))
            for score, text in got]


def item_score(text: str, subject=None):
    """The score of an item-scored subject's stored reply (a JSON line with ``score``), read
    by the subject when it reads its own (``score_of``: a score on a metric's scale)."""
    reader = getattr(subject, "score_of", None)
    if reader is not None:
        return as_score(reader(text))
    try:
        return as_score(json.loads(text)["score"])
    except (ValueError, KeyError, TypeError):
        raise LiveRunError(f"a stored reply {text[:80]!r} holds no score") from None


def round_tokens(before: dict, after, irs: list) -> list[tuple]:
    """Each item's share of the tokens the subject reported for one round (``usage`` counters
    before and after): one request carries several items' prompts, so the round's prompt and
    tokens are shared out in proportion to each item's request characters, its completion
    tokens among its generation requests (largest remainders, so the shares add up to the
    round's counts); (None, None) per item
    when the subject reports none."""
    if not after:
        return [(None, None)] * len(irs)
    chars = np.array([sum(len(r.context) + len(r.continuation or "") for r in ir.requests)
                      for ir in irs], float)
    gens = np.array([sum(r.kind != "loglikelihood" for r in ir.requests) for ir in irs], float)
    shares = []
    for key, by in (("prompt_tokens", chars), ("completion_tokens", gens)):
        by = by if by.sum() > 0 else chars
        weights = by / by.sum() if by.sum() > 0 else np.full(len(irs), 1 / len(irs))
        total = int(after.get(key, 0)) - int(before.get(key, 0))
        raw = weights * max(total, 0)
        part = np.floor(raw).astype(int)
        part[np.argsort(part - raw)[: max(total, 0) - int(part.sum())]] += 1
        shares.append(part.tolist())
    return list(zip(*shares))


#: a prompt run stops if this many first replies (of this process) are all unreadable
UNREADABLE_AFTER = 10


def readable(item, text: str) -> bool:
    """Whether the scorer can read an answer from ``text`` at all (right or wrong)."""
    from .scorers import extract_choice, extract_number

    scorer = item.get("scorer")
    if scorer == "mc":
        return extract_choice(text, item["choices"]) is not None
    if scorer == "gsm8k":
        return extract_number(text) is not None
    return True


def outputs_from_text(ir, text: str) -> list:
    if all(r.kind == "generate_until" for r in ir.requests):
        return [text]
    return json.loads(text)
