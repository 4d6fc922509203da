"""The CAT engine: one core for batched simulation and step-by-step live sessions.

Algorithm (ATLAS paper, Algorithm 1), for every examinee::

    first item: uniform among items with |b - theta0| < window (nearest item if none)
    repeat:     administer, score, update the posterior, estimate theta and SE
                stop?  (SE <= tau and n >= min_items, or n = max_items, or another rule)
                next item: randomesque pick among the k best by the selection criterion

Estimation. The log-posterior of each examinee lives on a fixed quadrature grid and is updated
incrementally: answering item j with score y adds y log P_j(theta_q) + (1 - y) log Q_j(theta_q)
to node q (O(n_nodes) per answer). EAP theta = sum_q w_q theta_q / sum_q w_q and posterior SD
follow (Bock and Mislevy, 1982). The reported SE is either the posterior SD or, as catR's
``semTheta`` for a Bayesian estimate, 1 / sqrt(sum_j I_j(theta) + 1 / prior_sd^2) over the
administered items (``se_method``).

Batching. :class:`_Engine` holds the state of n examinees as arrays; :func:`simulate_cat` advances
all active examinees together (one step = one selection + one answer for each of them), so the
hot path is NumPy over (examinee x item) blocks with no Python loop over items or examinees.
:class:`CATSession` is the same engine with n = 1. Every computation is row-wise, and each
examinee draws its random numbers from its own generator in a fixed amount per selection
(``config.uniforms_per_step``), so with ``rng.spawn`` children a batched simulation and
sessions run one by one give identical item sequences and estimates.

References
----------
Bock, R. D. and Mislevy, R. J. (1982). Adaptive EAP estimation of ability in a microcomputer
environment. Applied Psychological Measurement, 6(4), 431-444.
Magis, D. and Raiche, G. (2012). Random generation of response patterns under computerized
adaptive testing with the R package catR. Journal of Statistical Software, 48(8).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..errors import BankError, ConfigError, LiveRunError, ResponseDataError
from ..irt.bank import ItemBank, normalize_item_id
from . import security
from .answers import CallableAnswers, ModelAnswers, ReplayAnswers, UniformStreams
from .config import CATConfig
from .exposure_control import make_exposure_control
from .generators import _as_generator, examinee_generators
from .selection import first_item_scores, fisher_information, pick, ranked_candidates
from .tables import _TABLE_CACHE, _Tables, _tables, bank_fingerprint  # noqa: F401 (re-export)

__all__ = ["CATSession", "CATResult", "simulate_cat", "bank_fingerprint", "examinee_generators",
           "BATCH_METHODS"]

BATCH_METHODS = ("expected", "preposterior", "mepv")  # see _Engine.select_batch

_BLOCK_ROWS = 32  # rows per block in the (examinee x item) selection pass: keeps it in cache
_SUM_BLOCK = 128  # column block of the test-information sum (see _Engine._test_information)
_REPICK_EXTRA = 16  # ranked candidates kept beyond the pick size for re-picks after skips


# ------------------------------------------------------------------------------ engine
class _Engine:
    """State of n examinees and the vectorized operations of one CAT step."""

    def __init__(self, bank: ItemBank, config: CATConfig, n: int, exposure=None):
        self.tab = tab = _tables(bank, config)
        self.exposure = exposure
        self.config = config
        self.n = n
        J = tab.n_items
        W = -(-config.max_items // _SUM_BLOCK) * _SUM_BLOCK  # history width, whole sum blocks
        self.width = W
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
        self.sh_rejected: list[list[int]] | None = None  # per-row rejections (sessions only)
        self._best_cache = None
        self._spread = None  # preposterior SD of theta per row during a batched round, or None
        self._design = None  # (start posterior, node precision) per row: method "mepv"
        self._estimate(np.arange(n))
        if config.max_items < 1:  # pragma: no cover - validated by CATConfig
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
        self.theta[rows] = theta
        self.post_sd[rows] = post_sd
        if self.config.se_method == "information":
            info = self._test_information(rows, theta)
            self.test_info[rows] = info
            self.se[rows] = 1.0 / np.sqrt(info + tab.prior_precision)
        else:
            self.se[rows] = post_sd

    def _test_information(self, rows, theta) -> np.ndarray:
        """sum_j I_j(theta) over each row's administered items.

        Summed in fixed blocks of 128 columns (zero-padded) that are then added in order, so
        the floating-point result of a row does not depend on the other rows of the call.
        """
        n_max = int(self.n_items[rows].max()) if theta.size else 0
        if n_max == 0:
            return np.zeros(theta.size)
        nb = -(-n_max // _SUM_BLOCK)
        adm = self.items[rows, :nb * _SUM_BLOCK]
        info = fisher_information(theta[:, None], self.tab.params_padded.table[:, adm])
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

    # -------------------------------------------------------------- selection
    def blocked(self, rows, exposure: bool = True) -> np.ndarray:
        """Items not available to each row: used, over the budget, or (``exposure``) ineligible
        under exposure control."""
        used = self.used[rows]
        if self.config.budget is not None and not self.tab.uniform_cost:
            left = self.config.budget * (1 + 1e-12) - self.spent[rows]
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
        item (used by :func:`simulate_cat` for replayed answers with missing cells).
        """
        rows = np.asarray(rows, dtype=np.intp)
        uniforms = np.asarray(uniforms, dtype=float).reshape(rows.size, -1)
        out = np.full(rows.size, -1, dtype=np.intp)
        sink = [] if keep else None
        for lo in range(0, rows.size, _BLOCK_ROWS):
            sl = slice(lo, lo + _BLOCK_ROWS)
            out[sl] = self._select_block(rows[sl], uniforms[sl], extra=extra, sink=sink,
                                         offset=lo)
        self.last_fallback = np.zeros(rows.size, dtype=bool)
        if self.exposure is not None and self.exposure.ineligible() is not None:
            # exposure control may leave a row nothing eligible: then it is ignored for that row
            stuck = np.flatnonzero((out < 0) & ~self.blocked(rows, exposure=False).all(axis=1))
            for lo in range(0, stuck.size, _BLOCK_ROWS):
                sl = stuck[lo:lo + _BLOCK_ROWS]
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
        tab, cfg = self.tab, self.config
        blocked = self.blocked(rows, exposure=not ignore_exposure)
        first = self.n_items[rows] == 0
        items = np.full(rows.size, -1, dtype=np.intp)
        exp = self.exposure
        trials = exp is not None and exp.uses_trials
        for group, is_first in ((first, True), (~first, False)):
            if not group.any():
                continue
            g, ug, bg = rows[group], u[group], blocked[group]
            if is_first:
                scores, k = first_item_scores(bg, tab.params.b, cfg.theta0, cfg.first_item_window)
                if tab.content is not None:
                    scores = tab.content.apply(scores, self.area_counts[g], self.n_items[g])
                n_cand = tab.n_items
                cand, n_fin, _ = ranked_candidates(scores, n_cand)
            elif cfg.selection == "random" and not trials and tab.content is None:
                # uniform among all available items: the r-th available one, r = floor(u n)
                avail = ~bg
                n_avail = avail.sum(axis=1)
                r = np.minimum((ug[:, 0] * n_avail).astype(np.intp), np.maximum(n_avail - 1, 0))
                pos = np.argmax(np.cumsum(avail, axis=1) > r[:, None], axis=1)
                items[group] = np.where(n_avail > 0, pos, -1)
                continue
            else:
                k = tab.n_items if cfg.selection == "random" else cfg.randomesque
                n_cand = min(tab.n_items, k + (cfg.sh_max_trials if trials else 0) + extra)
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
            for m in (min(64, pr.keep), pr.keep):
                if m <= n_cand or not (todo & ok).any():
                    continue
                sel = np.flatnonzero(todo & ok)
                cols = pr.order[cell[sel], :m]
                sub = tab.params.take(cols)
                info = fisher_information(theta[sel][:, None], sub)
                info[np.take_along_axis(blocked[sel], cols, axis=1)] = -np.inf
                cand, n_fin, vals = ranked_candidates(info, n_cand, cols)
                exact = (n_fin >= n_cand) & (vals[:, -1] > pr.bound[cell[sel], m])
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
                scores = tab.criterion.scores(self.theta[g], self.n_items[g], blocked[sel],
                                              tab.params)
            np.copyto(scores, -np.inf, where=blocked[sel])
            if tab.content is not None:
                scores = tab.content.apply(scores, self.area_counts[g], self.n_items[g])
            cand, n_fin, _ = ranked_candidates(scores, n_cand)
            out_c[sel], out_n[sel] = cand, n_fin
        return out_c, out_n

    _GH = np.polynomial.hermite_e.hermegauss(7)

    def _preposterior_scores(self, rows, spread, blocked):
        """The criterion averaged over the preposterior of theta: theta_hat + spread Z, Z ~
        N(0, 1) by 7-point Gauss-Hermite (``batch_method="preposterior"``)."""
        x, w = self._GH
        w = w / w.sum()
        tab = self.tab
        theta, n = self.theta[rows], self.n_items[rows]
        total = None
        for xg, wg in zip(x, w):
            sc = wg * tab.criterion.scores(theta + spread * xg, n, blocked, tab.params)
            total = sc if total is None else total + sc
        return total

    def _mepv_pruned(self, rows, blocked, n_cand, m_min: int = 64):
        """Exact top ``n_cand`` of :meth:`_mepv_scores` without scoring every item, where it
        can be certified.

        1/A - 1/(A + I) = I / (A (A + I)) <= I / A^2, so bound_j = sum_q pi_q I_jq / A_q^2 (one
        matrix product) bounds item j's score. The exact scores of the M items with the largest
        bounds are computed; if the n_cand-th best of them beats the largest bound left out
        (inflated by 1e-9 against rounding), no other item can enter the top n_cand and the
        ranking equals the full computation (same values, same tie-breaking by position).
        Returns ``(exact, cand, n_fin)``; rows where ``exact`` is False need the full scan.
        """
        post_all, prec_all = self._design
        info = self.tab.info_nodes
        J = info.shape[0]
        m = min(J, max(m_min, 4 * n_cand))
        exact = np.zeros(rows.size, dtype=bool)
        cand = np.full((rows.size, min(n_cand, J)), -1, dtype=np.intp)
        n_fin = np.zeros(rows.size, dtype=np.intp)
        if m >= J:
            return exact, cand, n_fin
        post, prec = post_all[rows], prec_all[rows]
        bound = (post / (prec * prec)) @ info.T
        bound[blocked] = -np.inf
        part = np.argpartition(-bound, m, axis=1)
        cols = part[:, :m]
        # position m of the partition holds the largest bound left out
        left_out = np.take_along_axis(bound, part[:, m:m + 1], axis=1)[:, 0]
        sub = info[cols]  # (n, m, Q)
        p3, a3 = post[:, None, :], prec[:, None, :]
        scores = (p3 / a3 - p3 / (a3 + sub)).sum(axis=2)
        scores[np.take_along_axis(blocked, cols, axis=1)] = -np.inf
        c, nf, vals = ranked_candidates(scores, n_cand, cols)
        kth = vals[:, -1]
        ok = ~np.isfinite(left_out) | ((nf >= min(n_cand, J))
                                       & (kth > left_out * (1.0 + 1e-9) + 1e-300))
        exact[:] = ok
        cand[ok], n_fin[ok] = c[ok], nf[ok]
        return exact, cand, n_fin

    def _mepv_scores(self, rows):
        """Expected reduction of the posterior variance by item j (``batch_method="mepv"``):
        sum_q pi_q [1 / A_q - 1 / (A_q + I_j(theta_q))], pi the posterior at the start of the
        round, A_q = 1 / prior_sd^2 + the information at node q of the items given and of the
        round's earlier picks (the local normal approximation Var(theta | y) ~ 1 / A(theta),
        averaged over where theta may be). Non-negative; a wide posterior favours picks that
        cover it, a narrow one the most informative items at theta."""
        post_all, prec_all = self._design
        info = self.tab.info_nodes  # (J, Q)
        J, Q = info.shape
        out = np.empty((rows.size, J))
        step = max(1, 2_000_000 // (J * Q))
        for lo in range(0, rows.size, step):
            r = rows[lo:lo + step]
            post, prec = post_all[r][:, None, :], prec_all[r][:, None, :]
            out[lo:lo + step] = (post / prec - post / (prec + info[None])).sum(axis=2)
        return out

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
        self.log_post[rows] += yc * tab.lp[items] + (1.0 - yc) * tab.lq[items]
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
        self.log_post[sl] += y * tab.lp[j] + (1.0 - y) * tab.lq[j]
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

    def skip(self, rows, items):
        """Items selected but without an answer: out of the pool, not scored, counted."""
        rows = np.asarray(rows, dtype=np.intp)
        items = np.asarray(items, dtype=np.intp)
        self.used[rows, items] = True
        self.n_skipped[rows] += 1
        self.n_used[rows] += 1
        exhausted = rows[self.n_used[rows] >= self.tab.n_items]
        self.finish(exhausted, "bank_exhausted")

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
        enough = self.n_items[rows] >= self.config.min_items
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

    # -------------------------------------------------------------- batched rounds
    def select_batch(self, rows, k: int, draw, *, cut: str = "predicted",
                     method: str = "mepv", resolve=None, reserve=None) -> np.ndarray:
        """Up to ``k`` items per row, chosen jointly by greedy sequential selection.

        Pick m is an ordinary selection (criterion, randomesque, exposure control, content
        balancing, budget; ``draw(rows)`` gives its ``uniforms_per_step`` uniforms per row) on a
        *virtual* state: after every pick the row's posterior is updated with the pick's
        expected answer, the posterior predictive probability y = sum_q pi_q P_j(theta_q), as
        a Bernoulli pseudo-count (exactly how partial credit enters), and the item counts as
        given (pool, test length, content counts, cost, KL window, a-stratum). The round stops
        short for a row once the virtual state meets a stopping rule: always the length /
        budget rules and bank exhaustion (never select beyond ``max_items``), and with
        ``cut="predicted"`` also the precision rules (SE, reliability, ...; only from
        ``min_items`` on), so a round does not run past the point where the test is predicted
        to stop.

        ``method="mepv"`` (default; Fisher information only, other criteria fall back to
        "expected"): picks after the first are scored by the expected reduction of the
        posterior variance (:meth:`_mepv_scores`), integrated over the posterior at the start
        of the round. ``method="expected"``: every pick is scored at the virtual EAP theta (the expected
        answers barely move it: the round's picks are the top items at the current theta, with
        pool, content, cost and length advanced). ``method="preposterior"`` (Fisher
        information only; other criteria fall back to "expected"): pick m is scored by its
        expected information under the preposterior distribution of the theta estimate after
        the round's m earlier answers, approximated as N(theta_virtual, sd0^2 - sd_m^2) with
        sd0, sd_m the posterior SD before the round and after the m expected answers (the
        variance of the estimate that those answers are expected to explain). The virtual state is discarded afterwards (Sympson-Hetter rejections stay, as
        in a single selection). Every operation is row-wise, so a row's picks do not depend on
        the other rows of the call. ``k = 1`` is exactly :meth:`select`.

        ``resolve(rows, items, u)``: cohort exposure conflicts of one pick (simulation);
        ``reserve(items)``: called with every pick (cohort eligibility reserves the items
        picked earlier in the round). Returns (len(rows), k) bank positions, -1 padded; a row
        whose first pick is -1 has nothing left to give.
        """
        rows = np.asarray(rows, dtype=np.intp)
        if cut not in ("predicted", "none"):
            raise ConfigError(f"batch cut must be 'predicted' or 'none', got {cut!r}")
        if method not in BATCH_METHODS:
            raise ConfigError(f"batch method must be one of {BATCH_METHODS}, got {method!r}")
        spread = method == "preposterior" and self.config.selection == "mfi"
        design = method == "mepv" and self.config.selection == "mfi" and k > 1
        picks = np.full((rows.size, k), -1, dtype=np.intp)
        going = np.arange(rows.size)
        saved = None
        try:
            for m in range(k):
                r = rows[going]
                u = np.asarray(draw(r), dtype=float).reshape(r.size, -1)
                items = self.select(r, u)
                if resolve is not None:
                    items = resolve(r, items, u)
                ok = items >= 0
                going, items = going[ok], items[ok]
                picks[going, m] = items
                if reserve is not None and items.size:
                    reserve(items)
                if m == k - 1 or going.size == 0:
                    break
                if saved is None:
                    saved = self._save_rows(rows)
                    if design:
                        self._design = self._design_state(rows)
                r = rows[going]
                post = self.posterior(r)
                y = np.clip((post * np.exp(self.tab.lp[items])).sum(axis=1), 0.0, 1.0)
                self.record(r, items, y, check_stop=False, count_exposure=False)
                stop, _ = self._stop_decision(r, precision=cut == "predicted")
                going = going[~stop]
                if going.size == 0:
                    break
                if design:
                    self._design[1][r] += self.tab.info_nodes[items]
                if spread:
                    if self._spread is None:
                        self._spread = np.zeros(self.n)
                    sd0 = saved["post_sd"][going]
                    r = rows[going]
                    self._spread[r] = np.sqrt(np.maximum(sd0 * sd0 - self.post_sd[r] ** 2, 0.0))
        finally:
            if saved is not None:
                self._restore_rows(rows, saved, picks)
            self._spread = None
            self._design = None
        return picks

    def _design_state(self, rows):
        """Start posterior and node precision (prior + information of the items given) of
        ``rows``, in engine-sized arrays for :meth:`_mepv_scores`."""
        tab = self.tab
        Q = tab.info_nodes.shape[1]  # builds the node tables on first use
        post = np.zeros((self.n, Q))
        prec = np.zeros((self.n, Q))
        post[rows] = self.posterior(rows)
        n_max = int(self.n_items[rows].max()) if rows.size else 0
        acc = np.full((rows.size, Q), tab.prior_precision)
        for lo in range(0, n_max, 64):   # administered items, 64 columns at a time
            cols = self.items[rows, lo:min(lo + 64, n_max)]
            acc += tab.info_nodes_padded[cols].sum(axis=1)
        prec[rows] = acc
        return post, prec

    def _save_rows(self, rows) -> dict:
        saved = {name: getattr(self, name)[rows].copy()
                 for name in ("log_post", "theta", "se", "post_sd", "test_info", "spent",
                              "n_items")}
        if self.area_counts is not None:
            saved["area_counts"] = self.area_counts[rows].copy()
        return saved

    def _restore_rows(self, rows, saved, picks):
        """Undo the virtual records of :meth:`select_batch` (the state before the round)."""
        n0 = saved["n_items"]
        virtual = self.n_items[rows] - n0
        for m in range(int(virtual.max()) if virtual.size else 0):
            sel = np.flatnonzero(virtual > m)
            r, pos = rows[sel], n0[sel] + m
            self.used[r, picks[sel, m]] = False
            self.items[r, pos] = -1
            self.scores[r, pos] = np.nan
            self.theta_hist[r, pos] = np.nan
            self.se_hist[r, pos] = np.nan
        self.n_used[rows] -= virtual
        for name, value in saved.items():
            getattr(self, name)[rows] = value
        self._best_cache = None

    # -------------------------------------------------------------- replay (resume)
    def history_of(self, row: int) -> dict:
        n = int(self.n_items[row])
        return {
            "items": self.items[row, :n].copy(),
            "scores": self.scores[row, :n].copy(),
            "theta": self.theta_hist[row, :n].copy(),
            "se": self.se_hist[row, :n].copy(),
        }


# ------------------------------------------------------------------------------ session
class CATSession:
    """One examinee's adaptive test, driven one answer at a time.

    Parameters
    ----------
    bank : ItemBank
    config : CATConfig, default ``CATConfig()``
    rng : numpy Generator or int seed; the session draws ``config.uniforms_per_step`` uniforms
        from it per selection (so it can be persisted and resumed exactly).
    tracker : ExposureTracker shared by the sessions of one population, for
        ``exposure="eligibility"`` (a private one if None).

    Usage::

        session = CATSession(bank, CATConfig(se_stop=0.2), rng=np.random.default_rng(1))
        while (item := session.next_item()) is not None:
            session.record(item, ask_model(item))
        session.theta, session.se, session.stop_reason

    Batched rounds (k items asked concurrently, e.g. to keep a GPU server busy)::

        while items := session.next_items(8):
            session.record_many(items, ask_model_concurrently(items))   # None = no answer

    ``record`` also accepts items the caller chose (they count like selected ones, and drop an
    outstanding selection); ``skip(item)`` takes an item out of the pool without scoring it.
    ``to_dict()`` gives a JSON-serializable snapshot (config, answers, RNG state, the round's
    unanswered items) and ``CATSession.from_dict(d, bank)`` resumes it exactly.
    """

    def __init__(self, bank: ItemBank, config: CATConfig | None = None, rng=None, *,
                 tracker=None):
        self.bank = bank
        self.config = CATConfig() if config is None else config
        if not isinstance(self.config, CATConfig):
            raise ConfigError(f"config must be a CATConfig, got {type(self.config).__name__}")
        self.rng = _as_generator(rng)
        exposure = make_exposure_control(bank, self.config, tracker=tracker)
        if exposure is not None:
            exposure.start(1)
        self._engine = _Engine(bank, self.config, 1, exposure=exposure)
        self._engine.sh_rejected = [[]]
        self._pending: list[int] = []   # selected, not answered yet (a round of next_items)
        self._pending_share = 0.0       # selection seconds charged to each pending item
        self._unchecked = False         # answers recorded since the last stopping check
        self._seconds: list[float] = []
        self._skipped: list[int] = []
        self._events: list[tuple[str, int]] = []  # ("r" | "s", item) in order, for resuming
        self._row = np.zeros(1, dtype=np.intp)

    # -------------------------------------------------------------- properties
    @property
    def theta(self) -> float:
        return float(self._engine.theta[0])

    @property
    def se(self) -> float:
        return float(self._engine.se[0])

    @property
    def posterior_sd(self) -> float:
        return float(self._engine.post_sd[0])

    @property
    def n_items(self) -> int:
        return int(self._engine.n_items[0])

    @property
    def n_skipped(self) -> int:
        return int(self._engine.n_skipped[0])

    @property
    def done(self) -> bool:
        return bool(self._engine.done[0])

    @property
    def stop_reason(self) -> str | None:
        return self._engine.stop_reason[0] or None

    @property
    def administered(self) -> list[str]:
        h = self._engine.history_of(0)
        return [str(self.bank.item_ids[j]) for j in h["items"]]

    @property
    def skipped(self) -> list[str]:
        return [str(self.bank.item_ids[j]) for j in self._skipped]

    @property
    def history(self) -> pd.DataFrame:
        """One row per scored item: item_id, order, score, theta, se, seconds."""
        h = self._engine.history_of(0)
        return pd.DataFrame({
            "item_id": pd.Series(self.bank.item_ids[h["items"]], dtype=object).astype(str),
            "order": np.arange(1, h["items"].size + 1),
            "score": h["scores"],
            "theta": h["theta"],
            "se": h["se"],
            "seconds": np.asarray(self._seconds, dtype=float),
        })

    def __repr__(self) -> str:
        state = f"done ({self.stop_reason})" if self.done else "running"
        return (f"CATSession(n_items={self.n_items}, theta={self.theta:.4f}, se={self.se:.4f}, "
                f"{state})")

    # -------------------------------------------------------------- stepping
    def next_item(self) -> str | None:
        """The item to administer next, or None once the test is over.

        Calling it again before ``record`` returns the same item (no randomness consumed);
        while a round from :meth:`next_items` is outstanding, its first unanswered item.
        """
        if self.done:
            return None
        if self._pending:
            return str(self.bank.item_ids[self._pending[0]])
        t0 = time.perf_counter()
        u = self.rng.random(self.config.uniforms_per_step)
        item = int(self._engine.select(self._row, u[None, :])[0])
        if item < 0:
            self._engine.finish(self._row, "bank_exhausted")
            return None
        self._pending = [item]
        self._pending_share = time.perf_counter() - t0
        return str(self.bank.item_ids[item])

    def next_items(self, k: int, *, cut: str = "predicted", method: str = "mepv") -> list[str]:
        """A round of up to ``k`` items chosen jointly, to administer concurrently; [] once the
        test is over.

        Greedy sequential selection (the engine's batch selection): each pick is an ordinary
        selection (criterion, randomesque, exposure control, content balancing, budget) after
        the posterior was updated with the expected answers of the round's earlier picks.
        The round is shorter than k where it reaches ``max_items``, the budget or the end of
        the bank, and (``cut="predicted"``, default) where the test is predicted to stop: the
        stopping rules fire on that expected state. ``method`` scores picks 2..k:
        "mepv" (default) by the expected reduction of the posterior variance over the
        posterior at the start of the round, "expected" by the criterion at the updated theta,
        "preposterior" by the expected information under the preposterior of the estimate
        (docs/cat.md has the measurement behind the defaults). ``k = 1`` is exactly :meth:`next_item`.
        Answer the round with :meth:`record_many` (or :meth:`record` / :meth:`skip` item by
        item, in any order); the stopping rules are checked once the whole round is answered.
        Calling it again before then returns the round's unanswered items (no randomness
        consumed). Uses ``config.uniforms_per_step`` uniforms per pick.
        """
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise ConfigError(f"batch size k must be an integer >= 1, got {k!r}")
        if self.done:
            return []
        if self._pending:
            return [str(self.bank.item_ids[j]) for j in self._pending]
        if k == 1:
            item = self.next_item()
            return [] if item is None else [item]
        t0 = time.perf_counter()
        ups = self.config.uniforms_per_step
        picks = self._engine.select_batch(self._row, int(k),
                                          lambda r: self.rng.random(ups)[None, :], cut=cut,
                                          method=method)[0]
        picks = picks[picks >= 0]
        if picks.size == 0:
            self._engine.finish(self._row, "bank_exhausted")
            return []
        self._pending = [int(j) for j in picks]
        self._pending_share = (time.perf_counter() - t0) / picks.size
        return [str(self.bank.item_ids[j]) for j in self._pending]

    @property
    def pending(self) -> list[str]:
        """Items selected (by next_item / next_items) and not answered yet."""
        return [str(self.bank.item_ids[j]) for j in self._pending]

    def _position(self, item_id) -> int:
        index = self._engine.tab.index
        key = str(item_id)
        j = index.get(key)
        if j is None:
            j = index.get(normalize_item_id(key))
            if j is None:
                raise LiveRunError(f"item {item_id!r} is not in the bank ({len(self.bank)} items)")
        return j

    @staticmethod
    def _score(item_id, score) -> float:
        try:
            y = float(score)
        except (TypeError, ValueError):
            raise ResponseDataError(f"score for item {item_id!r} must be a number in [0, 1], "
                                    f"got {score!r}") from None
        if not 0.0 <= y <= 1.0:
            raise ResponseDataError(f"score for item {item_id!r} must be in [0, 1], got {score!r}"
                                    " (use skip() for an item without an answer)")
        return y

    def _check_recordable(self, item_id, j):
        if self._engine.used[0, j] and j not in self._skipped:
            raise LiveRunError(f"item {item_id!r} was already administered in this session")

    def _record(self, j: int, y: float) -> None:
        """Score item j; the stopping rules are checked once no selected item is outstanding."""
        eng = self._engine
        t0 = time.perf_counter()
        if j in self._skipped:  # a previously skipped item gets an answer after all
            self._skipped.remove(j)
            eng.used[0, j] = False
            eng.n_skipped[0] -= 1
            eng.n_used[0] -= 1
        eng.record_one(0, j, y)
        share = 0.0
        if j in self._pending:
            self._pending.remove(j)
            share = self._pending_share
        elif self._pending:  # an item the caller chose: the outstanding selection is dropped
            self._pending = []
        self._unchecked = True
        if not self._pending:
            eng.check_stop(self._row)
            self._unchecked = False
        self._seconds.append(time.perf_counter() - t0 + share)
        self._events.append(("r", j))

    def record(self, item_id, score) -> None:
        """Record the score (0/1, or partial credit in [0, 1]) of an administered item."""
        if self.done:
            raise LiveRunError(f"the session is finished ({self.stop_reason}); start a new one "
                               "to administer more items")
        j = self._position(item_id)
        y = self._score(item_id, score)
        self._check_recordable(item_id, j)
        self._record(j, y)

    def record_many(self, item_ids, scores) -> None:
        """Record the answers of a round: ``scores[i]`` (0/1 or partial credit) for
        ``item_ids[i]``; None or NaN = no answer (the item is skipped). Everything is checked
        before anything is recorded; the answers enter in the order given and the stopping
        rules are checked once, when no item of the round is outstanding."""
        if self.done:
            raise LiveRunError(f"the session is finished ({self.stop_reason}); start a new one "
                               "to administer more items")
        item_ids = list(item_ids)
        scores = list(scores)
        if len(item_ids) != len(scores):
            raise ResponseDataError(f"record_many got {len(item_ids)} item ids and {len(scores)} "
                                    "scores; give one score (or None) per item")
        plan, seen = [], set()
        for item_id, score in zip(item_ids, scores):
            j = self._position(item_id)
            if j in seen:
                raise LiveRunError(f"item {item_id!r} appears twice in record_many")
            seen.add(j)
            missing = score is None or (isinstance(score, (float, np.floating))
                                        and np.isnan(score))
            if missing:
                if self._engine.used[0, j]:
                    raise LiveRunError(f"item {item_id!r} was already used in this session")
                plan.append((j, None))
            else:
                y = self._score(item_id, score)
                self._check_recordable(item_id, j)
                plan.append((j, y))
        for j, y in plan:
            if y is None:
                self._skip(j)
            else:
                self._record(j, y)

    def _skip(self, j: int) -> None:
        self._engine.skip(self._row, np.array([j]))
        self._skipped.append(j)
        self._events.append(("s", j))
        if j in self._pending:
            self._pending.remove(j)
            if not self._pending and self._unchecked and not self.done:
                self._engine.check_stop(self._row)
                self._unchecked = False

    def skip(self, item_id) -> None:
        """Take an item out of the pool without scoring it (e.g. the model gave no answer)."""
        if self.done:
            raise LiveRunError(f"the session is finished ({self.stop_reason})")
        j = self._position(item_id)
        if self._engine.used[0, j]:
            raise LiveRunError(f"item {item_id!r} was already used in this session")
        self._skip(j)

    # -------------------------------------------------------------- persistence
    def to_dict(self) -> dict:
        """JSON-serializable snapshot; ``from_dict(d, bank)`` resumes exactly (RNG included)."""
        eng = self._engine
        h = eng.history_of(0)
        ids = self.bank.item_ids
        return {
            "format": "atlascat.CATSession/1",
            "config": self.config.to_dict(),
            "bank": {"n_items": len(self.bank), "fingerprint": bank_fingerprint(self.bank)},
            "events": [[kind, str(ids[j])] for kind, j in self._events],
            "scores": [float(v) for v in h["scores"]],
            "seconds": [float(v) for v in self._seconds],
            "sh_rejected": [str(ids[j]) for j in eng.sh_rejected[0]],
            "pending": str(ids[self._pending[0]]) if self._pending else None,
            "pending_seconds": self._pending_share,
            "pending_batch": [str(ids[j]) for j in self._pending],
            "unchecked": self._unchecked,
            "done": self.done,
            "stop_reason": self.stop_reason,
            "theta": self.theta,
            "se": self.se,
            "rng": _jsonable_state(self.rng.bit_generator.state),
        }

    @classmethod
    def from_dict(cls, d: dict, bank: ItemBank, *, tracker=None) -> "CATSession":
        """Resume a session from ``to_dict()`` output with the same bank.

        ``tracker``: the shared ExposureTracker of an ``exposure="eligibility"`` population (the
        resumed answers are not counted again)."""
        from ..validation import check_snapshot

        check_snapshot(d)  # truncated / edited snapshots: one clear ConfigError
        fp = d["bank"]["fingerprint"]
        if fp != bank_fingerprint(bank):
            raise BankError("the bank differs from the one the session was run with "
                            f"(fingerprint {bank_fingerprint(bank)} != {fp}); pass the same bank")
        state = d["rng"]
        bitgen = getattr(np.random, state["bit_generator"])()
        bitgen.state = state
        session = cls(bank, CATConfig.from_dict(d["config"]), np.random.Generator(bitgen),
                      tracker=tracker)
        eng = session._engine
        exposure, eng.exposure = eng.exposure, None  # replaying: nothing new is administered
        if exposure is not None and hasattr(exposure, "tracker"):
            exposure.tracker.n_examinees -= 1  # this examinee was counted when it started
        scores = iter(d["scores"])
        seconds = iter(d["seconds"])
        for kind, item in d["events"]:
            j = session._position(item)
            if kind == "s":
                eng.skip(session._row, np.array([j]))
                session._skipped.append(j)
            else:
                if j in session._skipped:
                    session._skipped.remove(j)
                    eng.used[0, j] = False
                    eng.n_skipped[0] -= 1
                    eng.n_used[0] -= 1
                y, sec = next(scores, None), next(seconds, None)
                if y is None or sec is None:
                    raise ConfigError("CATSession snapshot is truncated: fewer scores/seconds "
                                      "than answer events; save it again with to_dict()")
                eng.record_one(0, j, float(y))
                session._seconds.append(sec)
            session._events.append((kind, j))
        for item in d.get("sh_rejected", []):
            j = session._position(item)
            eng.used[0, j] = True
            eng.n_used[0] += 1
            eng.sh_rejected[0].append(j)
        eng.exposure = exposure
        eng.done[0] = bool(d["done"])
        eng.stop_reason[0] = d["stop_reason"] or ""
        batch = d.get("pending_batch")
        if batch is None:  # snapshots written before batched rounds
            batch = [] if d.get("pending") is None else [d["pending"]]
        session._pending = [session._position(item) for item in batch]
        session._pending_share = float(d.get("pending_seconds", 0.0))
        session._unchecked = bool(d.get("unchecked", False))
        return session


def _jsonable_state(state):
    if isinstance(state, dict):
        return {k: _jsonable_state(v) for k, v in state.items()}
    if isinstance(state, np.ndarray):
        return state.tolist()
    if isinstance(state, np.integer):
        return int(state)
    return state


# ------------------------------------------------------------------------------ simulation
@dataclass
class CATResult:
    """Outcome of :func:`simulate_cat`.

    Attributes
    ----------
    persons : DataFrame, one row per examinee: subject_id, theta, se, posterior_sd, n_items,
        n_skipped, seconds, stop_reason (+ theta_ref, error when reference thetas were given)
    administered : DataFrame (long), one row per scored item: subject_id, item_id, order, score,
        theta, se
    n_skipped : int, replayed items without an answer (selected, not scored)
    exposure : Series indexed by item id, share of examinees who were given the item
    wall_seconds : float, total wall time of the simulation
    """

    persons: pd.DataFrame
    administered: pd.DataFrame
    n_skipped: int
    exposure: pd.Series
    config: CATConfig
    wall_seconds: float
    item_matrix: np.ndarray = field(repr=False)   # (n, max_items) bank positions, -1 padded
    item_ids: np.ndarray = field(repr=False)
    sh_trials: np.ndarray | None = field(default=None, repr=False)
    batch_size: int = 1

    @property
    def n_examinees(self) -> int:
        return len(self.persons)

    def __repr__(self) -> str:
        p = self.persons
        n = len(p)
        items = f", mean items {p['n_items'].mean():.1f}" if n and "n_items" in p else ""
        se = f", mean SE {p['se'].mean():.3f}" if n and "se" in p else ""
        return (f"CATResult(n_examinees={n}{items}{se}, max_items={self.config.max_items}, "
                f"{self.wall_seconds:.2g} s)")

    def selected_items(self, subject_id) -> pd.DataFrame:
        """The items given to one examinee, in order: item_id, order, score, theta, se."""
        df = self.administered
        out = df[df["subject_id"] == str(subject_id)]
        if out.empty and str(subject_id) not in set(self.persons["subject_id"]):
            raise KeyError(f"no examinee {subject_id!r} in this result")
        return out.drop(columns="subject_id").reset_index(drop=True)

    def asked_mask(self) -> np.ndarray:
        """Boolean (examinees x bank items): True where the item was administered."""
        m = np.asarray(self.item_matrix)
        asked = np.zeros((m.shape[0], len(self.item_ids)), dtype=bool)
        rows, cols = np.nonzero(m >= 0)
        asked[rows, m[rows, cols]] = True
        return asked

    def item_exposure(self) -> pd.DataFrame:
        """item_id, n_administered, exposure rate (share of examinees)."""
        counts = np.bincount(self.item_matrix[self.item_matrix >= 0],
                             minlength=len(self.item_ids))
        return pd.DataFrame({"item_id": self.item_ids.astype(str), "n_administered": counts,
                             "exposure": counts / max(self.n_examinees, 1)})

    def item_positions(self) -> pd.DataFrame:
        """Per item: how often and where in the test it was given (see security.position_analysis)."""
        return security.position_analysis(self.item_matrix, self.item_ids)

    def overlap(self) -> dict:
        """Test overlap rate by the exposure formula and by pairwise counting (they agree)."""
        return security.overlap_report(self.item_matrix, len(self.item_ids))

    def summary(self) -> dict:
        """Headline figures: items, precision, accuracy vs reference, exposure, overlap, time."""
        p = self.persons
        rates = self.exposure.to_numpy()
        out = {
            "n_examinees": int(len(p)),
            "items_mean": float(p["n_items"].mean()),
            "items_sd": float(p["n_items"].std(ddof=1)) if len(p) > 1 else 0.0,
            "items_min": int(p["n_items"].min()),
            "items_max": int(p["n_items"].max()),
            "se_mean": float(p["se"].mean()),
            "n_skipped": int(self.n_skipped),
            "stop_reasons": {str(k): int(v) for k, v in p["stop_reason"].value_counts().items()},
            "batch_size": int(self.batch_size),
            "rounds_mean": float(p["rounds"].mean() if "rounds" in p.columns
                                 else (p["n_items"] + p["n_skipped"]).mean()),
            "exposure": security.exposure_summary(rates),
            "overlap": self.overlap(),
            "time_total_seconds": float(self.wall_seconds),
            "time_per_examinee_seconds": float(self.wall_seconds / max(len(p), 1)),
            "selection_time": security.selection_time(p["seconds"].to_numpy()),
            "config": self.config.to_dict(),
        }
        if "theta_ref" in p.columns:
            err = p["error"].to_numpy(float)
            ok = np.isfinite(err)
            out["mae"] = float(np.mean(np.abs(err[ok])))
            out["rmse"] = float(np.sqrt(np.mean(err[ok] ** 2)))
            out["bias"] = float(np.mean(err[ok]))
            if ok.sum() > 2:
                out["correlation"] = float(np.corrcoef(p["theta"][ok], p["theta_ref"][ok])[0, 1])
        return out


def simulate_cat(bank: ItemBank, config: CATConfig | None = None, *, responses=None, thetas=None,
                 answer_fn=None, rng=None, subject_ids=None, theta_ref=None,
                 progress=None, batch_size: int = 1, batch_cut: str = "predicted",
                 batch_method: str = "mepv") -> CATResult:
    """Run the adaptive test for many examinees at once.

    Exactly one answer source: ``responses`` (ResponseMatrix or (n, J) array in bank order:
    replay real answers; cells without an answer are skipped and counted, and an examinee whose
    pool holds no answered item any more is finished, ``bank_exhausted``), ``thetas`` (true
    abilities: answers drawn from the bank's model), or ``answer_fn(subject_ids, item_ids) ->
    scores`` (with ``subject_ids``). With ``thetas`` the true values are the reference for the
    error columns; ``theta_ref`` supplies reference values otherwise.

    Randomness: ``sel = rng.spawn(n)`` gives examinee i's selection generator (the one a
    :class:`CATSession` for it would get); with ``thetas``, a second ``ans = rng.spawn(n)`` gives
    its answer stream (answer k = 1{ans[i].random() < P}). So::

        rng = np.random.default_rng(s); sel = rng.spawn(n); ans = rng.spawn(n)
        CATSession(bank, config, sel[i])   # reproduces examinee i exactly

    ``batch_size=k`` runs the test in rounds of up to k items chosen jointly
    (:meth:`CATSession.next_items`, ``cut=batch_cut``, ``method=batch_method``), all answered before the next round;
    examinee i is then exactly a session driven by ``next_items(k)`` / ``record_many`` with
    ``sel[i]`` (answers with no value are skipped; no re-pick inside a round). The number of
    rounds per examinee is the ``rounds`` column of ``persons``. ``k = 1`` is the classic CAT.

    ``progress(n_done, n_total)`` is called after every step (round).
    """
    t_start = time.perf_counter()
    config = CATConfig() if config is None else config
    if not isinstance(config, CATConfig):
        raise ConfigError(f"config must be a CATConfig, got {type(config).__name__}")
    given = [x is not None for x in (responses, thetas, answer_fn)]
    if sum(given) != 1 and not (responses is not None and thetas is not None
                                and answer_fn is None):
        raise ConfigError("give exactly one answer source: responses=, thetas= or answer_fn=")
    rng = _as_generator(rng)
    if responses is not None:
        source = ReplayAnswers(responses, bank, subject_ids)
        sel_rngs = rng.spawn(source.n_examinees)
        if thetas is not None:  # thetas then only serve as the reference
            theta_ref = thetas
    elif thetas is not None:
        n = np.asarray(thetas).reshape(-1).size
        sel_rngs = rng.spawn(n)
        source = ModelAnswers(thetas, bank, rng.spawn(n), subject_ids)
        theta_ref = source.thetas if theta_ref is None else theta_ref
    else:
        if subject_ids is None:
            raise ConfigError("answer_fn needs subject_ids (one per examinee)")
        source = CallableAnswers(answer_fn, bank, subject_ids)
        sel_rngs = rng.spawn(source.n_examinees)
    n = source.n_examinees
    if theta_ref is not None:
        theta_ref = np.asarray(theta_ref, dtype=float).reshape(-1)
        if theta_ref.size != n:
            raise ConfigError(f"theta_ref has {theta_ref.size} values for {n} examinees")

    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) \
            or batch_size < 1:
        raise ConfigError(f"batch_size must be an integer >= 1, got {batch_size!r}")
    if batch_cut not in ("predicted", "none"):
        raise ConfigError(f"batch_cut must be 'predicted' or 'none', got {batch_cut!r}")
    if batch_method not in BATCH_METHODS:
        raise ConfigError(f"batch_method must be one of {BATCH_METHODS}, got {batch_method!r}")
    exp = make_exposure_control(bank, config, cohort=n)
    if exp is not None:
        exp.start(n)
    eng = _Engine(bank, config, n, exposure=exp)
    streams = UniformStreams(sel_rngs)
    seconds = np.zeros(n)
    if batch_size > 1:
        rounds = _simulate_rounds(eng, source, streams, exp, int(batch_size), batch_cut,
                                  batch_method, seconds, progress)
        wall = time.perf_counter() - t_start
        res = _collect(bank, config, eng, source.subject_ids, seconds, theta_ref, wall)
        res.persons.insert(res.persons.columns.get_loc("n_skipped") + 1, "rounds", rounds)
        res.batch_size = int(batch_size)
        return res
    k = config.uniforms_per_step
    # replayed answers: once an examinee has no answered item left in its pool it is finished
    # (instead of skipping through the rest of the bank one item per step)
    answerable = getattr(source, "answerable", None)
    left = None if answerable is None else answerable.copy()
    if left is not None:
        eng.finish(np.flatnonzero(left == 0), "bank_exhausted")
    # skipped items re-picked from the ranking already made (theta has not moved): replay only,
    # and not under exposure control (its state changes between picks)
    repick = answerable is not None and exp is None and config.selection != "random"
    active = np.flatnonzero(~eng.done)
    while active.size:
        t0 = time.perf_counter()
        u = streams.next(active, k)
        if repick:
            items, cache = eng.select(active, u, keep=True, extra=_REPICK_EXTRA)
        else:
            items = eng.select(active, u)
        if exp is not None and exp.caps_cohort:
            items = exp.resolve_conflicts(eng, active, items, u)
        none = items < 0
        if none.any():
            eng.finish(active[none], "bank_exhausted")
        where = np.flatnonzero(~none)
        rows, items = active[where], items[where]
        y = source.answers(rows, items)
        miss = np.isnan(y)
        if miss.any() and repick:
            y, items = _repick_skipped(eng, source, streams, cache, where, rows, items, y)
            miss = np.isnan(y)
        elif miss.any():
            eng.skip(rows[miss], items[miss])
        eng.record(rows[~miss], items[~miss], y[~miss])
        if left is not None:
            scored = rows[~miss]
            left[scored] -= 1
            eng.finish(scored[left[scored] == 0], "bank_exhausted")
        seconds[active] += (time.perf_counter() - t0) / active.size
        active = active[~eng.done[active]]
        if progress is not None:
            progress(int(eng.done.sum()), n)
    wall = time.perf_counter() - t_start
    return _collect(bank, config, eng, source.subject_ids, seconds, theta_ref, wall)


