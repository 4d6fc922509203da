"""`atlas score`: columns, methods, reconstruction, pattern tables, errors."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from atlascat.cli import main
from atlascat.irt.bank import ItemBank


@pytest.fixture
def small(tmp_path, rng):
    n = 12
    bank = ItemBank([f"X{k + 1}" for k in range(n)], rng.uniform(0.8, 2, n), rng.normal(size=n))
    theta = rng.normal(size=40)
    y = (rng.random((40, n)) < bank.probability(theta)).astype(float)
    y[0], y[1] = 1, 0
    y[2, :4] = np.nan
    df = pd.DataFrame(y, columns=[f"{k + 1}" for k in range(n)],
                      index=pd.Index([f"m{k}" for k in range(40)], name="model"))
    df["extra_item"] = 1.0
    resp = tmp_path / "resp.csv"
    df.to_csv(resp)
    bpath = bank.write(tmp_path / "bank.csv", format="mirt")
    return resp, bpath, y


@pytest.mark.parametrize("method", ["eap", "wle", "map", "ml"])
def test_score_methods(small, tmp_path, method):
    resp, bpath, y = small
    out = tmp_path / f"{method}.csv"
    assert main(["score", str(resp), "--bank", str(bpath), "--normalize-ids", "--method", method,
                 "-o", str(out)]) == 0
    df = pd.read_csv(out)
    assert list(df.columns[:6]) == ["subject_id", "theta", "se", "n_items", "mean_score", "flag"]
    assert df["n_items"].tolist()[:3] == [12, 12, 8]
    np.testing.assert_allclose(df["mean_score"], np.nanmean(y, axis=1))
    if method == "ml":
        assert df["flag"][:2].tolist() == ["perfect", "zero"]
        assert np.isinf(df["theta"][0]) and df["theta"][0] > 0
    else:
        assert np.isfinite(df["theta"]).all()


def test_score_reconstruction_and_errors(small, tmp_path):
    resp, bpath, _ = small
    out = tmp_path / "s.csv"
    assert main(["score", str(resp), "--bank", str(bpath), "--normalize-ids",
                 "--reconstruct", "gpirt", "--lambda", "0.3", "-o", str(out)]) == 0
    df = pd.read_csv(out)
    assert {"mean_score_pirt", "mean_score_gpirt"} <= set(df.columns)
    # every bank item answered by row 0: p-IRT equals the observed accuracy
    assert df["mean_score_pirt"][0] == pytest.approx(1.0)
    assert main(["score", str(resp), "--bank", str(bpath), "--normalize-ids",
                 "--extra-items", "error"]) == 2
    assert main(["score", str(resp), "--bank", str(bpath), "--method", "bayes"]) == 2
    assert main(["score", str(resp), "--bank", str(bpath)]) == 2      # ids need --normalize-ids
    assert main(["score", str(resp), "--bank", str(bpath), "--normalize-ids",
                 "--reconstruct", "gpirt"]) == 2                        # lambda or calibration


def test_score_pattern_table(shared_data, tmp_path):
    out = tmp_path / "lsat.csv"
    bank = ItemBank([f"item{k}" for k in range(1, 6)], [1, 1, 1, 1, 1], [0, 0, 0, 0, 0])
    bpath = bank.write(tmp_path / "b.csv")
    assert main(["score", str(shared_data / "classic" / "lsat7_patterns.csv"), "--bank",
                 str(bpath), "--freq-column", "freq", "-o", str(out)]) == 0
    df = pd.read_csv(out)
    assert len(df) == 32 and df["freq"].sum() == 1000
