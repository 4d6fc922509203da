"""Stopping rules, each checked against a direct computation at the step it fired (and the one
before, when it must not have fired)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from atlascat.cat.config import CATConfig
from atlascat.cat.session import CATSession
from atlascat.cat.simulate import simulate_cat
from atlascat.cat.stopping import build_stop_rules
from atlascat.catalogue import load_paper_bank as load_bank
from atlascat.irt.ability import eap
from atlascat.irt.bank import ItemBank


@pytest.fixture(scope="module")
def bank():
    return load_bank("arc")


def run(bank, config, truth=0.4, seed=0):
    rng = np.random.default_rng(seed)
    s = CATSession(bank, config, rng=rng)
    snapshots = []
    while (item := s.next_item()) is not None:
        p = bank.probability(truth)[bank.index_of([item])[0]]
        s.record(item, float(rng.random() < p))
        snapshots.append((s.theta, s.se, s.posterior_sd, list(s.administered)))
    return s, snapshots


def best_remaining_info(bank, theta, administered):
    info = bank.information(theta)
    info[bank.index_of(administered)] = -np.inf
    j = int(np.argmax(info))
    return j, info[j]


def test_rule_order():
    rules = build_stop_rules(CATConfig(reliability_stop=0.9, min_info_stop=0.1,
                                       cost_per_item=1, value_per_se=5, budget=9))
    assert [r.reason for r in rules] == ["se", "reliability", "min_information", "cost", "budget",
                                         "max_items"]


def test_se_and_min_items(bank):
    s, snaps = run(bank, CATConfig(se_stop=0.25, min_items=12))
    assert s.stop_reason == "se" and s.n_items >= 12
    assert snaps[-1][1] <= 0.25
    assert all(se > 0.25 for _, se, _, adm in snaps[11:-1])


def test_reliability(bank):
    s, snaps = run(bank, CATConfig(se_stop=None, reliability_stop=0.93, min_items=5,
                                   se_method="posterior"))
    assert s.stop_reason == "reliability"
    assert 1 - snaps[-1][2] ** 2 >= 0.93 > 1 - snaps[-2][2] ** 2


def test_min_information(bank):
    s, snaps = run(bank, CATConfig(se_stop=None, min_info_stop=2.0, min_items=5), truth=1.5)
    assert s.stop_reason == "min_information"
    theta, _, _, adm = snaps[-1]
    assert best_remaining_info(bank, theta, adm)[1] < 2.0
    theta, _, _, adm = snaps[-2]
    assert best_remaining_info(bank, theta, adm)[1] >= 2.0


def test_cost_aware_information_se(bank):
    value, cost = 40.0, 0.05
    s, snaps = run(bank, CATConfig(se_stop=None, cost_per_item=cost, value_per_se=value,
                                   min_items=5))
    assert s.stop_reason == "cost"

    def gain(snap):
        theta, se, _, adm = snap
        _, best = best_remaining_info(bank, theta, adm)
        test_info = bank.information(theta)[bank.index_of(adm)].sum()
        return value * (se - 1 / np.sqrt(test_info + best + 1.0))

    assert gain(snaps[-1]) < cost <= gain(snaps[-2])


def test_cost_aware_posterior_se_is_preposterior(bank):
    value, cost = 30.0, 0.1
    config = CATConfig(se_stop=None, cost_per_item=cost, value_per_se=value, min_items=3,
                       se_method="posterior")
    s, snaps = run(bank, config, seed=3)
    assert s.stop_reason == "cost"

    def gain(snap):
        theta, se, _, adm = snap
        j, _ = best_remaining_info(bank, theta, adm)
        hist = s.history.set_index("item_id")
        y = np.full(len(bank), np.nan)
        y[bank.index_of(adm)] = hist.loc[adm, "score"].to_numpy()
        p1 = 0.0
        out = 0.0
        # the CAT's preposterior SD on its own grid alone: quadrature="fixed", like with like
        post_theta, _ = eap(y[None], bank, quadpts=config.estimation.quadpts, quadrature="fixed")
        for score in (1.0, 0.0):
            y2 = y.copy()
            y2[j] = score
            _, sd = eap(y2[None], bank, quadpts=config.estimation.quadpts, quadrature="fixed")
            # P(y_j = 1 | answers) = posterior mean of P_j(theta)
            from atlascat.irt.ability import grid_posterior
            from atlascat.irt.quadrature import normal_quadrature
            quad = normal_quadrature()
            post = grid_posterior(y[None], bank, quad)[0]
            p1 = float(post @ bank.probability(quad.nodes)[:, j])
            out += (p1 if score == 1.0 else 1 - p1) * sd[0]
        return value * (se - out)

    assert gain(snaps[-1]) < cost <= gain(snaps[-2])


def test_budget_with_item_costs(bank):
    costs = np.where(np.arange(len(bank)) % 2 == 0, 1.0, 3.0)
    meta = pd.DataFrame({"cost": costs})
    priced = ItemBank(bank.item_ids, *bank.params, metadata=meta)
    res = simulate_cat(priced, CATConfig(se_stop=None, cost_column="cost", budget=50.0,
                                         min_items=1), thetas=np.linspace(-2, 2, 20), rng=1)
    spent = res.administered.assign(
        cost=costs[priced.index_of(res.administered["item_id"])]).groupby("subject_id")["cost"].sum()
    assert (spent <= 50.0).all()
    assert (spent > 50.0 - 3.0).all()  # stopped only when the next item no longer fit
    assert set(res.persons["stop_reason"]) == {"budget"}


def test_budget_uniform_cost(bank):
    res = simulate_cat(bank, CATConfig(se_stop=None, cost_per_item=2.5, budget=40.0),
                       thetas=np.zeros(5), rng=1)
    assert (res.persons["n_items"] == 16).all()  # 16 x 2.5 = 40


def test_max_items_and_fixed_length(bank):
    res = simulate_cat(bank, CATConfig.fixed_length(17), thetas=np.linspace(-1, 1, 9), rng=2)
    assert (res.persons["n_items"] == 17).all()
    assert set(res.persons["stop_reason"]) == {"max_items"}


@pytest.mark.parametrize("stops", [
    {"cost_column": "cost", "budget": 1e9},                    # a budget larger than the bank
    {"cost_column": "cost", "budget": 24.0},                   # exactly the bank's total cost
    {"cost_per_item": 1e-9, "value_per_se": 1e9},             # every item worth its cost
    {"min_info_stop": 1e-300},                                 # every item informative enough
])
def test_a_bank_used_up_is_bank_exhausted_not_the_cost_rule(stops):
    """Budget, cost and minimum-information rules fire on the items left; with none left the
    test ended because the bank ran out, and says so (simulation and session alike)."""
    ids = [f"q{j}" for j in range(12)]
    small = ItemBank(ids, np.linspace(0.8, 2.0, 12), np.linspace(-1.5, 1.5, 12),
                     metadata=pd.DataFrame({"cost": np.linspace(1.0, 3.0, 12)}))
    config = CATConfig(min_items=1, max_items=500, se_stop=None, **stops)
    res = simulate_cat(small, config, thetas=np.array([-1.0, 0.0, 1.0]), rng=0)
    assert res.persons.n_items.tolist() == [12, 12, 12]
    assert res.persons.stop_reason.tolist() == ["bank_exhausted"] * 3
    s, _ = run(small, config)
    assert len(s.administered) == 12 and s.stop_reason == "bank_exhausted"
