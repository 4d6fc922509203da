"""Shipped response matrices and the paper's test-model files, found by benchmark name."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import AtlasError, ResponseDataError
from ..responses import ResponseMatrix
from .files import BANK_BENCHMARKS, PAPER_PREFIX, RESPONSE_BENCHMARKS, check_benchmark, data_path

if TYPE_CHECKING:  # pandas loads where a frame is built
    import pandas as pd


def load_responses(bench="arc") -> ResponseMatrix:
    """The dense (fully observed) Open LLM Leaderboard response matrix of ``bench``, or the
    matrix in the file ``bench`` names (a path, as the CLI's RESPONSES: :func:`resolve_responses`)."""
    return resolve_responses(bench, option="load_responses:")


def load_test_thetas(bench: str = "arc") -> pd.DataFrame:
    """The paper's test models with whole-bank WLE theta and SE: columns subject_id, theta, se."""
    import pandas as pd

    df = pd.read_csv(data_path(f"{check_benchmark(bench, BANK_BENCHMARKS)}_test_theta_wle.csv.gz"))
    return df.rename(columns={"Model_Name": "subject_id", "Theta_WLE": "theta", "SE": "se"})


def load_test_accuracy(bench: str = "arc") -> pd.DataFrame:
    """The paper's test models' full-bank accuracy: columns subject_id, accuracy, n_items."""
    import pandas as pd

    df = pd.read_csv(data_path(f"{check_benchmark(bench, BANK_BENCHMARKS)}_test_accuracy.csv.gz"))
    return df.rename(columns={"model": "subject_id", "actual_accuracy": "accuracy"})


def load_m2_partitions(bench: str = "arc") -> pd.DataFrame:
    """The paper's M2 / RMSEA / SRMSR / TLI / CFI of each calibration partition."""
    import pandas as pd

    df = pd.read_csv(data_path(f"{check_benchmark(bench, BANK_BENCHMARKS)}_m2_partitions.csv.gz"))
    return df.drop(columns=[c for c in df.columns if c.startswith("Unnamed") or c == ""])


def load_items(bench: str = "arc") -> pd.DataFrame:
    """Item content of ``bench`` (metabench item set): question, choices, answerKey, prompt.

    The ``item_id`` column holds the matrix item id (metabench_idx)."""
    import pandas as pd

    if bench.lower() != "arc":
        raise AtlasError("item content is bundled for 'arc' only; read the others with "
                         "atlascat.content.items from ../shared/data/openllm/items/")
    df = pd.read_parquet(data_path("items_arc.parquet"))
    df.insert(0, "item_id", df["metabench_idx"].astype(str))
    return df


def resolve_responses(spec, *, option: str = "RESPONSES", **read_kw) -> ResponseMatrix:
    """A ResponseMatrix from a file path or a bundled name (the dense matrix of a benchmark)."""
    text = str(spec)
    if not text.strip():   # not the current folder: an empty value is a slip
        raise ResponseDataError(f"{option} is empty; give a response matrix file or a bundled "
                                "name")
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
