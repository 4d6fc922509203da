"""A robustness walk of live runs as a demanding user does it: `atlas evaluate` against a local
OpenAI-compatible server that misbehaves on demand (the mock server's fault hook), stopped with
Ctrl-C while the server is down, on a run store it may only read, and resumed.

Waits are generous (a busy CI machine makes them slow, not wrong); every signal is sent once
the server has shown the state the test needs, never on a timer."""
from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from conftest import HANG_S
from cli_checks import atlas_process as atlas, wait_for

SAME = ("items", "scores", "theta", "se", "n_items", "stop_reason", "status")


def listed(db: Path) -> dict:
    code, out, err = atlas("runs", "--db", db, "--json")
    assert code == 0, err
    rows = json.loads(out)
    assert len(rows) == 1
    return rows[0]


@pytest.mark.slow
def test_ctrl_c_while_the_server_is_down_stops_at_once_as_interrupted(tmp_path):
    """The server answers HTTP 500 from some item on; each retry says so on stderr (the run
    looked stuck: nothing was printed while it waited); Ctrl-C while the client retries: the
    retries stop (they went on through the whole backoff, 31 s by default, and the run ended
    ``error`` with exit status 2), the run is ``interrupted`` with exit status 130, the item
    stays pending, and the resumed run ends as an uninterrupted one."""
    from atlascat.live.mockserver import MockOpenAIServer

    args = ("evaluate", "--bank", "arc", "--llm", "toylm", "--seed", "3", "--min-items", "8",
            "--max-items", "10", "--backoff", "2", "--json")
    down = {"from": 10 ** 9}
    with MockOpenAIServer(fault=lambda n, item, times: "500" if n >= down["from"] else None) \
            as srv:
        url = f"completions:{srv.url}"
        code, out, err = atlas(*args, "--subject", url, "--db", tmp_path / "ref.sqlite")
        assert code == 0, err
        ref = json.loads(out)[0]
        srv.log.clear()            # n counts from 1 again (the hook reads len(log) + 1)
        down["from"] = 5           # a few items answered, then the server fails
        db = tmp_path / "runs.sqlite"
        proc = atlas(*args, "--subject", url, "--db", db, "--no-cache", wait=False)
        wait_for(lambda: any(e.get("status") == 500 for e in list(srv.log)), "a 500")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=HANG_S)
        assert proc.returncode == 130, err
        assert "Traceback" not in err and "--resume" in err
        # the wait was not silent: each retry said what failed and how long it waits
        assert "toylm: HTTP 500: 'internal error'; retrying in 2 s" in err
        row = listed(db)
        assert row["state"] == "interrupted" and row["pending"] == 1 and row["n_items"] >= 1
        down["from"] = 10 ** 9     # the server is back
        code, out, err = atlas("evaluate", "--resume", row["run_id"], "--db", db, "--json")
    assert code == 0, err
    res = json.loads(out)[0]
    assert {k: res[k] for k in SAME} == {k: ref[k] for k in SAME}


def _make_read_only(*paths: Path):
    """Make files and folders read-only for this process: their permissions, or (as root, whom
    permissions do not bind) the immutable attribute; -> a function that undoes it."""
    for p in paths:
        p.chmod(0o555 if p.is_dir() else 0o444)
    if all(not os.access(p, os.W_OK) for p in paths):
        return lambda: [p.chmod(0o755 if p.is_dir() else 0o644) for p in paths]
    try:
        done = subprocess.run(["chattr", "+i", *map(str, paths)], capture_output=True)
    except OSError:
        done = None
    if done is None or done.returncode != 0 or any(os.access(p, os.W_OK) for p in paths):
        pytest.skip("cannot make a file read-only here (root without chattr)")
    return lambda: subprocess.run(["chattr", "-i", *map(str, paths)], check=True)


