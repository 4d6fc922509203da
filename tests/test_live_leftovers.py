"""Live runs as a demanding user meets them: a server that refuses one item's request (HTTP 400:
the prompt is longer than its context), a `cmd:` program whose atlas is killed, Ctrl-C at once,
a server that answers 200 with an error body.

Waits are generous (a busy machine makes them slow, not wrong); signals are sent once the
process has shown the state the test needs, never on a timer."""
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
from cli_checks import atlas_process as atlas, wait_for

ROOT = Path(__file__).resolve().parents[1]


def one_item_refused():
    """A fault hook refusing (HTTP 400) every request for the first item asked after the
    second request, and only that item; ``bad["id"]`` names it."""
    bad: dict = {}

    def fault(n, item, times):
        if item is None:
            return None
        if not bad and n >= 3:
            bad["id"] = item
        return "400" if bad.get("id") == item else None
    return fault, bad


ARGS = ("evaluate", "--bank", "arc", "--llm", "toylm", "--min-items", "8", "--max-items", "10")


# ---------------------------------------------------------------- 1. an item the server refuses
def test_an_item_the_server_refuses_is_left_out_and_the_run_finishes(tmp_path):
    """The server refuses one item (HTTP 400, its prompt past the model's context): asking it
    again gets the same, so the run stopped there and every --resume hit it again. The item is
    left out unscored with the server's message, the test picks another, the run finishes and
    says how many it left out and why; the client keeps sending lists of prompts (a refused
    prompt says nothing of lists)."""
    from atlascat.catalogue import load_content_bank
    from atlascat.live.mockserver import MockOpenAIServer

    fault, bad = one_item_refused()
    db = tmp_path / "runs.sqlite"
    with MockOpenAIServer(load_content_bank("arc"), fault=fault) as srv:
        code, out, err = atlas(*ARGS, "--subject", f"completions:{srv.url}", "--db", db,
                               "--json")
        assert code == 0, err
        res = json.loads(out)[0]
        assert res["status"] == "done" and res["n_items"] == 10
        assert res["n_refused"] == 1 and res["n_skipped"] == 1
        assert "maximum context length" in res["refused"] and res["refused"].startswith("HTTP 400")
        assert bad["id"] not in res["items"]
        refused = [e for e in srv.log if e["item_id"] == bad["id"]]
        assert refused and all(e["status"] == 400 for e in refused)
        late = [e for e in srv.log if e["n"] > refused[-1]["n"]]
        assert any(isinstance(e["body"].get("prompt"), list) for e in late)
        # the human summary says it, in one line
        code, out, err = atlas(*ARGS, "--subject", f"completions:{srv.url}", "--db",
                               tmp_path / "b.sqlite", "--no-cache")
        assert code == 0, err
        assert "left out: 1 item the server refused (HTTP 400: This model's maximum context" \
            in out
    from atlascat.live.store import RunStore

    steps = RunStore(db).steps(res["run_id"])
    row = steps[steps["item_id"] == bad["id"]].iloc[0]
    assert row["status"] == "skipped" and "maximum context length" in row["answer"]
    # never cached: a later run asks it again (and is refused again)
    assert RunStore(db)._con().execute("SELECT COUNT(*) FROM cache WHERE item_id=?",
                                       (bad["id"],)).fetchone()[0] == 0


def test_max_items_counts_scored_items_and_the_summary_says_how_many_were_asked(tmp_path):
    """--batch-size 3 --max-items 12, one item refused: 13 items are asked (4 rounds of 3, one
    refused, then one more), 12 scored. --max-items caps the test's length, the items scored
    (as ``atlas simulate`` and a resumed run count them; a refused request carries no answer,
    and --token-budget bounds the spend), and the summary says both numbers: it read "12
    items", hiding the 13th request."""
    from atlascat.catalogue import load_content_bank
    from atlascat.live.mockserver import MockOpenAIServer
    from atlascat.live.store import RunStore

    fault, bad = one_item_refused()
    db = tmp_path / "runs.sqlite"
    with MockOpenAIServer(load_content_bank("arc"), fault=fault) as srv:
        code, out, err = atlas("evaluate", "--bank", "arc", "--llm", "toylm", "--batch-size",
                               "3", "--max-items", "12", "--subject", f"completions:{srv.url}",
                               "--db", db)
    assert code == 0, err
    store = RunStore(db)
    steps = store.steps(store.list_runs()["run_id"].iloc[0])
    assert len(steps) == 13 and (steps["status"] == "skipped").sum() == 1
    assert bad["id"] in set(steps["item_id"])
    assert "(12 items scored, 13 asked, rounds of 3)" in out, out
    assert "not counted in the test's length" in out
    code, out, _ = atlas("evaluate", "--help")
    assert "Most items scored" in " ".join(out.split())

