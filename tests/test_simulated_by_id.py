"""``--subject simulate:THETA`` on a bank without item content (a folder built from a response
matrix, a bank file): the bank's own model asked by item id, as ``replay:`` is there
(docs/live.md: "a scripted model answering correctly with the bank's probability at THETA");
it used to be refused as a bank that has no content to ask."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from atlascat.cli import main


@pytest.fixture(scope="module")
def matrix_folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("simulated_by_id")
    rng = np.random.default_rng(3)
    theta, b = rng.normal(size=60), np.linspace(-2.5, 2.5, 70)
    y = (rng.random((60, 70)) < 1 / (1 + np.exp(-(theta[:, None] - b)))).astype(int)
    pd.DataFrame(y, index=pd.Index([f"m{i}" for i in range(60)], name="model"),
                 columns=[f"q{j}" for j in range(70)]).to_csv(root / "results.csv")
    assert main(["build-bank", str(root / "results.csv"), "-o", str(root / "bank"), "-q"]) == 0
    return root


def test_simulate_subject_on_a_folder_from_a_matrix_is_asked_by_item_id(matrix_folder, capsys):
    from atlascat.catalogue import BankRef
    from atlascat.live.subjects import SubjectSpec, is_item_scored

    ref = BankRef.from_option(str(matrix_folder / "bank"))
    subject = SubjectSpec.parse("simulate:1.0").build(ref.load())
    assert is_item_scored(subject)
    ids = list(ref.load().item_ids[:5])
    scores = [s for s, _ in subject.score_items(ids)]
    assert scores == [int(subject.correct(i)) for i in ids]       # the same draws, by id
    again = SubjectSpec.rebuild(subject.describe(), ref.load())    # what --resume rebuilds
    assert again.cache_key == subject.cache_key

    capsys.readouterr()
    out_dir = matrix_folder / "runs"
    for design, strong in (("predictor", "1.0"), ("adaptive", "1.0"), ("predictor", "-1.0")):
        assert main(["evaluate", "--bank", str(matrix_folder / "bank"), "--subject",
                     f"simulate:{strong}", "--design", design, "-q",
                     "-o", str(out_dir / f"{design}{strong}")]) == 0
    out = capsys.readouterr().out
    assert out.count("protocol: simulated (the bank's own model)") == 3
    assert "leaderboard" not in out and "no item content" not in out
    rows = [json.loads((out_dir / d / "results.json").read_text())[0]
            for d in ("predictor1.0", "predictor-1.0")]
    strong_score, weak_score = (r["prediction"]["score"] for r in rows)
    assert strong_score > weak_score             # the simulated theta moves the score


def test_simulate_subject_on_a_bank_file_without_content(matrix_folder, tmp_path, capsys):
    bank = tmp_path / "bank.csv"
    pd.DataFrame({"item_id": [f"q{j}" for j in range(40)], "a": 1.2,
                  "b": np.linspace(-2, 2, 40), "c": 0.0, "u": 1.0}).to_csv(bank, index=False)
    assert main(["evaluate", "--bank", str(bank), "--subject", "simulate:0.5", "--max-items",
                 "20", "-o", str(tmp_path / "run"), "-q"]) == 0
    out = capsys.readouterr().out
    assert "simulated(theta=0.5) on bank: theta" in out and "(20 items)" in out
