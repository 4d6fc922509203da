"""A run store's SQLite connections: one per thread, every one of them closed by
:meth:`Connections.close`.

A thread asks the store through its own connection (SQLite connections are not shared
between threads while in use). A connection opened by a worker thread (the rounds asked
concurrently, one thread per ``--llm``) used to be left to the garbage collector, and the
main thread's too unless the store was closed: Python 3.13 warns of each one
(``ResourceWarning: unclosed database``) and the file stays open until then. Here every
connection is remembered and :meth:`close` closes them all, from any thread, once their
threads are done with them (they are opened with ``check_same_thread=False`` for that); a
thread whose connection was closed opens a new one on its next use."""
from __future__ import annotations

import threading
from contextlib import contextmanager

__all__ = ["Connections", "PerThreadConnections"]


class Connections:
    """The connections ``open_one()`` opens, one per thread (:meth:`get`)."""

    def __init__(self, open_one):
        self._open_one = open_one
        self._local = threading.local()
        self._lock = threading.Lock()
        self._open: set = set()

    def get(self):
        """This thread's connection (opened on first use, or after :meth:`close`)."""
        con = getattr(self._local, "con", None)
        with self._lock:
            if con is not None and con in self._open:
                return con
        con = self._open_one()
        with self._lock:
            self._open.add(con)
        self._local.con = con
        return con

    def close_mine(self) -> None:
        """Close this thread's connection (a worker thread done with the store: no other
        thread can use it, and it stayed open until :meth:`close`, one more per run)."""
        con = getattr(self._local, "con", None)
        with self._lock:
            if con is None or con not in self._open:
                return
            self._open.discard(con)
        self._local.con = None
        con.close()

    def close(self) -> None:
        """Close every connection opened (none is in use: the threads that asked are done)."""
        with self._lock:
            cons, self._open = list(self._open), set()
        for con in cons:
            con.close()


class PerThreadConnections:
    """What a store (``self._cons``: its :class:`Connections`) gives its users: ``_con()``,
    ``close()``, and ``with store:`` closing it."""
    _cons: Connections

    def _con(self):
        return self._cons.get()

    def close(self) -> None:
        """Close the store's connections, every thread's (a later call opens one again)."""
        self._cons.close()

    def close_thread(self) -> None:
        """Close the calling thread's connection (a thread that is done with the store)."""
        self._cons.close_mine()

    @classmethod
    @contextmanager
    def opened(cls, store, jobs=()):
        """The store ``store`` (a path, opened here, or a store); if the block fails, a store
        opened here is closed, and the subjects of ``jobs`` (a list: those built so far) too:
        nothing owns them then (they were left to the collector)."""
        given = isinstance(store, cls)
        store = store if given else cls(store)
        try:
            yield store
        except BaseException:
            for job in jobs:
                if hasattr(job.subject, "close"):
                    job.subject.close()
            if not given:
                store.close()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
