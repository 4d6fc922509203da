"""The engine core: the state of n examinees and one vectorized CAT step.

One step for a block of examinees (rows): select the next item (first item uniform among
|b - theta0| < window, then a randomesque pick among the k best by the selection criterion,
with exposure control, content balancing and the budget), record the answer, update the
posterior, estimate theta and SE, check the stopping rules. Both
:func:`~atlascat.cat.simulate.simulate_cat` (n examinees) and
:class:`~atlascat.cat.session.CATSession` (n = 1) run on it; every computation is row-wise.

Estimation: the log-posterior on the grid gains y log P_j + (1 - y) log Q_j per answer
(O(n_nodes); divided by the item's dispersion phi_j on a bank of continuous scores, the
extended quasi-likelihood of :mod:`atlascat.irt.dispersion`); EAP theta = sum_q w_q theta_q / sum_q w_q and the posterior SD follow (Bock and
Mislevy, 1982). The SE is the posterior SD or, as catR's ``semTheta`` for a Bayesian estimate,
1 / sqrt(sum_j I_j(theta) + 1 / prior_sd^2) over the administered items (``se_method``).
With ``estimator`` "map", "ml" or "wle" theta is instead the root of its estimating equation
and the SE catR's ``semTheta`` (:mod:`atlascat.cat.estimators`; the posterior is kept all
the same, for ``posterior_sd`` and the batched rounds).

Bock, R. D. and Mislevy, R. J. (1982). Adaptive EAP estimation of ability in a microcomputer
environment. Applied Psychological Measurement, 6(4), 431-444.
Magis, D. and Raiche, G. (2012). Random generation of response patterns under computerized
adaptive testing with the R package catR. Journal of Statistical Software, 48(8).
"""
from __future__ import annotations

import numpy as np

from ..irt.bank import ItemBank
from . import estimators as E
from .config import CATConfig
from .rounds import _JointRounds
from .selection import (criterion_scores, first_item_pick, first_item_scores, fisher_information, pick,
                        ranked_candidates)
from .tables import _tables

_BLOCK_ROWS = 32  # rows per block in the (examinee x item) selection pass: keeps it in cache
_BLOCK_CELLS = 32 * 2048  # ... or more rows on a small bank (ARC's 239 items: 274 rows, a
# quarter less time than 32 in the per-block overhead; every row's result is the same)
_SUM_BLOCK = 128  # column block of the test-information sum (see _Engine._test_information)


