"""An ordinal bank's rating scale: declared at calibration (``--rating-range``), kept in the
bank file, read by every output; a whole-number rating on the scale that an item never had at
calibration is scored as the category it falls in (the graded model's collapsed categories),
in scoring, the simulated adaptive test and a live run alike; a rating off the scale is one
line."""
from __future__ import annotations

import html
import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from atlascat.cat.config import CATConfig, Stopping
from atlascat.cat.ordinal import OrdinalCATSession, simulate_ordinal_cat
from atlascat.cli import app, main
from atlascat.errors import BankError, ConfigError
from atlascat.irt import polytomous as poly
from atlascat.irt.ability import estimate_ability
from atlascat.irt.polybank import PolyBank
from atlascat.irt.polycal import calibrate_ordinal
from atlascat.live.store import RunStore


def _bank(scales=(1, 5)):
    """Two graded items: 'a' observed 2-5, 'b' observed 1;3;4 (a gap at 2, nothing at 5)."""
    return PolyBank(["a", "b"], [[1.0, 1.0, 0.0, -1.0], [1.2, 0.5, -0.5, np.nan]], "graded",
                    [[2, 3, 4, 5], [1, 3, 4]], scales=scales)


class TestEncoding:

    def test_a_rating_falls_in_the_category_of_the_largest_level_at_or_below_it(self):
        bank = _bank()
        y = np.array([[1, 1], [2, 2], [5, 5], [3, np.nan], [4, 4]], dtype=float)
        got = bank.encode(y)
        np.testing.assert_array_equal(got[:, 0], [0, 0, 3, 1, 2])    # 1 is below 2: the lowest
        np.testing.assert_array_equal(got[:, 1], [0, 0, 2, np.nan, 2])  # 2 -> level 1, 5 -> 4
        np.testing.assert_array_equal(bank.unseen(y), [[True, False], [False, True],
                                                       [False, True], [False, False],
                                                       [False, False]])

    def test_the_graded_likelihood_of_a_collapsed_rating_is_its_category(self):
        """Scoring a 5 on item b (top level 4) is scoring its top category: the same EAP as a 4."""
        bank = _bank()
        five = estimate_ability(np.array([[3.0, 5.0]]), bank, "eap").theta.iloc[0]
        four = estimate_ability(np.array([[3.0, 4.0]]), bank, "eap").theta.iloc[0]
        assert five == four

    @pytest.mark.parametrize("value, why", [(6, "outside the item's scale 1-5"),
                                            (0, "outside the item's scale 1-5"),
                                            (2.5, "not a whole number on the item's scale 1-5")])
    def test_off_the_scale_is_one_line(self, value, why):
        bank = _bank()
        with pytest.raises(ConfigError, match=why) as e:
            bank.encode(np.array([[3.0, value]]), ["m1"])
        msg = str(e.value)
        assert "model 'm1'" in msg and "item 'b'" in msg and "1;3;4" in msg and "\n" not in msg
        assert why in bank.rating_problem("b", value)
        assert bank.rating_problem("b", 5) is None and bank.rating_problem("b", 3) is None

    def test_without_a_declared_scale_the_levels_ends_bound_it(self):
        bank = _bank(scales=None)
        assert bank.rating_scale() is None               # 2-5 and 1-4: two scales
        np.testing.assert_array_equal(bank.encode(np.array([[3.0, 2.0]])), [[1, 0]])  # the gap
        with pytest.raises(ConfigError, match="outside the item's scale 1-4"):
            bank.encode(np.array([[3.0, 5.0]]))

    def test_non_integer_levels_take_only_their_levels(self):
        bank = PolyBank(["h"], [[1.0, 0.5, -0.5]], "graded", [[0, 0.5, 1]])
        np.testing.assert_array_equal(bank.encode(np.array([[0.5]])), [[1]])
        with pytest.raises(ConfigError, match="not one of the item's levels 0;0.5;1"):
            bank.encode(np.array([[0.25]]))


