"""SQLite run store: every live step persisted, so a killed run resumes where it stopped.

One database file holds any number of runs (WAL journal, ``synchronous=FULL``; each thread
has its own connection). Tables:

runs    one row per run: model, subject description (no secret), bank reference and hash,
        CAT settings, prompt settings, seed, status (running / done / error), the CAT session
        snapshot after the last answered step, theta, SE, items, tokens, latency, error text.
steps   one row per administered item: ``pending`` is written (its own transaction) *before*
        the model is asked; the answer, score, theta, SE, latency and tokens are written
        together with the run's new session snapshot in *one* transaction after it answers.
cache   answers keyed by (model key, item id, prompt hash), reused instead of asking again.

Resuming (:func:`atlascat.live.runner.resume`) restores the snapshot, so every answered item
keeps its answer; only an item that was pending when the process died (asked, answer not yet
saved) is asked again.
"""
from __future__ import annotations

import json
import os
import socket
import sqlite3
import threading
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

import pandas as pd

from ..errors import LiveRunError

__all__ = ["RunStore", "SCHEMA_VERSION"]

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    status TEXT NOT NULL,
    model TEXT NOT NULL,
    subject_json TEXT NOT NULL,
    cache_key TEXT NOT NULL,
    bank_ref TEXT,
    bank_hash TEXT NOT NULL,
    n_bank_items INTEGER,
    config_json TEXT NOT NULL,
    prompt_json TEXT NOT NULL,
    seed INTEGER,
    session_json TEXT NOT NULL,
    n_items INTEGER NOT NULL DEFAULT 0,
    n_correct INTEGER NOT NULL DEFAULT 0,
    theta REAL,
    se REAL,
    stop_reason TEXT,
    accuracy REAL,
    prompt_tokens INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    latency_s REAL NOT NULL DEFAULT 0,
    error TEXT,
    pid INTEGER,
    host TEXT
);
CREATE TABLE IF NOT EXISTS steps (
    run_id TEXT NOT NULL REFERENCES runs(run_id),
    step INTEGER NOT NULL,
    item_id TEXT NOT NULL,
    status TEXT NOT NULL,
    prompt TEXT NOT NULL,
    prompt_hash TEXT NOT NULL,
    asked_at REAL NOT NULL,
    times_asked INTEGER NOT NULL DEFAULT 1,
    answered_at REAL,
    answer TEXT,
    score INTEGER,
    theta REAL,
    se REAL,
    latency_s REAL,
    prompt_tokens INTEGER,
    completion_tokens INTEGER,
    attempts INTEGER,
    cached INTEGER,
    PRIMARY KEY (run_id, step)
);
CREATE TABLE IF NOT EXISTS cache (
    model TEXT NOT NULL,
    item_id TEXT NOT NULL,
    prompt_hash TEXT NOT NULL,
    answer TEXT NOT NULL,
    prompt_tokens INTEGER,
    completion_tokens INTEGER,
    latency_s REAL,
    created_at REAL NOT NULL,
    PRIMARY KEY (model, item_id, prompt_hash)
);
"""


def _dumps(obj) -> str:
    return json.dumps(obj, sort_keys=True, default=_default)


def _default(obj):
    import numpy as np

    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"cannot store {type(obj).__name__} as JSON")


class RunStore:
    """The SQLite file behind live runs (thread-safe: one connection per thread).

    Parameters
    ----------
    path : the database file (created with its folder if missing)
    synchronous : SQLite's ``synchronous`` pragma. ``"FULL"`` (default) makes every committed
        step durable even across a power loss (one fsync per transaction, a few ms);
        ``"NORMAL"`` is still safe against a killed process (WAL), for throwaway stores.
    """

    def __init__(self, path, *, synchronous: str = "FULL"):
        if str(synchronous).upper() not in ("FULL", "NORMAL", "EXTRA"):
            raise LiveRunError(f"synchronous must be FULL, NORMAL or EXTRA, not {synchronous!r}")
        self.synchronous = str(synchronous).upper()
        self.path = Path(path)
        if self.path.parent and not self.path.parent.exists():
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        try:
            self._con().executescript(
                "BEGIN IMMEDIATE;" + _SCHEMA
                + f"INSERT OR IGNORE INTO meta VALUES ('schema_version', '{SCHEMA_VERSION}');"
                + "COMMIT;")
        except sqlite3.DatabaseError as exc:
            raise LiveRunError(f"{str(self.path)!r} is not a usable run database: {exc}") from exc
        row = self._con().execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        if row is None or int(row[0]) != SCHEMA_VERSION:
            raise LiveRunError(f"run database {str(self.path)!r} has schema version {row and row[0]}; "
                               f"this ATLAS reads version {SCHEMA_VERSION}")

    # ------------------------------------------------------------------ connections
    def _con(self) -> sqlite3.Connection:
        con = getattr(self._local, "con", None)
        if con is None:
            try:
                con = sqlite3.connect(str(self.path), timeout=60.0, isolation_level=None)
                con.execute("PRAGMA journal_mode=WAL")
                con.execute(f"PRAGMA synchronous={self.synchronous}")
                con.execute("PRAGMA foreign_keys=ON")
            except sqlite3.DatabaseError as exc:
                raise LiveRunError(f"cannot open run database {str(self.path)!r}: {exc}") from exc
            con.row_factory = sqlite3.Row
            self._local.con = con
        return con

    @contextmanager
    def _tx(self):
        con = self._con()
        con.execute("BEGIN IMMEDIATE")
        try:
            yield con
        except BaseException:
            con.execute("ROLLBACK")
            raise
        else:
            con.execute("COMMIT")

    def close(self) -> None:
        con = getattr(self._local, "con", None)
        if con is not None:
            con.close()
            self._local.con = None

    # ------------------------------------------------------------------ runs
    def create_run(self, *, model: str, subject: dict, cache_key: str, bank_ref: str | None,
                   bank_hash: str, n_bank_items: int, config: dict, prompt: dict,
                   seed: int | None, session: dict, run_id: str | None = None) -> str:
        run_id = run_id or uuid.uuid4().hex[:12]
        now = time.time()
        with self._tx() as con:
            if con.execute("SELECT 1 FROM runs WHERE run_id=?", (run_id,)).fetchone():
                raise LiveRunError(f"run {run_id!r} already exists in {str(self.path)!r}")
            con.execute(
                "INSERT INTO runs (run_id, created_at, updated_at, status, model, subject_json, "
                "cache_key, bank_ref, bank_hash, n_bank_items, config_json, prompt_json, seed, "
                "session_json, pid, host) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (run_id, now, now, "running", model, _dumps(subject), cache_key, bank_ref,
                 bank_hash, int(n_bank_items), _dumps(config), _dumps(prompt), seed,
                 _dumps(session), os.getpid(), socket.gethostname()))
        return run_id

    def get_run(self, run_id: str) -> dict:
        row = self._con().execute("SELECT * FROM runs WHERE run_id=?", (run_id,)).fetchone()
        if row is None:
            known = [r[0] for r in self._con().execute(
                "SELECT run_id FROM runs ORDER BY created_at DESC LIMIT 5")]
            raise LiveRunError(f"no run {run_id!r} in {str(self.path)!r}"
                               + (f"; recent runs: {', '.join(known)}" if known else
                                  "; the database has no runs (check --db)"))
        out = dict(row)
        for key in ("subject_json", "config_json", "prompt_json", "session_json"):
            out[key[:-5]] = json.loads(out.pop(key))
        return out

    def claim(self, run_id: str) -> None:
        """Mark a run as running in this process (on start and resume)."""
        with self._tx() as con:
            con.execute("UPDATE runs SET status='running', error=NULL, pid=?, host=?, "
                        "updated_at=? WHERE run_id=?",
                        (os.getpid(), socket.gethostname(), time.time(), run_id))

    def finish_run(self, run_id: str, *, stop_reason: str | None, accuracy: float | None) -> None:
        with self._tx() as con:
            con.execute("UPDATE runs SET status='done', stop_reason=?, accuracy=?, updated_at=?, "
                        "error=NULL WHERE run_id=?", (stop_reason, accuracy, time.time(), run_id))

    def fail_run(self, run_id: str, error: str) -> None:
        with self._tx() as con:
            con.execute("UPDATE runs SET status='error', error=?, updated_at=? WHERE run_id=?",
                        (error, time.time(), run_id))

    def list_runs(self) -> pd.DataFrame:
        """All runs, newest first, with a ``state`` that tells a killed run from a live one."""
        rows = [dict(r) for r in self._con().execute(
            "SELECT run_id, created_at, updated_at, status, model, bank_ref, n_items, n_correct, "
            "theta, se, stop_reason, accuracy, prompt_tokens, completion_tokens, latency_s, "
            "error, pid, host FROM runs ORDER BY created_at DESC")]
        pending = {r[0]: r[1] for r in self._con().execute(
            "SELECT run_id, COUNT(*) FROM steps WHERE status='pending' GROUP BY run_id")}
        host = socket.gethostname()
        for r in rows:
            state = r["status"]
            if state == "running" and r["host"] == host and not _pid_alive(r["pid"]):
                state = "interrupted"
            r["state"] = state
            r["pending"] = pending.get(r["run_id"], 0)
        cols = ["run_id", "state", "model", "bank_ref", "n_items", "theta", "se", "accuracy",
                "stop_reason", "pending", "prompt_tokens", "completion_tokens", "latency_s",
                "created_at", "updated_at", "error"]
        return pd.DataFrame(rows, columns=cols)

    # ------------------------------------------------------------------ steps
    def begin_step(self, run_id: str, step: int, item_id: str, prompt: str, prompt_hash: str) -> int:
        """Write the pending item before asking; returns how many times it has been asked."""
        now = time.time()
        with self._tx() as con:
            row = con.execute("SELECT item_id, status, times_asked FROM steps WHERE run_id=? "
                              "AND step=?", (run_id, step)).fetchone()
            if row is None:
                con.execute("INSERT INTO steps (run_id, step, item_id, status, prompt, prompt_hash, "
                            "asked_at) VALUES (?,?,?,?,?,?,?)",
                            (run_id, step, item_id, "pending", prompt, prompt_hash, now))
                return 1
            if row["status"] != "pending" or row["item_id"] != item_id:
                raise LiveRunError(
                    f"run {run_id}: step {step} is already {row['status']} with item "
                    f"{row['item_id']!r}, cannot ask {item_id!r} there (the bank or CAT settings "
                    "changed since the run started?)")
            con.execute("UPDATE steps SET times_asked=times_asked+1, asked_at=?, prompt=?, "
                        "prompt_hash=? WHERE run_id=? AND step=?",
                        (now, prompt, prompt_hash, run_id, step))
            return int(row["times_asked"]) + 1

    def complete_step(self, run_id: str, step: int, *, item_id: str, answer, score: int,
                      theta: float, se: float, session: dict, cache_key: str | None,
                      prompt_hash: str) -> None:
        """Answer, score, theta, SE, timing and the new session snapshot: one transaction."""
        now = time.time()
        ptok = answer.prompt_tokens or 0
        ctok = answer.completion_tokens or 0
        lat = 0.0 if answer.cached else float(answer.latency_s)
        with self._tx() as con:
            cur = con.execute(
                "UPDATE steps SET status='answered', answered_at=?, answer=?, score=?, theta=?, "
                "se=?, latency_s=?, prompt_tokens=?, completion_tokens=?, attempts=?, cached=? "
                "WHERE run_id=? AND step=? AND item_id=? AND status='pending'",
                (now, answer.text, int(score), float(theta), float(se), float(answer.latency_s),
                 answer.prompt_tokens, answer.completion_tokens, int(answer.attempts),
                 int(bool(answer.cached)), run_id, step, item_id))
            if cur.rowcount != 1:
                raise LiveRunError(f"run {run_id}: step {step} (item {item_id}) is not pending")
            con.execute(
                "UPDATE runs SET session_json=?, n_items=n_items+1, n_correct=n_correct+?, theta=?, "
                "se=?, prompt_tokens=prompt_tokens+?, completion_tokens=completion_tokens+?, "
                "latency_s=latency_s+?, updated_at=? WHERE run_id=?",
                (_dumps(session), int(score), float(theta), float(se), ptok, ctok, lat, now, run_id))
            if cache_key is not None and not answer.cached:
                con.execute("INSERT OR IGNORE INTO cache VALUES (?,?,?,?,?,?,?,?)",
                            (cache_key, item_id, prompt_hash, answer.text, answer.prompt_tokens,
                             answer.completion_tokens, float(answer.latency_s), now))

    def pending_step(self, run_id: str) -> dict | None:
        row = self._con().execute("SELECT * FROM steps WHERE run_id=? AND status='pending' "
                                  "ORDER BY step", (run_id,)).fetchone()
        return None if row is None else dict(row)

    def steps(self, run_id: str) -> pd.DataFrame:
        return pd.read_sql_query("SELECT * FROM steps WHERE run_id=? ORDER BY step",
                                 self._con(), params=(run_id,))

    # ------------------------------------------------------------------ cache
    def cache_get(self, cache_key: str, item_id: str, prompt_hash: str) -> dict | None:
        row = self._con().execute("SELECT answer, prompt_tokens, completion_tokens, latency_s "
                                  "FROM cache WHERE model=? AND item_id=? AND prompt_hash=?",
                                  (cache_key, item_id, prompt_hash)).fetchone()
        return None if row is None else dict(row)


def _pid_alive(pid) -> bool:
    if not pid:
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True
