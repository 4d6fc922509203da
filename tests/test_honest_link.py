"""Issue 17: honest score-link intervals outside the data, person fit, floor/ceiling stop."""
from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
from test_score_link import _world

from atlascat.cat.config import CATConfig
from atlascat.cat.simulate import simulate_cat
from atlascat.cat.stopping import CeilingStop, FloorStop, build_stop_rules
from atlascat.errors import ConfigError
from atlascat.scorelink.settings import CHANCE, LZ_CRITICAL
from atlascat.scorelink import ScoreLink, ScoreLinkEstimator, predict_frame
from atlascat.catalogue import load_bundled_bank, load_score_link


@pytest.fixture(scope="module")
def toy():
    """A link fitted on 500 simulated models (theta ~ N(0, 1)), chance 0.25 known."""
    bank, theta, y, score, _ = _world(seed=3)
    link = ScoreLinkEstimator("toy", cat_config=False, chance=0.25).fit(bank, y, score).link_
    return bank, link


class TestSupport:
    def test_fit_stores_support(self, toy):
        _, link = toy
        sup = link.support
        assert sup["count"].shape == link.theta_grid.shape
        # kernel count: about 500 x 0.25 x sqrt(2 pi) x N(0, 1) density at 0
        assert sup["count"][np.argmin(np.abs(link.theta_grid))] == pytest.approx(
            500 * 0.25 * np.sqrt(2 * np.pi) * 0.3989, rel=0.15)
        assert sup["chance"] == 0.25 and sup["floor"] <= 0.25 and sup["top"] == 1.0
        low, high = link.support_bounds()
        assert -3.5 < low < -1.5 and 1.5 < high < 3.5
        assert sup["theta_range"][0] <= low and high <= sup["theta_range"][1]

    def test_inside_the_support_nothing_changes(self, toy):
        _, link = toy
        for t, se in [(0.0, 0.2), (0.8, 0.3), (-0.7, 0.25)]:
            p = link.predict(t, se)
            score, lo, hi = link._predict_arrays(np.array([t]), np.array([se]), np.zeros(1),
                                                 link.interval_scale)
            assert (p.score, p.lo, p.hi) == pytest.approx((score[0], lo[0], hi[0]), abs=1e-12)
            assert p.warnings == () and p.flag == "" and p.warning == ""

    def test_below_the_support_reaches_chance(self, toy):
        _, link = toy
        low, _ = link.support_bounds()
        p = link.predict(low - 1.5, 0.3)
        edge = link.predict(low + 0.6, 0.2)
        assert p.lo <= link.support["floor"] <= 0.25
        assert "below_data" in p.flag and "as low as" in p.warning
        assert p.lo <= p.score < edge.score <= p.hi + 0.2
        # a wide theta range reaching below the support from inside it: lower side only
        q = link.predict(low + 0.3, 0.5)
        assert q.lo <= link.support["floor"] and q.hi < 1.0
        # far below: the point estimate falls towards the floor
        assert link.predict(-6.0, 0.3).score < link.predict(low - 0.5, 0.3).score

    def test_above_the_support_reaches_the_top(self, toy):
        _, link = toy
        _, high = link.support_bounds()
        p = link.predict(high + 1.0, 0.3)
        assert p.hi == 1.0 and p.flag == "above_data" and "as high as 100%" in p.warning
        assert p.lo > 0.5

    def test_predict_many_agrees(self, toy):
        _, link = toy
        th = np.array([-5.0, -0.5, 0.0, 4.5])
        se = np.full(4, 0.3)
        s, lo, hi, flags = link.predict_many(th, se, flags=True)
        for k in range(4):
            p = link.predict(th[k], se[k])
            assert (s[k], lo[k], hi[k]) == pytest.approx((p.score, p.lo, p.hi), abs=1e-12)
            assert flags[k] == p.flag

    def test_json_round_trip_and_old_links(self, toy):
        _, link = toy
        back = ScoreLink.from_dict(json.loads(json.dumps(link.to_dict())))
        assert back.support_bounds() == pytest.approx(link.support_bounds())
        for t in (-5.0, 0.0, 5.0):
            a, b = link.predict(t, 0.3), back.predict(t, 0.3)
            assert (a.score, a.lo, a.hi, a.flag) == pytest.approx((b.score, b.lo, b.hi, b.flag),
                                                                  abs=1e-5)
        old = link.to_dict()
        del old["support"]
        legacy = ScoreLink.from_dict(old)   # written before the support was stored
        assert legacy.support["count"] is None and legacy.chance == pytest.approx(
            link.score_grid.min(), abs=1e-5)
        lo_true, hi_true = link.support["theta_range"]
        assert legacy.support["theta_range"] == pytest.approx((lo_true, hi_true), abs=0.06)
        assert "below_data" in legacy.predict(-5.0, 0.3).flag

    def test_chance_constants(self):
        assert CHANCE == {"arc": 0.25, "hellaswag": 0.25, "mmlu": 0.25, "truthfulqa": 0.46,
                          "winogrande": 0.50, "gsm8k": 0.0}
        assert load_score_link("winogrande").chance == 0.5
        with pytest.raises(ConfigError):
            bank, _, y, score, _ = _world(seed=1, n=200)
            ScoreLinkEstimator(cat_config=False, chance=1.5).fit(bank, y, score)


