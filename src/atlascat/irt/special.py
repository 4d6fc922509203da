"""The logistic function, its logarithm and log-sum-exp in NumPy, for the modules that a command
loads on every run (item response functions, quadrature, the adaptive test).

    expit(x)     = 1 / (1 + exp(-x))
    log_expit(x) = x - log1p(exp(x))   (x < 0),   -log1p(exp(-x))   (x >= 0)
    logsumexp(a) = a_max + log(m) + log1p(sum_{a_i < a_max} exp(a_i - a_max) / m)

with ``a_max`` the largest element and ``m`` how often it occurs. These are the formulas of
``scipy.special`` (its ``expit`` and ``log_expit`` ufuncs and the real, unweighted case of its
``logsumexp``, scipy 1.17), evaluated with NumPy's ``exp``/``log1p``: they agree with SciPy to a
unit in the last place (~2e-16 relative; logsumexp bit for bit), without SciPy's 0.15-0.4 s
import (its array-API layer loads numpy.f2py). The calibration kernels use ``irt/arrays.py``.
"""
from __future__ import annotations

import numpy as np

__all__ = ["expit", "log_expit", "logsumexp"]


def expit(x):
    """sigma(x) = 1 / (1 + exp(-x)); exp overflows to inf for x < -709 and the result is 0."""
    x = np.asarray(x, dtype=float)
    with np.errstate(over="ignore"):
        e = np.exp(-x)
    e += 1.0
    return np.reciprocal(e, out=e) if e.ndim else 1.0 / e


def log_expit(x):
    """log sigma(x), exact for large |x|: x - log1p(exp(x)) below 0, -log1p(exp(-x)) above."""
    x = np.asarray(x, dtype=float)
    if x.ndim == 0:
        return log_expit(x[None])[0]
    t = np.abs(x)
    np.negative(t, out=t)
    np.exp(t, out=t)
    np.log1p(t, out=t)  # log1p(exp(x)) for x < 0, log1p(exp(-x)) for x >= 0
    out = np.minimum(x, -0.0)  # x below 0, else -0.0: -0.0 - t is -t, signed zero included
    out -= t
    return out


def logsumexp(a, axis=None, keepdims: bool = False):
    """log sum exp(a) along ``axis`` (all axes when None), the largest term taken out of the sum
    for precision; an all -inf slice gives -inf, an inf gives inf, a NaN gives NaN."""
    a = np.asarray(a, dtype=float)
    if a.ndim == 0:
        a = a[None]
    ax = tuple(range(a.ndim)) if axis is None else axis
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        a_max = np.max(a, axis=ax, keepdims=True)
        top = a == a_max
        m = np.sum(top, axis=ax, keepdims=True, dtype=float)
        s = np.sum(np.exp(np.where(top, -np.inf, a) - a_max), axis=ax, keepdims=True)
        s = np.where(s == 0, s, s / m)
        out = np.log1p(s) + np.log(m) + a_max
        bad = ~np.isfinite(out)
        if bad.any():  # -inf, inf or NaN somewhere: log(sum(exp(a))) says which
            out = np.where(bad, np.log(np.sum(np.exp(a), axis=ax, keepdims=True)), out)
    if not keepdims:
        out = np.squeeze(out, axis=ax)
    return out[()] if out.ndim == 0 else out