def _simulate_rounds(eng: _Engine, source, streams, exp, k: int, cut: str, method: str,
                     seconds, progress) -> np.ndarray:
    """The batched loop of :func:`simulate_cat`: rounds of up to k items per examinee.

    Mirrors a session driven by ``next_items(k)`` / ``record_many``: the round's picks
    (:meth:`_Engine.select_batch`), then its answers in pick order (scored, or skipped when
    missing), then one stopping check for the rows that scored something. Replayed answers:
    an examinee with no answered item left in its pool is finished (``bank_exhausted``).
    Returns the number of rounds of every examinee.
    """
    n = eng.n
    ups = eng.config.uniforms_per_step
    answerable = getattr(source, "answerable", None)
    left = None if answerable is None else answerable.copy()
    if left is not None:
        eng.finish(np.flatnonzero(left == 0), "bank_exhausted")
    cohort = exp is not None and exp.caps_cohort
    resolve = (lambda r, items, u: exp.resolve_conflicts(eng, r, items, u)) if cohort else None
    reserve = exp.reserve if cohort else None
    rounds = np.zeros(n, dtype=np.intp)
    active = np.flatnonzero(~eng.done)
    while active.size:
        t0 = time.perf_counter()
        picks = eng.select_batch(active, k, lambda r: streams.next(r, ups), cut=cut,
                                 method=method, resolve=resolve, reserve=reserve)
        if cohort:
            exp.release()
        none = picks[:, 0] < 0
        eng.finish(active[none], "bank_exhausted")
        rounds[active[~none]] += 1
        scored = np.zeros(active.size, dtype=bool)
        for m in range(k):
            idx = np.flatnonzero(picks[:, m] >= 0)
            if idx.size == 0:
                break
            rows, items = active[idx], picks[idx, m]
            y = source.answers(rows, items)
            miss = np.isnan(y)
            eng.record(rows[~miss], items[~miss], y[~miss], check_stop=False)
            if miss.any():
                eng.skip(rows[miss], items[miss])
            scored[idx[~miss]] = True
            if left is not None:
                left[rows[~miss]] -= 1
        eng.check_stop(active[scored])
        if left is not None:
            eng.finish(active[left[active] == 0], "bank_exhausted")
        seconds[active] += (time.perf_counter() - t0) / active.size
        active = active[~eng.done[active]]
        if progress is not None:
            progress(int(eng.done.sum()), n)
    return rounds


