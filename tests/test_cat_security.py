"""Exposure rates, test overlap (two independent computations), positions, selection time."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from atlascat.cat import security
from atlascat.cat.config import CATConfig
from atlascat.cat.simulate import simulate_cat
from atlascat.catalogue import load_paper_bank as load_bank, load_test_thetas


def brute_force_overlap(tests):
    """Sum over pairs of shared items / sum over pairs of mean pair length, by plain sets."""
    sets = [set(t) for t in tests]
    shared = lengths = 0.0
    for x, y in itertools.combinations(sets, 2):
        shared += len(x & y)
        lengths += (len(x) + len(y)) / 2
    return shared / lengths


class TestOverlap:
    def test_hand_example(self):
        tests = [[0, 1, 2], [1, 2, 3], [4, 5, 6]]
        # pairs share 2, 0, 0 items; test length 3: T = 2 / 9
        rep = security.overlap_report(tests, 7)
        assert rep["pairwise"] == pytest.approx(2 / 9)
        assert rep["formula"] == pytest.approx(2 / 9)
        assert rep["fixed_length_formula"] == pytest.approx(2 / 9)
        rates = security.exposure_rates(tests, 7)
        np.testing.assert_allclose(rates, [1 / 3, 2 / 3, 2 / 3, 1 / 3, 1 / 3, 1 / 3, 1 / 3])

    def test_variable_length_random_tests(self, rng):
        n_items = 60
        tests = [rng.choice(n_items, size=rng.integers(1, 25), replace=False,
                            p=np.linspace(1, 3, n_items) / np.linspace(1, 3, n_items).sum())
                 for _ in range(80)]
        ref = brute_force_overlap(tests)
        pair = security.overlap_pairwise(tests, n_items)
        rates = security.exposure_rates(tests, n_items)
        formula = security.overlap_from_exposure(rates, security.test_lengths(tests))
        assert pair["overlap"] == pytest.approx(ref, rel=1e-12)
        assert formula == pytest.approx(ref, rel=1e-12)
        # the mean of per-pair ratios is a different statistic for unequal lengths
        assert pair["mean_pair_ratio"] != pytest.approx(ref, rel=1e-3)

    def test_fixed_length_cat_three_ways_agree(self):
        """Fixed-length CAT: pairwise counting, the exposure formula and Chen et al. (2003)."""
        bank = load_bank("truthfulqa")
        thetas = load_test_thetas("truthfulqa")["theta"].to_numpy()[:200]
        res = simulate_cat(bank, CATConfig.fixed_length(25), thetas=thetas, rng=3)
        rep = res.overlap()
        assert (res.persons["n_items"] == 25).all()
        assert rep["pairwise"] == pytest.approx(rep["formula"], rel=1e-12)
        assert rep["fixed_length_formula"] == pytest.approx(rep["pairwise"], rel=1e-12)
        # the large-N form n S^2 / L + L / n differs by O(1 / N)
        rates = res.exposure.to_numpy()
        approx = rates.size * rates.var() / 25 + 25 / rates.size
        assert abs(approx - rep["pairwise"]) < 1.5 / (200 - 1)
        assert 0 < rep["pairwise"] < 1

    def test_variable_length_cat_agrees(self):
        bank = load_bank("arc")
        thetas = load_test_thetas("arc")["theta"].to_numpy()[:150]
        res = simulate_cat(bank, CATConfig(se_stop=0.15), thetas=thetas, rng=4)
        assert res.persons["n_items"].nunique() > 3
        rep = res.overlap()
        assert rep["pairwise"] == pytest.approx(rep["formula"], rel=1e-12)
        assert "fixed_length_formula" not in rep
        tests = [res.selected_items(s)["item_id"].tolist() for s in res.persons["subject_id"]]
        assert brute_force_overlap(tests) == pytest.approx(rep["pairwise"], rel=1e-12)

    def test_identical_and_disjoint_tests(self):
        same = [[0, 1, 2]] * 5
        assert security.overlap_report(same, 10)["pairwise"] == pytest.approx(1.0)
        assert security.overlap_report(same, 10)["formula"] == pytest.approx(1.0)
        disjoint = [[0, 1], [2, 3], [4, 5]]
        assert security.overlap_report(disjoint, 6)["pairwise"] == 0.0
        assert security.overlap_report(disjoint, 6)["formula"] == pytest.approx(0.0, abs=1e-15)


class TestPositionsAndExposure:
    def test_position_analysis_hand_example(self):
        m = np.array([[3, 1, 0], [1, 3, -1], [1, 2, -1]])
        df = security.position_analysis(m, ["a", "b", "c", "d"]).set_index("item_id")
        assert df.loc["b", "n_administered"] == 3
        assert df.loc["b", "position_mean"] == pytest.approx(4 / 3)
        assert df.loc["b", "position_sd"] == pytest.approx(np.std([2, 1, 1]))
        assert df.loc["b", "position_min"] == 1 and df.loc["b", "position_max"] == 2
        assert df.loc["b", "first_count"] == 2
        assert df.loc["b", "first_share"] == pytest.approx(2 / 3)
        assert df.loc["d", "first_count"] == 1 and df.loc["d", "position_mean"] == 1.5
        assert df.loc["c", "n_administered"] == 1 and df.loc["c", "position_mean"] == 2
        assert df.loc["a", "position_max"] == 3

    def test_exposure_summary(self):
        s = security.exposure_summary(np.array([0.0, 0.1, 0.3, 0.6]))
        assert s["max"] == 0.6 and s["n_used"] == 3 and s["n_over_0.2"] == 2
        assert s["share_unused"] == 0.25
        assert s["mean_used"] == pytest.approx(1 / 3)

    def test_result_positions_and_time(self):
        bank = load_bank("arc")
        res = simulate_cat(bank, CATConfig(se_stop=0.3), thetas=np.zeros(50), rng=0)
        pos = res.item_positions()
        assert pos["first_count"].sum() == 50
        assert pos["n_administered"].sum() == res.persons["n_items"].sum()
        # first items come from the window |b| < 0.5
        firsts = pos.loc[pos["first_count"] > 0, "item_id"]
        assert np.all(np.abs(bank.b[bank.index_of(firsts)]) < 0.5)
        t = security.selection_time(res.persons["seconds"])
        assert t["total"] <= res.wall_seconds and t["mean"] > 0
