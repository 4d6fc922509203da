"""Selection criteria, ranking and picking."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import integrate, stats

from atlascat.cat.config import CATConfig
from atlascat.errors import ConfigError
from atlascat.cat.session import CATSession
from atlascat.cat.simulate import simulate_cat
from atlascat.cat.state import _Engine
from atlascat.cat.selection import (AStratified, InfoPruner, ItemParams, KLInterval,
                                    MaxInformation, first_item_scores, fisher_information, pick,
                                    ranked_candidates)
from atlascat.catalogue import load_paper_bank as load_bank
from atlascat.irt import models
from atlascat.irt.bank import ItemBank


class TestFisherInformation:
    def test_matches_models_module_including_extremes(self, rng):
        n = 400
        a = np.concatenate([rng.uniform(-3, 40, n), [0.0, 1e-8, 60.0]])
        b = np.concatenate([rng.normal(0, 3, n), [0.0, 0.0, 5.0]])
        c = np.concatenate([rng.uniform(0, 0.6, n), [0.2, 0.0, 0.0]])
        u = np.concatenate([rng.uniform(0.7, 1.0, n // 2), np.ones(n - n // 2 + 3)])
        theta = np.array([-40.0, -6.0, -1.3, 0.0, 0.7, 6.0, 40.0])
        got = fisher_information(theta[:, None], ItemParams(a, b, c, u))
        ref = models.item_information(theta, a, b, c, u)
        assert np.all(np.isfinite(got)) and np.all(got >= 0)
        np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-300)

    def test_against_finite_differences(self):
        """I = P'^2 / (P Q) with P' from central differences of the IRF."""
        a, b, c, u = np.array([1.7, 0.6]), np.array([0.3, -1.0]), np.array([0.2, 0.0]), \
            np.array([0.95, 1.0])
        theta, h = 0.4, 1e-5
        p = models.probability(theta, a, b, c, u)
        dp = (models.probability(theta + h, a, b, c, u)
              - models.probability(theta - h, a, b, c, u)) / (2 * h)
        got = fisher_information(np.array([[theta]]), ItemParams(a, b, c, u))[0]
        np.testing.assert_allclose(got, dp ** 2 / (p * (1 - p)), rtol=1e-7)

    def test_padded_table_gives_zero_information(self):
        params = ItemParams([1.0, 2.0], [0.0, 1.0], [0.1, 0.2], [1.0, 1.0]).padded()
        info = fisher_information(np.array([[0.5]]), params.table[:, np.array([[0, -1, 1]])][:, 0])
        assert info[0, 1] == 0.0 and info[0, 0] > 0 and info[0, 2] > 0


class TestKL:
    def test_kl_interval_matches_quadrature(self):
        a, b, c = np.array([1.4, 0.8]), np.array([0.2, -0.5]), np.array([0.15, 0.0])
        params = ItemParams(a, b, c, np.ones(2))
        theta, n = 0.3, 4
        got = KLInterval(3.0, 9).scores(np.array([theta]), np.array([n]), None, params)[0]
        d = 3.0 / np.sqrt(n)
        for j in range(2):
            def kl(t):
                p0 = models.probability(theta, a[j:j + 1], b[j:j + 1], c[j:j + 1])[0]
                p = models.probability(t, a[j:j + 1], b[j:j + 1], c[j:j + 1])[0]
                return p * np.log(p / p0) + (1 - p) * np.log((1 - p) / (1 - p0))
            ref = integrate.quad(kl, theta - d, theta + d)[0]
            assert got[j] == pytest.approx(ref, rel=1e-6)

    def test_kl_near_fisher_for_small_intervals(self):
        """KL(t || theta) ~ I(theta) (t - theta)^2 / 2, so KL_interval ~ I d^3 / 3."""
        params = ItemParams([1.2, 2.0, 0.5], [0.0, 0.5, -1.0], [0.0, 0.1, 0.2], np.ones(3))
        crit = KLInterval(width=0.03, points=5)
        got = crit.scores(np.array([0.2]), np.array([1]), None, params)[0]
        info = fisher_information(np.array([[0.2]]), params)[0]
        np.testing.assert_allclose(got, info * 0.03 ** 3 / 3, rtol=1e-3)


class TestAStratified:
    def test_strata_and_stages(self):
        a = np.array([0.5, 2.0, 1.0, 1.5, 0.6, 1.9, 0.9, 1.4])
        b = np.array([0.0, 0.1, -0.2, 0.5, 1.0, -1.0, 0.3, 0.05])
        crit = AStratified(a, strata=2, stage_items=3)
        np.testing.assert_array_equal(crit.stratum, [0, 1, 0, 1, 0, 1, 0, 1])
        params = ItemParams(a, b, np.zeros(8), np.ones(8))
        used = np.zeros((2, 8), dtype=bool)
        s = crit.scores(np.array([0.0, 0.0]), np.array([0, 5]), used, params)
        # stage 0 -> low-a stratum, closest b to 0 is item 0; stage 1 -> item 7 (b = 0.05)
        assert np.argmax(s[0]) == 0 and np.argmax(s[1]) == 7
        assert np.all(np.isinf(s[0, crit.stratum == 1]))
        used[0, crit.stratum == 0] = True  # stratum exhausted: nearest stratum takes over
        s = crit.scores(np.array([0.0]), np.array([0]), used[:1], params)
        assert np.argmax(s[0]) == 7

    def test_astrat_uses_low_a_items_first(self):
        bank = load_bank("arc")
        res = simulate_cat(bank, CATConfig(selection="astrat", astrat_strata=4, min_items=20,
                                           max_items=20, se_stop=None),
                           thetas=np.zeros(30), rng=0)
        a = bank.a[bank.index_of(res.administered["item_id"])]
        order = res.administered["order"].to_numpy()
        # first stage (items 2..5) from the lowest quarter of a, last stage from the top quarter
        q = np.quantile(bank.a, [0.25, 0.75])
        assert np.all(a[(order >= 2) & (order <= 5)] <= q[0] + 1e-12)
        assert np.all(a[order >= 16] >= q[1] - 1e-12)


class TestRanking:
    def test_total_order_with_ties(self):
        scores = np.array([[1.0, 3.0, 3.0, 2.0, 3.0, -np.inf, np.nan]])
        cand, n_fin, vals = ranked_candidates(scores, 3)
        np.testing.assert_array_equal(cand[0], [1, 2, 4])
        cand, n_fin, _ = ranked_candidates(scores, 2)
        np.testing.assert_array_equal(cand[0], [1, 2])  # ties resolved by position
        cand, n_fin, _ = ranked_candidates(scores, 7)
        np.testing.assert_array_equal(cand[0], [1, 2, 4, 3, 0, -1, -1])
        assert n_fin[0] == 5
        ids = np.array([[10, 40, 30, 20, 50, 60, 70]])
        cand, _, _ = ranked_candidates(scores, 2, ids)
        np.testing.assert_array_equal(cand[0], [30, 40])

    def test_pick_is_uniform_over_top_k(self):
        rng = np.random.default_rng(0)
        scores = np.tile(np.arange(20.0), (20000, 1))
        cand, n_fin, _ = ranked_candidates(scores, 5)
        items = pick(cand, n_fin, 5, rng.random(20000))
        counts = np.bincount(items, minlength=20)
        assert set(np.flatnonzero(counts)) == {15, 16, 17, 18, 19}
        assert stats.chisquare(counts[15:]).pvalue > 0.001
        # k larger than the candidates left
        assert pick(np.array([[4, -1, -1]]), np.array([1]), 5, np.array([0.99]))[0] == 4
        assert pick(np.array([[-1, -1]]), np.array([0]), 5, np.array([0.5]))[0] == -1

    def test_first_item_window(self):
        b = np.array([-1.0, 0.2, -0.4, 0.6, 0.49])
        used = np.zeros((2, 5), dtype=bool)
        used[1, [1, 2, 4]] = True
        scores, k = first_item_scores(used, b, 0.0, 0.5)
        np.testing.assert_array_equal(np.isfinite(scores[0]), [False, True, True, False, True])
        assert k[0] == 3
        assert k[1] == 1 and np.argmax(scores[1]) == 3  # window used up: nearest (0.6)

    def test_pruned_selection_equals_full_scan(self, rng):
        """InfoPruner gives exactly the full scan's ranking (HellaSwag, many random states)."""
        bank = load_bank("hellaswag")
        config = CATConfig(randomesque=5)
        eng = _Engine(bank, config, 200)
        assert eng.tab.pruner is not None
        eng.theta[:] = rng.uniform(-4, 4, 200)
        eng.n_items[:] = 3
        eng.used[:] = rng.random(eng.used.shape) < 0.05
        eng.used[:, eng.tab.pruner.order[:, :3].ravel()] = True  # the best of many cells gone
        rows = np.arange(200)
        blocked = eng.used[rows]
        scanned = []
        full_scores = eng.tab.criterion.scores
        eng.tab.criterion.scores = lambda theta, *a: scanned.append(len(theta)) or full_scores(
            theta, *a)
        try:
            fast, n_fast = eng._rank(rows, blocked, 5)
        finally:
            del eng.tab.criterion.scores
        assert sum(scanned) < 20  # the shortcut settled (almost) every row
        pruner, eng.tab.pruner = eng.tab.pruner, None
        try:
            full, n_full = eng._rank(rows, blocked, 5)
        finally:
            eng.tab.pruner = pruner
        np.testing.assert_array_equal(fast, full)
        np.testing.assert_array_equal(n_fast, n_full)

    def test_pruner_bound_is_an_upper_bound(self, rng):
        bank = load_bank("gsm8k")
        params = ItemParams.from_bank(bank)
        pr = InfoPruner(params, (-6, 6))
        theta = rng.uniform(-6, 6, 300)
        cell, ok = pr.cells(theta)
        assert ok.all()
        info = fisher_information(theta[:, None], params)
        for m in (16, 64):
            # no item outside the first m of the cell order beats the bound at m
            inside = np.zeros_like(info, dtype=bool)
            np.put_along_axis(inside, pr.order[cell, :m], True, axis=1)
            outside_max = np.where(inside, -np.inf, info).max(axis=1)
            assert np.all(outside_max <= pr.bound[cell, m])

    def test_pruner_cells_computed_when_visited_are_the_same(self, rng):
        """A cell's bounds and order do not depend on which cells were computed with it."""
        params = ItemParams.from_bank(load_bank("gsm8k"))
        whole = InfoPruner(params, (-6, 6))
        order, bound = whole.order.copy(), whole.bound.copy()   # every cell at once
        lazy = InfoPruner(params, (-6, 6))
        for theta in (np.array([0.3]), rng.uniform(-2, 2, 40), np.array([-6.0, 6.0, 2.0])):
            cell, ok = lazy.cells(theta)
            np.testing.assert_array_equal(lazy.top(cell, lazy.keep), order[cell])
            np.testing.assert_array_equal(lazy.bound_after(cell, 7), bound[cell, 7])
        assert 0 < lazy._ready.sum() < lazy.n_cells
        np.testing.assert_array_equal(lazy.order, order)
        np.testing.assert_array_equal(lazy.bound, bound)

    def test_pruner_not_used_for_4pl(self):
        bank = ItemBank([str(i) for i in range(300)], np.ones(300), np.linspace(-2, 2, 300),
                        np.zeros(300), np.full(300, 0.95))
        assert _Engine(bank, CATConfig(), 1).tab.pruner is None