def _repick_skipped(eng, source, streams, cache, where, rows, items, y):
    """Skip unanswered picks and pick again from the cached ranking until every row has an
    answer or its cached list no longer settles the pick (it then selects afresh next step).

    Exactly the picks a fresh selection would make: theta, n and costs are unchanged by a
    skip, so the ranking of the other items is too; the top k of what is left is the first k
    remaining entries of the cached list, provided it still has k of them (or holds every
    eligible item). Each pick consumes one uniform, as a fresh selection would.
    """
    cand_all, k_all, complete_all = cache
    cand, k, complete = cand_all[where], k_all[where], complete_all[where]
    removed = np.zeros(cand.shape, dtype=bool)
    items = items.copy()
    y = y.copy()
    todo = np.flatnonzero(np.isnan(y))
    while todo.size:
        eng.skip(rows[todo], items[todo])
        removed[todo] |= cand[todo] == items[todo][:, None]
        remaining = (cand[todo] >= 0) & ~removed[todo]
        n_rem = remaining.sum(axis=1)
        ok = ((complete[todo] | (n_rem >= k[todo])) & (n_rem > 0) & ~eng.done[rows[todo]])
        if not ok.any():
            break
        t, rem = todo[ok], remaining[ok]
        u = streams.next(rows[t], eng.config.uniforms_per_step)[:, 0]
        k_eff = np.minimum(k[t], n_rem[ok])
        target = np.minimum((u * k_eff).astype(np.intp), k_eff - 1)
        rank = np.cumsum(rem, axis=1) - 1
        pos = np.argmax(rem & (rank == target[:, None]), axis=1)
        items[t] = cand[t, pos]
        y[t] = source.answers(rows[t], items[t])
        todo = t[np.isnan(y[t])]
    return y, items


