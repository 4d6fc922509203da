"""benchmarks/gpu (issue 29's GPU figures) keeps working on a machine without a GPU.

The script runs once, on a lent GPU machine, so it must not rot between those runs: the phase
timers restore every function they wrap and count every EM phase, and the EAP comparison runs
end to end with the accelerator side on PyTorch's CPU backend (``--device cpu``).
"""
from __future__ import annotations

import csv
import importlib.util
import sys
import warnings
from pathlib import Path

import pytest

GPU_DIR = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu"


@pytest.fixture
def gpu_bench(monkeypatch):
    monkeypatch.syspath_prepend(str(GPU_DIR))
    monkeypatch.syspath_prepend(str(GPU_DIR.parent))
    for name in ("common", "calib", "live", "gpu_figures"):
        sys.modules.pop(name, None)
    import calib
    import gpu_figures

    yield calib, gpu_figures
    for name in ("common", "calib", "live", "gpu_figures"):
        sys.modules.pop(name, None)


def test_phase_timers_count_every_em_phase_and_restore(gpu_bench):
    calib, _ = gpu_bench
    from atlascat.irt import em, mstep

    before = (em.estep, em.mstep, em.DeviceData.build, mstep.EARLY_EXIT)
    rm = calib.hellaswag_matrix(300, 40, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with calib.phase_timers("cpu") as ph:
            r = calib.fit(rm, "cpu", "float64", "auto", max_iter=6)
    assert r["iterations"] == 6 and r["n_responses"] == 300 * r["n_items"]
    assert len(r["trace"]) >= 4
    # every E-step of the loop, plus the final scoring pass
    assert ph["E-step (incl. the final scoring pass)"][1] == r["iterations"] + 1
    assert 1 <= ph["M-step"][1] <= r["iterations"]
    assert ph["data to the device (DeviceData.build)"][1] == 1
    text = calib.phase_report("test", ph, r)
    assert "| M-step |" in text and "| before the EM" in text
    assert (em.estep, em.mstep, em.DeviceData.build, mstep.EARLY_EXIT) == before


@pytest.mark.optional
def test_leaderboard_matrix_has_the_missing_share_asked(gpu_bench):
    pytest.importorskip("torch", reason="the simulated leaderboard is drawn with torch")
    calib, _ = gpu_bench
    import numpy as np

    y, bank = calib.leaderboard_matrix(400, 300, 0.6, 3, "cpu")
    assert y.shape == (400, 300) and len(bank) == 300
    assert abs(np.isnan(y).mean() - 0.6) < 0.01
    obs = y[~np.isnan(y)]
    assert set(np.unique(obs)) <= {0.0, 1.0} and 0.2 < obs.mean() < 0.9


@pytest.mark.optional
def test_eap_comparison_runs_end_to_end_on_torch_cpu(gpu_bench, tmp_path):
    if importlib.util.find_spec("torch") is None or importlib.util.find_spec(
            "array_api_compat") is None:
        pytest.skip("torch and array_api_compat are not installed (the 'gpu' extra)")
    _, gpu_figures = gpu_bench
    gpu_figures.main(["calib", "--out", str(tmp_path), "--device", "cpu", "--small",
                      "--only", "eap"])
    rows = list(csv.DictReader((tmp_path / "calib.csv").open()))
    acc = [r for r in rows if r["side"] == "accelerator"]
    assert [r["dtype"] for r in acc] == ["float64", "float32"]
    assert all(r["equal"] == "True" for r in acc)
    assert float(acc[0]["theta_max_abs_diff"]) < 1e-8
    assert "## EAP scoring" in (tmp_path / "calib.md").read_text()
