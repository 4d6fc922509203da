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
