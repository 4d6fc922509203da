"""benchmarks/bench_benchpred.py: BenchPred's protocol runs through `atlas build-bank` and
`atlas simulate`, and the folder's predictor gives exactly the library's scores for the same
bank and seeds (one HELM MMLU seed, extrapolation split)."""
import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_benchpred.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_benchpred", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


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
