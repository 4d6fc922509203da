"""A multiple-group bank knows it is one: ``atlas calibrate --groups`` records the groups'
priors in the bank (a ``group_priors`` column, every row the same JSON text, in our format and
mirt's); ``atlas score``, ``fit`` and ``items`` on it without ``--groups`` warn in one line
naming the options, and a ``--summary`` of another fit is a one-line error. ``atlas fit
--groups --group-delta mirt`` is mirt's M2 (:func:`atlascat.irt.groupfit.m2_groups` with
``group_delta=False``)."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from atlascat.irt.bank import ItemBank
from atlascat.irt.groupscore import bank_group_priors, group_priors
from atlascat.irt.polybank import PolyBank

from cli_checks import one_line_error, run_cli
from mirt_groups_data import DATA, read_answers

RATINGS = DATA / "ordinal_responses.csv"
RATING_GROUPS = DATA / "ordinal_groups.csv"
WARNING = "the bank is from a multiple-group fit (groups A, B)"


@pytest.fixture(scope="module")
def binary(tmp_path_factory):
    """A 2PL grouped calibration: its bank, summary and the same bank in mirt's format."""
    d = tmp_path_factory.mktemp("binary")
    bank, summary, mirt = d / "bank.csv", d / "fit.json", d / "mirt.csv"
    args = ["calibrate", DATA / "responses.csv", "--model", "2pl", "--prior-a", "none",
            "--groups", DATA / "groups.csv", "--quiet"]
    assert run_cli([*args, "-o", bank, "--summary", summary]) == 0
    assert run_cli([*args, "-o", mirt, "--format", "mirt"]) == 0
    return bank, summary, mirt


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    d = tmp_path_factory.mktemp("graded")
    bank, summary = d / "bank.csv", d / "fit.json"
    assert run_cli(["calibrate", RATINGS, "--model", "graded", "--groups", RATING_GROUPS,
                    "--summary", summary, "-o", bank, "--quiet"]) == 0
    return bank, summary


def _warnings(capsys) -> list[str]:
    return [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("warning: ")]


def test_the_grouped_bank_records_its_groups_priors(binary, graded, tmp_path):
    bank, summary, mirt = binary
    priors = group_priors(summary)
    assert list(priors) == ["A", "B"] and priors["B"][0] > 0.5
    for path in (bank, mirt):       # our format and mirt's: the same record, read back
        got = bank_group_priors(ItemBank.read(path))
        assert got == priors and list(got) == ["A", "B"]      # JSON numbers: exact
        df = pd.read_csv(path)      # a plain reader: one more text column, parameters intact
        assert df["group_priors"].nunique() == 1
        assert json.loads(df["group_priors"][0]) == {g: list(v) for g, v in priors.items()}
    assert list(pd.read_csv(mirt).columns[:5]) == ["X", "a1", "d", "g", "u"]
    poly, poly_summary = graded
    assert bank_group_priors(PolyBank.read(poly)) == group_priors(poly_summary)
    one = tmp_path / "one.csv"      # a one-group fit records none
    assert run_cli(["calibrate", DATA / "responses.csv", "--model", "2pl", "--drop-empty",
                    "-o", one, "--quiet"]) == 0
    assert "group_priors" not in pd.read_csv(one) and bank_group_priors(ItemBank.read(one)) is None


def test_score_without_groups_warns_in_one_line(binary, capsys, tmp_path):
    bank, summary, mirt = binary
    out = tmp_path / "s.csv"
    for path in (bank, mirt):
        assert run_cli(["score", DATA / "responses.csv", "--bank", path, "-o", out]) == 0
        (line,) = _warnings(capsys)
        assert WARNING in line and "scored under N(0, 1)" in line
        assert "--groups" in line and "--summary" in line
    assert run_cli(["score", DATA / "responses.csv", "--bank", bank, "--prior-sd", "2", "-o",
                    out]) == 0
    assert "scored under N(0, 2^2)" in _warnings(capsys)[0]
    assert run_cli(["score", DATA / "responses.csv", "--bank", bank, "-m", "ml", "-o",
                    out]) == 0
    assert _warnings(capsys) == []              # ML takes no prior
    assert run_cli(["score", DATA / "responses.csv", "--bank", bank, "--groups",
                    DATA / "groups.csv", "--summary", summary, "-o", out]) == 0
    assert _warnings(capsys) == []


