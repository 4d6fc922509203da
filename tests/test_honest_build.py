"""Honest bank folders: what ``atlas build-bank`` says about what it built, and one model
asked the same items whether replayed (``atlas simulate``) or live (``atlas evaluate``)."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from atlascat.cli import app


@pytest.fixture(scope="module")
def musr(tmp_path_factory, shared_data):
    """A bank folder from 40 MuSR models, and six other models as targets."""
    df = pd.read_csv(shared_data / "benchpred" / "v2_musr.csv.gz", index_col=0)
    df = df[~df.index.duplicated()]
    idx = np.random.default_rng(0).permutation(len(df))
    root = tmp_path_factory.mktemp("musr")
    df.iloc[idx[:40]].to_csv(root / "source.csv")
    df.iloc[idx[40:46]].to_csv(root / "targets.csv")
    r = CliRunner().invoke(app, ["build-bank", str(root / "source.csv"), "--name", "MuSR",
                                 "-o", str(root / "bank")])
    assert r.exit_code == 0, r.output
    return root, r.output


@pytest.mark.slow
def test_simulate_and_a_live_replay_ask_the_same_items_and_agree(musr, tmp_path):
    """Row 4 of the targets, simulated with the other rows and replayed live with the same
    seed: the same items in the same order, the same prediction and interval."""
    root, _ = musr
    r = CliRunner().invoke(app, ["simulate", str(root / "targets.csv"), "--bank",
                                 str(root / "bank"), "--seed", "3", "-o", str(tmp_path / "sim")])
    assert r.exit_code == 0, r.output
    ps = pd.read_csv(tmp_path / "sim" / "person_scores.csv").set_index("subject_id")
    model = str(ps.index[4])
    r = CliRunner().invoke(app, ["evaluate", "--bank", str(root / "bank"), "--subject",
                                 f"replay:{root / 'targets.csv'}#{model}", "--seed", "3", "-q",
                                 "-o", str(tmp_path / "live")])
    assert r.exit_code == 0, r.output
    row = json.loads((tmp_path / "live" / "results.json").read_text())[0]
    assert row["n_items"] == ps.loc[model, "n_items"]
    got = row["prediction"] if "prediction" in row else row["leaderboard"]
    cols = [c for c in ("score", "leaderboard_accuracy") if c in ps.columns][0]
    lo = [c for c in ("score_lo", "leaderboard_lo") if c in ps.columns][0]
    hi = [c for c in ("score_hi", "leaderboard_hi") if c in ps.columns][0]
    np.testing.assert_allclose([got["score"], got["lo"], got["hi"]],
                               ps.loc[model, [cols, lo, hi]].to_numpy(float), rtol=1e-12)
