"""Graded response and generalized partial credit models: item functions, calibration,
scoring, banks and bad input (mirt parity: tests/test_polytomous_parity.py)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose

from atlascat.errors import AtlasError, BankError, ConfigError
from atlascat.irt import models
from atlascat.irt import polytomous as poly
from atlascat.irt.ability import estimate_ability
from atlascat.irt.bank import ItemBank
from atlascat.irt.calibrate import calibrate
from atlascat.irt.polybank import PolyBank
from atlascat.irt.polyfit import encode

GRID = np.linspace(-4, 4, 41)


def _params(rng, n_items=6, n_cat=5, model="graded"):
    a = rng.uniform(0.7, 2.2, n_items)
    d = np.sort(rng.normal(0, 1.5, (n_items, n_cat - 1)), axis=1)[:, ::-1]
    if model == "gpcm":
        d = np.cumsum(rng.normal(0, 1.0, (n_items, n_cat - 1)), axis=1)
    return np.column_stack([a, d])


@pytest.fixture
def rng():
    return np.random.default_rng(7)


class TestItemFunctions:
    @pytest.mark.parametrize("model", ["graded", "gpcm"])
    def test_probabilities_sum_to_one(self, rng, model):
        p = _params(rng, model=model)
        p[2, 3:] = np.nan                     # a 3-category item among 5-category ones
        pr = poly.prob(model, p, GRID)
        assert pr.shape == (6, 41, 5)
        assert_allclose(pr.sum(axis=2), 1.0, atol=1e-12)
        assert np.all(pr[2, :, 3:] == 0.0)
        assert np.all(pr[[0, 1, 3, 4, 5]] > 0)

    @pytest.mark.parametrize("model", ["graded", "gpcm"])
    def test_two_categories_are_the_2pl(self, rng, model):
        a, d = rng.uniform(0.5, 2, 4), rng.normal(0, 1, 4)
        pr = poly.prob(model, np.column_stack([a, d]), GRID)
        assert_allclose(pr[:, :, 1].T, models.probability(GRID, a, -d / a), atol=1e-12)
        assert_allclose(poly.item_information(model, np.column_stack([a, d]), GRID),
                        models.item_information(GRID, a, -d / a), atol=1e-12)

    @pytest.mark.parametrize("model", ["graded", "gpcm"])
    def test_information_matches_numerical_derivative(self, rng, model):
        """I(theta) = sum_k P'_k^2 / P_k with P' from central differences of P."""
        p = _params(rng, model=model)
        h = 1e-6
        dp = (poly.prob(model, p, GRID + h) - poly.prob(model, p, GRID - h)) / (2 * h)
        info = np.sum(dp**2 / poly.prob(model, p, GRID), axis=2).T
        assert_allclose(poly.item_information(model, p, GRID), info, rtol=1e-6, atol=1e-9)
        assert_allclose(poly.dprob_dtheta(model, p, GRID), dp, atol=1e-7)

    @pytest.mark.parametrize("model", ["graded", "gpcm"])
    def test_second_derivative_matches_numerical_derivative(self, rng, model):
        """P''_k analytic equals central differences of the analytic P'_k (each sums to 0)."""
        p = _params(rng, model=model)
        h = 1e-5
        d2 = (poly.dprob_dtheta(model, p, GRID + h) - poly.dprob_dtheta(model, p, GRID - h)) / (
            2 * h)
        got = poly.d2prob_dtheta2(model, p, GRID)
        assert_allclose(got, d2, atol=1e-7)
        assert_allclose(got.sum(axis=2), 0.0, atol=1e-12)

    def test_gpcm_information_is_slope_squared_times_variance(self, rng):
        p = _params(rng, model="gpcm")
        pr = poly.prob("gpcm", p, GRID)
        k = np.arange(5)
        var = np.sum(pr * k**2, 2) - np.sum(pr * k, 2) ** 2
        assert_allclose(poly.item_information("gpcm", p, GRID), (p[:, :1] ** 2 * var).T,
                        rtol=1e-8)   # E[k^2] - E[k]^2 cancels in the last digits

    @pytest.mark.parametrize("model", ["graded", "gpcm"])
    def test_jacobian_matches_numerical_derivative(self, rng, model):
        p = _params(rng, model=model)
        p[1, 4] = np.nan
        J = poly.jacobian(model, p, GRID)
        h = 1e-6
        for col in range(5):
            e = np.zeros_like(p)
            e[:, col] = h
            num = (np.nan_to_num(poly.prob(model, p + e, GRID))
                   - np.nan_to_num(poly.prob(model, p - e, GRID))) / (2 * h)
            assert_allclose(J[..., col], num, atol=1e-7)

    @pytest.mark.parametrize("model", ["graded", "gpcm"])
    def test_dlog_prob_matches_numerical_derivative(self, rng, model):
        p = _params(rng, model=model)
        p[3, 3:] = np.nan
        D = poly.dlog_prob(model, p, GRID)
        assert D.shape == (6, 5, 41, 5)
        h = 1e-6
        for col in range(5):
            e = np.zeros_like(p)
            e[:, col] = h
            hi, lo = poly.log_prob(model, p + e, GRID), poly.log_prob(model, p - e, GRID)
            ok = np.isfinite(hi) & np.isfinite(lo)              # absent categories: -inf
            num = np.where(ok, (np.where(ok, hi, 0) - np.where(ok, lo, 0)) / (2 * h), 0.0)
            assert_allclose(D[:, col], num, atol=2e-6)

    def test_dlog_prob_keeps_its_precision_in_the_tails(self):
        """Far beyond a threshold (z = 32, 92) the closed forms keep full relative precision:
        graded d log P_0 / d d1 = -sigma(z_1), d log P_(K-1) / d d_(K-1) = sigma(-z_(K-1)) (a
        ratio dP / P of an underflowing 1 - P* lost it, or was 0); GPCM d log P_k / d d_l =
        [k = l] - P_l."""
        x = np.array([10.0, 30.0, -30.0])
        g = np.array([[3.0, 2.0, -1.0]])
        D = poly.dlog_prob("graded", g, x)
        z1, z2 = 3.0 * x + 2.0, 3.0 * x - 1.0
        assert_allclose(D[0, 1, :, 0], -1 / (1 + np.exp(-z1)), rtol=1e-14)
        assert_allclose(D[0, 2, :, 2], 1 / (1 + np.exp(z2)), rtol=1e-12)
        assert_allclose(D[0, 0, :, 0], -x / (1 + np.exp(-z1)), rtol=1e-14)
        G = poly.dlog_prob("gpcm", g, x)
        p = poly.prob("gpcm", g, x)[0]
        assert_allclose(G[0, 2, :, 2], 1 - p[:, 2], rtol=1e-14)
        assert_allclose(G[0, 1, :, 0], -p[:, 1], rtol=1e-14, atol=1e-300)
        k = np.arange(3)
        assert_allclose(G[0, 0], x[:, None] * (p @ (k[:, None] - k[None, :]).T), rtol=1e-14)
        assert_allclose(G[0, 0, 0, 2], 10.0 * (p[0, 1] + 2 * p[0, 0]), rtol=1e-14)

    def test_narrow_graded_category_keeps_precision(self):
        p = np.array([[1.0, 0.0, -1e-9]])
        lp = poly.log_prob("graded", p, np.array([0.0]))
        assert_allclose(np.exp(lp[0, 0, 1]), 0.25e-9, rtol=1e-6)

    def test_log_prob_contract(self, rng):
        p = _params(rng, n_items=3, n_cat=4)
        p = np.column_stack([p, np.full(3, np.nan)])
        lp = poly.log_prob(["graded", "gpcm", "graded"], p, GRID)
        assert lp.shape == (3, 41, 5) and np.all(np.isneginf(lp[:, :, 4]))
        assert poly.param_names(p)[0] == ["a1", "d1", "d2", "d3"]


