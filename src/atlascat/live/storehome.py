"""Where run stores live: the default one under :func:`atlas_home`, and a registry of every
other store a run asked items into (``-o DIR`` / ``--db``), so that listing runs and resuming
one by its id (:func:`atlascat.live.store.find_run_store`) find them without being told where."""
from __future__ import annotations

import os
from pathlib import Path

__all__ = ["atlas_home", "default_store_path", "register_store", "known_stores",
           "connect_read_only", "connect_writable"]


def atlas_home() -> Path:
    """Where ATLAS keeps its run store when none is named: ``$ATLAS_HOME``, else
    ``$XDG_DATA_HOME/atlascat``, else ``~/.local/share/atlascat`` (never the current directory)."""
    env = os.environ.get("ATLAS_HOME")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".local" / "share"
    return base / "atlascat"


def default_store_path() -> Path:
    """The default run store: ``atlas_home() / "runs.sqlite"``."""
    return atlas_home() / "runs.sqlite"


def _registry_path() -> Path:
    return atlas_home() / "stores.txt"


def register_store(path) -> None:
    """Remember a run store outside ``atlas_home()`` (a run written with ``-o DIR`` / ``--db``)
    in ``atlas_home() / "stores.txt"``, one absolute path a line, so that ``atlas runs`` without
    ``--db`` finds its runs. Best effort: a home that cannot be written is skipped silently."""
    path = Path(path).expanduser().resolve()
    if path == default_store_path().expanduser().resolve():
        return
    registry = _registry_path()
    try:
        known = registry.read_text().splitlines() if registry.exists() else []
        if str(path) in known:
            return
        registry.parent.mkdir(parents=True, exist_ok=True)
        with registry.open("a") as fh:
            fh.write(f"{path}\n")
    except OSError:
        pass


def known_stores() -> list[Path]:
    """The run stores ``atlas runs`` lists without ``--db``: the default store, then every
    store registered by :func:`register_store` that still exists (newest registration last)."""
    stores = [default_store_path()] if default_store_path().exists() else []
    registry = _registry_path()
    lines = registry.read_text().splitlines() if registry.exists() else []
    for line in dict.fromkeys(ln.strip() for ln in lines if ln.strip()):
        if Path(line).is_file() and Path(line) not in stores:
            stores.append(Path(line))
    return stores


def connect_read_only(path):
    """A read-only SQLite connection to the store at ``path`` (one this process may not write:
    a read-only file or mount). A store in WAL mode needs its ``-shm`` file, which a read-only
    folder cannot take: then the file is read as it is on disk (``immutable``)."""
    import sqlite3

    uri = Path(path).resolve().as_uri()
    for mode in ("mode=ro", "immutable=1"):
        con = sqlite3.connect(f"{uri}?{mode}", uri=True, timeout=60.0, isolation_level=None,
                              check_same_thread=False)   # closed by RunStore.close
        try:
            con.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
            return con
        except BaseException as exc:   # closed whatever failed (not a database: DatabaseError)
            con.close()
            if mode == "immutable=1" or not isinstance(exc, sqlite3.OperationalError):
                raise
    return con  # pragma: no cover - the loop returns or raises


def connect_writable(path, synchronous: str = "FULL"):
    """A SQLite connection that writes the store at ``path`` (WAL journal, ``synchronous``,
    foreign keys); closed here when its set-up fails (it was left to the collector)."""
    import sqlite3

    con = sqlite3.connect(str(path), timeout=60.0, isolation_level=None,
                          check_same_thread=False)   # closed by RunStore.close
    try:
        con.execute("PRAGMA journal_mode=WAL")
        con.execute(f"PRAGMA synchronous={synchronous}")
        con.execute("PRAGMA foreign_keys=ON")
    except BaseException:
        con.close()
        raise
    return con