class TestBank:

    def test_the_declared_scale_is_the_shared_one_and_the_shares_use_it(self):
        bank = _bank()
        assert bank.rating_scale() == (1.0, 5.0) and bank.rating_metric() == "mean rating"
        theta = np.array([-1.0, 0.0, 2.0])
        np.testing.assert_allclose(bank.mean_rating(theta),
                                   bank.expected_score(theta).mean(axis=-1))
        own = _bank(scales=None)                         # shares of each item's own range
        e = own.expected_score(theta)
        np.testing.assert_allclose(own.mean_rating(theta),
                                   ((e - [2, 1]) / [3, 3]).mean(axis=-1))

    def test_the_file_keeps_the_scale_and_writes_none_when_the_levels_span_it(self, tmp_path):
        bank = _bank()
        for name in ("b.csv", "b.parquet"):
            bank.write(tmp_path / name)
            back = PolyBank.read(tmp_path / name)
            np.testing.assert_array_equal(back.scales, bank.scales)
        assert pd.read_csv(tmp_path / "b.csv")["scale"].tolist() == ["1;5", "1;5"]
        _bank(scales=None).write(tmp_path / "own.csv")
        assert "scale" not in pd.read_csv(tmp_path / "own.csv").columns
        for fmt in ("mirt", "ours"):
            back = PolyBank.from_frame(bank.to_frame(fmt))
            np.testing.assert_array_equal(back.scales, bank.scales)

    def test_subset_and_combine_keep_each_items_scale(self):
        bank = _bank()
        np.testing.assert_array_equal(bank.subset(["b"]).scales, [[1, 5]])
        both = PolyBank.combine(bank, PolyBank(["c"], [[1.0, 0.0]]))
        np.testing.assert_array_equal(both.scales, [[1, 5], [1, 5], [0, 1]])
        assert both.rating_scale() is None
        counted = PolyBank(bank.item_ids, bank.params, "graded", bank.levels, scales=(1, 5),
                           metadata=pd.DataFrame({"n_responses": [40, 50]}))
        joined = PolyBank.combine(counted, PolyBank(["c"], [[1.0, 0.0]]))
        assert joined.metadata["n_responses"].tolist()[:2] == [40, 50]
        assert np.isnan(joined.metadata["n_responses"].iloc[2])

    @pytest.mark.parametrize("scales, match", [((3, 5), "scale 3-5 must hold its levels"),
                                               ((1, np.inf), "must hold its levels")])
    def test_a_scale_narrower_than_the_levels_is_refused(self, scales, match):
        with pytest.raises(BankError, match=match):
            _bank(scales=scales)

    def test_a_bad_scale_cell_is_one_line(self, tmp_path):
        df = _bank().to_frame()
        df.loc[1, "scale"] = "1-5"
        with pytest.raises(BankError, match="item b: scale '1-5' must be two numbers"):
            PolyBank.from_frame(df)


def _ratings(seed=5, n=300):
    """300 models' 1-5 ratings of 12 graded items whose top category is rare: several items
    never see a 5."""
    rng = np.random.default_rng(seed)
    a = rng.uniform(1.0, 2.0, 12)
    d = np.column_stack([np.full(12, 3.0), np.full(12, 1.0), np.full(12, -1.0),
                         rng.uniform(-14.0, -5.0, 12)])
    cats = poly.sample("graded", np.column_stack([a, d]), rng.normal(0, 1, n), rng)
    return pd.DataFrame(cats + 1.0, index=[f"m{i}" for i in range(n)],
                        columns=[f"q{j}" for j in range(12)]).rename_axis("model")