def _simulate(rng, params, model, n):
    theta = rng.normal(size=n)
    return poly.sample(model, params, theta, rng).astype(float), theta


class TestRecovery:
    """Parameter recovery from known truth (girth style): 4000 subjects."""

    @pytest.mark.parametrize("model", ["graded", "gpcm"])
    def test_recovers_parameters(self, model):
        rng = np.random.default_rng(11)
        truth = _params(rng, n_items=8, n_cat=4, model=model)
        y, theta = _simulate(rng, truth, model, 4000)
        res = calibrate(y + 1.0, model=model)             # levels 1-4
        assert res.converged
        assert_allclose(res.bank.params[:, 0], truth[:, 0], atol=0.15)
        assert_allclose(res.bank.params[:, 1:], truth[:, 1:], atol=0.25)
        assert np.corrcoef(res.theta, theta)[0, 1] > 0.8
        assert [lv.tolist() for lv in res.bank.levels] == [[1, 2, 3, 4]] * 8

    def test_binary_items_join_graded_items(self):
        rng = np.random.default_rng(3)
        truth = _params(rng, n_items=6, n_cat=4)
        truth[:2, 2:] = np.nan                              # two binary (2PL) items
        y, _ = _simulate(rng, truth, "graded", 3000)
        res = calibrate(y, model="graded")
        assert res.bank.n_cat.tolist() == [2, 2, 4, 4, 4, 4]
        assert_allclose(res.bank.params[:2, :2], truth[:2, :2], atol=0.25)
        # the two-category items are 2PL items: the binary 2PL fit of those columns alone
        # has the same likelihood surface, so EAP on the bank agrees with a 2PL bank
        bin_bank = ItemBank(["0", "1"], res.bank.params[:2, 0],
                            -res.bank.params[:2, 1] / res.bank.params[:2, 0])
        sub = res.bank.subset(["0", "1"])
        e1 = estimate_ability(y[:, :2], sub, "eap")
        e2 = estimate_ability(y[:, :2], bin_bank, "eap")
        assert_allclose(e1.theta, e2.theta, atol=1e-8)

    def test_missing_cells_and_weights(self):
        """Frequency rows equal repeated rows; missing cells are skipped."""
        rng = np.random.default_rng(5)
        truth = _params(rng, n_items=5, n_cat=3)
        y, _ = _simulate(rng, truth, "graded", 600)
        y[rng.random(y.shape) < 0.2] = np.nan
        w = rng.integers(1, 4, 600).astype(float)
        a = calibrate(y, model="graded", weights=w)
        b = calibrate(np.repeat(y, w.astype(int), axis=0), model="graded")
        assert_allclose(a.loglik, b.loglik, rtol=1e-8)
        assert_allclose(a.bank.params, b.bank.params, atol=1e-4)

    def test_acceleration_keeps_the_graded_order(self):
        """From a start far from the maximum (intercepts spread over [40, -40]) SQUAREM's
        extrapolation overshoots: an item whose intercepts it leaves disordered keeps the
        plain EM step, and a tied or disordered item never counts as likelihood 1, so the
        fit reaches the default start's maximum with ordered intercepts."""
        from atlascat.irt.polycal import calibrate_ordinal

        rng = np.random.default_rng(0)
        a = rng.lognormal(0, 0.3, 6)
        d = -np.sort(rng.normal(0, 0.3, (6, 5)), axis=1)
        y = poly.sample("graded", np.column_stack([a, d]), rng.normal(size=200), rng)
        levels = [np.unique(col) for col in y.T.astype(float)]
        far = np.full((6, 6), np.nan)
        far[:, 0] = 1.0
        for j, lv in enumerate(levels):
            far[j, 1:len(lv)] = np.linspace(40, -40, len(lv) - 1)
        start = PolyBank([str(j) for j in range(6)], far, "graded", levels)
        res = calibrate_ordinal(y.astype(float), "graded", start=start)
        ref = calibrate(y.astype(float), model="graded")
        steps = np.diff(res.bank.params[:, 1:], axis=1)
        assert np.all(np.isnan(steps) | (steps < 0))
        assert_allclose(res.loglik, ref.loglik, atol=1e-3)
        assert_allclose(res.bank.params, ref.bank.params, atol=5e-3)

    def test_slope_prior_shrinks(self):
        rng = np.random.default_rng(9)
        truth = _params(rng, n_items=4, n_cat=3)
        y, _ = _simulate(rng, truth, "graded", 150)
        free = calibrate(y, model="graded")
        tight = calibrate(y, model="graded", prior_a="lognorm(0,0.1)")
        assert np.all(np.abs(np.log(tight.bank.params[:, 0]))
                      < np.abs(np.log(free.bank.params[:, 0])) + 1e-9)
        assert tight.settings["prior_a"] == "lognorm(0,0.1)" and free.settings["prior_a"] is None
        assert tight.loglik < free.loglik


