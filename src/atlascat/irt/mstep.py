"""M-step of the EM: a batched Newton ascent of every item's complete-data objective.

For every item at once maximize the complete-data log-likelihood plus log priors::

    l_j = sum_q r_jq log P_j(x_q) + (n_jq - r_jq) log Q_j(x_q) + log p(a_j) + log p(c_j)

over the internal parameters (:class:`atlascat.irt.itemmodel.ItemModel`): exact gradient and
Hessian, Newton steps where the Hessian is negative definite (batched Cholesky,
:func:`pd_solve`) and Fisher scoring elsewhere (so every step is an ascent direction), a step
cap and a per-item backtracking line search that never lets l_j decrease; the whole sequence is
therefore a generalized EM (Bock and Aitkin, 1981; Mislevy, 1986).
"""
from __future__ import annotations

from . import arrays, fused
from .itemmodel import ItemModel

__all__ = ["mstep", "pd_solve", "armijo_ok", "line_search_masked", "line_search_host",
           "set_free", "PRED_REL"]

PRED_REL = 1e-12  # M-step: stop an item when its predicted gain is below this x |objective|
#: accelerator path (``sync=False``): read back one flag per Newton step and per halving and
#: leave a loop once no item is left in it (the iterates are the same as running every loop its
#: full count: a loop with no active item changes nothing); False runs the full counts with no
#: read at all (benchmarks/gpu measures both)
EARLY_EXIT = True


def pd_solve(A, g, rel_tol: float = 1e-8):
    """Solve A s = g for a batch of small symmetric matrices by Cholesky.

    ``A`` is a k x k nested list and ``g`` a length-k list of arrays of shape (n,). Returns
    ``(s, ok)``;
    ``ok`` is False where A is not numerically positive definite (pivot <= rel_tol * largest
    diagonal entry), and there ``s`` is meaningless. Loops run over the k <= 4 columns only.
    """
    xp = arrays.namespace(g[0])
    k = len(g)
    diag = [xp.abs(A[i][i]) for i in range(k)]
    big = diag[0]
    for v in diag[1:]:
        big = xp.maximum(big, v)
    tiny = rel_tol * big + 1e-300
    L = [[None] * k for _ in range(k)]
    ok = None
    for j in range(k):
        d = A[j][j]
        for p in range(j):
            d = d - L[j][p] * L[j][p]
        okj = d > tiny
        ok = okj if ok is None else xp.logical_and(ok, okj)
        ljj = xp.sqrt(xp.maximum(d, tiny))
        L[j][j] = ljj
        for i in range(j + 1, k):
            v = A[i][j]
            for p in range(j):
                v = v - L[i][p] * L[j][p]
            L[i][j] = v / ljj
    y = [None] * k
    for i in range(k):
        v = g[i]
        for p in range(i):
            v = v - L[i][p] * y[p]
        y[i] = v / L[i][i]
    s = [None] * k
    for i in reversed(range(k)):
        v = y[i]
        for p in range(i + 1, k):
            v = v - L[p][i] * s[p]
        s[i] = v / L[i][i]
    return s, ok


