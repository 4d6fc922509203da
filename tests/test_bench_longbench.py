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


def test_peers_draws_extend_benchpreds_own_runs(shared_data):
    """results/longbench/peers_draws.csv (benchmarks/peers_longbench_draws.py, BenchPred's code
    run with 20 more item draws per seed): its draw 0 is peers_per_seed.csv, every drawing
    method has 21 draws per seed, and its split is bench_benchpred's."""
    import numpy as np

    peers = load_benchmark("peers_longbench_draws")
    rows = pd.read_csv(peers.OUT)
    ref = pd.read_csv(shared_data / "longbench" / "peers_per_seed.csv").dropna()
    ref["task"] = ref.dataset.str.replace("longbench_", "", regex=False)
    got = rows[rows.draw == 0].merge(ref, on=["task", "split", "seed", "method"])
    assert len(got) == len(ref) == 440
    np.testing.assert_allclose(got.mae_points_x, got.mae_points_y, atol=1e-5)
    n = rows.groupby(["task", "split", "seed", "method"]).draw.nunique()
    assert set(n[n.index.get_level_values("method") == "lasso"]) == {1}
    assert set(n[n.index.get_level_values("method") != "lasso"]) == {21}
    full = np.random.default_rng(0).random((40, 30))
    bp = load_benchmark("bench_benchpred")
    for split in ("interpolation", "extrapolation"):
        for seed in range(5):
            src, tgt = peers.split(full, split, seed)
            want = bp.split_models(full, split, seed)
            assert sorted(src) == sorted(want[0]) and sorted(tgt) == sorted(want[1])
