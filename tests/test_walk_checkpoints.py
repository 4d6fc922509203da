"""A user's walk comparing two checkpoints of their own model on their own benchmark: a bank
folder built from a small matrix, the checkpoints scored, replayed and compared."""
from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from cli_checks import run_cli


def _matrix(n=30, k=40, seed=0):
    """n models x k items (2PL), the last 3 items answered right by every model (the build
    drops them: they tell no model apart, yet the score is the mean over all k)."""
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=n)
    a, b = rng.lognormal(0, 0.3, k), rng.normal(size=k)
    y = (rng.random((n, k)) < 1 / (1 + np.exp(-a * (theta[:, None] - b)))).astype(float)
    y[:, -3:] = 1.0
    return pd.DataFrame(y, index=[f"ckpt-{i:02d}" for i in range(n)],
                        columns=[f"mine.{j}" for j in range(k)]).rename_axis("model")


@pytest.fixture(scope="module")
def walk(tmp_path_factory):
    from atlascat.bankdir import build_bank

    d = tmp_path_factory.mktemp("walk")
    df = _matrix()
    df.iloc[:26].to_csv(d / "source.csv")
    df.iloc[26:].to_csv(d / "ckpts.csv")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        folder = build_bank(d / "source.csv", d / "bank", folds=0, budget=20, name="MyBench")
    assert folder.manifest["items"]["n_bank"] < folder.manifest["items"]["n_results"]
    return d, df


def test_score_of_a_checkpoint_that_answered_every_item_is_its_mean(walk, capsys):
    """`atlas score CKPTS --bank DIR` of checkpoints that answered every item of the results
    gave the link's prediction with an interval, not their known mean (as `atlas evaluate
    --max-items ALL` does), whenever the build had dropped an item (here 3 that every source
    model answered right): the answers to dropped items never reached the known-mean rule."""
    d, df = walk
    assert run_cli(["score", d / "ckpts.csv", "--bank", d / "bank", "-o", d / "sc.csv"]) == 0
    capsys.readouterr()
    got = pd.read_csv(d / "sc.csv", index_col="subject_id")
    truth = df.iloc[26:].mean(axis=1)
    np.testing.assert_allclose(got.loc[truth.index, "score"], truth, atol=1e-7)
    np.testing.assert_allclose(got.loc[truth.index, "score_lo"], truth, atol=1e-7)
    np.testing.assert_allclose(got.loc[truth.index, "score_hi"], truth, atol=1e-7)
