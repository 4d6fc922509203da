"""A data scientist's walk through the Python API (notebook use, no CLI): bank folders, fitted
objects' reprs and tables, live results read from Python."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from atlascat.bankdir import build_bank, load_bank_dir


@pytest.fixture(scope="module")
def matrix_csv(tmp_path_factory):
    """A 2PL matrix of 40 models x 60 items, written as a CSV (models = rows)."""
    rng = np.random.default_rng(3)
    theta = rng.normal(size=40)
    a, b = rng.lognormal(0, 0.3, 60), rng.normal(size=60)
    p = 1 / (1 + np.exp(-a * (theta[:, None] - b)))
    y = (rng.random(p.shape) < p).astype(int)
    df = pd.DataFrame(y, index=[f"m{i}" for i in range(40)],
                      columns=[f"q{j}" for j in range(60)]).rename_axis("model")
    path = tmp_path_factory.mktemp("walk") / "results.csv"
    df.to_csv(path)
    return path


@pytest.fixture(scope="module")
def folder(matrix_csv, tmp_path_factory):
    return build_bank(matrix_csv, tmp_path_factory.mktemp("bank") / "b", chance=0.25, folds=0)


def test_bank_folder_repr_is_one_short_line(folder):
    """The dataclass repr printed the whole manifest (every source model and dropped item:
    thousands of characters in a notebook cell)."""
    for f in (folder, load_bank_dir(folder.path)):
        text = repr(f)
        assert "\n" not in text and len(text) < 250, text
        assert "benchmark='results'" in text and "40 models" in text
        assert "ItemBank(" in text and "predictor.json" in text
        assert "m0" not in text            # no model list


def test_replay_predictor_is_atlas_simulate_on_the_folder(folder, matrix_csv, tmp_path):
    """docs/your_benchmark.md named predict_scores as simulate's prediction; on a folder with a
    predictor, `atlas simulate` is replay_predictor(folder, responses, budget, seed): the same
    numbers, row for row, and the same items asked."""
    from typer.testing import CliRunner

    from atlascat.bankdir import replay_predictor
    from atlascat.cli import app
    from atlascat.responses import ResponseMatrix

    out = tmp_path / "sim"
    r = CliRunner().invoke(app, ["simulate", str(matrix_csv), "--bank", str(folder.path),
                                 "--max-items", "20", "--seed", "4", "-o", str(out)])
    assert r.exit_code == 0, r.output
    cli = pd.read_csv(out / "person_scores.csv", keep_default_na=False, na_values=[""])
    py, asked = replay_predictor(load_bank_dir(folder.path), ResponseMatrix.read(matrix_csv),
                                 budget=20, seed=4, selected=True)
    assert list(cli["subject_id"]) == list(py["subject_id"])
    for c in ("n_items", "score", "score_lo", "score_hi", "se", "theta"):
        np.testing.assert_allclose(cli[c].to_numpy(float), py[c].to_numpy(float), rtol=1e-12)
    sel = pd.read_csv(out / "selected_items.csv")
    assert list(sel["item_id"]) == list(asked["item_id"])
    doc = (Path(__file__).resolve().parents[1] / "docs" / "your_benchmark.md").read_text()
    assert "replay_predictor(" in doc and "is the\nprediction `simulate`" not in doc
