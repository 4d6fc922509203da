"""Shipped item banks, found by the names the CLI uses.

- ``arc``, ``hellaswag``, ``mmlu``, ``truthfulqa``, ``winogrande``, ``gsm8k``: our content
  banks (items with their content and the leaderboard's requests, calibrated on the whole
  leaderboard population, each with a score link), ``banks/<bench>.parquet``;
- ``paper-arc``, ``paper-gsm8k``, ``paper-hellaswag``, ``paper-truthfulqa``,
  ``paper-winogrande``: the ATLAS paper's published 3PL banks (parameters only).

What ``--bank`` takes (these names, a bank file, a bank folder, a suite) is decoded by
:class:`atlascat.catalogue.BankRef`.
"""
from __future__ import annotations

from pathlib import Path

from ..content.items import normalize_loaded
from ..errors import BankError
from ..irt.bank import ItemBank
from .files import (BANK_BENCHMARKS, CONTENT_BENCHMARKS, DATA_DIR, PAPER_PREFIX,
                    check_benchmark, data_path)


def bank_names() -> tuple[str, ...]:
    """Every bundled bank name: the content banks and the paper's banks (``paper-...``)."""
    return CONTENT_BENCHMARKS + tuple(PAPER_PREFIX + b for b in BANK_BENCHMARKS)


def is_bundled_name(spec) -> bool:
    """Whether ``spec`` names a shipped bank (a content benchmark, or ``paper-<bench>``)."""
    s = str(spec).lower()
    return s in CONTENT_BENCHMARKS or s in {PAPER_PREFIX + b for b in BANK_BENCHMARKS}


def content_bank_path(bench: str = "arc") -> Path:
    """File of the shipped content bank of ``bench`` (``data/banks/<bench>.parquet``)."""
    bench = check_benchmark(bench, CONTENT_BENCHMARKS)
    path = DATA_DIR / "banks" / f"{bench}.parquet"
    if path.exists():
        return path
    paper = f"; the paper's published bank is 'paper-{bench}'" if bench in BANK_BENCHMARKS else ""
    raise BankError(f"the content bank {bench!r} is not in this installation "
                    f"(datasets/data/banks/{bench}.parquet is missing){paper}")


def load_content_bank(bench: str = "arc") -> ItemBank:
    """The shipped content bank of ``bench``: calibrated items with their content and the
    leaderboard's requests in the metadata (see ``docs/leaderboard.md``, built by
    ``python -m atlascat.live.build_bank``)."""
    return normalize_loaded(ItemBank.read(content_bank_path(bench)))


def load_paper_bank(bench: str = "arc") -> ItemBank:
    """The ATLAS paper's published 3PL bank of ``bench`` (``paper-`` prefix optional), item ids
    normalized (``X514`` -> ``514``)."""
    return ItemBank.read(data_path(f"{check_benchmark(bench, BANK_BENCHMARKS)}_3pl_bank.csv.gz"),
                         normalize_ids=True)


def load_bank(name: str = "arc") -> ItemBank:
    """A bundled bank by the name the CLI's ``--bank`` takes: ``arc`` ... ``gsm8k`` (our
    content banks) or ``paper-arc`` ... (the paper's)."""
    low = str(name).lower()
    if low.startswith(PAPER_PREFIX):
        return load_paper_bank(low)
    if low in CONTENT_BENCHMARKS:
        return load_content_bank(low)
    from pathlib import Path

    if Path(str(name)).is_file():   # a bank file: said where it is read
        raise BankError(f"{str(name)!r} is a file, and load_bank loads the bundled banks "
                        f"({', '.join(bank_names())}); read a file with ItemBank.read(path) "
                        "(a1..aK, d: atlascat.irt.multidim.MultidimBank.read)")
    raise BankError(f"no bundled bank {name!r}; bundled: {', '.join(bank_names())}")
