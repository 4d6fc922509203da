"""Finding a live run by its id alone, as the README spells it (`atlas evaluate --resume
RUN_ID`, `atlas runs`, `atlas compare-models RUN_A RUN_B`): a run written with -o DIR whose
process was killed is still listed and resumed, and an id no store holds is one line naming
the stores searched."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import HANG_S

from atlascat.catalogue import BankRef
from atlascat.cli import main
from atlascat.live.mockserver import MockOpenAIServer
from atlascat.live.store import find_run_store, known_stores

ROOT = Path(__file__).resolve().parents[1]


def _killed_run(tmp_path, srv) -> Path:
    """An `atlas evaluate -o DIR` process SIGKILLed while asking its fourth item."""
    run_dir = tmp_path / "killed"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "atlascat", "evaluate", "--bank", "arc", "--subject",
         f"openai:{srv.url}", "--llm", "mock", "--se-stop", "0.3", "--min-items", "8",
         "--max-items", "10", "--seed", "3", "-o", str(run_dir), "-q"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + HANG_S
    while time.time() < deadline and len(srv.log) < 4:
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=HANG_S)
    return run_dir


def test_a_killed_run_is_listed_and_resumed_by_its_id_alone(tmp_path, capsys):
    bank = BankRef.from_option("arc").load()
    with MockOpenAIServer(bank, 0.5, seed=7, hang_s=0.1, fault=lambda n, i, t: "hang") as srv:
        run_dir = _killed_run(tmp_path, srv)
        db = (run_dir / "runs.sqlite").resolve()
        assert db in known_stores()              # remembered once it asked an item
        assert main(["runs", "--json"]) == 0      # listed without --db
        run = json.loads(capsys.readouterr().out)[0]
        assert run["db"] == str(db) and run["state"] == "interrupted" and run["n_items"] >= 1
        page = tmp_path / "page.html"   # its steps and page say interrupted, as the list does
        assert main(["runs", "--run", run["run_id"], "-o", str(page)]) == 0
        shown = capsys.readouterr().out
        assert "(mock, interrupted," in shown and "nan" not in shown
        assert "<td>status</td><td>interrupted</td>" in page.read_text().replace("\n", "")
        assert main(["evaluate", "--bank", "arc", "--subject", "simulate:0.5", "--se-stop",
                     "0.3", "--min-items", "5", "--max-items", "6", "-o",
                     str(tmp_path / "other"), "-q"]) == 0
        capsys.readouterr()               # its folder names the run that has not finished
        assert main(["compare-models", str(run_dir), str(tmp_path / "other")]) == 2
        assert capsys.readouterr().err.strip() == (
            f"error: run {run['run_id']} has not finished (interrupted): resume it to its end "
            f"first; atlas evaluate --resume {run['run_id']} --db {db}, then compare")
        assert main(["evaluate", "--resume", run["run_id"], "--json"]) == 0, \
            capsys.readouterr().err
    res = json.loads(capsys.readouterr().out)[0]
    assert res["run_id"] == run["run_id"] and res["status"] == "done" and res["n_items"] >= 8
    saved = json.loads((run_dir / "results.json").read_text())   # where its first call wrote
    assert [r["run_id"] for r in saved] == [run["run_id"]]


def test_an_unknown_run_id_names_the_stores_searched(tmp_path, capsys):
    for name in ("a", "b"):
        code = main(["evaluate", "--bank", "arc", "--subject", "simulate:0.5", "--se-stop",
                     "0.3", "--min-items", "5", "--max-items", "6", "-o", str(tmp_path / name),
                     "-q"])
        assert code == 0
    capsys.readouterr()
    stores = known_stores()
    assert len(stores) == 2
    for args in (["runs", "--run", "nope"], ["compare-models", str(tmp_path / "a"), "nope"],
                 ["evaluate", "--resume", "nope"]):
        assert main(args) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("error: no run 'nope' in any of the 2 known run stores") \
            and str(stores[1]) in err and "--db" in err and "\n" not in err, err
    with pytest.raises(Exception, match="no run 'x'"):
        find_run_store("x", stores[:1])


def test_a_database_of_something_else_is_left_alone(tmp_path, capsys):
    """--db naming another program's SQLite file is refused before ATLAS writes its tables
    (or its WAL journal mode) into it."""
    import sqlite3

    other = tmp_path / "app.sqlite"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE users (name TEXT)")
    con.commit()
    con.close()
    for args in (["runs", "--db", str(other)],
                 ["evaluate", "--bank", "arc", "--subject", "simulate:0.5", "--db", str(other)]):
        assert main(args) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("error: ") and "not a run store" in err and "\n" not in err, err
    con = sqlite3.connect(other)
    tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    assert tables == ["users"]
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "delete"


def test_a_broken_remembered_store_does_not_hide_the_others(tmp_path, capsys):
    ids = []
    for name in ("a", "b"):
        assert main(["evaluate", "--bank", "arc", "--subject", "simulate:0.5", "--se-stop",
                     "0.3", "--min-items", "5", "--max-items", "6", "-o", str(tmp_path / name),
                     "--json"]) == 0
        ids.append(json.loads(capsys.readouterr().out)[0]["run_id"])
    for stale in (tmp_path / "b").glob("runs.sqlite*"):
        if stale.is_file():
            stale.unlink()
    (tmp_path / "b" / "runs.sqlite").write_text("not a database any more")
    assert main(["runs", "--json"]) == 0
    out, err = capsys.readouterr()
    assert [r["run_id"] for r in json.loads(out)] == ids[:1]
    assert err.startswith("warning: skipped: cannot open run database") and "b/runs.sqlite" in err
    assert main(["runs", "--run", ids[0], "--json"]) == 0
    assert main(["compare-models", ids[0], ids[1]]) == 2
    assert "no run" in capsys.readouterr().err


def test_a_failed_runs_steps_say_why_it_stopped(tmp_path, capsys):
    code = main(["evaluate", "--bank", "arc", "--subject", "completions:http://127.0.0.1:9/v1",
                 "--llm", "m", "--max-retries", "0", "-o", str(tmp_path / "run"), "-q"])
    assert code == 2
    capsys.readouterr()
    assert main(["runs", "--json"]) == 0
    run = json.loads(capsys.readouterr().out)[0]
    assert run["state"] == "error"
    assert main(["runs", "--run", run["run_id"]]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("last error: model 'm' at http://127.0.0.1:9/v1/completions failed")


def test_a_moved_run_folder_is_resumed_where_it_is_now(tmp_path, capsys):
    """`-o DIR` moved after the run was killed: the resumed run writes its results.json and
    page into the folder where its store is now, not into the old path."""
    bank = BankRef.from_option("arc").load()
    with MockOpenAIServer(bank, 0.5, seed=7, hang_s=0.1, fault=lambda n, i, t: "hang") as srv:
        old = _killed_run(tmp_path, srv)
        new = old.rename(tmp_path / "moved")
        rid = json.loads(subprocess.run(
            [sys.executable, "-m", "atlascat", "runs", "--db", str(new / "runs.sqlite"),
             "--json"], env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
            capture_output=True, text=True).stdout)[0]["run_id"]
        assert main(["evaluate", "--resume", rid, "--db", str(new / "runs.sqlite"), "-q"]) == 0
    assert not old.exists()
    assert [r["run_id"] for r in json.loads((new / "results.json").read_text())] == [rid]
    assert (new / "reports" / f"{rid}.html").exists()


def test_a_run_folder_whose_store_is_elsewhere_is_found(tmp_path, capsys):
    """`-o OUT --db STORE`: the folder has results.json, the store is elsewhere; compare-models
    OUT finds the run in the stores runs are remembered in."""
    for name, theta in (("a", "0.7"), ("b", "0.2")):
        assert main(["evaluate", "--bank", "arc", "--subject", f"simulate:{theta}", "--se-stop",
                     "0.3", "-o", str(tmp_path / name), "--db", str(tmp_path / f"{name}.sqlite"),
                     "-q"]) == 0
    capsys.readouterr()
    assert main(["compare-models", str(tmp_path / "a"), str(tmp_path / "b"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"][0]["benchmark"] == "arc"
