"""Follow-ups of the live walks: a server that refuses every other item, the number of items
asked in results.json, a run store's connection left open, the hf extra's transformers floor.

Waits are generous (a busy machine makes them slow, not wrong)."""
from __future__ import annotations

import json
from contextlib import closing

from cli_checks import atlas_process as atlas


def every_other_item_refused():
    """A fault hook refusing (HTTP 400) every second item the server is first asked, while
    ``state["on"]``; ``state["refused"]`` holds the items it refused."""
    state: dict = {"on": True, "seen": [], "refused": set()}

    def fault(n, item, times):
        if item is None or not state["on"]:
            return None
        if item not in state["seen"]:
            state["seen"].append(item)
            if len(state["seen"]) % 2 == 0:
                state["refused"].add(item)
        return "400" if item in state["refused"] else None
    return fault, state


ARGS = ("evaluate", "--bank", "arc", "--llm", "toylm", "--min-items", "30", "--max-items", "30")


def test_a_server_refusing_every_other_item_stops_the_run_and_it_resumes(tmp_path):
    """Refusals alternating with scored items never made 5 in a row, so a server refusing every
    other item had the run ask twice its length (or the whole bank). More than 20% of the items
    asked (and more than 5) refused stop it in one line naming the count and the server's
    message; the run is saved, and --resume continues it once the server takes the items."""
    from atlascat.catalogue import load_content_bank
    from atlascat.live.mockserver import MockOpenAIServer
    from atlascat.live.refusals import REFUSED_IN_A_ROW

    fault, state = every_other_item_refused()
    db, out_dir = tmp_path / "runs.sqlite", tmp_path / "out"
    with MockOpenAIServer(load_content_bank("arc"), fault=fault) as srv:
        subject = f"completions:{srv.url}"
        code, out, err = atlas(*ARGS, "--subject", subject, "--db", db, "-o", out_dir)
        assert code == 2, (out, err)
        assert "Traceback" not in err
        n = REFUSED_IN_A_ROW + 1
        assert f"the server refused {n} of the" in err and "(more than 20%)" in err, err
        assert "maximum context length" in err and "--resume" in err
        asked = {e["item_id"] for e in srv.log if e["item_id"] is not None}
        assert len(asked) <= 2 * n + 1 < 30, len(asked)
        # saved and resumable: the server takes every item now, the run finishes
        code, out, err = atlas("runs", "--db", db, "--json")
        assert code == 0, err
        run = json.loads(out)[0]
        state["on"] = False
        code, out, err = atlas("evaluate", "--resume", run["run_id"], "--db", db, "--json")
        assert code == 0, err
    res = json.loads(out)[0]
    assert res["status"] == "done" and res["n_items"] == 30
    # the refused items of the saved rounds stay left out; the items asked count them
    assert res["n_refused"] >= 1 and res["n_asked"] == res["n_items"] + res["n_skipped"]
    assert res["n_asked"] == 30 + res["n_refused"]
    rows = json.loads((out_dir / "results.json").read_text())
    assert rows[0]["n_asked"] == res["n_asked"] and rows[0]["n_refused"] == res["n_refused"]
    code, out, err = atlas("runs", "--db", db, "--json")
    assert json.loads(out)[0]["n_asked"] == res["n_asked"]


def test_a_run_with_a_refused_item_says_how_many_were_asked(tmp_path):
    """results.json (and evaluate --json) gave n_items and n_refused but not the items asked:
    n_asked is the items scored and not, the same in `atlas runs --json` and the run's page."""
    from atlascat.catalogue import load_content_bank
    from atlascat.live.mockserver import MockOpenAIServer
    from atlascat.live.report import render_run_report
    from atlascat.live.store import RunStore

    first: dict = {}

    def fault(n, item, times):   # the first item asked after the second request: refused
        if item is not None and not first and n >= 3:
            first["id"] = item
        return "400" if item is not None and first.get("id") == item else None

    db, out_dir = tmp_path / "runs.sqlite", tmp_path / "out"
    with MockOpenAIServer(load_content_bank("arc"), fault=fault) as srv:
        code, out, err = atlas("evaluate", "--bank", "arc", "--llm", "toylm", "--min-items",
                               "8", "--max-items", "10", "--subject", f"completions:{srv.url}",
                               "--db", db, "-o", out_dir, "--json")
    assert code == 0, err
    res = json.loads(out)[0]
    assert (res["n_items"], res["n_refused"], res["n_asked"]) == (10, 1, 11)
    row = json.loads((out_dir / "results.json").read_text())[0]
    assert (row["n_items"], row["n_refused"], row["n_asked"]) == (10, 1, 11)
    code, out, err = atlas("runs", "--db", db, "--json")
    assert json.loads(out)[0]["n_asked"] == 11
    with closing(RunStore(db)) as store:
        page = render_run_report(store, res["run_id"])
    assert "items asked" in page and "11 (scored and not)" in page


