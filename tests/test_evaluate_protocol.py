"""The real-data protocol (run_benchmark) and the benchmark / compare / report commands,
on a small matrix simulated from a known 3PL bank (fast), plus checks against independent
recomputations of each step."""
from __future__ import annotations

import json

import warnings

import numpy as np
import pandas as pd
import pytest

from atlascat.errors import AtlasError, ConfigError
from atlascat.studies import protocol
from atlascat.studies.protocol import BenchmarkConfig, BenchmarkRun, run_benchmark
from atlascat.irt.ability import eap, estimate_ability
from atlascat.irt.defaults import QUADPTS
from atlascat.irt.bank import ItemBank
from atlascat.responses import ResponseMatrix

N_MODELS, N_ITEMS = 500, 90


def _simulated(seed=11):
    rng = np.random.default_rng(seed)
    bank = ItemBank([f"q{j}" for j in range(N_ITEMS)], rng.lognormal(0.3, 0.3, N_ITEMS),
                    rng.normal(0, 1.2, N_ITEMS), rng.uniform(0, 0.2, N_ITEMS))
    theta = rng.normal(size=N_MODELS)
    y = (rng.random((N_MODELS, N_ITEMS)) < bank.probability(theta)).astype(float)
    return ResponseMatrix(y, [f"org/model-{i}" for i in range(N_MODELS)], bank.item_ids), theta


CONFIG = dict(seed=3, model="3pl", taus=(0.25, 0.4), random_k=30, random_replicates=3, anchor_k=20,
              info_k=20, optimal_k=20, optimal_criteria=("D", "E"), model_fit=False,
              example_models=2, calibrate_options={"mirt_defaults": True})


@pytest.fixture(scope="module")
def run():
    rm, _ = _simulated()
    stages = []
    result = run_benchmark(rm, BenchmarkConfig(**CONFIG), name="sim", progress=stages.append)
    result.info["stages_seen"] = stages
    return result


