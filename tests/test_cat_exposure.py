"""Exposure control: Sympson-Hetter (trials, calibration) and the restricted/eligibility method."""
from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

from atlascat.cat.config import CATConfig
from atlascat.cat.session import CATSession
from atlascat.cat.simulate import simulate_cat
from atlascat.cat.exposure import ExposureTracker, SympsonHetter, make_exposure_control
from atlascat.cat.exposure_calibration import calibrate_sympson_hetter
from atlascat.cat.selection import pick, ranked_candidates
from atlascat.catalogue import load_paper_bank as load_bank, load_test_thetas
from atlascat.errors import ConfigError


@pytest.fixture(scope="module")
def arc():
    return load_bank("arc")


def sh_config(bank, k, **kw):
    ids = [str(i) for i in bank.item_ids]
    params = dict(zip(ids, np.broadcast_to(k, (len(ids),)).tolist()))
    return CATConfig(exposure="sympson_hetter", exposure_params=params, **kw)


class TestSympsonHetterPick:
    def test_k_one_is_the_plain_randomesque_pick(self, rng):
        scores = rng.random((50, 30))
        cand, n_fin, _ = ranked_candidates(scores, 25)
        u = rng.random((50, 40))
        chosen, rejected = SympsonHetter(np.ones(30), 20).pick(cand, n_fin, 5, u)
        np.testing.assert_array_equal(chosen, pick(cand, n_fin, 5, u[:, 0]))
        assert (rejected == -1).all()

    def test_rejections_follow_k(self, rng):
        scores = np.tile(np.arange(30.0), (4000, 1))
        cand, n_fin, _ = ranked_candidates(scores, 21)
        k = np.full(30, 0.5)
        k[29] = 0.0  # the best item is never given
        chosen, rejected = SympsonHetter(k, 20).pick(cand, n_fin, 1, rng.random((4000, 40)))
        assert not (chosen == 29).any()
        assert (rejected[:, 0] == 29).all()  # k = 1: always tried first, always rejected
        # next in line is item 28, accepted with probability 0.5
        frac = (chosen == 28).mean()
        assert stats.binomtest(int((chosen == 28).sum()), 4000, 0.5).pvalue > 1e-3, frac
        # a rejected item leaves the pool: never chosen after being rejected
        for r in range(200):
            assert chosen[r] not in set(rejected[r][rejected[r] >= 0])

    def test_forced_after_max_trials(self):
        cand = np.array([[3, 1, 2, 0]])
        chosen, rejected = SympsonHetter(np.zeros(4), 2).pick(cand, np.array([4]), 1,
                                                              np.array([[0.1, 0.5, 0.1, 0.5]]))
        assert list(rejected[0]) == [3, 1]
        assert chosen[0] == 2  # best remaining, given without a trial

    def test_exposure_equals_k_times_selection(self, arc):
        """P(A_j) = K_j P(S_j) for every item (trial counts from the engine)."""
        k = np.where(np.arange(len(arc)) % 3 == 0, 0.3, 1.0)
        thetas = np.random.default_rng(1).normal(size=1500)
        res = simulate_cat(arc, sh_config(arc, k, se_stop=0.3, min_items=10), thetas=thetas,
                           rng=2)
        trials = res.sh_trials
        given = res.item_exposure()["n_administered"].to_numpy()
        busy = trials >= 100
        # accepted share of trials vs K, pooled over the restricted items
        restricted = busy & (k < 1)
        acc = given[restricted].sum() / trials[restricted].sum()
        assert acc == pytest.approx(0.3, abs=0.02)
        np.testing.assert_array_equal(given[k == 1], trials[k == 1])

    def test_batched_equals_sequential_and_resume(self, arc):
        k = np.where(np.arange(len(arc)) % 2 == 0, 0.4, 1.0)
        config = sh_config(arc, k, se_stop=0.3, min_items=8, max_items=30)
        thetas = np.linspace(-1.5, 1.5, 10)
        res = simulate_cat(arc, config, thetas=thetas, rng=np.random.default_rng(4))
        rng = np.random.default_rng(4)
        sel, ans = rng.spawn(10), rng.spawn(10)
        a, b, c, u = arc.params
        for i in range(10):
            s = CATSession(arc, config, rng=sel[i])
            n = 0
            while (item := s.next_item()) is not None:
                j = arc.index_of([item])[0]
                p = c[j] + (u[j] - c[j]) / (1 + np.exp(-a[j] * (thetas[i] - b[j])))
                s.record(item, float(ans[i].random() < p))
                n += 1
                if n == 4:  # persist and resume mid-test
                    s = CATSession.from_dict(json.loads(json.dumps(s.to_dict())), arc)
            assert list(s.history["item_id"]) == list(res.selected_items(str(i))["item_id"])