class _Opened:
    """Every sqlite3 connection opened while on (Python 3.13 warns of one left unclosed,
    ``ResourceWarning: unclosed database``; 3.11 does not, so each is also checked by hand)."""

    def __init__(self, monkeypatch):
        import sqlite3

        self.cons, real = [], sqlite3.connect

        def connect(*args, **kwargs):
            con = real(*args, **kwargs)
            self.cons.append(con)
            return con
        monkeypatch.setattr(sqlite3, "connect", connect)

    def left_open(self) -> int:
        import sqlite3

        n = 0
        for con in self.cons:
            try:
                con.total_changes
                n += 1
            except sqlite3.ProgrammingError:   # closed
                pass
        return n


def no_resource_warning(run) -> None:
    import gc
    import warnings

    gc.collect()   # what earlier tests left to the collector is not this test's subject
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always", ResourceWarning)
        run()
        gc.collect()
    leaks = [str(w.message) for w in got if issubclass(w.category, ResourceWarning)]
    assert not leaks, leaks


def test_atlas_evaluate_in_process_leaves_no_connection_open(tmp_path, monkeypatch):
    """`atlas evaluate` left its run store's connection open at exit (Python 3.13,
    -W error::ResourceWarning: "unclosed database"); a new run and its --resume close it."""
    from typer.testing import CliRunner

    from atlascat.cli import app

    opened = _Opened(monkeypatch)
    db = tmp_path / "runs.sqlite"

    def run():
        r = CliRunner().invoke(app, ["evaluate", "--bank", "arc", "--subject", "simulate:0.5",
                                     "--max-items", "5", "--min-items", "5", "--db", str(db),
                                     "-o", str(tmp_path / "out"), "--json"])
        assert r.exit_code == 0, r.output
        rid = json.loads(r.stdout)[0]["run_id"]
        r = CliRunner().invoke(app, ["evaluate", "--resume", rid, "--db", str(db)])
        assert r.exit_code == 0, r.output
    no_resource_warning(run)
    assert opened.cons and opened.left_open() == 0


def test_live_runs_in_threads_leave_no_connection_open(tmp_path, monkeypatch):
    """Several models asked at once (one thread each): each thread's connection is closed by
    LiveRun.close (and `with LiveRun.start(...)`), also one reopened to read the results."""
    from atlascat.catalogue import load_content_bank
    from atlascat.live import LiveRun, RunResult, RunStore, SimulatedSubject

    bank = load_content_bank("arc")
    opened = _Opened(monkeypatch)

    def run():
        subjects = [SimulatedSubject(bank, th, seed=1, name=f"m{th}") for th in (-0.5, 1.0)]
        with LiveRun.start(tmp_path / "many.sqlite", bank, subjects, seed=1) as live:
            results = live.run()
            assert [r.status for r in results] == ["done", "done"]
            assert len(live.results()) == 2
        assert RunResult.from_store(tmp_path / "many.sqlite", results[0].run_id).n_items
        with RunStore(tmp_path / "many.sqlite") as store:
            assert len(store.list_runs()) == 2
    no_resource_warning(run)
    assert len(opened.cons) >= 3 and opened.left_open() == 0


def test_atlas_runs_and_compare_models_close_their_stores(tmp_path, monkeypatch):
    """`atlas runs` (a list, one run's steps and page) and `atlas compare-models` opened their
    run stores and left them to the collector (Python 3.13: "unclosed database"); each closes
    every connection it opened."""
    from typer.testing import CliRunner

    from atlascat.cli import app

    monkeypatch.setenv("ATLAS_HOME", str(tmp_path / "home"))
    db = tmp_path / "runs.sqlite"
    ids = []
    for theta in ("0.5", "-0.5"):
        r = CliRunner().invoke(app, ["evaluate", "--bank", "arc", "--subject",
                                     f"simulate:{theta}", "--max-items", "5", "--min-items", "5",
                                     "--db", str(db), "--json"])
        assert r.exit_code == 0, r.output
        ids.append(json.loads(r.stdout)[0]["run_id"])
    opened = _Opened(monkeypatch)

    def run():
        for argv in (["runs", "--db", str(db)], ["runs", "--db", str(db), "--json"], ["runs"],
                     ["runs", "--db", str(db), "--run", ids[0], "-o",
                      str(tmp_path / "page.html")],
                     ["compare-models", ids[0], ids[1], "--db", str(db)],
                     ["compare-models", ids[0], ids[1], "--json"]):
            r = CliRunner().invoke(app, argv)
            assert r.exit_code == 0, (argv, r.output)
    no_resource_warning(run)
    assert opened.cons and opened.left_open() == 0


