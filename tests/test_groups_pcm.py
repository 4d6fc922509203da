"""Multiple-group calibration of the partial credit model (``calibrate(..., "pcm", groups=...)``,
mirt's ``"Rasch"`` of ordinal items: every slope 1, the reference group's latent variance
estimated, the other groups' means and variances too) against mirt 1.45.1's
``multipleGroup(..., itemtype = "Rasch", invariance = c("free_means", "free_var", items))``
(tests/data/mirt_groups/make_reference_pcm.R, on make_reference_graded.R's ratings: 2000
subjects, 10 items of 4 categories, group B ~ N(0.8, 1.2^2)): the fit, its standard errors,
``atlas calibrate / score / anova / fit --groups`` on it."""
from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from atlascat.irt.calibrate import calibrate

from cli_checks import run_cli
from mirt_groups_data import DATA, read_answers

RATINGS = DATA / "ordinal_responses.csv"
GROUPS = DATA / "ordinal_groups.csv"


@pytest.fixture(scope="module")
def data():
    return read_answers("ordinal_")


@pytest.fixture(scope="module")
def fit(data):
    x, g = data
    return calibrate(x, "pcm", groups=g, tol=1e-6, se=True, check_dimensions=False)


def _ref():
    return pd.read_csv(DATA / "pcm_ord_fit.csv").iloc[0]


def test_pcm_multiple_group_fit_is_mirts(fit):
    ref, items = _ref(), pd.read_csv(DATA / "pcm_ord_items.csv")
    assert fit.converged and fit.model == "pcm"
    assert fit.loglik == pytest.approx(ref.loglik, abs=1e-6)      # 1.0e-7 here
    assert list(fit.bank.item_ids) == list(items.item_id)
    # mirt's d1..d3 (slopes 1 on N(0, var_A)); the bank on A's N(0, 1): every a = sd_A
    d = items[["d1", "d2", "d3"]].to_numpy()
    assert np.max(np.abs(fit.bank.params[:, 1:] - d)) < 1e-4           # 6.4e-5
    assert fit.latent_variance == pytest.approx(ref.var_A, abs=1e-6)     # 2.0e-7
    assert np.allclose(fit.bank.params[:, 0], np.sqrt(fit.latent_variance), rtol=1e-12)
    g = {row["group"]: row for row in fit.groups["groups"]}
    assert fit.groups["reference"] == "A" and g["A"]["mean"] == 0.0 and g["A"]["sd"] == 1.0
    sd_a = np.sqrt(fit.latent_variance)          # the groups on the bank's scale: / sd_A
    assert g["B"]["mean"] * sd_a == pytest.approx(ref.mean_B, abs=2e-5)      # 6.7e-6
    assert (g["B"]["sd"] * sd_a) ** 2 == pytest.approx(ref.var_B, abs=2e-6)   # 3.1e-7
    # 30 intercepts, A's variance, B's mean and variance (mirt's 33)
    assert fit.n_parameters == 33
    assert fit.g2 is None


def test_pcm_multiple_group_standard_errors_are_mirts(fit):
    ref = pd.read_csv(DATA / "pcm_ord_se.csv").set_index("item_id")
    se = fit.se.frame()                              # mirt's d1..d3, fitted scale
    items = ref.drop(index=["GroupPars_A", "GroupPars_B"])
    cols = ["d1_se", "d2_se", "d3_se"]
    rel = np.abs(se[cols].to_numpy() / items[["d1", "d2", "d3"]].to_numpy() - 1)
    assert np.max(rel) < 1e-4                        # 2.2e-5
    grp = fit.se.group_frame("fitted").set_index("group")    # mirt's COV_11, MEAN_1: 1e-6
    assert grp.loc["A", "var_se"] == pytest.approx(ref.loc["GroupPars_A", "d1"], rel=1e-5)
    assert fit.se.latent_variance_se == pytest.approx(ref.loc["GroupPars_A", "d1"], rel=1e-5)
    assert grp.loc["B", "mean_se"] == pytest.approx(ref.loc["GroupPars_B", "d1"], rel=1e-5)
    assert grp.loc["B", "var_se"] == pytest.approx(ref.loc["GroupPars_B", "d2"], rel=1e-5)
    # the summary's on the bank's scale (the reference N(0, 1)), by the delta method
    b = fit.groups["groups"][1]
    assert b["mean_se"] is not None and b["var_se"] is not None and b["sd_se"] is not None
    assert b["var"] == pytest.approx(b["sd"] ** 2, rel=1e-12)


def test_pcm_groups_with_the_other_reference_is_the_same_model(data, fit):
    x, g = data
    res = calibrate(x, "pcm", groups=g, reference_group="B", tol=1e-6, check_dimensions=False)
    ref = _ref()
    rows = {r["group"]: r for r in res.groups["groups"]}
    assert res.groups["reference"] == "B" and rows["B"]["mean"] == 0.0
    assert res.latent_variance == pytest.approx(ref.var_B, abs=1e-4)
    assert rows["A"]["mean"] == pytest.approx(-ref.mean_B / np.sqrt(ref.var_B), abs=2e-4)
    assert rows["A"]["sd"] == pytest.approx(np.sqrt(ref.var_A / ref.var_B), abs=2e-4)
    assert res.loglik == pytest.approx(ref.loglik, abs=1e-4)


