"""A demanding mirt user's walk of the newest features (multiple groups, the multidimensional
2PL, rotations, multidimensional scores), side by side with mirt 1.45.1: each test pins a defect
found on the walk (it fails without its fix)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from atlascat.errors import ConfigError
from atlascat.irt.multidim import MultidimBank
from atlascat.irt.multidimcal import calibrate_multidim
from cli_checks import one_line_error, run_cli, two_factor_answers


@pytest.fixture(scope="module")
def twofactor(tmp_path_factory):
    """(truth bank, answers file) of a 400 x 8 two-factor set."""
    bank, y = two_factor_answers(400, 8, seed=11)
    path = tmp_path_factory.mktemp("walkord") / "answers.csv"
    y.to_csv(path)
    return bank, path


def _as_r_writes(bank: MultidimBank, path, g=0.0):
    """``write.csv(coef(mod, simplify = TRUE)$items, path)`` as R writes it: the item ids as row
    names under an empty header, then a1..aK, d, g, u, every text quoted."""
    cols = [f"a{k + 1}" for k in range(bank.n_dims)] + ["d", "g", "u"]
    rows = ['"' + '","'.join([""] + cols) + '"']
    for j, item in enumerate(bank.item_ids):
        values = [*bank.loadings[j], bank.intercepts[j], g if j == 0 else 0.0, 1.0]
        rows.append(f'"{item}",' + ",".join(repr(float(v)) for v in values))
    path.write_text("\n".join(rows) + "\n")
    return path


def test_a_bank_written_by_mirt_is_read(twofactor, tmp_path, capsys):
    """mirt's own multidimensional bank (its coef table written by R) was refused: 'no item id
    column among ['Unnamed: 0', ...]'; its g = 0, u = 1 would have become metadata."""
    bank, data = twofactor
    ours, theirs = tmp_path / "ours.csv", _as_r_writes(bank, tmp_path / "mirt.csv")
    bank.write(ours)
    read = MultidimBank.read(theirs)
    assert list(read.item_ids) == list(bank.item_ids)
    np.testing.assert_array_equal(read.loadings, bank.loadings)
    np.testing.assert_array_equal(read.intercepts, bank.intercepts)
    assert read.metadata is None
    for name, path in (("a", ours), ("b", theirs)):
        assert run_cli(["score", data, "--bank", path, "-o", tmp_path / f"{name}.csv"]) == 0
    capsys.readouterr()
    a, b = pd.read_csv(tmp_path / "a.csv"), pd.read_csv(tmp_path / "b.csv")
    pd.testing.assert_frame_equal(a, b)


def test_a_mirt_bank_keeps_item_ids_with_leading_zeros(tmp_path):
    """Its row names as text: '001' stays '001' (read as a number, it became '1')."""
    path = tmp_path / "m.csv"
    path.write_text('"","a1","a2","d","g","u"\n"001",1,0.5,0.1,0,1\n"002",0.4,1.2,-0.3,0,1\n')
    assert list(MultidimBank.read(path).item_ids) == ["001", "002"]


def test_a_multidimensional_3pl_from_mirt_is_refused_not_read_as_a_2pl(twofactor, tmp_path,
                                                                        capsys):
    """mirt(data, 2, itemtype = "3PL")'s table: its guessing g was kept as a metadata column
    and the items scored as a 2PL; now one line, exit 2."""
    bank, data = twofactor
    path = _as_r_writes(bank, tmp_path / "m3.csv", g=0.2)
    one_line_error(capsys, ["info", path], "g = 0.2", "3PL")
    one_line_error(capsys, ["score", data, "--bank", path, "-o", tmp_path / "s.csv"],
                   "g = 0.2")


def test_calibrate_dims_format_mirt_writes_mirts_table(twofactor, tmp_path, capsys):
    """--format mirt with --dims was refused ('--dims fits ... 0/1 answers only', though the
    answers were 0/1); it writes mirt's coef(mod, simplify = TRUE)$items, read back as the bank."""
    _, data = twofactor
    ours, theirs = tmp_path / "ours.csv", tmp_path / "mirt.csv"
    common = ["calibrate", data, "--dims", "2", "--quiet", "--max-iter", "40"]
    assert run_cli([*common, "-o", ours]) == 0
    assert run_cli([*common, "-o", theirs, "--format", "mirt", "--summary",
                    tmp_path / "s.json"]) == 0
    capsys.readouterr()
    assert '"format": "mirt"' in (tmp_path / "s.json").read_text()   # as the 1-D summary
    frame = pd.read_csv(theirs)
    assert list(frame.columns) == ["X", "a1", "a2", "d", "g", "u"]
    assert (frame.g == 0).all() and (frame.u == 1).all()
    a, b = MultidimBank.read(ours), MultidimBank.read(theirs)
    np.testing.assert_array_equal(a.loadings, b.loadings)
    np.testing.assert_array_equal(a.intercepts, b.intercepts)
    assert b.metadata is None


