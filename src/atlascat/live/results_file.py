"""An output folder's ``results.json``: one row per run evaluated into the folder, written by
every ``atlas evaluate`` that puts a run there (several may end at once: runs of other models
started in parallel into one ``-o``)."""
from __future__ import annotations

import json
import os
import threading
from contextlib import contextmanager
from pathlib import Path

__all__ = ["write_results"]


@contextmanager
def _folder_lock(folder: Path):
    """An exclusive lock on ``folder`` (``flock`` on the folder itself: no lock file), held by
    one writer at a time across processes and threads; none where the OS has no flock."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def write_results(path, rows: list) -> None:
    """Write results.json atomically, keeping the rows of the folder's other runs already
    there (a run evaluated into the folder before; a resumed run replaces its own row). Writers
    take turns (a lock on the folder) and each writes its own temporary file, so two runs that
    end at once both keep their rows (one lost the other's, or stopped on a missing
    temporary file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _folder_lock(path.parent):
        out = list(rows)
        if path.exists():
            try:
                old = json.loads(path.read_text())
            except (OSError, ValueError):
                old = []
            if isinstance(old, list):
                new = {r["run_id"]: r for r in rows}
                out = [new.pop(r.get("run_id"), r) if isinstance(r, dict) else r for r in old]
                out += [r for r in rows if r["run_id"] in new]
        tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(json.dumps(out, indent=1, default=str))
        os.replace(tmp, path)
