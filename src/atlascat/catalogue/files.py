"""Where the shipped data lies and which benchmarks it covers."""
from __future__ import annotations

from pathlib import Path

from ..errors import AtlasError, ConfigError

#: the package's data folder (sources and licences in its README.md)
DATA_DIR = Path(__file__).resolve().parent.parent / "datasets" / "data"

#: dense Open LLM Leaderboard response matrices shipped (``dense_<bench>.csv.gz``)
RESPONSE_BENCHMARKS = ("arc", "gsm8k", "hellaswag", "truthfulqa", "winogrande", "mmlu")
#: the ATLAS paper's published 3PL banks shipped (``<bench>_3pl_bank.csv.gz``)
BANK_BENCHMARKS = ("arc", "gsm8k", "hellaswag", "truthfulqa", "winogrande")
#: our content banks with score links (``banks/<bench>.parquet``, ``banks/<bench>_link.json``)
CONTENT_BENCHMARKS = ("arc", "hellaswag", "mmlu", "truthfulqa", "winogrande", "gsm8k")
#: bundled arena battles by name (generated: :func:`atlascat.design.arena.random_battles`)
BATTLES = {"arena-demo": "battles_demo.csv"}
#: a bank name with this prefix is the paper's (``paper-arc``)
PAPER_PREFIX = "paper-"


def data_path(name: str) -> Path:
    """Path of a bundled data file (relative to the data folder)."""
    path = DATA_DIR / name
    if not path.exists():
        raise AtlasError(f"bundled data file {name!r} not found in the package")
    return path


def resolve_battles(path) -> Path:
    """A battles file: ``path`` itself when it exists or is not a bundled name, else the bundled
    file of that name (:data:`BATTLES`: ``arena-demo``, 400 made-up games of 8 players)."""
    if not Path(path).exists() and str(path) in BATTLES:
        return data_path(BATTLES[str(path)])
    return Path(path)


def check_benchmark(bench: str, allowed) -> str:
    """``bench`` lower-cased (a ``paper-`` prefix dropped for the paper's files) if in
    ``allowed``, else an error that lists them."""
    bench = str(bench).lower()
    if bench.startswith(PAPER_PREFIX) and allowed is BANK_BENCHMARKS:
        bench = bench[len(PAPER_PREFIX):]
    if bench not in allowed:
        raise ConfigError(f"unknown benchmark {bench!r}; choose one of {', '.join(allowed)}")
    return bench
