"""One root finder for every ability estimator's estimating equation g(theta) = 0: the
Illinois variant of regula falsi on brackets [a, b] with g(a) > 0 >= g(b), vectorized over the
brackets (Dowell and Jarratt 1971, "A modified regula falsi method for computing the root of an
equation", BIT 11: the end that stays twice has its g halved, which keeps the convergence
superlinear). Used by full-test scoring (:mod:`atlascat.irt.ability`: ML, MAP, WLE) and the
adaptive test's interim estimates (:mod:`atlascat.cat.estimators`)."""
from __future__ import annotations

import numpy as np

__all__ = ["regula_falsi"]


def regula_falsi(fun, a_x, b_x, a_g, b_g, *, xtol=1e-10, max_iter=100,
                 relative_step: bool = True) -> np.ndarray:
    """The root of each bracket [a_x, b_x] (g(a_x) > 0 >= g(b_x)).

    ``fun(pos, x)`` -> (g, slope) at x for the brackets ``pos`` still active (slope: the
    expected -g', I or I + 1/sigma^2). A bracket is done where it is shorter than
    xtol (1 + |x|) or where the Newton step |g| / slope is below xtol (times 1 + |x| with
    ``relative_step``, else absolute); one not done within ``max_iter`` steps gives its
    midpoint (tiny by then).
    """
    out = np.empty(np.size(a_x))
    pos = np.arange(np.size(a_x))
    side = np.zeros(pos.size, dtype=np.int8)
    for _ in range(max_iter):
        if pos.size == 0:
            break
        with np.errstate(divide="ignore", invalid="ignore"):
            x = b_x - b_g * (b_x - a_x) / (b_g - a_g)
        bad = ~np.isfinite(x) | (x <= np.minimum(a_x, b_x)) | (x >= np.maximum(a_x, b_x))
        x = np.where(bad, 0.5 * (a_x + b_x), x)
        g_x, slope = fun(pos, x)
        left = g_x > 0                  # the root lies right of x: x replaces a
        # Illinois: halve the kept end's value when the same side moves twice
        b_g = np.where(left & (side == 1), 0.5 * b_g, b_g)
        a_g = np.where(~left & (side == -1), 0.5 * a_g, a_g)
        a_x, a_g = np.where(left, x, a_x), np.where(left, g_x, a_g)
        b_x, b_g = np.where(left, b_x, x), np.where(left, b_g, g_x)
        side = np.where(left, 1, -1).astype(np.int8)
        tol = xtol * (1.0 + np.abs(x))
        at_x = np.abs(g_x) <= (tol if relative_step else xtol) * slope
        done = (np.abs(b_x - a_x) <= tol) | at_x
        if done.any():
            out[pos[done]] = np.where(at_x[done], x[done], 0.5 * (a_x[done] + b_x[done]))
            keep = ~done
            pos, a_x, b_x, a_g, b_g, side = (pos[keep], a_x[keep], b_x[keep], a_g[keep],
                                             b_g[keep], side[keep])
    if pos.size:
        out[pos] = 0.5 * (a_x + b_x)
    return out