@pytest.mark.filterwarnings("ignore:the 2-dimensional 2PL")
def test_multidim_calibration_has_the_unidimensional_results_verbs(twofactor):
    """CalibrationResult has aic, bic, sabic, hq and to_frame("mirt"); the K-dimensional result
    had none of them (AttributeError)."""
    _, data = twofactor
    res = calibrate_multidim(pd.read_csv(data, index_col=0), 2, max_iter=40)
    crit = res.information_criteria()
    assert (res.aic, res.bic, res.sabic, res.hq) == (crit["aic"], crit["bic"], crit["sabic"],
                                                     crit["hq"])
    pd.testing.assert_frame_equal(res.to_frame(), res.bank.to_frame())
    mirt = res.to_frame("mirt")
    assert list(mirt.columns) == ["X", "a1", "a2", "d", "g", "u"]
    np.testing.assert_array_equal(mirt[["a1", "a2"]].to_numpy(), res.bank.loadings)
    with pytest.raises(ConfigError, match="unknown bank format"):
        res.to_frame("irtpars")


def test_a_refused_multidimensional_bank_names_atlas_score(twofactor, tmp_path, capsys):
    """The refusal of a K-dimensional bank by the 1-D commands named atlas info and design as
    its readers, not atlas score, which scores it (theta_1..theta_K)."""
    bank, data = twofactor
    path = tmp_path / "m.csv"
    bank.write(path)
    one_line_error(capsys, ["fit", data, "--bank", path], "atlas score")


def test_a_subject_without_answers_is_scored_when_the_file_has_an_item_the_bank_lacks(
        twofactor, tmp_path, capsys):
    """A subject with no answers is scored at the prior (n_items 0), but with a column the bank
    lacks (left out with a note) the subset refused it, advising a --drop-empty that atlas
    score / fit / items do not have."""
    bank, data = twofactor
    mbank = tmp_path / "m.csv"
    bank.write(mbank)
    y = pd.read_csv(data, index_col=0).astype(float)
    y.iloc[0] = np.nan
    y["not_in_bank"] = 1.0
    odd = tmp_path / "odd.csv"
    y.to_csv(odd)
    assert run_cli(["score", odd, "--bank", mbank, "-o", tmp_path / "s.csv"]) == 0
    err = capsys.readouterr().err
    assert "not in the bank were left out" in err and "--drop-empty" not in err
    first = pd.read_csv(tmp_path / "s.csv").iloc[0]
    assert first.n_items == 0 and abs(first.theta_1) < 1e-9 and first.se_1 == pytest.approx(1)


