"""SQLite run store: every live step persisted, so a killed run resumes where it stopped.

One database file holds any number of runs (WAL journal, ``synchronous=FULL``; each thread
has its own connection). Tables:

runs    one row per run: its kind (``adaptive``, ``predictor`` or ``suite``, :data:`RUN_KINDS`,
        written once when the run is created), model, subject description (no secret,
        ``type`` = its ``--subject`` kind), bank reference and hash,
        CAT settings, prompt settings, seed, status (running / done / error / interrupted), the
        CAT session snapshot after the last answered step, theta, SE, items, tokens, latency,
        error text. Its columns ``n_correct`` and ``accuracy`` (the sum of the item scores,
        the model-based mean score) read as ``score_sum`` and ``model_based_score``
        (:meth:`RunStore.get_run`, :meth:`RunStore.list_runs`); a suite run's theta / SE
        columns hold its average for the step log and read as None there.
steps   one row per administered item: ``pending`` is written (its own transaction) *before*
        the model is asked; the answer, score, theta, SE, latency and tokens are written
        together with the run's new session snapshot in *one* transaction after it answers.
cache   answers keyed by (model key, item id, prompt hash), reused instead of asking again.
run_outputs  where each run's results.json and report go (a resumed run writes there too).

A round of k items (``--batch-size k``) writes its k pending steps in one transaction before
asking; an answer that arrives is stored at once (status ``scored``); the round's scores enter the
CAT session, and the steps become ``answered`` (``skipped``: no score, its reply kept and not
cached), in one more transaction.

Resuming (:meth:`atlascat.live.service.LiveRun.resume`) restores the snapshot, so every
answered item keeps its answer; only items that were pending when the process died (asked,
answer not yet saved) are asked again.

Safety
------
- One process at a time per run: :meth:`RunStore.claim` takes an exclusive lock (``flock`` on
  ``<db>.locks/<run_id>.lock``, released by the OS when the process dies, even by SIGKILL), so
  two ``--resume`` of one run cannot both ask its pending items.
- Secrets: every text stored (prompt, answer, error, cache) passes through the redactors
  registered with :meth:`RunStore.add_redactor` (the runner registers each subject's
  ``redact``, which removes its API key).
- Size: an answer longer than ``max_answer_chars`` is stored cut to that length, with the
  SHA-256 and the length of the whole answer (``answer_sha256``, ``answer_chars``) kept in the
  step; such answers are not cached (a cut answer could be scored differently).
"""
from __future__ import annotations

import hashlib
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

from ..errors import LiveRunError, RunBusyError
from .runlocks import has_lock_support, pid_alive
from .storeconn import Connections, PerThreadConnections
from .storehome import (atlas_home, connect_read_only, connect_writable, default_store_path,
                        known_stores, register_store)

__all__ = ["RunStore", "SCHEMA_VERSION", "RUN_KINDS", "default_store_path", "atlas_home",
           "known_stores", "find_run_store", "register_store"]


def _check_foreign(path: Path) -> None:
    """Refuse a SQLite database of something else before a run store writes its tables (and
    its WAL journal mode) into it: an existing database with tables but no ``meta`` table."""
    if not path.is_file() or path.stat().st_size == 0:
        return
    try:
        con = connect_read_only(path)
        try:
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE "
                                                "type='table'")}
        finally:
            con.close()
    except sqlite3.DatabaseError as exc:
        raise LiveRunError(f"cannot open run database {str(path)!r}: {exc}") from exc
    if tables and "meta" not in tables:
        raise LiveRunError(f"{str(path)!r} is a SQLite database of something else (tables "
                           f"{', '.join(sorted(tables)[:5])}), not a run store; give another "
                           "--db")


SCHEMA_VERSION = 4

#: what a run is: the adaptive test on one bank, a bank folder's benchmark predictor, or a suite
#: (its members' banks as one composite bank)
RUN_KINDS = ("adaptive", "predictor", "suite")

#: SQLite's errors (``sqlite_errorname``, its first two words) of a store that cannot be written
_UNWRITABLE = {"SQLITE_FULL", "SQLITE_BUSY", "SQLITE_LOCKED", "SQLITE_READONLY", "SQLITE_IOERR"}

#: default cap on the characters of one answer kept in the database
MAX_ANSWER_CHARS = 20_000

