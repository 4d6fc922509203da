"""The live paths leave nothing open: every SQLite connection a run store opens is closed, and
no ResourceWarning (an unclosed file, socket or process) is raised, in a normal run and when
it fails: a replay run through ``atlas evaluate``, its resume, ``atlas runs``, and the errors
of a start or resume that cannot go on (an unknown run id, a run id taken, a file that is not
a run store).

SQLite itself warns of an unclosed connection only from Python 3.13 on, and only once the
collector takes it: here every connection opened is recorded and checked closed, on any
Python. A failed :meth:`LiveRun.start` / :meth:`LiveRun.resume` or ``atlas evaluate
--resume`` of an unknown run used to leave the store it opened from a path open."""
from __future__ import annotations

import gc
import sqlite3
import sys
import traceback
import warnings
from contextlib import contextmanager

import numpy as np
import pandas as pd
import pytest

from atlascat.cli import main
from atlascat.errors import AtlasError
from atlascat.irt.bank import ItemBank
from atlascat.live import service
from atlascat.live.runner import RunResult
from atlascat.live.store import RunStore
from atlascat.live.subjects import SubjectSpec

IDS = [f"q{j}" for j in range(12)]
pytestmark = pytest.mark.filterwarnings("error::ResourceWarning")


def _is_open(con) -> bool:
    try:
        con.total_changes
    except sqlite3.ProgrammingError as exc:
        return "closed" not in str(exc)
    return True


@contextmanager
def nothing_left_open(monkeypatch):
    """Run the block with ResourceWarning an error, record every ``sqlite3.connect``; after it
    (and a collection) fail naming each connection still open (where it was opened) and each
    warning raised where it could not propagate (a finaliser: ``sys.unraisablehook``)."""
    opened = []
    connect = sqlite3.connect

    def recorded(*args, **kwargs):
        con = connect(*args, **kwargs)
        opened.append((con, traceback.extract_stack(limit=12)[:-1]))
        return con

    monkeypatch.setattr(sqlite3, "connect", recorded)
    unraisable, hook = [], sys.unraisablehook
    sys.unraisablehook = lambda u: unraisable.append(f"{u.exc_type.__name__}: {u.exc_value}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", ResourceWarning)
            yield
            gc.collect()
    finally:
        sys.unraisablehook = hook
    left = [where for con, where in opened if _is_open(con)]
    for con, _ in opened:
        con.close()
    assert not left, "connection(s) left open, opened at:\n" + "\n---\n".join(
        "".join(traceback.format_list([f for f in where if "atlascat" in f.filename]))
        for where in left)
    assert not unraisable, unraisable


@pytest.fixture()
def ws(tmp_path):
    """A 12-item bank and 8 models' recorded answers (``replay:resp.csv#MODEL``)."""
    rng = np.random.default_rng(5)
    bank = ItemBank(IDS, rng.uniform(0.8, 2.0, 12), np.linspace(-1.5, 1.5, 12))
    bank.write(tmp_path / "bank.csv")
    p = bank.probability(np.random.default_rng(6).normal(size=8))
    resp = pd.DataFrame((np.random.default_rng(7).random(p.shape) < p).astype(int), columns=IDS)
    resp.insert(0, "model", [f"m{i}" for i in range(8)])
    resp.to_csv(tmp_path / "resp.csv", index=False)
    return tmp_path


def _replay(ws, model: str):
    bank = ItemBank.read(ws / "bank.csv")
    return bank, SubjectSpec.parse(f"replay:{ws / 'resp.csv'}#{model}").build(bank)


def test_a_replay_run_its_listing_and_page_leave_nothing_open(ws, monkeypatch, capsys):
    db = ws / "r.sqlite"
    with nothing_left_open(monkeypatch):
        assert main(["evaluate", "--bank", str(ws / "bank.csv"), "--subject",
                     f"replay:{ws / 'resp.csv'}#m1", "--db", str(db), "--max-items", "4",
                     "-q", "-o", str(ws / "run")]) == 0
        assert main(["runs", "--db", str(db)]) == 0
        assert main(["runs", "--db", str(db), "--json"]) == 0
        assert main(["runs"]) == 0                      # the stores remembered
    assert "m1" in capsys.readouterr().out


def test_a_resumed_run_leaves_nothing_open(ws, monkeypatch):
    db = ws / "r.sqlite"
    with nothing_left_open(monkeypatch):
        bank, subject = _replay(ws, "m2")
        with service.LiveRun.start(db, bank, [subject], seed=3,
                                   bank_ref=str(ws / "bank.csv")) as live:   # nothing asked
            run_id = live.jobs[0].run_id
        res = service.resume(db, run_id)               # the subject rebuilt from the store
        assert res.status == "done" and res.items
        assert RunResult.from_store(db, run_id).items == res.items
        with RunStore(db) as store:
            assert store.list_runs()["run_id"].tolist() == [run_id]


def test_several_models_in_threads_leave_no_connection_behind(ws, monkeypatch):
    """Each model of a run asked on its own thread opened the store's connection on that
    thread, and it stayed open (one more per model and per run) until the store was closed;
    it is closed as its thread ends: only the caller's own connection stays open."""
    opened = []
    connect = sqlite3.connect
    monkeypatch.setattr(sqlite3, "connect",
                        lambda *a, **k: opened.append(connect(*a, **k)) or opened[-1])
    with nothing_left_open(monkeypatch), RunStore(ws / "r.sqlite") as store:
        for models in (["m1", "m2", "m3"], ["m4", "m5"]):
            bank = ItemBank.read(ws / "bank.csv")
            subjects = [_replay(ws, m)[1] for m in models]
            live = service.LiveRun.start(store, bank, subjects, seed=1,
                                         bank_ref=str(ws / "bank.csv"))
            assert [r.status for r in live.run()] == ["done"] * len(models)
            assert sum(map(_is_open, opened)) == 1     # the caller's, not one per thread


def test_a_start_or_resume_that_fails_leaves_nothing_open(ws, monkeypatch, capsys):
    db = ws / "r.sqlite"
    bank, subject = _replay(ws, "m3")
    service.evaluate(bank, subject, store=db, run_id="taken", bank_ref=str(ws / "bank.csv"))
    (ws / "notes.sqlite").write_text("not a database " * 100)
    with nothing_left_open(monkeypatch):
        with pytest.raises(AtlasError, match="no run 'nosuch'"):
            service.resume(db, "nosuch")
        with pytest.raises(AtlasError, match="already exists"):
            service.LiveRun.start(db, bank, [_replay(ws, "m4")[1]], run_ids=["taken"])
        with pytest.raises(AtlasError, match="given more than once"):
            service.LiveRun.resume(db, ["taken", "taken"])
        with pytest.raises(AtlasError, match="not a database"):
            RunStore(ws / "notes.sqlite")
        assert main(["evaluate", "--resume", "nosuch", "--db", str(db)]) == 2
        assert main(["runs", "--db", str(ws / "notes.sqlite")]) == 2
    err = capsys.readouterr().err
    assert "no run 'nosuch'" in err and "not a database" in err
