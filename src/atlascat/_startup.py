"""A Ctrl-C while ``atlas`` starts: one line and exit status 130, never a traceback.

Python raises KeyboardInterrupt wherever the signal lands, and while ``atlas`` imports its
modules (typer, numpy, pandas: a few tenths of a second) nothing can catch it: the command
printed a traceback of whatever import it cut. :func:`quiet_start`, the first thing the package
does (in the ``atlas`` process only: ``atlas ...`` or ``python -m atlascat ...``, never in a
program that imports atlascat), makes SIGINT end the process at once with one line, before
anything is written; the command line's ``main`` then makes it a KeyboardInterrupt again
(:func:`catch_interrupts`) and reports it in one line (``atlas evaluate`` installs its own
handler once its runs are created). Only the interpreter's own start (before the package is
imported) is left to Python. Standard modules only, and only those loaded at start-up.
"""
import _signal
import os
import sys

__all__ = ["INTERRUPTED", "quiet_start", "catch_interrupts", "interrupted"]

#: what an interrupted command prints (stderr), exit status 130
INTERRUPTED = "interrupted"

_seen = [False]


def _is_atlas_process() -> bool:
    """Whether this process runs the command line: the ``atlas`` script, or ``python -m
    atlascat``."""
    argv = list(getattr(sys, "orig_argv", None) or [])
    if "-m" in argv[:-1] and argv[argv.index("-m") + 1] == "atlascat":
        return True
    if any(a == "-matlascat" for a in argv):
        return True
    name = os.path.basename(str(sys.argv[0] if sys.argv else ""))
    return name in ("atlas", "atlas.exe") or (
        getattr(getattr(sys.modules.get("__main__"), "__spec__", None), "name", None)
        == "atlascat.__main__")


def _exit_at_once(signum, frame):   # nothing is written before main() runs
    try:
        os.write(2, (INTERRUPTED + "\n").encode())
    finally:
        os._exit(130)


def _raise_interrupt(signum, frame):
    _seen[0] = True
    raise KeyboardInterrupt


def _swap(old, new) -> None:
    """SIGINT's handler ``new`` where it is ``old`` (the main thread only)."""
    try:
        if _signal.getsignal(_signal.SIGINT) is old:
            _signal.signal(_signal.SIGINT, new)
    except ValueError:   # not the main thread
        pass


def quiet_start() -> None:
    """In the ``atlas`` process, a SIGINT before :func:`catch_interrupts` ends it with one
    line (exit status 130)."""
    if _is_atlas_process():
        _swap(_signal.default_int_handler, _exit_at_once)


def catch_interrupts() -> None:
    """From here on a SIGINT raises KeyboardInterrupt again (the command's own handlers, and
    ``main``'s one line, take it; typer turns one that reaches it into exit status 130
    without a word: :func:`interrupted` says it came)."""
    _swap(_exit_at_once, _raise_interrupt)


def interrupted() -> bool:
    """Whether a SIGINT reached this process before a command's own handler took it."""
    return _seen[0]
