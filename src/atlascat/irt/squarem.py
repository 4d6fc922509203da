"""SQUAREM acceleration of the EM (Varadhan and Roland, 2008, scheme S3), one step per item.

From three EM iterates p0 -> p1 -> p2 (internal parameters, flattened item by item, then the
Rasch log-variance if any): r = p1 - p0, v = (p2 - p1) - r and the extrapolation

    p' = p0 - 2 alpha r + alpha^2 v,   alpha_j = -|r_j| / |v_j|   (item j's own coordinates),

with alpha_j clipped to [-step_max, -1] (alpha = -1 gives p2 itself). The EM driver
(:mod:`atlascat.irt.em`) adapts step_max and keeps p' only when its log-posterior is not below
p2's (monotonicity safeguard).

Varadhan, R. and Roland, C. (2008). Simple and globally convergent methods for accelerating
the convergence of any EM algorithm. Scandinavian Journal of Statistics 35, 335-353.
"""
from __future__ import annotations

from . import arrays

__all__ = ["step_lengths", "extrapolate"]


def step_lengths(r, v, n_items: int, k: int, rasch: bool, step_max: float, xp):
    """(alpha per item (and the variance), any alpha at -step_max, every alpha = -1): the
    last two as 0-d device arrays, read back by the caller with its other scalars."""
    n_par = n_items * k
    rr_ = xp.sum(xp.reshape(r[:n_par] ** 2, (n_items, k)), axis=1)
    vv_ = xp.sum(xp.reshape(v[:n_par] ** 2, (n_items, k)), axis=1)
    if rasch:
        rr_ = arrays.concat([rr_, xp.reshape(r[-1] ** 2, (1,))], xp)
        vv_ = arrays.concat([vv_, xp.reshape(v[-1] ** 2, (1,))], xp)
    ok_v = vv_ > 0
    al = -xp.sqrt(rr_ / xp.where(ok_v, vv_, xp.ones_like(vv_)))
    al = xp.where(xp.logical_and(ok_v, xp.isfinite(al)), al, -xp.ones_like(al))
    at_max = xp.any(al <= -step_max)
    al = xp.clip(al, -step_max, -1.0)
    return al, at_max, xp.all(al == -1.0)


def extrapolate(p0, r, v, al, n_items: int, k: int, rasch: bool, lo, hi, xp):
    """p0 - 2 alpha r + alpha^2 v with each item's alpha on its k coordinates, clipped to the
    parameter bounds [lo, hi]."""
    alpha = xp.reshape(xp.stack([al[:n_items]] * k, axis=1), (-1,))
    if rasch:
        alpha = arrays.concat([alpha, al[-1:]], xp)
    return xp.clip(p0 - 2.0 * alpha * r + alpha * alpha * v, lo, hi)