def test_a_server_refusing_every_item_stops_the_run_in_one_line(tmp_path):
    """Every request refused (HTTP 400: a setting the server rejects): not an item's fault, so
    the run stops after a few, saved, in one line with the server's message."""
    from atlascat.catalogue import load_content_bank
    from atlascat.live.mockserver import MockOpenAIServer
    from atlascat.live.refusals import REFUSED_IN_A_ROW

    with MockOpenAIServer(load_content_bank("arc"),
                          fault=lambda n, item, times: "400") as srv:
        code, out, err = atlas(*ARGS, "--subject", f"completions:{srv.url}", "--db",
                               tmp_path / "runs.sqlite")
    assert code == 2, err
    assert "Traceback" not in err
    assert f"refused the last {REFUSED_IN_A_ROW} items asked" in err
    assert "maximum context length" in err and "--resume" in err


def test_a_wrong_model_name_still_stops_at_once(tmp_path):
    """HTTP 404 (a model the server does not serve) is the run's fault, not an item's: the run
    stops on the first item, in one line, nothing left out."""
    from atlascat.catalogue import load_content_bank
    from atlascat.live.mockserver import MockOpenAIServer

    db = tmp_path / "runs.sqlite"
    with MockOpenAIServer(load_content_bank("arc"),
                          fault=lambda n, item, times: "404") as srv:
        code, out, err = atlas(*ARGS, "--subject", f"completions:{srv.url}", "--db", db)
        asked = {e["item_id"] for e in srv.log}
    assert code == 2, err
    assert "Traceback" not in err and "HTTP 404" in err and "does not exist" in err
    assert len(asked) == 1
    from atlascat.live.store import RunStore

    assert not (RunStore(db).steps(RunStore(db).list_runs()["run_id"][0])["status"]
                == "skipped").any()


# ---------------------------------------------------------------- 2. a cmd: program, atlas killed
HARNESS = '''\
import json, os, subprocess, sys, time
helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(900)"])
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(f"{os.getpid()} {helper.pid}")
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
for line in sys.stdin:
    time.sleep(float(sys.argv[2]))          # a slow judge
    print(json.dumps({"item_id": json.loads(line)["item_id"], "score": 1}), flush=True)
'''


@pytest.fixture(scope="module")
def matrix_folder(tmp_path_factory):
    """A bank folder built from a response matrix (asked by item id) and the harness."""
    import numpy as np
    import pandas as pd

    from atlascat.bankdir import build_bank

    rng = np.random.default_rng(5)
    a, b = rng.lognormal(0, 0.3, 60), rng.normal(0, 1, 60)
    theta = rng.normal(0, 1, 30)
    y = (rng.random((30, 60)) < 1 / (1 + np.exp(-a * (theta[:, None] - b)))).astype(int)
    root = tmp_path_factory.mktemp("guard")
    pd.DataFrame(y, index=[f"src{i}" for i in range(30)],
                 columns=[f"q{j}" for j in range(60)]).rename_axis("model").to_csv(
        root / "judged.csv")
    (root / "harness.py").write_text(HARNESS)
    with pytest.warns(UserWarning):
        build_bank(root / "judged.csv", root / "bank", folds=0)
    return root


