"""The real-data protocol (run_benchmark) and the benchmark / compare / report commands,
on a small matrix simulated from a known 3PL bank (fast), plus checks against independent
recomputations of each step."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from atlascat.errors import AtlasError, ConfigError
from atlascat.evaluate import protocol
from atlascat.evaluate.protocol import BenchmarkConfig, BenchmarkRun, run_benchmark
from atlascat.irt.ability import eap, estimate_ability
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


CONFIG = dict(seed=3, taus=(0.25, 0.4), random_k=30, random_replicates=3, anchor_k=20,
              info_k=20, optimal_k=20, optimal_criteria=("D", "E"), model_fit=False,
              example_models=2)


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
            theta, se = eap(test.subset(items=items.to_numpy()).values, sub)
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


class TestConfig:
    def test_validation(self):
        with pytest.raises(ConfigError, match="positive"):
            BenchmarkConfig(taus=(0.2, -1))
        with pytest.raises(ConfigError, match="criteria"):
            BenchmarkConfig(optimal_criteria=("Z",))
        with pytest.raises(ConfigError, match="random_k"):
            BenchmarkConfig(random_k=-5)

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

        rc = main(["report", str(run_dir), "-o", str(tmp_path / "again.html")])
        assert rc == 0 and (tmp_path / "again.html").stat().st_size > 10_000

    def test_bad_taus_is_a_clean_error(self, tmp_path, capsys):
        from atlascat.cli import main

        rm, _ = _simulated(seed=5)
        path = tmp_path / "sim.csv"
        rm.subset(subjects=np.arange(50)).write(path)
        assert main(["benchmark", str(path), "--taus", "0.2,abc"]) == 2
        assert "comma-separated" in capsys.readouterr().err

    def test_compare_rejects_non_run_dir(self, tmp_path, capsys):
        from atlascat.cli import main

        assert main(["compare", str(tmp_path)]) == 2
        assert "not a benchmark run" in " ".join(capsys.readouterr().err.split())
