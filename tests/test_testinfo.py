"""`atlas info BANK --theta`: test information, its SE and each item's information at chosen
abilities, equal to mirt 1.45.1's ``testinfo`` / ``iteminfo`` (tests/data/mirt_scores, made by
its make_reference.R) for a 2PL, a 3PL and graded / GPCM banks."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from atlascat.catalogue import load_bank
from atlascat.cli import main
from atlascat.errors import ConfigError
from atlascat.irt.testinfo import information_at, parse_thetas

DATA = Path(__file__).parent / "data" / "mirt_scores"


@pytest.mark.parametrize("name", ["lsat7_2pl", "lsat7_3pl", "science_graded", "science_gpcm"])
def test_cli_information_is_mirts(name, tmp_path, capsys):
    ref = pd.read_csv(DATA / f"{name}_info.csv").iloc[::4]
    theta = ",".join(f"{t:g}" for t in ref["theta"])
    out = tmp_path / "items.csv"
    assert main(["info", str(DATA / f"{name}_items.csv"), "--theta", theta,
                 "--item-information", str(out), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)["information"]
    np.testing.assert_allclose(info["test_information"], ref["test"], rtol=1e-10)
    np.testing.assert_allclose(info["se"], 1 / np.sqrt(ref["test"]), rtol=1e-10)
    items = pd.read_csv(out, index_col="item_id")
    want = ref.drop(columns=["theta", "test"]).T            # items x theta
    np.testing.assert_allclose(items.loc[want.index].to_numpy(), want.to_numpy(), rtol=1e-5)
    best = want.to_numpy().argmax(axis=0)
    assert [m[0] for m in info["most_informative"]] == list(want.index[best])


def test_the_table_prints_one_row_per_theta(tmp_path, capsys):
    assert main(["info", "arc", "--theta", "-2,0,2"]) == 0
    rows = [ln.split() for ln in capsys.readouterr().out.splitlines()
            if ln.strip().split(" ")[0] in ("-2", "0", "2")]
    assert [r[0] for r in rows] == ["-2", "0", "2"] and all(len(r) >= 6 for r in rows)


def test_bad_requests_are_one_line(tmp_path, capsys):
    with pytest.raises(ConfigError, match="comma-separated numbers"):
        parse_thetas("-2;0")
    with pytest.raises(ConfigError, match="finite"):
        information_at(load_bank("arc"), [0.0, np.inf])
    assert main(["info", "arc", "--item-information", str(tmp_path / "x.csv")]) == 2
    assert "needs --theta" in capsys.readouterr().err
    m = tmp_path / "m.csv"
    pd.DataFrame({"i1": [0, 1, 1], "i2": [1, 0, 1]}, index=["a", "b", "c"]).to_csv(m)
    assert main(["info", str(m), "--theta", "0"]) == 2
    assert "describe a bank" in capsys.readouterr().err


def test_a_bank_of_continuous_scores_counts_information_as_the_adaptive_test(tmp_path):
    """With a dispersion column each item's information is a^2 P Q / phi_j (the engine's)."""
    from atlascat.irt.bank import ItemBank

    bank = load_bank("arc")
    phi = np.linspace(0.1, 1.0, len(bank))
    meta = pd.DataFrame({"dispersion": phi})
    with_phi = ItemBank(bank.item_ids, bank.a, bank.b, bank.c, bank.u, metadata=meta)
    plain, tempered = information_at(bank, [0.0, 1.0]), information_at(with_phi, [0.0, 1.0])
    np.testing.assert_allclose(tempered.item, plain.item / phi, rtol=1e-12)
    np.testing.assert_allclose(tempered.se, 1 / np.sqrt(tempered.item.sum(axis=1)), rtol=1e-12)