class TestProtocol:
    def test_stages_and_methods(self, run):
        cfg = BenchmarkConfig(**CONFIG)
        assert run.info["stages_seen"] == protocol.plan_stages(cfg)
        assert run.methods == ["Random-30", "Anchor-20", "Info-20", "D-optimal-20",
                               "E-optimal-20", "ATLAS tau=0.25", "ATLAS tau=0.4"]

    def test_split_is_stratified_and_disjoint(self, run):
        n_test = run.info["n_test"]
        assert n_test + run.info["n_train"] == N_MODELS
        assert 0.08 * N_MODELS <= n_test <= 0.12 * N_MODELS
        counts = run.persons.groupby("method")["subject_id"].nunique()
        assert (counts == n_test).all()
        reps = run.persons[run.persons["method"] == "Random-30"].groupby("subject_id").size()
        assert (reps == 3).all()

    def test_reference_is_whole_bank_wle(self, run):
        rm, _ = _simulated()
        test = rm.subset(subjects=run.reference["subject_id"].to_numpy())
        test = test.subset(items=run.bank.item_ids)  # the filter may have dropped items
        wle = estimate_ability(test, run.bank, method="wle")
        np.testing.assert_allclose(run.reference["theta_ref"], wle["theta"], atol=1e-10)
        np.testing.assert_allclose(run.reference["accuracy_full"], test.values.mean(axis=1))

    def test_fixed_forms_scored_by_eap_on_their_items(self, run):
        """Independent path: EAP with a bank restricted to the form's items."""
        rm, _ = _simulated()
        test = rm.subset(subjects=run.reference["subject_id"].to_numpy())
        for method in ("Anchor-20", "D-optimal-20"):
            items = run.forms.loc[run.forms["method"] == method, "item_id"].astype(str)
            sub = run.bank.subset(items.to_numpy())
            # the protocol scores on its config's grid (61 nodes), not eap's default (121)
            theta, se = eap(test.subset(items=items.to_numpy()).values, sub, quadpts=QUADPTS)
            got = run.persons[run.persons["method"] == method]
            np.testing.assert_allclose(got["theta"], theta, atol=1e-10)
            np.testing.assert_allclose(got["se"], se, atol=1e-10)
            assert (got["n_items"] == 20).all()

    def test_anchor_direct_accuracy_uses_cluster_weights(self, run):
        rm, _ = _simulated()
        form = run.forms[run.forms["method"] == "Anchor-20"]
        test = rm.subset(subjects=run.reference["subject_id"].to_numpy(),
                         items=form["item_id"].astype(str).to_numpy())
        expected = test.values @ form["weight"].to_numpy()
        got = run.persons[run.persons["method"] == "Anchor-20"]["accuracy_direct"]
        np.testing.assert_allclose(got, expected)
        assert form["weight"].sum() == pytest.approx(1.0)

    def test_cat_obeys_its_stopping_rule(self, run):
        for tau in (0.25, 0.4):
            g = run.persons[run.persons["method"] == f"ATLAS tau={tau:g}"]
            assert (g["n_items"] >= 30).all()
            stopped_by_se = g["n_items"] < len(run.bank)
            assert (g.loc[stopped_by_se, "se"] <= tau + 1e-12).all()
        # a looser threshold never needs more items on average
        s = run.summary.set_index("method")
        assert s.loc["ATLAS tau=0.4", "items_mean"] <= s.loc["ATLAS tau=0.25", "items_mean"]
        traj = run.trajectories
        assert set(traj["method"]) == {"ATLAS tau=0.25", "ATLAS tau=0.4"}
        assert traj.groupby("method")["subject_id"].nunique().eq(2).all()

    def test_summary_matches_persons(self, run):
        s = run.summary.set_index("method")
        g = run.persons[run.persons["method"] == "ATLAS tau=0.25"]
        err = np.abs(g["theta"] - g["theta_ref"])
        assert s.loc["ATLAS tau=0.25", "theta_mae"] == pytest.approx(err.mean())
        assert s.loc["ATLAS tau=0.25", "theta_mae_se"] == pytest.approx(
            err.std(ddof=1) / np.sqrt(len(g)))
        cov = np.mean(err <= 1.959964 * g["se"])
        assert s.loc["ATLAS tau=0.25", "coverage"] == pytest.approx(cov, abs=1e-9)
        assert s.loc["Random-30", "ies"] == pytest.approx(1.0)
        ref = s.loc["Random-30"]
        assert s.loc["Info-20", "ies"] == pytest.approx(
            s.loc["Info-20", "theta_mae"] * 20 / (ref["theta_mae"] * 30))
        # fixed forms: overlap 1, exposure = k / bank size; CAT overlap below 1
        assert s.loc["Anchor-20", "overlap"] == pytest.approx(1.0)
        assert s.loc["Anchor-20", "exposure_mean"] == pytest.approx(20 / len(run.bank))
        assert s.loc["ATLAS tau=0.25", "overlap"] < 1.0
        # p-IRT accuracy is close to the full accuracy on simulated 3PL data
        assert (s["acc_pirt_mae"] < 0.06).all()

    def test_methods_estimate_the_reference_well(self, run):
        s = run.summary.set_index("method")
        assert (s["theta_mae"] < 0.45).all()
        assert (s["coverage"] > 0.75).all()

    def test_seeded(self, run):
        rm, _ = _simulated()
        cfg = BenchmarkConfig(**{**CONFIG, "optimal_k": 0, "anchor_k": 0, "info_k": 0,
                                 "random_replicates": 1, "taus": (0.4,)})
        a, b = run_benchmark(rm, cfg), run_benchmark(rm, cfg)
        drop = ["seconds"]
        pd.testing.assert_frame_equal(a.persons.drop(columns=drop), b.persons.drop(columns=drop))
        # the split and the calibration come first: same seed, same reference as the module's run
        pd.testing.assert_frame_equal(a.reference, run.reference)

    def test_write_read_roundtrip(self, run, tmp_path):
        run.write(tmp_path / "r")
        back = BenchmarkRun.read(tmp_path / "r")
        assert back.name == "sim" and back.config.taus == (0.25, 0.4)
        pd.testing.assert_frame_equal(back.summary, run.summary, check_dtype=False)
        np.testing.assert_allclose(back.persons["theta"], run.persons["theta"])
        np.testing.assert_allclose(back.bank.b, run.bank.b)
        meta = json.loads((tmp_path / "r" / "run.json").read_text())
        assert meta["config"]["random_k"] == 30 and "ies_definition" in meta
        for name in ("ability", "accuracy", "security"):
            assert (tmp_path / "r" / f"table_{name}.csv").exists()
        with pytest.raises(AtlasError, match="not a benchmark run"):
            BenchmarkRun.read(tmp_path)


