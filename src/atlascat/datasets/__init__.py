"""Real data shipped with the package (see ``data/README.md`` for sources and licences).

- ``load_responses(bench)``: Open LLM Leaderboard dense response matrix (models x items, 0/1),
  bench in arc, gsm8k, hellaswag, truthfulqa, winogrande, mmlu.
- ``load_bank(bench)``: the ATLAS paper's published 3PL bank (item ids without R's ``X``),
  bench in arc, gsm8k, hellaswag, truthfulqa, winogrande.
- ``load_test_thetas(bench)``, ``load_test_accuracy(bench)``, ``load_m2_partitions(bench)``:
  the paper's whole-bank WLE theta / accuracy of its test models, and per-partition fit.
- ``load_items("arc")``: item content (question, choices, answer key, few-shot prompt).

Bundled names (one meaning in every command and in :func:`resolve_bank` /
:func:`resolve_responses`):

- ``arc``, ``hellaswag``, ``mmlu``, ``truthfulqa``, ``winogrande``, ``gsm8k`` as a *bank*: our
  shipped content bank with its score link (``data/banks/<bench>.parquet``); as a *response
  matrix*: the dense Open LLM Leaderboard matrix of that benchmark.
- ``paper-arc``, ``paper-gsm8k``, ``paper-hellaswag``, ``paper-truthfulqa``, ``paper-winogrande``:
  the ATLAS paper's published 3PL banks (what :func:`load_bank` returns).
"""
from __future__ import annotations

from importlib import resources
from pathlib import Path

import pandas as pd

from ..errors import AtlasError

RESPONSE_BENCHMARKS = ("arc", "gsm8k", "hellaswag", "truthfulqa", "winogrande", "mmlu")
BANK_BENCHMARKS = ("arc", "gsm8k", "hellaswag", "truthfulqa", "winogrande")

CONTENT_BENCHMARKS = ("arc", "hellaswag", "mmlu", "truthfulqa", "winogrande", "gsm8k")
PAPER_PREFIX = "paper-"

__all__ = ["RESPONSE_BENCHMARKS", "BANK_BENCHMARKS", "CONTENT_BENCHMARKS", "data_path",
           "load_responses", "load_bank", "load_test_thetas", "load_test_accuracy",
           "load_m2_partitions", "load_items", "bank_names", "is_bundled_name",
           "content_bank_path", "resolve_bank", "resolve_responses"]


def data_path(name: str) -> Path:
    """Path of a bundled data file."""
    path = Path(str(resources.files(__name__) / "data" / name))
    if not path.exists():
        raise AtlasError(f"bundled data file {name!r} not found in the package")
    return path


def _check(bench: str, allowed) -> str:
    bench = str(bench).lower()
    if bench.startswith(PAPER_PREFIX) and allowed is BANK_BENCHMARKS:
        bench = bench[len(PAPER_PREFIX):]
    if bench not in allowed:
        raise AtlasError(f"unknown benchmark {bench!r}; choose one of {', '.join(allowed)}")
    return bench


def load_responses(bench: str = "arc"):
    """The dense (fully observed) Open LLM Leaderboard response matrix of ``bench``."""
    from ..responses import ResponseMatrix

    return ResponseMatrix.read(data_path(f"dense_{_check(bench, RESPONSE_BENCHMARKS)}.csv.gz"))


def load_bank(bench: str = "arc"):
    """The paper's published 3PL bank of ``bench``, item ids normalized (``X514`` -> ``514``)."""
    from ..irt.bank import ItemBank

    return ItemBank.read(data_path(f"{_check(bench, BANK_BENCHMARKS)}_3pl_bank.csv.gz"),
                         normalize_ids=True)


def load_test_thetas(bench: str = "arc") -> pd.DataFrame:
    """The paper's test models with whole-bank WLE theta and SE: columns subject_id, theta, se."""
    df = pd.read_csv(data_path(f"{_check(bench, BANK_BENCHMARKS)}_test_theta_wle.csv.gz"))
    return df.rename(columns={"Model_Name": "subject_id", "Theta_WLE": "theta", "SE": "se"})


def load_test_accuracy(bench: str = "arc") -> pd.DataFrame:
    """The paper's test models' full-bank accuracy: columns subject_id, accuracy, n_items."""
    df = pd.read_csv(data_path(f"{_check(bench, BANK_BENCHMARKS)}_test_accuracy.csv.gz"))
    return df.rename(columns={"model": "subject_id", "actual_accuracy": "accuracy"})


