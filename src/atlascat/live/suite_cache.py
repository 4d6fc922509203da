"""A finished suite run's prediction, kept in its run store beside the run.

:func:`~atlascat.live.suite_run.suite_result` replays a suite run's answers into a fresh
SuiteSession (the joint posterior, 512 importance draws, the neighbour correction's replay of 20
calibration models): 50-100 ms a run, so ``atlas runs`` over 200 suite runs took 10-20 s. The
prediction of a *finished* run is kept in the store's ``suite_predictions`` table under a key
that changes with everything it is computed from: the run's snapshot (its answers round by
round, config, seed) and stop reason, the suite file and its averages, the shipped banks and
links, the library's version and the source files of the computation. A key that no longer
matches is recomputed (and kept again), so every reader still gets the numbers the replay
gives; a store that cannot be written is read as before, replaying every run.
"""
from __future__ import annotations

import functools
import hashlib
import json
import sqlite3
from pathlib import Path

from ..errors import LiveRunError

__all__ = ["prediction_key", "kept_prediction", "keep_prediction"]

_TABLE = ("CREATE TABLE IF NOT EXISTS suite_predictions (run_id TEXT PRIMARY KEY, "
          "key TEXT NOT NULL, prediction TEXT NOT NULL)")


def _stamp(path: Path) -> list:
    """(path, mtime_ns, size) of a file, of each file directly in a folder; [] if missing."""
    if path.is_dir():
        return [s for p in sorted(path.iterdir()) if p.is_file() for s in _stamp(p)]
    try:
        st = path.stat()
    except OSError:
        return []
    return [[str(path), st.st_mtime_ns, st.st_size]]


@functools.lru_cache(maxsize=1)
def _code_stamp() -> list:
    """The library's version and the source files a suite prediction is computed by."""
    from .._version import __version__

    root = Path(__file__).resolve().parents[1]
    files = [*sorted((root / "suite").glob("*.py")), *sorted((root / "scorelink").glob("*.py")),
             root / "live" / "suite_session.py", root / "live" / "suite_run.py"]
    return [__version__, *[s for f in files for s in _stamp(f)],
            *_stamp(root / "datasets" / "data" / "banks")]


@functools.lru_cache(maxsize=16)
def _suite_stamp(ref: str) -> list:
    """The suite file, its averages (percentiles) and the member banks given as paths."""
    from ..catalogue.suites import read_suite, suite_members, suite_path
    from ..errors import ConfigError

    try:
        path = Path(ref) if ref.endswith(".json") else suite_path(ref)
        members = suite_members(read_suite(path))
    except ConfigError:
        return []
    out = _stamp(path) + _stamp(path.with_name(f"{path.stem}_averages.csv"))
    for _, bank, _ in members:
        p = Path(bank) if Path(bank).is_absolute() else path.parent / bank
        out += _stamp(p) if p.exists() else []
    return out


def prediction_key(info: dict, ref: str) -> str | None:
    """The key of a finished suite run's prediction (``info``: the store's run row, with its
    ``session``); None for a run that is not done (its answers may still grow)."""
    if info.get("status") != "done" or not info.get("session"):
        return None
    doc = {"session": info["session"], "stop_reason": info.get("stop_reason"),
           "model": info.get("model"), "suite": _suite_stamp(str(ref)), "code": _code_stamp()}
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()


def kept_prediction(store, run_id: str, key: str | None) -> dict | None:
    """The prediction kept for ``run_id`` under ``key``, or None (none kept, another key, a
    store from before the table)."""
    if key is None:
        return None
    try:
        row = store._con().execute("SELECT key, prediction FROM suite_predictions WHERE "
                                   "run_id=?", (run_id,)).fetchone()
    except sqlite3.Error:
        return None
    if row is None or row[0] != key:
        return None
    return json.loads(row[1])


def keep_prediction(store, run_id: str, key: str | None, prediction: dict) -> None:
    """Keep a finished run's prediction under ``key``; nothing when the store cannot be written
    (read-only, busy): the next reader replays the run again."""
    if key is None or store.read_only:
        return
    try:
        with store._tx() as con:
            con.execute(_TABLE)
            con.execute("INSERT OR REPLACE INTO suite_predictions VALUES (?,?,?)",
                        (run_id, key, json.dumps(prediction)))
    except (LiveRunError, sqlite3.Error):
        return