def test_evaluate_and_resume_close_the_store_and_subject_they_opened(tmp_path, monkeypatch):
    """`live.evaluate` / `live.resume` (the Python API) left their LiveRun open: the run
    store's connection, and the HTTP client (its socket) of the subject `resume` builds from
    the run's description, were left to the collector (`unclosed <socket.socket ...>`)."""
    from atlascat.catalogue import load_content_bank
    from atlascat.errors import RunStoppedError
    from atlascat.live import evaluate, resume
    from atlascat.live.mockserver import MockOpenAIServer
    from atlascat.live.subjects import OpenAICompatible
    from atlascat.cat.config import CATConfig

    bank = load_content_bank("arc")
    opened = _Opened(monkeypatch)
    down = {"on": False}
    db = tmp_path / "api.sqlite"
    config = CATConfig(min_items=4, max_items=4)
    with MockOpenAIServer(bank, 0.5, fault=lambda n, i, t: "500" if down["on"] else None) as srv:
        def run():
            subject = OpenAICompatible(srv.url, "m", max_retries=0, api_key_env=None)
            down["on"] = True
            try:
                evaluate(bank, subject, store=db, config=config, bank_ref="shipped:arc")
            except RunStoppedError as exc:
                rid = exc.run_id
            assert subject._client is None      # closed (a later ask opens it again)
            down["on"] = False
            assert resume(db, rid).status == "done"
        no_resource_warning(run)
    assert opened.cons and opened.left_open() == 0


def test_a_mock_server_never_started_stops_at_once():
    """Its listening socket is bound when made: stop() closes it, and no longer waits
    forever for a serving loop that never ran."""
    import threading

    from atlascat.live.mockserver import MockOpenAIServer

    srv = MockOpenAIServer(None)
    done = threading.Thread(target=srv.stop, daemon=True)
    done.start()
    done.join(10)
    assert not done.is_alive() and srv._server.socket.fileno() == -1


def test_a_list_of_prompts_rate_limited_keeps_lists():
    """A list of prompts answered 429 until its retries were spent was asked again one prompt
    at a time, and when those were answered the client concluded the server takes no lists:
    a rate-limited run asked one prompt per request to its end (more requests, more 429s)."""
    from atlascat.content.requests import Request
    from atlascat.live.mockserver import MockOpenAIServer
    from atlascat.live.subjects import OpenAICompletionsSubject

    reqs = [Request("loglikelihood", f"Question {k}?\nAnswer:", " yes") for k in range(4)]
    with MockOpenAIServer(None, fault=lambda n, i, t: "429" if n <= 2 else None) as srv, \
            OpenAICompletionsSubject(srv.url, "toy", max_retries=1, backoff=0) as subj:
        first = subj.loglikelihood(reqs)
        n = len(srv.log)
        assert subj.loglikelihood(reqs) == first
    assert [len(e["body"]["prompt"]) if isinstance(e["body"]["prompt"], list) else 1
            for e in srv.log[n:]] == [4]   # one request, a list again


def test_a_cmd_subject_closes_its_programs_pipes():
    """A `cmd:` program's standard output and error were read to their end and left open to
    the collector (`unclosed file <_io.TextIOWrapper ...>`), each time the program started."""
    import shlex
    import sys
    import threading

    from atlascat.live.subjects.itemscored import CommandSubject

    judge = ("import json, sys\n"
             "for line in sys.stdin:\n"
             "    print(json.dumps({'item_id': json.loads(line)['item_id'], 'score': 1}),"
             " flush=True)\n")

    def run():
        subj = CommandSubject(shlex.join([sys.executable, "-c", judge]))
        for _ in range(2):              # started, ended by close, started again
            assert [s for s, _ in subj.score_items(["a", "b"])] == [1, 1]
            pumps = list(subj._pumps)
            subj.close()
            for t in pumps:             # the readers reach the end of the pipes
                t.join(10)
        assert not any(t.is_alive() for t in threading.enumerate()
                       if t.name == "atlas-cmd-io")
    no_resource_warning(run)