def test_a_read_only_run_store_is_listed_and_compared_but_not_written(tmp_path):
    """An archived run store on a read-only file or mount: `atlas runs` (and --run, and
    compare-models) read it, where they refused it ("exists and is not writable; choose
    another file": listing writes nothing); a run into it is still refused in one line."""
    folder = tmp_path / "archive"
    db = folder / "runs.sqlite"
    for theta in ("0.5", "-0.5"):
        code, _, err = atlas("evaluate", "--bank", "arc", "--subject", f"simulate:{theta}",
                             "--min-items", "5", "--max-items", "5", "--db", db, "-q")
        assert code == 0, err
    code, out, err = atlas("runs", "--db", db, "--json")
    assert code == 0, err
    before = json.loads(out)
    files = sorted(p.name for p in folder.iterdir())
    undo = _make_read_only(db, folder)
    try:
        code, out, err = atlas("runs", "--db", db, "--json")
        assert code == 0, err
        assert json.loads(out) == before
        code, out, err = atlas("runs", "--db", db)
        assert code == 0 and all(r["run_id"] in out for r in before), err
        code, out, err = atlas("runs", "--db", db, "--run", before[0]["run_id"], "--json")
        assert code == 0 and len(json.loads(out)["steps"]) == 5, err
        code, out, err = atlas("compare-models", before[0]["run_id"], before[1]["run_id"],
                               "--db", db)
        assert code == 0, err
        code, _, err = atlas("evaluate", "--bank", "arc", "--subject", "simulate:0.5",
                             "--max-items", "5", "--db", db, "-q")
        assert code == 2 and err.count("\n") == 1 and "writable" in err, err
        assert sorted(p.name for p in folder.iterdir()) == files    # nothing written
    finally:
        undo()