class TestCalibrated:

    def test_the_declared_range_becomes_every_items_scale(self):
        y = _ratings()
        res = calibrate_ordinal(y, "graded", value_range=(1, 5))
        assert res.bank.rating_scale() == (1.0, 5.0)
        assert any(lv[-1] < 5 for lv in res.bank.levels)   # some item never saw a 5
        assert calibrate_ordinal(y, "graded").bank.rating_scale() is None

    def test_a_model_stronger_than_any_source_model_is_scored_and_tested(self, tmp_path):
        """A 5 on every item, also where no source model gave one: scored (EAP above every
        source model's), replayed in the adaptive test, and asked live (`replay:`) with the
        same items and theta, each rating stored as given."""
        y = _ratings()
        res = calibrate_ordinal(y, "graded", value_range=(1, 5))
        bank = res.bank
        bank.write(tmp_path / "bank.csv")
        top = pd.DataFrame([[5.0] * 12], index=["best"], columns=y.columns).rename_axis("model")
        top.to_csv(tmp_path / "best.csv")
        theta = estimate_ability(top, bank, "eap").theta.iloc[0]
        assert theta > res.theta.max()
        cfg = CATConfig(stopping=Stopping(min_items=3, max_items=6, se_stop=None))
        sim = simulate_ordinal_cat(bank, cfg, responses=top, rng=[np.random.default_rng(3)])
        assert sim.administered["score"].tolist() == [5.0] * 6   # as given, not its category
        s = OrdinalCATSession(bank, cfg, rng=np.random.default_rng(3))
        while (item := s.next_item()) is not None:
            s.record(item, 5)
        assert s.theta == pytest.approx(sim.persons["theta"].iloc[0], abs=1e-12)
        out = tmp_path / "live"
        r = CliRunner().invoke(app, ["evaluate", "--bank", str(tmp_path / "bank.csv"),
                                     "--subject", f"replay:{tmp_path / 'best.csv'}#best",
                                     "--min-items", "3", "--max-items", "6", "--se-stop", "0.01",
                                     "--seed", "3", "-q", "-o", str(out)])
        assert r.exit_code == 0, r.output + str(r.exception)
        store = RunStore(out / "runs.sqlite")
        steps = store.steps(store.list_runs()["run_id"].iloc[0])
        assert steps["score"].astype(float).tolist() == [5.0] * 6
        result = json.loads((out / "results.json").read_text())[0]
        assert result["observed_score"] == pytest.approx(5.0)       # on the 1-5 scale
        assert result["prediction"]["scale"] == [1, 5]
        never = [i for i in steps["item_id"] if 5.0 not in bank.levels[bank.index_of(i)]]
        assert never and result["prediction"]["unseen_ratings"] == len(never)
        # the note names one of them on the bank's own scale, not a made-up 1-10 example
        assert any(f"e.g. item {i!r} rated 5, where its source models gave 1;2;3;4)" in
                   result["prediction"]["unseen_note"] for i in never)
        assert "a 10 where" not in r.output and "rated 5, where its" in " ".join(r.output.split())
        page = html.unescape(next((out / "reports").glob("*.html")).read_text())
        assert result["prediction"]["unseen_note"] in page        # the run's page says it too
        r = CliRunner().invoke(app, ["runs", "--db", str(out / "runs.sqlite"), "--run",
                                     result["run_id"], "--json"])
        assert json.loads(r.output)["prediction"]["score"] == result["prediction"]["score"]