class TestScoring:
    def _bank(self):
        rng = np.random.default_rng(2)
        p = _params(rng, n_items=10, n_cat=5)
        return PolyBank([f"i{j}" for j in range(10)], p, "graded",
                        [np.arange(1, 6.0)] * 10), rng

    def test_methods_agree_and_order(self):
        bank, rng = self._bank()
        y = poly.sample("graded", bank.params, rng.normal(size=50), rng) + 1.0
        frame = pd.DataFrame(y, columns=bank.item_ids)
        out = {m: estimate_ability(frame, bank, m) for m in ("eap", "map", "ml", "wle")}
        for m in ("map", "ml", "wle"):
            assert np.corrcoef(out["eap"].theta, out[m].theta)[0, 1] > 0.95
        # MAP shrinks towards the prior mean relative to ML
        ok = out["ml"].flag == "ok"
        assert np.all(np.abs(out["map"].theta[ok]) <= np.abs(out["ml"].theta[ok]) + 1e-6)

    def test_ml_is_the_likelihood_maximum(self):
        bank, rng = self._bank()
        y = poly.sample("graded", bank.params, np.array([0.3, -1.2]), rng)
        ml = estimate_ability(y + 1.0, bank, "ml")
        lp = poly.log_prob("graded", bank.params, GRID)
        for i in range(2):
            ll = lambda t: poly.log_prob("graded", bank.params, np.array([t]))[
                np.arange(10), 0, y[i]].sum()  # noqa: E731
            th = ml.theta[i]
            assert ll(th) >= ll(th + 1e-3) and ll(th) >= ll(th - 1e-3)
        assert lp.shape[1] == 41

    def test_extreme_patterns(self):
        bank, _ = self._bank()
        y = np.vstack([np.ones(10), np.full(10, 5.0)])
        ml = estimate_ability(y, bank, "ml")
        assert ml.theta.tolist() == [-np.inf, np.inf] and ml.flag.tolist() == ["zero", "perfect"]
        assert np.all(np.isfinite(estimate_ability(y, bank, "wle").theta))

    def test_wle_on_two_categories_equals_binary_wle(self):
        rng = np.random.default_rng(4)
        a, d = rng.uniform(0.5, 2, 12), rng.normal(0, 1, 12)
        pb = PolyBank(np.arange(12), np.column_stack([a, d]))
        y = (rng.random((20, 12)) < 0.5).astype(float)
        t1 = estimate_ability(y, pb, "wle").theta
        t2 = estimate_ability(y, ItemBank(np.arange(12), a, -d / a), "wle").theta
        assert_allclose(t1, t2, atol=1e-6)

    def test_inputs_by_position_and_by_label(self):
        bank, rng = self._bank()
        y = poly.sample("graded", bank.params, rng.normal(size=5), rng) + 1.0
        ref = estimate_ability(y, bank, "eap").theta.to_numpy()
        assert_allclose(estimate_ability(y.tolist(), bank, "eap").theta, ref)
        shuffled = pd.DataFrame(y, columns=bank.item_ids).iloc[:, ::-1]
        assert_allclose(estimate_ability(shuffled, bank, "eap").theta, ref)

    def test_rating_off_the_scale_is_refused(self):
        bank, _ = self._bank()
        with pytest.raises(ConfigError, match="outside the item's scale 1-5"):
            estimate_ability(np.full((1, 10), 7.0), bank, "eap")
        with pytest.raises(ConfigError, match="not a whole number on the item's scale 1-5"):
            estimate_ability(np.full((1, 10), 2.5), bank, "eap")

    def test_a_rating_off_the_scale_names_the_item_and_the_model(self):
        """The error names the item id (and a labelled input's model), not a column number."""
        bank, _ = self._bank()
        y = np.full((2, 10), 3.0)
        y[1, 4] = 7.0
        frame = pd.DataFrame(y, index=["m0", "m1"], columns=bank.item_ids).iloc[:, ::-1]
        with pytest.raises(ConfigError, match=r"rating 7 of model 'm1' on item 'i4' is outside "
                                              r"the item's scale 1-5 .*--rating-range.* \(levels "
                                              r"observed at calibration: 1;2;3;4;5\)") as e:
            estimate_ability(frame, bank, "eap")
        assert "column" not in str(e.value)
        with pytest.raises(ConfigError, match=r"rating 7 at row 1 on item 'i4'") as e:
            estimate_ability(y, bank, "eap")            # by position: the bank's item order
        assert "column" not in str(e.value)


