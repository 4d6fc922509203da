"""A notebook user's walk through the Python API, never touching the CLI: a pandas DataFrame
(models as its index) in, calibration, scoring, a bank folder and its predictions out; the
inputs a user has are accepted and bad ones refused with a line naming the argument."""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import atlascat as at


def _frame(n=60, k=40, seed=0, prefix="org/model-"):
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=n)
    a, b = rng.lognormal(0, 0.3, k), rng.normal(size=k)
    y = (rng.random((n, k)) < 1 / (1 + np.exp(-a * (theta[:, None] - b)))).astype(float)
    return pd.DataFrame(y, index=[f"{prefix}{i}" for i in range(n)],
                        columns=[f"q{j}" for j in range(k)])


@pytest.fixture(scope="module")
def frame():
    return _frame()


def test_build_bank_takes_a_dataframe_or_a_response_matrix(frame, tmp_path):
    """build_bank(DataFrame) read the frame's column names as 40 files ("give one response
    matrix (got 40 files)"), and a ResponseMatrix raised TypeError: not iterable."""
    from atlascat.bankdir import build_bank

    frame.iloc[:50].to_csv(tmp_path / "src.csv")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from_file = build_bank(tmp_path / "src.csv", folds=0, budget=20)
        from_frame = build_bank(frame.iloc[:50], tmp_path / "bank", folds=0, budget=20)
        from_rm = build_bank(at.ResponseMatrix.from_frame(frame.iloc[:50]), folds=0, budget=20,
                             name="mine")
    np.testing.assert_allclose(from_frame.bank.to_frame()[["a", "b"]],
                               from_file.bank.to_frame()[["a", "b"]])
    np.testing.assert_allclose(from_rm.bank.to_frame()[["a", "b"]],
                               from_file.bank.to_frame()[["a", "b"]])
    assert from_frame.manifest["source"]["files"] == []
    assert from_rm.benchmark == "mine"
    assert (tmp_path / "bank" / "manifest.json").exists()


def test_build_bank_frame_on_a_score_range(frame, tmp_path):
    from atlascat.bankdir import build_bank
    from atlascat.errors import ResponseDataError

    tens = frame.iloc[:50] * 9 + 1          # a 1-10 rating
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f = build_bank(tens, folds=0, budget=20, score_range=(1, 10))
    assert f.manifest["settings"]["score_range"] == [1.0, 10.0]
    with pytest.raises(ResponseDataError, match="outside"):
        build_bank(tens + 1, folds=0, budget=20, score_range=(1, 10))
