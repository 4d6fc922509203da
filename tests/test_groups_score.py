"""Scores under each subject's group prior (atlascat.irt.groupscore; ``atlas score --groups
--summary``; a multiple-group calibration's own scores) against mirt 1.45.1's ``fscores`` on
its ``multipleGroup`` fits (tests/data/mirt_groups/make_score_reference.R)."""
from __future__ import annotations

import json
import math
import re

import numpy as np
import pandas as pd
import pytest

from atlascat.cli import main
from atlascat.errors import ConfigError
from atlascat.irt.ability import estimate_ability
from atlascat.irt.bank import ItemBank
from atlascat.irt.calibrate import calibrate
from atlascat.irt.groupscore import group_priors, score_by_prior, score_groups

from mirt_groups_data import DATA, read_answers


@pytest.fixture(scope="module")
def data():
    return (*read_answers(), pd.read_csv(DATA / "scores.csv"))


def _mirt_fit(name):
    """mirt's own fit: its items as a bank (a = a1, b = -d / a1) and its groups' priors on its
    own scale (the Rasch fit's reference group N(0, var_A))."""
    items = pd.read_csv(DATA / f"{name}_items.csv")
    fit = pd.read_csv(DATA / f"{name}_fit.csv").iloc[0]
    a = items.a1.to_numpy()
    bank = ItemBank(items.item_id.astype(str).to_numpy(), a, -items.d.to_numpy() / a)
    return bank, {"A": (0.0, math.sqrt(fit.var_A)), "B": (fit.mean_B, math.sqrt(fit.var_B))}


@pytest.mark.parametrize("name", ["2pl", "rasch"])
def test_eap_and_map_on_mirts_parameters_are_mirts_fscores(data, name):
    """EAP: the same sums on the same 121-node grid, equal to the fixture's 12 digits. MAP:
    mirt's optimizer stops about 3e-6 from the root and takes its SE from a numerical Hessian
    (6e-5 off); ATLAS's is the root to 1e-9, checked against the score equation here."""
    x, groups, ref = data
    bank, priors = _mirt_fit(name)
    xs = x.loc[ref.subject_id]
    # mirt's fscores integrates on its grid alone: quadrature="fixed" is its computation
    eap = score_groups(xs, bank, groups.to_dict(), priors, "eap", quadrature="fixed")
    assert list(eap.group) == list(ref.group) and list(eap.subject_id) == list(ref.subject_id)
    assert np.max(np.abs(eap.theta - ref[f"{name}_eap"])) < 1e-10
    assert np.max(np.abs(eap.se - ref[f"{name}_eap_se"])) < 1e-10
    mp = score_groups(xs, bank, groups.to_dict(), priors, "map")
    assert np.max(np.abs(mp.theta - ref[f"{name}_map"])) < 1e-5
    assert np.max(np.abs(mp.se - ref[f"{name}_map_se"])) < 1e-4
    # ATLAS's MAP is the root of S(theta) - (theta - mu_g) / sigma_g^2
    y = xs.to_numpy()
    obs = ~np.isnan(y)
    mu = np.array([priors[g][0] for g in ref.group])
    sd = np.array([priors[g][1] for g in ref.group])
    t = mp.theta.to_numpy()
    p = 1 / (1 + np.exp(-bank.a * (t[:, None] - bank.b)))
    score = np.where(obs, (np.nan_to_num(y) - p) * bank.a, 0).sum(1) - (t - mu) / sd**2
    assert np.max(np.abs(score)) < 1e-7


def test_the_reference_group_is_scored_as_without_groups(data):
    """Group A's prior is N(0, 1): its scores are the one-group scores; group B's are not
    (the fix: before it every subject was N(0, 1))."""
    x, groups, ref = data
    bank, priors = _mirt_fit("2pl")
    both = score_groups(x, bank, groups, priors)
    plain = estimate_ability(x, bank, "eap")
    a = (groups == "A").to_numpy()
    assert np.allclose(both.theta[a], plain.theta[a], atol=1e-13)
    assert np.min(np.abs(both.theta[~a] - plain.theta[~a])) > 1e-3


def test_score_by_prior_groups_subjects_by_prior(data):
    """One prior per subject, in any order: each subject's score is its prior's alone."""
    x, _, _ = data
    bank, _ = _mirt_fit("2pl")
    xs = x.iloc[:60]
    mean = np.tile([0.5, -1.0, 0.0], 20)
    sd = np.tile([1.2, 0.8, 1.0], 20)
    for method in ("eap", "map"):
        df = score_by_prior(xs, bank, method, mean, sd)
        assert list(df.subject_id) == [str(s) for s in xs.index]
        one = estimate_ability(xs.iloc[1::3], bank, method, prior_mean=-1.0, prior_sd=0.8)
        assert np.allclose(df.theta.to_numpy()[1::3], one.theta, atol=1e-12)
    with pytest.raises(ConfigError, match="'wle' uses none"):
        score_by_prior(xs, bank, "wle", mean, sd)


