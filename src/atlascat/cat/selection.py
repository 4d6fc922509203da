"""Item selection: criteria that score every item for every examinee, and the randomesque pick.

A criterion maps the current ability estimates of a block of examinees to a score per item,
shape (n_examinees, n_items), higher = better; the engine masks items already used (score
-inf), applies content balancing and exposure control, ranks the candidates and picks one per
examinee with :func:`pick`. Every function here works row by row (elementwise operations and
per-row selections only), so the result for one examinee never depends on which other
examinees share the block: a batched simulation and a one-examinee session agree exactly.

Criteria
--------
``mfi``    maximum Fisher information at theta (Lord, 1980; Weiss, 1982)
``mfi-cost`` the most Fisher information per unit of the item's cost (the greedy knapsack rule,
           Dantzig, 1957): for a budget of prompt tokens, seconds or fees
``kl``     Kullback-Leibler information integrated over theta +- c / sqrt(n) (Chang and Ying, 1996)
``astrat`` a-stratified: items split into strata of ascending a; stage k uses stratum k and the
           item whose b is closest to theta (Chang and Ying, 1999)
``random`` every available item equally good (a baseline)

The first item is drawn uniformly among the items with |b - theta0| < window (the nearest item
if the window is empty), as in the ATLAS paper's Algorithm 1; afterwards the pick is uniform
among the ``randomesque`` best items (Kingsbury and Zara, 1989).

References
----------
Dantzig, G. B. (1957). Discrete-variable extremum problems. Operations Research, 5(2), 266-288.
Chang, H.-H. and Ying, Z. (1996). A global information approach to computerized adaptive
testing. Applied Psychological Measurement, 20(3), 213-229.
Chang, H.-H. and Ying, Z. (1999). a-Stratified multistage computerized adaptive testing. Applied
Psychological Measurement, 23(3), 211-222.
Kingsbury, G. G. and Zara, A. R. (1989). Procedures for selecting items for computerized adaptive
tests. Applied Measurement in Education, 2(4), 359-375.
"""
from __future__ import annotations

import numpy as np
from ..irt.special import expit

__all__ = [
    "ItemParams",
    "fisher_information",
    "SelectionCriterion",
    "MaxInformation",
    "MaxInformationPerCost",
    "KLInterval",
    "AStratified",
    "RandomSelection",
    "make_criterion",
    "first_item_scores",
    "first_item_pick",
    "ranked_candidates",
    "InfoPruner",
    "pick",
]


class ItemParams:
    """Item parameters with the derived constants the hot path needs, as one (7, J) table.

    Rows: a, b, c, u, u - c, 1 - u, (a (u - c))^2 / phi, 1 / phi (phi the item's dispersion, 1
    unless ``dispersion`` is given: :mod:`atlascat.irt.dispersion`; every information computed
    from the table, Fisher's or Kullback-Leibler's, is then the quasi-likelihood's). ``padded()`` appends a zero-information
    item at position J, so that ``take(idx)`` on an index array of any shape with -1 padding
    (numpy's last position) gathers all parameters in one indexing operation.
    """

    _ROWS = ("a", "b", "c", "u", "uc", "omu", "a2uc2", "inv_phi")

    def __init__(self, a, b, c, u, dispersion=None):
        a, b, c, u = (np.asarray(x, dtype=float).reshape(-1) for x in (a, b, c, u))
        self.table = np.stack([a, b, c, u, u - c, 1.0 - u, (a * (u - c)) ** 2, np.ones_like(a)])
        if dispersion is not None:
            self.table[7] = 1.0 / np.asarray(dispersion, dtype=float).reshape(-1)
            self.table[6] *= self.table[7]
        self._bind()

    def _bind(self):
        for i, name in enumerate(self._ROWS):
            setattr(self, name, self.table[i])

    @classmethod
    def from_bank(cls, bank, dispersion=None) -> "ItemParams":
        return cls(*bank.params, dispersion=dispersion)

    @classmethod
    def _from_table(cls, table) -> "ItemParams":
        out = cls.__new__(cls)
        out.table = table
        out._bind()
        return out

    def __len__(self) -> int:
        return self.table.shape[1]

    def padded(self) -> "ItemParams":
        """A copy with one extra item (a = 0, c = 0, u = 1: information exactly 0) at the end."""
        pad = np.array([[0.0], [0.0], [0.0], [1.0], [1.0], [0.0], [0.0], [1.0]])
        return self._from_table(np.concatenate([self.table, pad], axis=1))

    def take(self, idx) -> "ItemParams":
        """Parameters at positions ``idx`` (any shape); on a padded table -1 is the pad item."""
        return self._from_table(self.table[:, idx])