def test_a_reply_cut_at_max_tokens_before_any_answer_is_not_scored_wrong(tmp_path):
    """A chat model that spends its whole --max-tokens thinking (a reasoning model) returns
    empty content with finish_reason 'length': that was scored wrong without a word (a
    sporadic one moved theta and nothing said so). It stops the run in one line naming
    --max-tokens, the answers before it kept; an empty reply the model ended itself
    (finish_reason 'stop') stays the model's answer."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from atlascat import CATConfig
    from atlascat.errors import LiveRunError
    from atlascat.live import load_content_bank, service
    from atlascat.live.mockserver import MockOpenAIServer
    from atlascat.live.store import RunStore
    from atlascat.live.subjects import OpenAICompatible

    bank = load_content_bank("arc")
    mock = MockOpenAIServer(bank, 0.5, seed=7)   # its question -> item map and answers
    mock.stop()   # never served: its listening socket was left to the collector
    asked = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            asked.append(mock.identify(body["messages"][-1]["content"]))
            answer, why = mock.reply(asked[-1], few_shot=False), "stop"
            if len(asked) == 4:
                answer, why = "", finish
            payload = json.dumps({"choices": [{"index": 0, "finish_reason": why, "message": {
                "role": "assistant", "content": answer}}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    config = CATConfig(se_stop=0.3, min_items=8, max_items=10)
    try:
        finish = "length"
        db = tmp_path / "cut.sqlite"
        with pytest.raises(LiveRunError, match="used all 16 tokens .* larger --max-tokens") \
                as err:
            service.evaluate(bank, OpenAICompatible(url, "m", max_retries=0), store=db,
                             config=config, seed=1)
        assert "\n" not in str(err.value)
        run = RunStore(db).list_runs().iloc[0]
        assert run["state"] == "error" and run["n_items"] == 3 and run["pending"] == 1
        asked.clear()
        finish = "stop"                  # the model ended its reply itself: a wrong answer
        res = service.evaluate(bank, OpenAICompatible(url, "m", max_retries=0),
                               store=tmp_path / "stop.sqlite", config=config, seed=1)
        assert res.status == "done" and res.scores[3] == 0
    finally:
        server.shutdown()
        server.server_close()


def test_a_request_that_times_out_names_the_timeout_option(tmp_path):
    """A server slower than --timeout: the run stops after its retries with the reason and,
    now, the option that fixes it (it said only "timed out after 1 s (whole request)")."""
    from atlascat import CATConfig
    from atlascat.errors import LiveRunError
    from atlascat.live import load_content_bank, service
    from atlascat.live.mockserver import MockOpenAIServer
    from atlascat.live.subjects import OpenAICompatible

    bank = load_content_bank("arc")
    with MockOpenAIServer(bank, 0.5, seed=7, hang_s=3.0,
                          fault=lambda n, item, times: "hang" if n >= 3 else None) as srv:
        subject = OpenAICompatible(srv.url, "m", timeout=1.0, max_retries=1, backoff=0)
        with pytest.raises(LiveRunError, match=r"timed out after 1 s .*larger --timeout") as err:
            service.evaluate(bank, subject, store=tmp_path / "t.sqlite", seed=1,
                             config=CATConfig(se_stop=0.3, min_items=8, max_items=10))
    assert "\n" not in str(err.value)


@pytest.mark.slow
def test_the_same_command_after_a_kill_names_the_run_to_resume(tmp_path):
    """`atlas evaluate` SIGKILLed mid-run, then the same command again: a new run starts
    (answered from the answer cache: the same items and scores as an uninterrupted run), and
    now says which stopped run asked the same and how to resume it; `atlas runs` lists the
    killed run as interrupted before and after, and resuming it ends as the uninterrupted
    run. Another seed is another test: no note."""
    from atlascat.live.mockserver import MockOpenAIServer

    hold = {"at": 10 ** 9}
    args = ["evaluate", "--bank", "arc", "--llm", "toylm", "--seed", "3", "--min-items", "8",
            "--max-items", "10", "--json"]
    with MockOpenAIServer(hang_s=600, fault=lambda n, item, times:
                          "hang" if n == hold["at"] else None) as srv:
        args += ["--subject", f"completions:{srv.url}"]
        code, out, err = atlas(*args, "--db", tmp_path / "ref.sqlite")
        assert code == 0, err
        ref = json.loads(out)[0]
        db = tmp_path / "runs.sqlite"
        hold["at"] = len(srv.log) + 6
        proc = atlas(*args, "--db", db, wait=False)
        wait_for(lambda: len(srv.log) >= hold["at"], "the held request")
        proc.kill()
        proc.communicate(timeout=HANG_S)
        killed = listed(db)
        assert killed["state"] == "interrupted" and killed["n_items"] >= 3
        code, out, err = atlas(*args, "--db", db)
        assert code == 0, err
        again = json.loads(out)[0]
        assert {k: again[k] for k in SAME} == {k: ref[k] for k in SAME}
        rid = killed["run_id"]
        assert f"note: run {rid} asked the same (interrupted after {killed['n_items']} items)" \
            in err and f"atlas evaluate --resume {rid} --db {db}" in err
        code, out, _ = atlas("runs", "--db", db, "--json")
        states = {r["run_id"]: r["state"] for r in json.loads(out)}
        assert states == {rid: "interrupted", again["run_id"]: "done"}
        other = [a if a != "3" else "4" for a in args]      # --seed 4: another test
        code, out, err = atlas(*other, "--db", db)
        assert code == 0 and "asked the same" not in err, err
        code, out, err = atlas("evaluate", "--resume", rid, "--db", db, "--json")
    assert code == 0, err
    res = json.loads(out)[0]
    assert {k: res[k] for k in SAME} == {k: ref[k] for k in SAME}


def _write_rows(path: str, k: int, n: int) -> int:
    from atlascat.live.results_file import write_results

    failed = 0
    for j in range(n):
        try:
            write_results(Path(path), [{"run_id": f"r{k}_{j}", "pad": "x" * 4000}])
        except Exception:  # noqa: BLE001 - counted: a writer must never fail
            failed += 1
    return failed


def test_runs_ending_at_once_keep_every_row_of_results_json(tmp_path):
    """Several `atlas evaluate` processes with one -o folder (a model each, started in
    parallel) write its results.json when they end. The writers shared one temporary file and
    read the file while another replaced it: rows were lost and a writer stopped on a missing
    temporary file (6 processes writing 30 rows each kept 20 of 180, 28 writes failed). They
    take turns now, each with its own temporary file."""
    import multiprocessing

    path = tmp_path / "out" / "results.json"
    with multiprocessing.get_context("fork").Pool(4) as pool:
        failed = pool.starmap(_write_rows, [(str(path), k, 25) for k in range(4)])
    assert sum(failed) == 0
    rows = json.loads(path.read_text())
    assert sorted(r["run_id"] for r in rows) == sorted(f"r{k}_{j}" for k in range(4)
                                                       for j in range(25))
    assert [p.name for p in path.parent.iterdir()] == ["results.json"]


@pytest.mark.parametrize("url, base", [
    ("openai:http://127.0.0.1:9/v1/chat/completions", "http://127.0.0.1:9/v1"),
    ("completions:http://127.0.0.1:9/v1/completions/", "http://127.0.0.1:9/v1"),
])
def test_an_endpoint_url_given_as_the_base_url_is_one_line(tmp_path, capsys, url, base):
    """The endpoint's full URL, as servers print it, given to --subject: atlas added the
    endpoint again (".../v1/chat/completions/chat/completions"), a server answered 404 after
    a run was created, and the message blamed the model name. Now one line before anything is
    written, naming the base URL to give."""
    from atlascat.cli import main

    code = main(["evaluate", "--bank", "arc", "--subject", url, "--llm", "m",
                 "-o", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and f"e.g. {base!r}" in err, err
    assert not (tmp_path / "run").exists()