# columns added since schema 1 (added in place to an older database; token_budget in 4)
_NEW_COLUMNS = {
    "runs": [("protocol", "TEXT"), ("batch_size", "INTEGER NOT NULL DEFAULT 1"),
             ("kind", "TEXT NOT NULL DEFAULT 'adaptive'"), ("token_budget", "INTEGER")],
    "steps": [("answer_sha256", "TEXT"), ("answer_chars", "INTEGER"), ("round", "INTEGER")],
}

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
    host TEXT,
    protocol TEXT,
    batch_size INTEGER NOT NULL DEFAULT 1,
    kind TEXT NOT NULL DEFAULT 'adaptive',
    token_budget INTEGER
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
    answer_sha256 TEXT,
    answer_chars INTEGER,
    round INTEGER,
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
CREATE TABLE IF NOT EXISTS run_outputs (
    run_id TEXT PRIMARY KEY,
    output_dir TEXT,
    report_dir TEXT
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


class RunStore(PerThreadConnections):
    """The SQLite file behind live runs (thread-safe: one connection per thread).

    Parameters
    ----------
    path : the database file (created with its folder if missing)
    synchronous : SQLite's ``synchronous`` pragma. ``"FULL"`` (default) makes every committed
        step durable even across a power loss (one fsync per transaction, a few ms);
        ``"NORMAL"`` is still safe against a killed process (WAL), for throwaway stores.
    max_answer_chars : answers longer than this are stored cut, with their SHA-256 and length
    read_only : only read the store (an existing one: listing, comparing, a page); "auto":
        read-only when the file cannot be written (a read-only file or mount), else as usual
    """

    def __init__(self, path, *, synchronous: str = "FULL", max_answer_chars: int = MAX_ANSWER_CHARS,
                 read_only=False):
        if str(synchronous).upper() not in ("FULL", "NORMAL", "EXTRA"):
            raise LiveRunError(f"synchronous must be FULL, NORMAL or EXTRA, not {synchronous!r}")
        if int(max_answer_chars) < 1:
            raise LiveRunError(f"max_answer_chars must be >= 1, got {max_answer_chars}")
        self.synchronous = str(synchronous).upper()
        self.max_answer_chars = int(max_answer_chars)
        self._redactors: list = []
        self._locks: dict = {}
        self._locks_guard = threading.Lock()
        self._registered = False   # remembered in stores.txt once a run asks its first item
        self.path = Path(path)
        if self.path.is_dir():
            raise LiveRunError(f"--db {str(self.path)!r} is a directory; give a database file "
                               "path such as runs.sqlite")
        from ..validation import check_output_file

        if read_only == "auto":
            read_only = self.path.is_file() and not (os.access(self.path, os.W_OK)
                                                     and os.access(self.path.parent, os.W_OK))
        self.read_only = bool(read_only)
        if self.read_only and not self.path.is_file():
            raise LiveRunError(f"run database {str(self.path)!r} does not exist (give --db)")
        if not self.read_only:   # below a file, or in a folder not writable: one line, --db
            check_output_file(self.path, option="--db", what="run database")
        if self.path.parent and not self.path.parent.exists():
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._cons = Connections(self._open_connection)
        try:   # a store not returned (any error) closes what it opened
            self._check_schema()
        except BaseException:
            self.close()
            raise

    def _check_schema(self) -> None:
        """Create the tables (a new store), migrate an older schema, refuse another one."""
        _check_foreign(self.path)
        try:
            if not self.read_only:
                self._con().executescript(
                    "BEGIN IMMEDIATE;" + _SCHEMA + "INSERT OR IGNORE INTO meta VALUES "
                    f"('schema_version', '{SCHEMA_VERSION}');" + "COMMIT;")
            row = self._con().execute("SELECT value FROM meta WHERE key='schema_version'"
                                      ).fetchone()
        except sqlite3.DatabaseError as exc:
            raise LiveRunError(f"{str(self.path)!r} is not a usable run database: {exc}") from exc
        if row is not None and int(row[0]) in (1, 2, 3) and not self.read_only:
            self._migrate(int(row[0]))
            row = (str(SCHEMA_VERSION),)
        if row is None or int(row[0]) != SCHEMA_VERSION:
            raise LiveRunError(f"run database {str(self.path)!r} has schema version {row and row[0]}; "
                               f"this ATLAS reads version {SCHEMA_VERSION}")

    def __repr__(self) -> str:
        """The file and how many runs it holds (``list_runs()`` for the table)."""
        try:
            n = self._con().execute("SELECT COUNT(*) FROM runs").fetchone()[0]
        except sqlite3.Error:
            n = "?"
        return f"RunStore({str(self.path)!r}, {n} runs)"

    def _migrate(self, version: int) -> None:
        """Schema 1, 2 or 3 -> 4: add the new columns in place; before 3, a run's kind is read
        once from its bank reference and session snapshot."""
        with self._tx() as con:
            for table, cols in _NEW_COLUMNS.items():
                have = {r[1] for r in con.execute(f"PRAGMA table_info({table})")}
                for name, decl in cols:
                    if name not in have:
                        con.execute(f"ALTER TABLE {table} ADD COLUMN {name} {decl}")
            if version < 3:
                con.execute("UPDATE runs SET kind = CASE WHEN bank_ref LIKE 'suite:%' THEN "
                            "'suite' WHEN session_json LIKE '%\"type\": \"predict\"%' THEN "
                            "'predictor' ELSE 'adaptive' END")
            con.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION),))

    # ------------------------------------------------------------------ text hygiene
    def add_redactor(self, fn) -> None:
        """Register ``fn(text) -> text`` applied to every text stored (e.g. a subject's
        ``redact``, which removes its API key)."""
        if fn is not None and fn not in self._redactors:
            self._redactors.append(fn)

    def redact(self, text):
        if text is None:
            return None
        text = str(text)
        for fn in self._redactors:
            text = fn(text)
        return text

    def _answer_fields(self, text) -> tuple:
        """-> (text stored (redacted, capped), sha256 of the redacted whole, its length, whole?)"""
        if text is None:
            return None, None, None, True
        clean = self.redact(text)
        digest = hashlib.sha256(clean.encode("utf-8", errors="surrogatepass")).hexdigest()
        whole = len(clean) <= self.max_answer_chars
        return (clean if whole else clean[:self.max_answer_chars]), digest, len(clean), whole

    def _cap(self, text):
        text = self.redact(text)
        if text is not None and len(text) > self.max_answer_chars:
            text = text[:self.max_answer_chars]
        return text

    # ------------------------------------------------------------------ connections
    def _open_connection(self) -> sqlite3.Connection:
        try:
            con = (connect_read_only(self.path) if self.read_only
                   else connect_writable(self.path, self.synchronous))
        except sqlite3.DatabaseError as exc:
            raise LiveRunError(f"cannot {'read' if self.read_only else 'open'} run database "
                               f"{str(self.path)!r}: {exc}") from exc
        con.row_factory = sqlite3.Row
        return con

    @contextmanager
    def _tx(self):
        # a store that cannot be written (disk full, locked past the busy timeout, read-only)
        # is one LiveRunError naming it, the transaction rolled back: the run resumes once it can
        con = self._con()
        try:
            con.execute("BEGIN IMMEDIATE")
            try:
                yield con
            except BaseException:
                if con.in_transaction:
                    con.execute("ROLLBACK")
                raise
            con.execute("COMMIT")
        except sqlite3.OperationalError as exc:
            if con.in_transaction:
                con.execute("ROLLBACK")
            if "_".join(getattr(exc, "sqlite_errorname", "SQLITE_FULL").split("_")[:2]) \
                    not in _UNWRITABLE:
                raise
            raise LiveRunError(f"the run store {str(self.path)!r} cannot be written ({exc}): "
                               "free disk space or close the program that holds it, then resume"
                               ) from None

    # ------------------------------------------------------------------ runs
    def create_run(self, *, model: str, subject: dict, cache_key: str, bank_ref: str | None,
                   bank_hash: str, n_bank_items: int, config: dict, prompt: dict,
                   seed: int | None, session: dict, run_id: str | None = None,
                   protocol: str | None = None, batch_size: int = 1,
                   kind: str = "adaptive", token_budget: int | None = None) -> str:
        """A new run (status ``running``); ``kind`` (:data:`RUN_KINDS`) is stored once and read
        by everything that treats the kinds differently; ``token_budget`` as
        :func:`~atlascat.live.runner.start_run`'s."""
        if kind not in RUN_KINDS:
            raise LiveRunError(f"a run's kind is one of {', '.join(RUN_KINDS)}, not {kind!r}")
        run_id = run_id or uuid.uuid4().hex[:12]
        now = time.time()
        with self._tx() as con:
            if con.execute("SELECT 1 FROM runs WHERE run_id=?", (run_id,)).fetchone():
                raise LiveRunError(f"run {run_id!r} already exists in {str(self.path)!r}")
            con.execute(
                "INSERT INTO runs (run_id, created_at, updated_at, status, model, subject_json, "
                "cache_key, bank_ref, bank_hash, n_bank_items, config_json, prompt_json, seed, "
                "session_json, pid, host, protocol, batch_size, kind, token_budget) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (run_id, now, now, "running", model, self.redact(_dumps(subject)), cache_key,
                 bank_ref, bank_hash, int(n_bank_items), _dumps(config), _dumps(prompt), seed,
                 _dumps(session), os.getpid(), socket.gethostname(), protocol, int(batch_size), kind,
                 token_budget))
        return run_id

    def has_run(self, run_id: str) -> bool:
        """Whether this store holds run ``run_id``."""
        return self._con().execute("SELECT 1 FROM runs WHERE run_id=?",
                                   (run_id,)).fetchone() is not None

    def get_run(self, run_id: str) -> dict:
        row = self._con().execute("SELECT * FROM runs WHERE run_id=?", (run_id,)).fetchone()
        if row is None:
            known = [r[0] for r in self._con().execute(
                "SELECT run_id FROM runs ORDER BY created_at DESC LIMIT 5")]
            raise LiveRunError(f"no run {run_id!r} in {str(self.path)!r}"
                               + (f"; recent runs: {', '.join(known)}" if known else
                                  "; the database has no runs (check --db)"))
        out = _public(dict(row))
        out["state"] = self._state(out)   # as list_runs says it: a killed run is interrupted
        for key in ("subject_json", "config_json", "prompt_json", "session_json"):
            out[key[:-5]] = json.loads(out.pop(key))
        return _with_estimates(out)

    def _state(self, r: dict) -> str:
        """A run's status, ``interrupted`` for a ``running`` one whose process is gone."""
        gone = r["status"] == "running" and r["host"] == socket.gethostname() and (
            not pid_alive(r["pid"]) or self._abandoned(r["run_id"]))
        return "interrupted" if gone else r["status"]

    # ------------------------------------------------------------------ one process per run
    def _lock_path(self, run_id: str) -> Path:
        return Path(str(self.path) + ".locks") / f"{run_id}.lock"

    def _acquire(self, run_id: str) -> bool:
        """Take the run's exclusive lock (non-blocking); False if another holder has it."""
        with self._locks_guard:
            if run_id in self._locks:  # another thread of this process runs it
                return False
            try:
                import fcntl
            except ImportError:  # pragma: no cover - Windows: the pid check in claim() remains
                self._locks[run_id] = None
                return True
            path = self._lock_path(run_id)
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                return False
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()} {socket.gethostname()}\n".encode())
            self._locks[run_id] = fd
            return True

    def _abandoned(self, run_id: str) -> bool:
        """Whether a run marked running was claimed once and its lock is now free: its process
        is gone (the OS released the lock when it died), even where its pid still answers (a
        killed process its parent has not reaped yet, or a pid taken by another process)."""
        if not has_lock_support():
            return False
        import fcntl

        with self._locks_guard:
            if run_id in self._locks:        # this process runs it
                return False
        path = self._lock_path(run_id)
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:                      # never claimed (a run being started): not known
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return False                     # held: its process runs it
        else:
            fcntl.flock(fd, fcntl.LOCK_UN)
            return True
        finally:
            os.close(fd)

    def _busy(self, run_id: str) -> RunBusyError:
        info = self._con().execute("SELECT pid, host FROM runs WHERE run_id=?",
                                   (run_id,)).fetchone()
        who = f"process {info['pid']} on {info['host']}" if info else "another process"
        return RunBusyError(f"run {run_id} is already being run by {who} (lock "
                            f"{str(self._lock_path(run_id))!r}); wait for it to finish or "
                            "stop it, then resume", run_id=run_id)

    def check_free(self, run_id: str) -> None:
        """Raise :class:`~atlascat.errors.RunBusyError` when another process (or RunStore) holds
        the run's lock: a resume refused before it builds, asks or writes anything."""
        with self._locks_guard:
            if run_id in self._locks:
                raise self._busy(run_id)
        if not has_lock_support():
            return
        import fcntl

        try:
            fd = os.open(self._lock_path(run_id), os.O_RDONLY)
        except OSError:                      # never claimed: free
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            raise self._busy(run_id) from None
        else:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def release(self, run_id: str) -> None:
        """Give up the run's lock (done by finish_run / fail_run; the OS does it on exit)."""
        with self._locks_guard:
            fd = self._locks.pop(run_id, None)
        if fd is not None:
            os.close(fd)

    def claim(self, run_id: str) -> None:
        """Mark a run as running in this process (on start and resume).

        Raises :class:`LiveRunError` when another process (or another RunStore in this one)
        is running it: two processes asking one run's pending items would ask them twice."""
        if not self._acquire(run_id):
            raise self._busy(run_id)
        try:
            with self._tx() as con:
                row = con.execute("SELECT status, pid, host FROM runs WHERE run_id=?",
                                  (run_id,)).fetchone()
                if (row is not None and row["status"] == "running"
                        and row["host"] == socket.gethostname() and row["pid"] != os.getpid()
                        and pid_alive(row["pid"]) and not has_lock_support()):
                    raise LiveRunError(f"run {run_id} is already being run by process "
                                       f"{row['pid']}; wait for it to finish or stop it")
                con.execute("UPDATE runs SET status='running', error=NULL, pid=?, host=?, "
                            "updated_at=? WHERE run_id=? AND status != 'done'",   # done: stays
                            (os.getpid(), socket.gethostname(), time.time(), run_id))
        except BaseException:
            self.release(run_id)
            raise

    def finish_run(self, run_id: str, *, stop_reason: str | None,
                   model_based_score: float | None) -> None:
        with self._tx() as con:
            con.execute("UPDATE runs SET status='done', stop_reason=?, accuracy=?, updated_at=?, "
                        "error=NULL WHERE run_id=?",
                        (stop_reason, model_based_score, time.time(), run_id))
        self.release(run_id)
        register_store(self.path)

    def fail_run(self, run_id: str, error: str) -> None:
        with self._tx() as con:
            con.execute("UPDATE runs SET status='error', error=?, updated_at=? WHERE run_id=?",
                        (self._cap(error), time.time(), run_id))
        self.release(run_id)

    def interrupt_run(self, run_id: str, reason: str = "interrupted (Ctrl-C / SIGTERM)") -> None:
        """Mark a run ``interrupted`` (stopped on request; resumable) and release its lock."""
        con = self._con()
        if con.in_transaction:  # an interrupt between BEGIN and COMMIT of this thread
            con.execute("ROLLBACK")
        with self._tx() as con:
            con.execute("UPDATE runs SET status='interrupted', error=?, updated_at=? "
                        "WHERE run_id=? AND status='running'",
                        (self._cap(reason), time.time(), run_id))
        self.release(run_id)
        register_store(self.path)

    def move_bank(self, run_id: str, bank_ref: str) -> None:
        """Where a run's bank is now (the same bank, moved: a resume given it again)."""
        with self._tx() as con:
            con.execute("UPDATE runs SET bank_ref=? WHERE run_id=?", (bank_ref, run_id))

    def set_run_output(self, run_id: str, *, output_dir, report_dir) -> None:
        """Remember where a run's results.json and report go (a resumed run writes there); a
        folder inside the store's own is kept relative to it, so that it moves with the store
        (a run folder ``-o DIR`` moved, then resumed)."""
        home = self.path.resolve().parent

        def rel(d):
            if d is None:
                return None
            d = Path(d).resolve()
            return str(d.relative_to(home)) if d.is_relative_to(home) else str(d)

        with self._tx() as con:
            con.execute("INSERT OR REPLACE INTO run_outputs VALUES (?,?,?)",
                        (run_id, rel(output_dir), rel(report_dir)))

    def run_output(self, run_id: str) -> tuple | None:
        """``(output_dir, report_dir)`` recorded for a run (absolute Paths or None), or None."""
        row = self._con().execute("SELECT output_dir, report_dir FROM run_outputs WHERE run_id=?",
                                  (run_id,)).fetchone()
        if row is None:
            return None
        home = self.path.resolve().parent
        return tuple(None if v is None else home / v for v in (row[0], row[1]))

    def list_runs(self) -> pd.DataFrame:
        """All runs, newest first, with a ``state`` that tells a killed run from a live one."""
        rows = [_public(dict(r)) for r in self._con().execute(
            "SELECT run_id, created_at, updated_at, status, model, bank_ref, n_items, n_correct, "
            "theta, se, stop_reason, accuracy, prompt_tokens, completion_tokens, latency_s, "
            "error, pid, host, protocol, batch_size, kind FROM runs ORDER BY created_at DESC")]
        counts = {r[0]: (r[1], r[2]) for r in self._con().execute(
            "SELECT run_id, SUM(status IN ('pending', 'scored')), SUM(status = 'skipped') "
            "FROM steps GROUP BY run_id")}
        for r in rows:
            r["state"] = self._state(r)
            r["pending"], r["n_skipped"] = counts.get(r["run_id"], (0, 0))
            r["n_asked"] = r["n_items"] + r["n_skipped"]   # as RunResult.n_asked
            _with_estimates(r)
        cols = ["run_id", "kind", "state", "model", "protocol", "bank_ref", "n_items", "n_skipped",
                "n_asked", "score_sum", "theta", "se", "observed_score", "model_based_score",
                "stop_reason", "pending", "batch_size", "prompt_tokens",
                "completion_tokens", "latency_s", "created_at", "updated_at", "error"]
        return pd.DataFrame(rows, columns=cols)

    # ------------------------------------------------------------------ steps
    def begin_step(self, run_id: str, step: int, item_id: str, prompt: str, prompt_hash: str) -> int:
        """Write the pending item before asking; returns how many times it has been asked."""
        return self.begin_round(run_id, [(step, item_id, prompt, prompt_hash)])[0]

    def begin_round(self, run_id: str, steps, round_no: int | None = None) -> list[int]:
        """Write a round's pending items (``(step, item_id, prompt, prompt_hash)`` each) in one
        transaction before any is asked; -> how many times each has been asked."""
        now = time.time()
        out = []
        with self._tx() as con:
            for step, item_id, prompt, prompt_hash in steps:
                row = con.execute("SELECT item_id, status, times_asked FROM steps WHERE run_id=? "
                                  "AND step=?", (run_id, step)).fetchone()
                if row is None:
                    con.execute("INSERT INTO steps (run_id, step, item_id, status, prompt, "
                                "prompt_hash, asked_at, round) VALUES (?,?,?,?,?,?,?,?)",
                                (run_id, step, item_id, "pending", self._cap(prompt), prompt_hash,
                                 now, round_no))
                    out.append(1)
                    continue
                if row["status"] not in ("pending", "scored") or row["item_id"] != item_id:
                    raise LiveRunError(
                        f"run {run_id}: step {step} is already {row['status']} with item "
                        f"{row['item_id']!r}, cannot ask {item_id!r} there (the bank or CAT "
                        "settings changed since the run started?)")
                if row["status"] == "scored":  # answered before the crash: not asked again
                    out.append(int(row["times_asked"]))
                    continue
                con.execute("UPDATE steps SET times_asked=times_asked+1, asked_at=?, prompt=?, "
                            "prompt_hash=? WHERE run_id=? AND step=?",
                            (now, self._cap(prompt), prompt_hash, run_id, step))
                out.append(int(row["times_asked"]) + 1)
        if not self._registered:   # a run that is killed from here on is still found
            register_store(self.path)
            self._registered = True
        return out

    def _write_answer(self, con, run_id, step, item_id, answer, score, now, statuses) -> bool:
        text, digest, n_chars, whole = self._answer_fields(answer.text)
        cur = con.execute(
            "UPDATE steps SET status='scored', answered_at=?, answer=?, answer_sha256=?, "
            "answer_chars=?, score=?, latency_s=?, prompt_tokens=?, completion_tokens=?, "
            f"attempts=?, cached=? WHERE run_id=? AND step=? AND item_id=? AND status IN {statuses}",
            (now, text, digest, n_chars, as_score(score), float(answer.latency_s),
             answer.prompt_tokens, answer.completion_tokens, int(answer.attempts),
             int(bool(answer.cached)), run_id, step, item_id))
        if cur.rowcount != 1:
            raise LiveRunError(f"run {run_id}: step {step} (item {item_id}) is not pending")
        return whole

    def _cache_put(self, con, cache_key, item_id, prompt_hash, answer, now) -> None:
        text, _, _, whole = self._answer_fields(answer.text)
        if cache_key is not None and not answer.cached and whole:
            con.execute("INSERT OR IGNORE INTO cache VALUES (?,?,?,?,?,?,?,?)",
                        (cache_key, item_id, prompt_hash, text, answer.prompt_tokens,
                         answer.completion_tokens, float(answer.latency_s), now))

    def record_answer(self, run_id: str, step: int, *, item_id: str, answer, score: int,
                      cache_key: str | None, prompt_hash: str) -> None:
        """Store one answer of a round as soon as it arrives (status ``scored``; it enters the
        CAT with :meth:`complete_round`). A resumed round does not ask it again."""
        now = time.time()
        with self._tx() as con:
            self._write_answer(con, run_id, step, item_id, answer, score, now, "('pending')")
            self._cache_put(con, cache_key, item_id, prompt_hash, answer, now)

    def scored_steps(self, run_id: str) -> dict:
        """{step: row} of answers stored but not yet entered into the CAT (status ``scored``)."""
        rows = self._con().execute("SELECT * FROM steps WHERE run_id=? AND status='scored'",
                                   (run_id,)).fetchall()
        return {int(r["step"]): dict(r) for r in rows}

    def complete_round(self, run_id: str, results, *, theta: float, se: float, session: dict,
                       cache_key: str | None) -> None:
        """A round's answers (those not stored yet), scores, theta, SE and the new session
        snapshot: one transaction. ``results``: dicts with ``step, item_id, answer, score,
        prompt_hash, stored`` (``stored``: the answer was written by :meth:`record_answer`) and
        optionally ``credit``, what the run's score sum adds (default the score; an ordinal item's
        rating counts as its share of the item's scale)."""
        now = time.time()
        score_sum = ptok = ctok = n_skipped = 0
        lat = 0.0
        with self._tx() as con:
            for r in results:
                answer = r["answer"]
                skipped = r["score"] is None   # no score: the reply is kept, not cached
                if not r.get("stored"):
                    self._write_answer(con, run_id, r["step"], r["item_id"], answer, r["score"],
                                       now, "('pending')")
                    if not skipped:
                        self._cache_put(con, cache_key, r["item_id"], r["prompt_hash"], answer,
                                        now)
                cur = con.execute(f"UPDATE steps SET status='{'skipped' if skipped else 'answered'}'"
                                  ", theta=?, se=? WHERE run_id=? AND step=? AND item_id=? AND "
                                  "status='scored'",
                                  (float(theta), float(se), run_id, r["step"], r["item_id"]))
                if cur.rowcount != 1:
                    raise LiveRunError(f"run {run_id}: step {r['step']} (item {r['item_id']}) "
                                       "is not pending")
                n_skipped += skipped
                score_sum += 0 if skipped else as_score(r.get("credit", r["score"]))
                ptok += answer.prompt_tokens or 0
                ctok += answer.completion_tokens or 0
                lat += 0.0 if answer.cached else float(answer.latency_s)
            con.execute(
                "UPDATE runs SET session_json=?, n_items=n_items+?, n_correct=n_correct+?, theta=?, "
                "se=?, prompt_tokens=prompt_tokens+?, completion_tokens=completion_tokens+?, "
                "latency_s=latency_s+?, updated_at=? WHERE run_id=?",
                (_dumps(session), len(results) - n_skipped, score_sum, float(theta), float(se),
                 ptok, ctok, lat, now, run_id))

    def complete_step(self, run_id: str, step: int, *, item_id: str, answer, score: int,
                      theta: float, se: float, session: dict, cache_key: str | None,
                      prompt_hash: str) -> None:
        """Answer, score, theta, SE, timing and the new session snapshot: one transaction."""
        self.complete_round(run_id, [dict(step=step, item_id=item_id, answer=answer, score=score,
                                          prompt_hash=prompt_hash)],
                            theta=theta, se=se, session=session, cache_key=cache_key)

    def closed_steps(self, run_id: str) -> int:
        """How many of the run's steps are closed (answered or skipped): the next step's number."""
        return int(self._con().execute("SELECT COUNT(*) FROM steps WHERE run_id=? AND status IN "
                                       "('answered', 'skipped')", (run_id,)).fetchone()[0])

    def pending_step(self, run_id: str) -> dict | None:
        row = self._con().execute("SELECT * FROM steps WHERE run_id=? AND status IN "
                                  "('pending', 'scored') ORDER BY step", (run_id,)).fetchone()
        return None if row is None else dict(row)

    def open_steps(self, run_id: str) -> list[dict]:
        """Steps asked but not entered into the CAT (``pending`` or ``scored``), by step."""
        return [dict(r) for r in self._con().execute(
            "SELECT * FROM steps WHERE run_id=? AND status IN ('pending', 'scored') ORDER BY step",
            (run_id,))]

    def steps(self, run_id: str) -> pd.DataFrame:
        return pd.read_sql_query("SELECT * FROM steps WHERE run_id=? ORDER BY step",
                                 self._con(), params=(run_id,))

    # ------------------------------------------------------------------ cache
    def cache_get(self, cache_key: str, item_id: str, prompt_hash: str) -> dict | None:
        row = self._con().execute("SELECT answer, prompt_tokens, completion_tokens, latency_s "
                                  "FROM cache WHERE model=? AND item_id=? AND prompt_hash=?",
                                  (cache_key, item_id, prompt_hash)).fetchone()
        return None if row is None else dict(row)


