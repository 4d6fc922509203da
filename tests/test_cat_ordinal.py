"""The adaptive test on ordinal (graded / gpcm) banks: atlascat.cat.ordinal and atlas simulate."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose

from atlascat.cat.config import CATConfig, Exposure, Selection, Stopping
from atlascat.cat.ordinal import simulate_ordinal_cat
from atlascat.errors import ConfigError
from atlascat.irt import polytomous as poly
from atlascat.irt.ability import estimate_ability
from atlascat.irt.polybank import PolyBank


@pytest.fixture(scope="module")
def setup():
    rng = np.random.default_rng(21)
    m, n = 80, 300
    a = rng.lognormal(0.2, 0.3, m)
    d = np.sort(rng.normal(0, 1.2, (m, 4)), axis=1)[:, ::-1]
    bank = PolyBank([f"i{j}" for j in range(m)], np.column_stack([a, d]), "graded",
                    [np.arange(1, 6.0)] * m)
    theta = rng.normal(size=n)
    y = poly.sample("graded", bank.params, theta, rng) + 1.0
    df = pd.DataFrame(y, columns=bank.item_ids, index=[f"s{i}" for i in range(n)])
    return bank, df, theta


def _config(**stop):
    return CATConfig(stopping=Stopping(**{"min_items": 5, "max_items": 25, "se_stop": 0.35,
                                          **stop}))


class TestReplay:
    def test_stops_and_accuracy(self, setup):
        bank, df, theta = setup
        res = simulate_ordinal_cat(bank, _config(), responses=df, rng=1)
        p = res.persons
        assert p.subject_id.tolist() == df.index.tolist()
        assert p.n_items.between(5, 25).all()
        se_stop = p.stop_reason == "se"
        assert (p.se[se_stop] <= 0.35).all() and (p.n_items[~se_stop] == 25).all()
        full = estimate_ability(df, bank, "eap").theta
        assert np.corrcoef(p.theta, full)[0, 1] > 0.9
        assert np.corrcoef(p.theta, theta)[0, 1] > 0.85

    def test_theta_is_the_eap_of_the_answers_given(self, setup):
        """The grid posterior updated item by item equals scoring the administered answers."""
        bank, df, _ = setup
        res = simulate_ordinal_cat(bank, _config(), responses=df.iloc[:20], rng=2)
        adm = res.administered
        wide = adm.pivot(index="subject_id", columns="item_id", values="score")
        wide = wide.reindex(index=res.persons.subject_id, columns=bank.item_ids)
        eap = estimate_ability(wide, bank, "eap")
        assert_allclose(res.persons.theta, eap.theta, atol=1e-10)
        # catR's SE: 1 / sqrt(test information at theta + prior precision)
        info = bank.information(res.persons.theta.to_numpy())
        given = ~np.isnan(wide.to_numpy())
        assert_allclose(res.persons.se, 1 / np.sqrt((info * given).sum(1) + 1), rtol=1e-4)
        # the category and its level agree
        assert (adm.score == adm.category + 1).all()

    def test_mfi_takes_the_most_informative_item(self, setup):
        bank, df, _ = setup
        cfg = CATConfig(selection=Selection(randomesque=1), stopping=Stopping(
            min_items=3, max_items=3, se_stop=None))
        res = simulate_ordinal_cat(bank, cfg, responses=df.iloc[:10], rng=3)
        for sid, grp in res.administered.groupby("subject_id"):
            grp = grp.sort_values("step")
            for (_, prev), (_, row) in zip(grp.iloc[:-1].iterrows(), grp.iloc[1:].iterrows()):
                info = bank.information(np.array([prev.theta]))[0]
                info[bank.index_of(grp.item_id[grp.step <= prev.step].tolist())] = -np.inf
                assert bank.item_ids[np.argmax(info)] == row.item_id

    def test_missing_cells_are_skipped(self, setup):
        bank, df, _ = setup
        d2 = df.copy()
        res0 = simulate_ordinal_cat(bank, _config(), responses=df, rng=4)
        top = res0.exposure.idxmax()
        d2[top] = np.nan
        res = simulate_ordinal_cat(bank, _config(), responses=d2, rng=4)
        assert top not in set(res.administered.item_id)
        assert res.persons.n_skipped.sum() > 0

    def test_running_out_of_answered_items_is_bank_exhausted(self, setup):
        """The binary engine's reason string, so one stop vocabulary reads every run."""
        bank, df, _ = setup
        d2 = df.iloc[:3].copy()
        d2.iloc[:, 6:] = np.nan                    # six answered items, max_items 25
        res = simulate_ordinal_cat(bank, _config(se_stop=None), responses=d2, rng=4)
        assert res.persons.stop_reason.tolist() == ["bank_exhausted"] * 3
        assert res.persons.n_items.tolist() == [6] * 3

    def test_drawn_answers(self, setup):
        bank, _, theta = setup
        res = simulate_ordinal_cat(bank, _config(), thetas=theta, rng=5)
        assert np.corrcoef(res.persons.theta, theta)[0, 1] > 0.85
        assert_allclose(res.persons.true_theta, theta)