class TestBank:
    def test_round_trip_both_formats(self, tmp_path):
        p = np.array([[1.2, 1.0, -0.5, np.nan], [0.8, 2.0, 0.1, -1.0]])
        bank = PolyBank(["x", "y"], p, ["graded", "gpcm"], [[0, 1, 2], [1, 2, 3, 4]])
        for fmt in ("mirt", "ours"):
            bank.write(tmp_path / f"{fmt}.csv", format=fmt)
            back = PolyBank.read(tmp_path / f"{fmt}.csv")
            assert_allclose(back.params, p, atol=1e-12)
            assert back.models.tolist() == ["graded", "gpcm"]
            assert back.n_cat.tolist() == [3, 4]
            assert back.levels[1].tolist() == [1, 2, 3, 4]
        assert bank.model == "mixed"

    def test_reads_mirts_gpcm_coef_with_its_constants(self, tmp_path):
        """mirt's ``coef(fit, simplify = TRUE)$items`` of a GPCM lists ak0..ak3 = 0..3 and
        d0 = 0 beside a1, d1..d3 (Science, mirt 1.45.1): four categories, not five; a
        constant off mirt's value is refused."""
        cols = "item_id,model,a1,ak0,ak1,ak2,ak3,d0,d1,d2,d3"
        row = ("Comfort,gpcm,0.865313788934483,0,1,2,3,0,2.83080730170738,5.32434851039708,"
               "3.99788916465566")
        (tmp_path / "coef.csv").write_text(f"{cols}\n{row}\n")
        bank = PolyBank.read(tmp_path / "coef.csv")
        assert bank.n_cat.tolist() == [4]
        assert_allclose(bank.params[0], [0.865313788934483, 2.83080730170738, 5.32434851039708,
                                         3.99788916465566])
        bad = row.replace(",0,1,2,3,0,", ",0,1,2,3,0.5,")
        (tmp_path / "bad.csv").write_text(f"{cols}\n{bad}\n")
        with pytest.raises(BankError, match="'d0' is 0.5"):
            PolyBank.read(tmp_path / "bad.csv")

    def test_gpcm_threshold_form_is_murakis_step_thresholds(self, tmp_path):
        """``--format ours`` of a GPCM item: P(X = k) proportional to
        exp(sum_(v <= k) a (theta - b_v)) (Muraki, 1992), mirt's IRTpars; on Science the
        values of mirt 1.45.1's coef(IRTpars = TRUE) (TOL 1e-8) and their SEs by the delta
        method from the covariance of a1, d1..d3 (mirt's vcov gives Comfort b1 0.6510)."""
        bank = PolyBank(["y"], [[0.8, 2.0, 0.1, -1.0]], "gpcm")
        b = bank.to_frame("ours")[["b1", "b2", "b3"]].to_numpy(float)[0]
        theta = np.linspace(-3, 3, 7)
        z = np.column_stack([np.zeros_like(theta)] + [
            np.sum([0.8 * (theta - b[v]) for v in range(k)], axis=0) for k in (1, 2, 3)])
        want = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
        assert_allclose(bank.probability(theta)[0], want, atol=1e-12)
        sci = pd.read_csv(Path(__file__).parent / "data" / "mirt_poly" / "science.csv",
                          index_col=0)
        res = calibrate(sci, model="gpcm", se=True)
        ours = res.standard_errors("ours").set_index("item_id")
        mirt_b = {"Comfort": [-3.277459, -2.8924641, 1.537792],
                  "Work": [-2.0356875, -1.0330981, 2.0589287],
                  "Future": [-2.0831329, -0.9747980, 0.8314385],
                  "Benefit": [-2.9079568, -1.1092689, 1.6314988]}
        for item, want_b in mirt_b.items():
            assert_allclose(ours.loc[item, ["b1", "b2", "b3"]], want_b, atol=2e-3)
        assert_allclose(ours.loc["Comfort", ["b1_se", "b2_se"]], [0.6510, 0.4984], rtol=0.01)
        res.bank.write(tmp_path / "g.csv", format="ours")
        assert_allclose(PolyBank.read(tmp_path / "g.csv").params, res.bank.params, atol=1e-12)

    def test_validation(self):
        with pytest.raises(BankError, match="must decrease"):
            PolyBank(["x"], [[1.0, -1.0, 1.0]])
        with pytest.raises(BankError, match="increasing"):
            PolyBank(["x"], [[1.0, 1.0, -1.0]], levels=[[0, 2, 1]])
        with pytest.raises(BankError, match="given first"):
            PolyBank(["x"], [[1.0, np.nan, 1.0]])

    def test_binary_reader_names_an_ordinal_bank(self, tmp_path):
        PolyBank(["x"], [[1.0, 0.5, -0.5]]).write(tmp_path / "b.csv")
        with pytest.raises(BankError, match="ordinal items"):
            ItemBank.read(tmp_path / "b.csv")

    def test_from_binary_bank(self):
        b = ItemBank(["u", "v"], [1.0, 2.0], [0.5, -1.0])
        pb = PolyBank.from_item_bank(b)
        assert_allclose(pb.information(GRID), b.information(GRID), atol=1e-12)
        with pytest.raises(BankError, match="guessing"):
            PolyBank.from_item_bank(ItemBank(["u"], [1.0], [0.0], [0.2]))