class _Engine(_JointRounds):
    """State of n examinees and the vectorized operations of one CAT step (joint rounds of k
    items: :class:`~atlascat.cat.rounds._JointRounds`)."""

    def __init__(self, bank: ItemBank, config: CATConfig, n: int, exposure=None):
        self.tab = tab = _tables(bank, config)
        self.exposure = exposure
        self.config = config
        self.n = n
        J = tab.n_items
        # history: whole sum blocks; each item is asked at most once, so no test outlasts the bank
        W = -(-min(config.stopping.max_items, J) // _SUM_BLOCK) * _SUM_BLOCK
        self.log_post = np.tile(tab.log_prior, (n, 1))
        self.n_items = np.zeros(n, dtype=np.intp)
        self.n_skipped = np.zeros(n, dtype=np.intp)
        self.n_used = np.zeros(n, dtype=np.intp)
        self.used = np.zeros((n, J), dtype=bool)
        self.items = np.full((n, W), -1, dtype=np.intp)
        self.scores = np.full((n, W), np.nan)
        self.theta_hist = np.full((n, W), np.nan)
        self.se_hist = np.full((n, W), np.nan)
        self.theta = np.zeros(n)
        self.se = np.zeros(n)
        self.post_sd = np.zeros(n)
        self.test_info = np.zeros(n)
        self.spent = np.zeros(n)
        self.done = np.zeros(n, dtype=bool)
        self.stop_reason = np.full(n, "", dtype=object)
        self.area_counts = None if tab.content is None else np.zeros((n, tab.content.n_areas))
        self.sh_trials = np.zeros(J, dtype=np.intp)   # Sympson-Hetter: times selected for a trial
        self.wide = np.zeros(n, dtype=bool)  # the last pruned search needed the wide list
        self.sh_rejected: list[list[int]] | None = None  # per-row rejections (sessions only)
        self._best_cache = None
        self._spread = None  # preposterior SD of theta per row during a batched round, or None
        self._design = None  # (start posterior, node precision) per row: method "mepv"
        # MAP / ML / WLE: S, I, J of the answers so far at every node (cat.estimators)
        self.grids = None
        if config.estimation.method != "eap":
            self.grids = np.zeros((3, n, tab.nodes.size))
        self._estimate(np.arange(n))
        if config.stopping.max_items < 1:  # pragma: no cover - validated by CATConfig
            self.done[:] = True

    # -------------------------------------------------------------- shortcuts for rules
    @property
    def prior_precision(self) -> float:
        return self.tab.prior_precision

    @property
    def item_cost(self) -> np.ndarray:
        return self.tab.item_cost

    @property
    def uniform_cost(self) -> bool:
        return self.tab.uniform_cost

    # -------------------------------------------------------------- estimation
    def _estimate(self, rows):
        tab = self.tab
        lpost = self.log_post[rows]
        w = np.exp(lpost - lpost.max(axis=1, keepdims=True))
        s = w.sum(axis=1)
        theta = (w * tab.nodes).sum(axis=1) / s
        dev = tab.nodes - theta[:, None]
        post_sd = np.sqrt((w * dev * dev).sum(axis=1) / s)
        self.post_sd[rows] = post_sd
        if self.grids is not None:   # MAP / ML / WLE
            self._point_estimate(rows)
            return
        self.theta[rows] = theta
        if self.config.estimation.se_method == "information":
            info = self._test_information(rows, theta)
            self.test_info[rows] = info
            self.se[rows] = 1.0 / np.sqrt(info + tab.prior_precision)
        else:
            self.se[rows] = post_sd

    def _point_estimate(self, rows):
        """theta and SE of the config's MAP / ML / WLE (:mod:`atlascat.cat.estimators`):
        bracket on the grid, then regula falsi with the sums over each row's answers."""
        tab, est = self.tab, self.config.estimation
        rows = np.arange(self.n)[rows]
        method, mu, sd = est.method, est.prior_mean, est.prior_sd
        nodes = tab.nodes
        s_g, i_g, j_g = self.grids[:, rows]
        g, obj = E.estimating_function(method, s_g, i_g, j_g,
                                       self.log_post[rows] - tab.log_prior, nodes, mu, sd)
        col = E.bracket(g, obj)
        theta = np.where(col == 0, nodes[0], nodes[-1])
        mid = np.flatnonzero((col > 0) & (col < nodes.size))
        table, y = self._answered(rows)
        warm = method == "wle"
        if mid.size:
            k = col[mid] - 1
            extra = 1.0 / sd ** 2 if method == "map" else 0.0
            t_mid, y_mid = table[:, mid], y[mid]

            def fun(pos, x):
                if pos.size < mid.size:
                    s, i, j = E.terms(x, t_mid[:, pos], y_mid[pos], warm=warm)
                else:
                    s, i, j = E.terms(x, t_mid, y_mid, warm=warm)
                return E.estimating_function(method, s, i, j, 0.0, x, mu, sd)[0], i + extra

            theta[mid] = E.refine(fun, nodes[k], nodes[k + 1], g[mid, k], g[mid, k + 1])
        _, info, _ = E.terms(theta, table, y, warm=False)
        with np.errstate(divide="ignore"):   # ML / WLE with no answer yet: replaced below
            se = 1.0 / np.sqrt(info + tab.se_precision)
        empty = self.n_items[rows] == 0   # no answer yet: the prior
        self.theta[rows] = np.where(empty, mu, theta)
        self.test_info[rows] = info
        self.se[rows] = np.where(empty, sd, se)

    def _answered(self, rows):
        """The parameters (8, n, m) of each row's answered items (the zero-information pad
        item beyond them) and their scores (n, m), 0 at the pad."""
        n_max = max(int(self.n_items[rows].max()) if rows.size else 0, 1)
        items = self.items[rows, :n_max]
        y = np.nan_to_num(self.scores[rows, :n_max])
        return self.tab.params_padded.table[:, items], y

    def _test_information(self, rows, theta) -> np.ndarray:
        """sum_j I_j(theta) over each row's administered items.

        Summed in fixed blocks of 128 columns (zero-padded) that are then added in order, so
        the floating-point result of a row does not depend on the other rows of the call; the
        information is computed for the first ``n_max`` columns only (the padding's is 0).
        """
        n_max = int(self.n_items[rows].max()) if theta.size else 0
        if n_max == 0:
            return np.zeros(theta.size)
        nb = -(-n_max // _SUM_BLOCK)
        table = self.tab.params_padded.table[:, self.items[rows, :n_max]]
        info = np.zeros((theta.size, nb * _SUM_BLOCK))
        info[:, :n_max] = fisher_information(theta[:, None], table)
        blocks = info.reshape(theta.size, nb, _SUM_BLOCK).sum(axis=2)
        total = blocks[:, 0].copy()
        for b in range(1, nb):
            total += blocks[:, b]
        return total

    def posterior(self, rows) -> np.ndarray:
        """Normalized posterior weights on the grid, (len(rows), n_nodes)."""
        lpost = self.log_post[rows]
        w = np.exp(lpost - lpost.max(axis=1, keepdims=True))
        return w / w.sum(axis=1, keepdims=True)

    def expected_posterior_sd(self, rows, items) -> np.ndarray:
        """Preposterior E[SD(theta | y, y_j)] over y_j in {0, 1} for item j per row."""
        post = self.posterior(rows)
        p = np.exp(self.tab.lp[np.maximum(items, 0)])
        out = np.zeros(len(rows))
        nodes = self.tab.nodes
        for lik in (p, 1.0 - p):
            joint = post * lik
            mass = joint.sum(axis=1)
            safe = np.maximum(mass, 1e-300)
            mean = (joint * nodes).sum(axis=1) / safe
            var = (joint * (nodes - mean[:, None]) ** 2).sum(axis=1) / safe
            out += mass * np.sqrt(np.maximum(var, 0.0))
        return out

    def best_remaining(self, rows):
        """(item, Fisher information) of the most informative available item per row."""
        key = (id(rows), len(rows))
        if self._best_cache is not None and self._best_cache[0] == key:
            return self._best_cache[1]
        info = fisher_information(self.theta[rows][:, None], self.tab.params)
        info[self.used[rows]] = -np.inf
        best = np.argmax(info, axis=1)
        val = info[np.arange(len(rows)), best]
        best = np.where(np.isfinite(val), best, -1)
        self._best_cache = (key, (best, val))
        return best, val

    def best_affordable(self, rows):
        """:meth:`best_remaining` among the items the budget still allows (an item that would
        pass it is never asked, so its value cannot keep or stop the test). Under
        ``mfi-cost`` the best is the item that selection asks next, the most information per
        unit cost, not the most informative (an expensive item not worth its cost ended the test
        while cheap, worthwhile ones remained)."""
        per_cost = self.config.selection.criterion == "mfi-cost" and not self.tab.uniform_cost
        if not per_cost and (self.config.stopping.budget is None or self.tab.uniform_cost):
            return self.best_remaining(rows)
        info = fisher_information(self.theta[rows][:, None], self.tab.params)
        info[self.blocked(rows, exposure=False)] = -np.inf
        score = info
        if per_cost:
            with np.errstate(divide="ignore", invalid="ignore"):
                score = np.where(np.isfinite(info), info / self.tab.item_cost[None, :], -np.inf)
            score = np.where(np.isnan(score), 0.0, score)   # cost 0 and no information
        best = np.argmax(score, axis=1)
        val = info[np.arange(len(rows)), best]
        return np.where(np.isfinite(val), best, -1), val

    # -------------------------------------------------------------- selection
    def blocked(self, rows, exposure: bool = True) -> np.ndarray:
        """Items not available to each row: used, over the budget, or (``exposure``) ineligible
        under exposure control."""
        used = self.used[rows]
        budget = self.config.stopping.budget
        if budget is not None and not self.tab.uniform_cost:
            left = budget * (1 + 1e-12) - self.spent[rows]
            used = used | (self.tab.item_cost[None, :] > left[:, None])
        exp = self.exposure
        if exposure and exp is not None:
            inel = exp.ineligible()
            if inel is not None:
                used = used | inel[None, :]
        return used

    def select(self, rows, uniforms, *, keep: bool = False, extra: int = 0):
        """Next item (bank position) of every row; -1 where nothing is left to give.

        ``keep=True`` also returns the ranked candidates behind every pick, ``(cand, k,
        complete)``: cand (n, C) bank positions best first (-1 padded; at least ``extra`` beyond
        the pick size where the ranking allows), k the pick size of the row, complete whether
        cand holds every eligible item. While theta, the answer count and the costs stay the
        same (an item was skipped), the next pick is a pick from that list without the skipped
        item (used by :func:`~atlascat.cat.simulate.simulate_cat` for replayed answers with
        missing cells).
        """
        rows = np.asarray(rows, dtype=np.intp)
        uniforms = np.asarray(uniforms, dtype=float).reshape(rows.size, -1)
        out = np.full(rows.size, -1, dtype=np.intp)
        sink = [] if keep else None
        width = self.tab.n_items
        if (self.tab.pruner is not None and self.config.selection.criterion == "mfi"
                and self.n_items[rows].all()):  # the pruned search: its lists are the width
            width = min(width, self.tab.pruner.keep)
        block = max(_BLOCK_ROWS, _BLOCK_CELLS // max(width, 1))
        for lo in range(0, rows.size, block):
            sl = slice(lo, lo + block)
            out[sl] = self._select_block(rows[sl], uniforms[sl], extra=extra, sink=sink,
                                         offset=lo)
        self.last_fallback = np.zeros(rows.size, dtype=bool)
        if self.exposure is not None and self.exposure.ineligible() is not None:
            # exposure control may leave a row nothing eligible: then it is ignored for that row
            stuck = np.flatnonzero((out < 0) & ~self.blocked(rows, exposure=False).all(axis=1))
            for lo in range(0, stuck.size, block):
                sl = stuck[lo:lo + block]
                out[sl] = self._select_block(rows[sl], uniforms[sl], ignore_exposure=True)
            self.last_fallback[stuck] = True
        if not keep:
            return out
        width = max([c.shape[1] for _, c, _, _ in sink] + [1])
        cand = np.full((rows.size, width), -1, dtype=np.intp)
        k = np.zeros(rows.size, dtype=np.intp)
        complete = np.zeros(rows.size, dtype=bool)
        for pos, c, kk, comp in sink:
            cand[pos, :c.shape[1]] = c
            k[pos], complete[pos] = kk, comp
        return out, (cand, k, complete)

    def _select_block(self, rows, u, ignore_exposure: bool = False, extra: int = 0, sink=None,
                      offset: int = 0):
        tab, cfg = self.tab, self.config.selection
        blocked = self.blocked(rows, exposure=not ignore_exposure)
        first = self.n_items[rows] == 0
        items = np.full(rows.size, -1, dtype=np.intp)
        exp = self.exposure
        trials = exp is not None and exp.uses_trials
        for group, is_first in ((first, True), (~first, False)):
            if not group.any():
                continue
            g, ug, bg = rows[group], u[group], blocked[group]
            if is_first and not trials and sink is None and tab.content is None:
                # the pick the ranking below gives, without ranking the bank
                items[group] = first_item_pick(bg, tab.params.b, cfg.theta0,
                                               cfg.first_item_window, ug[:, 0])
                continue
            if is_first:
                scores, k = first_item_scores(bg, tab.params.b, cfg.theta0, cfg.first_item_window)
                if tab.content is not None:
                    scores = tab.content.apply(scores, self.area_counts[g], self.n_items[g])
                n_cand = tab.n_items
                cand, n_fin, _ = ranked_candidates(scores, n_cand)
            elif cfg.criterion == "random" and not trials and tab.content is None:
                # uniform among all available items: the r-th available one, r = floor(u n)
                avail = ~bg
                n_avail = avail.sum(axis=1)
                r = np.minimum((ug[:, 0] * n_avail).astype(np.intp), np.maximum(n_avail - 1, 0))
                pos = np.argmax(np.cumsum(avail, axis=1) > r[:, None], axis=1)
                items[group] = np.where(n_avail > 0, pos, -1)
                continue
            else:
                k = tab.n_items if cfg.criterion == "random" else cfg.randomesque
                sh = self.config.exposure.sh_max_trials if trials else 0
                n_cand = min(tab.n_items, k + sh + extra)
                cand, n_fin = self._rank(g, bg, n_cand)
            if trials:
                chosen, rejected = exp.pick(cand, n_fin, k, ug)
                self._sh_bookkeeping(g, chosen, rejected)
            else:
                chosen = pick(cand, n_fin, k, ug[:, 0])
            items[group] = chosen
            if sink is not None:
                k_row = np.broadcast_to(np.asarray(k), (g.size,))
                width = min(cand.shape[1], int(k_row.max()) + extra)
                # every eligible item is in the kept list only if the ranking was not cut short
                whole = (n_fin < cand.shape[1]) | (cand.shape[1] >= tab.n_items)
                sink.append((offset + np.flatnonzero(group), cand[:, :width], k_row,
                             whole & (n_fin <= width)))
        return items

    def _rank(self, rows, blocked, n_cand):
        """Ranked candidates by the selection criterion (after the first item).

        Maximum information on a large bank first tries the exact pruned computation
        (:class:`~atlascat.cat.selection.InfoPruner`); rows it cannot settle, and every other
        criterion, score all items.
        """
        tab = self.tab
        out_c = np.full((rows.size, min(n_cand, tab.n_items)), -1, dtype=np.intp)
        out_n = np.zeros(rows.size, dtype=np.intp)
        todo = np.ones(rows.size, dtype=bool)
        pr = tab.pruner
        spread = None if self._spread is None else self._spread[rows]
        if self._design is not None:  # every row of the call is in the round's design
            spread = np.ones(rows.size)
        if pr is not None and n_cand < pr.keep // 2:
            theta = self.theta[rows]
            if spread is not None:  # the pruner's bound holds at a point theta only
                todo_pr = spread == 0
            else:
                todo_pr = None
            cell, ok = pr.cells(theta)
            if todo_pr is not None:
                ok = ok & todo_pr
            short = min(64, pr.keep)
            for m in (short, pr.keep):
                # a row whose last search needed the wide list starts with it
                go = todo & ok & ~self.wide[rows] if m == short else todo & ok
                if m <= n_cand or not go.any():
                    continue
                sel = np.flatnonzero(go)
                cols = pr.top(cell[sel], m)
                info = fisher_information(theta[sel][:, None], pr.table_of(cell[sel], m))
                info[blocked[sel[:, None], cols]] = -np.inf
                cand, n_fin, vals = ranked_candidates(info, n_cand, cols)
                enough = n_fin >= n_cand
                exact = enough & (vals[:, -1] > pr.bound_after(cell[sel], m))
                # the short list would have settled it: the k-th best beats its bound too
                self.wide[rows[sel]] = ~(enough & (vals[:, -1] > pr.bound_after(cell[sel],
                                                                                 short)))
                done = sel[exact]
                out_c[done], out_n[done] = cand[exact], n_fin[exact]
                todo[done] = False
        if self._design is not None and tab.content is None:
            for m_min in (64, 512):  # a second, wider try before the full scan
                if not todo.any():
                    break
                sel = np.flatnonzero(todo)
                exact, cand, n_fin = self._mepv_pruned(rows[sel], blocked[sel], n_cand, m_min)
                done = sel[exact]
                out_c[done], out_n[done] = cand[exact], n_fin[exact]
                todo[done] = False
        if todo.any():
            sel = np.flatnonzero(todo)
            g = rows[sel]
            if self._design is not None:
                scores = self._mepv_scores(g)
            elif spread is not None and (spread[sel] > 0).any():
                scores = self._preposterior_scores(g, spread[sel], blocked[sel])
            else:
                scores = criterion_scores(tab.criterion, self.theta[g], self.n_items[g],
                                          blocked[sel], tab.params)
            np.copyto(scores, -np.inf, where=blocked[sel])
            if tab.content is not None:
                scores = tab.content.apply(scores, self.area_counts[g], self.n_items[g])
            cand, n_fin, _ = ranked_candidates(scores, n_cand)
            out_c[sel], out_n[sel] = cand, n_fin
        return out_c, out_n

    def _sh_bookkeeping(self, rows, chosen, rejected):
        """Sympson-Hetter: rejected items leave the examinee's pool; count trials per item."""
        r_idx, c_idx = np.nonzero(rejected >= 0)
        rej_items = rejected[r_idx, c_idx]
        self.used[rows[r_idx], rej_items] = True
        np.add.at(self.n_used, rows[r_idx], 1)
        np.add.at(self.sh_trials, rej_items, 1)
        ok = chosen >= 0
        np.add.at(self.sh_trials, chosen[ok], 1)
        if self.sh_rejected is not None:
            for r, j in zip(rows[r_idx], rej_items):
                self.sh_rejected[r].append(int(j))

    # -------------------------------------------------------------- updates
    def record(self, rows, items, scores, *, check_stop: bool = True,
               count_exposure: bool = True):
        """Score ``items`` for ``rows``: update posterior, estimates, history; check stopping."""
        rows = np.asarray(rows, dtype=np.intp)
        items = np.asarray(items, dtype=np.intp)
        y = np.asarray(scores, dtype=float)
        if rows.size == 0:
            return
        tab = self.tab
        yc = y[:, None]
        self.log_post[rows] += yc * tab.lp_post[items] + (1.0 - yc) * tab.lq_post[items]
        if self.grids is not None:
            self._add_terms(rows, items, yc)
        pos = self.n_items[rows]
        self.items[rows, pos] = items
        self.scores[rows, pos] = y
        self.used[rows, items] = True
        self.n_items[rows] += 1
        self.n_used[rows] += 1
        self._estimate(rows)
        self.theta_hist[rows, pos] = self.theta[rows]
        self.se_hist[rows, pos] = self.se[rows]
        self.spent[rows] += tab.item_cost[items]
        if self.area_counts is not None:
            np.add.at(self.area_counts, (rows, tab.content.area_code[items]), 1.0)
        if self.exposure is not None and count_exposure:
            self.exposure.administered(items)
        if check_stop:
            self.check_stop(rows)

    def record_one(self, r: int, j: int, y: float):
        """``record`` for a single row with basic indexing (sessions): the same arithmetic,
        element for element, as the batched path, at a fraction of the indexing overhead."""
        tab = self.tab
        sl = slice(r, r + 1)
        self.log_post[sl] += y * tab.lp_post[j] + (1.0 - y) * tab.lq_post[j]
        if self.grids is not None:
            self._add_terms(sl, j, y)
        pos = int(self.n_items[r])
        self.items[r, pos] = j
        self.scores[r, pos] = y
        self.used[r, j] = True
        self.n_items[r] += 1
        self.n_used[r] += 1
        self._estimate(sl)
        self.theta_hist[r, pos] = self.theta[r]
        self.se_hist[r, pos] = self.se[r]
        self.spent[r] += tab.item_cost[j]
        if self.area_counts is not None:
            self.area_counts[r, tab.content.area_code[j]] += 1.0
        if self.exposure is not None:
            self.exposure.administered(np.array([j]))

    def _add_terms(self, rows, items, y):
        """An answer's S, I, J terms at every node, added to the rows' grid sums."""
        tab, grids = self.tab, self.grids
        grids[0, rows] += y * tab.s1[items] - (1.0 - y) * tab.s0[items]
        grids[1, rows] += tab.info_w[items]
        grids[2, rows] += tab.warm[items]

    def skip(self, rows, items):
        """Items selected but without an answer: out of the pool, not scored, counted."""
        rows = np.asarray(rows, dtype=np.intp)
        items = np.asarray(items, dtype=np.intp)
        self.used[rows, items] = True
        self.n_skipped[rows] += 1
        self.n_used[rows] += 1
        exhausted = rows[self.n_used[rows] >= self.tab.n_items]
        self.finish(exhausted, "bank_exhausted")

    def unskip(self, r: int, j: int):
        """Undo :meth:`skip` of item ``j`` for row ``r`` (it gets an answer after all)."""
        self.used[r, j] = False
        self.n_skipped[r] -= 1
        self.n_used[r] -= 1

    def finish(self, rows, reason: str):
        rows = np.asarray(rows, dtype=np.intp)
        rows = rows[~self.done[rows]]
        self.done[rows] = True
        self.stop_reason[rows] = reason

    def check_stop(self, rows):
        """Evaluate the stopping rules for ``rows``; the first rule that fires names the reason."""
        rows = np.asarray(rows, dtype=np.intp)
        rows = rows[~self.done[rows]]
        if rows.size == 0:
            return
        stop, reason = self._stop_decision(rows)
        if stop.any():
            self.done[rows[stop]] = True
            self.stop_reason[rows[stop]] = reason[stop]

    def _stop_decision(self, rows, precision: bool = True):
        """(stop, reason) of the stopping rules on the current state of ``rows``, without
        committing anything. ``precision=False`` evaluates only the rules that always apply
        (length, budget) and bank exhaustion."""
        enough = self.n_items[rows] >= self.config.stopping.min_items
        any_enough = bool(enough.any()) and precision
        self._best_cache = None
        stop = np.zeros(rows.size, dtype=bool)
        reason = np.full(rows.size, "", dtype=object)
        for rule in self.tab.rules:
            if rule.precision:
                if not any_enough:
                    continue
                fire = rule.check(self, rows) & enough
            else:
                fire = rule.check(self, rows)
            new = fire & ~stop
            if new.any():
                reason[new] = rule.reason
                stop |= new
        exhausted = ~stop & (self.n_used[rows] >= self.tab.n_items)
        reason[exhausted] = "bank_exhausted"
        stop |= exhausted
        self._best_cache = None
        return stop, reason

    # -------------------------------------------------------------- replay (resume)
    def history_of(self, row: int) -> dict:
        n = int(self.n_items[row])
        return {
            "items": self.items[row, :n].copy(),
            "scores": self.scores[row, :n].copy(),
            "theta": self.theta_hist[row, :n].copy(),
            "se": self.se_hist[row, :n].copy(),
        }