def test_the_cli_says_where_a_rating_was_a_level_the_item_never_had(tmp_path):
    y = _ratings()
    y.to_csv(tmp_path / "r.csv")
    r = CliRunner().invoke(app, ["calibrate", str(tmp_path / "r.csv"), "--model", "graded",
                                 "-o", str(tmp_path / "own.csv")])
    assert r.exit_code == 0, r.output + str(r.exception)
    assert "--rating-range 1 5" in " ".join(r.output.split())   # ends differ: declare it
    r = CliRunner().invoke(app, ["calibrate", str(tmp_path / "r.csv"), "--model", "graded",
                                 "--rating-range", "1", "5", "-o", str(tmp_path / "b.csv")])
    assert r.exit_code == 0 and "--rating-range" not in r.output
    r = CliRunner().invoke(app, ["info", str(tmp_path / "b.csv")])
    assert "rating scale: 1-5 (every item)" in r.output
    pd.DataFrame([[5.0] * 12, [3.0] * 12], index=["best", "mid"],
                 columns=y.columns).rename_axis("model").to_csv(tmp_path / "new.csv")
    for cmd in (["score", str(tmp_path / "new.csv"), "--bank", str(tmp_path / "b.csv")],
                ["simulate", str(tmp_path / "new.csv"), "--bank", str(tmp_path / "b.csv"),
                 "-o", str(tmp_path / "sim")]):
        r = CliRunner().invoke(app, cmd)
        assert r.exit_code == 0, r.output + str(r.exception)
        note = " ".join(r.output.split())
        assert "rating(s) are levels their item never had at calibration (e.g. item " in note
        assert "rated 5, where its source models gave" in note and "a 10 where" not in note


class TestPrediction:
    """The predicted full-bank mean rating (what `atlas simulate` writes and a live run
    reports): the asked items as rated, the others expected under a N(0, 3^2) prior."""

    def test_every_item_asked_is_the_mean_of_the_ratings_exactly(self):
        from atlascat.irt.polyscore import predict_mean_rating

        bank = _bank()
        score, lo, hi = predict_mean_rating({"a": 5, "b": 2}, bank)
        assert score[0] == lo[0] == hi[0] == 3.5
        own = _bank(scales=None)       # several scales: each rating's share of its item's
        score, lo, hi = predict_mean_rating({"a": 5, "b": 2}, own)
        assert score[0] == pytest.approx((1.0 + 1 / 3) / 2) and lo[0] == hi[0] == score[0]

    def test_the_interval_stays_on_the_scale_and_holds_the_point(self):
        from atlascat.irt.polyscore import predict_mean_rating

        score, lo, hi = predict_mean_rating(np.array([[5.0, np.nan], [np.nan, np.nan],
                                                      [1.0, np.nan]]), _bank())
        assert ((1 <= lo) & (lo <= score) & (score <= hi) & (hi <= 5)).all()
        assert lo[0] >= (5 + 1) / 2 and hi[2] <= (1 + 5) / 2   # the asked rating counts

    def test_models_stronger_than_every_source_model_are_covered(self):
        """300 source models (N(0, 1)), 200 held-out models at theta 2-3.5, 20 items asked
        adaptively: the interval covers their full-bank mean rating about 95% of the time,
        where the mean rating at the N(0, 1) EAP covers about 0.7
        (benchmarks/bench_ordinal_prediction.py)."""
        from atlascat.irt.polyscore import predict_mean_rating

        rng = np.random.default_rng(3)
        n_items = 40
        params = np.column_stack([rng.uniform(0.8, 2.0, n_items),
                                  np.sort(rng.normal(0, 2.0, (n_items, 4)), axis=1)[:, ::-1]
                                  - rng.normal(0, 1, (n_items, 1))])
        cols = [f"q{j}" for j in range(n_items)]
        source = poly.sample("graded", params, rng.normal(0, 1, 300), rng) + 1.0
        bank = calibrate_ordinal(pd.DataFrame(source, columns=cols), "graded",
                                 value_range=(1, 5)).bank
        y = poly.sample("graded", params, rng.uniform(2.0, 3.5, 200), rng) + 1.0
        full = y.mean(axis=1)
        cfg = CATConfig(stopping=Stopping(min_items=20, max_items=20, se_stop=None))
        sim = simulate_ordinal_cat(bank, cfg, responses=pd.DataFrame(y, columns=cols), rng=1)
        given = sim.administered
        ratings = np.full(y.shape, np.nan)
        ratings[given["subject_id"].astype(int), bank.index_of(given["item_id"].tolist())] = \
            given["score"].to_numpy(float)
        score, lo, hi = predict_mean_rating(ratings, bank)
        covered = np.mean((lo <= full) & (full <= hi))
        t, s = sim.persons["theta"].to_numpy(), sim.persons["se"].to_numpy()
        lo0, mid0, hi0 = bank.mean_rating(np.stack([t - 1.96 * s, t, t + 1.96 * s]))
        assert 0.9 <= covered <= 0.99
        assert np.mean((lo0 <= full) & (full <= hi0)) < 0.85          # what it replaces
        assert np.mean(np.abs(score - full)) < 0.8 * np.mean(np.abs(mid0 - full))


