"""A ``cmd:`` program dies with atlas, even when atlas is killed (``kill -9``, the OOM killer).

On POSIX the program is started through this file, run as a script (``python -I -S
cmdguard.py FD GRACE ARGV...``): the guard is the leader of a new session and process group
(a terminal's Ctrl-C reaches atlas alone, which ends the program after the item in flight),
starts the program in its group with the guard's standard streams, then waits for either

- the program's end: the guard ends what it left running in the group (SIGTERM) and exits
  with its status (a signal's death as that signal), or
- the end of file on ``FD``, a pipe whose only write end atlas holds: atlas is gone, however it
  ended, so the guard sends SIGTERM to the whole group (the program and anything it started),
  then SIGKILL after ``GRACE`` seconds.

On Linux the program also gets ``PR_SET_PDEATHSIG`` (SIGKILL) towards the guard, so it ends even
if the guard itself is killed. Elsewhere (Windows) the program is started directly, as before:
it ends when its standard input closes. The script imports the standard library only.
"""
from __future__ import annotations

import os
import subprocess
import sys

__all__ = ["start_guarded", "end_group"]


def start_guarded(argv: list, *, grace: float = 3.0, **popen) -> tuple:
    """Start ``argv`` (``subprocess.Popen`` with ``popen``) so that it ends with this process;
    -> (the Popen, the write end of the guard's pipe: close it once the program has ended, or
    None where there is no guard)."""
    if os.name != "posix" or not sys.executable:   # no guard: it ends with its input
        return subprocess.Popen(argv, **popen), None
    read, write = os.pipe()   # neither end is inherited by other children (PEP 446)
    try:
        proc = subprocess.Popen([sys.executable, "-I", "-S", os.path.abspath(__file__),
                                 str(read), repr(float(grace)), *map(str, argv)],
                                pass_fds=(read,), start_new_session=True, **popen)
    except BaseException:
        os.close(write)
        raise
    finally:
        os.close(read)
    return proc, write


def end_group(proc) -> None:
    """SIGKILL to ``proc``'s process group where it leads one (a guarded program: the guard,
    the program and anything it started), else to ``proc``."""
    import signal

    try:
        if os.name == "posix" and os.getpgid(proc.pid) == proc.pid:
            os.killpg(proc.pid, signal.SIGKILL)
            return
    except OSError:
        pass
    proc.kill()


# ---------------------------------------------------------------------------- the guard
def _guard(fd: int, grace: float, argv: list) -> None:   # pragma: no cover - a subprocess
    import select
    import signal
    import threading
    import time

    me = os.getpid()
    prctl = None
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            prctl = ctypes.CDLL(None, use_errno=True).prctl
        except (OSError, AttributeError):
            prctl = None

    def child_setup():   # the guard has no other thread yet
        if prctl is not None:
            prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG: dies with the guard
            if os.getppid() != me:     # the guard ended before that call
                os._exit(1)

    try:
        proc = subprocess.Popen(argv, preexec_fn=child_setup)
    except OSError as exc:
        sys.stderr.write(f"could not start {argv[0]!r}: {exc}\n")
        sys.exit(127)
    null = os.open(os.devnull, os.O_RDWR)   # the program alone holds the streams: their end
    for k in (0, 1, 2):                     # of file is the program's end
        os.dup2(null, k)

    class Stop(Exception):
        pass

    def on_signal(signum, frame):
        raise Stop

    for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(s, on_signal)
    wake_r, wake_w = os.pipe()
    threading.Thread(target=lambda: (proc.wait(), os.write(wake_w, b"x")), daemon=True).start()
    try:
        while True:
            ready = select.select([fd, wake_r], [], [])[0]
            if wake_r in ready:
                break                      # the program ended
            if not os.read(fd, 64):
                raise Stop                 # atlas is gone
    except Stop:
        for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(s, signal.SIG_IGN)
        try:
            os.killpg(0, signal.SIGTERM)
        except OSError:
            pass
        deadline = time.monotonic() + grace
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        os.killpg(0, signal.SIGKILL)       # what is left of the group, the guard too
    rc = proc.wait()
    for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(s, signal.SIG_IGN)
    try:   # what the program started and left running ends with it
        os.killpg(0, signal.SIGTERM)
    except OSError:
        pass
    if rc < 0:                             # died of a signal: the guard dies of it too
        try:
            signal.signal(-rc, signal.SIG_DFL)
        except (OSError, ValueError):
            pass
        os.kill(me, -rc)
    os._exit(rc & 0xFF)


if __name__ == "__main__":   # pragma: no cover - run by start_guarded
    _guard(int(sys.argv[1]), float(sys.argv[2]), sys.argv[3:])
