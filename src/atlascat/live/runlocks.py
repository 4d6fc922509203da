"""Whether another process still holds a live run: its pid alive (:func:`pid_alive`), and
whether this platform has the file locks (``fcntl``) that tell a running run from an
abandoned one (:func:`has_lock_support`); used by :class:`~atlascat.live.store.RunStore`."""
from __future__ import annotations

import os

__all__ = ["has_lock_support", "pid_alive"]


def has_lock_support() -> bool:
    try:
        import fcntl  # noqa: F401
    except ImportError:  # pragma: no cover
        return False
    return True


def pid_alive(pid) -> bool:
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