def test_pcm_groups_of_right_wrong_items_is_mirts_rasch_groups():
    """Items of two categories: the partial credit model is the Rasch model (make_reference.R's
    multipleGroup Rasch fit)."""
    x, g = read_answers()
    res = calibrate(x, "pcm", groups=g, tol=1e-6, check_dimensions=False)
    ref = pd.read_csv(DATA / "rasch_fit.csv").iloc[0]
    assert res.loglik == pytest.approx(ref.loglik, abs=1e-4)
    assert res.latent_variance == pytest.approx(ref.var_A, abs=1e-4)
    b = res.groups["groups"][1]
    assert b["mean"] * np.sqrt(ref.var_A) == pytest.approx(ref.mean_B, abs=1e-4)


def test_atlas_calibrate_and_score_pcm_groups(tmp_path, capsys, fit):
    bank, summ, scores = tmp_path / "bank.csv", tmp_path / "s.json", tmp_path / "sc.csv"
    assert run_cli(["calibrate", RATINGS, "-o", bank, "--model", "pcm", "--tol", "1e-6",
                    "--groups", GROUPS, "--summary", summ, "--se", "--quiet"]) == 0
    out = capsys.readouterr().out
    ref = _ref()
    assert re.search(r"group B: 1000 subjects, latent mean 0\.766 \(SE 0\.06\d\), SD 1\.216", out)
    assert "latent variance SE 0.0230" in out                # mirt's COV_11 SE of group A
    info = json.loads(summ.read_text())
    assert info["model"] == "pcm" and info["loglik"] == pytest.approx(ref.loglik, abs=1e-5)
    assert run_cli(["score", RATINGS, "--bank", bank, "--groups", GROUPS, "--summary", summ,
                    "-o", scores]) == 0
    df = pd.read_csv(scores)
    assert list(df.group.unique()) == ["A", "B"]
    # the calibration's own scores: each subject's EAP under its group's prior
    assert np.max(np.abs(df.theta.to_numpy() - fit.theta)) < 1e-6


def test_anova_of_the_stacked_and_the_grouped_pcm_is_mirts(tmp_path):
    out = tmp_path / "t.csv"
    assert run_cli(["anova", RATINGS, "--model", "pcm", "--groups", GROUPS, "-o", out]) == 0
    ours = pd.read_csv(out, index_col=0)
    assert list(ours.index) == ["pcm", "pcm-groups"]
    ref = pd.read_csv(DATA / "pcm_ord_anova.csv", index_col=0)
    for col in ("AIC", "SABIC", "HQ", "BIC", "logLik"):
        assert ours[col].to_numpy() == pytest.approx(ref[col].to_numpy(), abs=2e-3), col
    assert ours.iloc[1]["X2"] == pytest.approx(ref.iloc[1]["X2"], abs=2e-3)
    assert ours.iloc[1]["df"] == 2        # B's mean and variance (mirt prints -1048573)


def _mirt_bank():
    """mirt's grouped PCM as a bank on its own scale (a = 1) and its groups' priors (A's
    N(0, var_A)): its grid, mirt's. (On A's N(0, 1), a = sd_A, the same model on a grid
    1 / sd_A as fine: M2* 1.2e-6 relative from mirt's, S-X2 1e-9.)"""
    from atlascat.irt.polybank import PolyBank

    items, ref = pd.read_csv(DATA / "pcm_ord_items.csv"), _ref()
    params = np.column_stack([np.ones(len(items)), items[["d1", "d2", "d3"]].to_numpy()])
    return PolyBank(items.item_id, params, "gpcm"), \
        {"A": (0.0, float(np.sqrt(ref.var_A))), "B": (ref.mean_B, float(np.sqrt(ref.var_B)))}


def test_sx2_within_each_group_of_a_pcm_bank_is_mirts_itemfit():
    from atlascat.irt.groupfit import sx2_groups

    ratings = pd.read_csv(RATINGS, index_col=0)
    groups = pd.read_csv(GROUPS, index_col=0)["group"]
    bank, priors = _mirt_bank()
    ours = sx2_groups(ratings, bank, groups, priors, pcm=True)
    ref = pd.read_csv(DATA / "pcm_ord_sx2.csv")
    assert ours["item_id"].tolist() == ref["item"].tolist()
    # A: the intercepts and A's variance; B: the intercepts, B's mean and variance
    assert ours["df_S_X2"].tolist() == ref["df.S_X2"].tolist()
    for a, b in (("S_X2", "S_X2"), ("RMSEA_S_X2", "RMSEA.S_X2"), ("p_S_X2", "p.S_X2")):
        assert ours[a].to_numpy() == pytest.approx(ref[b].to_numpy(), rel=1e-9, abs=1e-12), a
    gpcm = sx2_groups(ratings, bank, groups, priors)          # as a GPCM bank: B's 1 fewer
    b = (gpcm.group == "B").to_numpy()
    assert (gpcm.df_S_X2[b] == ours.df_S_X2[b] - 1).all()


