"""Who answers a live run, named once: :class:`SubjectSpec` (``--subject KIND:TARGET``).

One vocabulary for the command line, the library and the run store: a subject's
``describe()["type"]`` is its spec's kind, so a stored run is rebuilt by the same parser and
builder that started it (:meth:`SubjectSpec.rebuild`).
"""
from __future__ import annotations

import math
import shlex
from dataclasses import dataclass

from ...errors import BankError, ConfigError
from .chat import OpenAICompatible
from .completions import OpenAICompletionsSubject
from .itemscored import CommandSubject, RecordedAnswers
from .replay import ReplaySubject, replayed_matrix
from .scripted import SimulatedRatings, SimulatedScores, SimulatedSubject

__all__ = ["SubjectSpec", "subject_from_spec", "parse_theta_spec", "simulated_answer_seed",
           "has_requests", "SUBJECT_KINDS", "HTTP_OPTIONS", "SETTING_KINDS", "is_ordinal"]

#: every kind of ``--subject`` (and of a stored subject's ``type``), with its usage
SUBJECT_KINDS = {
    "openai": "openai:URL",
    "completions": "completions:URL",
    "hf": "hf:PATH_OR_NAME",
    "lmeval": "lmeval:MODEL,ARGS",
    "replay": "replay:MATRIX.csv#MODEL",
    "simulate": "simulate:THETA[:SEED]",
    "cmd": "cmd:COMMAND",
}

#: the settings of the HTTP subjects (``openai:``, ``completions:``); the first four are stored
#: with a run and reused when it resumes
HTTP_OPTIONS = ("timeout", "max_retries", "backoff", "max_backoff", "api_key_env",
                "max_concurrency", "limiter", "sleep", "extra_body", "max_reply_bytes")
_HTTP_STORED = HTTP_OPTIONS[:4]


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
        theta = float(theta_s)
    except ValueError:
        theta = float("nan")
    if not math.isfinite(theta) or not -10 <= theta <= 10:
        raise ConfigError(f"--subject simulate:{text}: THETA must be a finite number in "
                          "[-10, 10] (e.g. simulate:0.5 or simulate:0.5:7 with a seed)")
    seed = int(seed_s) if seed_s.strip().isdigit() else -1 if seed_s else 0
    if seed < 0:   # numpy's generators take no negative seed; text is no seed
        raise ConfigError(f"--subject simulate:{text}: SEED must be a whole number >= 0, got "
                          f"{seed_s!r} (e.g. simulate:0.5:7)")
    return theta, seed


def simulated_answer_seed(target: str, name: str, run_seed: int = 0) -> int:
    """The answer seed of ``simulate:TARGET`` asked as model ``name`` in a run seeded
    ``run_seed``: an explicit ``THETA:SEED``'s SEED, else ``answer_seed(run_seed, name)``
    (:func:`~atlascat.cat.answers.answer_seed`), the seed model ``name`` of ``atlas simulate
    --thetas --seed run_seed`` answers with: ``simulate:THETA --llm NAME --seed S`` is that
    model, the same items, answers and prediction."""
    _, seed = parse_theta_spec(target)
    if str(target).partition(":")[2].strip():
        return seed
    from ...cat.answers import answer_seed

    return answer_seed(int(run_seed), name)


#: the subject kinds that ask a bank's item content (requests or prompts)
ASKS_CONTENT = ("openai", "completions", "hf", "lmeval")

#: why a bank without item content cannot be asked by such a subject, and what to do
NO_CONTENT = ("this bank has no item content (a folder built from a response matrix has none): "
              "ask it by item id with --subject cmd:COMMAND (your harness scores each item) or "
              "replay:MATRIX#MODEL, or build the folder from lm-evaluation-harness sample logs")


def split_replay(target: str) -> tuple[str, str]:
    """(matrix, model) of a ``replay:MATRIX#MODEL`` target: split at the first ``#`` whose
    left part is an existing file or folder (a model id may hold a ``#``: ``org/m#final``),
    else at the last one."""
    from pathlib import Path

    at = target.find("#")
    while at > 0:
        if Path(target[:at]).exists():
            return target[:at], target[at + 1:]
        at = target.find("#", at + 1)
    matrix, _, model = target.rpartition("#")
    return matrix, model


