"""``atlas items --groups G --summary S`` and :func:`atlascat.studies.item_quality.item_quality`
with ``groups`` and ``priors``: each group's S-X2 under its prior (mirt's ``itemfit`` on a
``multipleGroup`` fit, tests/data/mirt_groups/), summed per item on the summed df."""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import chi2

from atlascat.cli import main
from atlascat.errors import ConfigError
from atlascat.irt.bank import ItemBank
from atlascat.irt.polybank import PolyBank
from atlascat.studies.item_quality import benjamini_hochberg, item_quality

DATA = Path(__file__).parent / "data" / "mirt_groups"


def _mirt_binary(prefix):
    items = pd.read_csv(DATA / f"{prefix}items.csv")
    a = items.a1.to_numpy() if "a1" in items else np.ones(len(items))
    bank = ItemBank(items.item_id.astype(str).to_numpy(), a, -items.d.to_numpy() / a)
    priors = {r.group: (r.mean, math.sqrt(r.var))
              for r in pd.read_csv(DATA / f"{prefix}groups.csv").itertuples()}
    return bank, priors


def _mirt_ordinal(model):
    items = pd.read_csv(DATA / f"{model}_ord_items.csv")
    fit = pd.read_csv(DATA / f"{model}_ord_fit.csv").iloc[0]
    bank = PolyBank(items.item_id, items[["a1", "d1", "d2", "d3"]].to_numpy(), model)
    return bank, {"A": (0.0, 1.0), "B": (fit.mean_B, float(np.sqrt(fit.var_B)))}


def _check_combined(q, ref):
    """q's S-X2, df and p are the sums of mirt's per-group itemfit; worst_group its smallest p."""
    want = ref.groupby("item", sort=False).agg(S_X2=("S_X2", "sum"), df=("df.S_X2", "sum"))
    got = q.set_index("item_id").loc[want.index]
    assert np.max(np.abs(got.S_X2 - want.S_X2) / want.S_X2) < 1e-9
    assert np.array_equal(got.df_S_X2, want.df)
    assert np.allclose(got.p_S_X2, chi2.sf(want.S_X2, want.df), rtol=1e-9, atol=1e-15)
    worst = ref.loc[ref.groupby("item", sort=False)["p.S_X2"].idxmin()].set_index("item").group
    assert (got.worst_group == worst.loc[want.index]).all()
    assert (got.n_groups_S_X2 == ref.groupby("item", sort=False).size().loc[want.index]).all()
    bh = benjamini_hochberg(q.p_S_X2)
    assert np.array_equal(q.issues.str.contains("poor_fit"), np.nan_to_num(bh, nan=1) < 0.01)


@pytest.mark.parametrize("prefix, model", [("fit_", "2pl"), ("fit_rasch_", "rasch")])
def test_combined_sx2_is_the_sum_of_mirts_itemfit_per_group(prefix, model):
    x = pd.read_csv(DATA / "responses.csv", index_col=0)
    groups = pd.read_csv(DATA / "groups.csv", index_col=0)["group"]
    bank, priors = _mirt_binary(prefix)
    q = item_quality(bank, x, groups=groups, priors=priors, estimated=model)
    _check_combined(q, pd.read_csv(DATA / f"{prefix}sx2.csv"))
    if model == "rasch":
        assert q.issues.str.contains("poor_fit").any()
    # the information under the groups' priors, not N(0, 1): B's mean is 1.04
    plain = item_quality(bank)
    assert not np.allclose(q["info"], plain["info"])


@pytest.mark.parametrize("model", ["graded", "gpcm"])
def test_ordinal_combined_sx2_is_the_sum_of_mirts_itemfit_per_group(model):
    ratings = pd.read_csv(DATA / "ordinal_responses.csv", index_col=0)
    groups = pd.read_csv(DATA / "ordinal_groups.csv", index_col=0)["group"]
    bank, priors = _mirt_ordinal(model)
    q = item_quality(bank, ratings, groups=groups, priors=priors)
    _check_combined(q, pd.read_csv(DATA / f"{model}_ord_sx2.csv"))
    # a bank calibrated elsewhere (estimated none): no item parameters off the df
    none = item_quality(bank, ratings, groups=groups, priors=priors, estimated="none")
    assert (none.df_S_X2 > q.df_S_X2).all()