def test_calibration_brings_exposure_under_r_max(arc):
    rng = np.random.default_rng(0)
    population = rng.normal(0.3, 0.9, 1500)
    config = CATConfig(se_stop=0.3, min_items=10, max_items=60)
    cal = calibrate_sympson_hetter(arc, config, population, rng=1, r_max=0.15, n_iter=6)
    assert cal.history["max_exposure"].iloc[0] > 0.22  # MFI alone over-exposes
    assert (cal.k < 1).sum() > 10 and (cal.k <= 1).all() and (cal.k > 0).all()
    fresh = np.random.default_rng(9).normal(0.3, 0.9, 3000)
    ctrl = simulate_cat(arc, config.replace(exposure="sympson_hetter",
                                            exposure_params=cal.params()), thetas=fresh, rng=3)
    free = simulate_cat(arc, config, thetas=fresh, rng=3)
    assert free.exposure.max() > 0.22
    # r_max + about 2 sampling SDs of the largest of ~40 restricted rates (N = 1500 and 3000)
    assert ctrl.exposure.max() <= 0.17
    assert ctrl.persons["error"].abs().mean() < 0.25
    assert ctrl.overlap()["pairwise"] < 0.9 * free.overlap()["pairwise"]


class TestEligibility:
    def test_cohort_cap_is_exact(self, arc):
        thetas = load_test_thetas("arc")["theta"].to_numpy()
        config = CATConfig(se_stop=0.3, exposure="eligibility", r_max=0.15)
        res = simulate_cat(arc, config, thetas=thetas, rng=1)
        cap = np.floor(0.15 * len(thetas)) / len(thetas)
        assert res.exposure.max() <= cap + 1e-12
        free = simulate_cat(arc, CATConfig(se_stop=0.3), thetas=thetas, rng=1)
        assert free.exposure.max() > 0.3
        assert res.persons["error"].abs().mean() < 0.2

    def test_running_tracker_across_sessions(self, arc, rng):
        tracker = ExposureTracker(len(arc), r_max=0.25)
        config = CATConfig(se_stop=None, min_items=15, max_items=15, exposure="eligibility",
                           r_max=0.25)
        for i in range(60):
            s = CATSession(arc, config, rng=rng.spawn(1)[0], tracker=tracker)
            theta = rng.normal()
            while (item := s.next_item()) is not None:
                ineligible = tracker.ineligible()
                assert not ineligible[arc.index_of([item])[0]]
                p = arc.probability(theta)[arc.index_of([item])[0]]
                s.record(item, float(rng.random() < p))
        assert tracker.n_examinees == 60
        assert tracker.counts.sum() == 60 * 15
        assert tracker.rates().max() <= 0.25 + 1 / 60 + 1e-12
        back = ExposureTracker.from_dict(json.loads(json.dumps(tracker.to_dict())))
        np.testing.assert_array_equal(back.counts, tracker.counts)

    def test_resume_does_not_count_twice(self, arc):
        tracker = ExposureTracker(len(arc), r_max=0.5)
        config = CATConfig(exposure="eligibility", r_max=0.5)
        s = CATSession(arc, config, rng=0, tracker=tracker)
        for _ in range(5):
            s.record(s.next_item(), 1)
        before = (tracker.counts.copy(), tracker.n_examinees)
        r = CATSession.from_dict(json.loads(json.dumps(s.to_dict())), arc, tracker=tracker)
        np.testing.assert_array_equal(tracker.counts, before[0])
        assert tracker.n_examinees == before[1] == 1
        r.record(r.next_item(), 0)
        assert tracker.counts.sum() == 6

    def test_infeasible_cap_falls_back_instead_of_stalling(self):
        bank = load_bank("arc").subset(np.arange(40))
        config = CATConfig.fixed_length(30, exposure="eligibility", r_max=0.2)
        res = simulate_cat(bank, config, thetas=np.zeros(20), rng=0)
        assert (res.persons["n_items"] == 30).all()  # 30 of 40 items each: cap must give way


def test_factory_errors(arc):
    cfg = CATConfig(exposure="sympson_hetter", exposure_params={"nope": 0.5})
    with pytest.raises(ConfigError, match="not in the bank"):
        make_exposure_control(arc, cfg)
    with pytest.raises(ConfigError, match="rule"):
        calibrate_sympson_hetter(arc, CATConfig(), [0.0], rule="other")
