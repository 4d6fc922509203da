"""benchmarks/bench_benchpred.py: BenchPred's protocol runs through `atlas build-bank` and
`atlas simulate`, and the folder's predictor gives exactly the library's scores for the same
bank and seeds (one HELM MMLU seed, extrapolation split)."""
import numpy as np
import pandas as pd
import pytest
from conftest import load_benchmark


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("bench_benchpred")


@pytest.mark.slow
def test_cli_path_equals_library_and_reports_both_designs(bench, shared_data, tmp_path):
    df = bench.load("helm_mmlu")
    rows = bench.run_one(df, "extrapolation", 0, 50, tmp_path, check=True)
    by = {r["design"]: r for r in rows}
    assert set(by) == {"predictor", "adaptive + link", "adaptive + link, whole budget"}
    pred, cat, whole = by["predictor"], by["adaptive + link"], by["adaptive + link, whole budget"]
    assert whole["items_max"] == 50 and whole["items_mean"] == 50   # --min-items = the budget
    assert pred["library_diff"] == 0.0          # same predictor, same seeds: same scores
    assert pred["library_mae"] == pytest.approx(pred["mae"])  # < 100 source models: no pb filter
    assert pred["items_max"] == 50 and cat["items_max"] <= 50
    assert pred["n_targets"] == cat["n_targets"] == int(0.3 * len(df))
    # the design-based predictor is far closer than the link held flat above its data
    assert pred["mae"] < cat["mae"] and 0 < pred["mae"] < 10
    assert 0 <= pred["coverage"] <= 1 and pred["n_hits"] <= pred["n_targets"]
    assert not any(tmp_path.glob("BANK*"))      # the folders are removed after each seed
    res = pd.DataFrame([{"dataset": "helm_mmlu", "split": "extrapolation", "seed": 0, **r}
                        for r in rows])
    text = bench.table(res, pd.DataFrame({"dataset": ["helm_mmlu"], "split": ["extrapolation"],
                                          "method": ["aipw"], "mae": [pred["mae"] / 2]}))
    lines = text.splitlines()
    assert len(lines) == 5 and "**loses** (x2.00; bound x1.1)" in lines[2]
    assert np.isfinite(pred["width"]) and f"{pred['mae']:.2f}" in lines[2]


def test_splits_and_the_random_sample_baseline(bench):
    full = np.random.default_rng(0).random((40, 80))
    acc = full.mean(axis=1)
    src, tgt = bench.split_models(full, "extrapolation", 3)
    assert len(src) == 20 and len(tgt) == 12 and acc[src].max() < acc[tgt].min()
    src, tgt = bench.split_models(full, "weaker", 3)            # the mirror image
    assert len(src) == 20 and len(tgt) == 12 and acc[src].min() > acc[tgt].max()
    src, tgt = bench.split_models(full, "interpolation", 3)
    assert len(tgt) == 10 and len(np.intersect1d(src, tgt)) == 0 and len(src) == 30
    with pytest.raises(ValueError, match="unknown split"):
        bench.split_models(full, "sideways", 0)
    # another family: the family's models are the targets whatever the seed, the rest the source
    names = [f"Org{i % 4}/Qwen2-{i}B" if i % 3 == 0 else f"x/Yi-{i}" if i % 3 == 1
             else f"y/dolphin-llama-{i}" for i in range(len(full))]
    src, tgt = bench.split_models(full, "family:qwen", 0, names)
    assert list(tgt) == list(range(0, len(full), 3)) and len(src) + len(tgt) == len(full)
    assert list(bench.split_models(full, "family:qwen", 4, names)[1]) == list(tgt)
    assert len(bench.family_members(names, "phi")) == 0      # "dolphin" is not Phi
    assert list(bench.family_members(names, "yi")) == list(range(1, len(full), 3))
    frame = pd.DataFrame(full, index=names)
    assert bench.families_of(frame) == ["family:qwen", "family:llama", "family:yi"]
    with pytest.raises(ValueError, match="needs the models' names"):
        bench.split_models(full, "family:qwen", 0)
    with pytest.raises(ValueError, match="unknown family"):
        bench.family_members(names, "gpt")
    df = pd.DataFrame((full > 0.5).astype(float))
    assert bench.random_sample_mae(df, "weaker", 80, 2, replays=2) == 0.0   # every item: exact
    mae = bench.random_sample_mae(df, "weaker", 10, 2, replays=3)
    assert 0 < mae < 50 and mae == bench.random_sample_mae(df, "weaker", 10, 2, replays=3)


def test_table_marks_a_split_without_a_peer(bench):
    res = pd.DataFrame([{"dataset": "d", "split": s, "seed": 0, "design": "predictor",
                         "mae": 3.0, "n_hits": 19, "n_targets": 20, "items_max": 50,
                         "items_mean": 50.0, "width": 12.0} for s in ("extrapolation", "weaker")])
    peers = pd.DataFrame({"dataset": ["d"], "split": ["extrapolation"], "method": ["aipw"],
                          "mae": [2.9]})
    lines = bench.table(res, peers).splitlines()
    assert "| 2.90 (AIPW) | meets |" in lines[2]                # 3.0 <= 1.1 x 2.9
    assert lines[3].endswith("| - | - |")                       # no peer on this split
