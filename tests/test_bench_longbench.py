"""benchmarks/bench_longbench.py: LongBench's continuous matrices through `atlas build-bank` and
`atlas simulate` with their defaults; the library path gives the same scores (one task, one
seed), and the table applies the acceptance per task and split."""
import pandas as pd
import pytest
from conftest import load_benchmark


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("bench_longbench")


@pytest.mark.slow
def test_cli_equals_library_and_the_table_judges(bench, shared_data, tmp_path, monkeypatch):
    monkeypatch.setattr(bench, "CACHE", tmp_path / "cache")
    df = bench.load("qmsum")
    assert df.shape == (40, 200) and df.to_numpy().min() >= 0 and df.to_numpy().max() <= 1
    cli = bench.run_cli(df, "interpolation", 0, 50, tmp_path)
    lib = bench.run_library("qmsum", df, "interpolation", 0, 50, {})
    assert cli["n_targets"] == lib["n_targets"] == 10 and cli["n_source"] == 30
    assert cli["mae"] == pytest.approx(lib["mae"], abs=1e-9)          # the same predictor
    assert cli["n_hits"] == lib["n_hits"] and cli["items_max"] == 50
    assert 0 < cli["mae"] < 3                                          # points, ROUGE-L
    res = pd.DataFrame([{"task": "qmsum", "split": "interpolation", "seed": 0, **cli}])
    peers = pd.read_csv(bench.DATA / "peers_best.csv")
    text = bench.table(res, peers)
    row = text.splitlines()[2]
    assert row.startswith("| qmsum | interpolation |") and "(PCA)" in row
    bound = peers.set_index(["dataset", "split"]).loc[("longbench_qmsum", "interpolation")]
    assert ("meets" in row) == (cli["mae"] <= bound.best_peer_mae)
