"""Exception hierarchy. Every error ATLAS raises on bad input is an :class:`AtlasError`.

Messages say what is wrong, where (row / column / item id), and how to fix it.
"""
from __future__ import annotations


class AtlasError(Exception):
    """Base class of every error raised by ATLAS on bad input or impossible requests."""


class ResponseDataError(AtlasError, ValueError):
    """A response matrix is malformed (ids, values, shape, missing data)."""


class BankError(AtlasError, ValueError):
    """An item bank is malformed (columns, non-finite parameters, c >= u, ...)."""


class BankFolderError(BankError):
    """A path is not a usable bank folder (no manifest, a file missing or unreadable): build it
    again (:func:`atlascat.bankdir.build_bank`). ``path``: the folder, when known."""

    def __init__(self, message: str, path=None):
        super().__init__(message)
        self.path = path


class BankKindError(BankError):
    """A bank reference of the wrong kind: a suite where one bank is asked (``kind`` "suite"),
    or a bank where a suite is (``kind`` "bank")."""

    def __init__(self, message: str, kind: str):
        super().__init__(message)
        self.kind = kind


class BankIndexError(BankError, TypeError):
    """A bank was indexed (``bank["q1"]``, ``bank[0]``): a bank is not a mapping or a sequence;
    the message names the accessors that read it (``item_ids``, ``a`` / ``b`` / ``c`` / ``u``,
    ``index_of``, ``subset``, ``to_frame``). A TypeError, as indexing an object without
    ``__getitem__`` raises."""


class RunFolderError(AtlasError):
    """A folder is not a benchmark run's (:func:`atlascat.studies.protocol.run_benchmark`).
    ``path``: the folder."""

    def __init__(self, message: str, path=None):
        super().__init__(message)
        self.path = path


class ConvergenceError(AtlasError, RuntimeError):
    """An iterative estimator could not produce a usable result."""


class ConfigError(AtlasError, ValueError):
    """A setting is out of range or inconsistent with others."""


class MovedBankError(ConfigError):
    """A stored run's bank (a folder or file of one's own) is no longer where the run was
    asked: ``run_id`` and ``store`` (the run store's path) say which run to point at the bank's
    new place (:meth:`atlascat.live.service.LiveRun.resume` with ``bank=``)."""

    def __init__(self, message: str, run_id: str, store=None):
        super().__init__(message)
        self.run_id, self.store = run_id, store


class UnfinishedRunError(ConfigError):
    """A run that has not finished (running, interrupted, stopped by an error) was given where
    a finished one is needed (a comparison): ``run_id`` and ``store`` (the run store's path)
    say which run to resume (:meth:`atlascat.live.service.LiveRun.resume`)."""

    def __init__(self, message: str, run_id: str, store=None):
        super().__init__(message)
        self.run_id, self.store = run_id, store


class NotFittedError(ConfigError, AttributeError):
    """An estimator's fitted attribute (``bank_``, ``theta_``, ...) or method was used before
    ``fit``; ``hasattr(estimator, "bank_")`` is False until then (scikit-learn's convention)."""


class LiveRunError(AtlasError, RuntimeError):
    """A live evaluation failed in a way the user can resume from."""


class UnknownItemError(LiveRunError, ValueError):
    """An item id given to an adaptive session (``record``, ``skip``) is not one of its bank's:
    bad input, so a ValueError, and a LiveRunError as the session's other refusals are."""


class RunBusyError(LiveRunError):
    """Another process (or another run store object of this one) is running the run: it was
    refused before anything was asked, written or reported; ``run_id`` names it."""

    def __init__(self, message: str, *, run_id: str):
        super().__init__(message)
        self.run_id = run_id


class RunStoppedError(LiveRunError):
    """A live run stopped before its end (its subject failed after its retries); its answers
    are kept and it can be resumed: ``run_id``, ``store`` (the run store's path) and
    ``n_items`` (items answered) say which and how far."""

    def __init__(self, message: str, *, run_id: str, store, n_items: int):
        super().__init__(message)
        self.run_id, self.store, self.n_items = run_id, store, int(n_items)


class StopRequestedError(KeyboardInterrupt):
    """A stop was requested (the first Ctrl-C / SIGTERM, :meth:`atlascat.live.service.LiveRun.run`'s
    ``stop``) while a subject waited to retry a failed request: it gives up the retries, the
    item stays pending (asked again on resume) and the run ends ``interrupted``, as a
    KeyboardInterrupt ends it."""


def warn_user(message, category=UserWarning) -> None:
    """``warnings.warn`` attributed to the first caller outside ``atlascat`` (the user's line),
    however deep in the package the warning is raised; the package's own tests count as
    callers."""
    import os
    import sys
    import warnings

    pkg = os.path.dirname(os.path.abspath(__file__)) + os.sep
    frame, level = sys._getframe(1), 2  # stacklevel 2 = the caller of warn_user
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(pkg):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)
