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
    # the EM's data, then the result's scores on fscores' 121-node grid (ability.fscores) and,
    # for the subjects that grid does not resolve, once more on one 8 times finer (adaptquad)
    assert ph["data to the device (DeviceData.build)"][1] in (2, 3)
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
    assert [(r["case"].split()[0], r["dtype"]) for r in acc] == [
        ("EAP", "float64"), ("EAP", "float32"), ("MAP", "float64")]
    assert all(r["equal"] == "True" for r in rows if r["side"] != "cpu")
    assert float(acc[0]["theta_max_abs_diff"]) < 1e-8
    assert "## EAP and MAP scoring" in (tmp_path / "calib.md").read_text()


def _suite_rec(wall, load, goal_met, start_exit=None, imports=0.0):
    return {"command": "atlas evaluate --suite openllm-v1 --subject hf:m.gguf",
            "process": "in-process" if start_exit is None else "new process", "wall_s": wall,
            "start_exit_s": start_exit, "import_s": imports, "model_load_s": load,
            "run_s": wall - load - imports - (start_exit or 0.0), "items": 150,
            "stop_reason": "max_items",
            "tokens_run": 104966, "loglikelihood_s": 12.6, "loglikelihood_requests": 557,
            "generation_s": 30.0, "generation_requests": 18, "generation_new_tokens": 857,
            "generation_prompt_tokens": 18000, "forward_passes": 900, "dtype": "bfloat16",
            "items_per_benchmark": {"arc": 150}, "goal_met": goal_met,
            "average": {"score": 0.3, "lo": 0.28, "hi": 0.33},
            "benchmarks": [{"name": "arc", "items": 150, "score": 0.3, "lo": 0.28, "hi": 0.33}]}


def test_live_tables_show_the_cold_and_the_warm_run(gpu_bench, tmp_path):
    """The live phase's tables: the cold run (GGUF converted into the model cache, in the
    phase's process) and the warm run (a new process, loaded from the cache) as two rows, the
    warm one with its process start and exit and its import of torch + transformers; the goal
    is judged on the warm run only."""
    _, gpu_figures = gpu_bench
    rec = {"machine": {"cpu_cores": 16, "date": "d", "torch": "2.11.0"},
           "import_torch_transformers_s": 4.4,
           "suite_cold": _suite_rec(77.0, 25.0, False),
           "suite": _suite_rec(52.0, 1.0, True, start_exit=0.5, imports=6.5),
           "cold_vs_warm": {"same_items": True, "same_answers": True, "items_a": 150,
                            "items_b": 150},
           "gguf_direct": {"bench": "arc", "requests": 172, "gguf_load_s": 24.0,
                           "cache_load_s": 1.0, "max_abs_ll_diff": 0.0},
           "float32": {"compared_items": 132, "same_answers": 127, "seconds": 10.2,
                       "load_s": 1.1, "average_from_float32_answers": 0.318}}
    gpu_figures._write_live(tmp_path, rec, [])
    text = (tmp_path / "live.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith(("| cold", "| warm"))]
    assert len(rows) == 2
    assert rows[0].startswith("| cold (in process) | 77.0 s | - | 0.0 s | 25.0 s | 52.0 s |")
    assert rows[1].startswith("| warm (new process) | 52.0 s | 0.5 s | 6.5 s | 1.0 s | 44.0 s |")
    assert rows[0].endswith("|  |") and rows[1].endswith("| met |")
    assert "same answers True" in text and "model_cache=false" in text
    with open(tmp_path / "live.csv", newline="") as fh:
        csv_rows = list(csv.DictReader(fh))
    warm = "suite (hf, bfloat16; warm: a new process, loaded from the model cache)"
    assert [r["section"] for r in csv_rows if r["metric"] == "goal_met"] == [warm]
    assert {(r["section"], r["metric"], r["value"]) for r in csv_rows
            if r["metric"] in ("start_exit_s", "import_s")} == {
        (warm, "start_exit_s", "0.5"), (warm, "import_s", "6.5"),
        ("suite (hf, bfloat16; cold: GGUF converted into the model cache)", "import_s", "0")}


def test_suite_run_as_a_new_process_asks_what_the_cli_asks_in_process(gpu_bench, tmp_path):
    """The live phase's warm run: ``atlas evaluate --suite`` as a new process (the CLI's
    ``main`` with the phase's counters), timed from its start to its exit; it asks the same
    items and gets the same answers as the CLI's ``main`` in this process (``simulate:`` here:
    no model, so nothing to import or load)."""
    import live

    here = live.suite_run("simulate:0.5", tmp_path, max_items=4, tag="here")
    new = live.suite_run_process("simulate:0.5", tmp_path, max_items=4, tag="new", timeout=300)
    assert here["process"] == "in-process" and new["process"] == "new process"
    assert new["wall_s"] > new["main_s"] > 0 and new["start_exit_s"] > 0
    assert new["stats"] == {"import_s": 0.0, "load_s": 0.0, "loaded_from": None}
    assert here["result"]["n_items"] == new["result"]["n_items"] == 4
    same = live.same_answers(here, new)
    assert same["same_items"] and same["same_answers"] and same["items_b"] == 4
    with pytest.raises(RuntimeError, match="a new process.*failed"):
        live.suite_run_process("nosuch:x", tmp_path, max_items=4, tag="bad", timeout=300)


def test_warm_run_falls_back_to_this_process_where_a_new_one_fails(gpu_bench, tmp_path,
                                                                   monkeypatch):
    """Where the warm run's new process fails (not by its timeout), the phase makes it in its
    own process, and the tables say which process made it."""
    import subprocess

    import live

    _, gpu_figures = gpu_bench
    errors: list[str] = []

    def step(name, fn, key=None):
        try:
            return fn()
        except Exception as exc:  # noqa: BLE001 - as the phase's step
            errors.append(f"{name}: {type(exc).__name__}: {exc}")
            return None

    def fails(*a, **k):
        raise RuntimeError("atlas evaluate --suite (a new process) failed (exit 1): CUDA busy")

    monkeypatch.setattr(live, "suite_run_process", fails)
    run = gpu_figures.warm_run(live, "simulate:0.5", tmp_path, 4, step, errors, lambda: 60)
    assert run["process"] == "in-process" and run["result"]["n_items"] == 4
    assert errors == ["suite: RuntimeError: atlas evaluate --suite (a new process) failed "
                      "(exit 1): CUDA busy"]

    def times_out(*a, **k):
        raise subprocess.TimeoutExpired("live.py", 60)

    monkeypatch.setattr(live, "suite_run_process", times_out)
    errors.clear()
    assert gpu_figures.warm_run(live, "simulate:0.5", tmp_path, 4, step, errors,
                                lambda: 60) is None
    assert len(errors) == 1 and errors[0].startswith("suite: TimeoutExpired")

    rec = {"machine": {"cpu_cores": 16, "date": "d"}, "import_torch_transformers_s": 4.4,
           "suite_cold": {**_suite_rec(77.0, 25.0, False), "process": "in-process"},
           "suite": {**_suite_rec(40.0, 1.0, True), "process": "in-process"}}
    gpu_figures._write_live(tmp_path, rec, ["suite: RuntimeError: CUDA busy"])
    text = (tmp_path / "live.md").read_text()
    assert "| warm (in process) | 40.0 s | - |" in text
    assert "The warm run was made in the cold run's process" in text