def test_mfi_session_picks_among_five_best(rng):
    bank = load_bank("truthfulqa")
    s = CATSession(bank, CATConfig(randomesque=5), rng=rng)
    s.record(s.next_item(), 1)
    ranks = []
    for _ in range(15):
        info = bank.information(s.theta)
        info[bank.index_of(s.administered)] = -np.inf
        item = s.next_item()
        ranks.append(int((info > info[bank.index_of([item])[0]]).sum()))
        s.record(item, float(rng.random() < 0.5))
    assert max(ranks) <= 4 and len(set(ranks)) > 1


def test_max_information_criterion_is_fisher():
    params = ItemParams([1.0, 2.0], [0.0, 1.0], [0.0, 0.2], [1.0, 1.0])
    s = MaxInformation().scores(np.array([0.3, -1.0]), np.array([1, 1]), None, params)
    np.testing.assert_allclose(s, models.item_information(np.array([0.3, -1.0]), params.a,
                                                          params.b, params.c, params.u))


def test_first_item_pick_is_the_ranked_pick(rng):
    """The first item without ranking the bank: the pick of first_item_scores' ranking."""
    from atlascat.cat.selection import first_item_pick, first_item_scores, pick, ranked_candidates

    b = np.round(rng.normal(0.0, 1.0, 400), 1)  # ties in the distance to theta0
    for share in (0.0, 0.3, 0.97, 1.0):
        used = rng.random((60, b.size)) < share
        used[:5] = True                       # nothing left
        used[5:10] = np.abs(b - 0.2) < 0.5    # the window used up: the nearest other item
        u = rng.random(60)
        for theta0, window in ((0.2, 0.5), (3.5, 0.1), (0.0, 10.0)):
            scores, k = first_item_scores(used, b, theta0, window)
            cand, n_fin, _ = ranked_candidates(scores, b.size)
            np.testing.assert_array_equal(first_item_pick(used, b, theta0, window, u),
                                          pick(cand, n_fin, k, u))