def fisher_information(theta, p) -> np.ndarray:
    """Fisher information of the 4PL, broadcasting ``theta`` against the parameter arrays.

    ``p``: an :class:`ItemParams` or its (8, ...) ``table`` (e.g. gathered with fancy indexing).

    I(theta) = a^2 (u - c)^2 s^2 (1 - s)^2 / (P Q),  s = sigma(a (theta - b)),
    P = c + (u - c) s,  Q = (1 - u) + (u - c)(1 - s)   (Birnbaum, 1968; Barton and Lord, 1981);
    divided by phi when the table's last row carries the item's dispersion (:class:`ItemParams`).

    Evaluated with e = exp(-|z|) so that s and 1 - s are both formed without cancellation:
    s (1 - s) = e / (1 + e)^2 (|z| capped at 700), and the product is taken as
    a^2 (u - c)^2 [s (1 - s) / P] [s (1 - s) / Q] so that nothing is squared before dividing:
    finite, and accurate down to the smallest normal numbers, for every finite input. Equals ``atlascat.irt.models.item_information`` to ~1e-13
    relative, at a third of its cost.
    """
    if isinstance(p, np.ndarray):  # an (8, ...) parameter table (ItemParams.table layout)
        a, b, c, uc, omu, a2uc2 = p[0], p[1], p[2], p[4], p[5], p[6]
    else:
        a, b, c, uc, omu, a2uc2 = p.a, p.b, p.c, p.uc, p.omu, p.a2uc2
    z = np.subtract(theta, b)
    z *= a
    pos = z >= 0
    np.abs(z, out=z)
    np.minimum(z, 700.0, out=z)       # e >= 1e-304: P Q > 0, the numerator underflows first
    np.negative(z, out=z)
    e = np.exp(z, out=z)
    r = e + 1.0
    np.reciprocal(r, out=r)           # r = 1 / (1 + e)
    er = e * r                        # e / (1 + e)
    s1 = np.where(pos, r, er)         # sigma(z)
    s0 = np.where(pos, er, r)         # 1 - sigma(z)
    s1 *= uc
    s1 += c                           # P
    s0 *= uc
    s0 += omu                         # Q
    er *= r                           # s (1 - s)
    np.divide(er, s0, out=s0)         # s (1 - s) / Q
    er /= s1                          # s (1 - s) / P
    er *= s0
    er *= a2uc2
    return er


# ---------------------------------------------------------------------------------- criteria
class SelectionCriterion:
    """Base class: ``scores(theta, n_items, used, params)`` -> (n, n_items) array, higher = better.

    ``theta``: (n,) current estimates; ``n_items``: (n,) items answered so far; ``used``: (n, J)
    boolean mask of items no longer available (the engine sets those scores to -inf anyway).
    ``params``: the bank's :class:`ItemParams` (``a``, ``b``, ``c``, ``u`` arrays).
    ``nonnegative`` tells content balancing that scores can be multiplied by priority factors.
    A subclass of your own goes in ``CATConfig(selection=obj)`` (``Selection(criterion=obj)``);
    the engine uses it after the first item, with randomesque, exposure control and the budget.
    """

    name = "base"
    nonnegative = True

    def scores(self, theta, n_items, used, params: ItemParams) -> np.ndarray:  # pragma: no cover
        raise NotImplementedError(f"{type(self).__name__} defines no scores(theta, n_items, "
                                  "used, params): a SelectionCriterion returns one score per "
                                  "(examinee, item), higher = better")

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class MaxInformation(SelectionCriterion):
    """Maximum Fisher information at the current theta: score_j = I_j(theta_hat)."""

    name = "mfi"

    def scores(self, theta, n_items, used, params):
        return fisher_information(np.asarray(theta, dtype=float)[:, None], params)


