"""`atlas items`: report on the bundled ARC bank, with and without responses."""
from __future__ import annotations

import json

import pandas as pd

from atlascat.cli import main


def test_items_bundled_bank(tmp_path, capsys):
    out = tmp_path / "items.csv"
    assert main(["items", "--bank", "paper-arc", "-o", str(out)]) == 0
    df = pd.read_csv(out, dtype={"item_id": str}, keep_default_na=False)
    assert len(df) == 839
    assert df["issues"].str.contains("negative_a").sum() == (df["a"] < 0).sum()
    assert "flagged" in capsys.readouterr().out


def test_items_with_responses_json(shared_data, tmp_path, capsys):
    assert main(["items", "--bank", "paper-arc", str(shared_data / "openllm" / "dense_arc.csv.gz"),
                 "--json", "--estimated", "none"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["n_items"] == 292                       # bank items present in the matrix
    assert rep["counts"]["poor_fit"] > 0
    assert main(["items", "--bank", "nope.csv"]) == 2