class TestSECalibration:
    def test_calibrated_coverage_matches_persons(self, run):
        """se_calibrated = k_tau x SE on the CAT rows (k from the validation train models), NaN on
        the fixed forms; coverage_calibrated is recomputed from the persons table."""
        val = run.info["se_calibration"]
        assert val["n_validation"] + val["n_fit"] == run.info["n_train_calibrated"]
        assert set(val["factors"]) == {0.25, 0.4}
        s = run.summary.set_index("method")
        for tau in (0.25, 0.4):
            g = run.persons[run.persons["method"] == f"ATLAS tau={tau:g}"]
            k = val["factors"][tau]
            assert 0.5 < k < 2.0  # data simulated from a 3PL: the stated SE is about right
            np.testing.assert_allclose(g["se_calibrated"], k * g["se"])
            cov = np.mean(np.abs(g["theta"] - g["theta_ref"]) <= 1.959964 * k * g["se"])
            assert s.loc[f"ATLAS tau={tau:g}", "coverage_calibrated"] == pytest.approx(cov)
        fixed = run.persons[~run.persons["method"].str.startswith("ATLAS")]
        assert fixed["se_calibrated"].isna().all()
        assert s.loc[["Random-30", "Anchor-20"], "coverage_calibrated"].isna().all()

    def test_factor_is_the_validation_quantile(self):
        """Independent recomputation of k on the validation split from its definition."""
        from atlascat.filtering import filter_items, stratified_split
        from atlascat.irt.calibrate import calibrate

        rm, _ = _simulated()
        cfg = BenchmarkConfig(seed=5, model="2pl", taus=(0.4,), example_models=0)
        train, _ = filter_items(rm)
        got = protocol.validation_se_factors(train, "2pl", cfg, np.random.default_rng(9))
        rng = np.random.default_rng(9)
        fit, val = stratified_split(train, test_size=0.2, n_bins=10, rng=rng)
        assert (got["n_fit"], got["n_validation"]) == (fit.n_subjects, val.n_subjects)
        bank = calibrate(fit, model="2pl", random_state=5).bank
        y = val.aligned_values(bank.item_ids, extra="ignore")
        ref = estimate_ability(y, bank, method="wle")["theta"].to_numpy()
        res = protocol._run_cat(bank, ResponseMatrix(y, val.subject_ids, bank.item_ids), 0.4,
                                {"cat_options": {}, "example_models": 0}, rng)
        ratio = np.abs(res["theta"] - ref) / res["se"]
        # models the CAT gave every bank item are left out (their theta is the reference's own)
        whole = res["administered"].sum(1) >= (~np.isnan(y)).sum(1)
        assert got["whole_bank"][0.4] == pytest.approx(whole.mean())
        ratio = ratio[~whole]
        assert got["factors"][0.4] == pytest.approx(np.quantile(ratio, 0.95, method="higher") / 1.959964, rel=1e-6)
        assert got["raw_coverage"][0.4] == pytest.approx(np.mean(ratio <= 1.959964), abs=1e-9)
        # by construction 95% of the validation models lie inside theta_hat +- 1.96 k SE
        assert np.mean(ratio <= 1.959964 * got["factors"][0.4] + 1e-12) >= 0.95
        small = protocol.validation_se_factors(train.subset(subjects=train.subject_ids[:60]),
                                               "2pl", cfg, np.random.default_rng(9))
        assert small["factors"] == {} and "fewer than 20" in small["note"]

    def test_switching_it_off_changes_nothing_else(self, run):
        rm, _ = _simulated()
        cfg = BenchmarkConfig(**{**CONFIG, "se_calibration": False})
        assert "SE calibration" not in protocol.plan_stages(cfg)
        off = run_benchmark(rm, cfg)
        assert "se_calibrated" not in off.persons.columns
        cols = ["method", "replicate", "subject_id", "theta", "se", "n_items"]
        pd.testing.assert_frame_equal(off.persons[cols], run.persons[cols])