class TestBadInput:
    def test_non_integer_rating(self):
        y = np.array([[1, 2], [2.5, 1], [3, 3]], float)
        with pytest.raises(ConfigError, match="not an integer"):
            calibrate(y, model="graded")

    def test_single_category(self):
        y = np.array([[1, 2], [1, 1], [1, 3]], float)
        with pytest.raises(ConfigError, match="only the level 1"):
            encode(y, ["a", "b"])

    def test_outside_declared_range(self):
        y = np.array([[1, 2], [0, 1], [3, 3]], float)
        with pytest.raises(ConfigError, match=r"outside the declared range \[1, 3\]"):
            calibrate(y, model="gpcm", value_range=(1, 3))

    def test_binary_only_priors_refused(self):
        with pytest.raises(ConfigError, match="slope prior only"):
            calibrate(np.array([[1, 2], [2, 1], [3, 3.0]]), model="graded", prior_c="beta(2,8)")

    def test_errors_are_atlas_errors(self):
        assert issubclass(ConfigError, AtlasError)


class TestCLI:
    def _data(self, tmp_path):
        rng = np.random.default_rng(1)
        truth = _params(rng, n_items=5, n_cat=4)
        y = poly.sample("graded", truth, rng.normal(size=300), rng) + 1
        df = pd.DataFrame(y, columns=[f"q{j}" for j in range(5)])
        df.insert(0, "model", [f"m{i}" for i in range(300)])
        path = tmp_path / "ratings.csv"
        df.to_csv(path, index=False)
        return path, df

    def test_calibrate_and_score(self, tmp_path):
        from typer.testing import CliRunner

        from atlascat.cli import app

        path, df = self._data(tmp_path)
        r = CliRunner().invoke(app, ["calibrate", str(path), "--model", "graded", "--format",
                                     "mirt", "-o", str(tmp_path / "b.csv"), "--summary",
                                     str(tmp_path / "s.json"), "--quiet"])
        assert r.exit_code == 0, r.output
        bank = PolyBank.read(tmp_path / "b.csv")
        assert bank.n_cat.tolist() == [4] * 5 and list(pd.read_csv(tmp_path / "b.csv").columns)[
            :6] == ["X", "model", "a1", "d1", "d2", "d3"]
        import json

        s = json.loads((tmp_path / "s.json").read_text())
        lib = calibrate(df.set_index("model"), model="graded")
        assert_allclose(s["loglik"], lib.loglik, rtol=1e-12)
        r = CliRunner().invoke(app, ["score", str(path), "--bank", str(tmp_path / "b.csv"),
                                     "-m", "map", "-o", str(tmp_path / "sc.csv")])
        assert r.exit_code == 0, r.output
        sc = pd.read_csv(tmp_path / "sc.csv")
        assert list(sc.columns) == ["subject_id", "theta", "se", "n_items", "mean_rating",
                                    "score", "score_lo", "score_hi", "flag"]
        assert_allclose(sc.mean_rating, df.iloc[:, 1:].mean(axis=1))

    @pytest.mark.parametrize("cells, extra, message", [
        ({(0, 1): 2.5}, [], "is not an integer"),
        ({}, ["--rating-range", "1", "3"], "outside the declared range"),
        ("constant", [], "needs at least two observed categories"),
    ])
    def test_bad_input_one_line_exit_2(self, tmp_path, capsys, cells, extra, message):
        from atlascat.cli import main

        path, df = self._data(tmp_path)
        if cells == "constant":
            df["q2"] = 2
        else:
            for (r, c), v in cells.items():
                df[df.columns[c]] = df[df.columns[c]].astype(float)
                df.iloc[r, c] = v
        df.to_csv(path, index=False)
        rc = main(["calibrate", str(path), "--model", "gpcm", "-o", str(tmp_path / "b.csv"),
                   "--quiet", *extra])
        err = capsys.readouterr().err
        assert rc == 2
        lines = [ln for ln in err.strip().splitlines() if ln.strip()]
        assert len(lines) == 1 and message in err, err


def test_binary_only_settings_are_refused(tmp_path, capsys):
    from atlascat.cli import main

    with pytest.raises(ConfigError, match="filter"):
        calibrate(np.array([[1, 2], [2, 1], [3, 3.0]]), model="gpcm", filter=True)
    pd.DataFrame({"s": ["a", "b", "c"], "q": [1, 2, 3], "r": [2, 1, 1]}).to_csv(
        tmp_path / "r.csv", index=False)
    rc = main(["calibrate", str(tmp_path / "r.csv"), "--model", "graded", "--device", "cuda",
               "-o", str(tmp_path / "b.csv")])
    assert rc == 2 and "--device is for the binary models" in capsys.readouterr().err