class MaxInformationPerCost(SelectionCriterion):
    """The most Fisher information per unit cost: score_j = I_j(theta_hat) / c_j.

    Under a budget this is the greedy rule of the knapsack problem (most value per unit of
    weight; Dantzig, 1957) with the information as value; an item of cost 0 that informs is
    taken first: it scores above every costed item of the row (the row's largest ratio + 1 +
    its information, so free items rank by information among themselves; a finite score, as
    the engine's ranking counts only finite scores as candidates). With equal costs it ranks
    items as :class:`MaxInformation`.
    """

    name = "mfi-cost"
    nonnegative = True

    def __init__(self, cost):
        self.cost = np.asarray(cost, dtype=float).reshape(-1)

    def scores(self, theta, n_items, used, params):
        info = fisher_information(np.asarray(theta, dtype=float)[:, None], params)
        free = self.cost == 0
        out = info / np.where(free, 1.0, self.cost)
        if free.any():
            costed = np.where(free[None, :], -np.inf, out)
            top = np.max(costed, axis=1, initial=0.0)
            top = np.where(np.isfinite(top), top, 0.0)
            out[:, free] = np.where(info[:, free] > 0, top[:, None] + 1.0 + info[:, free], 0.0)
        return out

    def __repr__(self) -> str:
        return "MaxInformationPerCost()"


class KLInterval(SelectionCriterion):
    """Kullback-Leibler information over an interval (Chang and Ying, 1996).

    KL_j = integral over [theta - d, theta + d] of
           P_j(t) log(P_j(t) / P_j(theta)) + Q_j(t) log(Q_j(t) / Q_j(theta)) dt,
    d = width / sqrt(max(n, 1)); the integral by ``points``-point Gauss-Legendre. On a bank
    of continuous scores each item's KL is divided by its dispersion phi_j, as its
    quasi-log-likelihood is (:mod:`atlascat.irt.dispersion`).
    """

    name = "kl"

    def __init__(self, width: float = 3.0, points: int = 7):
        self.width = float(width)
        self.points = int(points)
        self._x, self._w = np.polynomial.legendre.leggauss(self.points)

    @staticmethod
    def _pq(theta, params):
        """P and Q = 1 - P, each formed without cancellation (Q from sigma(-z))."""
        z = params.a * (theta[:, None] - params.b)
        p = params.c + params.uc * expit(z)
        q = params.omu + params.uc * expit(-z)
        return p, q

    def scores(self, theta, n_items, used, params):
        theta = np.asarray(theta, dtype=float)
        delta = self.width / np.sqrt(np.maximum(np.asarray(n_items, dtype=float), 1.0))
        with np.errstate(divide="ignore", invalid="ignore"):
            p0, q0 = self._pq(theta, params)
            lp0, lq0 = np.log(p0), np.log(q0)
            total = np.zeros_like(p0)
            for x, w in zip(self._x, self._w):
                p, q = self._pq(theta + delta * x, params)
                kl = p * (np.log(p) - lp0) + q * (np.log(q) - lq0)
                total += (w * delta)[:, None] * np.nan_to_num(kl, nan=0.0, posinf=0.0,
                                                              neginf=0.0)
        return np.maximum(total, 0.0) * params.inv_phi

    def __repr__(self) -> str:
        return f"KLInterval(width={self.width}, points={self.points})"


