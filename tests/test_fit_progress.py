"""Long fit statistics report their progress: M2 (binary and ordinal) calls ``progress(done,
total)`` after each step, and ``atlas fit`` draws it on a bar (an ordinal M2 on 150 items takes
about a minute)."""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd

from atlascat.cli import main
from atlascat.irt import fit
from atlascat.irt.bank import ItemBank
from atlascat.irt.polybank import PolyBank
from atlascat.irt.polyfitstats import m2_ordinal

POLY = Path(__file__).parent / "data" / "mirt_poly"


def test_ordinal_m2_reports_each_step():
    ratings = pd.read_csv(POLY / "sim_graded.csv", index_col=0)
    bank = PolyBank.read(POLY / "sim_graded_items.csv")
    calls = []
    res = m2_ordinal(ratings, bank, progress=lambda done, total: calls.append((done, total)))
    assert calls[0] == (0, 4) and calls[-1] == (4, 4)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)
    assert res.M2 == m2_ordinal(ratings, bank).M2


def test_binary_m2_reports_each_step(rng):
    bank = ItemBank([f"q{k}" for k in range(8)], rng.uniform(0.7, 2, 8), rng.normal(size=8))
    y = (rng.random((300, 8)) < bank.probability(rng.normal(size=300))).astype(float)
    calls = []
    fit.m2(y, bank, estimated="2pl", progress=lambda done, total: calls.append((done, total)))
    assert calls == [(0, 2), (1, 2), (2, 2)]


def test_atlas_fit_draws_m2_and_sx2_on_a_bar(monkeypatch, capsys):
    seen = []

    @contextmanager
    def recording_bar(description, total):
        current = [description]

        def advance(n=1, total=None):
            seen.append((current[0], n, total))

        def stage(name, total=None):
            current[0] = name
            seen.append((name, "stage", total))

        advance.stage = stage
        yield advance

    monkeypatch.setattr("atlascat.cli._common.progress_bar", recording_bar)
    assert main(["fit", str(POLY / "sim_graded.csv"), "--bank",
                 str(POLY / "sim_graded_items.csv")]) == 0
    assert sum(n for d, n, t in seen if d == "M2") == 4
    assert ("S-X2", "stage", 1) in seen and ("S-X2", 1, None) in seen
    seen.clear()
    data = Path(__file__).parent / "data" / "mirt_sx2"
    assert main(["fit", str(data / "sim2pl.csv"), "--bank",
                 str(data / "sim2pl_2pl_items.csv")]) == 0
    assert sum(n for d, n, t in seen if d == "M2") == 2
    assert ("S-X2", "stage", 1) in seen
    assert "M2 = " in capsys.readouterr().out


def test_partitioned_m2_reports_each_partition(rng):
    bank = ItemBank([f"q{k}" for k in range(12)], rng.uniform(0.7, 2, 12), rng.normal(size=12))
    y = (rng.random((300, 12)) < bank.probability(rng.normal(size=300))).astype(float)
    calls = []
    fit.m2_partitioned(y, bank, partition_size=4, estimated="2pl",
                       progress=lambda done, total: calls.append((done, total)))
    assert calls == [(0, 3), (1, 3), (2, 3), (3, 3)]


def test_fit_of_a_known_bank_says_no_parameter_was_estimated(capsys):
    data = Path(__file__).parent / "data" / "mirt_sx2"
    assert main(["fit", str(data / "sim2pl.csv"), "--bank", str(data / "sim2pl_2pl_items.csv"),
                 "--estimated", "none", "--no-items"]) == 0
    out = capsys.readouterr().out
    assert "(no parameter estimated: a bank from other data)" in out
    assert "none parameters" not in out


def test_fit_without_m2_degrees_of_freedom_still_gives_item_fit(tmp_path, capsys):
    """A 5-item 3PL has 15 moments for 15 parameters (mirt's M2 refuses; its itemfit runs):
    one line for M2, and the S-X2 table."""
    data = Path(__file__).parent / "data" / "mirt_sx2"
    items = pd.read_csv(data / "lsat7_2pl_items.csv")
    bank = ItemBank(items["X"].astype(str), items["a1"], -items["d"] / items["a1"],
                    np.full(len(items), 0.1))
    path = bank.write(tmp_path / "lsat7_3pl.csv", format="mirt")
    assert main(["fit", str(data / "lsat7.csv"), "--bank", str(path), "--freq-column", "freq",
                 "-o", str(tmp_path / "fit.json")]) == 0
    out = capsys.readouterr().out
    assert ("M2 left out: 0 degrees of freedom (15 moments, 15 free parameters; mirt's M2 "
            "refuses too); item fit (S-X2) below") in out
    assert "S-X2 item fit" in out
    ratings = pd.read_csv(POLY / "science.csv", index_col=0).iloc[:, :3] - 1   # levels 0-3
    rpath = tmp_path / "three.csv"
    ratings.to_csv(rpath)
    gb = PolyBank.read(POLY / "science_graded_items.csv").subset(list(ratings.columns))
    gpath = tmp_path / "three_bank.csv"
    gb.write(gpath)
    assert main(["fit", str(rpath), "--bank", str(gpath)]) == 0
    out = capsys.readouterr().out
    assert "C2 left out: 0 degrees of freedom (12 moments, 12 free parameters" in out
    assert "S-X2 item fit" in out
    assert main(["fit", str(rpath), "--bank", str(gpath), "--no-items"]) == 2