class TestPersonFit:
    def test_guttman_reversed_pattern_is_flagged_and_widened(self, toy):
        bank, link = toy
        order = np.argsort(bank.b)
        J = len(order)
        reversed_ = {bank.item_ids[j]: float(k >= J // 2) for k, j in enumerate(order)}
        guttman = {bank.item_ids[j]: float(k < J // 2) for k, j in enumerate(order)}
        bad = link.predict(0.0, 0.3, responses=reversed_)
        good = link.predict(0.0, 0.3, responses=guttman)
        plain = link.predict(0.0, 0.3)
        assert bad.lz_star < LZ_CRITICAL and "misfit" in bad.flag and "lz*" in bad.warning
        assert good.lz_star > LZ_CRITICAL and good.flag == ""
        assert bad.hi - bad.lo > 1.5 * (plain.hi - plain.lo)
        # vectorized path flags the same rows
        asked = np.ones((2, J), bool)
        y = np.array([[reversed_[i] for i in bank.item_ids], [guttman[i] for i in bank.item_ids]])
        _, lo, hi, flags = link.predict_many(np.zeros(2), np.full(2, 0.3), asked=asked, y=y,
                                             flags=True)
        assert list(flags) == ["misfit", ""]
        assert (lo[0], hi[0]) == pytest.approx((bad.lo, bad.hi), abs=1e-9)

    def test_model_drawn_answers_rarely_flagged(self, toy):
        bank, link = toy
        rng = np.random.default_rng(4)
        th = rng.normal(size=300)
        y = (rng.random((300, len(bank))) < bank.probability(th)).astype(float)
        from atlascat.irt.ability import eap

        th_hat, se = eap(y, bank)   # lz* at the test's own estimate, as predict uses it
        _, _, _, flags = link.predict_many(th_hat, se, asked=np.ones_like(y, bool),
                                           y=y, flags=True)
        assert np.mean(["misfit" in f for f in flags]) < 0.05


class _FakeEngine:
    def __init__(self, theta, se):
        self.theta, self.se = np.asarray(theta), np.asarray(se)


class TestFloorCeilingStop:
    def test_vectorized_check_equals_per_row_reference(self):
        rng = np.random.default_rng(0)
        eng = _FakeEngine(rng.normal(0, 2, 200), rng.uniform(0.05, 1.0, 200))
        rows = rng.choice(200, 80, replace=False)
        floor, ceiling = FloorStop(-1.3, 1.96), CeilingStop(1.1, 1.645)
        want_f = [eng.theta[r] + 1.96 * eng.se[r] < -1.3 for r in rows]
        want_c = [eng.theta[r] - 1.645 * eng.se[r] > 1.1 for r in rows]
        assert list(floor.check(eng, rows)) == want_f and any(want_f)
        assert list(ceiling.check(eng, rows)) == want_c and any(want_c)

    def test_config_round_trip_and_validation(self):
        cfg = CATConfig(se_stop=0.2, floor_theta=-1.35, ceiling_theta=1.0, bound_z=1.96)
        back = CATConfig.from_dict(json.loads(json.dumps(cfg.to_dict())))
        assert back == cfg
        assert [r.reason for r in build_stop_rules(cfg)][:3] == ["floor", "ceiling", "se"]
        old = cfg.to_dict()
        for k in ("floor_theta", "ceiling_theta", "bound_z"):
            del old[k]
        assert CATConfig.from_dict(old).stopping.floor_theta is None   # stored before the rule
        with pytest.raises(ConfigError):
            CATConfig(floor_theta=1.0, ceiling_theta=0.5)
        with pytest.raises(ConfigError):
            CATConfig(floor_theta=float("nan"))

    def test_stop_settings(self, toy):
        _, link = toy
        st = link.stop_settings(0.02)
        curve = link.score_grid
        assert np.interp(st["floor_theta"], link.theta_grid, curve) <= curve.min() + 0.02
        assert np.interp(st["ceiling_theta"], link.theta_grid, curve) >= curve.max() - 0.02
        assert st["floor_theta"] < st["ceiling_theta"]
        assert link.stop_settings(0.05)["floor_theta"] >= st["floor_theta"]
        with pytest.raises(ConfigError):
            link.stop_settings(-0.1)


@pytest.fixture(scope="module")
def arc():
    return load_bundled_bank("arc"), load_score_link("arc")


#: the link-based stops that end a test at chance level: the floor rule, and the score-precision
#: rule where the link's curve is flat (on the whole-population banks it fires first)
AT_CHANCE_STOPS = ("floor", "score_precision", "min_information")
#: the notes of those stops: the floor rule's "at or near chance (<= X%)", the others' "its 95%
#: interval (lo to hi) reaches down to chance (c%): ..." (stop_note, chance_reach)
CHANCE_NOTE = (r"^(?:at or near chance \(<= "
               r"|its 95% interval \(.*\) reaches (?:nearly )?down to chance)")


class TestAtChanceOnArc:
    """The shipped ARC bank: SE stop 0.2; without the rule weak examinees use most of the
    bank (their SE plateaus near 0.45: the bank has no information down there)."""

    def _run(self, bank, link, rule, **kw):
        # both arms ask the bank's own shortest test (ARC 45): the rules are what differs
        cfg = CATConfig(se_stop=0.2, min_items=link.stop_settings().get("min_items", 30))
        if rule:
            cfg = cfg.replace(**link.stop_settings(0.02))
        res = simulate_cat(bank, cfg, rng=np.random.default_rng(0), **kw)
        return res, predict_frame(link, res.persons, res.administered)

    def test_at_chance_examinees_stop_early_with_chance_in_the_interval(self, arc):
        bank, link = arc
        rng = np.random.default_rng(7)
        uniform = (rng.random((30, len(bank))) < 0.25).astype(float)
        for kw in (dict(thetas=np.full(30, -3.0)), dict(responses=uniform)):
            res, pf = self._run(bank, link, True, **kw)
            assert res.persons["n_items"].mean() <= 60
            assert res.persons["stop_reason"].isin(AT_CHANCE_STOPS).mean() >= 0.8
            assert ((pf["score_lo"] <= 0.25) & (0.25 <= pf["score_hi"])).mean() >= 0.9
            assert pf["score"].mean() < 0.6
            floor = pf[res.persons["stop_reason"].isin(AT_CHANCE_STOPS).to_numpy()]
            noted = floor["score_warning"].str.contains(CHANCE_NOTE)
            # the note is given wherever chance is inside the interval (stop_note)
            assert (noted | (floor["score_lo"] > 0.25 + 0.02)).all()
            assert noted.mean() >= 0.8
        base, _ = self._run(bank, link, False, thetas=np.full(30, -3.0))
        assert base.persons["n_items"].mean() > 100   # what the rule saves

    def test_mid_examinees_unchanged_strong_ones_cost_nothing(self, arc):
        bank, link = arc
        th = np.linspace(-0.8, 0.6, 12)
        a, pa = self._run(bank, link, True, thetas=th)
        b, pb = self._run(bank, link, False, thetas=th)
        assert (a.persons["n_items"] == b.persons["n_items"]).all()
        assert np.allclose(pa["score"], pb["score"])
        strong = np.full(12, 1.8)
        a, pa = self._run(bank, link, True, thetas=strong)
        b, pb = self._run(bank, link, False, thetas=strong)
        assert a.persons["n_items"].mean() < b.persons["n_items"].mean()
        assert abs(pa["score"].mean() - pb["score"].mean()) < 0.01


class TestCLI:
    def test_simulate_writes_the_warning_column(self, tmp_path):
        from typer.testing import CliRunner

        from atlascat.cli import app

        th = tmp_path / "th.csv"
        th.write_text("subject_id,theta\nlow,-3\nmid,0\n")
        out = tmp_path / "out"
        r = CliRunner().invoke(app, ["simulate", "--bank", "arc", "--thetas", str(th),
                                     "--se-stop", "0.2", "-o", str(out), "--no-selected"])
        assert r.exit_code == 0, r.output
        df = pd.read_csv(out / "person_scores.csv", keep_default_na=False).set_index("subject_id")
        assert {"score_warning", "score_flag"} <= set(df.columns)
        assert df.loc["low", "stop_reason"] in AT_CHANCE_STOPS
        assert re.match(CHANCE_NOTE, df.loc["low", "score_warning"])
        assert df.loc["mid", "score_warning"] == ""
        out2 = tmp_path / "out2"
        r = CliRunner().invoke(app, ["simulate", "--bank", "arc", "--thetas", str(th),
                                     "--se-stop", "0.2", "-o", str(out2), "--no-selected",
                                     "--no-bound-stop"])
        assert r.exit_code == 0, r.output
        df2 = pd.read_csv(out2 / "person_scores.csv").set_index("subject_id")
        assert df2.loc["low", "stop_reason"] not in AT_CHANCE_STOPS
        assert df2.loc["low", "n_items"] > df.loc["low", "n_items"]

    def test_evaluate_prints_and_stores_the_warning(self, tmp_path):
        from typer.testing import CliRunner

        from atlascat.cli import app

        out = tmp_path / "run"
        r = CliRunner().invoke(app, ["evaluate", "--bank", "arc", "--subject", "simulate:-3",
                                     "--se-stop", "0.2", "-q", "-o", str(out)])
        assert r.exit_code == 0, r.output
        assert re.search(CHANCE_NOTE.replace("^", "warning: "), r.output, re.M)
        row = json.loads((out / "results.json").read_text())[0]
        assert row["stop_reason"] in AT_CHANCE_STOPS and row["n_items"] <= 60
        lb = row["prediction"]
        assert re.match(CHANCE_NOTE, lb["warning"]) and row["stop_reason"] in lb["flag"]
        assert lb["lo"] <= 0.25 <= lb["hi"]
        html = (out / "reports" / f"{row['run_id']}.html").read_text()
        assert "predicted leaderboard score" in html and lb["warning"] in html
