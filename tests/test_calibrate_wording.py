"""What `atlas calibrate` prints reads as mirt's: the model as mirt's itemtype spells it, and
the shared parameter's SE named for the model fitted (a 1PL's common slope, a Rasch fit's
latent variance)."""
from __future__ import annotations

import pytest

from atlascat.cli import main


@pytest.fixture
def lsat7(shared_data):
    return str(shared_data / "classic" / "lsat7_patterns.csv")


def test_1pl_reports_its_common_slope_se(lsat7, tmp_path, capsys):
    assert main(["calibrate", lsat7, "--freq-column", "freq", "--model", "1pl", "--se",
                 "-o", str(tmp_path / "b.csv")]) == 0
    out = capsys.readouterr().out
    assert "items (1PL)" in out
    assert "common slope SE 0.0649 (a1_se)" in out     # sqrt(var) = 1.0108, SE(var) 0.1312
    assert "latent variance SE" not in out


def test_rasch_named_as_mirt_and_its_variance_se(lsat7, tmp_path, capsys):
    assert main(["calibrate", lsat7, "--freq-column", "freq", "--model", "rasch", "--se",
                 "-o", str(tmp_path / "b.csv")]) == 0
    out = capsys.readouterr().out
    assert "items (Rasch)" in out and "RASCH" not in out
    assert "latent variance SE 0.1312" in out           # mirt: COV_11 1.0219, SE 0.13126