@pytest.mark.filterwarnings("ignore:the 2-dimensional 2PL")
def test_python_anova_rows_tell_the_fits_apart(twofactor):
    """at.anova(one, grouped) and anova(one, two_dims) labelled both rows "2pl" (the CLI's are
    2pl, 2pl-groups, 2pl-2d); the rows now carry the CLI's names."""
    import atlascat as at

    _, data = twofactor
    y = pd.read_csv(data, index_col=0)
    one = at.calibrate(y, "2pl", prior_a=None)
    grouped = at.calibrate(y, "2pl", prior_a=None, groups=["a", "b"] * (len(y) // 2))
    two = calibrate_multidim(y, 2, prior_a_sd=None, prior_d_sd=None, max_iter=40)
    assert list(at.anova(one, grouped).index) == ["2pl", "2pl-groups"]
    assert list(at.anova(two, one).index) == ["2pl", "2pl-2d"]
    assert list(at.anova(one, grouped, names=["m1", "m2"]).index) == ["m1", "m2"]


def test_dims_leaves_out_an_item_everybody_answered_alike(twofactor, tmp_path, capsys):
    """mirt refuses such an item ("only one response category"), the 1-D fit leaves it out with
    a warning; --dims kept it (its intercept ran to the prior's bound, or to 36 after 449
    iterations without priors, its parameters counted), so `atlas anova --dims 1 --dims 2` said
    the two fits had 'different data (11 vs 12 items)'."""
    _, data = twofactor
    y = pd.read_csv(data, index_col=0)
    y["all_right"] = 1
    with pytest.warns(UserWarning, match=r"left out: \['all_right'\]"):
        res = calibrate_multidim(y, 2, max_iter=40)
    assert res.dropped_items == ["all_right"] and "all_right" not in set(res.bank.item_ids)
    assert res.n_parameters == 8 * 3 - 1
    assert res.to_dict(None)["dropped_items"] == ["all_right"]
    path = tmp_path / "const.csv"
    y.to_csv(path)
    assert run_cli(["anova", path, "--model", "2pl", "--dims", "1", "--dims", "2"]) == 0, \
        capsys.readouterr().err
    assert "2pl-2d" in capsys.readouterr().out


def test_a_multiple_group_result_says_so_in_its_repr(twofactor):
    """repr(at.calibrate(rm, "2pl", groups=...)) read as a one-group fit's."""
    import atlascat as at

    _, data = twofactor
    y = pd.read_csv(data, index_col=0)
    res = at.calibrate(y, "2pl", prior_a=None, groups=["b", "a"] * (len(y) // 2))
    assert "2 groups (reference 'a')" in repr(res)
    assert "groups" not in repr(at.calibrate(y, "2pl", prior_a=None))


def test_calibrate_dims_keeps_mirts_iteration_cap_and_mhrm_tolerance(twofactor, tmp_path,
                                                                     capsys):
    """--max-iter and --tol defaulted to the 1-D EM's 1000 and 1e-4 with --dims: the MH-RM fit
    (K >= 4) ran to 1000 iterations at a tolerance ten times mirt's and said 'not converged
    (raise --max-iter)' where calibrate_multidim (and mirt) converge."""
    import json

    _, data = twofactor
    summ = tmp_path / "s.json"
    assert run_cli(["calibrate", data, "--dims", "4", "--seed", "1", "-o", tmp_path / "b.csv",
                    "--summary", summ, "--quiet"]) == 0
    out = capsys.readouterr().out
    info = json.loads(summ.read_text())
    assert info["settings"]["tol"] == 1e-3 and info["settings"]["max_iter"] == 2000
    assert info["converged"] and "not converged" not in out
    assert run_cli(["calibrate", data, "--dims", "4", "--seed", "1", "-o", tmp_path / "c.csv",
                    "--summary", summ, "--quiet", "--max-iter", "50", "--tol", "1e-4"]) == 0
    capsys.readouterr()
    info = json.loads(summ.read_text())
    assert info["settings"]["tol"] == 1e-4 and info["settings"]["max_iter"] == 50


@pytest.mark.parametrize("key", ["dims", "n_dims"])
def test_calibrate_with_dims_points_to_the_multidimensional_fit(key):
    """at.calibrate(rm, "2pl", dims=2), mirt's mirt(data, 2), was a bare TypeError
    ('unexpected keyword argument') naming neither calibrate_multidim nor --dims."""
    import atlascat as at

    with pytest.raises(ConfigError, match="calibrate_multidim"):
        at.calibrate([[0, 1], [1, 0], [1, 1]], "2pl", **{key: 2})


def test_a_group_column_among_the_answers_points_to_groups(tmp_path, capsys):
    """mirt's multipleGroup(data, group = data$group) habit: the group column left in the
    answers file was refused as a bad score only; the line now says where it belongs."""
    path = tmp_path / "answers.csv"
    path.write_text("subject_id,q1,q2,Group\ns1,0,1,old\ns2,1,1,new\n")
    one_line_error(capsys, ["calibrate", path, "-o", tmp_path / "b.csv"],
                   "text cell 'old'", "--groups FILE")


def test_items_on_a_clean_bank_says_none_flagged_without_an_empty_table(tmp_path, capsys):
    """A grouped fit's bank read back by atlas items: '20 items, 0 flagged: ' (a dangling
    colon) and an empty 'item quality (no rows)' table."""
    path = tmp_path / "bank.csv"
    path.write_text("item_id,a,b,c,u\nq1,1.1,0.2,0,1\nq2,0.9,-0.5,0,1\nq3,1.3,0.8,0,1\n")
    assert run_cli(["items", "--bank", path]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert out == "3 items, none flagged (--all lists them)"
    assert run_cli(["items", "--bank", path, "--all"]) == 0
    out = capsys.readouterr().out
    assert "none flagged" in out and "--all lists" not in out and "q3" in out


def test_load_bank_of_a_file_says_how_to_read_one(twofactor, tmp_path):
    """at.load_bank('mbank.csv') said 'no bundled bank', as if the file were missing."""
    import atlascat as at
    from atlascat.errors import BankError

    bank, _ = twofactor
    path = tmp_path / "mbank.csv"
    bank.write(path)
    with pytest.raises(BankError, match=r"is a file.*MultidimBank\.read"):
        at.load_bank(str(path))
    with pytest.raises(BankError, match="no bundled bank 'nope'"):
        at.load_bank("nope")


def test_a_tab_separated_groups_file_is_read_as_the_responses_are(tmp_path, capsys):
    """RESPONSES may be a .tsv; a groups.tsv was refused ('needs a header and two columns')."""
    from atlascat.irt.groups import read_groups

    path = tmp_path / "groups.tsv"
    path.write_text("subject_id\tgroup\ns1\told\ns2\tnew\n")
    assert read_groups(path) == {"s1": "old", "s2": "new"}
    semi = tmp_path / "groups.csv"
    semi.write_text("subject_id;group\ns1;old\n")
    with pytest.raises(ConfigError, match=r"comma-separated; tabs in a \.tsv"):
        read_groups(semi)