class AStratified(SelectionCriterion):
    """a-stratified selection (Chang and Ying, 1999).

    Items are sorted by a (ascending, ties by position) and split into ``strata`` groups of
    (nearly) equal size. An examinee with n items answered is in stage
    k = min(n // stage_items, strata - 1); the eligible items are the available ones of stratum
    k (of the nearest stratum with items left, if k is used up), scored by -|b_j - theta|.
    """

    name = "astrat"
    nonnegative = False

    def __init__(self, a, strata: int = 4, stage_items: int = 8):
        a = np.asarray(a, dtype=float)
        self.strata = int(min(strata, a.size))
        self.stage_items = int(stage_items)
        order = np.argsort(a, kind="stable")
        self.stratum = np.empty(a.size, dtype=np.intp)
        for k, block in enumerate(np.array_split(order, self.strata)):
            self.stratum[block] = k

    def scores(self, theta, n_items, used, params):
        theta = np.asarray(theta, dtype=float)
        stage = np.minimum(np.asarray(n_items) // self.stage_items, self.strata - 1)
        dist = np.abs(self.stratum[None, :] - stage[:, None]).astype(float)
        dist[used] = np.inf
        nearest = dist.min(axis=1, keepdims=True)
        out = -np.abs(params.b[None, :] - theta[:, None])
        out[dist != nearest] = -np.inf
        return out

    def __repr__(self) -> str:
        return f"AStratified(strata={self.strata}, stage_items={self.stage_items})"


class RandomSelection(SelectionCriterion):
    """Every available item scores 0: the pick is uniform among all of them."""

    name = "random"

    def scores(self, theta, n_items, used, params):
        return np.zeros((np.asarray(theta).size, len(params)))


def criterion_scores(criterion, theta, n_items, used, params) -> np.ndarray:
    """``criterion.scores(...)`` as a float (n, J) array the engine may write into; a custom
    criterion's scores of another shape are a ConfigError naming it, not a broadcast error."""
    scores = criterion.scores(theta, n_items, used, params)
    if not isinstance(scores, np.ndarray) or scores.dtype.kind != "f":
        scores = np.asarray(scores, dtype=float)
    if scores.shape != used.shape:
        from ..errors import ConfigError

        raise ConfigError(f"{type(criterion).__name__}.scores returned shape {scores.shape}; a "
                          f"selection criterion gives one score per (examinee, item): shape "
                          f"{used.shape} here (the same scores for everyone: "
                          "np.tile(row, (len(theta), 1)))")
    return scores


def make_criterion(config, params: ItemParams, cost=None) -> SelectionCriterion:
    """The criterion of ``config.selection``: a named one, or the user's object itself.
    ``cost``: each item's cost (the engine's, for "mfi-cost")."""
    sel = config.selection
    if sel.is_custom:
        return sel.criterion
    if sel.criterion == "mfi":
        return MaxInformation()
    if sel.criterion == "mfi-cost":
        return MaxInformationPerCost(cost)
    if sel.criterion == "kl":
        return KLInterval(sel.kl_width, sel.kl_points)
    if sel.criterion == "astrat":
        return AStratified(params.a, sel.astrat_strata, config.stage_items)
    return RandomSelection()


def first_item_scores(used, b, theta0: float, window: float):
    """Scores and pick sizes for examinees with no item answered yet.

    Items with |b - theta0| < window score 1 and the pick is uniform among all of them (k = their
    number); if none is available the nearest available item is taken (k = 1).
    Returns ``(scores (n, J), k (n,))``.
    """
    dist = np.abs(np.asarray(b) - theta0)
    inside = (dist < window)[None, :] & ~used
    count = inside.sum(axis=1)
    scores = np.where(inside, 1.0, -np.inf)
    empty = count == 0
    if empty.any():
        scores[empty] = np.where(used[empty], -np.inf, -dist[None, :])
    k = np.where(empty, 1, count)
    return scores, k


def first_item_pick(used, b, theta0: float, window: float, u) -> np.ndarray:
    """The first item of every row, as :func:`pick` on the ranking of
    :func:`first_item_scores` gives it, without ranking the bank: the item at position
    min(floor(u k), k - 1) of the k available items with |b - theta0| < window in bank order,
    or, where there is none, the available item nearest theta0 (the first of equals); -1 where
    no item is available."""
    dist = np.abs(np.asarray(b) - theta0)
    inside = (dist < window)[None, :] & ~used
    count = inside.sum(axis=1)
    pos = np.minimum((np.asarray(u) * count).astype(np.intp), np.maximum(count - 1, 0))
    items = np.argmax(np.cumsum(inside, axis=1) > pos[:, None], axis=1)
    empty = np.flatnonzero(count == 0)
    if empty.size:
        masked = np.where(used[empty], np.inf, dist[None, :])
        nearest = np.argmin(masked, axis=1)
        ok = np.isfinite(masked[np.arange(empty.size), nearest])
        items[empty] = np.where(ok, nearest, -1)
    return items


# ---------------------------------------------------------------------------------- picking
def ranked_candidates(scores: np.ndarray, n_cand: int, ids: np.ndarray | None = None):
    """The ``n_cand`` best items of every row, best first, by the total order (score desc, id asc).

    ``ids`` (same shape as ``scores``) are the bank positions of the columns (default: the column
    index); they break ties, so the result is a function of the row's scores alone, whatever
    algorithm picks the block. Returns ``(cand, n_finite)``: cand (n, min(n_cand, n_cols)) bank
    positions, -1 where the row has fewer items with a finite score; ``n_finite`` (n,) the
    number of real candidates.

    ``argpartition`` finds the block; a row where more items tie at the boundary than there are
    slots (or with fewer finite scores than slots) is fully sorted instead.
    """
    scores = np.where(np.isnan(scores), -np.inf, scores)
    n, n_cols = scores.shape
    r = np.arange(n)[:, None]  # row index for a[r, idx] = take_along_axis(a, idx, 1), less overhead
    if ids is None:
        ids = np.broadcast_to(np.arange(n_cols), scores.shape)
    if n_cand >= n_cols:
        order = np.lexsort((ids, -scores), axis=-1)
    else:
        part = np.argpartition(-scores, n_cand - 1, axis=1)[:, :n_cand]
        vals = scores[r, part]
        kth = vals.min(axis=1)
        ties = (scores >= kth[:, None]).sum(axis=1) > n_cand
        order = part[r, np.lexsort((ids[r, part], -vals), axis=-1)]
        if ties.any():
            full = np.lexsort((ids[ties], -scores[ties]), axis=-1)[:, :n_cand]
            order[ties] = full
    vals = scores[r, order]
    finite = np.isfinite(vals)
    cand = ids[r, order]
    return np.where(finite, cand, -1), finite.sum(axis=1), vals


class InfoPruner:
    """Exact shortcut for maximum-information selection on large banks (u = 1 items only).

    The theta range is cut into cells of width ``h``; for every cell (when a test first visits
    it) an upper bound of each item's information over the cell is computed: the larger of the
    values at the two cell edges, or the item's peak information if its peak lies inside the
    cell. This is a bound because the 3PL information is unimodal in theta, with its peak at
    theta* = b + log((1 + sqrt(1 + 8c)) / 2) / a (Birnbaum, 1968); it is inflated by 1e-9
    relative against rounding. Items are sorted by bound per cell. For an examinee in cell
    g, the exact information of the first M items of that order is computed; if the k-th best of
    them (items still available) exceeds the bound of item M + 1, no other item can enter the
    top k, and the result equals the full computation exactly. Rows where the test fails are
    handled by the full computation.
    """

    def __init__(self, params: ItemParams, theta_range, h: float = 0.05, keep: int = 512):
        lo, hi = float(theta_range[0]), float(theta_range[1])
        self.lo, self.h = lo, float(h)
        self.n_cells = int(np.ceil((hi - lo) / self.h))
        self.hi = lo + self.n_cells * self.h
        self._params = params
        self._edges = lo + self.h * np.arange(self.n_cells + 1)
        a, b, c = params.a, params.b, params.c
        nz = a != 0
        z_star = np.log((1.0 + np.sqrt(1.0 + 8.0 * c)) / 2.0)
        t_star = np.where(nz, b + z_star / np.where(nz, a, 1.0), np.nan)
        inside = nz & (t_star >= lo) & (t_star < self.hi)
        self._peak_items = j = np.flatnonzero(inside)
        self._peak = fisher_information(t_star[j][:, None], params.take(j[:, None]))[:, 0]
        self._peak_cell = np.minimum(((t_star[j] - lo) / self.h).astype(np.intp),
                                     self.n_cells - 1)
        self.keep = int(min(keep, len(params) - 1))
        self._order = np.zeros((self.n_cells, self.keep), dtype=np.intp)
        self._bound = np.zeros((self.n_cells, self.keep + 1))
        # every cell's parameter table in its order, (n_cells, 7, keep): the first m items of a
        # cell are one contiguous block per parameter (:meth:`table_of`)
        self._table = np.zeros((self.n_cells, len(ItemParams._ROWS), self.keep))
        self._ready = np.zeros(self.n_cells, dtype=bool)

    def prepare(self, cells) -> None:
        """Compute the bounds and the order of the given cells (each cell once, when first
        needed: a test visits a fraction of the range; every cell's figures depend on its own
        edges and peaks only, so they are the same whichever cells are computed together)."""
        if self._ready[cells].all():
            return
        need = np.zeros(self.n_cells, dtype=bool)
        need[cells] = True
        need &= ~self._ready
        g = np.flatnonzero(need)
        if g.size == 0:
            return
        at = np.zeros(self.n_cells + 1, dtype=bool)
        at[g] = at[g + 1] = True
        e = np.flatnonzero(at)
        info = np.empty((self.n_cells + 1, len(self._params)))
        info[e] = fisher_information(self._edges[e][:, None], self._params)
        ub = np.maximum(info[g], info[g + 1])
        row = np.full(self.n_cells, -1, dtype=np.intp)
        row[g] = np.arange(g.size)
        here = row[self._peak_cell] >= 0
        r, j = row[self._peak_cell[here]], self._peak_items[here]
        ub[r, j] = np.maximum(ub[r, j], self._peak[here])
        ub = ub * (1.0 + 1e-9) + 1e-300
        top = np.argpartition(-ub, self.keep, axis=1)[:, :self.keep + 1]
        top_ub = np.take_along_axis(ub, top, axis=1)
        srt = np.argsort(-top_ub, axis=1, kind="stable")
        self._order[g] = np.take_along_axis(top, srt, axis=1)[:, :self.keep]
        self._bound[g] = np.take_along_axis(top_ub, srt, axis=1)
        self._table[g] = self._params.table[:, self._order[g]].transpose(1, 0, 2)
        self._ready[g] = True

    @property
    def order(self) -> np.ndarray:
        """(n_cells, keep): every cell's items by their bound, largest first (all computed)."""
        self.prepare(np.arange(self.n_cells))
        return self._order

    @property
    def bound(self) -> np.ndarray:
        """(n_cells, keep + 1): the bounds in that order (all computed)."""
        self.prepare(np.arange(self.n_cells))
        return self._bound

    def top(self, cell, m: int) -> np.ndarray:
        """The first ``m`` items of each cell (cells prepared by :meth:`cells`)."""
        return self._order[cell, :m]

    def table_of(self, cell, m: int) -> np.ndarray:
        """The (8, n, m) parameter table of :meth:`top` (cells prepared by :meth:`cells`)."""
        return self._table[cell, :, :m].transpose(1, 0, 2)

    def bound_after(self, cell, m: int) -> np.ndarray:
        """The bound of item ``m + 1`` of each cell's order (cells prepared by :meth:`cells`)."""
        return self._bound[cell, m]

    @staticmethod
    def applicable(params: ItemParams) -> bool:
        return bool(np.all(params.u == 1.0)) and len(params) >= 2000

    def cells(self, theta) -> tuple[np.ndarray, np.ndarray]:
        """Cell of every theta and whether it lies inside the precomputed range."""
        theta = np.asarray(theta, dtype=float)
        ok = (theta >= self.lo) & (theta <= self.hi)
        cell = ((theta - self.lo) / self.h).astype(np.intp)
        np.minimum(cell, self.n_cells - 1, out=cell)  # np.clip, without its Python-level wrapper
        np.maximum(cell, 0, out=cell)
        self.prepare(cell[ok])
        return cell, ok


def pick(cand: np.ndarray, n_finite: np.ndarray, k, u: np.ndarray) -> np.ndarray:
    """Uniform pick among the first min(k, n_finite) candidates of every row with one uniform.

    Position floor(u * k_eff) of the ranked list; -1 where a row has no candidate.
    """
    k_eff = np.minimum(np.asarray(k), n_finite)
    pos = np.minimum((np.asarray(u) * k_eff).astype(np.intp), np.maximum(k_eff - 1, 0))
    item = cand[np.arange(cand.shape[0]), pos]
    return np.where(k_eff > 0, item, -1)