def mstep(model: ItemModel, th, r, nr, x, max_newton: int = 8, step_tol: float = 1e-9,
          max_halvings: int = 8, sync: bool | None = None):
    """Batched Newton ascent of every item's complete-data objective (all items at once).

    For each item: gradient g and Hessian H; the Newton step s = -H^-1 g where H is negative
    definite (a batched Cholesky factorization decides), else the Fisher-scoring step
    s = I^-1 g with the expected information I (plus a tiny ridge), so every step is an ascent
    direction. Steps are capped at 2 internal units per coordinate and cut at the parameter
    bounds; a backtracking (Armijo) line search accepts t s only if the objective rises by at
    least 1e-4 t g.s (up to rounding). Items whose predicted gain g.s is at rounding level,
    whose step is below ``step_tol`` or whose line search fails stop iterating.

    ``nr`` is n - r, (n_items, n_nodes), or the node masses n, (n_nodes,), for dense data.
    ``sync`` (default: True on host arrays) lets the loops read scalars back to exit early and
    restrict work to the items still active; with ``sync=False`` (accelerators) the loops run
    on masks over all items, reading back one flag per Newton step and per halving to stop once
    no item is left (:data:`EARLY_EXIT`; False: every loop its full count, nothing read back).
    On a CUDA device all of it is one kernel launch (:mod:`atlascat.irt.fused`) when CuPy is
    there. All give the same iterates.
    """
    xp = arrays.namespace(th, r)
    sync = arrays.can_sync(xp) if sync is None else sync
    if not sync:   # on a CUDA device: every item's iterations in one kernel, when it can run
        out = fused.cuda_mstep(model, th, r, nr, x, max_newton, step_tol, max_halvings,
                               PRED_REL)
        if out is not None:
            return out
    f = model.free
    k = len(f)
    lo = [float(model.lo[j]) for j in f]
    hi = [float(model.hi[j]) for j in f]
    dense_n = nr.ndim == 1
    nr_full = nr[None, :] - r if dense_n else nr
    th = th + 0.0  # a copy: the host path updates rows in place
    active = xp.zeros_like(th[:, 1]) == 0.0
    f0 = None
    for _ in range(max_newton):
        if sync:
            if not bool(xp.any(active)):
                break
            sub = not bool(xp.all(active))
        else:
            sub = False
            if EARLY_EXIT and f0 is not None and not bool(xp.any(active)):
                break  # nothing left to move: the remaining passes would change nothing
        ta = th[active] if sub else th
        ra = r[active] if sub else r
        nra = nr_full[active] if sub else nr_full
        fa = (f0[active] if sub else f0) if f0 is not None else None
        if fa is None:
            fa, g, h, hf = model.derivative_terms(ta, ra, nra, x, with_value=True, both=True)
            f0 = fa
        else:
            g, h, hf = model.derivative_terms(ta, ra, nra, x, both=True)
        step, ok = pd_solve([[-v for v in row] for row in h], g)
        if not sync or not bool(xp.all(ok)):  # Fisher scoring where H is not negative definite
            info = [[-v for v in row] for row in hf]
            big = xp.abs(info[0][0])
            for i in range(k):
                for j in range(k):
                    big = xp.maximum(big, xp.abs(info[i][j]))
            ridge = 1e-8 * big + 1e-12
            for i in range(k):
                info[i][i] = info[i][i] + ridge
            sf, _ = pd_solve(info, g)
            step = [xp.where(ok, s_, t_) for s_, t_ in zip(step, sf)]
        big = xp.abs(step[0])
        for s_ in step[1:]:
            big = xp.maximum(big, xp.abs(s_))
        scale = xp.minimum(xp.ones_like(big), 2.0 / xp.maximum(big, xp.full_like(big, 1e-300)))
        # a step pushing a parameter through its bound is cut at the bound
        base = [ta[:, j] for j in f]
        step = [xp.clip(b_ + s_ * scale, lo[i], hi[i]) - b_
                for i, (b_, s_) in enumerate(zip(base, step))]
        pred = step[0] * g[0]
        smax = xp.abs(step[0])
        for i in range(1, k):
            pred = pred + step[i] * g[i]
            smax = xp.maximum(smax, xp.abs(step[i]))
        go = xp.logical_and(pred > PRED_REL * (1.0 + xp.abs(fa)), smax > step_tol)
        if not sync:
            go = xp.logical_and(go, active)
        if sync:
            cand_cols, new_f, moved, t = line_search_host(model, ta, ra, nra, x, base, step,
                                                          fa, pred, go, max_halvings)
        else:
            cand_cols, new_f, moved, t = line_search_masked(model, ta, ra, nra, x, base, step,
                                                            fa, pred, go, max_halvings,
                                                            early_exit=EARLY_EXIT)
        cand = set_free(ta, f, cand_cols, xp)
        keep = xp.logical_and(moved, t * smax > step_tol)
        if sub:
            th[active] = cand
            f0[active] = new_f
            act_new = xp.zeros_like(active)
            act_new[active] = keep
            active = act_new
        else:
            th = cand
            f0 = new_f
            active = xp.logical_and(active, keep)
    return th


def armijo_ok(model, trial, ft, fa, t, pred, xp=None):
    """Armijo acceptance of trial points, with a rounding allowance so that converged items
    can still take their last tiny Newton steps (|f| ~ 1e2-1e5, relative precision ~1e-16 per
    term); a 4PL trial must also keep c < u."""
    xp = arrays.namespace(ft) if xp is None else xp
    ok = xp.logical_and(xp.isfinite(ft), ft >= fa + 1e-4 * t * pred - 1e-13 * xp.abs(fa))
    if model.has_u:
        ok = xp.logical_and(ok, model.feasible(trial, xp))
    return ok


