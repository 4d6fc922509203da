"""Array-namespace helpers: one numerical code path for NumPy, PyTorch, CuPy (and array_api_strict).

Kernels get their namespace from their arguments (:func:`namespace`), exactly as the Python array
API standard prescribes (https://data-apis.org/array-api/). ``array_api_compat`` is used when it
is installed (it wraps torch and cupy into standard namespaces); otherwise a NumPy >= 2 array
answers ``__array_namespace__`` itself and NumPy 1.x falls back to ``numpy``. NumPy stays the
default and the only required backend.

The standard has no ``expit``/``logsumexp``; the few special functions the EM needs are written
here in standard operations, each in its numerically safe form.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import ConfigError

__all__ = ["namespace", "is_numpy", "is_resident", "device_of", "can_sync", "backend_for", "asarray", "to_numpy", "astype",
           "has_nan", "observed_t",
           "concat", "contiguous", "expit", "expit_pair", "log_expit", "logsumexp_rows", "LOG_2PI"]

_COMPAT = []   # [module or None] once array_api_compat's import was tried (once per process)


def _compat():
    """``array_api_compat`` or None, imported once: a failed import is not retried per call."""
    if not _COMPAT:
        try:
            import array_api_compat
        except ImportError:  # optional (``dev`` / ``gpu`` extras)
            array_api_compat = None
        _COMPAT.append(array_api_compat)
    return _COMPAT[0]


def namespace(*arrays):
    """The array namespace shared by ``arrays`` (non-arrays such as Python floats are ignored).

    NumPy arrays take a fast path (``numpy`` itself, no import attempted); other libraries go
    through ``array_api_compat`` when installed, else their own ``__array_namespace__``.
    """
    arrays = [a for a in arrays if a is not None and not isinstance(a, (int, float, bool))]
    if all(isinstance(a, (np.ndarray, np.generic)) for a in arrays):
        return np
    compat = _compat()
    if compat is not None:
        return compat.array_namespace(*arrays)
    spaces = {a.__array_namespace__() for a in arrays}
    if len(spaces) != 1:
        raise ConfigError("arrays from different array libraries were mixed; move them to one "
                          "device/library first (install array_api_compat for torch/cupy)")
    return spaces.pop()


def is_resident(x) -> bool:
    """True for an array of another library than NumPy (a torch or CuPy tensor on its device,
    an array_api_strict array): data to be worked on where it lies, not copied to the host."""
    if isinstance(x, (np.ndarray, np.generic)):
        return False
    mod = type(x).__module__.split(".")[0]
    return mod in ("torch", "cupy") or hasattr(x, "__array_namespace__")


def device_of(x):
    """The device an array lives on (None for NumPy arrays)."""
    return None if isinstance(x, np.ndarray) else getattr(x, "device", None)


def is_numpy(xp) -> bool:
    """True for NumPy itself (or array_api_compat's NumPy wrapper)."""
    return xp is np or getattr(xp, "__name__", "").endswith("numpy")


def can_sync(xp) -> bool:
    """True when reading a scalar back is free (host arrays): loops may then exit early and
    compact their active sets; on an accelerator the kernels run masked, sync-free loops."""
    name = getattr(xp, "__name__", "")
    return is_numpy(xp) or "array_api_strict" in name


def backend_for(device: str):
    """(namespace, device object) for ``device`` = "cpu" (NumPy) or "cuda" / "cuda:N" (PyTorch,
    else CuPy)."""
    if hasattr(device, "asarray") and hasattr(device, "matmul"):  # a namespace (tests)
        return device, None
    dev = str(device).lower()
    if dev == "cpu":
        return np, None
    if dev.startswith("torch:"):  # PyTorch on a named device, e.g. "torch:cpu" (tests)
        import torch

        return _wrapped(torch.empty(0), device), torch.device(dev.split(":", 1)[1])
    if dev.startswith("cuda"):
        try:
            import torch
        except ImportError:
            torch = None
        if torch is not None:
            if not torch.cuda.is_available():
                raise ConfigError(f"device {device!r}: torch finds no CUDA GPU; use device='cpu'")
            return _wrapped(torch.empty(0), device), torch.device(dev)
        try:
            import cupy
        except ImportError:
            raise ConfigError(f"device {device!r} needs PyTorch or CuPy; install torch and "
                              "array_api_compat (the 'gpu' extra) or use device='cpu'") from None
        return _wrapped(cupy.empty(0), device), None
    raise ConfigError(f"unknown device {device!r}; use 'cpu' or 'cuda'")


def _wrapped(array, device):
    """array_api_compat's standard namespace for ``array``'s library (torch or cupy)."""
    compat = _compat()
    if compat is None:
        raise ConfigError(f"device {device!r} needs array_api_compat; install it (the 'gpu' "
                          "extra) or use device='cpu'")
    return compat.array_namespace(array)


def asarray(x, xp, dtype, device=None):
    """``x`` (NumPy or Python data) as an array of ``xp`` with the dtype named "float32"/"float64"
    (or a namespace dtype), on ``device``."""
    if isinstance(dtype, str):
        dtype = getattr(xp, dtype)
    if device is None:
        return xp.asarray(x, dtype=dtype)
    return xp.asarray(x, dtype=dtype, device=device)


def to_numpy(x) -> np.ndarray:
    """A host NumPy copy of any array (torch on GPU, cupy, array_api_strict, numpy)."""
    if isinstance(x, np.ndarray):
        return x
    if hasattr(x, "detach"):  # torch
        return x.detach().cpu().numpy()
    if hasattr(x, "get") and type(x).__module__.startswith("cupy"):
        return x.get()
    try:
        return np.asarray(x)
    except Exception:  # array_api_strict refuses __array__ in recent versions
        return np.from_dlpack(x)


def has_nan(values: np.ndarray, cells: int = 1 << 20) -> bool:
    """Whether a NumPy array holds a NaN: checked about ``cells`` cells (blocks of rows, of
    columns when column-major) at a time, no full-size temporary, stopping at the first block
    with one."""
    if values.ndim != 2 or values.size <= cells:
        return bool(np.isnan(values).any())
    if values.strides[0] < values.strides[1]:   # column-major: blocks of columns
        values = values.T
    rows = max(1, cells // max(1, values.shape[1]))
    return any(bool(np.isnan(values[s:s + rows]).any()) for s in range(0, values.shape[0], rows))


def observed_t(values: np.ndarray, nan=None, rows: int = 256) -> np.ndarray:
    """The observed mask of a NumPy array, transposed, as a C-ordered float64 (items x subjects)
    array: the operand NumPy's matmul makes of ``(~isnan(values)).T`` (so ``observed_t(v) @ w``
    equals ``(~isnan(v)).T @ w`` bit for bit), written from the one-byte mask ``nan``
    (``isnan(values)``, computed when not given) ``rows`` subjects at a time (a cache-sized
    transpose: 3-8x faster than one strided pass)."""
    nan = np.isnan(values) if nan is None else nan
    out = np.empty(values.shape[::-1])
    for s in range(0, values.shape[0], rows):
        np.logical_not(nan[s:s + rows].T, out=out[:, s:s + rows])
    return out


def astype(x, dtype, xp):
    """``x`` cast to ``dtype`` (``xp.astype`` of the standard; NumPy 1.x has only the method)."""
    if isinstance(x, np.ndarray):  # NumPy: no copy when the dtype is already right
        return x.astype(dtype, copy=False)
    f = getattr(xp, "astype", None)
    return f(x, dtype) if f is not None else x.astype(dtype)


def contiguous(x, xp):
    """``x`` in row-major order (a copy only when it is not), for the elementwise kernels."""
    if is_numpy(xp) and isinstance(x, np.ndarray):
        return np.ascontiguousarray(x)
    if hasattr(x, "contiguous"):  # torch
        return x.contiguous()
    if hasattr(x, "__cuda_array_interface__"):  # cupy
        import cupy

        return cupy.ascontiguousarray(x)
    return x


def concat(arrays, xp, axis=0):
    """Join arrays along ``axis`` (``xp.concat``; NumPy 1.x calls it ``concatenate``)."""
    f = getattr(xp, "concat", None) or getattr(xp, "concatenate")
    return f(arrays, axis=axis)


def _scipy_special():
    try:
        from scipy import special
    except ImportError:  # pragma: no cover - scipy is a dependency
        return None
    return special


def expit_pair(x, xp):
    """(sigma(x), sigma(-x)) from one exponential, each with full relative precision."""
    if is_numpy(xp) and isinstance(x, np.ndarray):  # NumPy: scipy's ufuncs are faster
        sp = _scipy_special()
        return sp.expit(x), sp.expit(-x)
    e = xp.exp(-xp.abs(x))
    big = 1.0 / (1.0 + e)
    small = e * big
    pos = x >= 0
    return xp.where(pos, big, small), xp.where(pos, small, big)


def expit(x, xp):
    """Logistic sigma(x) = 1 / (1 + exp(-x)), overflow-free for either sign."""
    if is_numpy(xp) and isinstance(x, np.ndarray):
        return _scipy_special().expit(x)
    e = xp.exp(-xp.abs(x))
    return xp.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def log_expit(x, xp):
    """log sigma(x) = min(x, 0) - log1p(exp(-|x|)), exact for large |x|."""
    if is_numpy(xp) and isinstance(x, np.ndarray):
        return _scipy_special().log_expit(x)
    return xp.minimum(x, xp.zeros_like(x)) - xp.log1p(xp.exp(-xp.abs(x)))


def logsumexp_rows(L, xp):
    """(max, log sum exp) of the rows of ``L`` along the last axis; returns (lse, shifted exp, sum)
    so a caller that needs the normalized posterior does not exponentiate twice."""
    mx = xp.max(L, axis=-1, keepdims=True)
    e = xp.exp(L - mx)
    tot = xp.sum(e, axis=-1, keepdims=True)
    return mx[..., 0] + xp.log(tot[..., 0]), e, tot


LOG_2PI = math.log(2.0 * math.pi)