def load_m2_partitions(bench: str = "arc") -> pd.DataFrame:
    """The paper's M2 / RMSEA / SRMSR / TLI / CFI of each calibration partition."""
    df = pd.read_csv(data_path(f"{_check(bench, BANK_BENCHMARKS)}_m2_partitions.csv.gz"))
    return df.drop(columns=[c for c in df.columns if c.startswith("Unnamed") or c == ""])


def load_items(bench: str = "arc") -> pd.DataFrame:
    """Item content of ``bench`` (metabench item set): question, choices, answerKey, prompt.

    The ``item_id`` column holds the matrix item id (metabench_idx)."""
    if bench.lower() != "arc":
        raise AtlasError("item content is bundled for 'arc' only; read the others with "
                         "atlascat.live.items from ../shared/data/openllm/items/")
    df = pd.read_parquet(data_path("items_arc.parquet"))
    df.insert(0, "item_id", df["metabench_idx"].astype(str))
    return df


# ------------------------------------------------------------------------- bundled names
def bank_names() -> tuple[str, ...]:
    """Every bundled bank name: the content banks and the paper's banks (``paper-...``)."""
    return CONTENT_BENCHMARKS + tuple(PAPER_PREFIX + b for b in BANK_BENCHMARKS)


def is_bundled_name(spec) -> bool:
    s = str(spec).lower()
    return s in CONTENT_BENCHMARKS or s in {PAPER_PREFIX + b for b in BANK_BENCHMARKS}


def content_bank_path(bench: str) -> Path:
    """File of the shipped content bank of ``bench`` (``data/banks/<bench>.parquet``)."""
    bench = _check(bench, CONTENT_BENCHMARKS)
    path = Path(str(resources.files(__name__) / "data" / "banks" / f"{bench}.parquet"))
    if path.exists():
        return path
    from ..errors import BankError

    paper = f"; the paper's published bank is 'paper-{bench}'" if bench in BANK_BENCHMARKS else ""
    raise BankError(f"the content bank {bench!r} is not in this installation "
                    f"(datasets/data/banks/{bench}.parquet is missing){paper}")


def resolve_bank(spec, *, normalize_ids: bool = True, option: str = "--bank"):
    """An ItemBank from a file path or a bundled name (see the module docstring).

    A path that exists wins over a name; a missing path that is not a bundled name is an error
    that lists the names."""
    from ..errors import BankError
    from ..irt.bank import ItemBank

    if isinstance(spec, ItemBank):
        return spec
    text = str(spec)
    path = Path(text)
    if path.exists():
        return ItemBank.read(path, normalize_ids=normalize_ids)
    low = text.lower()
    if low.startswith(PAPER_PREFIX) and low[len(PAPER_PREFIX):] in BANK_BENCHMARKS:
        return load_bank(low)
    if low in CONTENT_BENCHMARKS:
        bank = ItemBank.read(content_bank_path(low))
        try:  # list cells from Parquet as plain lists (the live code expects them)
            from ..live.items import _normalize_loaded

            return _normalize_loaded(bank)
        except ImportError:  # pragma: no cover
            return bank
    raise BankError(f"{option} {text!r} is neither an existing file nor a bundled bank "
                    f"({', '.join(bank_names())}); check the path")


def resolve_responses(spec, *, option: str = "RESPONSES", **read_kw):
    """A ResponseMatrix from a file path or a bundled name (the dense matrix of a benchmark)."""
    from ..errors import ResponseDataError
    from ..responses import ResponseMatrix

    text = str(spec)
    path = Path(text)
    if path.exists() or path.suffix:
        return ResponseMatrix.read(path, **read_kw)
    low = text.lower()
    if low.startswith(PAPER_PREFIX):
        low = low[len(PAPER_PREFIX):]
    if low in RESPONSE_BENCHMARKS:
        kw = {k: v for k, v in read_kw.items() if k in ("normalize_ids", "on_empty")}
        return ResponseMatrix.read(data_path(f"dense_{low}.csv.gz"), **kw)
    raise ResponseDataError(f"{option} {text!r} is neither an existing file nor a bundled "
                            f"response matrix ({', '.join(RESPONSE_BENCHMARKS)}); check the path")
