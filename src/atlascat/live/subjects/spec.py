"""Build any subject from a ``--subject`` string (:func:`subject_from_spec`)."""
from __future__ import annotations

import math
import shlex

from ...errors import ConfigError
from .chat import OpenAICompatible
from .completions import OpenAICompletionsSubject
from .itemscored import CommandSubject, RecordedAnswers
from .replay import ReplaySubject
from .scripted import SimulatedSubject

__all__ = ["subject_from_spec", "parse_theta_spec", "has_requests", "SUBJECT_SPECS"]

SUBJECT_SPECS = ("openai:URL", "completions:URL", "hf:PATH_OR_NAME", "lmeval:MODEL,ARGS",
                 "replay:MATRIX.csv#MODEL", "simulate:THETA[:SEED]", "cmd:COMMAND")

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


def has_requests(bank) -> bool:
    """Whether ``bank`` holds its items' content (requests or prompts): a bank folder built from
    a response matrix does not, and is asked by item id (:mod:`.itemscored`)."""
    return getattr(bank, "metadata", None) is not None


def subject_from_spec(spec: str, *, bank=None, model: str | None = None, **kw):
    """Build a subject from a ``--subject`` string.

    ======================== ====================================================================
    ``openai:URL``           chat completions (approximate protocol), needs ``model``
    ``completions:URL``      ``/v1/completions`` with echo + logprobs (leaderboard protocol)
    ``hf:PATH_OR_NAME``      in-process transformers (``atlascat.live.hf.HFSubject``)
    ``lmeval:MODEL,ARGS``    an lm-evaluation-harness backend (``atlascat.live.lmeval_backend``)
    ``replay:MATRIX#MODEL``  answers recorded in a response matrix (file or bundled name); on
                             a bank without requests (built from a matrix) asked by item id
    ``cmd:COMMAND``          the user's program scores the items by id (:mod:`.itemscored`);
                             ``{model}`` in it is the model's name (``model``)
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
        if bank is not None and not has_requests(bank):
            return RecordedAnswers(matrix, who)
        return ReplaySubject(matrix, who, bank=bank)
    if kind == "cmd":
        if "{model}" in rest:
            if not model:
                raise ConfigError(f"--subject {spec!r}: the command names {{model}}; give the "
                                  "model with --llm NAME (repeat for several)")
            rest = rest.replace("{model}", shlex.quote(str(model)))
        return CommandSubject(rest, model, timeout=kw.get("timeout"))
    if kind in ("hf", "lmeval"):
        module, cls_name, extra = {"hf": ("hf", "HFSubject", "hf"),
                                   "lmeval": ("lmeval_backend", "LMEvalSubject", "lmeval")}[kind]
        try:
            import importlib

            cls = getattr(importlib.import_module(f"..{module}", __package__), cls_name)
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
