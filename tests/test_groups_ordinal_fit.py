"""The comparison and item fit of multiple-group graded and GPCM calibrations against mirt
1.45.1 (tests/data/mirt_groups/make_fit_reference_graded.R): ``atlas anova --model graded
--groups`` as ``anova(mirt(X, 1, itemtype), multipleGroup(...))`` and S-X2 within each group
(:func:`atlascat.irt.groupfit.sx2_groups` on an ordinal bank, ``atlas fit --groups``) as
``itemfit(multipleGroup(...))``."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from cli_checks import one_line_error, run_cli

DATA = Path(__file__).parent / "data" / "mirt_groups"
RATINGS = DATA / "ordinal_responses.csv"
GROUPS = DATA / "ordinal_groups.csv"


@pytest.mark.parametrize("model", ["graded", "gpcm"])
def test_anova_of_the_stacked_and_the_grouped_ordinal_fit_is_mirts(tmp_path, model):
    out = tmp_path / "t.csv"
    assert run_cli(["anova", RATINGS, "--model", model, "--groups", GROUPS, "-o", out]) == 0
    ours = pd.read_csv(out, index_col=0)
    assert list(ours.index) == [model, f"{model}-groups"]
    ref = pd.read_csv(DATA / f"{model}_ord_anova.csv", index_col=0)   # mirt: stacked, groups
    for col in ("AIC", "SABIC", "HQ", "BIC", "logLik"):
        assert ours[col].to_numpy() == pytest.approx(ref[col].to_numpy(), abs=2e-3), col
    assert ours.iloc[1]["X2"] == pytest.approx(ref.iloc[1]["X2"], abs=2e-3)
    # mirt 1.45.1 prints df -1048573 (its saturated tables' df: one per group), p NaN; the
    # models differ by group B's mean and variance
    assert ours.iloc[1]["df"] == 2 and ours.iloc[1]["p"] < 1e-40


def test_anova_groups_takes_the_pcm_with_the_gpcm(tmp_path):
    """Was refused ("drop --model pcm"); pcm with groups: tests/test_groups_pcm.py."""
    out = tmp_path / "t.csv"
    assert run_cli(["anova", RATINGS, "--model", "pcm", "--model", "gpcm", "--groups", GROUPS,
                    "-o", out]) == 0
    ours = pd.read_csv(out, index_col=0)
    # by their parameters (31, 33, 40, 42); pcm-groups is not nested in the one-group gpcm
    assert list(ours.index) == ["pcm", "pcm-groups", "gpcm", "gpcm-groups"]
    assert "X2" not in ours or ours["X2"].isna().all()
    for model in ("pcm", "gpcm"):
        ref = pd.read_csv(DATA / f"{model}_ord_anova.csv", index_col=0)
        got = ours.loc[[model, f"{model}-groups"], "logLik"].to_numpy()
        assert got == pytest.approx(ref["logLik"].to_numpy(), abs=2e-3)


def _mirt_bank(model):
    """mirt's grouped fit as an ordinal bank (its a1, d1..d3; GPCM's d0 = 0 left out) and its
    groups' priors."""
    import numpy as np

    from atlascat.irt.polybank import PolyBank

    items = pd.read_csv(DATA / f"{model}_ord_items.csv")
    fit = pd.read_csv(DATA / f"{model}_ord_fit.csv").iloc[0]
    bank = PolyBank(items.item_id, items[["a1", "d1", "d2", "d3"]].to_numpy(), model)
    return bank, {"A": (0.0, 1.0), "B": (fit.mean_B, float(np.sqrt(fit.var_B)))}


@pytest.mark.parametrize("model", ["graded", "gpcm"])
def test_sx2_within_each_group_of_an_ordinal_bank_is_mirts_itemfit(model):
    from atlascat.irt.groupfit import sx2_groups

    ratings = pd.read_csv(RATINGS, index_col=0)
    groups = pd.read_csv(GROUPS, index_col=0)["group"]
    bank, priors = _mirt_bank(model)
    ours = sx2_groups(ratings, bank, groups, priors)
    ref = pd.read_csv(DATA / f"{model}_ord_sx2.csv")     # itemfit(multipleGroup(...))
    assert ours["group"].tolist() == ref["group"].tolist()
    assert ours["item_id"].tolist() == ref["item"].tolist()
    # group B's df 2 fewer than a one-group fit's (its latent mean and variance)
    assert ours["df_S_X2"].tolist() == ref["df.S_X2"].tolist()
    for a, b in (("S_X2", "S_X2"), ("RMSEA_S_X2", "RMSEA.S_X2"), ("p_S_X2", "p.S_X2")):
        assert ours[a].to_numpy() == pytest.approx(ref[b].to_numpy(), rel=1e-9, abs=1e-12), a
    assert "n_groups" not in ours                          # the binary tables' column


def test_sx2_groups_of_an_ordinal_bank_needs_labelled_ratings():
    from atlascat.errors import ConfigError
    from atlascat.irt.groupfit import sx2_groups

    bank, priors = _mirt_bank("graded")
    ratings = pd.read_csv(RATINGS, index_col=0).to_numpy()
    with pytest.raises(ConfigError, match="labelled"):
        sx2_groups(ratings, bank, pd.read_csv(GROUPS, index_col=0)["group"], priors)