def _alive(pid: int) -> bool:
    """A process that runs (a zombie, killed and not yet reaped, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _start_with_harness(root: Path, tmp_path: Path, item_s: float):
    pids = tmp_path / "pids"
    cmd = f"cmd:{sys.executable} {root / 'harness.py'} {pids} {item_s}"
    proc = subprocess.Popen([sys.executable, "-m", "atlascat", "evaluate", "--bank",
                             root / "bank", "--subject", cmd, "--llm", "judge", "--max-items",
                             "40", "--db", tmp_path / "runs.sqlite", "-q"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(pids.exists, "the harness to start")
    child, helper = map(int, pids.read_text().split())
    return proc, child, helper


linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


@linux
def test_a_cmd_program_dies_with_atlas_killed(matrix_folder, tmp_path):
    """`kill -9` of atlas while its `cmd:` program judges an item: the program, and what it
    started, end too (they kept running, orphaned, holding what they held: a GPU, a port)."""
    proc, child, helper = _start_with_harness(matrix_folder, tmp_path, 900)
    try:
        assert _alive(child) and _alive(helper)
        proc.kill()
        proc.communicate(timeout=HANG_S)
        wait_for(lambda: not _alive(child) and not _alive(helper),
                 "the program to end with atlas", limit=120)
    finally:
        for pid in (child, helper):
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


@linux
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stopped_run_still_ends_its_cmd_program_cleanly(matrix_folder, tmp_path, signum):
    """SIGTERM / Ctrl-C: the item in flight finishes, the run is interrupted (exit 130, one
    line), and the program ends with it (its standard input closed), what it started too."""
    proc, child, helper = _start_with_harness(matrix_folder, tmp_path, 0.2)
    try:
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=HANG_S)
        assert proc.returncode == 130, err
        assert "Traceback" not in err and "--resume" in err
        wait_for(lambda: not _alive(child) and not _alive(helper), "the program to end",
                 limit=120)
    finally:
        for pid in (child, helper):
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


# ---------------------------------------------------------------- 3. Ctrl-C while atlas starts
STALL = '''\
import os, sys, time

class _Stall:
    """Holds the import of one module (the one named by ATLAS_TEST_STALL) until a signal comes."""
    def find_spec(self, name, path=None, target=None):
        if name == os.environ.get("ATLAS_TEST_STALL"):
            open(os.environ["ATLAS_TEST_MARK"], "w").close()
            time.sleep(600)
        return None

sys.meta_path.insert(0, _Stall())
'''


@pytest.mark.parametrize("route", ["atlas", "-m"])
@pytest.mark.parametrize("module", ["typer", "atlascat.cli.cmd_evaluate",
                                    "atlascat.live.service"])
def test_ctrl_c_while_atlas_starts_is_one_line(tmp_path, route, module):
    """Ctrl-C while `atlas evaluate` imports its modules (the command line's, the command's,
    the live service's) or reads its options: one line, exit status 130, nothing written
    (it printed a traceback of the import it cut). The signal is sent once the process is
    held in that import (a stalled import), the `atlas` script and `python -m atlascat`."""
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(STALL)
    script = tmp_path / "bin" / "atlas"   # what pip writes for the console script
    script.parent.mkdir()
    script.write_text("import sys\nfrom atlascat.cli import main\nsys.exit(main())\n")
    mark, db = tmp_path / "held", tmp_path / "runs.sqlite"
    env = {**os.environ, "ATLAS_TEST_STALL": module, "ATLAS_TEST_MARK": str(mark),
           "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), str(ROOT / "src"),
                                          os.environ.get("PYTHONPATH", "")])}
    head = [sys.executable, str(script)] if route == "atlas" else [sys.executable, "-m",
                                                                   "atlascat"]
    proc = subprocess.Popen([*head, "evaluate", "--bank", "arc", "--subject", "simulate:0.5",
                             "--llm", "m", "--db", db], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(mark.exists, f"atlas to import {module}")
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=HANG_S)
    assert proc.returncode == 130, err
    assert err == "interrupted\n" and out == ""
    assert not db.exists() and not any(tmp_path.glob("runs*"))


# ---------------------------------------------------------------- 4. HTTP 200 with an error body
def test_a_200_reply_whose_body_is_an_error_says_the_servers_words(tmp_path):
    """A proxy answers 200 with `{"error": {"message": ...}}`: retried as a failed attempt
    and, once the retries are spent, one line with the server's message (it read "malformed
    response (KeyError: 'choices')")."""
    from atlascat.catalogue import load_content_bank
    from atlascat.live.mockserver import MockOpenAIServer

    with MockOpenAIServer(load_content_bank("arc"),
                          fault=lambda n, item, times: "error200") as srv:
        code, out, err = atlas(*ARGS, "--subject", f"completions:{srv.url}", "--db",
                               tmp_path / "runs.sqlite", "--max-retries", "1", "--backoff",
                               "0")
    assert code == 2, err
    assert "Traceback" not in err and "KeyError" not in err
    assert "last: HTTP 200 whose body is an error: 'upstream overloaded'" in err


def test_an_item_refused_in_a_200_body_is_left_out(tmp_path):
    """The same refusal as HTTP 400 (a prompt past the context), sent as 200 with the error's
    `code` 400 in its body: the item is left out with the message, not retried."""
    from atlascat.catalogue import load_content_bank
    from atlascat.live.mockserver import MockOpenAIServer

    fault, bad = one_item_refused()
    with MockOpenAIServer(load_content_bank("arc"),
                          fault=lambda *a: fault(*a) and "error200-400") as srv:
        code, out, err = atlas(*ARGS, "--subject", f"completions:{srv.url}", "--db",
                               tmp_path / "runs.sqlite", "--json")
        asked = [e for e in srv.log if e["item_id"] == bad["id"]]
    assert code == 0, err
    res = json.loads(out)[0]
    assert res["n_refused"] == 1 and "maximum context length" in res["refused"]
    assert bad["id"] not in res["items"] and len(asked) <= 2   # a list, then alone: no retry


def test_a_refused_item_stops_a_bank_folders_predictor_in_one_line(mc2_folder, tmp_path):
    """A bank folder's benchmark predictor needs the score of every item it draws: a refused
    item stops the run in one line that names the item, the server's words and the way out
    (--design adaptive leaves it out); the run is saved."""
    from atlascat.live.mockserver import MockOpenAIServer

    with MockOpenAIServer(fault=lambda n, item, times: "400" if n >= 3 else None) as srv:
        code, out, err = atlas("evaluate", "--bank", mc2_folder / "bank", "--subject",
                               f"completions:{srv.url}", "--llm", "toylm", "--max-items", "8",
                               "--db", tmp_path / "runs.sqlite")
        assert code == 2, err
        assert "Traceback" not in err and "the server refused item" in err
        assert "maximum context length" in err and "--design adaptive" in err
        assert "--resume" in err
        # the adaptive test on the same folder leaves refused items out... until every
        # request is refused: then it stops, saying so
        code, out, err = atlas("evaluate", "--bank", mc2_folder / "bank", "--subject",
                               f"completions:{srv.url}", "--llm", "toylm", "--design",
                               "adaptive", "--max-items", "8", "--db", tmp_path / "b.sqlite")
    assert code == 2, err
    assert "refused the last 5 items asked" in err