def _shares_items(answers, bank, matrix) -> None:
    """One line when the replayed model's ``answers`` (the item ids it has a score for) hold
    none of the bank's items (the results of another benchmark), before a run starts."""
    ids = getattr(bank, "item_ids", None)
    if ids is None or not len(ids):
        return
    known = {str(i) for i in ids}
    answered = [str(i) for i in answers]
    if not any(i in known for i in answered):
        from ...errors import ResponseDataError

        raise ResponseDataError(
            f"replay matrix {str(matrix)!r} has no recorded answer to any of the bank's "
            f"{len(known)} items (its "
            f"items: {answered[:3]}, the bank's: "
            f"{[str(i) for i in ids[:3]]}): give the answers to the benchmark the bank is of")


def is_ordinal(bank) -> bool:
    """Whether ``bank`` is a bank of ordinal items (graded / gpcm,
    :class:`~atlascat.irt.polybank.PolyBank`): answered by ratings on the items' own scales."""
    from ...irt.polybank import PolyBank

    return isinstance(bank, PolyBank)


def has_requests(bank) -> bool:
    """Whether ``bank`` holds its items' content (requests or prompts: a ``question`` or
    ``context`` column): a bank folder built from a response matrix does not, nor a bank whose
    metadata is only statistics (standard errors, response counts), and is asked by item id
    (:mod:`.itemscored`)."""
    meta = getattr(bank, "metadata", None)
    return meta is not None and bool({"question", "context"} & {str(c) for c in meta.columns})


def replays_by_id(bank) -> bool:
    """Whether ``replay:`` asks ``bank`` by item id although it has requests: some item's rule
    scores a generation by a continuous metric (``f1``, or a ``metric:<name>`` ATLAS cannot
    compute), which no constructed output reproduces for every recorded score; the recorded
    score is then replayed as it is (as ``atlas simulate`` reads it). ``mc2`` items are
    answered through their requests (:class:`ReplaySubject`)."""
    from ...content.requests import METRIC_RULE_PREFIX

    meta = getattr(bank, "metadata", None)
    if meta is None or "rule" not in meta.columns:
        return False
    return any(str(r) == "f1" or str(r).startswith(METRIC_RULE_PREFIX)
               for r in meta["rule"].dropna().unique())


def _draws_scores(bank) -> bool:
    """Whether ``simulate:`` answers ``bank`` with scores in [0, 1] (its items carry a
    dispersion: a folder of continuous scores' answering bank, its predictor's items), asked
    by item id as ``atlas simulate --thetas`` draws them, not a prompt's 0/1."""
    from ...irt.dispersion import bank_dispersion

    return bank_dispersion(bank) is not None


def _asked(bank, settings: dict):
    """(the items, the settings) of what :meth:`SubjectSpec.build` was given: a bank
    reference (a BankRef, a BankFolder, a path or name) read as ``atlas evaluate`` reads it
    (the items of ``settings``' ``design``; the folder's settings under the given ones)."""
    from pathlib import Path

    from ...catalogue.bankref import KINDS, BankRef

    settings = dict(settings)
    design = settings.pop("design", None)
    if isinstance(bank, (str, Path, BankRef)):
        ref = BankRef.from_option(bank, option="bank", kinds=KINDS)
    elif hasattr(bank, "manifest") and hasattr(bank, "path"):   # a BankFolder
        ref = BankRef.from_option(str(bank.path), option="bank")
    else:
        if design is not None:
            raise ConfigError("design= picks the items of a bank reference (a BankRef, a bank "
                              "folder or its path); an ItemBank given is the items asked")
        return bank, settings
    if ref.kind == "suite":   # one run asks the whole suite: its composite bank
        items = ref.load()
    else:
        from ..designs import choose_design, design_bank

        items = design_bank(ref, choose_design(ref, design or "auto"))
    from ..designs import folder_settings

    given = {k: v for k, v in settings.items() if v is not None}
    return items, {**folder_settings(ref), **given}


_CHAT = ("openai", "simulate")   # the chat protocol's settings: openai:, and simulate: as it
#: the subject kinds that use a setting a command may give (``atlas evaluate``'s options); a
#: setting given for another kind is refused (:meth:`SubjectSpec.unused_settings`), not ignored
SETTING_KINDS = {"device": ("hf", "lmeval"), "chat": _CHAT, "prompt_style": _CHAT,
                 "max_tokens": _CHAT, "temperature": _CHAT, "system": _CHAT,
                 "max_retries": ("openai", "completions"), "backoff": ("openai", "completions"),
                 "timeout": ("openai", "completions", "cmd")}


