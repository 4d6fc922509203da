"""Three small defects a 2026-11-29 walk found.

1. ``atlas calibrate DATA --scores S.csv`` wrote subject_id, theta, se only, while ``atlas
   score DATA --bank BANK.csv`` writes n_items, mean_score / mean_rating (and an ordinal
   bank's predicted score), flag, group and freq too: now the two write the same columns.
2. Some CLI errors named the library's keyword (``quadpts``, ``tol``, ``max_iter``) rather
   than the option typed (``--quadpts``, ``--tol``, ``--max-iter``).
3. The fitted results' repr read ``n_iter=125 converged``: now ``n_iter=125, converged``.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from atlascat.irt.calibrate import calibrate
from atlascat.irt.multidimcal import calibrate_multidim


def _answers(n=200, m=8, seed=3):
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=n)
    b = np.linspace(-1.5, 1.5, m)
    y = (rng.random((n, m)) < 1 / (1 + np.exp(-(theta[:, None] - b)))).astype(float)
    return pd.DataFrame(y, index=[f"s{i}" for i in range(n)],
                        columns=[f"i{j}" for j in range(m)])


def test_result_reprs_separate_n_iter_from_the_state_by_a_comma():
    res = calibrate(_answers(), "2pl")
    text = repr(res)
    assert re.search(r"n_iter=\d+, (converged|not converged)", text), text
    md = calibrate_multidim(_answers(m=10), 2, max_iter=30)
    text = repr(md)
    assert re.search(r"n_iter=\d+, (converged|not converged)", text), text


# ------------------------------------------------ 1. calibrate --scores is atlas score's table
DATA = __import__("pathlib").Path(__file__).resolve().parent / "data"
GROUPS = DATA / "mirt_groups"
CASES = {
    "2pl-patterns": (DATA / "mirt_scores" / "lsat7.csv", ["--model", "2pl", "--no-filter"],
                     ["--freq-column", "freq"], None),
    "rasch-patterns": (DATA / "mirt_scores" / "lsat7.csv", ["--model", "rasch", "--no-filter"],
                       ["--freq-column", "freq"], None),
    "graded": (DATA / "mirt_poly" / "science.csv", ["--model", "graded"], [], None),
    "2pl-groups": (GROUPS / "responses.csv", ["--model", "2pl", "--no-filter"], [],
                   GROUPS / "groups.csv"),
    "graded-groups": (GROUPS / "ordinal_responses.csv", ["--model", "graded"], [],
                      GROUPS / "ordinal_groups.csv"),
    "2d-patterns": (DATA / "mirt_scores" / "lsat7.csv", ["--dims", "2", "--max-iter", "50"],
                    ["--freq-column", "freq"], None),
}


@pytest.mark.parametrize("case", list(CASES))
def test_calibrate_scores_have_the_columns_of_atlas_score(tmp_path, case):
    from atlascat.cli import main

    data, fit, read, groups = CASES[case]
    bank, summary = tmp_path / "bank.csv", tmp_path / "summary.json"
    theirs, ours = tmp_path / "calibrate.csv", tmp_path / "score.csv"
    grouped = [] if groups is None else ["--groups", str(groups), "--summary", str(summary)]
    assert main(["calibrate", str(data), *fit, *read, *grouped, "-o", str(bank), "--scores",
                 str(theirs), "--quiet"]) == 0
    assert main(["score", str(data), "--bank", str(bank), *read, *grouped, "-o", str(ours),
                 "--quiet"]) == 0
    got, want = pd.read_csv(theirs), pd.read_csv(ours)
    assert list(got.columns) == list(want.columns), (list(got.columns), list(want.columns))
    assert list(got.subject_id.astype(str)) == list(want.subject_id.astype(str))
    assert "freq" in got.columns if read else "freq" not in got.columns
    assert ("group" in got.columns) == (groups is not None)
    for col in want.columns:
        if pd.api.types.is_numeric_dtype(want[col]):
            np.testing.assert_allclose(got[col], want[col], atol=1e-7, rtol=1e-7, err_msg=col)
        else:
            assert list(got[col].astype(str)) == list(want[col].astype(str)), col


# ------------------------------------------------------ 2. errors name the options, not keywords
KEYWORDS = re.compile(r"(?<![\w-])(quadpts|tol|max_iter|partition_size|random_state|value_range"
                      r"|n_dims|method=)(?![\w-])")
LSAT7 = ["--freq-column", "freq"]
BAD = [  # (command line after the data, the option its error must name)
    (["calibrate", "--model", "2pl", "--quadpts", "0"], "--quadpts"),
    (["calibrate", "--model", "2pl", "--quadpts", "99999"], "--quadpts"),
    (["calibrate", "--model", "2pl", "--tol", "0"], "--tol"),
    (["calibrate", "--model", "2pl", "--tol", "nan"], "--tol"),
    (["calibrate", "--model", "2pl", "--max-iter", "0"], "--max-iter"),
    (["calibrate", "--model", "2pl", "--partition-size", "-1"], "--partition-size"),
    (["calibrate", "--model", "2pl", "--seed", "-1"], "--seed"),
    (["calibrate", "--dims", "2", "--quadpts", "1"], "--quadpts"),
    (["calibrate", "--dims", "2", "--quadpts", "99999"], "--quadpts"),  # was a MemoryError
    (["calibrate", "--dims", "2", "--tol", "-1"], "--tol"),
    (["calibrate", "--dims", "2", "--max-iter", "-1"], "--max-iter"),
    (["anova", "--model", "2pl", "--model", "rasch", "--quadpts", "-1"], "--quadpts"),
    (["score", "--quadpts", "0"], "--quadpts"),
]


def _bad(tmp_path, argv):
    data = str(DATA / "mirt_scores" / "lsat7.csv")
    if argv[0] == "score":
        return [argv[0], data, *LSAT7, "--bank", str(DATA / "mirt_scores" / "lsat7_2pl_items.csv"),
                *argv[1:], "-o", str(tmp_path / "s.csv")]
    out = [] if argv[0] == "anova" else ["-o", str(tmp_path / "b.csv"), "--quiet"]
    return [argv[0], data, *LSAT7, *argv[1:], *out]


def _one_line_error(capsys, argv, option):
    from atlascat.cli import main

    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and err.startswith("error: "), (code, err)
    assert option in err and not KEYWORDS.search(err), err
    assert "Traceback" not in err


@pytest.mark.parametrize("argv,option", BAD, ids=[" ".join(a[-3:]) for a, _ in BAD])
def test_a_bad_number_is_one_line_naming_the_option(tmp_path, capsys, argv, option):
    _one_line_error(capsys, _bad(tmp_path, argv), option)


@pytest.mark.parametrize("extra,option", [
    (["--quadpts", "0"], "--quadpts"), (["--tol", "0"], "--tol"),
    (["--max-iter", "-1"], "--max-iter"), (["--rating-range", "nan", "3"], "--rating-range")])
def test_a_bad_number_of_an_ordinal_or_grouped_fit_names_the_option(tmp_path, capsys, extra,
                                                                    option):
    _one_line_error(capsys, ["calibrate", str(DATA / "mirt_poly" / "science.csv"), "--model",
                             "graded", *extra, "-o", str(tmp_path / "b.csv"), "--quiet"], option)
    if option != "--rating-range":
        _one_line_error(capsys, ["calibrate", str(GROUPS / "responses.csv"), "--groups",
                                 str(GROUPS / "groups.csv"), "--model", "2pl", *extra, "-o",
                                 str(tmp_path / "b.csv"), "--quiet"], option)


def test_a_path_or_an_id_that_spells_a_keyword_is_left_as_it_is(tmp_path, capsys):
    from atlascat.cli import main

    missing = tmp_path / "tol" / "max_iter.csv"
    assert main(["calibrate", str(missing), "-o", str(tmp_path / "b.csv")]) == 2
    err = capsys.readouterr().err
    assert str(missing) in err.replace("\n", ""), err