class TestExposure:
    def test_eligibility_caps_every_item(self, setup):
        bank, df, _ = setup
        free = simulate_ordinal_cat(bank, _config(), responses=df, rng=6)
        cfg = CATConfig(stopping=_config().stopping,
                        exposure=Exposure(method="eligibility", r_max=0.25))
        capped = simulate_ordinal_cat(bank, cfg, responses=df, rng=6)
        assert free.exposure.max() > 0.5
        assert capped.exposure.max() <= 0.25 + 1e-12

    def test_sympson_hetter_zero_never_given(self, setup):
        bank, df, _ = setup
        free = simulate_ordinal_cat(bank, _config(), responses=df, rng=7)
        top = free.exposure.idxmax()
        cfg = CATConfig(stopping=_config().stopping,
                        exposure=Exposure(method="sympson_hetter", params={top: 0.0}))
        res = simulate_ordinal_cat(bank, cfg, responses=df, rng=7)
        assert res.exposure[top] == 0.0


def test_binary_only_settings_refused(setup):
    bank, df, _ = setup
    with pytest.raises(ConfigError, match="mfi"):
        simulate_ordinal_cat(bank, CATConfig(selection=Selection(criterion="kl")), responses=df)
    with pytest.raises(ConfigError, match="reliability_stop"):
        simulate_ordinal_cat(bank, CATConfig(stopping=Stopping(reliability_stop=0.9)),
                             responses=df)


def test_cli_simulate_graded_bank(setup, tmp_path):
    from atlascat.cli import main

    bank, df, theta = setup
    bank.write(tmp_path / "bank.csv")
    df.rename_axis("subject_id").to_csv(tmp_path / "ratings.csv")
    pd.DataFrame({"subject_id": df.index, "theta": theta}).to_csv(tmp_path / "th.csv",
                                                                  index=False)
    rc = main(["simulate", str(tmp_path / "ratings.csv"), "--bank", str(tmp_path / "bank.csv"),
               "--thetas", str(tmp_path / "th.csv"), "--min-items", "5", "--max-items", "20",
               "--se-stop", "0.4", "-o", str(tmp_path / "run")])
    assert rc in (0, None)
    p = pd.read_csv(tmp_path / "run" / "person_scores.csv")
    assert p.n_items.between(5, 20).all() and len(p) == len(df)
    s = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert s["correlation"] > 0.85 and s["settings"]["se_stop"] == 0.4
    sel = pd.read_csv(tmp_path / "run" / "selected_items.csv")
    assert len(sel) == p.n_items.sum()


