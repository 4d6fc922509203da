"""Items chosen for the aggregate: the expected reduction of its posterior variance.

Under the joint Gaussian posterior N(m, S), the aggregate's ability part is linear to first
order, average ~ d' theta with d_b = w_b g_b'(m_b) (weights times score-curve slopes). Asking
item j of member b adds Fisher information I_j(m_b) on theta_b: a rank-1 update
S' = S - I_j S e_b e_b' S / (1 + I_j S_bb), which lowers Var(d' theta) by

    V_j = I_j (S d)_b^2 / (1 + I_j S_bb)

(and each member's own Var(g_t'theta_t) by I_j (g_t' S_tb)^2 / (1 + I_j S_bb); the objective
adds those times ``member_weight``). Vectorized over subjects and all candidate items; a round
of ``k`` items is picked greedily, updating S after each pick, with a randomesque draw among
the ``randomesque`` best (Kingsbury and Zara, 1989).
"""
from __future__ import annotations

import numpy as np

__all__ = ["variance_reduction", "pick_round", "expected_information"]

#: Gauss-Hermite nodes / weights (probabilists') of the posterior-weighted information
_GH_X, _GH_W = np.polynomial.hermite_e.hermegauss(7)
_GH_W = _GH_W / _GH_W.sum()


def expected_information(pool, mode, cov, block: int = 256) -> np.ndarray:
    """Fisher information of every item averaged over the member's marginal posterior
    N(m_b, S_bb), (N, G) (posterior-weighted information, van der Linden 1998): a very
    discriminating item is worth its information only where theta may be. Blocks of
    ``block`` subjects bound the (n, G, 7) temporaries."""
    m = pool.member
    a, b, c, u = (p[None, :, None] for p in (pool.a, pool.b, pool.c, pool.u))
    out = np.empty((mode.shape[0], m.size))
    for s0 in range(0, mode.shape[0], block):
        r = slice(s0, s0 + block)
        sd = np.sqrt(np.diagonal(cov[r], axis1=1, axis2=2))[:, m]         # (n, G)
        t = mode[r][:, m][..., None] + sd[..., None] * _GH_X               # (n, G, 7)
        s = 1.0 / (1.0 + np.exp(-np.clip(a * (t - b), -35, 35)))
        P = c + (u - c) * s
        dP = a * (u - c) * s * (1.0 - s)
        out[r] = (dP * dP / np.clip(P * (1.0 - P), 1e-9, None)) @ _GH_W
    return out


def _c2(S, d, slopes, member_weight):
    """(N, B): squared covariance of each theta_b with the targets."""
    c = np.einsum("nij,nj->ni", S, d) ** 2
    if member_weight > 0:
        c = c + member_weight * ((slopes[:, :, None] * S) ** 2).sum(1)
    return c


def variance_reduction(pool, S, d, slopes, info, member_weight: float = 0.0):
    """V (N, G) of every candidate item at the current posterior covariance ``S`` (N, B, B);
    ``info`` (N, G) the items' Fisher information (:func:`expected_information`)."""
    c2 = _c2(S, d, slopes, member_weight)
    sbb = np.diagonal(S, axis1=1, axis2=2)
    m = pool.member
    return info * c2[:, m] / (1.0 + info * sbb[:, m])


def pick_round(pool, S, d, slopes, info, available, k: int, rng, *, randomesque: int = 1,
               member_weight: float = 0.0, bonus=None):
    """Pick up to ``k`` items per subject: (N, k) pool columns, -1 where none is left.

    ``available`` (N, G) bool (not asked, answer obtainable); ``bonus`` (N, G) added to the
    value (e.g. to fill a member's minimum first). ``rng``: one Generator for all rows, or a
    list of one per row (each row's randomesque draws from its own)."""
    S = np.array(S, float, copy=True)
    avail = np.array(available, bool, copy=True)
    n = S.shape[0]
    rows = np.arange(n)
    out = np.full((n, k), -1, int)
    r = max(1, int(randomesque))
    for t in range(k):
        v = variance_reduction(pool, S, d, slopes, info, member_weight)
        if bonus is not None:
            v = v + bonus
        v = np.where(avail, v, -np.inf)
        any_left = np.isfinite(v).any(1)
        if not any_left.any():
            break
        rr = min(r, v.shape[1])
        top = np.argpartition(-v, rr - 1, axis=1)[:, :rr]
        ok = np.isfinite(np.take_along_axis(v, top, 1))
        u = (rng.random(n) if isinstance(rng, np.random.Generator)
             else np.array([g.random() for g in rng], float))
        choice = np.floor(u * np.maximum(ok.sum(1), 1)).astype(int)
        # the best `ok` entries come first after sorting the top r by value
        order = np.argsort(-np.take_along_axis(v, top, 1), axis=1)
        pick = np.take_along_axis(top, order, 1)[rows, choice]
        pick = np.where(any_left, pick, -1)
        out[:, t] = pick
        sel = pick >= 0
        if not sel.any():
            break
        rs, cs = rows[sel], pick[sel]
        avail[rs, cs] = False
        b = pool.member[cs]
        I = info[rs, cs]
        col = S[rs, :, b]                                  # S e_b  (n_sel, B)
        S[rs] -= (I / (1.0 + I * S[rs, b, b]))[:, None, None] * col[:, :, None] * col[:, None, :]
    return out