def test_fit_and_items_without_groups_warn(binary, capsys):
    bank, _, _ = binary
    run_cli(["fit", DATA / "responses.csv", "--bank", bank, "--no-items"])
    assert any(WARNING in w and "M2 and S-X2" in w for w in _warnings(capsys))
    assert run_cli(["items", "--bank", bank]) == 0
    (line,) = _warnings(capsys)
    assert WARNING in line and "information share computed" in line


def test_an_ordinal_grouped_bank_warns_too(graded, capsys, tmp_path):
    bank, summary = graded
    assert run_cli(["score", RATINGS, "--bank", bank, "-o", tmp_path / "s.csv"]) == 0
    (line,) = _warnings(capsys)
    assert WARNING in line
    run_cli(["fit", RATINGS, "--bank", bank, "--no-items"])
    assert any(WARNING in w for w in _warnings(capsys))


@pytest.mark.parametrize("command", ["score", "fit", "items"])
def test_a_summary_of_another_fit_is_one_line(binary, command, capsys, tmp_path):
    bank, summary, _ = binary
    info = json.loads(summary.read_text())
    info["groups"]["groups"][1]["mean"] += 0.25
    other = tmp_path / "other.json"
    other.write_text(json.dumps(info))
    capsys.readouterr()
    one_line_error(capsys, [command, DATA / "responses.csv", "--bank", bank, "--groups",
                            DATA / "groups.csv", "--summary", other],
                   "--summary:", "group 'B'", "the fit that wrote the bank")
    info["groups"]["groups"][1]["group"] = "C"
    other.write_text(json.dumps(info))
    one_line_error(capsys, [command, DATA / "responses.csv", "--bank", bank, "--groups",
                            DATA / "groups.csv", "--summary", other],
                   "fitted with groups A, B", "holds A, C")
    one_line_error(capsys, [command, DATA / "responses.csv", "--bank", bank, "--groups",
                            DATA / "groups.csv"], "--groups and --summary go together")
    one_line_error(capsys, [command, DATA / "responses.csv", "--bank", bank, "--summary",
                            summary], "--groups and --summary go together")


def test_group_delta_mirt_is_the_librarys_mirt_m2(binary, capsys, tmp_path):
    from atlascat.irt.groupfit import m2_groups

    bank, summary, _ = binary
    x, groups = read_answers()[:2]
    out = tmp_path / "f.json"
    base = ["fit", DATA / "responses.csv", "--bank", bank, "--groups", DATA / "groups.csv",
            "--summary", summary, "--no-items", "-o", out]
    reports = {}
    for variant in ("mirt", "full", None):
        assert run_cli(base + ([] if variant is None else ["--group-delta", variant])) == 0
        reports[variant] = json.loads(out.read_text())
    lib = {d: m2_groups(x, ItemBank.read(bank), groups, summary, group_delta=d)
           for d in (False, True)}
    assert reports["mirt"]["M2"] == pytest.approx(lib[False]["M2"], rel=1e-12)
    assert reports["mirt"]["group_delta"] is False and reports[None]["group_delta"] is True
    assert reports[None]["M2"] == reports["full"]["M2"] == pytest.approx(lib[True]["M2"],
                                                                          rel=1e-12)
    assert abs(reports["mirt"]["M2"] - reports[None]["M2"]) > 1e-3
    assert reports["mirt"]["df"] == reports[None]["df"]
    capsys.readouterr()
    one_line_error(capsys, base + ["--group-delta", "none"], "--group-delta must be full or mirt")
    one_line_error(capsys, ["fit", DATA / "responses.csv", "--bank", bank, "--group-delta",
                            "mirt"], "--group-delta", "give --groups and --summary")


def test_group_delta_mirt_on_an_ordinal_bank(graded, tmp_path):
    from atlascat.irt.groupfit import m2_ordinal_groups

    bank, summary = graded
    ratings = pd.read_csv(RATINGS, index_col=0)
    groups = pd.read_csv(RATING_GROUPS, index_col=0)["group"]
    out = tmp_path / "f.json"
    base = ["fit", RATINGS, "--bank", bank, "--groups", RATING_GROUPS, "--summary", summary,
            "--no-items", "-o", out]
    assert run_cli(base + ["--group-delta", "mirt"]) == 0
    mirt = json.loads(out.read_text())
    assert run_cli(base) == 0
    full = json.loads(out.read_text())
    lib = m2_ordinal_groups(ratings, PolyBank.read(bank), groups, summary,
                            statistic=mirt["statistic"], group_delta=False)
    assert mirt["M2"] == pytest.approx(lib["M2"], rel=1e-12) and mirt["df"] == full["df"]
    assert mirt["group_delta"] is False and full["group_delta"] is True
    assert abs(mirt["M2"] - full["M2"]) > 1e-4
