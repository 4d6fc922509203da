"""A mirt user's walk through atlas: what differed from mirt 1.45.1 and is fixed here.

References: tests/data/mirt_walk/, made by its make_reference.R (mirt's LSAT7 and Science)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import atlascat as at

DATA = Path(__file__).parent / "data" / "mirt_walk"


@pytest.fixture(scope="module")
def lsat7():
    return at.ResponseMatrix.read(DATA / "lsat7_patterns.csv", freq_column="freq")


def test_anova_of_a_fit_with_priors_is_mirts_logpost_and_df_without_a_test(lsat7):
    """mirt's anova(rasch, 2PL with an lnorm(0, 1) prior on a1): a posterior mode is no
    maximum-likelihood fit, so mirt gives logPost (log-likelihood + log prior) and df, no X2 or
    p; atlas gave X2 12.08, p 0.017 (a warning aside) and no logPost."""
    ref = pd.read_csv(DATA / "anova_prior.csv").set_index("model")
    rasch = at.calibrate(lsat7, "rasch", tol=1e-6)
    twopl = at.calibrate(lsat7, "2pl", prior_a="lognorm(0,1)", tol=1e-6)
    table = at.anova(rasch, twopl)
    assert list(table.columns) == list(ref.columns)           # AIC SABIC HQ BIC logLik logPost df
    np.testing.assert_allclose(table.to_numpy(float), ref.to_numpy(float), atol=2e-4)
    assert np.isnan(table.loc["rasch", "df"]) and table.loc["2pl", "df"] == 4
    ml = at.anova(rasch, at.calibrate(lsat7, "2pl", prior_a=None, tol=1e-6))
    assert "logPost" not in ml.columns and ml.loc["2pl", "X2"] == pytest.approx(12.1916, abs=1e-3)


def _expanded(tmp_path) -> Path:
    """LSAT7 one row per subject (mirt's expand.table(LSAT7)), with subject ids."""
    tab = pd.read_csv(DATA / "lsat7_patterns.csv")
    rows = tab.loc[tab.index.repeat(tab.pop("freq"))].reset_index(drop=True)
    rows.index = [f"s{i}" for i in range(len(rows))]
    path = tmp_path / "lsat7_expanded.csv"
    rows.rename_axis("subject").to_csv(path)
    return path


def test_a_pattern_table_without_freq_column_names_the_option(tmp_path, capsys):
    """mirt's LSAT7 as its pattern table, read without --freq-column: the error said the
    counts (0-308) were ratings to fit with the graded model; it names --freq-column freq."""
    from atlascat.cli import main

    named = tmp_path / "named.csv"     # R's write.csv(as.data.frame(LSAT7)): row names first
    pd.read_csv(DATA / "lsat7_patterns.csv").rename_axis("pattern").to_csv(named)
    for table in (str(DATA / "lsat7_patterns.csv"), str(named)):
        for argv in (["calibrate", table, "-o", str(tmp_path / "b.csv")], ["info", table],
                     ["score", table, "--bank", "paper-arc", "-o", str(tmp_path / "s.csv")]):
            assert main(argv) == 2
            err = capsys.readouterr().err.strip()
            assert len(err.splitlines()) == 1 and "--freq-column freq" in err, argv
            assert "graded" not in err
        with pytest.raises(at.ResponseDataError, match="freq_column='freq'"):
            at.ResponseMatrix.read(table)


def test_info_reads_a_pattern_table_with_freq_column(tmp_path, capsys):
    """atlas info --freq-column freq: the pattern table described as its 1000 subjects, as
    the expanded matrix is (atlas info had no --freq-column and called it a 6-item ratings
    matrix of 32 subjects, levels 0-308)."""
    import json

    from atlascat.cli import main

    assert main(["info", str(DATA / "lsat7_patterns.csv"), "--freq-column", "freq",
                 "--json"]) == 0
    table = json.loads(capsys.readouterr().out)
    assert main(["info", str(_expanded(tmp_path)), "--json"]) == 0
    full = json.loads(capsys.readouterr().out)
    assert table["subjects"] == full["subjects"] == 1000 and table["patterns"] == 32
    for key in ("items", "binary", "mean_score_quantiles", "items_per_subject",
                "item_mean_quantiles"):
        assert table[key] == full[key], key


def test_link_of_banks_whose_ids_differ_by_rs_x_names_normalize_ids(tmp_path, capsys):
    """A bank written from R (ids X1..X5) and one from atlas (1..5): atlas link said only that
    they share 0 items; the one line now says they share 5 without R's X and names
    --normalize-ids, with which the link runs (A = 1, B = 0 on the same parameters)."""
    from atlascat.cli import main

    a, b = np.array([1.0, 1.2, 0.8, 1.5, 0.9]), np.array([-1.0, -0.5, 0.0, 0.5, 1.2])
    at.ItemBank([f"X{i}" for i in range(1, 6)], a, b).write(tmp_path / "ref.csv")
    at.ItemBank([str(i) for i in range(1, 6)], a, b).write(tmp_path / "new.csv")
    argv = ["link", str(tmp_path / "ref.csv"), str(tmp_path / "new.csv"),
            "-o", str(tmp_path / "linked.csv")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "share 5" in err and "--normalize-ids" in err
    assert main(argv + ["--normalize-ids", "--json"]) == 0


@pytest.mark.parametrize("data,model", [("lsat7", "rasch"), ("lsat7", "2pl"), ("lsat7", "3pl"),
                                        ("science", "graded"), ("science", "gpcm"),
                                        ("science", "pcm")])
def test_g2_of_the_pattern_table_is_mirts(lsat7, data, model):
    """mirt prints every fit's G2 (df) = ..., p, RMSEA on the table of response patterns
    (extract.mirt(mod, "G2")); atlas had no such figure. LSAT7 2PL: G2 (21) = 31.70,
    p = 0.0628, RMSEA = 0.023."""
    ref = pd.read_csv(DATA / "g2.csv").set_index(["data", "model"]).loc[(data, model)]
    if data == "lsat7":
        res = at.calibrate(lsat7, model, prior_a=None, prior_c=None, tol=1e-6)
    else:
        res = at.calibrate(DATA / "science.csv", model, tol=1e-6)
    got = res.g2
    assert got["g2_df"] == ref["df"]
    assert got["g2"] == pytest.approx(ref["G2"], abs=2e-3)
    assert got["g2_p"] == pytest.approx(ref["p"], abs=1e-4)
    assert got["g2_rmsea"] == pytest.approx(ref["RMSEA"], abs=1e-4)
    assert res.to_dict()["g2"] == got["g2"]


def test_g2_is_left_out_with_missing_answers_and_printed_by_calibrate(lsat7, tmp_path, capsys):
    """As mirt (G2 NaN with a missing answer), no G2 when a cell is blank; atlas calibrate
    prints mirt's line and --summary keeps g2, g2_df, g2_p, g2_rmsea."""
    import json

    from atlascat.cli import main

    values = lsat7.values.copy()
    values[0, 0] = np.nan
    holed = at.ResponseMatrix(values, lsat7.subject_ids, lsat7.item_ids, weights=lsat7.weights)
    assert at.calibrate(holed, "2pl", prior_a=None).g2 is None
    from atlascat.irt.gsquare import g2    # past mirt's 1e10-cell cap (34 items): none either
    assert g2(np.zeros((3, 34)), None, np.zeros((34, 5, 2)), np.zeros(5), [2] * 34, 68) is None
    assert main(["calibrate", str(DATA / "lsat7_patterns.csv"), "--freq-column", "freq",
                 "--model", "2pl", "--prior-a", "none", "-o", str(tmp_path / "b.csv"),
                 "--summary", str(tmp_path / "s.json")]) == 0
    assert "G2 (21) = 31.70" in capsys.readouterr().out
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["g2_df"] == 21 and summary["g2_p"] == pytest.approx(0.06276, abs=1e-4)


@pytest.mark.parametrize("method", ["eap", "ml"])
def test_score_of_a_pattern_table_says_the_subjects_median_se(lsat7, tmp_path, capsys, method):
    """atlas score --freq-column: "1000 subjects (32 response patterns), median SE 0.6785" was
    the median over the 32 patterns; over the 1000 subjects (the expanded matrix) it is 0.7410,
    and the ML count of non-finite SEs is of subjects too (320, not 2)."""
    from atlascat.cli import main

    bank = tmp_path / "bank.csv"
    at.calibrate(lsat7, "2pl", prior_a=None).bank.write(bank)
    lines = []
    for argv in (["score", str(DATA / "lsat7_patterns.csv"), "--freq-column", "freq"],
                 ["score", str(_expanded(tmp_path))]):
        assert main(argv + ["--bank", str(bank), "--method", method,
                            "-o", str(tmp_path / "s.csv")]) == 0
        lines.append(capsys.readouterr().out.strip().splitlines()[-1])
    assert lines[0].split(", median SE")[1] == lines[1].split(", median SE")[1]
    assert lines[0].startswith("1000 subjects (32 response patterns)")


def test_a_graded_bank_from_mirts_coef_table_is_read_and_asks_for_its_levels(tmp_path, capsys):
    """write.csv(coef(mod, simplify = TRUE)$items) of a graded fit: the item ids are R's row
    names (an unnamed first column), which the binary reader took and the ordinal one refused
    ("no item id column"); read, its categories are 0..K-1 until a 'levels' column says the
    Science ratings are 1-4: a 4 is refused naming that column, and with it the EAPs are
    mirt's fscores."""
    from atlascat.cli import main

    coef = DATA / "science_graded_coef.csv"
    bank = at.PolyBank.read(coef)
    assert bank.levels_assumed and len(bank) == 4 and list(bank.item_ids)[0] == "Comfort"
    out = str(tmp_path / "s.csv")
    assert main(["score", str(DATA / "science.csv"), "--bank", str(coef), "-o", out]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "'levels' column" in err
    table = pd.read_csv(coef)
    table["levels"] = "1;2;3;4"
    table.to_csv(tmp_path / "coef_levels.csv", index=False)
    assert main(["score", str(DATA / "science.csv"), "--bank",
                 str(tmp_path / "coef_levels.csv"), "-o", out]) == 0
    got, ref = pd.read_csv(out), pd.read_csv(DATA / "science_graded_eap.csv")
    np.testing.assert_allclose(got["theta"], ref["F1"], atol=1e-5)
    np.testing.assert_allclose(got["se"], ref["SE_F1"], atol=1e-5)


def test_mirts_lnorm_prior_name_is_the_lognormal(lsat7):
    """mirt writes the slope's log-normal prior `lnorm` (PRIOR = (1-5, a1, lnorm, 0, 1));
    prior_a="lnorm(0,1)" (CLI --prior-a 'lnorm(0,1)') was refused as unparsable. It is
    lognorm(0,1): mirt's logLik and logPost of that fit (anova_prior.csv)."""
    ref = pd.read_csv(DATA / "anova_prior.csv").set_index("model").loc["2pl"]
    fit = at.calibrate(lsat7, "2pl", prior_a="lnorm(0,1)", tol=1e-6)
    same = at.calibrate(lsat7, "2pl", prior_a="lognorm(0,1)", tol=1e-6)
    np.testing.assert_allclose(fit.bank.a, same.bank.a, rtol=0, atol=0)
    assert fit.loglik == pytest.approx(ref["logLik"], abs=1e-4)
    assert fit.log_posterior == pytest.approx(ref["logPost"], abs=1e-4)


def test_person_fit_has_mirts_infit_and_outfit():
    """mirt's personfit(mod) gives outfit, z.outfit, infit, z.infit and Zh; fit.person_fit gave
    lz (= Zh) and lz* only. On LSAT7's 2PL at the MAP theta all five are mirt's."""
    from atlascat.irt import fit

    ref = pd.read_csv(DATA / "lsat7_personfit.csv")
    bank = at.ItemBank.read(DATA / "lsat7_2pl_coef.csv")
    rm = at.ResponseMatrix(ref.iloc[:, :5].to_numpy(float),
                           [f"p{i}" for i in range(len(ref))], list(bank.item_ids))
    got = fit.person_fit(rm, bank, method="map")
    np.testing.assert_allclose(got["theta"], ref["theta"], atol=1e-5)
    for ours, theirs in (("lz", "Zh"), ("outfit", "outfit"), ("z_outfit", "z.outfit"),
                         ("infit", "infit"), ("z_infit", "z.infit")):
        np.testing.assert_allclose(got[ours], ref[theirs], atol=1e-4, err_msg=ours)


@pytest.mark.parametrize("model", ["2pl", "graded"])
def test_calibrate_format_mirt_names_the_id_column_x_for_every_model(tmp_path, model):
    """atlas calibrate --format mirt wrote a binary bank's ids under R's "X" but a graded one's
    under "item_id"; both now "X" (as R's write.csv, as the readers take mirt's), and a graded
    bank written with "item_id" before still loads."""
    from atlascat.cli import main
    from atlascat.irt.polybank import PolyBank

    src = DATA / ("lsat7_patterns.csv" if model == "2pl" else "science.csv")
    extra = ["--freq-column", "freq"] if model == "2pl" else []
    out = tmp_path / "bank.csv"
    assert main(["calibrate", str(src), *extra, "--model", model, "--format", "mirt",
                 "-o", str(out), "--quiet"]) == 0
    assert pd.read_csv(out).columns[0] == "X"
    if model == "graded":
        old = tmp_path / "old.csv"
        pd.read_csv(out).rename(columns={"X": "item_id"}).to_csv(old, index=False)
        assert list(PolyBank.read(old).item_ids) == list(PolyBank.read(out).item_ids)


def test_fit_person_fit_prints_and_writes_mirts_outfit_and_infit(lsat7, tmp_path, capsys):
    """atlas fit --person-fit printed only lz*; person_fit has mirt's outfit, z_outfit, infit,
    z_infit: lines for each and, in the -o report, the columns of the lowest subjects; the
    summaries are over LSAT7's 1000 subjects, not its 32 patterns."""
    import json

    from atlascat.cli import main
    from atlascat.irt import fit

    out = tmp_path / "fit.json"
    assert main(["fit", str(DATA / "lsat7_patterns.csv"), "--freq-column", "freq", "--bank",
                 str(DATA / "lsat7_2pl_coef.csv"), "--no-items", "--person-fit",
                 "-o", str(out)]) == 0
    text = capsys.readouterr().out
    pf = json.loads(out.read_text())["person_fit"]
    frame = fit.person_fit(lsat7, at.ItemBank.read(DATA / "lsat7_2pl_coef.csv"), method="wle")
    w = lsat7.weights
    for name in ("outfit", "infit"):
        ok = np.isfinite(frame[name])
        assert pf[f"{name}_mean"] == pytest.approx(np.average(frame[name][ok], weights=w[ok]))
        assert f"person fit {name}: mean {pf[f'{name}_mean']:.3f}" in text
    assert {"outfit", "z_outfit", "infit", "z_infit"} <= set(pf["lowest"][0])
    ok = np.isfinite(frame["lz_star"])
    assert pf["mean"] == pytest.approx(np.average(frame["lz_star"][ok], weights=w[ok]))


def test_score_takes_quiet_as_calibrate_does(lsat7, tmp_path, capsys):
    """atlas calibrate had -q/--quiet, atlas score not ("No such option"): with it the score
    table is not printed, the result line (the subjects' median SE) is, and -o still writes."""
    from atlascat.cli import main

    bank = str(DATA / "lsat7_2pl_coef.csv")
    argv = ["score", str(DATA / "lsat7_patterns.csv"), "--freq-column", "freq", "--bank", bank]
    assert main(argv) == 0
    loud = capsys.readouterr().out
    assert main(argv + ["-q"]) == 0
    quiet = capsys.readouterr().out
    assert "theta by EAP" in loud and "theta by EAP" not in quiet
    assert quiet.strip().splitlines()[-1] == loud.strip().splitlines()[-1]
    assert main(argv + ["--quiet", "-o", str(tmp_path / "s.csv")]) == 0
    assert len(pd.read_csv(tmp_path / "s.csv")) == 32 and "wrote 32 scores" in capsys.readouterr().out


def test_g2_of_a_sparse_table_says_to_read_m2(tmp_path, capsys):
    """20 0/1 items and 300 subjects: 2^20 cells, most never seen, so G2's p is near 1 whatever
    the fit; atlas calibrate printed "G2 (1.04854e+06) = ..., p = 1" as if it were a test."""
    from atlascat.cli import main

    rng = np.random.default_rng(7)
    theta = rng.normal(size=(300, 1))
    b = np.linspace(-1.5, 1.5, 20)
    y = (rng.random((300, 20)) < 1 / (1 + np.exp(-(theta - b)))).astype(int)
    pd.DataFrame(y, columns=[f"i{j}" for j in range(20)],
                 index=pd.Index([f"m{i}" for i in range(300)], name="model")).to_csv(tmp_path / "y.csv")
    assert main(["calibrate", str(tmp_path / "y.csv"), "--model", "2pl",
                 "-o", str(tmp_path / "b.csv")]) == 0
    out = capsys.readouterr().out
    assert "G2 (1048535) = " in out and "e+06" not in out
    assert "sparse, more cells than subjects: p says nothing, read M2 in atlas fit" in out