def test_information_is_averaged_over_the_groups_priors_by_their_shares():
    x = pd.read_csv(DATA / "responses.csv", index_col=0)
    groups = pd.read_csv(DATA / "groups.csv", index_col=0)["group"]
    bank, _ = _mirt_binary("fit_")
    one = {"A": (0.0, 1.0), "B": (0.0, 1.0)}       # both groups N(0, 1): the one-group info
    q = item_quality(bank, x, groups=groups, priors=one)
    assert np.allclose(q["info"], item_quality(bank)["info"], rtol=1e-12)
    from atlascat.irt.quadrature import normal_quadrature

    priors = {"A": (0.0, 1.0), "B": (1.0, 1.5)}
    share_a = float((groups.loc[x.index] == "A").mean())
    want = 0.0
    for share, (m, s) in zip((share_a, 1 - share_a), priors.values()):
        quad = normal_quadrature(61, (-6.0, 6.0), m, s)
        want = want + share * (quad.weights @ bank.information(quad.nodes))
    q = item_quality(bank, x, groups=groups, priors=priors)
    assert np.allclose(q["info"], want, rtol=1e-12)


def test_an_item_one_group_never_answered_is_tested_by_the_other():
    """The bank atlas calibrate writes has Item_1..3 (B only) and Item_18..20 (A only)."""
    from atlascat.irt.groupfit import sx2_combined

    table = pd.DataFrame({"item_id": ["i1", "i2", "i1", "i3"], "S_X2": [3.0, 4.0, 5.0, np.nan],
                          "df_S_X2": [2.0, 3.0, 4.0, 0.0], "p_S_X2": [0.2, 0.3, 0.1, np.nan],
                          "group": ["A", "A", "B", "B"]})
    got = sx2_combined(table, ["i1", "i2", "i3"])
    assert got.S_X2.tolist()[:2] == [8.0, 4.0] and np.isnan(got.S_X2[2])
    assert got.df_S_X2.tolist()[:2] == [6.0, 3.0] and np.isnan(got.p_S_X2[2])
    assert got.worst_group.tolist() == ["B", "A", ""]
    assert got.n_groups_S_X2.tolist() == [2, 1, 0]
    assert got.p_S_X2[0] == pytest.approx(chi2.sf(8.0, 6))


def test_groups_without_priors_or_responses_are_refused():
    bank, priors = _mirt_binary("fit_")
    groups = pd.read_csv(DATA / "groups.csv", index_col=0)["group"]
    with pytest.raises(ConfigError, match="go together"):
        item_quality(bank, pd.read_csv(DATA / "responses.csv", index_col=0), groups=groups)
    with pytest.raises(ConfigError, match="need the responses"):
        item_quality(bank, groups=groups, priors=priors)


def _calibrated(tmp_path, data="responses.csv", groups="groups.csv", *model):
    bank, summary = tmp_path / "bank.csv", tmp_path / "s.json"
    assert main(["calibrate", str(DATA / data), "-o", str(bank), *model, "--groups",
                 str(DATA / groups), "--summary", str(summary), "--quiet"]) == 0
    return bank, summary


