"""Evaluation metrics: MAE +- SE, interval coverage, IES, and the paper's own figures."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from atlascat.studies import metrics

BENCHES = ("arc", "gsm8k", "hellaswag", "truthfulqa", "winogrande")


def _paper_cat(shared_data, bench, tau="0.1"):
    cat = metrics.normalize_cat_results(
        pd.read_csv(shared_data / "reference" / "atlas_cat_results" / f"{bench}_se{tau}.csv"))
    wle = pd.read_csv(shared_data / "atlas_banks" / f"{bench}_test_theta_wle.csv").rename(
        columns={"Model_Name": "subject_id", "Theta_WLE": "theta_ref", "SE": "se_ref"})
    return cat.merge(wle, on="subject_id", validate="one_to_one")


class TestErrorSummary:
    def test_matches_hand_computation(self):
        est = np.array([0.1, -0.2, 0.5, 1.0])
        ref = np.array([0.0, 0.0, 0.0, 0.0])
        e = metrics.error_summary(est, ref)
        assert e.mae == pytest.approx(0.45)
        sd = np.std([0.1, 0.2, 0.5, 1.0], ddof=1)
        assert e.sd == pytest.approx(sd)
        assert e.se == pytest.approx(sd / 2)
        assert e.n == 4

    def test_nonfinite_pairs_are_dropped(self):
        e = metrics.error_summary([1.0, np.nan, 3.0], [0.0, 0.0, 0.0])
        assert e.n == 2 and e.mae == pytest.approx(2.0)

    def test_reproduces_paper_theta_summary(self, shared_data):
        # The paper's Table 2 input: ATLAS at SE 0.1 on ARC vs the whole-bank WLE of its test models.
        m = _paper_cat(shared_data, "arc", "0.1")
        e = metrics.error_summary(m["theta"], m["theta_ref"])
        ref = pd.read_csv(shared_data / "reference" / "summary_theta_mae_sd_se.csv")
        row = ref[ref["filename"] == "arc/pirt_accuracy_se_0.1.csv"].iloc[0]
        assert e.n == row["n"]
        assert e.mae == pytest.approx(row["mae"], abs=2e-3)
        assert e.se == pytest.approx(row["se"], rel=0.05)


class TestCoverage:
    def test_normal_errors_cover_at_nominal_rate(self, rng):
        n = 20000
        se = rng.uniform(0.1, 0.5, n)
        truth = rng.normal(size=n)
        est = truth + rng.normal(size=n) * se
        cov = metrics.interval_coverage(est, se, truth)
        assert cov == pytest.approx(0.95, abs=0.006)
        # understated SEs (half the real error) cover far less
        assert metrics.interval_coverage(est, se / 2, truth) == pytest.approx(0.6729, abs=0.01)

    def test_level_and_joint_width(self):
        est, se, ref = np.array([0.0, 0.0]), np.array([1.0, 1.0]), np.array([1.5, 2.7])
        assert metrics.interval_coverage(est, se, ref) == 0.5
        assert metrics.interval_coverage(est, se, ref, level=0.99) == 0.5  # z = 2.576
        assert metrics.interval_coverage(est, se, ref, level=0.5) == 0.0  # z = 0.674
        assert metrics.interval_coverage(est, se, ref, reference_se=[1.0, 1.0]) == 1.0

    @pytest.mark.parametrize("bench, joint, alone", [
        ("arc", 0.9448, 0.8945), ("hellaswag", 0.6684, 0.6321), ("truthfulqa", 0.9302, 0.8643),
        ("gsm8k", 0.8000, 0.7571), ("winogrande", 0.8676, 0.8138)])
    def test_paper_cat_coverage(self, shared_data, bench, joint, alone):
        """The paper's CAT at SE <= 0.1: 66% (HellaSwag) to 94% (ARC) of its test models are
        covered when the interval also carries the whole-bank WLE's SE; its own SE alone covers
        63% to 89%."""
        m = _paper_cat(shared_data, bench)
        cov_joint = metrics.interval_coverage(m["theta"], m["se"], m["theta_ref"],
                                              reference_se=m["se_ref"])
        cov_alone = metrics.interval_coverage(m["theta"], m["se"], m["theta_ref"])
        assert cov_joint == pytest.approx(joint, abs=5e-4)
        assert cov_alone == pytest.approx(alone, abs=5e-4)

    def test_paper_range_66_to_94(self, shared_data):
        cov = {b: metrics.interval_coverage(*(_paper_cat(shared_data, b)[c] for c in
                                              ("theta", "se", "theta_ref")),
                                            reference_se=_paper_cat(shared_data, b)["se_ref"])
               for b in BENCHES}
        assert min(cov, key=cov.get) == "hellaswag" and round(cov["hellaswag"], 2) == 0.67
        assert max(cov, key=cov.get) == "arc" and round(cov["arc"], 2) == 0.94


class TestEfficiency:
    def test_reference_scores_one_and_direction(self):
        assert metrics.information_efficiency(0.2, 100, 0.2, 100) == pytest.approx(1.0)
        # half the items at the same error: twice as efficient -> IES 0.5 (lower is better)
        assert metrics.information_efficiency(0.2, 50, 0.2, 100) == pytest.approx(0.5)
        assert metrics.information_efficiency(0.1, 35, 0.2, 100) == pytest.approx(0.175)

    def test_rie_is_length_invariant_for_random_subsets(self, rng):
        # mean of k iid N(0, 1) items: MAE ~ sqrt(2 / (pi k)); RIE of any k vs k = 100 is ~ 1
        def mae(k):
            return np.abs(rng.normal(size=(20000, k)).mean(axis=1)).mean()
        assert metrics.relative_information_efficiency(mae(25), 25, mae(100), 100) == \
            pytest.approx(1.0, abs=0.05)
        assert metrics.information_efficiency(mae(25), 25, mae(100), 100) == \
            pytest.approx(0.5, abs=0.03)


class TestSummarizePersons:
    def _persons(self, rng):
        n = 400
        ref = rng.normal(size=n)
        rows = []
        for r in range(3):
            rows.append(pd.DataFrame({"method": "Random-100", "replicate": r,
                                      "subject_id": np.arange(n).astype(str),
                                      "theta": ref + rng.normal(scale=0.2, size=n), "se": 0.2,
                                      "n_items": 100, "theta_ref": ref, "se_ref": 0.05,
                                      "accuracy_full": 0.5, "accuracy_pirt": 0.52,
                                      "seconds": 0.0}))
        rows.append(pd.DataFrame({"method": "CAT", "replicate": 0,
                                  "subject_id": np.arange(n).astype(str),
                                  "theta": ref + rng.normal(scale=0.2, size=n), "se": 0.1,
                                  "posterior_sd": 0.2,
                                  "n_items": np.where(np.arange(n) % 2, 30, 40),
                                  "theta_ref": ref, "se_ref": 0.05, "accuracy_full": 0.5,
                                  "accuracy_pirt": 0.47, "seconds": 0.01}))
        return pd.concat(rows, ignore_index=True)

    def test_rows_and_reference(self, rng):
        s = metrics.summarize_persons(self._persons(rng)).set_index("method")
        assert s.loc["Random-100", "replicates"] == 3 and s.loc["CAT", "replicates"] == 1
        assert s.loc["Random-100", "ies"] == pytest.approx(1.0)
        assert s.loc["CAT", "items_mean"] == pytest.approx(35.0)
        # replicate-averaged |error| of N(0, 0.2^2): E|e| = 0.2 sqrt(2/pi) for one draw, a bit
        # smaller after averaging three draws per subject
        assert 0.13 < s.loc["Random-100", "theta_mae"] < 0.2 * np.sqrt(2 / np.pi) + 0.01
        assert s.loc["CAT", "theta_mae"] == pytest.approx(0.2 * np.sqrt(2 / np.pi), abs=0.015)
        assert s.loc["Random-100", "coverage"] == pytest.approx(0.95, abs=0.03)
        assert s.loc["CAT", "coverage"] == pytest.approx(0.6729, abs=0.05)  # SE half the error
        assert s.loc["CAT", "coverage_posterior"] == pytest.approx(0.95, abs=0.03)
        assert np.isnan(s.loc["Random-100", "coverage_posterior"])  # no posterior SD given
        assert s.loc["CAT", "acc_pirt_mae"] == pytest.approx(0.03)
        expected_ies = (s.loc["CAT", "theta_mae"] * 35) / (s.loc["Random-100", "theta_mae"] * 100)
        assert s.loc["CAT", "ies"] == pytest.approx(expected_ies)

    def test_missing_column_is_an_error(self):
        from atlascat.errors import ConfigError

        with pytest.raises(ConfigError, match="theta_ref"):
            metrics.summarize_persons(pd.DataFrame({"method": ["a"], "subject_id": ["x"],
                                                    "theta": [0.0], "se": [1.0], "n_items": [1]}))
