"""A bank's identity in a run: which bank it asks, parsed once.

A run stores its bank as ``shipped:<bench>`` (a bundled content bank), ``suite:<suite>`` (a
suite's composite bank) or a bank file's path; :class:`BankRef` reads that once, prints it back,
loads the bank (one object per reference and process) and knows its score link.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from ..errors import BankError, ConfigError

__all__ = ["BankRef"]

_KINDS = ("shipped", "suite", "file", "dir")


@dataclass(frozen=True)
class BankRef:
    """Which bank a run asks: ``kind`` shipped (a bundled content bank, ``name`` its benchmark),
    suite (the suite's composite bank), file (``name`` an absolute path) or dir (a bank folder
    of ``atlas build-bank``, which carries its own score link). ``str()`` is the stored form
    (``shipped:arc``, ``suite:openllm-v1``, the path); :meth:`parse` reads it back."""

    kind: str
    name: str

    def __post_init__(self):
        if self.kind not in _KINDS:
            raise ConfigError(f"a bank reference is one of {_KINDS}, got {self.kind!r}")

    @classmethod
    def parse(cls, text: str) -> "BankRef":
        """The stored form back (``shipped:<bench>``, ``suite:<suite>`` or a path)."""
        text = str(text)
        for kind in ("shipped", "suite"):
            if text.startswith(kind + ":"):
                return cls(kind, text.split(":", 1)[1])
        from ..bankdir import is_bank_dir

        return cls("dir" if is_bank_dir(text) else "file", text)

    @classmethod
    def from_option(cls, spec: str) -> "BankRef":
        """What a user gives ``--bank``: a bundled content bank's name (``arc``) or a bank file
        with content columns; an existing path wins over a name."""
        from ..catalogue import bank_names, is_bundled_name

        path = Path(spec)
        if not path.exists() and is_bundled_name(str(spec).lower()):
            return cls("shipped", str(spec).lower())
        if not path.exists():
            raise BankError(f"--bank {spec!r} is neither a bundled bank "
                            f"({', '.join(bank_names())}) nor an existing file")
        if path.is_dir():
            from ..bankdir import load_bank_dir

            load_bank_dir(path)  # a bank folder, or one line saying what it lacks
            return cls("dir", str(path.resolve()))
        return cls("file", str(path.resolve()))

    def __str__(self) -> str:
        return self.name if self.kind in ("file", "dir") else f"{self.kind}:{self.name}"

    def load(self):
        """The bank (cached per process: one bank object per reference)."""
        return _load_bank(self)

    def folder(self):
        """The loaded bank folder (:class:`~atlascat.bankdir.BankFolder`) of a ``dir``
        reference (cached per process), else None."""
        return _load_folder(self.name) if self.kind == "dir" else None

    def predictor(self):
        """(the bank folder's benchmark predictor, its items) of a ``dir`` reference whose
        folder has a predictor (more items than the budget), else None (cached per process).
        The items carry their logged requests when the folder was built from sample logs; from
        a response matrix they are ids and parameters only, asked by item id (an item-scored
        subject, :mod:`atlascat.live.subjects.itemscored`)."""
        return _load_predictor(self.name) if self.kind == "dir" else None

    @property
    def bench(self) -> str | None:
        """The benchmark the bank measures: a shipped bank's name, else a unique value of its
        ``benchmark`` column (None when unknown or mixed)."""
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

    def score_link(self):
        """The bank's score link (theta -> the benchmark's published score), or None: a shipped
        bank's, or the one shipped for the benchmark a bank file names."""
        if self.kind == "dir":
            return self.folder().link
        return _score_link(self.bench) if self.bench is not None else None

    def stop_settings(self, margin: float) -> dict:
        """CATConfig fields of the floor / ceiling / score-precision stops from the score link
        ({} without one)."""
        from ..validation import check_finite

        check_finite(margin, "--bound-margin")
        try:
            link = self.score_link()
        except Exception:  # noqa: BLE001 - no usable link: no link stops (the result says why)
            return {}
        return {} if link is None else dict(link.stop_settings(margin))


@functools.lru_cache(maxsize=32)
def _load_bank(ref: BankRef):
    from ..content.items import normalize_loaded

    if ref.kind == "suite":
        from .suite_session import composite_for

        return composite_for(ref.name)
    if ref.kind == "dir":
        return _load_folder(ref.name).bank
    if ref.kind == "shipped":
        from ..catalogue import resolve_bank

        return resolve_bank(ref.name)
    path = Path(ref.name)
    if not path.exists():
        raise BankError(f"the run's bank file {ref.name!r} no longer exists; pass the bank "
                        "explicitly")
    from ..irt.bank import ItemBank

    return normalize_loaded(ItemBank.read(path, normalize_ids=True))


@functools.lru_cache(maxsize=8)
def _load_folder(path: str):
    from ..bankdir import load_bank_dir

    return load_bank_dir(path)


@functools.lru_cache(maxsize=8)
def _load_predictor(path: str):
    from ..bankdir import load_predictor, load_predictor_items

    folder = _load_folder(path)
    predictor = load_predictor(folder)
    if predictor is None:
        return None
    items = load_predictor_items(folder)
    return predictor, (predictor.item_bank() if items is None else items)


@functools.lru_cache(maxsize=16)
def _score_link(bench: str):
    from ..catalogue import LINK_BENCHMARKS, load_score_link

    return load_score_link(bench) if bench in LINK_BENCHMARKS else None


