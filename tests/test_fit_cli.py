"""`atlas fit`: JSON report on the LSAT7 pattern table (mirt's values), partitions, errors."""
from __future__ import annotations

import json

import numpy as np
import pytest

from atlascat.cli import main
from atlascat.irt.bank import ItemBank

MIRT_LSAT7 = {"a1": [0.988, 1.081, 1.706, 0.7651, 0.7358],
              "d": [1.8561, 0.808, 1.8043, 0.486, 1.8545]}


@pytest.fixture
def lsat7_bank(tmp_path):
    path = tmp_path / "lsat7_2pl.csv"
    ids = [f"item{k}" for k in range(1, 6)]
    a, d = np.array(MIRT_LSAT7["a1"]), np.array(MIRT_LSAT7["d"])
    ItemBank(ids, a, -d / a).write(path, format="mirt")
    return path


def test_fit_json_on_pattern_table(shared_data, lsat7_bank, tmp_path):
    out = tmp_path / "fit.json"
    code = main(["fit", str(shared_data / "classic" / "lsat7_patterns.csv"), "--bank",
                 str(lsat7_bank), "--freq-column", "freq", "--json", "-o", str(out),
                 "--person-fit", "--q3"])
    assert code == 0
    rep = json.loads(out.read_text())
    for key in ("M2", "df", "p", "RMSEA", "RMSEA_5", "RMSEA_95", "SRMSR", "TLI", "CFI", "items"):
        assert key in rep
    # mirt's published (rounded) estimates: M2 11.938 on 5 df (mirt: 11.93841 at full precision)
    assert rep["df"] == 5 and rep["M2"] == pytest.approx(11.938, abs=0.01)
    assert rep["n"] == 1000 and rep["n_subjects"] == 32
    assert [it["item_id"] for it in rep["items"]] == [f"item{k}" for k in range(1, 6)]
    assert rep["items"][1]["S_X2"] == pytest.approx(14.451071, abs=0.02)
    assert all(it["df_S_X2"] == 2 for it in rep["items"])
    assert "person_fit" in rep and "q3" in rep


def test_fit_partitions_and_estimated_none(tmp_path, rng, capsys):
    n = 30
    bank = ItemBank([f"q{k}" for k in range(n)], rng.uniform(0.8, 2, n), rng.normal(size=n),
                    rng.uniform(0, 0.2, n))
    theta = rng.normal(size=1500)
    y = (rng.random((1500, n)) < bank.probability(theta)).astype(int)
    import pandas as pd

    resp = tmp_path / "resp.csv"
    pd.DataFrame(y, columns=bank.item_ids, index=[f"m{k}" for k in range(1500)]).rename_axis(
        "model").to_csv(resp)
    bpath = bank.write(tmp_path / "bank.csv")
    out = tmp_path / "fit.json"
    assert main(["fit", str(resp), "--bank", str(bpath), "--estimated", "none",
                 "--partition-size", "10", "-o", str(out)]) == 0
    rep = json.loads(out.read_text())
    assert rep["n_partitions"] == 3 and len(rep["partitions"]) == 3
    assert all(p["df"] == 10 + 45 for p in rep["partitions"])     # no parameter estimated
    assert rep["RMSEA"] == pytest.approx(np.mean([p["RMSEA"] for p in rep["partitions"]]))
    assert len(rep["items"]) == n
    assert "RMSEA" in capsys.readouterr().out
    assert main(["fit", str(resp), "--bank", str(bpath), "--estimated", "6pl"]) == 2