class TestModelSelection:
    @staticmethod
    def _data(c_value, seed, n=1500, j=40):
        rng = np.random.default_rng(seed)
        bank = ItemBank([f"i{k}" for k in range(j)], rng.lognormal(0.4, 0.25, j),
                        rng.normal(0.3, 1.0, j), np.full(j, c_value))
        y = (rng.random((n, j)) < bank.probability(rng.normal(size=n))).astype(float)
        return ResponseMatrix(y, [f"m{k}" for k in range(n)], bank.item_ids)

    def test_bic_picks_the_generating_model(self):
        """No guessing (c = 0, as exact-match generation) -> 2PL; 4-choice guessing -> 3PL."""
        chosen, results, rows = protocol.select_model(self._data(0.0, 1), ("2pl", "3pl"),
                                                      random_state=0, mirt_defaults=True)
        assert chosen == "2pl"
        chosen3, _, rows3 = protocol.select_model(self._data(0.25, 2), ("2pl", "3pl"),
                                                  random_state=0, mirt_defaults=True)
        assert chosen3 == "3pl"
        # BIC recomputed from the definition: -2 log L + k log N
        for r in rows:
            k = {"2pl": 2, "3pl": 3}[r["model"]] * 40
            assert r["n_params"] == k and r["n"] == 1500
            assert r["bic"] == pytest.approx(-2 * results[r["model"]].loglik + k * np.log(1500))
            assert r["chosen"] == (r["model"] == "2pl")
        # the 3PL always has the larger likelihood (nested); BIC still prefers the 2PL
        ll = {r["model"]: r["loglik"] for r in rows}
        assert ll["3pl"] >= ll["2pl"] - 1e-6

    def test_each_fit_warning_is_given_once(self):
        """A note both candidates' fits raise is given once, the chosen model's own as it is,
        one only a candidate not chosen raised says so (Python's once-per-place filter off);
        the SE factor's internal bank says none of its own."""
        rm = self._data(0.0, 4, n=60, j=30)
        y = rm.values.copy()
        y[:, 0], y[:2, 0] = 1.0, 0.0          # an item two of the 60 missed: barely identified
        rm = ResponseMatrix(y, rm.subject_ids, rm.item_ids)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            chosen, _, _ = protocol.select_model(rm, ("2pl", "3pl"), random_state=0)
        said = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
        other = ({"2pl", "3pl"} - {chosen}).pop()
        assert len(said) == len(set(said))
        assert said.count("1 item(s) have fewer than 3 answers in their rarer category: their "
                          "slopes (and asymptotes) are barely identified") == 1
        assert [m for m in said if m.startswith(f"a {chosen.upper()} on 60 subjects: ")]
        assert [m for m in said if m.startswith(f"the {other} candidate (not chosen by BIC): "
                                                f"a {other.upper()} on 60 subjects: ")]
        cfg = BenchmarkConfig(**{**CONFIG, "validation_size": 0.4})
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            # 60 items: on 30 the CAT (30 items at least) gives every model the whole bank,
            # which has no SE factor
            got = protocol.validation_se_factors(self._data(0.0, 5, n=60, j=60), "3pl", cfg,
                                                 np.random.default_rng(1))
        assert got["factors"] and not [w for w in caught if issubclass(w.category, UserWarning)]

    def test_one_dimensionality_check_on_the_chosen_fit(self, monkeypatch):
        """The candidates' fits skip the check; the chosen one gets it once, with the verdict
        and warning a direct calibrate() of that model gives (random answers: flagged)."""
        from atlascat.irt import dimensionality
        from atlascat.irt.calibrate import calibrate

        rng = np.random.default_rng(7)
        noise = ResponseMatrix((rng.random((60, 30)) < 0.5).astype(float),
                               [f"m{k}" for k in range(60)], [f"i{k}" for k in range(30)])
        calls = []
        real = dimensionality.record
        monkeypatch.setattr(dimensionality, "record",
                            lambda *a, **k: calls.append(1) or real(*a, **k))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            chosen, results, _ = protocol.select_model(noise, ("2pl", "3pl"), random_state=3)
        assert len(calls) == 1
        other = ({"2pl", "3pl"} - {chosen}).pop()
        assert "dimensionality" not in results[other].settings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            direct = calibrate(noise, model=chosen, random_state=3)
        assert results[chosen].settings["dimensionality"] == direct.settings["dimensionality"]
        said = [w for w in caught if issubclass(w.category, dimensionality.DimensionalityWarning)]
        assert len(said) == 1 and direct.settings["defaults"]["warnings"][-1] == str(said[0].message)
        assert str(said[0].message) in results[chosen].settings["defaults"]["warnings"]

    def test_auto_in_the_protocol_records_the_comparison(self):
        rm = self._data(0.0, 3, n=600, j=60)
        run = run_benchmark(rm, BenchmarkConfig(seed=1, taus=(0.4,), random_k=20,
                                                random_replicates=1, anchor_k=0, info_k=0,
                                                optimal_k=0, model_fit=False,
                                                se_calibration=False))
        cal = run.info["calibration"]
        sel = cal["model_selection"]
        assert sel["criterion"] == "BIC" and {r["model"] for r in sel["candidates"]} == {"2pl", "3pl"}
        best = min(sel["candidates"], key=lambda r: r["bic"])["model"]
        assert cal["model"] == best == "2pl"
        assert np.all(run.bank.c == 0)

    def test_prior_on_c_goes_only_to_models_with_c(self):
        assert protocol._options_for("2pl", {"prior_c": "beta(5,17)", "prior_a": "x"}) == {"prior_a": "x"}
        assert protocol._options_for("3pl", {"prior_c": "beta(5,17)"}) == {"prior_c": "beta(5,17)"}
        assert protocol.n_item_parameters("rasch", 10) == 11
        assert protocol.n_item_parameters("4pl", 10) == 40


