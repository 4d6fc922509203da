"""`atlas evaluate` killed (SIGKILL) mid-run, as a user's process dies, then `--resume`d: the
run ends with the items, scores, theta, SE, stop reason and predicted score of an uninterrupted
run with the same seed, asks no answered item again, and `atlas runs`, results.json and the run
page agree, on a shipped bank asked over HTTP (completions:, the link's own stops) and on a bank
folder built by `atlas build-bank` from a response matrix (cmd:, both designs).

The kill is deterministic: it happens while the run waits for a reply the test holds back (the
server's fault hook; the command's gate file), never on a timer; waits are generous (a busy
machine makes them slow, not wrong)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from conftest import HANG_S
from cli_checks import atlas_process as atlas

KILL_AT = 9            # the request (item) during which the process dies
SAME = ("items", "scores", "theta", "se", "n_items", "stop_reason", "prediction", "status",
        "observed_score", "model_based_score", "score_sum")


def results(folder: Path) -> dict:
    rows = json.loads((folder / "results.json").read_text())
    assert len(rows) == 1
    return rows[0]


def listed(db: Path) -> dict:
    code, out, err = atlas("runs", "--db", db, "--json")
    assert code == 0, err
    rows = json.loads(out)
    assert len(rows) == 1
    return rows[0]


def check_partial(db: Path, at_least: int) -> dict:
    """`atlas runs` lists the killed run as interrupted, with its answers so far and the
    prediction from them, marked partial."""
    row = listed(db)
    assert row["state"] == "interrupted" and row["n_items"] >= at_least
    pred = row["prediction"]
    assert pred["partial"] and pred["state"] == "interrupted"
    assert pred["answered"] == row["n_items"] and pred.get("score") is not None
    return row


def check_same(ref: dict, res: dict, folder: Path) -> None:
    assert {k: res[k] for k in SAME} == {k: ref[k] for k in SAME}
    page = (folder / "reports" / f"{res['run_id']}.html").read_text()
    assert f"{res['theta']:.3f}" in page and "interrupted" not in page


@pytest.mark.slow
def test_sigkilled_completions_run_on_arc_resumes_as_uninterrupted(tmp_path):
    """completions: on the shipped ARC bank with its default stops (the link's floor / top and
    precision rules, the bank's 45 items), the output folder's results.json and page."""
    from atlascat.live.mockserver import MockOpenAIServer
    from atlascat.live.toylm import ToyLM

    common = ["--bank", "arc", "--llm", "toylm", "--seed", 3, "-q"]
    with MockOpenAIServer(lm=ToyLM()) as srv:
        code, _, err = atlas("evaluate", "--subject", f"completions:{srv.url}", *common,
                             "-o", tmp_path / "ref")
    assert code == 0, err
    ref = results(tmp_path / "ref")
    assert ref["status"] == "done" and ref["n_items"] > KILL_AT
    box, killed = {}, threading.Event()

    def fault(n, item, times):
        if n == KILL_AT and not killed.is_set():   # the reply to this request never comes
            os.kill(box["proc"].pid, signal.SIGKILL)
            killed.set()
            return "drop"
        return None

    out = tmp_path / "killed"
    with MockOpenAIServer(lm=ToyLM(), fault=fault) as srv:
        box["proc"] = atlas("evaluate", "--subject", f"completions:{srv.url}", *common,
                            "-o", out, wait=False)
        box["proc"].communicate(timeout=HANG_S)
        assert killed.is_set() and box["proc"].returncode == -signal.SIGKILL
        assert not (out / "results.json").exists()
        row = check_partial(out / "runs.sqlite", KILL_AT - 1)
        code, _, err = atlas("evaluate", "--resume", row["run_id"], "--db", out / "runs.sqlite",
                             "-q")
        asked = [e["body"]["prompt"] for e in srv.log]
    assert code == 0, err
    res = results(out)
    assert res["run_id"] == row["run_id"]
    check_same(ref, res, out)
    # one request in flight died with the process; every other prompt was sent once
    assert len(asked) == len({json.dumps(p) for p in asked}) + 1
    assert listed(out / "runs.sqlite")["state"] == "done"


JUDGE = """\
import hashlib, json, os, sys, time
gate, n = sys.argv[1], 0
for line in sys.stdin:
    item = json.loads(line)["item_id"]
    n += 1
    if n == {kill_at} and not os.path.exists(gate):
        open(gate + ".waiting", "w").close()
        while not os.path.exists(gate):  # held back until the process is killed (the test
            time.sleep(0.05)             # opens the gate after the kill: then it leaves)
        sys.exit(0)
    with open(gate + ".asked", "a") as fh:
        fh.write(item + "\\n")
    score = int(int(hashlib.sha256(item.encode()).hexdigest(), 16) % 100 < 55)
    print(json.dumps({{"item_id": item, "score": score}}), flush=True)
"""


@pytest.fixture(scope="module")
def matrix_folder(tmp_path_factory, shared_data):
    """A bank folder built by `atlas build-bank` from 40 models of a BenchPred matrix."""
    from atlascat.responses import ResponseMatrix

    root = tmp_path_factory.mktemp("crash_folder")
    rm = ResponseMatrix.read(shared_data / "benchpred" / "v2_arc_challenge.csv.gz")
    rm.subset(subjects=list(range(0, rm.n_subjects, 5))[:40]).write(root / "source.csv")
    code, _, err = atlas("build-bank", root / "source.csv", "-o", root / "bank", "-q")
    assert code == 0, err
    return root / "bank"


@pytest.mark.slow
@pytest.mark.parametrize("design", ["predictor", "adaptive", "adaptive+wle"])
def test_sigkilled_run_on_a_matrix_folder_resumes_as_uninterrupted(matrix_folder, tmp_path,
                                                                   design):
    """cmd: on a bank folder built from a matrix (asked by item id), the folder's predictor
    and its adaptive test (also with Warm's estimator: the stored config carries it): killed
    while the command holds back its 9th answer."""
    import time

    judge = tmp_path / "judge.py"
    judge.write_text(JUDGE.format(kill_at=KILL_AT))
    open_gate = tmp_path / "open"
    open_gate.write_text("")

    def common(gate):
        how = (["--design", "adaptive", "--estimator", "wle"] if design == "adaptive+wle"
               else ["--design", design])
        return ["--bank", matrix_folder, *how, "--llm", "judge", "--seed", 5,
                "--max-items", 40, "-q", "--subject", f"cmd:{sys.executable} {judge} {gate}"]

    code, _, err = atlas("evaluate", *common(open_gate), "-o", tmp_path / "ref")
    assert code == 0, err
    ref = results(tmp_path / "ref")
    assert ref["status"] == "done" and ref["n_items"] > KILL_AT
    gate, out = tmp_path / "gate", tmp_path / "killed"
    proc = atlas("evaluate", *common(gate), "-o", out, wait=False)
    waiting = Path(str(gate) + ".waiting")
    deadline = time.monotonic() + 120
    while not waiting.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert waiting.exists(), proc.communicate()
    proc.kill()
    proc.communicate(timeout=HANG_S)
    assert proc.returncode == -signal.SIGKILL
    row = check_partial(out / "runs.sqlite", 1)
    gate.write_text("")                  # the resumed run's command answers at once
    code, _, err = atlas("evaluate", "--resume", row["run_id"], "--db", out / "runs.sqlite", "-q")
    assert code == 0, err
    res = results(out)
    check_same(ref, res, out)
    asked = Path(str(gate) + ".asked").read_text().split()
    assert sorted(asked) == sorted(res["items"])   # every item answered once, none twice


@pytest.mark.slow
def test_second_ctrl_c_abandons_the_items_in_flight_of_several_models(tmp_path):
    """Two models asked at once, their server hanging: a first Ctrl-C asks to stop after the
    items in flight, a second one leaves at once (the process used to wait for every reply),
    both runs interrupted with their items pending, and the --resume command printed."""
    import sqlite3
    import time

    from atlascat.live.mockserver import MockOpenAIServer
    from atlascat.live.toylm import ToyLM

    out = tmp_path / "two"
    with MockOpenAIServer(lm=ToyLM(), hang_s=600, fault=lambda n, i, t: "hang") as srv:
        proc = atlas("evaluate", "--bank", "arc", "--subject", f"completions:{srv.url}",
                     "--llm", "a", "--llm", "b", "--timeout", 900, "-o", out, "-q", wait=False)
        deadline, pending = time.monotonic() + 120, 0
        while pending < 2 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
            try:
                with sqlite3.connect(f"file:{out / 'runs.sqlite'}?mode=ro", uri=True) as con:
                    pending = con.execute("SELECT COUNT(*) FROM steps WHERE "
                                          "status='pending'").fetchone()[0]
            except sqlite3.Error:
                pending = 0
        assert pending == 2, proc.communicate()
        while len(srv.log) < 2 and time.monotonic() < deadline:   # both requests arrived
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        time.sleep(1)
        proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=120)   # the server holds the replies for 600 s
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise
    assert proc.returncode == 130, err
    assert "Resume with: atlas evaluate --resume" in err
    rows = json.loads(atlas("runs", "--db", out / "runs.sqlite", "--json")[1])
    assert [(r["state"], r["n_items"], r["pending"]) for r in rows] == [("interrupted", 0, 1)] * 2


def test_ctrl_c_in_python_stops_every_run_of_several_models(tmp_path):
    """LiveRun.run() of several models interrupted (Ctrl-C in a notebook): the
    KeyboardInterrupt is raised at once, and each run stops after its round in flight, its
    answers saved, marked interrupted; runs went on to their end in the background (or, before,
    the interrupt waited for them)."""
    import _thread
    import time

    from atlascat.catalogue import BankRef
    from atlascat.cat.config import CATConfig
    from atlascat.live.service import LiveRun
    from atlascat.live.store import RunStore
    from atlascat.live.subjects import CallableSubject, SimulatedSubject

    bank = BankRef.from_option("arc").load()
    sim = SimulatedSubject(bank, 0.5, seed=7)
    held, asked = threading.Event(), []

    def fn(item, prompt):
        asked.append(item["item_id"])
        if len(asked) >= 4:              # the fourth question on: held until released
            held.wait(120)
        return sim.ask(prompt, item).text

    db = tmp_path / "two.sqlite"
    live = LiveRun.start(db, bank, [CallableSubject(fn, name=m) for m in ("a", "b")],
                         config=CATConfig(se_stop=0.1, min_items=30, max_items=60))

    def interrupt():
        deadline = time.monotonic() + 120
        while len(asked) < 5 and time.monotonic() < deadline:   # both runs wait on a reply
            time.sleep(0.05)
        _thread.interrupt_main()

    threading.Thread(target=interrupt, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        live.run()
    held.set()                           # the replies in flight come; the runs stop there
    store, deadline = RunStore(db), time.monotonic() + 120
    while time.monotonic() < deadline and set(store.list_runs()["state"]) != {"interrupted"}:
        time.sleep(0.1)
    runs = store.list_runs()
    store.close()
    live.close()                         # the store it opened (the runs have stopped)
    assert set(runs["state"]) == {"interrupted"}, runs[["state", "n_items"]]
    assert runs["n_items"].max() < 30 and runs["pending"].sum() == 0
