"""A bank reference: what every ``--bank`` (and ``--suite``) names, decoded once.

Four kinds, one vocabulary in every command and in the run store:

- ``shipped``: a bundled bank by name (``arc`` ... ``gsm8k``: content banks with a score link;
  ``paper-arc`` ...: the ATLAS paper's banks), stored as ``shipped:<name>``;
- ``file``: a bank file (CSV/Parquet, ours or mirt's columns), stored as its absolute path;
- ``dir``: a bank folder written by ``atlas build-bank`` (bank, score link, manifest, logged
  requests, predictor), stored as its absolute path;
- ``suite``: a suite (``openllm-v1`` or a suite JSON file): its members' banks as one composite
  bank, item ids ``<member>/<item_id>``, stored as ``suite:<name or absolute path>``.

:meth:`BankRef.from_option` reads what a user typed (a path that exists wins over a name),
:meth:`BankRef.parse` the stored form (``str(ref)``). What a reference loads (the bank, the
folder, the score link, the predictor) is loaded once per process and reference. Every error is
one line (:data:`NOT_FOUND` and the messages of :meth:`BankRef.require`).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from ..errors import BankError, BankFolderError, BankKindError, ConfigError
from .banks import bank_names, is_bundled_name, load_bank
from .suites import SEP, bundled_suites, read_suite, suite_members, suite_path

__all__ = ["BankRef", "KINDS", "ONE_BANK", "NOT_FOUND", "bound_margin", "composite_bank",
           "suite_member_ref"]

#: the kinds of bank reference (see the module docstring)
KINDS = ("shipped", "file", "dir", "suite")
#: the kinds that are one bank (what a command without --suite takes)
ONE_BANK = ("shipped", "file", "dir")
#: source models from which a bank folder's optimal form's predicted scores covered 0.95 of
#: held-out models (321: 0.966-0.983; 63-159: 0.850-0.906; benchmarks/results/fixed_forms.md)
FORM_HONEST_SOURCES = 300


@dataclass(frozen=True)
class BankRef:
    """Which bank: ``kind`` (one of :data:`KINDS`) and ``name`` (a bundled name, a suite name,
    or an absolute path). ``normalize_ids``: a bank file's R-style ids ``X514`` read as ``514``.
    (the other kinds keep the default: their ids are what they are). ``str()`` is the stored
    form; :meth:`parse` reads it back."""

    kind: str
    name: str
    normalize_ids: bool = True

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ConfigError(f"a bank reference is one of {', '.join(KINDS)}, got {self.kind!r}")

    @classmethod
    def from_option(cls, spec, *, option: str = "--bank", normalize_ids: bool = True,
                    kinds: tuple[str, ...] = ONE_BANK) -> "BankRef":
        """What a user gives ``--bank`` or ``--suite``: a bank file, a bank folder, a suite
        JSON file, a bundled bank name or a bundled suite name; an existing path wins over a
        name. A folder without a manifest, a name that is none of these, or a kind not in
        ``kinds`` (:meth:`require`) is a BankError of one line."""
        ref = spec if isinstance(spec, BankRef) else cls._decode(spec, option, normalize_ids)
        return ref.require(*kinds, option=option)

    @classmethod
    def _decode(cls, spec, option: str, normalize_ids: bool) -> "BankRef":
        text = str(spec)
        if not text.strip():   # not the current folder: an empty value is a slip
            raise BankError(f"{option} is empty; give a bank file, a bank folder or a bundled "
                            "name (arc, paper-arc, ...)")
        path = Path(text).expanduser()
        if path.is_dir():
            try:  # a bank folder, or one line saying what it lacks
                _load_folder(str(path.resolve()))
            except BankFolderError as exc:
                raise BankFolderError(f"{option} {exc}", path=exc.path) from None
            return cls("dir", str(path.resolve()))
        if path.is_file() and path.suffix.lower() == ".json":
            return cls("suite", str(path.resolve()))
        if path.is_file():
            return cls("file", str(path.resolve()), normalize_ids)
        low = text.lower()
        if is_bundled_name(low):
            return cls("shipped", low)
        if low in bundled_suites():
            return cls("suite", low)
        raise BankError(NOT_FOUND.format(option=option, spec=text, banks=", ".join(bank_names()),
                                         suites=", ".join(bundled_suites())))

    @classmethod
    def parse(cls, text) -> "BankRef":
        """The stored form back (``shipped:<name>``, ``suite:<name>`` or a path)."""
        text = str(text)
        for kind in ("shipped", "suite"):
            if text.startswith(kind + ":"):
                return cls(kind, text.split(":", 1)[1])
        return cls("dir" if Path(text).is_dir() else "file", text)

    def __str__(self) -> str:
        return self.name if self.kind in ("file", "dir") else f"{self.kind}:{self.name}"

    def require(self, *kinds: str, option: str = "--bank") -> "BankRef":
        """Itself when its kind is one of ``kinds``, else the one line that says what to give
        instead (a suite where one bank is asked, a bank where a suite is)."""
        if self.kind in kinds:
            return self
        if self.kind == "suite":
            raise BankKindError(f"{option} {self.name!r} is a suite, not one bank", "suite")
        if kinds == ("suite",):
            raise BankKindError(f"{option} {self.name!r} is a bank, not a suite (bundled suites: "
                                f"{', '.join(bundled_suites())})", "bank")
        raise BankError(f"{option} {self.name!r} is a {_WHAT[self.kind]}; this takes a "
                        f"{' or a '.join(_WHAT[k] for k in kinds)}")

    def load(self):
        """The ItemBank (a suite's composite bank; a bank file of graded / gpcm items: its
        :class:`~atlascat.irt.polybank.PolyBank`); read once per reference and process (again
        when the file or folder changed)."""
        return _load_bank(self, _stamp(self.name) if self.kind in ("file", "dir") else None)

    def folder(self):
        """The loaded bank folder (:class:`~atlascat.bankdir.BankFolder`: bank, score link,
        manifest, logged requests, extras) of a ``dir`` reference, else None."""
        return _load_folder(self.name) if self.kind == "dir" else None

    def predictor(self):
        """(the bank folder's benchmark predictor, its items) of a ``dir`` reference whose
        folder has a predictor (more items than the budget), else None. The items carry their
        logged requests when the folder was built from sample logs; from a response matrix
        they are ids and parameters only."""
        return _load_predictor(self.name) if self.kind == "dir" else None

    @property
    def suite_file(self) -> Path | None:
        """The definition file of a ``suite`` reference, else None."""
        return _suite_file(self.name) if self.kind == "suite" else None

    @property
    def bench(self) -> str | None:
        """The benchmark the bank measures: a shipped bank's name, a folder's benchmark, else a
        unique value of a bank file's ``benchmark`` column (None when unknown or mixed, and for
        a suite)."""
        if self.kind == "shipped":
            return self.name
        if self.kind == "suite":
            return None
        if self.kind == "dir":
            return self.folder().benchmark
        meta = getattr(self.load(), "metadata", None)
        if meta is not None and "benchmark" in meta.columns:
            values = {str(v) for v in meta["benchmark"].dropna()}
            if len(values) == 1:
                return values.pop()
        return None

    @property
    def title(self) -> str:
        """The benchmark's name as every output writes it, never a path: :attr:`bench` when
        known, else a bank file's name without its suffixes (``my/bank.csv.gz`` -> ``bank``,
        as ``atlas build-bank`` names a matrix's benchmark), a suite's name (its file's
        stem)."""
        if self.kind == "suite":
            return Path(self.name).stem if self.name.endswith(".json") else self.name
        try:
            bench = self.bench
        except Exception:  # noqa: BLE001 - a bank no longer readable still has a name
            bench = None
        return bench or Path(self.name).name.split(".")[0] or self.name

    @property
    def link(self):
        """The bank's own score link: a bank folder's, a shipped content bank's; None for a
        paper bank, a bank file and a suite."""
        if self.kind == "dir":
            return self.folder().link
        return _score_link(self.name) if self.kind == "shipped" else None

    def design_abilities(self):
        """(abilities, in words) a fixed form on this bank is designed for by default: the
        calibration models of the bank's own score link (:attr:`link`), as
        :meth:`ScoreLink.source_abilities` counts them: a bank folder's source models, a
        shipped content bank's Open LLM Leaderboard population; ``(None, None)`` without
        such a link (a bank file, a paper bank, a link that keeps no count): N(0, I).
        On held-out models both beat N(0, 1) by the rule of
        benchmarks/results/fixed_forms.md (folders: coverage 0.940-0.964 against 0.85-0.92;
        shipped banks: a smaller error on 4 of 6 benchmarks at 50 items, ARC's larger)."""
        link = self.link if self.kind in ("dir", "shipped") else None
        source = None if link is None else link.source_abilities()
        if source is None:
            return None, None
        n = link.info.get("n_models")
        who = "source" if self.kind == "dir" else "leaderboard"
        count = "" if not n else (f" ({n} models)" if self.kind == "dir"
                                  else f" ({n} models its score link was fitted on)")
        return source, f"the {who} models' abilities{count}"

    def design_warning(self, cross_fitted: bool = False) -> str | None:
        """What a fixed form designed on this bank's estimated item parameters does not say
        about new models, measured on held-out models (benchmarks/results/fixed_forms.md, "Is
        the form's predicted precision honest?"): a bank folder's form, chosen for its
        *estimated* information, has a theta 1.3-3.0 times as far from the whole bank's as its
        SEs claim; from fewer than :data:`FORM_HONEST_SOURCES` source models its predicted
        scores' 95% intervals covered 0.85-0.91 of new models. None when the form's factors
        were cross-fitted on the folder's source answers (``cross_fitted``:
        :func:`atlascat.bankdir.formfactor.form_factors`, coverage 0.925-0.966 there), and for
        other banks (the shipped banks' forms covered 0.945-0.988: their parameters come from
        2,000+ models). The line says whether the folder keeps the source answers the factors
        are fitted on (a folder built before they were kept does not)."""
        if self.kind != "dir" or cross_fitted:
            return None
        n = (self.link.info or {}).get("n_models") if self.link is not None else None
        text = ("the expected SE is the model's figure: on held-out models the theta of a bank "
                "folder's optimal form was 1.3-3.0 times as far from the whole bank's as its SE "
                "says (benchmarks/results/fixed_forms.md)")
        if n is not None and n < FORM_HONEST_SOURCES:
            text += (f"; built from {n} source models (fewer than {FORM_HONEST_SOURCES}), such a "
                     "form's 95% score intervals covered 0.85-0.91 of new models there: the "
                     "folder's predictor or random items hold")
        if self.folder().source is None:
            return text + ("; this folder keeps no source answers (built before they were "
                           "kept): rebuilt, its forms get cross-fitted factors that make the SE "
                           "and interval honest")
        return text + ("; the factors cross-fitted on its source answers, skipped here, make "
                       "the SE and interval honest")

    def score_link(self):
        """The score link of the benchmark the bank measures (theta -> its published score),
        or None: the bank's own (:attr:`link`), or for a bank file the one shipped for the
        benchmark its ``benchmark`` column names."""
        if self.kind in ("dir", "shipped"):
            return self.link
        return _score_link(self.bench) if self.bench is not None else None

    def prediction_words(self) -> dict:
        """What a prediction on this bank is of, for every output (:mod:`atlascat.scorelink.words`):
        a bank folder's ``benchmark``, ``population`` "source models", ``metric`` and, on the
        metric's own scale, ``scale`` (:func:`~atlascat.bankdir.predict.folder_words`; its name
        alone when the folder is no longer readable); a shipped bank's, or a bank file's whose
        benchmark has a shipped score link, ``benchmark`` and ``population`` "leaderboard"; a
        bank file of the user's own: ``benchmark`` (:attr:`title`) and ``population`` None."""
        from ..scorelink.words import LEADERBOARD, SOURCE

        if self.kind == "dir":
            from ..bankdir.predict import folder_words

            try:
                return folder_words(self.folder())
            except Exception:  # noqa: BLE001 - a folder no longer readable still has a name
                return {"benchmark": self.title, "population": SOURCE}
        if self.kind == "shipped":
            return {"benchmark": self.name, "population": LEADERBOARD}
        from .links import LINK_BENCHMARKS

        try:
            bench = self.bench
        except Exception:  # noqa: BLE001 - an unreadable bank file: its name, no population
            bench = None
        return {"benchmark": self.title,
                "population": LEADERBOARD if bench in LINK_BENCHMARKS else None}

    def usable_score_link(self):
        """:meth:`score_link`, None for a shipped link that cannot be read (a broken
        installation): a test then runs without the link's stops, and a live run's prediction
        is a note saying why (:func:`atlascat.live.service.predict_score`); a bank folder's own
        link is read with the folder (its errors are the folder's)."""
        if self.kind == "dir":
            return self.score_link()
        try:
            return self.score_link()
        except Exception:  # noqa: BLE001 - no usable link: no link stops (the result says why)
            return None

    def stop_settings(self, margin: float | None = None) -> dict:
        """CATConfig fields of the floor / ceiling / score-precision stops from
        :meth:`usable_score_link` ({} without one); ``margin`` as :meth:`bound_margin`."""
        margin = self.bound_margin(margin)   # checked with or without a link
        link = self.usable_score_link()
        return {} if link is None else dict(link.stop_settings(margin))

    def bound_margin(self, margin: float | None = None) -> float:
        """The floor / top stop's margin in 0-1 score units from ``--bound-margin``, given on
        the benchmark's own scale: a bank folder's ``--score-range LO HI`` scale (2 on BLEU's
        0-100 is 0.02), else 0-1. None: :data:`~atlascat.scorelink.settings.BOUND_MARGIN` of
        the range (:func:`bound_margin`)."""
        return bound_margin(margin, self.folder() if self.kind == "dir" else None)


def bound_margin(margin: float | None = None, folder=None) -> float:
    """``margin`` (``--bound-margin``, on the benchmark's own scale: ``folder``'s
    ``--score-range LO HI`` scale when it has one, else 0-1) in 0-1 score units, what
    :meth:`~atlascat.scorelink.ScoreLink.stop_settings` takes. None:
    :data:`~atlascat.scorelink.settings.BOUND_MARGIN`."""
    from ..scorelink.settings import BOUND_MARGIN
    from ..validation import check_finite

    if margin is None:
        return BOUND_MARGIN
    margin = check_finite(margin, "--bound-margin")
    if folder is not None:
        from ..bankdir.predict import metric_scale

        scale = metric_scale(folder)
        if scale is not None:
            return margin / (scale[1] - scale[0])
    return margin


#: the one line for a ``--bank`` / ``--suite`` that names nothing
NOT_FOUND = ("{option} {spec!r} is neither an existing file nor a bundled bank ({banks}) or "
             "suite ({suites}); check the path")

_WHAT = {"shipped": "bundled bank", "file": "bank file", "dir": "bank folder", "suite": "suite"}


def composite_bank(members):
    """``members``: (name, ItemBank, benchmark) per suite member -> one ItemBank, ids
    ``<member>/<item_id>``, parameters and content kept (metadata with a ``member`` column, and
    ``benchmark`` filled in when absent); a member without content is an error."""
    import numpy as np
    import pandas as pd

    from ..irt.bank import ItemBank

    ids, params, metas = [], [[], [], [], []], []
    for name, bank, bench in members:
        if getattr(bank, "metadata", None) is None:
            raise BankError(f"suite member {name!r} has no item content; a live suite run "
                            "asks content banks")
        ids += [f"{name}{SEP}{i}" for i in bank.item_ids]
        for acc, arr in zip(params, bank.params):
            acc.append(np.asarray(arr, float))
        meta = bank.metadata.reset_index(drop=True).copy()
        meta["member"] = name
        if "benchmark" not in meta.columns:
            meta["benchmark"] = bench
        metas.append(meta)
    a, b, c, u = (np.concatenate(x) for x in params)
    return ItemBank(ids, a, b, c, u, metadata=pd.concat(metas, ignore_index=True))


def _suite_file(name: str) -> Path:
    p = Path(name)
    return p if p.is_absolute() or p.suffix == ".json" else suite_path(name)


def _stamp(path: str) -> tuple:
    """What says a file or folder changed: (name, size, mtime) of it and of its entries."""
    p = Path(path)
    try:
        entries = sorted(p.iterdir()) if p.is_dir() else [p]
        return tuple((q.name, q.stat().st_size, q.stat().st_mtime_ns) for q in entries)
    except OSError:
        return ()


def suite_member_ref(text: str, base, *, option: str) -> BankRef:
    """A suite member's bank: a path beside the suite's file (``base``, its folder), else a
    bundled bank's name, else a path as given (from the working directory). A folder of the
    working directory that shares a bundled name (left by ``evaluate -o arc``) does not
    replace a shipped suite's member."""
    kinds = ("shipped", "dir")
    given = Path(text).expanduser()
    near = None if base is None or given.is_absolute() else Path(base) / given
    if near is not None and near.exists():
        return BankRef.from_option(near, option=option, kinds=kinds)
    if is_bundled_name(text.lower()):
        return BankRef("shipped", text.lower())
    return BankRef.from_option(text, option=option, kinds=kinds)


@functools.lru_cache(maxsize=32)
def _load_bank(ref: BankRef, stamp):
    from ..irt.bank import ItemBank

    if ref.kind == "suite":
        file = _suite_file(ref.name)
        members = [(name, suite_member_ref(spec, Path(file).parent,
                                           option=f"suite member {name!r}").load(), spec)
                   for name, spec, _ in suite_members(read_suite(file))]
        return composite_bank(members)
    if ref.kind == "dir":
        return _load_folder(ref.name).bank
    if ref.kind == "shipped":
        return load_bank(ref.name)
    path = Path(ref.name)
    if not path.exists():
        raise BankError(f"the bank file {ref.name!r} no longer exists; pass the bank again")
    from ..irt.polybank import PolyBank, is_poly_bank_file

    if is_poly_bank_file(path):  # graded / gpcm items (a1, d1.., levels)
        return PolyBank.read(path)
    bank = ItemBank.read(path, normalize_ids=ref.normalize_ids)
    if bank.metadata is None:  # nothing to normalize (and no content module to load)
        return bank
    from ..content.items import normalize_loaded

    return normalize_loaded(bank)


def _load_folder(path: str):
    return _read_folder(path, _stamp(path))


@functools.lru_cache(maxsize=8)
def _read_folder(path: str, stamp):
    from ..bankdir.folder import load_bank_dir

    return load_bank_dir(path)


def _load_predictor(path: str):
    return _read_predictor(path, _stamp(path))


@functools.lru_cache(maxsize=8)
def _read_predictor(path: str, stamp):
    from ..bankdir.predict import load_predictor, load_predictor_items

    folder = _load_folder(path)
    predictor = load_predictor(folder)
    if predictor is None:
        return None
    items = load_predictor_items(folder)
    return predictor, (predictor.item_bank() if items is None else items)


@functools.lru_cache(maxsize=16)
def _score_link(bench: str):
    from .links import LINK_BENCHMARKS, load_score_link

    return load_score_link(bench) if bench in LINK_BENCHMARKS else None
