"""``atlas evaluate`` as a user meets it (issue 19): a clean stop on Ctrl-C (exit 130, run
``interrupted``, resume writes into the run's own directory), nothing written to the current
directory, observed vs model-based accuracy, option names in errors, ``--fixed-length``, the
protocol line per benchmark and aligned per-item lines."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import HANG_S

from atlascat.cli import main
from atlascat.catalogue import BankRef
from atlascat.live import runner
from atlascat.live.subjects import SubjectSpec
from atlascat.live.mockserver import MockOpenAIServer
from atlascat.live.store import RunStore, atlas_home, default_store_path

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bank():
    return BankRef.from_option("arc").load()


def _listing(path: Path) -> list:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


def _atlas(*args, cwd, wait=True):
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "COLUMNS": "200"}
    proc = subprocess.Popen([sys.executable, "-m", "atlascat", *map(str, args)], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if not wait:
        return proc
    out, err = proc.communicate(timeout=HANG_S)
    return proc.returncode, out, err


# ------------------------------------------------------------------------------- Ctrl-C
def test_sigint_marks_interrupted_exits_130_and_resume_writes_into_the_run_dir(bank, tmp_path):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    run_dir = tmp_path / "run"
    db = run_dir / "runs.sqlite"
    with MockOpenAIServer(bank, 0.5, seed=7, hang_s=0.15, fault=lambda n, i, t: "hang") as srv:
        proc = _atlas("evaluate", "--bank", "arc", "--subject", f"openai:{srv.url}", "--llm",
                      "mock", "--se-stop", "0.3", "--min-items", "10", "--max-items", "14",
                      "--seed", "3", "-o", run_dir, cwd=cwd, wait=False)
        deadline = time.time() + 60
        while time.time() < deadline and len(srv.log) < 3:  # it is asking its third item
            time.sleep(0.01)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=HANG_S)
        assert proc.returncode == 130, err
        code, listed, _ = _atlas("runs", "--db", db, "--json", cwd=cwd)
        run = json.loads(listed)[0]
        rid = run["run_id"]
        assert code == 0 and run["state"] == "interrupted"
        # the item in flight was finished and saved, not left pending
        assert run["pending"] == 0 and 1 <= run["n_items"] < 10
        assert f"--resume {rid}" in err and f"--db {db}" in err and "Traceback" not in err
        assert not (run_dir / "results.json").exists()

        code, out, err = _atlas("evaluate", "--resume", rid, "--db", db, "--json", cwd=cwd)
    assert code == 0, err
    res = json.loads(out)[0]
    assert res["run_id"] == rid and res["status"] == "done" and res["n_items"] >= 10
    saved = json.loads((run_dir / "results.json").read_text())
    assert [r["run_id"] for r in saved] == [rid] and saved[0]["status"] == "done"
    assert Path(res["report"]) == (run_dir / "reports" / f"{rid}.html").resolve()
    assert Path(res["report"]).exists()
    assert _listing(cwd) == []
    sent = [e["item_id"] for e in srv.log]
    assert len(sent) == len(set(sent)) == res["n_items"]  # no item asked twice


def test_resume_of_a_run_in_the_default_store_keeps_its_directories(bank, capsys, tmp_path,
                                                                    monkeypatch):
    monkeypatch.chdir(tmp_path)
    store = RunStore(default_store_path())
    rid = runner.start_run(store, bank, SubjectSpec.rebuild(
        {"type": "simulate", "theta": 0.5, "seed": 1, "model": "sim", "kind": "chat"}, bank),
        config=runner_config(), bank_ref="shipped:arc")
    reports = atlas_home() / "elsewhere"
    store.set_run_output(rid, output_dir=reports, report_dir=reports)
    assert main(["evaluate", "--resume", rid, "-q"]) == 0
    assert (reports / f"{rid}.html").exists()
    assert json.loads((reports / "results.json").read_text())[0]["run_id"] == rid
    assert _listing(tmp_path) == []


def runner_config():
    from atlascat.cat.config import CATConfig

    return CATConfig(se_stop=0.3, min_items=5, max_items=10)


# ------------------------------------------------------------------------------- nothing in cwd
def test_success_writes_nothing_into_the_current_directory(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code = main(["evaluate", "--bank", "arc", "--subject", "simulate:0.5", "--se-stop", "0.3",
                 "--min-items", "5", "--max-items", "12", "-q"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert _listing(tmp_path) == []
    home = atlas_home()
    assert default_store_path().exists() and str(default_store_path()) in err
    results = json.loads((home / "runs_reports" / "results.json").read_text())
    assert len(results) == 1 and (home / "runs_reports" / f"{results[0]['run_id']}.html").exists()
    code = main(["runs", "--json"])  # atlas runs reads the same default store
    assert code == 0 and json.loads(capsys.readouterr().out)[0]["state"] == "done"


@pytest.mark.parametrize("args", [
    ["--bank", "no-such-bank", "--subject", "simulate:0"],
    ["--bank", "arc", "--subject", "bogus:1"],
    ["--bank", "arc", "--subject", "simulate:0", "--min-items", "30", "--max-items", "3"],
    ["--bank", "arc", "--subject", "simulate:0", "--prompt-style", "odd"],
    # fails in start_run, after the checks (a simulated model reports no tokens)
    ["--bank", "PLAIN", "--subject", "simulate:0", "--token-budget", "100"],
    ["--bank", "PLAIN", "--subject", "openai:http://127.0.0.1:9", "--llm", "m"],   # no content
])
@pytest.mark.parametrize("where", [[], ["-o", "out"], ["--db", "sub/x.sqlite"]])
def test_a_failed_start_leaves_nothing_behind(tmp_path, monkeypatch, capsys, args, where):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    plain = tmp_path / "plain_bank.csv"  # a bank without item content
    plain.write_text("item_id,a,b,c,u\ni1,1.0,0.0,0.0,1.0\ni2,1.2,0.5,0.0,1.0\n")
    monkeypatch.chdir(cwd)
    args = [str(plain) if a == "PLAIN" else a for a in args]
    code = main(["evaluate", *args, *where])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: "), err
    assert _listing(cwd) == []
    assert _listing(atlas_home()) == []


# ------------------------------------------------------------------------- observed / model-based
def test_observed_and_model_based_score_are_both_stored_and_labelled(bank, tmp_path, capsys):
    out_dir = tmp_path / "run"
    code = main(["evaluate", "--bank", "arc", "--subject", "simulate:-1.5:4", "--se-stop", "0.3",
                 "--min-items", "12", "--max-items", "20", "-o", str(out_dir), "--json"])
    assert code == 0
    row = json.loads(capsys.readouterr().out)[0]
    assert row["observed_score"] == pytest.approx(np.mean(row["scores"]))
    assert row["observed_score"] == pytest.approx(row["score_sum"] / row["n_items"])
    assert row["model_based_score"] == pytest.approx(
        runner.expected_accuracy(bank, row["theta"]))
    # one set of names for every metric: none of the 0/1-only keys
    assert not {"accuracy", "n_correct", "observed_accuracy", "model_based_accuracy"} & set(row)
    res = runner.RunResult.from_store(RunStore(out_dir / "runs.sqlite"), row["run_id"])
    assert not hasattr(res, "accuracy") and not hasattr(res, "n_correct")
    assert res.model_based_score == pytest.approx(row["model_based_score"])
    assert res.observed_score == pytest.approx(row["observed_score"])
    runs = RunStore(out_dir / "runs.sqlite").list_runs()
    assert runs.loc[0, "observed_score"] == pytest.approx(row["observed_score"])
    assert runs.loc[0, "model_based_score"] == pytest.approx(row["model_based_score"])
    assert runs.loc[0, "score_sum"] == row["score_sum"]
    assert not {"accuracy", "n_correct", "observed_accuracy", "model_based_accuracy"} & set(runs)

    code = main(["evaluate", "--bank", "arc", "--subject", "simulate:-1.5:4", "--se-stop", "0.3",
                 "--min-items", "12", "--max-items", "20", "-o", str(tmp_path / "r2"), "-q"])
    text = capsys.readouterr().out
    assert code == 0
    assert f"accuracy: observed {100 * row['observed_score']:.1f}% " \
           f"({row['score_sum']}/{row['n_items']} of the items asked); model-based " \
           f"{100 * row['model_based_score']:.1f}%" in text
    code = main(["runs", "--db", str(tmp_path / "r2" / "runs.sqlite")])
    table = capsys.readouterr().out
    assert code == 0 and "observed" in table and "model-based" in table


# ------------------------------------------------------------------------------- options
@pytest.mark.parametrize("args, text", [
    (["--min-items", "30", "--max-items", "3"],
     "--min-items (30) must be between 0 and --max-items (3); lower --min-items"),
    (["--min-items", "-1"], "--min-items must be >= 0, got -1"),
    (["--max-items", "0", "--min-items", "0"], "--max-items must be >= 1, got 0"),
    (["--se-stop", "0"], "--se-stop must be positive and finite"),
    (["--fixed-length", "0"], "--fixed-length must be >= 1"),
    (["--fixed-length", "5", "--max-items", "9"], "--fixed-length 5 sets the test length; drop "
                                                  "--max-items"),
    (["--max-tokens", "0"], "--max-tokens must be >= 1"),
    (["--temperature", "3"], "--temperature must be in [0, 2]"),
    (["--prompt-style", "odd"], "--prompt-style must be one of"),
])
def test_errors_name_the_cli_options(tmp_path, capsys, args, text):
    code = main(["evaluate", "--bank", "arc", "--subject", "simulate:0", "-o",
                 str(tmp_path / "o"), *args])
    err = capsys.readouterr().err
    assert code == 2 and text in err and err.count("\n") == 1, err
    assert "min_items" not in err and "max_items" not in err and "max_tokens" not in err


def test_fixed_length(tmp_path, capsys):
    code = main(["evaluate", "--bank", "arc", "--subject", "simulate:0.5", "--fixed-length", "7",
                 "-o", str(tmp_path / "f"), "--json"])
    assert code == 0
    row = json.loads(capsys.readouterr().out)[0]
    assert row["n_items"] == 7 and len(row["items"]) == 7
    cfg = RunStore(tmp_path / "f" / "runs.sqlite").get_run(row["run_id"])["config"]
    assert (cfg["min_items"], cfg["max_items"], cfg["se_stop"]) == (7, 7, None)


# ------------------------------------------------------------------------------- output
def test_protocol_line_says_generation_for_gsm8k_and_loglikelihood_for_arc(bank):
    from atlascat.cli.cmd_evaluate import format_result
    from atlascat.live.report import protocol_label
    from atlascat.catalogue import BankRef

    assert protocol_label("leaderboard", BankRef.from_option("gsm8k").load()) == \
        "leaderboard (generation, exact match)"
    assert protocol_label("leaderboard", bank) == "leaderboard (log-likelihood)"
    assert protocol_label("approximate", bank).startswith("APPROXIMATE")
    gsm8k = BankRef.from_option("gsm8k").load()
    row = {"model": "m", "theta": 0.1, "se": 0.2, "n_items": 30, "bench": "gsm8k",
           "protocol": "leaderboard", "protocol_label": protocol_label("leaderboard", gsm8k)}
    assert "protocol: leaderboard (generation, exact match)" in format_result(row)


def test_per_item_lines_are_aligned(tmp_path, capsys):
    code = main(["evaluate", "--bank", "arc", "--subject", "simulate:0.5", "--se-stop", "0.3",
                 "--min-items", "12", "--max-items", "16", "-o", str(tmp_path / "a")])
    err = capsys.readouterr().err
    assert code == 0
    lines = [ln for ln in err.splitlines() if " step " in ln]
    assert len(lines) >= 12
    for word in ("step", "item", "theta", "SE"):
        assert len({ln.index(f" {word} ") for ln in lines}) == 1, (word, lines)
    assert {ln.split()[5] for ln in lines} <= {"correct", "wrong"}


# ------------------------------------------------------------------------------- devices
@pytest.mark.parametrize("cuda, args, want", [
    (False, "pretrained=x", "cpu"),            # CPU-only torch: never the harness's "cuda"
    (True, "pretrained=x", None),              # CUDA present: the backend chooses
    (False, "pretrained=x,device=cuda:1", None),  # the user's own device= is kept
])
def test_lmeval_torch_backend_device_is_chosen_safely(monkeypatch, cuda, args, want):
    import types

    from atlascat.live import lmeval_backend

    seen = {}

    class FakeLM:
        @classmethod
        def create_from_arg_string(cls, arg_string, extra):
            seen["extra"] = extra
            return cls()

    registry = types.SimpleNamespace(get_model=lambda name: FakeLM)
    monkeypatch.setattr(lmeval_backend, "_lm_eval", lambda: (registry, object))
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(
        cuda=types.SimpleNamespace(is_available=lambda: cuda)))
    lmeval_backend.LMEvalSubject(f"hf,{args}")
    assert (seen["extra"] or {}).get("device") == want
    monkeypatch.setitem(sys.modules, "torch", None)  # no torch at all: the backend chooses
    lmeval_backend.LMEvalSubject(f"hf,{args}")
    assert (seen["extra"] or {}).get("device") is None


# ------------------------------------------------------------------------------- atlas runs
def test_runs_without_db_finds_runs_written_with_o(tmp_path, capsys):
    """Issue 28, daily use: a run written with -o DIR is listed by `atlas runs` without --db
    (its store is remembered in $ATLAS_HOME/stores.txt), next to the default store's runs."""
    args = ["evaluate", "--bank", "arc", "--subject", "simulate:0.5", "--se-stop", "0.3",
            "--min-items", "5", "--max-items", "8", "--json"]
    assert main([*args, "-o", str(tmp_path / "mine")]) == 0
    elsewhere = json.loads(capsys.readouterr().out)[0]["run_id"]
    assert main(args) == 0                                   # one in the default store too
    default = json.loads(capsys.readouterr().out)[0]["run_id"]
    assert main(["runs", "--json"]) == 0
    listed = {r["run_id"]: r["db"] for r in json.loads(capsys.readouterr().out)}
    assert listed == {default: str(default_store_path()),
                      elsewhere: str((tmp_path / "mine" / "runs.sqlite").resolve())}
    assert main(["runs", "--run", elsewhere, "--json"]) == 0  # one run, found without --db
    assert json.loads(capsys.readouterr().out)["run"]["run_id"] == elsewhere
    assert main(["runs"]) == 0
    assert "runs in 2 run stores" in capsys.readouterr().out


