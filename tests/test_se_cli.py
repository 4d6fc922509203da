"""``atlas calibrate --se`` / ``--summary`` and ``atlas anova``: the CLI writes what the library
computes (tests/test_se.py checks the numbers against mirt)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from atlascat.cli import main
from atlascat.irt.bank import ItemBank

REF = Path(__file__).parent / "data" / "mirt_se"


@pytest.fixture(scope="module")
def lsat7(shared_data):
    return str(shared_data / "classic" / "lsat7_patterns.csv")


def test_calibrate_se_columns_beside_parameters(lsat7, tmp_path):
    out, summ = tmp_path / "b.csv", tmp_path / "s.json"
    assert main(["calibrate", lsat7, "--freq-column", "freq", "--model", "2pl", "--prior-a",
                 "none", "--se", "-o", str(out), "--summary", str(summ), "--quiet"]) == 0
    df = pd.read_csv(out)
    assert list(df.columns) == ["item_id", "a", "a_se", "b", "b_se", "c", "u"]
    bank = ItemBank.read(out)                      # the file keeps them (as metadata)
    assert list(bank.metadata.columns) == ["a_se", "b_se"]
    s = json.loads(summ.read_text())
    fit = json.loads((REF / "lsat7_2pl_fit.json").read_text())
    assert s["n_parameters"] == 10 and s["n_observations"] == 1000
    for k in ("aic", "bic", "sabic", "hq"):
        assert s[k] == pytest.approx(fit[k.upper()], abs=0.05)
    assert s["standard_errors"]["positive_definite"] is True


def test_calibrate_se_mirt_format(lsat7, tmp_path):
    out = tmp_path / "b.csv"
    assert main(["calibrate", lsat7, "--freq-column", "freq", "--model", "2pl", "--prior-a",
                 "none", "--se", "--format", "mirt", "-o", str(out), "--quiet"]) == 0
    df = pd.read_csv(out)
    assert list(df.columns) == ["X", "a1", "a1_se", "d", "d_se", "g", "u"]
    ref = pd.read_csv(REF / "lsat7_2pl_items.csv").dropna()
    np.testing.assert_allclose(df["a1_se"], ref[ref.parameter == "a1"].se, rtol=0.02)
    np.testing.assert_allclose(df["d_se"], ref[ref.parameter == "d"].se, rtol=0.02)
    assert list(ItemBank.read(out).metadata.columns) == ["a1_se", "d_se"]


def test_rasch_bank_on_the_n01_scale_with_its_ses(lsat7, tmp_path, capsys):
    out = tmp_path / "r.csv"
    assert main(["calibrate", lsat7, "--freq-column", "freq", "--model", "rasch", "--se",
                 "--format", "mirt", "-o", str(out), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "latent variance SE 0.131" in printed and "(6 parameters, 1000 subjects)" in printed
    df = pd.read_csv(out)
    ref = pd.read_csv(REF / "lsat7_rasch_items.csv").dropna()
    np.testing.assert_allclose(df["d_se"], ref.se, rtol=0.02)   # mirt's d is the 1PL's d
    assert np.ptp(df["a1_se"]) == 0 and df["a1_se"].iloc[0] > 0


def test_anova_command_equals_mirt(lsat7, tmp_path, capsys):
    out = tmp_path / "anova.csv"
    assert main(["anova", lsat7, "--freq-column", "freq", "--model", "rasch", "--model", "2pl",
                 "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "12.192" in printed and "0.016" in printed
    row = next(line for line in printed.splitlines() if line.split()[:1] == ["2pl"])
    assert row.split()[-3:] == ["12.192", "4", "0.016"]   # df a count
    assert printed.splitlines()[-1] == f"wrote {out}"
    got = pd.read_csv(out).set_index("model")
    want = pd.read_csv(REF / "anova_lsat7_rasch_2pl.csv").set_index("model")
    pd.testing.assert_index_equal(got.columns, want.columns)
    np.testing.assert_allclose(got[["AIC", "SABIC", "HQ", "BIC", "logLik"]],
                               want[["AIC", "SABIC", "HQ", "BIC", "logLik"]], atol=0.05)
    assert got.loc["2pl", "df"] == 4
    assert main(["anova", lsat7, "--freq-column", "freq", "--model", "2pl", "--model", "rasch",
                 "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["model"] for r in rows] == ["rasch", "2pl"] and rows[0]["X2"] is None


@pytest.mark.parametrize("argv,needle", [
    (["--model", "2pl"], "two or more different --model"),
    (["--model", "2pl", "--model", "2pl"], "two or more different --model"),
    (["--model", "2pl", "--model", "5pl"], "'5pl'"),
    (["--model", "rasch", "--model", "1pl"], "same number of parameters"),
])
def test_anova_bad_input_one_line(lsat7, capsys, argv, needle):
    assert main(["anova", lsat7, "--freq-column", "freq", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1


def test_calibrate_se_bad_input_one_line(lsat7, tmp_path, capsys):
    assert main(["calibrate", lsat7, "--freq-column", "freq", "--model", "2pl", "--se",
                 "--partition-size", "2", "-o", str(tmp_path / "b.csv")]) == 2
    err = capsys.readouterr().err.strip()
    assert "joint calibration" in err and len(err.splitlines()) == 1
    frac = tmp_path / "frac.csv"
    rng = np.random.default_rng(0)
    pd.DataFrame(rng.integers(0, 3, (60, 4)) / 2.0, columns=list("abcd"),
                 index=[f"m{i}" for i in range(60)]).rename_axis("subject").to_csv(frac)
    assert main(["calibrate", str(frac), "--model", "2pl", "--se", "-o",
                 str(tmp_path / "f.csv"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert "integer category responses" in err and len(err.splitlines()) == 1


def test_graded_se_mirt_format_equals_mirt(tmp_path, capsys):
    out, summ = tmp_path / "g.csv", tmp_path / "g.json"
    assert main(["calibrate", str(REF / "science.csv"), "--model", "graded", "--se",
                 "--format", "mirt", "-o", str(out), "--summary", str(summ), "--quiet"]) == 0
    assert "(16 parameters, 392 subjects)" in capsys.readouterr().out
    df = pd.read_csv(out)
    assert list(df.columns[2:10]) == ["a1", "a1_se", "d1", "d1_se", "d2", "d2_se", "d3", "d3_se"]
    ref = pd.read_csv(REF / "science_graded_items.csv")
    for p in ("a1", "d1", "d2", "d3"):
        np.testing.assert_allclose(df[f"{p}_se"], ref[ref.parameter == p].se, rtol=0.02)
    s = json.loads(summ.read_text())
    fit = json.loads((REF / "science_graded_fit.json").read_text())
    for k in ("aic", "bic", "sabic", "hq"):
        assert s[k] == pytest.approx(fit[k.upper()], abs=0.05)


def test_anova_of_ordinal_models(lsat7, capsys):
    sci = str(REF / "science.csv")   # not nested: the criteria side by side, no LR test
    assert main(["anova", sci, "--model", "graded", "--model", "gpcm", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    fit = json.loads((REF / "science_graded_fit.json").read_text())
    assert rows[0]["model"] == "graded" and rows[0]["AIC"] == pytest.approx(fit["AIC"], abs=0.05)
    assert all(r["X2"] is None and r["df"] is None for r in rows)
    assert main(["anova", sci, "--model", "graded", "--model", "gpcm"]) == 0
    assert "not nested: no likelihood-ratio test" in capsys.readouterr().out
    # binary items are graded items with two categories: the same LR test as rasch vs 2pl
    assert main(["anova", lsat7, "--freq-column", "freq", "--model", "rasch", "--model",
                 "graded", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[1]["X2"] == pytest.approx(12.1916, abs=0.01) and rows[1]["df"] == 4


def test_partial_credit_anova_and_bank_as_mirt(tmp_path, capsys):
    """--model pcm (mirt's Rasch of ratings): its bank on N(0, 1) (a1 = sigma with its SE from
    the variance's), 13 parameters; atlas anova --model pcm --model gpcm tests it as mirt."""
    sci = str(REF / "science.csv")
    out = tmp_path / "pcm.csv"
    assert main(["calibrate", sci, "--model", "pcm", "--se", "--format", "mirt", "-o",
                 str(out), "--quiet"]) == 0
    text = capsys.readouterr().out
    assert "(pcm, 4-4 categories)" in text and "(13 parameters, 392 subjects)" in text
    df = pd.read_csv(out)
    fit = json.loads((REF / "science_pcm_fit.json").read_text())
    sigma = np.sqrt(fit["latent_variance"])
    np.testing.assert_allclose(df["a1"], sigma, rtol=1e-3)
    assert df["a1_se"].iloc[0] == pytest.approx(fit["latent_variance_se"] / (2 * sigma), rel=0.02)
    assert set(df["model"]) == {"pcm"}     # the bank says what it is: GPCM items of one slope
    assert main(["anova", sci, "--model", "pcm", "--model", "gpcm", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    want = pd.read_csv(REF / "anova_science_pcm_gpcm.csv").set_index("model")
    assert [r["model"] for r in rows] == ["pcm", "gpcm"] and rows[1]["df"] == 3
    assert rows[1]["X2"] == pytest.approx(want.loc["gpcm", "X2"], abs=0.02)
    assert rows[0]["AIC"] == pytest.approx(want.loc["pcm", "AIC"], abs=0.05)


def test_partial_credit_on_answers_is_the_rasch_model_nested_in_the_2pl(lsat7, capsys):
    """On 0/1 answers the partial credit model is the Rasch model: anova(pcm, 2pl) is mirt's
    anova(rasch, 2pl) on LSAT7 (X2 12.19 on 4 df)."""
    assert main(["anova", lsat7, "--freq-column", "freq", "--model", "pcm", "--model", "2pl",
                 "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    want = pd.read_csv(REF / "anova_lsat7_rasch_2pl.csv").set_index("model")
    assert rows[0]["logLik"] == pytest.approx(want.loc["rasch", "logLik"], abs=1e-3)
    assert rows[1]["X2"] == pytest.approx(want.loc["2pl", "X2"], abs=0.01) and rows[1]["df"] == 4