def find_run_store(run_id: str, stores=None) -> Path:
    """The first run store of ``stores`` (default :func:`known_stores`: the default store and
    every store a run asked items into) that holds run ``run_id``; :class:`LiveRunError`
    naming the stores searched when none does."""
    paths = known_stores() if stores is None else [Path(p) for p in stores]
    for path in paths:
        try:
            if Path(path).is_file():
                with RunStore(path, read_only="auto") as store:
                    if store.has_run(run_id):
                        return Path(path)
        except LiveRunError:   # a remembered store that is no longer one
            continue
    if not paths:
        raise LiveRunError(f"no run {run_id!r}: run database {str(default_store_path())!r} does "
                           "not exist and no run was written elsewhere; give the run store "
                           "with --db")
    where = (repr(str(paths[0])) if len(paths) == 1 else
             f"any of the {len(paths)} known run stores ("
             + ", ".join(str(p) for p in paths[:3]) + (", ..." if len(paths) > 3 else "") + ")")
    raise LiveRunError(f"no run {run_id!r} in {where}; give the run store with --db")


def as_score(value):
    """An item's score as stored: 0/1 (or an ordinal item's whole-number rating) an int, a
    continuous score in [0, 1] a float; None (no score: the item was skipped) stays None."""
    if value is None:
        return None
    v = float(value)
    return int(v) if v.is_integer() else v


#: the ``runs`` table's columns under the names a run's dict carries (results.json, ``atlas
#: runs --json``): the sum and the model-based mean of the item scores, whatever the metric
_PUBLIC_NAMES = {"n_correct": "score_sum", "accuracy": "model_based_score"}


def _with_estimates(run: dict) -> dict:
    """A run's row with its estimates as every reader gives them: ``observed_score``, the mean
    item score over the items it asked (right / asked for 0/1 items; credits on [0, 1], as
    stored; None before its first answer), and no theta, SE or model-based score for a suite
    run (its estimate is its average: :func:`atlascat.live.suite_run.suite_result`; the
    table's theta / se columns hold it for the step log)."""
    run["observed_score"] = (run["score_sum"] / run["n_items"]) if run["n_items"] else None
    if run.get("kind") == "suite":
        run.update(theta=None, se=None, model_based_score=None)
    return run


def _public(row: dict) -> dict:
    """A ``runs`` row with its columns under their public names (:data:`_PUBLIC_NAMES`)."""
    return {_PUBLIC_NAMES.get(k, k): v for k, v in row.items()}
