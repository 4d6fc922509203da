"""Multiple-group calibration of graded and GPCM items (atlascat.irt.polyfit.fit_ordinal with
groups) against mirt 1.45.1's ``multipleGroup(..., itemtype = "graded" | "gpcm", invariance =
c("free_means", "free_var", items))`` (tests/data/mirt_groups/make_reference_graded.R: 2000
subjects, 10 items of 4 categories, group B ~ N(0.8, 1.2^2)), its standard errors, and
``atlas calibrate --model graded|gpcm --groups`` / ``atlas score --groups --summary`` on it.
The partial credit model (pcm) with groups: tests/test_groups_pcm.py."""
from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from atlascat.cli import main
from atlascat.irt.calibrate import calibrate

from mirt_groups_data import DATA, read_answers


@pytest.fixture(scope="module")
def data():
    return read_answers('ordinal_')


@pytest.fixture(scope="module")
def fits(data):
    x, g = data
    return {m: calibrate(x, m, groups=g, tol=1e-6, se=True, check_dimensions=False)
            for m in ("graded", "gpcm")}


@pytest.mark.parametrize("model", ["graded", "gpcm"])
def test_ordinal_multiple_group_fit_is_mirts(fits, model):
    res = fits[model]
    ref = pd.read_csv(DATA / f"{model}_ord_fit.csv").iloc[0]
    items = pd.read_csv(DATA / f"{model}_ord_items.csv")
    assert res.converged
    assert res.loglik == pytest.approx(ref.loglik, abs=1e-3)
    assert list(res.bank.item_ids) == list(items.item_id)
    # mirt's a1, d1..d3 (GPCM: d0 = 0 left out), the bank's parameters as fitted
    ours = res.bank.params
    theirs = items[["a1", "d1", "d2", "d3"]].to_numpy()
    assert np.max(np.abs(ours - theirs)) < 2e-3
    g = {row["group"]: row for row in res.groups["groups"]}
    assert res.groups["reference"] == "A" and g["A"]["mean"] == 0.0 and g["A"]["sd"] == 1.0
    assert g["B"]["mean"] == pytest.approx(ref.mean_B, abs=2e-3)
    assert g["B"]["sd"] ** 2 == pytest.approx(ref.var_B, abs=2e-3)
    assert res.n_parameters == 40 + 2
    assert res.g2 is None                  # one prior's G2 is not a grouped fit's


@pytest.mark.parametrize("model", ["graded", "gpcm"])
def test_ordinal_multiple_group_standard_errors_are_mirts(fits, model):
    res = fits[model]
    ref = pd.read_csv(DATA / f"{model}_ord_se.csv")
    items = ref[ref.item_id != "GroupPars_B"]
    se = res.se.frame()
    cols = ["a1_se", "d1_se", "d2_se", "d3_se"]
    rel = np.abs(se[cols].to_numpy() / items[["a1", "d1", "d2", "d3"]].to_numpy() - 1)
    assert np.max(rel) < 2e-3
    grp = ref[ref.item_id == "GroupPars_B"].iloc[0]    # MEAN_1's SE in a1, COV_11's in d1
    b = res.groups["groups"][1]
    assert b["mean_se"] == pytest.approx(grp.a1, rel=2e-3)
    assert b["var_se"] == pytest.approx(grp.d1, rel=2e-3)


def test_the_reference_group_and_the_scores_follow_the_groups(data, fits):
    x, g = data
    res = calibrate(x, "graded", groups=g, reference_group="B", tol=1e-6,
                    check_dimensions=False)
    rows = {r["group"]: r for r in res.groups["groups"]}
    assert res.groups["reference"] == "B" and rows["B"]["mean"] == 0.0
    ref = pd.read_csv(DATA / "graded_ord_fit.csv").iloc[0]
    # the same model on B's scale: A at -mu_B / sd_B, SD 1 / sd_B
    assert rows["A"]["mean"] == pytest.approx(-ref.mean_B / np.sqrt(ref.var_B), abs=3e-3)
    assert rows["A"]["sd"] == pytest.approx(1 / np.sqrt(ref.var_B), abs=3e-3)
    assert res.loglik == pytest.approx(ref.loglik, abs=1e-3)
    # a group's subjects are scored under its prior: B's higher than under N(0, 1)
    one = calibrate(x, "graded", tol=1e-6, check_dimensions=False)
    b = (g.loc[x.index] == "B").to_numpy()
    grouped = fits["graded"]
    assert np.mean(grouped.theta[b] - one.theta[b]) > 0.1
    assert grouped.loglik > one.loglik + 10      # the group's own mean and variance fit better


def test_atlas_calibrate_and_score_ordinal_groups(tmp_path, capsys, fits):
    bank, summ, scores = tmp_path / "bank.csv", tmp_path / "s.json", tmp_path / "sc.csv"
    code = main(["calibrate", str(DATA / "ordinal_responses.csv"), "-o", str(bank), "--model",
                 "gpcm", "--tol", "1e-6", "--groups", str(DATA / "ordinal_groups.csv"),
                 "--summary", str(summ), "--quiet"])
    out = capsys.readouterr()
    assert code == 0, out.err
    ref = pd.read_csv(DATA / "gpcm_ord_fit.csv").iloc[0]
    assert re.search(r"group B: 1000 subjects, latent mean 0\.78\d, SD 1\.28\d", out.out)
    info = json.loads(summ.read_text())
    assert info["loglik"] == pytest.approx(ref.loglik, abs=1e-3)
    assert info["groups"]["groups"][1]["mean"] == pytest.approx(ref.mean_B, abs=2e-3)
    code = main(["score", str(DATA / "ordinal_responses.csv"), "--bank", str(bank), "--groups",
                 str(DATA / "ordinal_groups.csv"), "--summary", str(summ), "-o", str(scores)])
    out = capsys.readouterr()
    assert code == 0, out.err
    df = pd.read_csv(scores)
    assert list(df.group.unique()) == ["A", "B"]
    # the calibration's own scores: each subject's EAP under its group's prior
    assert np.max(np.abs(df.theta.to_numpy() - fits["gpcm"].theta)) < 1e-6