def test_calibration_scores_each_group_under_its_prior(data):
    """A multiple-group fit's own scores: mirt's fscores on the bank and the groups' priors
    (121 nodes), as score_groups gives them; within the fits' own difference of mirt's."""
    x, groups, ref = data
    res = calibrate(x, "2pl", prior_a=None, groups=groups, tol=1e-6, check_dimensions=False)
    again = score_groups(x, res.bank, groups, res)
    assert np.max(np.abs(res.theta - again.theta)) < 1e-12
    assert np.max(np.abs(res.theta_se - again.se)) < 1e-12
    pos = [list(x.index).index(s) for s in ref.subject_id]
    assert np.max(np.abs(res.theta[pos] - ref["2pl_eap"])) < 5e-3   # items within 2e-3


def test_group_priors_reads_what_calibrate_writes(tmp_path):
    summary = {"model": "2pl", "groups": {"reference": "A", "groups": [
        {"group": "A", "mean": 0.0, "sd": 1.0}, {"group": "B", "mean": 1.0, "sd": 1.5}]}}
    path = tmp_path / "s.json"
    path.write_text(json.dumps(summary))
    assert group_priors(path) == group_priors(summary) == {"A": (0.0, 1.0), "B": (1.0, 1.5)}
    path.write_text(json.dumps({"model": "2pl"}))
    with pytest.raises(ConfigError, match="has no groups"):
        group_priors(path)
    with pytest.raises(ConfigError, match="positive sd"):
        group_priors({"A": (0.0, 0.0)})


def _calibrated(tmp_path):
    bank, summary, scores = tmp_path / "bank.csv", tmp_path / "s.json", tmp_path / "sc.csv"
    assert main(["calibrate", str(DATA / "responses.csv"), "-o", str(bank), "--model", "2pl",
                 "--prior-a", "none", "--groups", str(DATA / "groups.csv"), "--summary",
                 str(summary), "--scores", str(scores), "--quiet"]) == 0
    return bank, summary, scores


def test_atlas_score_groups_is_calibrates_scores(tmp_path, capsys):
    bank, summary, scores = _calibrated(tmp_path)
    out = tmp_path / "eap.csv"
    code = main(["score", str(DATA / "responses.csv"), "--bank", str(bank), "--groups",
                 str(DATA / "groups.csv"), "--summary", str(summary), "-o", str(out)])
    printed = capsys.readouterr().out
    assert code == 0 and "B N(1.04" in printed
    got, want = pd.read_csv(out), pd.read_csv(scores)
    assert list(got.subject_id) == list(want.subject_id)
    assert np.max(np.abs(got.theta - want.theta)) < 1e-7      # both written to 8-10 digits
    assert set(got.group) == {"A", "B"}
    assert main(["score", str(DATA / "responses.csv"), "--bank", str(bank), "--groups",
                 str(DATA / "groups.csv"), "--summary", str(summary), "-m", "map", "-o",
                 str(out)]) == 0
    assert np.corrcoef(pd.read_csv(out).theta, want.theta)[0, 1] > 0.99