@pytest.mark.parametrize("kind", ["M2*", "C2"])
def test_m2_of_a_pcm_multiple_group_fit_is_mirts(kind):
    from atlascat.irt.groupfit import m2_ordinal_groups

    ratings = pd.read_csv(RATINGS, index_col=0)
    groups = pd.read_csv(GROUPS, index_col=0)["group"]
    bank, priors = _mirt_bank()
    got = m2_ordinal_groups(ratings, bank, groups, priors, statistic=kind, pcm=True,
                            group_delta=False)
    ref = pd.read_csv(DATA / f"pcm_ord_{'m2' if kind == 'M2*' else 'c2'}.csv").iloc[0]
    assert got["df"] == ref.df                      # 77 / 117: 33 parameters, not 42
    assert got["M2"] == pytest.approx(ref.M2, rel=1e-9)
    assert got["p"] == pytest.approx(ref.p, rel=1e-8, abs=1e-15)   # mirt: C2 p 0 (1 - F)
    assert got["RMSEA"] == pytest.approx(ref.RMSEA, abs=1e-10)
    for g in ("A", "B"):
        assert got["SRMSR"][g] == pytest.approx(ref[f"SRMSR.{g}"], abs=1e-12)
    # mirt's null intercepts stop at its EM tolerance (1e-4): C2's TLI / CFI 1e-5 off
    assert got["TLI"] == pytest.approx(ref.TLI, abs=3e-5)
    assert got["CFI"] == pytest.approx(ref.CFI, abs=3e-5)
    # A's variance and B's mean and variance in Delta too (the default): M2 a little smaller
    full = m2_ordinal_groups(ratings, bank, groups, priors, statistic=kind, pcm=True)
    assert full["df"] == got["df"] and got["M2"] * (1 - 3e-2) < full["M2"] <= got["M2"]


def test_atlas_fit_groups_on_a_pcm_bank_counts_its_parameters(tmp_path):
    bank, summ, out = tmp_path / "b.csv", tmp_path / "s.json", tmp_path / "f.json"
    assert run_cli(["calibrate", RATINGS, "--model", "pcm", "--groups", GROUPS, "--tol",
                    "1e-6", "--summary", summ, "-o", bank, "--quiet"]) == 0
    assert run_cli(["fit", RATINGS, "--bank", bank, "--groups", GROUPS, "--summary", summ,
                    "-o", out]) == 0
    report = json.loads(out.read_text())
    m2 = pd.read_csv(DATA / "pcm_ord_m2.csv").iloc[0]
    assert report["model"] == "pcm" and report["statistic"] == "M2*" and report["df"] == m2.df
    assert report["M2"] == pytest.approx(m2.M2, rel=3e-2)    # Delta with the groups' columns
    items = pd.DataFrame(report["items"])
    ref = pd.read_csv(DATA / "pcm_ord_sx2.csv")
    assert items["df_S_X2"].tolist() == ref["df.S_X2"].tolist()
    assert items["S_X2"].to_numpy() == pytest.approx(ref["S_X2"].to_numpy(), abs=0.01)


def test_atlas_items_groups_on_a_pcm_bank_sums_mirts_itemfit(tmp_path, capsys):
    from atlascat.studies.item_quality import item_quality

    ratings = pd.read_csv(RATINGS, index_col=0)
    groups = pd.read_csv(GROUPS, index_col=0)["group"]
    bank, priors = _mirt_bank()
    q = item_quality(bank, ratings, groups=groups, priors=priors, pcm=True)
    ref = pd.read_csv(DATA / "pcm_ord_sx2.csv").groupby("item", sort=False)
    assert q["df_S_X2"].tolist() == ref["df.S_X2"].sum().loc[q.item_id].tolist()
    assert q["S_X2"].to_numpy() == pytest.approx(ref["S_X2"].sum().loc[q.item_id].to_numpy(),
                                                 rel=1e-9)
    # the command reads "pcm" from the summary (it passed the groups' keywords on, no pcm)
    bk, summ, out = tmp_path / "b.csv", tmp_path / "s.json", tmp_path / "q.csv"
    assert run_cli(["calibrate", RATINGS, "--model", "pcm", "--groups", GROUPS, "--summary",
                    summ, "-o", bk, "--quiet"]) == 0
    assert run_cli(["items", RATINGS, "--bank", bk, "--groups", GROUPS, "--summary", summ,
                    "-o", out]) == 0
    assert pd.read_csv(out)["df_S_X2"].tolist() == q["df_S_X2"].tolist()
