"""What binary and ordinal linking share (:mod:`.linking`, :mod:`.polylinking`): the moment
constants (mean-sigma, mean-mean; formulas and references in :mod:`.linking`) and the standard
errors a linked bank carries."""
from __future__ import annotations

import numpy as np

from ..errors import ConfigError

__all__ = ["mean_sigma", "mean_mean", "linked_metadata", "check_constants"]


def _wstats(x, weights):
    x = np.asarray(x, float)
    w = np.ones_like(x) if weights is None else np.asarray(weights, float)
    mean = np.average(x, weights=w)
    return mean, np.sqrt(np.average((x - mean) ** 2, weights=w))


def mean_sigma(x_ref, x_new, weights=None) -> tuple[float, float]:
    """A = sd(x_ref) / sd(x_new), B = mean(x_ref) - A mean(x_new).

    ``x`` are common persons' thetas or common items' difficulties b on the two scales
    (optionally weighted, e.g. by pattern frequencies).
    """
    m_ref, s_ref = _wstats(x_ref, weights)
    m_new, s_new = _wstats(x_new, weights)
    if not (s_new > 0 and s_ref > 0):
        raise ConfigError("mean-sigma linking needs values that vary on both scales")
    A = s_ref / s_new
    return float(A), float(m_ref - A * m_new)


def mean_mean(a_ref, b_ref, a_new, b_new) -> tuple[float, float]:
    """A = mean(a_new) / mean(a_ref), B = mean(b_ref) - A mean(b_new) (anchor items)."""
    A = float(np.mean(a_new) / np.mean(a_ref))
    if not A > 0:
        raise ConfigError("mean-mean linking needs positive mean slopes in both banks")
    return A, float(np.mean(b_ref) - A * np.mean(b_new))


def check_constants(A: float, B: float) -> None:
    """Refuse constants that move no bank: A must be finite and > 0, B finite."""
    if not (np.isfinite(A) and A > 0 and np.isfinite(B)):
        raise ConfigError(f"linking constants must be finite with A > 0, got A={A}, B={B}")


def linked_metadata(meta, A: float):
    """A bank's metadata after theta_ref = A theta_new + B: a slope's SE (``a_se``, ``a1_se``)
    over A, a difficulty's or threshold's (``b_se``, ``b2_se``) times A, asymptotes' as they
    are; an intercept's (``d_se``, ``d1_se``) is dropped, as d* = d - a B / A needs the
    covariance of a and d, which a bank does not keep."""
    import re

    if meta is None:
        return None
    out = meta.copy()
    for col in meta.columns:
        name = str(col)
        if name in ("a_se", "a1_se"):
            out[col] = meta[col] / A
        elif re.fullmatch(r"b\d*_se", name):
            out[col] = meta[col] * A
        elif re.fullmatch(r"d\d*_se", name):
            out = out.drop(columns=col)
    return out