class TestMaxInformationPerCost:
    def test_scores_are_information_per_unit_cost(self):
        from atlascat.cat.selection import MaxInformationPerCost

        params = ItemParams([1.2, 2.0, 0.5, 1.0], [0.0, 0.5, -1.0, 0.2], np.zeros(4), np.ones(4))
        cost = np.array([2.0, 4.0, 0.5, 0.0])
        theta = np.array([-0.3, 0.4])
        got = MaxInformationPerCost(cost).scores(theta, np.array([3, 3]), None, params)
        info = fisher_information(theta[:, None], params)
        np.testing.assert_allclose(got[:, :3], info[:, :3] / cost[:3], rtol=1e-14)
        # free information is taken first, with a finite score (the ranking's candidates)
        assert np.all(np.isfinite(got[:, 3])) and np.all(got[:, 3] > got[:, :3].max(axis=1))

    def test_free_items_are_asked_first_and_the_test_goes_on(self):
        """Items of cost 0 under mfi-cost and a budget: asked first, by information, and the
        test then spends its budget (a +inf score once made the engine see no candidate and
        end every test as bank_exhausted after a few items)."""
        from atlascat.cat.simulate import simulate_cat
        from atlascat.irt.bank import ItemBank

        rng = np.random.default_rng(3)
        J = 120
        cost = rng.uniform(1.0, 3.0, J)
        cost[[5, 17, 40]] = 0.0
        a = rng.lognormal(0.2, 0.3, J)
        bank = ItemBank([f"i{j}" for j in range(J)], a, rng.normal(0, 1, J),
                        metadata=pd.DataFrame({"tokens": cost}))
        cfg = CATConfig(selection="mfi-cost", randomesque=1, se_stop=None, min_items=1,
                        max_items=J, cost_column="tokens", budget=20.0)
        res = simulate_cat(bank, cfg, thetas=rng.normal(size=50), rng=1)
        assert set(res.persons["stop_reason"]) == {"budget"}
        assert (res.persons["cost"] > 20.0 - 3.0).all()
        # after the first item (the first-item rule's), the three free ones
        assert np.isin(res.item_matrix[:, 1:4], [5, 17, 40]).all()

    def test_equal_costs_ask_what_mfi_asks(self):
        from atlascat.cat.simulate import simulate_cat

        bank = load_bank("gsm8k").subset(np.arange(300))
        thetas = np.linspace(-2, 2, 40)
        base = dict(se_stop=0.3, cost_per_item=3.0)
        a = simulate_cat(bank, CATConfig(selection="mfi", **base), thetas=thetas, rng=4)
        b = simulate_cat(bank, CATConfig(selection="mfi-cost", **base), thetas=thetas, rng=4)
        np.testing.assert_array_equal(a.item_matrix, b.item_matrix)
        np.testing.assert_allclose(a.persons["theta"], b.persons["theta"], rtol=0, atol=0)

    def test_under_a_budget_it_buys_more_information(self):
        """Costs that vary: at the same budget the per-cost rule ends with a smaller SE."""
        from atlascat.cat.simulate import simulate_cat
        from atlascat.irt.bank import ItemBank

        rng = np.random.default_rng(2)
        J = 200
        meta = pd.DataFrame({"tokens": rng.lognormal(0.0, 0.8, J)})
        bank = ItemBank([f"i{j}" for j in range(J)], rng.lognormal(0.2, 0.3, J),
                        rng.normal(0, 1, J), metadata=meta)
        thetas = rng.normal(size=300)
        base = dict(se_stop=None, min_items=1, max_items=J, cost_column="tokens", budget=15.0)
        se = {sel: simulate_cat(bank, CATConfig(selection=sel, **base), thetas=thetas,
                                rng=5).persons["se"].mean() for sel in ("mfi", "mfi-cost")}
        assert se["mfi-cost"] < 0.9 * se["mfi"]

    def test_needs_costs(self):
        with pytest.raises(ConfigError, match="mfi-cost.*cost_column"):
            CATConfig(selection="mfi-cost")