def test_a_calibration_on_few_models_or_rare_levels_says_so():
    from atlascat.irt.defaults import IdentificationWarning

    y = _ratings(n=300)
    with pytest.warns(IdentificationWarning) as got:
        res = calibrate_ordinal(y.iloc[:30], "graded", value_range=(1, 5))
    said = " ".join(str(w.message) for w in got)
    assert "30 subjects for up to 5 parameters per item" not in said   # 6 per parameter
    assert res.settings["warnings"] and "given by fewer than 3 subjects" in said
    with pytest.warns(IdentificationWarning, match="12 subjects for up to . parameters.*bank "
                                                   "folder"):
        calibrate_ordinal(y.iloc[:12], "graded", value_range=(1, 5))
    dense = _ratings(n=300).clip(upper=4)          # every level of every item rated often
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", IdentificationWarning)
        assert calibrate_ordinal(dense, "graded").settings["warnings"] == []


def test_a_session_driven_from_python_predicts_what_simulate_writes():
    """OrdinalCATSession.predicted_mean_rating equals the simulated adaptive test's row."""
    from atlascat.irt.polyscore import predict_mean_rating

    bank = calibrate_ordinal(_ratings(), "graded", value_range=(1, 5)).bank
    cfg = CATConfig(stopping=Stopping(min_items=4, max_items=4, se_stop=None))
    row = pd.DataFrame([[5.0, 4, 3, 2, 1, 2, 3, 4, 5, 4, 3, 2]], index=["x"],
                       columns=bank.item_ids)
    s = OrdinalCATSession(bank, cfg, rng=np.random.default_rng(7))
    assert s.predicted_mean_rating()[1] < s.predicted_mean_rating()[0]   # nothing asked yet
    while (item := s.next_item()) is not None:
        s.record(item, row.loc["x", item])
    sim = simulate_ordinal_cat(bank, cfg, responses=row, rng=[np.random.default_rng(7)])
    asked = sim.administered.set_index("item_id")["score"].to_dict()
    want = [float(v[0]) for v in predict_mean_rating(asked, bank)]
    assert s.predicted_mean_rating() == pytest.approx(want, abs=1e-12)


def test_a_rating_off_the_scale_is_not_counted_as_a_level_the_item_never_had():
    """``unseen`` marks only what ``encode`` scores as a collapsed category: a rating off the
    scale (7 on 1-5) or between its whole numbers (2.5) is refused, not collapsed."""
    bank = _bank()
    np.testing.assert_array_equal(bank.unseen(np.array([[7.0, 2.5], [0.0, 5.0]])),
                                  [[False, False], [False, True]])


def test_simulate_refuses_an_off_scale_rating_in_one_line_without_a_collapse_note(tmp_path,
                                                                                 capsys):
    y = _ratings()
    y.to_csv(tmp_path / "r.csv")
    assert main(["calibrate", str(tmp_path / "r.csv"), "--model", "graded", "--rating-range",
                 "1", "5", "-q", "-o", str(tmp_path / "b.csv")]) == 0
    pd.DataFrame([[7.0] + [3.0] * 11], index=["m"],
                 columns=y.columns).rename_axis("model").to_csv(tmp_path / "off.csv")
    capsys.readouterr()
    rc = main(["simulate", str(tmp_path / "off.csv"), "--bank", str(tmp_path / "b.csv"),
               "-o", str(tmp_path / "sim")])
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1, err
    assert "outside the item's scale 1-5" in lines[0] and not err.startswith("note:")
