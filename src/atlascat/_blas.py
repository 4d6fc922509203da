"""How many threads BLAS (OpenBLAS, MKL, BLIS) may use for the package's matrix products.

Almost every product the package makes is small: an EAP update of one examinee, a CAT step,
the (subjects x items) @ (items x 61 nodes) E-step of a few-thousand-model leaderboard. A
multi-threaded BLAS splits such a product across all cores and then waits for the slowest
thread; on a machine whose cores are busy with other work, that thread is often descheduled.
One BLAS thread per product gives identical output (every product's element is one dot
product, computed by one thread either way); measured in ``benchmarks/bench_busy.py``
(``benchmarks/results/busy.md``).

:func:`small_products` limits BLAS to one thread (``threadpoolctl``) for what it wraps: the CLI
runs every command inside it, and the library's entry points (``calibrate``,
``estimate_ability``, ``eap``, ``simulate_cat``) enter it themselves (:func:`with_small_products`). :func:`large_products` gives the
threads back to a product large enough to gain from them on an idle machine (the joint E-step
of a matrix of at least ``LARGE_PRODUCT_CELLS`` subjects x items x nodes, about 3,000 x 5,000
x 61): it restores the count that was in effect before :func:`small_products` limited it.

``ATLAS_BLAS_THREADS`` sets the policy: unset or ``auto`` as above; ``N`` (an integer >= 1) lets
small products use N threads; ``off`` (or ``0``) never touches the thread count (the package as
it was before). A user's own ``threadpoolctl`` limit or ``OPENBLAS_NUM_THREADS`` is the count
that :func:`large_products` returns to, so it is never exceeded.
"""
from __future__ import annotations

import contextlib
import functools
import os
import threading

__all__ = ["small_products", "large_products", "with_small_products", "blas_limit", "one_thread",
           "LARGE_PRODUCT_CELLS"]

# (subjects x items x nodes) of an E-step from which two BLAS threads pay on an idle machine
LARGE_PRODUCT_CELLS = 1_000_000_000

# environment variables read by BLAS libraries loaded after the limit is set (scipy's own
# OpenBLAS is loaded on the first scipy.linalg import, usually inside a command)
_ENV_VARS = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS")

_lock = threading.Lock()
_state = {"depth": 0, "outer": None, "limiter": None, "saved_env": None}


def blas_limit() -> int | None:
    """The thread count for small products from ``ATLAS_BLAS_THREADS`` (None: leave BLAS alone)."""
    raw = os.environ.get("ATLAS_BLAS_THREADS", "auto").strip().lower()
    if raw in ("", "auto"):
        return 1
    if raw in ("off", "0", "none", "unlimited"):
        return None
    try:
        n = int(raw)
    except ValueError:
        from .errors import ConfigError

        raise ConfigError(f"ATLAS_BLAS_THREADS={raw!r} is not understood; set it to auto, off "
                          "or a number of threads >= 1") from None
    if n < 0:
        from .errors import ConfigError

        raise ConfigError(f"ATLAS_BLAS_THREADS={n} is negative; set it to auto, off or a "
                          "number of threads >= 1")
    return n or None


_controller = {"n_modules": -1, "controller": None}


def _blas_controller():
    """threadpoolctl's view of the loaded BLAS libraries, cached (building it scans the loaded
    shared libraries, about 1 ms; using it costs 10 us) and rebuilt after an import, the only
    way a new BLAS library gets loaded."""
    import sys

    if _controller["n_modules"] != len(sys.modules):
        from threadpoolctl import ThreadpoolController

        _controller["controller"] = ThreadpoolController().select(user_api="blas")
        _controller["n_modules"] = len(sys.modules)
    return _controller["controller"]


def _current_threads(ctl) -> int | None:
    counts = [i["num_threads"] for i in ctl.info()]
    return max(counts) if counts else None


@contextlib.contextmanager
def small_products():
    """Run the block with BLAS limited to :func:`blas_limit` threads (re-entrant).

    Libraries already loaded are limited through ``threadpoolctl``; libraries loaded inside the
    block read the limit from ``OPENBLAS_NUM_THREADS`` / ``MKL_NUM_THREADS`` /
    ``BLIS_NUM_THREADS`` (set for the block where the user has not set them). BLAS's thread
    count belongs to the process, so the blocks of all Python threads share one limit: the
    first to enter sets it, the last to leave restores it. Nested calls cost nothing.
    """
    limit = blas_limit()
    if limit is None:
        yield
        return
    with _lock:
        if _state["depth"] == 0:
            ctl = _blas_controller()
            outer = _current_threads(ctl)
            _state["saved_env"] = {k: os.environ.get(k) for k in _ENV_VARS}
            for k in _ENV_VARS:
                os.environ.setdefault(k, str(limit))
            _state["outer"] = outer if outer is not None else limit
            _state["limiter"] = ctl.limit(limits=limit)
        _state["depth"] += 1
    try:
        yield
    finally:
        with _lock:
            _state["depth"] -= 1
            if _state["depth"] == 0:
                _state["limiter"].restore_original_limits()
                for k, v in _state["saved_env"].items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
                _state.update(outer=None, limiter=None, saved_env=None)


def with_small_products(func):
    """Decorator: ``func`` runs inside :func:`small_products` (a wrapper defined here, not
    contextlib's, so that :func:`atlascat.errors.warn_user` still points at the user's line)."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        with small_products():
            return func(*args, **kwargs)
    return wrapper


@contextlib.contextmanager
def large_products(cells: float):
    """Inside :func:`small_products`, give a product of ``cells`` multiply-adds per output
    column block (subjects x items x nodes for the E-step) the thread count that was in
    effect before the limit, if it is at least ``LARGE_PRODUCT_CELLS``; otherwise nothing."""
    outer = _state["outer"]
    if outer is None or cells < LARGE_PRODUCT_CELLS or outer <= (blas_limit() or outer):
        yield
        return
    with _blas_controller().limit(limits=outer):
        yield


def one_thread():
    """A context in which BLAS runs one thread (for products inside worker threads that
    already use the cores)."""
    return _blas_controller().limit(limits=1)

