"""Scorers: turn a model's raw answer into 0/1 (the paper's "modular scoring interface").

A scorer is any callable ``(item, answer) -> 0 | 1`` where ``item`` is the item's content dict
(:func:`atlascat.content.items.item_record`: ``question``, ``choices``, ``answer`` key, ...) and
``answer`` the raw text the model returned. Scorers are registered by name; the ``scorer``
column of a content bank names the one each item uses.

Built in
--------
mc       multiple choice. The chosen option is read from the reply as (1) an explicit letter
         ("B", "(B)", "B.", "Answer: B", "The answer is **B**"), else (2) the one option whose
         text the reply starts with or contains (longest match wins; few-shot ARC prompts make
         models continue with the option text). Correct iff the chosen letter is the key.
gsm8k    numeric exact match. The number after the last ``####``; else after "the answer is";
         else the last number in the reply. Commas, ``$`` and ``%`` are dropped; numbers are
         compared as exact decimals (``42`` == ``42.0``; ``1,000`` == ``1000``).
exact    case- and whitespace-insensitive string equality with the key (any of the item's
         ``targets`` when it has several).
"""
from __future__ import annotations

import re
import unicodedata
from decimal import Decimal, InvalidOperation
from typing import Callable, Mapping

from ..errors import ConfigError

__all__ = ["register_scorer", "get_scorer", "list_scorers", "score_answer", "extract_choice",
           "extract_number", "Scorer"]

#: a scorer: ``fn(item, answer) -> 0 or 1`` (the item's row, the model's answer text)
Scorer = Callable[[Mapping, str], int]
_REGISTRY: dict[str, Scorer] = {}


def register_scorer(name: str, fn: Scorer | None = None, *, overwrite: bool = False):
    """Register ``fn`` under ``name`` (usable as a decorator: ``@register_scorer("mine")``)."""
    def deco(f: Scorer) -> Scorer:
        if not callable(f):
            raise ConfigError(f"scorer {name!r} must be callable (item, answer) -> 0/1")
        if name in _REGISTRY and not overwrite and _REGISTRY[name] is not f:
            raise ConfigError(f"a scorer named {name!r} is already registered; pass overwrite=True")
        _REGISTRY[name] = f
        return f

    return deco if fn is None else deco(fn)


def get_scorer(name_or_fn) -> Scorer:
    """A registered scorer by name (or the callable itself)."""
    if callable(name_or_fn):
        return name_or_fn
    try:
        return _REGISTRY[str(name_or_fn)]
    except KeyError:
        raise ConfigError(f"unknown scorer {name_or_fn!r}; registered: {', '.join(sorted(_REGISTRY))}. "
                          "Register one with atlascat.live.scorers.register_scorer") from None


def list_scorers() -> list[str]:
    """The registered scorers' names, sorted (:func:`register_scorer` adds one)."""
    return sorted(_REGISTRY)


def score_answer(item: Mapping, answer: str, scorer=None) -> int:
    """Score ``answer`` with ``scorer`` (default: the item's own ``scorer``); always 0 or 1."""
    fn = get_scorer(scorer if scorer is not None else item.get("scorer", "mc"))
    value = fn(item, "" if answer is None else str(answer))
    if value in (0, 1, True, False):
        return int(value)
    raise ConfigError(f"scorer returned {value!r} for item {item.get('item_id')}; scorers must "
                      "return 0 or 1")


# ---------------------------------------------------------------------------- multiple choice
def _norm(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).casefold()
    text = re.sub(r"[*_`\"'“”‘’]", "", text)
    return re.sub(r"\s+", " ", text).strip(" .:;,!?\n\t")


def extract_choice(answer: str, choices, keys=None) -> str | None:
    """The option letter a reply picks, or None if it picks none (or is ambiguous).

    ``choices`` are the option texts in presentation order; ``keys`` their letters (A, B, ...).
    """
    n = len(choices)
    keys = list(keys) if keys is not None else [chr(ord("A") + i) for i in range(n)]
    if not answer:
        return None
    text = answer.strip()
    cls = "".join(re.escape(k) for k in keys)
    strip = re.sub(r"[*_`]", "", text)
    patterns = (
        rf"^\(?([{cls}])\)?(?:[.):\],]|$|\s+(?:is\b|-|\u2013))",      # "B", "(B)", "B. text"
        rf"(?i:answer)\s*(?i:is|:)?\s*(?i:option\s*)?\(?([{cls}])\)?(?![A-Za-z])",  # "Answer: B"
        rf"(?i:option|choice)\s*\(?([{cls}])\)?(?![A-Za-z])",           # "option B"
    )
    for pat in patterns:
        match = re.search(pat, strip)
        if match:
            return match.group(1).upper()
    # option text: the reply starts with / contains exactly one option (longest wins)
    reply = _norm(strip)
    if not reply:
        return None
    normed = [_norm(str(c)) for c in choices]
    starts = [i for i, c in enumerate(normed) if c and (reply == c or reply.startswith(c))]
    if not starts:
        starts = [i for i, c in enumerate(normed) if c and len(c) >= 3 and c in reply]
    if not starts:
        return None
    best = max(len(normed[i]) for i in starts)
    winners = [i for i in starts if len(normed[i]) == best]
    return keys[winners[0]] if len(winners) == 1 else None


def _mc(item: Mapping, answer: str) -> int:
    choices = list(item["choices"])
    if not choices:
        raise ConfigError(f"item {item.get('item_id')} has no options; the 'mc' scorer needs them")
    picked = extract_choice(answer, choices)
    return int(picked is not None and picked == str(item["answer"]).strip().upper())


# ---------------------------------------------------------------------------- numbers
_NUMBER = r"-?\$?\s?\d[\d,]*(?:\.\d+)?|-?\$?\s?\.\d+"


def _to_decimal(text: str) -> Decimal | None:
    cleaned = re.sub(r"[,$%\s]", "", text).rstrip(".")
    try:
        return Decimal(cleaned)
    except InvalidOperation:
        return None


def extract_number(answer: str) -> Decimal | None:
    """The final numeric answer of a reply (``#### n``, "the answer is n", or the last number)."""
    if not answer:
        return None
    text = answer.replace("**", "")
    if "####" in text:
        tail = text.rsplit("####", 1)[1]
        match = re.search(_NUMBER, tail)
        if match:
            return _to_decimal(match.group(0))
    stated = list(re.finditer(rf"answer\s*(?:is|:)\s*:?\s*({_NUMBER})", text, flags=re.IGNORECASE))
    if stated:
        return _to_decimal(stated[-1].group(1))
    numbers = re.findall(_NUMBER, text)
    return _to_decimal(numbers[-1]) if numbers else None


def _gsm8k(item: Mapping, answer: str) -> int:
    key = _to_decimal(str(item["answer"]))
    if key is None:
        raise ConfigError(f"item {item.get('item_id')}: key {item['answer']!r} is not a number")
    got = extract_number(answer)
    return int(got is not None and got == key)


def _exact(item: Mapping, answer: str) -> int:
    targets = item.get("targets")                  # several (aliases): any one of them
    keys = ([str(t) for t in targets] if not isinstance(targets, (str, float, type(None)))
            and len(targets) else [str(item["answer"])])
    return int(any(_norm(answer) == _norm(k) for k in keys))


register_scorer("mc", _mc)
register_scorer("gsm8k", _gsm8k)
register_scorer("exact", _exact)