def test_atlas_items_groups(tmp_path, capsys):
    from atlascat.irt.groupfit import sx2_combined, sx2_groups

    bank, summary = _calibrated(tmp_path, "responses.csv", "groups.csv", "--model", "2pl",
                                "--prior-a", "none")
    out = tmp_path / "items.csv"
    assert main(["items", str(DATA / "responses.csv"), "--bank", str(bank), "--groups",
                 str(DATA / "groups.csv"), "--summary", str(summary), "--all", "-o",
                 str(out)]) == 0
    assert "worst_group" in capsys.readouterr().out
    got = pd.read_csv(out, keep_default_na=False, na_values=[""])
    x = pd.read_csv(DATA / "responses.csv", index_col=0)
    groups = pd.read_csv(DATA / "groups.csv", index_col=0)["group"]
    bk = ItemBank.read(bank)
    want = sx2_combined(sx2_groups(x, bk, groups, summary), bk.item_ids)
    assert len(got) == len(bk) == 20
    assert np.allclose(got.S_X2, want.S_X2, rtol=1e-7)
    assert np.array_equal(got.df_S_X2, want.df_S_X2)
    one = got.set_index("item_id").loc[["Item_1", "Item_18"], "n_groups_S_X2"]
    assert one.tolist() == [1, 1]                  # answered by one group only
    assert main(["items", str(DATA / "responses.csv"), "--bank", str(bank), "--groups",
                 str(DATA / "groups.csv"), "--summary", str(summary), "--json"]) == 0
    assert "n_flagged" in json.loads(capsys.readouterr().out)


def test_atlas_items_groups_ordinal(tmp_path, capsys):
    bank, summary = _calibrated(tmp_path, "ordinal_responses.csv", "ordinal_groups.csv",
                                "--model", "graded", "--tol", "1e-6")
    out = tmp_path / "items.csv"
    assert main(["items", str(DATA / "ordinal_responses.csv"), "--bank", str(bank), "--groups",
                 str(DATA / "ordinal_groups.csv"), "--summary", str(summary), "-o",
                 str(out)]) == 0
    got = pd.read_csv(out).set_index("item_id")
    ref = pd.read_csv(DATA / "graded_ord_sx2.csv").groupby("item").sum(numeric_only=True)
    assert np.array_equal(got.loc[ref.index, "df_S_X2"], ref["df.S_X2"])
    # ATLAS's own fit (mirt's to ~1e-4 in the parameters)
    assert np.allclose(got.loc[ref.index, "S_X2"], ref.S_X2, atol=0.1)


@pytest.mark.parametrize("case, match", [
    ("no_summary", "--groups and --summary go together"),
    ("no_groups", "--groups and --summary go together"),
    ("no_responses", "--groups: give RESPONSES"),
    ("bad_summary", "--summary: .*has no groups"),
])
def test_atlas_items_bad_groups_exit_2(tmp_path, capsys, case, match):
    bank, summary = _calibrated(tmp_path, "responses.csv", "groups.csv", "--model", "2pl",
                                "--prior-a", "none")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"groups": {}}))
    resp, g, s = [str(DATA / "responses.csv")], ["--groups", str(DATA / "groups.csv")], \
        ["--summary", str(summary)]
    args = {"no_summary": resp + g, "no_groups": resp + s, "no_responses": g + s,
            "bad_summary": resp + g + ["--summary", str(bad)]}[case]
    capsys.readouterr()
    assert main(["items", "--bank", str(bank), *args]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and re.search(match, err), err


def test_one_group_ordinal_report_has_mirts_sx2(tmp_path, capsys):
    """Without groups an ordinal bank's report gives S-X2 too (it warned and left it out, and
    the command refused the ratings as 0/1 scores): sx2_ordinal's, flagged as a binary bank's."""
    from atlascat.irt.polyfitstats import sx2_ordinal

    ratings = pd.read_csv(DATA / "ordinal_responses.csv", index_col=0)
    bank, _ = _mirt_ordinal("graded")
    q = item_quality(bank, ratings)
    want = sx2_ordinal(ratings, bank)
    assert np.array_equal(q.S_X2, want.S_X2) and np.array_equal(q.df_S_X2, want.df_S_X2)
    assert "worst_group" not in q
    path = tmp_path / "bank.csv"
    bank.write(path)
    out = tmp_path / "items.csv"
    assert main(["items", str(DATA / "ordinal_responses.csv"), "--bank", str(path), "-o",
                 str(out)]) == 0
    got = pd.read_csv(out)
    assert np.allclose(got.S_X2, want.S_X2, rtol=1e-7)
