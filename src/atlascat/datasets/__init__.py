"""Real data shipped with the package (see ``data/README.md`` for sources and licences).

- ``load_responses(bench)``: Open LLM Leaderboard dense response matrix (models x items, 0/1),
  bench in arc, gsm8k, hellaswag, truthfulqa, winogrande, mmlu.
- ``load_bank(bench)``: the ATLAS paper's published 3PL bank (item ids without R's ``X``),
  bench in arc, gsm8k, hellaswag, truthfulqa, winogrande.
- ``load_test_thetas(bench)``, ``load_test_accuracy(bench)``, ``load_m2_partitions(bench)``:
  the paper's whole-bank WLE theta / accuracy of its test models, and per-partition fit.
- ``load_items("arc")``: item content (question, choices, answer key, few-shot prompt).
"""
from __future__ import annotations

from importlib import resources
from pathlib import Path

import pandas as pd

from ..errors import AtlasError

RESPONSE_BENCHMARKS = ("arc", "gsm8k", "hellaswag", "truthfulqa", "winogrande", "mmlu")
BANK_BENCHMARKS = ("arc", "gsm8k", "hellaswag", "truthfulqa", "winogrande")

__all__ = ["RESPONSE_BENCHMARKS", "BANK_BENCHMARKS", "data_path", "load_responses", "load_bank",
           "load_test_thetas", "load_test_accuracy", "load_m2_partitions", "load_items"]


def data_path(name: str) -> Path:
    """Path of a bundled data file."""
    path = Path(str(resources.files(__name__) / "data" / name))
    if not path.exists():
        raise AtlasError(f"bundled data file {name!r} not found in the package")
    return path


def _check(bench: str, allowed) -> str:
    bench = bench.lower()
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