@pytest.mark.parametrize("case, match", [
    ("partial", "subject\\(s\\) of the responses have no group"),
    ("unknown", "is in group 'C', not one of the fit's groups"),
    ("no-summary", "--groups and --summary go together"),
    ("wle", "drop --method wle"),
    ("prior-sd", "drop --prior-sd"),
    ("one-group-summary", "--summary: .* has no groups"),
])
def test_atlas_score_bad_groups_exit_2(tmp_path, capsys, case, match):
    bank, summary, _ = _calibrated(tmp_path)
    g = pd.read_csv(DATA / "groups.csv")
    path = tmp_path / "g.csv"
    if case == "partial":
        g.iloc[:-5].to_csv(path, index=False)
    elif case == "unknown":
        g.assign(group=np.where(g.index == 7, "C", g.group)).to_csv(path, index=False)
    else:
        path = DATA / "groups.csv"
    args = ["--summary", str(summary)]
    extra = {"no-summary": [], "wle": [*args, "-m", "wle"],
             "prior-sd": [*args, "--prior-sd", "2"]}
    if case == "one-group-summary":
        info = json.loads(summary.read_text())
        info.pop("groups")
        summary.write_text(json.dumps(info))
    capsys.readouterr()
    code = main(["score", str(DATA / "responses.csv"), "--bank", str(bank), "--groups",
                 str(path), *extra.get(case, args)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and re.search(match, err), err


@pytest.mark.parametrize("prefix, model", [("fit_", "2pl"), ("fit_rasch_", "rasch")])
def test_sx2_per_group_is_mirts_itemfit(data, prefix, model):
    """mirt's itemfit on a multipleGroup fit (tests/data/mirt_groups/make_fit_reference.R, the
    14 items all answered): each group's S-X2 under its prior, a non-reference group's df
    less its mean and variance, to 1e-12."""
    from atlascat.irt.groupfit import sx2_groups

    x, groups, _ = data
    items = pd.read_csv(DATA / f"{prefix}items.csv")
    ref = pd.read_csv(DATA / f"{prefix}sx2.csv")
    a = items.a1.to_numpy() if "a1" in items else np.ones(len(items))
    bank = ItemBank(items.item_id.astype(str).to_numpy(), a, -items.d.to_numpy() / a)
    priors = {r.group: (r.mean, math.sqrt(r.var))
              for r in pd.read_csv(DATA / f"{prefix}groups.csv").itertuples()}
    got = sx2_groups(x, bank, groups, priors, estimated=model)
    assert list(got.group) == list(ref.group) and list(got.item_id) == list(ref.item)
    assert np.array_equal(got.df_S_X2, ref["df.S_X2"])
    for col in ("S_X2", "RMSEA_S_X2", "p_S_X2"):
        assert np.max(np.abs(got[col] - ref[col.replace("_S", ".S")])) < 1e-12


def test_atlas_fit_groups_gives_sx2_per_group(tmp_path, capsys, data):
    """atlas fit --groups --summary: the library's M2 over the groups and S-X2 per group on
    the bank written (each group's own items: A never answered Item_1..3, B Item_18..20), and
    person fit."""
    from atlascat.irt.groupfit import m2_groups, sx2_groups

    x, groups, _ = data
    bank, summary, _ = _calibrated(tmp_path)
    out = tmp_path / "fit.json"
    code = main(["fit", str(DATA / "responses.csv"), "--bank", str(bank), "--groups",
                 str(DATA / "groups.csv"), "--summary", str(summary), "--person-fit", "-o",
                 str(out)])
    printed = capsys.readouterr().out
    assert code == 0 and "person fit lz*" in printed and "SRMSR = A 0.0" in printed
    report = json.loads(out.read_text())
    m2 = m2_groups(x, ItemBank.read(bank), groups, summary)
    assert report["M2"] == pytest.approx(m2["M2"], rel=1e-12) and report["df"] == m2["df"]
    assert m2["df"] == 2 * (17 + 136) - 40 - 2       # each group's 17 items, 136 pairs
    assert f"M2 = {m2['M2']:.3f} on {m2['df']} df" in printed
    assert report["person_fit"]["mean"] is not None
    got = pd.DataFrame(report["items"])
    want = sx2_groups(x, ItemBank.read(bank), groups, summary)
    assert len(got) == 34 and list(got.group) == list(want.group)     # 17 items each
    assert np.allclose(got.S_X2, want.S_X2, atol=1e-12, equal_nan=True)
    assert not got[got.group == "A"].item_id.isin(["Item_1", "Item_2", "Item_3"]).any()
    assert not got[got.group == "B"].item_id.isin(["Item_18", "Item_19", "Item_20"]).any()
    code = main(["fit", str(DATA / "responses.csv"), "--bank", str(bank), "--groups",
                 str(DATA / "groups.csv"), "--summary", str(summary), "--q3"])
    err = capsys.readouterr().err
    assert code == 2 and "drop --q3" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("prefix, model", [("fit_", "2pl"), ("fit_rasch_", "rasch")])
def test_m2_of_the_groups_is_mirts(data, prefix, model):
    """mirt's M2 on the multipleGroup fit: the groups' moments stacked, the items' parameters
    shared, the groups' means and variances in Delta. SRMSR per group to 1e-12, df exact, TLI
    and CFI to 1e-5; M2 within 1e-4 of mirt's (relative: 2PL 3e-5, Rasch 5e-5, with the same
    moments and model proportions, SRMSR equal; the one-group M2 is 4e-4 from mirt's on LSAT6;
    121 nodes instead of 61 move it by 1e-5), p and RMSEA with it."""
    from atlascat.irt.groupfit import m2_groups

    x, groups, _ = data
    items = pd.read_csv(DATA / f"{prefix}items.csv")
    ref = pd.read_csv(DATA / f"{prefix}m2.csv").iloc[0]
    a = items.a1.to_numpy() if "a1" in items else np.ones(len(items))
    bank = ItemBank(items.item_id.astype(str).to_numpy(), a, -items.d.to_numpy() / a)
    priors = {r.group: (r.mean, math.sqrt(r.var))
              for r in pd.read_csv(DATA / f"{prefix}groups.csv").itertuples()}
    got = m2_groups(x, bank, groups, priors, estimated=model)
    assert got["df"] == ref.df
    assert got["M2"] == pytest.approx(ref.M2, rel=1e-4)
    assert got["p"] == pytest.approx(ref.p, abs=2e-4)
    assert got["RMSEA"] == pytest.approx(ref.RMSEA, abs=1e-5)
    for g in ("A", "B"):
        assert got["SRMSR"][g] == pytest.approx(ref[f"SRMSR.{g}"], abs=1e-12)
    assert got["TLI"] == pytest.approx(ref.TLI, abs=1e-5)
    assert got["CFI"] == pytest.approx(ref.CFI, abs=1e-5)
    # mirt leaves the groups' means and variances out of Delta (its df counts them)
    exact = m2_groups(x, bank, groups, priors, estimated=model, group_delta=False)
    assert exact["M2"] == pytest.approx(ref.M2, rel=1e-9) and exact["df"] == ref.df
