"""Every command a user runs on a graded bank or a matrix of judge ratings either works on the
ratings' own scale or refuses with one line naming why (never a traceback, never a silent
binary reading, never an option accepted and ignored)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from atlascat.cli import app
from atlascat.errors import AtlasError
from atlascat.irt import polytomous as poly
from atlascat.irt.polybank import PolyBank

N_MODELS, N_ITEMS = 120, 12


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    """Judge ratings 1-10 of 120 models on 12 prompts (graded model, 10% missing) and the
    graded bank they were drawn from."""
    root = tmp_path_factory.mktemp("ordinal_commands")
    rng = np.random.default_rng(5)
    a = rng.lognormal(0.2, 0.3, N_ITEMS)
    d = -np.sort(rng.normal(0, 1.5, (N_ITEMS, 9)), axis=1) * a[:, None]
    params = np.column_stack([a, d])
    ids = [f"q{j}" for j in range(N_ITEMS)]
    r = poly.sample("graded", params, rng.normal(size=N_MODELS), rng).astype(float) + 1
    r[rng.random(r.shape) < 0.1] = np.nan
    pd.DataFrame(r, index=[f"m{i}" for i in range(N_MODELS)], columns=ids).rename_axis(
        "model").to_csv(root / "judge.csv")
    PolyBank(ids, params, "graded", [np.arange(1.0, 11.0)] * N_ITEMS).write(root / "bank.csv")
    return root


def _run(*args: str, fails: bool = False):
    r = CliRunner().invoke(app, list(args))
    if fails:   # the entry point prints an AtlasError as one line and exits 2
        assert isinstance(r.exception, AtlasError), (r.output, r.exception)
        return str(r.exception)
    assert r.exit_code == 0, r.output + repr(r.exception)
    return r.output


def test_info_describes_a_ratings_matrix_on_its_scale(root):
    out = json.loads(_run("info", str(root / "judge.csv"), "--json"))
    assert out["kind"] == "ratings"
    assert (out["subjects"], out["items"]) == (N_MODELS, N_ITEMS)
    assert out["levels"][0] == 1 and out["levels"][-1] == 10
    assert 1 <= out["mean_rating_quantiles"]["median"] <= 10
    text = _run("info", str(root / "judge.csv"))
    assert "ratings matrix (levels 1-10" in text and "accuracy" not in text


def test_info_describes_a_graded_bank(root):
    out = json.loads(_run("info", str(root / "bank.csv"), "--json"))
    assert out["kind"] == "bank" and out["model"] == "graded" and out["n_items"] == N_ITEMS
    assert out["n_categories"] == {"min": 10, "max": 10}
    assert out["levels"] == {"1;2;3;4;5;6;7;8;9;10": N_ITEMS}
    bank = PolyBank.read(root / "bank.csv")
    assert out["quantiles"]["a1"]["max"] == pytest.approx(bank.a.max(), abs=1e-4)
    assert "12 item(s) rated 1;2;3;4;5;6;7;8;9;10" in _run("info", str(root / "bank.csv"))


@pytest.mark.parametrize("command", [["items"], ["items", "RESPONSES"], ["fit", "RESPONSES"]])
def test_binary_item_reports_refuse_a_graded_bank_in_one_line(root, command):
    args = [str(root / "judge.csv") if c == "RESPONSES" else c for c in command]
    msg = _run(*args, "--bank", str(root / "bank.csv"), fails=True)
    assert "ordinal (graded) items" in msg and "\n" not in msg


def test_simulate_refuses_batches_on_a_graded_bank(root, tmp_path):
    msg = _run("simulate", str(root / "judge.csv"), "--bank", str(root / "bank.csv"),
               "--batch-size", "3", "-o", str(tmp_path / "sim"), fails=True)
    assert "one item a round" in msg


def test_simulate_writes_the_selected_folder_on_a_graded_bank(root, tmp_path):
    out = tmp_path / "sim"
    _run("simulate", str(root / "judge.csv"), "--bank", str(root / "bank.csv"), "-q",
         "--min-items", "3", "--max-items", "6", "--selected-folder", "-o", str(out))
    files = sorted(p.stem for p in (out / "selected_items").glob("*.csv"))
    assert len(files) == N_MODELS
    long = pd.read_csv(out / "selected_items.csv", dtype={"subject_id": str})
    one = pd.read_csv(out / "selected_items" / "m7.csv")
    mine = long[long.subject_id == "m7"].drop(columns="subject_id").reset_index(drop=True)
    pd.testing.assert_frame_equal(one, mine, check_dtype=False)