def test_mixed_bank_of_binary_and_graded_items(setup):
    """2PL items join a graded bank as two-category items; the adaptive test uses both."""
    from atlascat.irt.bank import ItemBank

    bank, df, theta = setup
    rng = np.random.default_rng(8)
    b2 = ItemBank([f"b{j}" for j in range(30)], rng.uniform(1.5, 2.5, 30), rng.normal(0, 1, 30))
    mixed = PolyBank.combine(b2, bank)
    assert mixed.n_cat[:30].tolist() == [2] * 30 and len(mixed) == 30 + len(bank)
    assert_allclose(mixed.information(np.array([0.3]))[0, :30], b2.information(0.3))
    y2 = (rng.random((len(theta), 30)) < b2.probability(theta)).astype(float)
    both = pd.concat([pd.DataFrame(y2, index=df.index, columns=b2.item_ids), df], axis=1)
    res = simulate_ordinal_cat(mixed, _config(), responses=both, rng=9)
    kinds = res.administered.item_id.str[0].value_counts()
    assert kinds.get("b", 0) > 0 and kinds.get("i", 0) > 0
    assert np.corrcoef(res.persons.theta, theta)[0, 1] > 0.85


def test_simulate_cat_takes_an_ordinal_bank(setup):
    from atlascat.cat.simulate import simulate_cat

    bank, df, _ = setup
    a = simulate_cat(bank, _config(), responses=df, rng=np.random.default_rng(3))
    b = simulate_ordinal_cat(bank, _config(), responses=df, rng=np.random.default_rng(3))
    assert_allclose(a.persons.theta, b.persons.theta)
    with pytest.raises(ConfigError, match="one item per round"):
        simulate_cat(bank, _config(), responses=df, batch_size=4)


class TestSession:
    def test_session_reproduces_the_simulation_of_one_examinee(self, setup):
        from atlascat.cat.ordinal import OrdinalCATSession

        bank, df, _ = setup
        row = df.iloc[[7]]
        sim = simulate_ordinal_cat(bank, _config(), responses=row, rng=11)
        s = OrdinalCATSession(bank, _config(), rng=11)
        while (item := s.next_item()) is not None:
            assert s.next_item() == item                     # pending until recorded
            s.record(item, row[item].iloc[0])
        h = s.history()
        assert h.item_id.tolist() == sim.administered.item_id.tolist()
        assert_allclose(h.theta, sim.administered.theta)
        assert s.done and s.stop_reason == sim.persons.stop_reason.iloc[0]
        assert s.theta == pytest.approx(sim.persons.theta.iloc[0])

    def test_skips_and_wrong_item(self, setup):
        from atlascat.cat.ordinal import OrdinalCATSession

        bank, _, _ = setup
        s = OrdinalCATSession(bank, _config(), rng=1)
        first = s.next_item()
        with pytest.raises(ConfigError, match="not the pending item"):
            s.record("nope", 3)
        s.record(first, None)                                # skipped: not scored
        assert s.history().empty and s.next_item() != first
        second = s.next_item()
        with pytest.raises(ConfigError, match="outside the item's scale"):
            s.record(second, 11)
        assert s.next_item() == second                       # still pending
        s.record(second, 2)
        assert len(s.history()) == 1
        with pytest.raises(ConfigError, match="eligibility"):
            OrdinalCATSession(bank, CATConfig(exposure=Exposure(method="eligibility")))


def test_a_gpcm_items_location_is_the_mean_of_its_step_thresholds():
    """The first item is chosen by location: a GPCM item with steps b = (0, 1, 2) sits at 1
    (its intercepts d_k = -a sum_(v <= k) b_v are cumulative), a graded item at the mean of
    -d_k / a; the first item for theta0 = 1 is the GPCM item, not the graded one at 4/3."""
    from atlascat.cat.ordinal import item_locations

    gpcm = np.column_stack([[1.5], poly.intercepts("gpcm", [1.5], [[0.0, 1.0, 2.0]])])
    graded = [[1.5, -1.5 * 1.0, -1.5 * 4 / 3, -1.5 * 5 / 3]]
    bank = PolyBank(["g", "r"], np.vstack([gpcm, graded]), ["gpcm", "graded"])
    assert_allclose(item_locations(bank), [1.0, 4 / 3])
    assert_allclose(bank.summary()["quantiles"]["location"]["min"], 1.0)
    config = CATConfig(selection=Selection(theta0=1.0, first_item_window=0.2),
                       stopping=Stopping(se_stop=0.01, min_items=1, max_items=1))
    res = simulate_ordinal_cat(bank, config, thetas=np.ones(20), rng=np.random.default_rng(0))
    assert set(res.administered["item_id"]) == {"g"}
