"""Walk of the evaluation-design features as a user (atlas design / arena / cost-aware stop)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from atlascat.cli import main
from atlascat.irt.polybank import PolyBank


def test_design_on_a_graded_bank_prints_the_thresholds(tmp_path, capsys):
    """A graded bank's form table shows each item's thresholds, not only its slope."""
    frame = pd.DataFrame({"item_id": [f"r{j}" for j in range(8)], "model": "graded",
                          "a1": np.linspace(0.8, 2.0, 8),
                          "d1": 1.5, "d2": 0.0, "d3": -1.5, "levels": "0;1;2;3"})
    path = tmp_path / "graded.csv"
    frame.to_csv(path, index=False)
    assert isinstance(PolyBank.read(path), PolyBank)
    assert main(["design", "--bank", str(path), "-k", "3", "--random-forms", "5"]) == 0
    text = capsys.readouterr().out
    header = next(line for line in text.splitlines() if "item_id" in line).split()
    assert {"a1", "d1", "d2", "d3"} <= set(header)
    assert "r7" in text   # the steepest item is in the form
