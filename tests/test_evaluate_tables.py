"""Comparison tables: numeric frames, display formatting, Markdown and files."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from atlascat.errors import ConfigError
from atlascat.studies import tables


def _summary():
    return pd.DataFrame({
        "method": ["Random-100", "Anchor-100", "ATLAS tau=0.2"],
        "items_mean": [100.0, 100.0, 35.25], "items_sd": [0.0, 0.0, 12.5],
        "theta_mae": [0.1834, 0.2012, 0.1173], "theta_mae_se": [0.0074, 0.0081, 0.0066],
        "ies": [1.0, 1.097, 0.2255], "rie": [1.0, 1.2, 0.14],
        "coverage": [0.95, 0.9, 0.9321], "coverage_joint": [0.97, 0.93, 0.96],
        "acc_pirt_mae": [0.029, 0.031, 0.034], "acc_pirt_mae_se": [0.001, 0.0014, 0.0015],
        "acc_direct_mae": [0.05, 0.02, np.nan], "acc_direct_mae_se": [0.002, 0.001, np.nan],
        "exposure_mean": [100 / 317, 100 / 317, 0.05], "exposure_max": [1.0, 1.0, 0.61],
        "exposure_unused": [217 / 317, 217 / 317, 0.4], "overlap": [1.0, 1.0, 0.21],
        "seconds_mean": [1e-4, 1e-4, 0.0123]})


def test_layout_of_the_three_tables():
    t = tables.make_tables(_summary())
    assert list(t) == ["ability", "accuracy", "security"]
    assert list(t["ability"].columns) == ["method", "items_mean", "theta_mae", "theta_mae_se",
                                          "ies", "rie", "coverage", "coverage_joint"]
    # (coverage_posterior is only listed when the summary has it)
    assert list(t["security"].columns)[-2:] == ["overlap", "seconds_mean"]
    with pytest.raises(ConfigError, match="unknown table"):
        tables.make_table(_summary(), "table9")


def test_formatting():
    f = tables.format_table(tables.make_table(_summary(), "ability"))
    assert list(f.columns) == ["method", "Items", "θ MAE ± SE", "IES", "RIE", "Coverage 95%",
                               "Cov. (+ref SE)"]
    row = f.iloc[2]
    assert row["θ MAE ± SE"] == "0.117 ± 0.007"
    assert row["Items"] == "35.2"
    assert row["Coverage 95%"] == "93.2%"
    assert row["IES"] == "0.226"
    acc = tables.format_table(tables.make_table(_summary(), "accuracy"))
    assert acc.iloc[2]["Direct acc. MAE ± SE"] == "–"


def test_markdown_is_a_valid_pipe_table():
    md = tables.to_markdown(tables.format_table(tables.make_table(_summary(), "security")),
                            title="T6")
    lines = [line for line in md.splitlines() if line.startswith("|")]
    assert md.startswith("**T6**")
    assert len(lines) == 2 + 3  # header, separator, three methods
    assert len({line.count("|") for line in lines}) == 1  # same number of cells on every line
    assert lines[1].startswith("|:") and lines[1].rstrip().endswith(":|")
    assert "ATLAS tau=0.2" in lines[4] and "21.0%" in lines[4]


def test_wide_table_and_files(tmp_path):
    s = pd.concat([_summary().assign(benchmark="arc"),
                   _summary().iloc[[0, 2]].assign(benchmark="gsm8k")], ignore_index=True)
    wide = tables.wide_ability_table(s)
    assert list(wide.columns) == ["Method", "arc", "gsm8k"]
    assert wide.set_index("Method").loc["Anchor-100", "gsm8k"] == "–"
    assert wide.set_index("Method").loc["ATLAS tau=0.2", "arc"] == "0.117 ± 0.007 (35)"
    paths = tables.write_tables(s, tmp_path)
    back = pd.read_csv(paths["ability"])
    assert list(back.columns[:2]) == ["benchmark", "method"]
    np.testing.assert_allclose(back["theta_mae"], s["theta_mae"])
    text = paths["markdown"].read_text()
    assert "Table 2" in text and "Table 3" in text and "Table 6" in text and "by benchmark" in text
