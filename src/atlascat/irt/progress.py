"""Progress of long library steps: a caller's ``progress(done, total)`` callback, called at the
start and after each step, never a bar drawn by the library (the CLI draws one)."""
from __future__ import annotations

__all__ = ["stepper"]


def stepper(progress, total: int):
    """``step()`` that reports ``progress(done, total)`` after each of ``total`` steps (and
    ``progress(0, total)`` now); a no-op without ``progress``."""
    if progress is None:
        return lambda: None
    done = [0]
    progress(0, total)

    def step():
        done[0] = min(done[0] + 1, total)
        progress(done[0], total)

    return step
