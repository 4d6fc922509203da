"""A demanding R mirt user's walk of the three new features: oblique rotation (``atlas info
--rotate``), multiple-group calibration (``atlas calibrate --groups``) and the
multidimensional 2PL from the command line (``atlas calibrate --dims``, ``atlas anova --dims``):
how they compose with the other commands, bad input, and what they say."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from atlascat.errors import BankError, ConfigError
from cli_checks import one_line_error, run_cli, two_factor_answers

DATA = Path(__file__).parent / "data"
GROUPS_DATA = DATA / "mirt_groups"
RESPONSES = str(GROUPS_DATA / "responses.csv")
GROUPS = str(GROUPS_DATA / "groups.csv")


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """300 subjects x 6 items, two factors: (the responses CSV, a 2-D bank file, a 3-item CSV)."""
    bank, frame = two_factor_answers(300, 6, seed=11)
    folder = tmp_path_factory.mktemp("walk")
    frame.to_csv(folder / "small.csv")
    frame.iloc[:, :3].to_csv(folder / "three.csv")
    bank.write(folder / "mbank.csv")
    return folder


# -- a multidimensional bank is not read as a one-dimensional one -------------------------------

def test_a_multidimensional_bank_is_not_read_as_a_one_dimensional_one(small):
    from atlascat.irt.bank import ItemBank

    with pytest.raises(BankError, match="multidimensional 2PL bank"):
        ItemBank.read(small / "mbank.csv")     # a1 read as the slope, a2 dropped: was silent


@pytest.mark.parametrize("argv", [
    ["items", "--bank", "{bank}"],
    ["fit", "--bank", "{bank}", "{data}"],
    ["link", "{bank}", "{bank}", "-o", "{out}/linked.csv"],
])
def test_commands_of_one_dimensional_banks_refuse_a_multidimensional_one(small, capsys, argv,
                                                                        tmp_path):
    args = [a.format(bank=small / "mbank.csv", data=small / "small.csv", out=tmp_path)
            for a in argv]
    one_line_error(capsys, args, "multidimensional 2PL bank", "atlas info (--rotate)")
    assert list(tmp_path.iterdir()) == []


# -- --dims on too few items: mirt's "too few degrees of freedom" -------------------------------

def test_dims_on_three_items_is_refused_as_mirt_does(small, capsys, tmp_path):
    # 3 items, K = 2: 8 parameters, 7 degrees of freedom; it ran 1000 EM iterations and wrote a
    # bank that never converged
    one_line_error(capsys, ["calibrate", small / "three.csv", "--dims", "2", "-o",
                            tmp_path / "b.csv"], "degrees of freedom", "8 parameters")
    assert list(tmp_path.iterdir()) == []
    one_line_error(capsys, ["anova", small / "three.csv", "--model", "2pl", "--dims", "1",
                            "--dims", "2"], "degrees of freedom")


def test_dims_on_four_items_is_identified():
    from atlascat.irt.multidimcal import _check_degrees_of_freedom

    _check_degrees_of_freedom(4, 2)            # 11 parameters, 15 degrees of freedom
    with pytest.raises(ConfigError, match="7 degrees of freedom"):
        _check_degrees_of_freedom(3, 2)        # 8 parameters


# -- --summary: the same fields, the same definitions -------------------------------------------

def test_dims_summary_log_posterior_is_the_log_likelihood_without_priors(small, tmp_path):
    summ = tmp_path / "s.json"
    assert run_cli(["calibrate", small / "small.csv", "--dims", "2", "--mirt-defaults", "-q",
                    "-o", tmp_path / "b.csv", "--summary", summ]) == 0
    s = json.loads(summ.read_text())
    one = tmp_path / "one.json"
    assert run_cli(["calibrate", small / "small.csv", "--model", "2pl", "--mirt-defaults",
                    "-q", "-o", tmp_path / "b1.csv", "--summary", one]) == 0
    s1 = json.loads(one.read_text())
    # the 1-D fit without priors keeps log_posterior = loglik; the K-D one wrote null
    assert s1["log_posterior"] == s1["loglik"]
    assert s["log_posterior"] == s["loglik"]
    shared = {"model", "n_items", "n_subjects", "loglik", "log_posterior", "n_iter",
              "converged", "seconds", "n_parameters", "n_observations", "aic", "bic", "sabic",
              "hq"}
    assert shared <= set(s) and shared <= set(s1)


def test_anova_of_a_fit_with_an_intercept_prior_only_is_a_posterior_mode(small):
    from atlascat.irt.calibrate import calibrate
    from atlascat.irt.compare import anova
    from atlascat.irt.multidimcal import calibrate_multidim

    data = pd.read_csv(small / "small.csv", index_col=0)
    two = calibrate_multidim(data, 2, prior_a_sd=None, max_iter=200)   # d ~ N(0, 5^2)
    one = calibrate(data, model="2pl", prior_a=None, prior_c=None, prior_u=None)
    table = anova(one, two)
    assert "logPost" in table.columns and "X2" not in table.columns   # was an LR test


# -- atlas anova --groups: mirt's anova(stacked, grouped) ----------------------------------------

def test_anova_compares_the_stacked_and_the_grouped_fit_as_mirt(tmp_path, capsys):
    out = tmp_path / "t.csv"
    assert run_cli(["anova", RESPONSES, "--model", "2pl", "--groups", GROUPS, "-o", out]) == 0
    table = pd.read_csv(out, index_col=0)
    assert list(table.index) == ["2pl", "2pl-groups"]
    mirt = pd.read_csv(GROUPS_DATA / "2pl_fit.csv")["loglik"].iloc[0]   # multipleGroup, 1.45.1
    assert table.loc["2pl-groups", "logLik"] == pytest.approx(mirt, abs=5e-3)   # TOL 1e-6
    assert table.loc["2pl-groups", "df"] == 2                  # group B's mean and variance
    # mirt 1.45.1, anova(mirt(X, 1), multipleGroup(X, 1, group, free means and variances)):
    # AIC 37604.30 / 37285.61, BIC 37828.33 / 37520.85, X2 322.688 (its df printed -1048573)
    assert table["AIC"].tolist() == pytest.approx([37604.30, 37285.61], abs=0.01)
    assert table["BIC"].tolist() == pytest.approx([37828.33, 37520.85], abs=0.01)
    assert table.loc["2pl-groups", "X2"] == pytest.approx(322.688, abs=0.01)
    x2 = 2 * (table.loc["2pl-groups", "logLik"] - table.loc["2pl", "logLik"])
    assert table.loc["2pl-groups", "X2"] == pytest.approx(x2)
    # the grouped bank of atlas calibrate --groups: the same log-likelihood and criteria
    summ = tmp_path / "s.json"
    assert run_cli(["calibrate", RESPONSES, "--groups", GROUPS, "--model", "2pl",
                    "--mirt-defaults", "-q", "-o", tmp_path / "b.csv", "--summary", summ]) == 0
    s = json.loads(summ.read_text())
    assert s["loglik"] == pytest.approx(table.loc["2pl-groups", "logLik"], abs=1e-4)
    assert s["aic"] == pytest.approx(table.loc["2pl-groups", "AIC"], abs=1e-3)


def test_anova_groups_refusals(capsys, tmp_path):
    one_line_error(capsys, ["anova", RESPONSES, "--model", "2pl", "--dims", "2", "--groups",
                            GROUPS], "--groups", "--dims")
    one_line_error(capsys, ["anova", RESPONSES, "--model", "2pl", "--reference-group", "A"],
                   "--reference-group needs --groups")
    one_line_error(capsys, ["anova", RESPONSES, "--model", "2pl", "--groups",
                            tmp_path / "none.csv"], "--groups: no such file")


def test_a_grouped_fit_is_not_nested_in_a_one_group_fit():
    from atlascat.irt.calibrate import calibrate
    from atlascat.irt.compare import anova, nested_fits

    data = pd.read_csv(RESPONSES, index_col=0)
    labels = pd.read_csv(GROUPS, index_col=0)["group"].to_dict()
    rasch_groups = calibrate(data, model="rasch", groups=labels)
    two = calibrate(data, model="2pl", prior_a=None)
    # 23 parameters against 40: the Rasch fit's group means and variances are not the 2PL's
    assert not nested_fits(rasch_groups, two)
    with pytest.raises(ConfigError, match="not nested"):
        anova(rasch_groups, two)


# -- the dimensionality warning names the commands that fit a second trait -----------------------

def _two_traits_csv(path, ordinal=False):
    rng = np.random.default_rng(5)
    th = rng.standard_normal((300, 2)) @ np.linalg.cholesky([[1, 0.3], [0.3, 1]]).T
    a, b = np.exp(rng.normal(0, 0.5, 40)), rng.normal(0, 1, 40)
    prob = 1 / (1 + np.exp(-a * (th[:, (np.arange(40) >= 20).astype(int)] - b)))
    y = np.clip(np.floor(prob * 4 + rng.random(prob.shape)), 0, 4) if ordinal else \
        (rng.random(prob.shape) < prob).astype(int)
    pd.DataFrame(y, index=[f"m{i}" for i in range(300)],
                 columns=[f"q{j}" for j in range(40)]).to_csv(path)
    return str(path)


def test_the_second_trait_warning_names_calibrate_dims_and_anova_dims(tmp_path, capsys):
    data = _two_traits_csv(tmp_path / "r.csv")
    assert run_cli(["calibrate", data, "-o", tmp_path / "b.csv", "-q"]) == 0
    err = capsys.readouterr().err
    line = next(ln for ln in err.splitlines() if "measure two things" in ln)
    assert f"atlas calibrate {data} --dims 2 -o mbank.csv" in line
    assert f"atlas anova {data} --model 2pl --dims 1 --dims 2" in line
    # ratings: the multidimensional 2PL takes 0/1 answers only, so no such advice
    ratings = _two_traits_csv(tmp_path / "g.csv", ordinal=True)
    assert run_cli(["calibrate", ratings, "--model", "graded", "-o", tmp_path / "g_b.csv",
                    "-q"]) == 0
    err = capsys.readouterr().err
    assert "measure two things" in err and "--dims 2" not in err


def test_build_bank_names_the_two_trait_fit_for_a_matrix(tmp_path, capsys):
    data = _two_traits_csv(tmp_path / "r.csv")
    assert run_cli(["build-bank", data, "-o", tmp_path / "bank", "-q"]) == 0
    err = capsys.readouterr().err
    assert err.count("the items measure two things") == 1
    assert f"atlas calibrate {data} --dims 2" in err


# -- groups given for every subject, one of them without answers ---------------------------------

@pytest.fixture(scope="module")
def with_empty(tmp_path_factory):
    """tests/data/mirt_groups plus a subject of group B with no answer (CSVs and frames)."""
    d = pd.read_csv(RESPONSES, index_col=0)
    g = pd.read_csv(GROUPS)
    d.loc["empty"] = np.nan
    g.loc[len(g)] = ["empty", "B"]
    folder = tmp_path_factory.mktemp("empty")
    d.to_csv(folder / "r.csv")
    g.to_csv(folder / "g.csv", index=False)
    return folder, d, g


def test_drop_empty_with_groups_drops_the_subject_the_groups_file_names(with_empty, tmp_path,
                                                                         capsys):
    folder, _, _ = with_empty
    summ = tmp_path / "s.json"
    # was: "error: groups names 1 subject(s) not in the responses" (dropped before matching)
    assert run_cli(["calibrate", folder / "r.csv", "--groups", folder / "g.csv", "--model",
                    "2pl", "--drop-empty", "-q", "-o", tmp_path / "b.csv",
                    "--summary", summ]) == 0
    assert "subject(s) with no response: ['empty']" in capsys.readouterr().err
    sizes = {g["group"]: g["n_subjects"] for g in json.loads(summ.read_text())["groups"]["groups"]}
    assert sizes == {"A": 1000, "B": 1000}


def test_library_groups_of_every_subject_with_an_empty_row(with_empty):
    from atlascat.irt.calibrate import calibrate

    _, d, g = with_empty
    labels = dict(zip(g["subject_id"], g["group"]))
    with pytest.warns(UserWarning, match="no response"):
        res = calibrate(d, model="2pl", prior_a=None, groups=labels)
    with pytest.warns(UserWarning, match="no response"):
        by_position = calibrate(d, model="2pl", prior_a=None, groups=list(g["group"]))
    assert res.loglik == pytest.approx(by_position.loglik, abs=1e-9)
    assert [x["n_subjects"] for x in res.groups["groups"]] == [1000, 1000]


# -- the new doc sections' commands run as written ------------------------------------------------

DOCS = Path(__file__).resolve().parents[1] / "docs"


def _inline(page: str, start: str) -> str:
    """The inline code of ``page`` that starts with ``start`` (whitespace joined), asserted to be
    there."""
    import re

    text = " ".join((DOCS / page).read_text().split())
    found = re.findall("`(" + re.escape(start) + "[^`]*)`", text)
    assert found, f"docs/{page}: no `{start}...`"
    return found[0]


@pytest.mark.filterwarnings("ignore")
def test_the_new_sections_commands_run_as_written(small, tmp_path, monkeypatch, capsys):
    import shlex
    import shutil

    monkeypatch.chdir(tmp_path)
    shutil.copy(small / "small.csv", "data.csv")
    cmds = [_inline("design.md", "atlas calibrate DATA --dims 2"),
            _inline("design.md", "atlas anova DATA --model 2pl --dims 1 --dims 2")]
    for cmd in cmds:
        assert run_cli([a.replace("DATA", "data.csv") for a in shlex.split(cmd)[1:]]) == 0, cmd
    assert Path("mbank.csv").is_file() and Path("s.json").is_file()
    for rot in ("oblimin", "geomin", "varimax", "none"):
        assert run_cli(["info", "mbank.csv", "--rotate", rot]) == 0
    assert run_cli(["design", "--bank", "mbank.csv", "-k", "3"]) == 0
    # calibration.md, multiple groups
    shutil.copy(RESPONSES, "data.csv")
    shutil.copy(GROUPS, "groups.csv")
    cmd = _inline("calibration.md", "atlas anova DATA --model 2pl --groups groups.csv")
    assert run_cli([a.replace("DATA", "data.csv") for a in shlex.split(cmd)[1:]]) == 0, cmd
    assert "2pl-groups" in capsys.readouterr().out
    from atlascat import ResponseMatrix
    from atlascat.irt.calibrate import calibrate

    rm = ResponseMatrix.read("data.csv")
    labels = {k: {"A": "old", "B": "new"}[v]
              for k, v in pd.read_csv("groups.csv", index_col=0)["group"].items()}
    res = eval(_inline("calibration.md", "calibrate(rm, \"2pl\", groups=labels"))  # noqa: S307
    assert res.groups["reference"] == "old"


def test_dims_on_a_file_of_an_unknown_type_says_only_that(tmp_path, capsys):
    (tmp_path / "DATA").write_text("subject,i1\ns1,1\n")
    line = one_line_error(capsys, ["calibrate", tmp_path / "DATA", "--dims", "2", "-o",
                                   tmp_path / "b.csv"], "unsupported file type")
    assert "0/1 answers only" not in line     # was prefixed with what --dims fits


# -- numeric group labels: the reference is R's first factor level ------------------------------

def test_numeric_group_labels_sort_by_value_as_r_factor_levels(tmp_path):
    from atlascat.irt.groups import group_labels

    ids = [f"s{i}" for i in range(40)]
    got = group_labels({s: ("10" if i % 2 else "2") for i, s in enumerate(ids)}, ids)
    assert got.labels == ["2", "10"]          # was ["10", "2"]: "10" the reference
    text = group_labels({s: ("b" if i % 2 else "a10") for i, s in enumerate(ids)}, ids)
    assert text.labels == ["a10", "b"]


def test_numeric_groups_file_reference_from_the_command_line(tmp_path, capsys):
    g = pd.read_csv(GROUPS)
    g["group"] = g["group"].map({"A": "10", "B": "9"})
    g.to_csv(tmp_path / "g.csv", index=False)
    summ = tmp_path / "s.json"
    assert run_cli(["calibrate", RESPONSES, "--groups", tmp_path / "g.csv", "--model", "2pl",
                    "-q", "-o", tmp_path / "b.csv", "--summary", summ]) == 0
    assert json.loads(summ.read_text())["groups"]["reference"] == "9"


def test_anova_dims_beyond_the_items_is_refused_in_the_options_words(small, capsys):
    # was "n_dims=50 needs more than 50 items", after the one-dimensional fit had run
    one_line_error(capsys, ["anova", small / "small.csv", "--model", "2pl", "--dims", "1",
                            "--dims", "50"], "--dims 50 needs more than 50 items", "have 6")


def test_group_sizes_in_the_summary_are_defined_as_the_fits(tmp_path):
    """Each group's n_subjects counts its rows and n_observations the subjects they stand for,
    as the summary's own n_subjects and n_observations (a group's n_subjects was the sum of
    pattern frequencies, the top level's the rows)."""
    from atlascat.irt.calibrate import calibrate

    x = pd.read_csv(RESPONSES, index_col=0).iloc[:, 3:17]
    g = pd.read_csv(GROUPS, index_col=0)["group"]
    key = (x.astype(str).agg(",".join, axis=1) + "|" + g).to_numpy()
    _, first, count = np.unique(key, return_index=True, return_counts=True)
    res = calibrate(x.iloc[first], "2pl", groups=g.iloc[first], weights=count.astype(float),
                    check_dimensions=False)
    s = res.to_dict()
    assert sum(r["n_subjects"] for r in s["groups"]["groups"]) == s["n_subjects"] == len(first)
    assert sum(r["n_observations"] for r in s["groups"]["groups"]) == s["n_observations"] == 2000


def test_anova_groups_with_a_subject_without_answers(with_empty, tmp_path, capsys):
    folder, _, _ = with_empty
    out = tmp_path / "t.csv"
    # was "groups names 1 subject(s) not in the responses"
    assert run_cli(["anova", folder / "r.csv", "--model", "2pl", "--groups", folder / "g.csv",
                    "-o", out]) == 0
    table = pd.read_csv(out, index_col=0)
    assert list(table.index) == ["2pl", "2pl-groups"] and table.loc["2pl-groups", "df"] == 2