class TestConfig:
    def test_model_names(self):
        assert BenchmarkConfig().model == "bic"   # "auto" is calibrate's size default
        with pytest.raises(ConfigError, match="unknown IRT model"):
            BenchmarkConfig(model="5pl")
        with pytest.raises(ConfigError, match="unknown IRT model"):
            BenchmarkConfig(model_candidates=("2pl", "auto"))
        with pytest.raises(ConfigError, match="validation_size"):
            BenchmarkConfig(validation_size=1.5)

    def test_validation(self):
        with pytest.raises(ConfigError, match="positive"):
            BenchmarkConfig(taus=(0.2, -1))
        with pytest.raises(ConfigError, match="criteria"):
            BenchmarkConfig(optimal_criteria=("Z",))
        with pytest.raises(ConfigError, match="random_k"):
            BenchmarkConfig(random_k=-5)
        with pytest.raises(ConfigError, match="random_replicates must be >= 1"):
            BenchmarkConfig(random_replicates=0)   # random_k=0 switches Random-k off

    def test_needs_a_response_matrix(self):
        with pytest.raises(ConfigError, match="ResponseMatrix"):
            run_benchmark(np.zeros((10, 5)))


class TestCommands:
    def test_benchmark_compare_report(self, tmp_path, capsys):
        from atlascat.cli import main

        rm, _ = _simulated(seed=5)
        path = tmp_path / "sim.csv.gz"
        rm.write(path)
        run_dir = tmp_path / "run"
        rc = main(["benchmark", str(path), "-o", str(run_dir), "--seed", "1", "--taus", "0.3",
                   "--random-k", "30", "--replicates", "2", "--anchor-k", "20", "--info-k", "20",
                   "--optimal-k", "0", "--no-fit", "--name", "simulated"])
        out = capsys.readouterr().out
        assert rc == 0
        assert "Table 2" in out and "ATLAS tau=0.3" in out and "Random-30" in out
        assert (run_dir / "run.json").exists()
        assert json.loads((run_dir / "run.json").read_text())["name"] == "simulated"

        rc = main(["compare", str(run_dir), str(run_dir), "-o",
                   str(tmp_path / "cmp")])
        out = capsys.readouterr().out
        assert rc == 0 and "| ATLAS tau=0.3" in out and "Table 6" in out
        assert "simulated (2)" in out  # the same run twice gets distinct column names
        assert (tmp_path / "cmp" / "tables.md").exists()
        own = (run_dir / "tables.md").read_text()   # a compared run's folder keeps its tables
        assert main(["compare", str(run_dir), str(run_dir), "-o", str(run_dir)]) == 2
        err = capsys.readouterr().err
        assert "is one of the runs compared" in err and err.count("\n") == 1
        assert (run_dir / "tables.md").read_text() == own

        rc = main(["report", str(run_dir), "-o", str(tmp_path / "again.html")])
        assert rc == 0 and (tmp_path / "again.html").stat().st_size > 10_000

    def test_bad_taus_is_a_clean_error(self, tmp_path, capsys):
        from atlascat.cli import main

        rm, _ = _simulated(seed=5)
        path = tmp_path / "sim.csv"
        rm.subset(subjects=np.arange(50)).write(path)
        assert main(["benchmark", str(path), "--taus", "0.2,abc"]) == 2
        assert "comma-separated" in capsys.readouterr().err

    @pytest.mark.parametrize("args,needle", [
        (["--random-k", "-1"], "--random-k must be >= 0"),
        (["--replicates", "0"], "--replicates must be >= 1, got 0"),
        (["--taus", "0.2,0"], "--taus must be positive, got 0.2, 0"),
        (["--criteria", "D,Z"], "unknown --criteria ['Z']"),
        (["--test-size", "0.999"], "--test-size 0.999 puts all 50 subjects in the test set"),
    ])
    def test_bad_settings_name_the_option(self, tmp_path, capsys, args, needle):
        from atlascat.cli import main

        rm, _ = _simulated(seed=5)
        path = tmp_path / "sim.csv"
        rm.subset(subjects=np.arange(50)).write(path)
        assert main(["benchmark", str(path), "-o", str(tmp_path / "run"), *args]) == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and needle in lines[0], lines

    def test_compare_rejects_non_run_dir(self, tmp_path, capsys):
        from atlascat.cli import main

        assert main(["compare", str(tmp_path)]) == 2
        assert "not a benchmark run" in " ".join(capsys.readouterr().err.split())