@pytest.mark.parametrize("model", ["graded", "gpcm"])
@pytest.mark.parametrize("kind", ["M2*", "C2"])
def test_m2_of_an_ordinal_multiple_group_fit_is_mirts(model, kind):
    """mirt 1.45.1's M2(multipleGroup(...), type) at its parameters: its Delta leaves the groups'
    means and variances out (group_delta=False; df counts them) and its null model stacks the
    groups (M2*'s rank-deficient null Delta: one complement of the stacked Delta)."""
    from atlascat.irt.groupfit import m2_ordinal_groups

    ratings = pd.read_csv(RATINGS, index_col=0)
    groups = pd.read_csv(GROUPS, index_col=0)["group"]
    bank, priors = _mirt_bank(model)
    slope = "mirt" if model == "gpcm" else "exact"        # mirt's GPCM dP (polyfitstats)
    got = m2_ordinal_groups(ratings, bank, groups, priors, statistic=kind, gpcm_slope=slope,
                            group_delta=False)
    ref = pd.read_csv(DATA / f"{model}_ord_{'m2' if kind == 'M2*' else 'c2'}.csv").iloc[0]
    assert got["statistic"] == kind and got["df"] == ref.df
    assert got["M2"] == pytest.approx(ref.M2, rel=1e-9)
    assert got["p"] == pytest.approx(ref.p, rel=1e-8)
    assert got["RMSEA"] == pytest.approx(ref.RMSEA, abs=1e-10)
    for g in ("A", "B"):
        assert got["SRMSR"][g] == pytest.approx(ref[f"SRMSR.{g}"], abs=1e-12)
    # mirt's null intercepts stop at its EM tolerance (1e-4)
    assert got["TLI"] == pytest.approx(ref.TLI, abs=1e-6)
    assert got["CFI"] == pytest.approx(ref.CFI, abs=1e-6)
    # the groups' means and variances in Delta too (ATLAS's default, as m2_groups): M2 a little
    # smaller, on the same df
    full = m2_ordinal_groups(ratings, bank, groups, priors, statistic=kind, gpcm_slope=slope)
    assert full["df"] == got["df"] and got["M2"] * (1 - 3e-3) < full["M2"] <= got["M2"]


def test_atlas_fit_groups_on_an_ordinal_bank_gives_mirts_sx2_per_group(tmp_path, capsys):
    import json

    bank, summ, out = tmp_path / "b.csv", tmp_path / "s.json", tmp_path / "f.json"
    assert run_cli(["calibrate", RATINGS, "--model", "graded", "--groups", GROUPS, "--tol",
                    "1e-6", "--summary", summ, "-o", bank, "--quiet"]) == 0
    # was refused: "--groups: binary banks only"
    assert run_cli(["fit", RATINGS, "--bank", bank, "--groups", GROUPS, "--summary", summ,
                    "-o", out]) == 0
    report = json.loads(out.read_text())
    m2 = pd.read_csv(DATA / "graded_ord_m2.csv").iloc[0]
    assert report["statistic"] == "M2*" and report["df"] == m2.df
    assert report["M2"] == pytest.approx(m2.M2, rel=2e-3)      # its own fit; Delta with the groups
    assert set(report["SRMSR"]) == {"A", "B"}
    items = pd.DataFrame(report["items"])
    ref = pd.read_csv(DATA / "graded_ord_sx2.csv")
    assert items["group"].tolist() == ref["group"].tolist()
    assert items["df_S_X2"].tolist() == ref["df.S_X2"].tolist()
    # ATLAS's own fit (mirt's to ~1e-4 in the parameters): S-X2 within 0.05
    assert items["S_X2"].to_numpy() == pytest.approx(ref["S_X2"].to_numpy(), abs=0.05)


def test_atlas_fit_groups_on_an_ordinal_bank_refusals(tmp_path, capsys):
    bank, summ = tmp_path / "b.csv", tmp_path / "s.json"
    assert run_cli(["calibrate", RATINGS, "--model", "gpcm", "--groups", GROUPS, "--summary",
                    summ, "-o", bank, "--quiet"]) == 0
    capsys.readouterr()
    one_line_error(capsys, ["fit", RATINGS, "--bank", bank, "--groups", GROUPS],
                   "--groups and --summary go together")
    one_line_error(capsys, ["fit", RATINGS, "--bank", bank, "--groups", GROUPS, "--summary",
                            summ, "--q3"], "--q3: binary banks only")


def test_atlas_fit_groups_takes_m2_and_gpcm_slope_on_an_ordinal_bank(tmp_path):
    import json

    bank, summ, out = tmp_path / "b.csv", tmp_path / "s.json", tmp_path / "f.json"
    assert run_cli(["calibrate", RATINGS, "--model", "gpcm", "--groups", GROUPS, "--tol",
                    "1e-6", "--summary", summ, "-o", bank, "--quiet"]) == 0
    assert run_cli(["fit", RATINGS, "--bank", bank, "--groups", GROUPS, "--summary", summ,
                    "--m2", "C2", "--gpcm-slope", "mirt", "--no-items", "-o", out]) == 0
    report = json.loads(out.read_text())
    ref = pd.read_csv(DATA / "gpcm_ord_c2.csv").iloc[0]
    assert report["statistic"] == "C2" and report["df"] == ref.df and "items" not in report
    assert report["M2"] == pytest.approx(ref.M2, rel=3e-3)