def line_search_masked(model, ta, r, nr, x, base, step, fa, pred, go, max_halvings,
                       early_exit: bool = False):
    """Backtracking on t = 1, 1/2, ..., 2^-(max_halvings-1) with masks (the accelerator path):
    a fixed count with nothing read back, or, with ``early_exit``, one flag read per halving
    and a stop once no item is pending (the same result: a pass with none pending changes
    nothing). Returns (columns, objective, moved, t)."""
    xp = arrays.namespace(fa)
    free = model.free
    t = xp.ones_like(fa)
    new_f, moved, pending, cand_cols = fa, xp.zeros_like(go), go, base
    for _ in range(max_halvings):
        if early_exit and not bool(xp.any(pending)):
            break
        trial_cols = [b_ + t * s_ for b_, s_ in zip(base, step)]
        trial = set_free(ta, free, trial_cols, xp)
        ft = model.objective(trial, r, nr, x, xp)
        okt = armijo_ok(model, trial, ft, fa, t, pred, xp)
        acc = xp.logical_and(pending, okt)
        cand_cols = [xp.where(acc, tc, cc) for tc, cc in zip(trial_cols, cand_cols)]
        new_f = xp.where(acc, ft, new_f)
        moved = xp.logical_or(moved, acc)
        pending = xp.logical_and(pending, xp.logical_not(okt))
        t = xp.where(pending, 0.5 * t, t)
    return cand_cols, new_f, moved, t


def line_search_host(model, ta, r, nr, x, base, step, fa, pred, go, max_halvings):
    """:func:`line_search_masked`'s result in at most two objective calls (host arrays).

    t = 1 for every item in ``go``; then, for the items that failed, every remaining step
    length 2^-h (h = 1, ..., max_halvings - 1) stacked into one call, the largest acceptable
    one winning: the same point as trying them one after another, without one pass of
    Python overhead per halving (items at rounding level fail every halving).
    """
    xp = arrays.namespace(fa)
    free = model.free
    t = xp.ones_like(fa)
    new_f, moved, cand_cols = fa, xp.zeros_like(go), list(base)
    pending = go
    for ts in ([1.0], [0.5 ** h for h in range(1, max_halvings)]):
        if not ts or not bool(xp.any(pending)):
            break
        whole = bool(xp.all(pending))
        sel = (lambda v: v) if whole else (lambda v: v[pending])  # noqa: E731
        b_s, s_s, fa_s, pr_s = [sel(v) for v in base], [sel(v) for v in step], sel(fa), sel(pred)
        n_s, H = int(fa_s.shape[0]), len(ts)
        tcol = arrays.concat([xp.full_like(fa_s, tv) for tv in ts], xp)          # (H n_s,)
        trial_cols = [arrays.concat([b_] * H, xp) + tcol * arrays.concat([s_] * H, xp)
                      for b_, s_ in zip(b_s, s_s)]
        tile = (lambda v: v) if H == 1 else (lambda v: arrays.concat([v] * H, xp))  # noqa: E731
        trial = set_free(tile(sel(ta)), free, trial_cols, xp)
        ft = model.objective(trial, tile(sel(r)), tile(sel(nr)), x, xp)
        ok = armijo_ok(model, trial, ft, tile(fa_s), tcol, tile(pr_s), xp)
        # the first acceptable step length of each item (H = none)
        chosen = xp.full_like(fa_s, float(H))
        for h in reversed(range(H)):
            chosen = xp.where(ok[h * n_s:(h + 1) * n_s], float(h), chosen)
        got = chosen < H
        new_t = xp.full_like(fa_s, 0.5 ** (max_halvings if H > 1 else 1))
        pick_f, pick_cols = fa_s, b_s
        for h in range(H):
            at = chosen == float(h)
            seg = slice(h * n_s, (h + 1) * n_s)
            new_t = xp.where(at, ts[h], new_t)
            pick_f = xp.where(at, ft[seg], pick_f)
            pick_cols = [xp.where(at, tc[seg], pc) for tc, pc in zip(trial_cols, pick_cols)]
        if whole:
            t, new_f, moved, cand_cols = new_t, pick_f, got, pick_cols
        else:
            t, new_f, moved = t + 0.0, new_f + 0.0, moved | False
            t[pending], new_f[pending], moved[pending] = new_t, pick_f, got
            for i, pc in enumerate(pick_cols):
                col = cand_cols[i] + 0.0
                col[pending] = pc
                cand_cols[i] = col
            got_full = xp.zeros_like(pending)
            got_full[pending] = got
            got = got_full
        pending = xp.logical_and(pending, xp.logical_not(got))
    return cand_cols, new_f, moved, t


def set_free(th, free, cols, xp=None):
    """``th`` with its ``free`` columns replaced by ``cols`` (a new array, no setitem)."""
    xp = arrays.namespace(th) if xp is None else xp
    out = [th[:, j] for j in range(th.shape[1])]
    for j, col in zip(free, cols):
        out[j] = col
    return xp.stack(out, axis=1)
