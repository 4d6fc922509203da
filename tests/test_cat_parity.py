"""Parity with the reference CAT (catR, the paper's code) on real answers.

Every trajectory in ``reference/catr_replay/arc_selected_items.zip`` (417 test models x three SE
thresholds, 1251 files, ~64,000 steps) is replayed through ``CATSession.record`` with
``CATConfig.reference()``; theta and SE must match catR's at every step. The zip's item ids are
the bank's R-style ids ('X514' = item 514 of the published ARC bank, not a row position).
"""
from __future__ import annotations

import io
import zipfile

import numpy as np
import pandas as pd
import pytest

from atlascat.cat.config import CATConfig
from atlascat.cat.session import CATSession
from atlascat.irt.bank import ItemBank


@pytest.fixture(scope="module")
def replay(shared_data):
    bank = ItemBank.read(shared_data / "atlas_banks" / "arc_3pl_bank.csv", normalize_ids=True)
    path = shared_data / "reference" / "catr_replay" / "arc_selected_items.zip"
    with zipfile.ZipFile(path) as zf:
        names = sorted(n for n in zf.namelist() if n.endswith(".csv"))
        frames = {n: pd.read_csv(io.BytesIO(zf.read(n))) for n in names}
    return bank, frames


def test_zip_covers_three_thresholds_and_bank_ids(replay):
    bank, frames = replay
    folders = {n.split("/")[0] for n in frames}
    assert folders == {"selected_items_0.1", "selected_items_0.2", "selected_items_0.3"}
    assert len(frames) == 1251
    ids = pd.concat([f["item_id"] for f in frames.values()]).unique()
    assert all(i.startswith("X") for i in ids)
    assert all(i[1:] in bank for i in ids)  # 'X514' is bank item '514'
    # the trajectories follow the paper's rules: >= 30 items unless SE never reached
    for name, f in frames.items():
        tau = float(name.split("_")[2].split("/")[0])
        n = len(f)
        assert list(f["order"]) == list(range(1, n + 1))
        assert n == 500 or (n >= 30 and f["se"].iloc[-1] <= tau)


def test_replay_reproduces_theta_and_se_at_every_step(replay):
    bank, frames = replay
    configs = {tau: CATConfig.reference(se_stop=tau) for tau in (0.1, 0.2, 0.3)}
    worst_theta = worst_se = 0.0
    n_steps = 0
    for name, f in frames.items():
        tau = float(name.split("_")[2].split("/")[0])
        s = CATSession(bank, configs[tau], rng=0)
        theta = np.empty(len(f))
        se = np.empty(len(f))
        for k, (item, score) in enumerate(zip(f["item_id"].tolist(), f["score"].tolist())):
            s.record(item, score)
            theta[k], se[k] = s.theta, s.se
        worst_theta = max(worst_theta, float(np.max(np.abs(theta - f["theta"].to_numpy()))))
        worst_se = max(worst_se, float(np.max(np.abs(se - f["se"].to_numpy()))))
        n_steps += len(f)
        # catR stopped where our rules stop
        assert s.done == (len(f) == 500 or (len(f) >= 30 and se[-1] <= tau)), name
    assert n_steps > 60000
    # measured: theta 4.3e-11, SE 2.1e-11 (catR writes 15 significant digits)
    assert worst_theta < 1e-8
    assert worst_se < 1e-8


def test_mirt_grid_differs_from_catr_grid(replay):
    """The reference settings matter: mirt's 61-node grid moves theta by far more than 1e-8."""
    bank, frames = replay
    f = next(iter(frames.values()))
    s = CATSession(bank, CATConfig(), rng=0)
    for item, score in zip(f["item_id"], f["score"]):
        s.record(item, score)
    assert abs(s.theta - f["theta"].iloc[-1]) > 1e-6


def test_fixed_length_cat_on_a_4pl_bank_equals_catr_randomcat():
    """A 4PL bank (data/catr_4pl/make_reference.R): 25 simulees with given answers, first item
    the b nearest 0, MFI without randomesque, EAP on 33 trapezoid nodes, 20 items: the same
    items, thetas and posterior SDs (catR's seProv) as catR::randomCAT at every step."""
    from pathlib import Path

    ref_dir = Path(__file__).parent / "data" / "catr_4pl"
    bank = ItemBank.read(ref_dir / "bank.csv")
    answers = pd.read_csv(ref_dir / "responses.csv").set_index("id")
    ref = pd.read_csv(ref_dir / "randomcat.csv")
    cfg = CATConfig.reference(randomesque=1, first_item_window=0.0, min_items=20, max_items=20,
                              se_stop=None, se_method="posterior")
    ids = list(bank.item_ids)
    for k, (_, row) in enumerate(answers.iterrows()):
        steps = ref[ref["subject"] == k]
        s = CATSession(bank, cfg, rng=0)
        for item_row, theta, se in zip(steps["item"], steps["theta"], steps["se"]):
            item = s.next_item()
            assert ids.index(item) == item_row
            s.record(item, int(row[item]))
            assert s.theta == pytest.approx(theta, abs=1e-10)
            assert s.se == pytest.approx(se, abs=1e-10)