def test_runs_without_any_store_says_so(capsys):
    assert main(["runs"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: run database") and "give --db" in err


def test_the_progress_bar_shows_the_estimate_the_lines_give():
    """On a terminal each run's bar shows what its step lines show: a benchmark predictor's
    predicted score and interval (on a folder's own scale), a suite's average, else theta."""
    from atlascat.cli._live import LiveDisplay, StopRequest
    from atlascat.live.runner import StepInfo

    class Bar:
        console = None

        def __init__(self):
            self.est = []

        def add_task(self, *a, **k):
            return 0

        def update(self, task, **k):
            self.est.append(k["est"])

    shown = LiveDisplay(["m", "s", "c"], ["q1"], (30, 50, None), lines=False, bar=False,
                        averages=["suite"], scales={"scaled": (0.0, 100.0)})
    shown.progress = Bar()
    step = shown.step_callback(StopRequest())
    step(StepInfo("pred", "m", 0, "q1", 1, 0.4, 0.9, False, 0.0, (0.612, 0.5, 0.7)))
    step(StepInfo("scaled", "c", 0, "q1", 1, 0.4, 0.9, False, 0.0, (0.372, 0.25, 0.5)))
    step(StepInfo("suite", "s", 0, "q1", 1, 0.655, 0.012, False, 0.0))
    step(StepInfo("cat", "c", 0, "q1", 1, 0.4, 0.9, False, 0.0))
    assert shown.progress.est == ["predicted 61.2% (50.0-70.0)", "predicted 37.2 (25.0-50.0)",
                                  "average  65.5  SE 1.20", "theta +0.400  SE 0.900"]