def _collect(bank, config, eng: _Engine, subject_ids, seconds, theta_ref, wall) -> CATResult:
    n = eng.n
    sids = np.asarray([str(s) for s in subject_ids], dtype=object)
    persons = pd.DataFrame({
        "subject_id": sids,
        "theta": eng.theta.copy(),
        "se": eng.se.copy(),
        "posterior_sd": eng.post_sd.copy(),
        "n_items": eng.n_items.copy(),
        "n_skipped": eng.n_skipped.copy(),
        "seconds": seconds,
        "stop_reason": eng.stop_reason.astype(str),
    })
    if theta_ref is not None:
        persons["theta_ref"] = theta_ref
        persons["error"] = persons["theta"] - theta_ref
    item_matrix = eng.items[:, :config.max_items].copy()
    mask = item_matrix >= 0
    rows, cols = np.nonzero(mask)
    administered = pd.DataFrame({
        "subject_id": sids[rows],
        "item_id": bank.item_ids[item_matrix[rows, cols]].astype(str),
        "order": cols + 1,
        "score": eng.scores[rows, cols],
        "theta": eng.theta_hist[rows, cols],
        "se": eng.se_hist[rows, cols],
    })
    counts = np.bincount(item_matrix[mask], minlength=len(bank))
    exposure = pd.Series(counts / max(n, 1), index=pd.Index(bank.item_ids.astype(str),
                                                            name="item_id"), name="exposure")
    return CATResult(persons=persons, administered=administered,
                     n_skipped=int(eng.n_skipped.sum()), exposure=exposure, config=config,
                     wall_seconds=wall, item_matrix=item_matrix,
                     item_ids=bank.item_ids.copy(), sh_trials=eng.sh_trials.copy())
