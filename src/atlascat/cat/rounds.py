"""Joint rounds: up to k items per examinee chosen together (greedy sequential selection).

Pick m is an ordinary selection on a *virtual* state in which the round's earlier picks were
answered with their expected score y = sum_q pi_q P_j(theta_q) (posterior predictive). Picks
after the first are scored by ``method``:

- "mepv": expected reduction of the posterior variance, sum_q pi_q [1/A_q - 1/(A_q + I_jq)],
  pi the posterior at the start of the round and A_q the node precision (prior + information
  of the items given and picked); exact bound pruning with 1/A - 1/(A + I) <= I / A^2.
- "expected": the criterion at the virtual EAP theta.
- "preposterior": the criterion averaged over N(theta_virtual, sd0^2 - sd_m^2) by 7-point
  Gauss-Hermite.

The mixin runs on the state of :class:`~atlascat.cat.state._Engine` (posterior, select,
record, stopping decision) and restores it after the round.
"""
from __future__ import annotations

import numpy as np

from ..errors import ConfigError
from .selection import criterion_scores, ranked_candidates

BATCH_METHODS = ("expected", "preposterior", "mepv")  # see _JointRounds.select_batch


class _JointRounds:
    """Joint selection of a round of k items (mixed into :class:`~atlascat.cat.state._Engine`)."""

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
            sc = wg * criterion_scores(tab.criterion, theta + spread * xg, n, blocked,
                                       tab.params)
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

    # -------------------------------------------------------------- the round
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
        spread = method == "preposterior" and self.config.selection.criterion == "mfi"
        design = method == "mepv" and self.config.selection.criterion == "mfi" and k > 1
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
        if self.grids is not None:   # (3, n, Q): rows on the second axis
            saved["grids"] = self.grids[:, rows].copy()
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
            if name == "grids":
                self.grids[:, rows] = value
            else:
                getattr(self, name)[rows] = value
        self._best_cache = None
