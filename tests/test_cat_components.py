"""A user's own components, as catsim composes selector and stopper objects: a stop rule and a
selection criterion passed in the config, used alike by the batched ``simulate_cat`` and a
step-wise ``CATSession``."""
from __future__ import annotations

import numpy as np
import pytest

from atlascat.cat.config import CATConfig, Selection, Stopping
from atlascat.cat.selection import SelectionCriterion
from atlascat.cat.session import CATSession
from atlascat.cat.simulate import simulate_cat
from atlascat.cat.stopping import StopRule, build_stop_rules
from atlascat.catalogue import load_paper_bank as load_bank
from atlascat.errors import ConfigError


class StopAfterCorrect(StopRule):
    """Stop once the examinee answered ``k`` items right (rows = examinees)."""

    reason = "k_correct"
    precision = False  # applies before min_items too

    def __init__(self, k: int):
        self.k = int(k)

    def check(self, engine, rows):
        return np.nansum(engine.scores[rows], axis=1) >= self.k


class EasiestFirst(SelectionCriterion):
    """Score -b: the easiest available item is the best."""

    name = "easiest"
    nonnegative = False

    def scores(self, theta, n_items, used, params):
        return np.tile(-params.b, (np.asarray(theta).size, 1))


@pytest.fixture(scope="module")
def bank():
    return load_bank("arc")


@pytest.fixture(scope="module")
def thetas():
    return np.random.default_rng(7).normal(size=6)


def sessions_like_simulation(bank, config, thetas, seed):
    """Examinee i of ``simulate_cat(..., thetas=thetas, rng=seed)`` run as a session."""
    rng = np.random.default_rng(seed)
    sel, ans = rng.spawn(len(thetas)), rng.spawn(len(thetas))
    out = []
    for i, th in enumerate(thetas):
        s = CATSession(bank, config, sel[i])
        p = bank.probability(th)
        while (item := s.next_item()) is not None:
            s.record(item, float(ans[i].random() < p[bank.index_of([item])[0]]))
        out.append(s)
    return out


def test_custom_stop_rule_in_simulation_and_session(bank, thetas):
    config = CATConfig(se_stop=None, min_items=20, max_items=60, stop_rules=[StopAfterCorrect(4)])
    assert [r.reason for r in build_stop_rules(config)] == ["k_correct", "max_items"]
    res = simulate_cat(bank, config, thetas=thetas, rng=3)
    correct = res.administered.groupby("subject_id")["score"].sum()
    p = res.persons.set_index("subject_id")
    assert set(p["stop_reason"]) == {"k_correct"}
    assert (correct[p.index] == 4).all()          # stopped at the answer that made it 4
    assert (p["n_items"] < 20).any()               # precision=False: before min_items too
    sessions = sessions_like_simulation(bank, config, thetas, 3)
    assert [s.stop_reason for s in sessions] == list(p["stop_reason"])
    assert [s.n_items for s in sessions] == list(p["n_items"])
    np.testing.assert_allclose([s.theta for s in sessions], p["theta"], rtol=0, atol=1e-12)


def test_custom_rule_waits_for_min_items_when_it_is_a_precision_rule(bank, thetas):
    rule = StopAfterCorrect(2)
    rule.precision = True
    res = simulate_cat(bank, CATConfig(se_stop=None, min_items=12, max_items=40,
                                       stop_rules=(rule,)), thetas=thetas, rng=1)
    assert (res.persons["n_items"] >= 12).all()
    assert set(res.persons["stop_reason"]) <= {"k_correct", "max_items"}


def test_custom_selection_criterion_in_simulation_and_session(bank, thetas):
    config = CATConfig.fixed_length(15, selection=EasiestFirst(), randomesque=1)
    res = simulate_cat(bank, config, thetas=thetas, rng=5)
    b = dict(zip(bank.item_ids.astype(str), bank.params[1]))
    for _, g in res.administered.groupby("subject_id"):
        asked = list(g.sort_values("order")["item_id"])
        later = [b[i] for i in asked[1:]]
        # after the first item (the start window), the easiest items of the bank in order
        easiest = sorted(v for i, v in b.items() if i != asked[0])[:len(later)]
        assert later == easiest
    sessions = sessions_like_simulation(bank, config, thetas, 5)
    sim = res.administered.sort_values(["subject_id", "order"])
    for s, sid in zip(sessions, res.persons["subject_id"]):
        assert s.administered == list(sim[sim["subject_id"] == sid]["item_id"])


def test_parts_take_the_components_and_refuse_other_objects():
    crit, rule = EasiestFirst(), StopAfterCorrect(3)
    c = CATConfig(selection=Selection(criterion=crit), stopping=Stopping(rules=(rule,)))
    assert c.selection.criterion is crit and c.stopping.rules == (rule,)
    assert c == CATConfig(selection=crit, stop_rules=[rule])
    assert c.has_custom_components and not c.is_fixed_length
    with pytest.raises(ConfigError, match="no JSON form"):
        c.to_dict()
    with pytest.raises(ConfigError, match="check"):
        CATConfig(stop_rules=[object()])
    with pytest.raises(ConfigError, match="selection must be one of"):
        CATConfig(selection=object())
    with pytest.raises(ConfigError, match="non-negative"):  # content balancing weights scores
        CATConfig(selection=crit, content_column="area", content_targets={"x": 1.0})


def test_tables_cache_tells_custom_components_apart(bank, thetas):
    a = simulate_cat(bank, CATConfig(se_stop=None, max_items=40, min_items=0,
                                     stop_rules=[StopAfterCorrect(2)]), thetas=thetas, rng=0)
    b = simulate_cat(bank, CATConfig(se_stop=None, max_items=40, min_items=0,
                                     stop_rules=[StopAfterCorrect(5)]), thetas=thetas, rng=0)
    assert a.persons["n_items"].sum() < b.persons["n_items"].sum()