def test_model_auto_means_what_it_means_in_calibrate():
    """Issue 28, daily use: --model auto is calibrate's size default in benchmark too; the BIC
    choice between 2PL and 3PL is --model bic (benchmark's default)."""
    import warnings

    from atlascat.irt.calibrate import calibrate

    rm, _ = _simulated()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = calibrate(rm, model="auto", random_state=0).model
        _, summary = protocol._calibrate(rm, BenchmarkConfig(model="auto"), None)
        _, by_bic = protocol._calibrate(rm, BenchmarkConfig(), None)
    assert summary["model"] == expected and "model_selection" not in summary
    assert by_bic["model_selection"]["criterion"] == "BIC"
    assert by_bic["model"] in ("2pl", "3pl")


def test_benchmark_of_continuous_scores_skips_m2_and_says_why(tmp_path, capsys):
    """M2 tests 0/1 answers: on scores in (0, 1) the benchmark runs to the end, run.json and the
    report say the fit was not computed and why, and the command line says why the validation
    SE factor column is empty."""
    from atlascat.cli import main
    from atlascat.studies.report import build_report

    rm, theta = _simulated(seed=7)
    rng = np.random.default_rng(8)
    bank = ItemBank(rm.item_ids, rng.lognormal(0.3, 0.3, rm.n_items), rng.normal(0, 1, rm.n_items))
    p = bank.probability(theta)
    scores = np.clip(p + rng.normal(0, 0.08, p.shape), 0.01, 0.99)   # an F1-like score
    cont = ResponseMatrix(scores, rm.subject_ids, rm.item_ids)
    cfg = BenchmarkConfig(seed=1, model="2pl", taus=(0.4,), random_k=20, random_replicates=1,
                          anchor_k=0, info_k=0, optimal_k=0, model_fit=True, se_calibration=False)
    run = run_benchmark(cont, cfg, name="continuous")
    assert run.info["fit"] == {"skipped": "M2 tests 0/1 answers; these are continuous scores"}
    html = build_report([run])
    assert "not computed (M2 tests 0/1 answers" in html
    # a model's mean over continuous scores is its mean score: the tables say so, not accuracy
    assert run.continuous and run.info["scores"] == "continuous"
    assert "Table 3. Mean score: reconstructed mean score error against the full mean score" in html
    assert "p-IRT score MAE" in html and "accuracy" not in html.lower().split("<body")[-1]
    run.write(tmp_path / "written")
    assert "Mean score" in (tmp_path / "written" / "table_accuracy.md").read_text()
    path = tmp_path / "cont.csv"
    cont.subset(subjects=np.arange(80)).write(path)   # 14 validation models: no SE factor
    assert main(["benchmark", str(path), "-o", str(tmp_path / "run"), "-q", "--model", "2pl",
                 "--taus", "0.4", "--random-k", "20", "--anchor-k", "0", "--info-k", "0",
                 "--optimal-k", "0"]) == 0
    out = capsys.readouterr().out
    assert "model fit (M2): not computed" in out and "CAT SE factor: fewer than 20" in out