@dataclass(frozen=True)
class SubjectSpec:
    """A parsed ``--subject``: ``kind`` (one of :data:`SUBJECT_KINDS`), ``target`` (the text
    after ``kind:``) and ``model`` (``--llm``: the model name a server serves; ``cmd:``'s
    ``{model}``; the name of an ``hf:`` / ``lmeval:`` / ``simulate:`` subject).

    ========================= ===================================================================
    ``openai:URL``            chat completions (approximate protocol), needs ``model``
    ``completions:URL``       ``/v1/completions`` with echo + logprobs (leaderboard protocol)
    ``hf:PATH_OR_NAME``       in-process transformers (``atlascat.live.hf.HFSubject``)
    ``lmeval:MODEL,ARGS``     an lm-evaluation-harness backend (``atlascat.live.lmeval_backend``)
    ``replay:MATRIX#MODEL``   answers recorded in a response matrix (file or bundled name); on a
                              bank without requests (built from a matrix), or scored by f1 or
                              a metric ATLAS cannot compute, asked by item id; on a suite,
                              ``MEMBER=MATRIX,...`` or the suite's name (each member's
                              bundled matrix: :func:`.replay.suite_recorded_answers`);
                              MATRIX may be sample logs (a folder, ``.jsonl[.gz]``) on a bank
                              folder built from logs: :func:`.replay.replayed_matrix`
    ``cmd:COMMAND``           the user's program: sent the bank's requests, its outputs scored
                              by each item's rule (:mod:`.cmdrequests`), or on a bank without
                              requests scores the items by id (:mod:`.itemscored`);
                              ``{model}`` in it is the model's name
    ``simulate:THETA[:SEED]`` the bank's own model at a fixed theta (needs the bank); without
                              SEED it answers as model ``model`` of ``atlas simulate
                              --thetas`` with the run's seed (``LiveRun.start``'s)
    ========================= ===================================================================
    """

    kind: str
    target: str
    model: str | None = None

    @classmethod
    def parse(cls, text, model: str | None = None) -> "SubjectSpec":
        """``KIND:TARGET`` as typed; one clear error for an unknown kind, an empty target or a
        missing model name."""
        usage = "use one of " + ", ".join(SUBJECT_KINDS.values())
        if not isinstance(text, str):
            raise ConfigError(f"--subject must be a string like {SUBJECT_KINDS['completions']}, "
                              f"not {text!r}")
        kind, sep, target = text.partition(":")
        kind, target = kind.strip().lower(), target.strip()
        if not sep or not target:
            raise ConfigError(f"--subject {text!r}: {usage}")
        if kind not in SUBJECT_KINDS:
            raise ConfigError(f"--subject {text!r}: unknown kind {kind!r}; {usage}")
        if kind in ("openai", "completions") and not model:
            raise ConfigError(f"--subject {kind}:URL needs the model name the server serves: "
                              "--llm NAME (repeat for several)")
        if kind == "replay" and not all(split_replay(target)):
            raise ConfigError(f"--subject {text!r}: use replay:MATRIX.csv#MODEL (the model's id "
                              "in the matrix's first column)")
        if kind == "cmd" and "{model}" in target and not model:
            raise ConfigError(f"--subject {text!r}: the command names {{model}}; give the "
                              "model with --llm NAME (repeat for several)")
        if kind == "simulate":
            parse_theta_spec(target)
        return cls(kind, target, model or None)

    def __str__(self) -> str:
        return f"{self.kind}:{self.target}"

    def unused_settings(self, **given) -> list[str]:
        """The names among ``given`` (None: not given) of the settings this kind of subject
        does not use (:data:`SETTING_KINDS`): ``replay:`` with a temperature, ``cmd:`` with a
        device."""
        return [k for k, v in given.items()
                if v is not None and self.kind not in SETTING_KINDS.get(k, (self.kind,))]

    def with_model(self, model: str | None) -> "SubjectSpec":
        """The same subject asking ``model`` (checked as :meth:`parse` checks it)."""
        return SubjectSpec.parse(str(self), model)

    @property
    def several_models(self) -> bool:
        """Whether one spec can ask several models (a server's, or a command naming
        ``{model}``)."""
        return self.kind in ("openai", "completions") or (
            self.kind == "cmd" and "{model}" in self.target)

    def build(self, bank=None, **settings):
        """The subject. ``settings`` go where they apply: :data:`HTTP_OPTIONS` to the HTTP
        subjects, ``chat`` (bool) to ``openai:`` / ``simulate:``, ``batch_prompts`` to
        ``completions:``, ``timeout`` to ``cmd:``, ``score_range`` (a bank folder's metric
        scale) to ``cmd:``, ``replay:`` and ``simulate:`` by item id, ``folder`` (the bank
        folder asked, a :class:`~atlascat.bankdir.BankFolder`) to ``replay:`` of sample logs,
        read as that folder reads them, and to ``simulate:`` by item id, whose scores on a
        folder of continuous scores are drawn with its items' dispersions
        (:func:`~atlascat.bankdir.adaptive.answering_bank`), ``seed`` (default 0) to
        ``simulate:THETA`` without a SEED, which answers with ``answer_seed(seed, name)``
        (:func:`simulated_answer_seed`; name: ``model`` or ``simulated(theta=THETA)``), and
        in a run with the run's seed, whatever was given here (:meth:`LiveRun.start
        <atlascat.live.service.LiveRun.start>` sets it: ``for_run``), the others (``device``,
        ``dtype``, ``batch_size``, ...) to ``hf:`` / ``lmeval:``; None values are ignored.
        ``bank``: the bank asked (``simulate:`` needs it; ``replay:`` asks a bank without
        requests by id): an ItemBank / PolyBank, or what ``--bank`` names (a
        :class:`~atlascat.catalogue.BankRef`, a :class:`~atlascat.bankdir.BankFolder`, a path
        or a shipped name), read as ``atlas evaluate`` reads it: the items of ``design``
        (default "auto", as :meth:`LiveRun.start <atlascat.live.service.LiveRun.start>`'s:
        a folder's predictor when it has one), and a folder's ``folder`` and ``score_range``
        (:func:`~atlascat.live.designs.folder_settings`) unless given."""
        bank, settings = _asked(bank, settings)
        kw = {k: v for k, v in settings.items() if v is not None}
        http = {k: v for k, v in kw.items() if k in HTTP_OPTIONS}
        kind, target, model = self.kind, self.target, self.model
        ratings = is_ordinal(bank)
        if ratings and kind not in ("replay", "cmd", "simulate"):
            raise ConfigError(f"--subject {kind}: asks an item's requests, and a graded / gpcm "
                              "bank has none: ask it by item id with cmd:COMMAND (your program "
                              "rates each item), replay:RATINGS.csv#MODEL or simulate:THETA")
        if kind in ASKS_CONTENT and bank is not None and not has_requests(bank):
            raise BankError(NO_CONTENT)   # before an optional package is imported
        if kind == "openai":
            return OpenAICompatible(target, model or "", chat=kw.get("chat", True), **http)
        if kind == "completions":
            extra = {k: kw[k] for k in ("batch_prompts",) if k in kw}
            return OpenAICompletionsSubject(target, model or "", **http, **extra)
        if kind == "simulate":
            if bank is None:
                raise ConfigError("simulate: needs the bank (SubjectSpec.build(bank))")
            theta, _ = parse_theta_spec(target)
            name = model or f"simulated(theta={theta:g})"
            # no SEED: the run's model's answer seed, as atlas simulate --thetas draws it
            seed = simulated_answer_seed(target, name, kw.get("seed", 0))
            subject = self._simulated(bank, theta, seed, name, ratings, kw)
            subject.seed_from_run = not target.partition(":")[2].strip()   # LiveRun.start's
            return subject
        if kind == "replay":
            matrix, who = split_replay(target)
            answers = replayed_matrix(matrix, kw.get("folder"))   # sample logs: read as simulate
            if bank is not None and (not has_requests(bank) or replays_by_id(bank)):
                subject = RecordedAnswers(answers, who, ratings=ratings,
                                          score_range=kw.get("score_range"), source=matrix)
                _shares_items([i for i, v in subject._answers.items() if v is not None], bank,
                              matrix)
                if ratings:   # a recorded rating off its item's scale: refused before asking
                    from ...irt.polyscore import aligned_ratings
                    from ...responses import one_subject_frame

                    row = {k: v for k, v in subject._answers.items() if v is not None}
                    bank.encode(aligned_ratings(one_subject_frame(row), bank)[0], [who])
                return subject
            return ReplaySubject(answers, who, bank=bank, source=matrix)
        if kind == "cmd":
            command = (target.replace("{model}", shlex.quote(str(model)))
                       if "{model}" in target else target)
            return CommandSubject(command, model, timeout=kw.get("timeout"), ratings=ratings,
                                  score_range=kw.get("score_range"), bank=bank)
        return self._backend(kw)

    @staticmethod
    def _simulated(bank, theta: float, seed: int, name: str, ratings: bool, kw: dict):
        """The ``simulate:`` subject of ``bank`` answering with ``seed``."""
        if ratings:   # a graded / gpcm bank: ratings drawn from its categories
            return SimulatedRatings(bank, theta, seed=seed, name=name)
        if kw.get("folder") is not None:   # continuous scores: drawn as such
            from ...bankdir.adaptive import answering_bank

            bank = answering_bank(kw["folder"], bank)
        if not has_requests(bank) or _draws_scores(bank):   # by id: a bank file, a
            return SimulatedScores(bank, theta, seed=seed,  # matrix's folder, scores
                                   name=name, score_range=kw.get("score_range"))
        return SimulatedSubject(bank, theta, seed=seed, name=name,
                                kind="chat" if kw.get("chat", True) else "completion")

    def _backend(self, kw: dict):
        """An ``hf:`` or ``lmeval:`` subject (optional packages)."""
        module, cls_name, extra = {"hf": ("hf", "HFSubject", "hf"),
                                   "lmeval": ("lmeval_backend", "LMEvalSubject", "lmeval")}[self.kind]
        try:
            import importlib

            cls = getattr(importlib.import_module(f"..{module}", __package__), cls_name)
        except ImportError as exc:
            raise ConfigError(f"--subject {self.kind}: needs optional packages "
                              f"({exc.name or exc}): pip install 'atlascat[{extra}]'") from None
        opts = {k: v for k, v in kw.items()
                if k not in HTTP_OPTIONS and k not in ("chat", "score_range", "folder", "seed")}
        if self.model:
            opts.setdefault("name", self.model)
        return _construct(cls.from_spec, self.target, **opts)

    @classmethod
    def rebuild(cls, desc: dict, bank=None, **settings):
        """The subject of a stored description (``describe()``: its ``type`` is the spec's
        kind), with this process's ``settings`` over the stored ones (an HTTP subject's API key
        variable stays the stored one when it has one). A subject that cannot be rebuilt (a
        Python callable) is a ConfigError."""
        spec, stored = cls.from_description(desc)
        given = {k: v for k, v in settings.items() if v is not None}
        if stored.get("api_key_env"):
            given.pop("api_key_env", None)
        return spec.build(bank, **{**stored, **given})

    @classmethod
    def from_description(cls, desc: dict) -> tuple["SubjectSpec", dict]:
        """(the spec, its stored settings) of a subject's ``describe()``."""
        kind = desc.get("type")
        if kind in ("openai", "completions"):
            stored = {k: desc[k] for k in _HTTP_STORED + ("api_key_env",) if desc.get(k)}
            stored["chat"] = desc.get("kind", "chat") == "chat"
            if kind == "completions":
                stored["batch_prompts"] = desc.get("batch_prompts", 16)
            return cls(kind, desc["base_url"], desc["model"]), stored
        if kind == "simulate":
            return (cls(kind, f"{float(desc['theta'])!r}:{int(desc['seed'])}", desc["model"]),
                    {"chat": desc.get("kind", "chat") == "chat",
                     "score_range": desc.get("score_range")})
        if kind == "replay":
            return (cls(kind, f"{desc['matrix']}#{desc['model']}"),
                    {"score_range": desc.get("score_range")})
        if kind == "cmd":
            return cls(kind, desc["command"], desc.get("model")), {
                "timeout": desc.get("timeout"), "score_range": desc.get("score_range")}
        if kind == "hf":
            opts = {k: desc[k] for k in ("device", "dtype", "batch_size", "max_batch_tokens",
                                         "max_length", "shared_prefix", "revision", "gguf_file")
                    if desc.get(k) is not None}
            return cls(kind, desc["model"], desc.get("name")), opts
        if kind == "lmeval":
            args = desc.get("model_args") or ""
            return cls(kind, desc["model_type"] + (f",{args}" if args else ""), desc.get("name")), {}
        raise ConfigError(f"cannot rebuild a {kind!r} subject from the run store; pass the "
                          "subject itself")


def subject_from_spec(spec: str, *, bank=None, model: str | None = None, **settings):
    """The subject of a ``--subject`` string: ``SubjectSpec.parse(spec, model).build(bank,
    **settings)``."""
    return SubjectSpec.parse(spec, model).build(bank, **settings)
