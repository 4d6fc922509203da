"""CAT engine: batched == sequential, incremental posterior, resume, sessions, simulate_cat."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from atlascat.cat.answers import model_probability
from atlascat.cat.config import CATConfig
from atlascat.cat.session import CATSession
from atlascat.cat.simulate import simulate_cat
from atlascat.cat.tables import bank_fingerprint
from atlascat.catalogue import load_paper_bank as load_bank, load_test_thetas
from atlascat.errors import BankError, ConfigError, LiveRunError, ResponseDataError
from atlascat.irt.ability import eap
from atlascat.irt.bank import ItemBank
from atlascat.responses import ResponseMatrix


@pytest.fixture(scope="module")
def arc_bank():
    return load_bank("arc")


@pytest.fixture(scope="module")
def small_bank():
    rng = np.random.default_rng(7)
    n = 120
    return ItemBank([f"i{j}" for j in range(n)], rng.lognormal(0.2, 0.3, n), rng.normal(0, 1.2, n),
                    rng.uniform(0, 0.25, n))


def run_sequential(bank, config, thetas, seed):
    """Examinee i as a CATSession with rng.spawn children, answers from its own stream."""
    rng = np.random.default_rng(seed)
    n = len(thetas)
    sel, ans = rng.spawn(n), rng.spawn(n)
    a, b, c, u = bank.params
    sessions = []
    for i in range(n):
        s = CATSession(bank, config, rng=sel[i])
        while (item := s.next_item()) is not None:
            j = bank.index_of([item])[0]
            y = float(ans[i].random() < model_probability(thetas[i], a[j], b[j], c[j], u[j]))
            s.record(item, y)
        sessions.append(s)
    return sessions


class TestBatchedEqualsSequential:
    def test_fifty_examinees_identical(self, arc_bank):
        thetas = load_test_thetas("arc")["theta"].to_numpy()[:50]
        config = CATConfig(se_stop=0.2, max_items=80)
        res = simulate_cat(arc_bank, config, thetas=thetas, rng=np.random.default_rng(11))
        sessions = run_sequential(arc_bank, config, thetas, 11)
        for i, s in enumerate(sessions):
            batch = res.selected_items(str(i))
            seq = s.history
            assert list(seq["item_id"]) == list(batch["item_id"])
            np.testing.assert_array_equal(seq["score"].to_numpy(), batch["score"].to_numpy())
            np.testing.assert_array_equal(seq["theta"].to_numpy(), batch["theta"].to_numpy())
            np.testing.assert_array_equal(seq["se"].to_numpy(), batch["se"].to_numpy())
            assert res.persons["stop_reason"][i] == s.stop_reason
        # different examinees get different tests, the engine is not degenerate
        assert res.persons["n_items"].nunique() > 1
        assert res.overlap()["pairwise"] < 0.9

    @pytest.mark.parametrize("kw", [dict(selection="kl", max_items=20, se_stop=None, min_items=20),
                                    dict(selection="astrat", max_items=24, se_stop=None,
                                         min_items=24),
                                    dict(selection="random", max_items=15, se_stop=None,
                                         min_items=15),
                                    dict(se_method="posterior", se_stop=0.3, randomesque=1)])
    def test_other_rules_identical(self, small_bank, kw):
        thetas = np.random.default_rng(3).normal(size=12)
        config = CATConfig(**kw)
        res = simulate_cat(small_bank, config, thetas=thetas, rng=5)
        sessions = run_sequential(small_bank, config, thetas, 5)
        for i, s in enumerate(sessions):
            batch = res.selected_items(str(i))
            assert list(s.history["item_id"]) == list(batch["item_id"])
            np.testing.assert_array_equal(s.history["theta"].to_numpy(), batch["theta"].to_numpy())

    def test_replay_row_without_answers_finishes_at_once(self, small_bank):
        y = np.full((3, len(small_bank)), np.nan)
        y[0, :5] = 1.0
        y[2, :] = 0.0
        res = simulate_cat(small_bank, CATConfig(se_stop=None, min_items=50, max_items=50),
                           responses=y, rng=0)
        p = res.persons
        assert list(p["n_items"]) == [5, 0, 50]
        assert list(p["stop_reason"]) == ["bank_exhausted", "bank_exhausted", "max_items"]
        assert p["n_skipped"][1] == 0 and p["n_skipped"][2] == 0

    @pytest.mark.parametrize("missing, kw", [(0.3, {}), (0.7, {}), (0.9, {}),
                                             (0.6, {"selection": "astrat"}),
                                             (0.6, {"selection": "kl", "randomesque": 3})])
    def test_replay_with_missing_cells_skips_and_counts(self, small_bank, rng, missing, kw):
        n = 30
        thetas = rng.normal(size=n)
        p = small_bank.probability(thetas)
        y = (rng.random(p.shape) < p).astype(float)
        y[rng.random(y.shape) < missing] = np.nan
        rm = ResponseMatrix(y, [f"s{i}" for i in range(n)], small_bank.item_ids, on_empty="keep")
        config = CATConfig(se_stop=0.3, max_items=30, min_items=5, **kw)
        res = simulate_cat(small_bank, config, responses=rm, rng=np.random.default_rng(2))
        assert res.n_skipped == res.persons["n_skipped"].sum() > 0
        sel = np.random.default_rng(2).spawn(n)
        for i in range(n):
            s = CATSession(small_bank, config, rng=sel[i])
            skips_at_last_answer = 0
            while (item := s.next_item()) is not None:
                score = y[i, small_bank.index_of([item])[0]]
                if np.isnan(score):
                    s.skip(item)
                else:
                    s.record(item, score)
                    skips_at_last_answer = s.n_skipped
            batch = res.selected_items(f"s{i}")
            assert list(s.history["item_id"]) == list(batch["item_id"])
            assert s.stop_reason == res.persons["stop_reason"][i]
            if s.stop_reason == "bank_exhausted" and np.isnan(y[i][~s._engine.used[0]]).all():
                # the batch stops as soon as no answered item is left; a session skips on
                assert res.persons["n_skipped"][i] == skips_at_last_answer
            else:
                assert s.n_skipped == res.persons["n_skipped"][i]
            # no skipped item was scored
            scored = small_bank.index_of(batch["item_id"])
            assert not np.isnan(y[i, scored]).any()


class TestEstimation:
    def test_incremental_posterior_equals_batch_eap(self, arc_bank, rng):
        """The step-wise grid posterior equals a from-scratch EAP on the same answers."""
        config = CATConfig(se_method="posterior", se_stop=None, min_items=25, max_items=25)
        s = CATSession(arc_bank, config, rng=rng)
        truth = 0.7
        while (item := s.next_item()) is not None:
            p = arc_bank.probability(truth)[arc_bank.index_of([item])[0]]
            s.record(item, float(rng.random() < p))
        h = s.history
        y = np.full(len(arc_bank), np.nan)
        y[arc_bank.index_of(h["item_id"])] = h["score"].to_numpy()
        # the CAT's grid alone (61 nodes on [-6, 6]): quadrature="fixed", like with like
        theta, se = eap(y[None, :], arc_bank, quadpts=config.estimation.quadpts,
                        quadrature="fixed")
        assert s.theta == pytest.approx(theta[0], abs=1e-12)
        assert s.se == pytest.approx(se[0], abs=1e-12)

    def test_information_se_formula(self, arc_bank, rng):
        config = CATConfig(se_stop=None, min_items=10, max_items=10, prior_sd=1.5)
        s = CATSession(arc_bank, config, rng=rng)
        while (item := s.next_item()) is not None:
            s.record(item, 1.0)
        idx = arc_bank.index_of(s.administered)
        info = arc_bank.information(s.theta)[idx].sum()
        assert s.se == pytest.approx(1 / np.sqrt(info + 1 / 1.5 ** 2), rel=1e-12)

    def test_recovers_true_theta(self, arc_bank):
        """Parameter recovery: with SE <= 0.2 the estimates track the truth (r > 0.95)."""
        thetas = np.random.default_rng(5).normal(0, 1, 200)
        res = simulate_cat(arc_bank, CATConfig(se_stop=0.2, min_items=10), thetas=thetas, rng=9)
        p = res.persons
        assert np.corrcoef(p["theta"], thetas)[0, 1] > 0.95
        assert np.sqrt(np.mean(p["error"] ** 2)) < 0.35
        assert p["error"].mean() == pytest.approx(0.0, abs=0.08)

    def test_partial_credit_is_bernoulli_pseudo_count(self, arc_bank):
        s1 = CATSession(arc_bank, CATConfig(), rng=1)
        s1.record("514", 0.25)
        s2 = CATSession(arc_bank, CATConfig(se_method="posterior"), rng=1)
        s2.record("514", 0.25)
        y = np.full(len(arc_bank), np.nan)
        y[arc_bank.index_of(["514"])[0]] = 0.25
        theta, se = eap(y[None, :], arc_bank, quadpts=CATConfig().estimation.quadpts,
                        quadrature="fixed")   # the CAT's grid alone
        assert s1.theta == pytest.approx(theta[0], abs=1e-12)
        assert s2.se == pytest.approx(se[0], abs=1e-12)


class TestSession:
    def test_first_item_in_window_and_pending_is_stable(self, arc_bank):
        config = CATConfig()
        window = set(arc_bank.item_ids[np.abs(arc_bank.b) < 0.5])
        firsts = set()
        for seed in range(40):
            s = CATSession(arc_bank, config, rng=seed)
            item = s.next_item()
            assert item in window
            assert s.next_item() == item  # idempotent before record
            firsts.add(item)
        assert len(firsts) > 20  # drawn at random, not always the same item

    def test_nearest_item_when_window_empty(self, arc_bank):
        s = CATSession(arc_bank, CATConfig(theta0=3.0, first_item_window=0.0), rng=0)
        item = s.next_item()
        assert item == arc_bank.item_ids[np.argmin(np.abs(arc_bank.b - 3.0))]

    def test_randomesque_one_is_max_information(self, arc_bank, rng):
        s = CATSession(arc_bank, CATConfig(randomesque=1), rng=rng)
        for _ in range(12):
            item = s.next_item()
            if s.n_items > 0:
                info = arc_bank.information(s.theta)
                info[arc_bank.index_of(s.administered)] = -np.inf
                assert item == arc_bank.item_ids[np.argmax(info)]
            s.record(item, float(rng.random() < 0.6))

    def test_caller_administered_items_count(self, arc_bank):
        s = CATSession(arc_bank, CATConfig(min_items=3, se_stop=0.5), rng=0)
        s.record("514", 1)
        s.record("X176", 0)  # R-style id accepted
        assert s.n_items == 2
        assert s.administered == ["514", "176"]
        nxt = s.next_item()
        assert nxt not in ("514", "176")

    def test_errors(self, arc_bank):
        s = CATSession(arc_bank, CATConfig(min_items=1, max_items=2), rng=0)
        with pytest.raises(LiveRunError, match="not in the bank"):
            s.record("nope", 1)
        with pytest.raises(ResponseDataError, match="in \\[0, 1\\]"):
            s.record("514", 2)
        s.record("514", 1)
        with pytest.raises(LiveRunError, match="already administered"):
            s.record("514", 0)
        s.record(s.next_item(), 0)
        assert s.done and s.stop_reason == "max_items"
        assert s.next_item() is None
        with pytest.raises(LiveRunError, match="finished"):
            s.record("1", 1)

    def test_bank_exhausted(self):
        bank = ItemBank(["a", "b", "c"], [1.0, 1.5, 2.0], [-1.0, 0.0, 1.0])
        s = CATSession(bank, CATConfig(min_items=1, max_items=10, se_stop=0.01), rng=0)
        while (item := s.next_item()) is not None:
            s.record(item, 1)
        assert s.n_items == 3 and s.stop_reason == "bank_exhausted"

    def test_history_frame(self, arc_bank, rng):
        s = CATSession(arc_bank, CATConfig(min_items=5, max_items=5, se_stop=None), rng=rng)
        while (item := s.next_item()) is not None:
            s.record(item, 1)
        h = s.history
        assert list(h.columns) == ["item_id", "order", "score", "theta", "se", "seconds"]
        assert list(h["order"]) == [1, 2, 3, 4, 5]
        assert h["theta"].iloc[-1] == s.theta and h["se"].iloc[-1] == s.se
        assert (h["seconds"] >= 0).all()
        # all correct: theta rises
        assert np.all(np.diff(h["theta"]) > 0)


class TestResume:
    @pytest.mark.parametrize("cut", [0, 1, 7, 19])
    def test_resume_exactly(self, arc_bank, cut):
        config = CATConfig(se_stop=0.15, min_items=10, max_items=40)
        answers = np.random.default_rng(4)

        def answer(item):
            p = arc_bank.probability(0.3)[arc_bank.index_of([item])[0]]
            return float(answers.random() < p)

        full = CATSession(arc_bank, config, rng=np.random.default_rng(8))
        trace = []
        while (item := full.next_item()) is not None:
            y = answer(item)
            trace.append((item, y))
            full.record(item, y)

        part = CATSession(arc_bank, config, rng=np.random.default_rng(8))
        for item, y in trace[:cut]:
            assert part.next_item() == item
            part.record(item, y)
        pending = part.next_item()
        snapshot = json.loads(json.dumps(part.to_dict()))  # through real JSON
        resumed = CATSession.from_dict(snapshot, arc_bank)
        assert resumed.next_item() == pending
        for item, y in trace[cut:]:
            assert resumed.next_item() == item
            resumed.record(item, y)
        assert resumed.next_item() is None
        pd.testing.assert_frame_equal(resumed.history.drop(columns="seconds"),
                                      full.history.drop(columns="seconds"))
        assert resumed.stop_reason == full.stop_reason
        assert resumed.theta == full.theta and resumed.se == full.se

    def test_resume_with_skips_and_other_bank(self, arc_bank):
        s = CATSession(arc_bank, CATConfig(), rng=3)
        s.record(s.next_item(), 1)
        s.skip(s.next_item())
        d = s.to_dict()
        r = CATSession.from_dict(d, arc_bank)
        assert r.skipped == s.skipped and r.n_skipped == 1
        assert r.next_item() == s.next_item()
        other = arc_bank.subset(np.arange(len(arc_bank) - 1))
        with pytest.raises(BankError, match="differs"):
            CATSession.from_dict(d, other)
        assert bank_fingerprint(arc_bank) != bank_fingerprint(other)


class TestSimulate:
    def test_result_frames(self, arc_bank):
        th = load_test_thetas("arc").iloc[:40]
        res = simulate_cat(arc_bank, CATConfig(se_stop=0.2), thetas=th["theta"].to_numpy(),
                           subject_ids=th["subject_id"], rng=1)
        p = res.persons
        assert list(p.columns[:8]) == ["subject_id", "theta", "se", "posterior_sd", "n_items",
                                       "n_skipped", "seconds", "stop_reason"]
        assert set(p["stop_reason"]) <= {"se", "max_items"}
        assert ((p["se"] <= 0.2) | (p["n_items"] == 500)).all()
        assert (p["n_items"] >= 30).all()
        np.testing.assert_allclose(p["error"], p["theta"] - th["theta"].to_numpy())
        assert len(res.administered) == p["n_items"].sum()
        np.testing.assert_allclose(res.exposure.sum(), p["n_items"].mean())
        s = res.summary()
        assert s["items_mean"] == pytest.approx(p["n_items"].mean())
        assert s["overlap"]["formula"] == pytest.approx(s["overlap"]["pairwise"], rel=1e-12)
        # the last history row of everyone is its final estimate
        last = res.administered.groupby("subject_id", sort=False).tail(1).set_index("subject_id")
        np.testing.assert_array_equal(last.loc[p["subject_id"], "theta"].to_numpy(), p["theta"])

    def test_answer_fn_source(self, small_bank):
        calls = []

        def fn(sids, iids):
            calls.append(len(sids))
            return np.ones(len(sids))

        res = simulate_cat(small_bank, CATConfig(min_items=4, max_items=4, se_stop=None),
                           answer_fn=fn, subject_ids=["a", "b", "c"], rng=0)
        assert calls == [3, 3, 3, 3]  # one vectorized call per step
        assert (res.administered["score"] == 1).all()

    def test_bad_inputs(self, small_bank):
        with pytest.raises(ConfigError, match="exactly one"):
            simulate_cat(small_bank, CATConfig(), rng=0)
        with pytest.raises(ConfigError, match="subject_ids"):
            simulate_cat(small_bank, CATConfig(), answer_fn=lambda s, i: 1, rng=0)
        with pytest.raises(ResponseDataError, match="finite"):
            simulate_cat(small_bank, CATConfig(), thetas=[0.0, np.nan], rng=0)
        rm = ResponseMatrix(np.ones((2, 2)), ["a", "b"], ["zz1", "zz2"])
        with pytest.raises(ResponseDataError, match="none of the"):
            simulate_cat(small_bank, CATConfig(), responses=rm, rng=0)
