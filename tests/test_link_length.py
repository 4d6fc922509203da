"""A bank folder's adaptive test shorter than the one its link was fitted on: the interval is
widened by the length factor measured on held-out models (``ScoreLink.length_factor``, from
``cross_fit_factor``), so a 10-item test's 95% interval still covers held-out models."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from atlascat.bankdir import load_bank_dir
from atlascat.cli import main
from atlascat.errors import BankError
from atlascat.scorelink import ScoreLink
from atlascat.scorelink.batch import answer_table, predict_batch


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A folder built from 30 source models' continuous scores in [0, 1] (a logistic curve
    plus noise, 80 items), and 200 held-out models' scores."""
    root = tmp_path_factory.mktemp("length")
    rng = np.random.default_rng(0)
    th, b = rng.normal(0, 1, 230), rng.normal(0, 1, 80)
    y = np.clip(1 / (1 + np.exp(-(th[:, None] - b))) + rng.normal(0, 0.1, (230, 80)), 0, 1)
    df = pd.DataFrame(y, index=pd.Index([f"m{i}" for i in range(230)], name="model"),
                      columns=[f"i{j}" for j in range(80)])
    df.iloc[:30].to_csv(root / "src.csv")
    df.iloc[30:].to_csv(root / "tgt.csv")
    assert main(["build-bank", str(root / "src.csv"), "-o", str(root / "bank"), "-q"]) == 0
    return root, df.iloc[30:].mean(axis=1)


def test_the_build_summary_names_the_shorter_tests_factors(folder, tmp_path, capsys):
    root, _ = folder
    assert main(["build-bank", str(root / "src.csv"), "-o", str(tmp_path / "b")]) == 0
    row = next(ln for ln in capsys.readouterr().out.splitlines() if "interval widened" in ln)
    lf = load_bank_dir(tmp_path / "b").link.length_factor
    assert f"x{lf['factors'][1]:.2f} at 10" in row and "items" in row


def test_a_short_adaptive_test_keeps_its_coverage(folder, tmp_path):
    root, truth = folder
    link = load_bank_dir(root / "bank").link
    lf = link.length_factor
    assert lf is not None and lf["counts"][0] == 5 and lf["factors"][-1] == 1.0
    assert np.all(np.diff(lf["factors"]) <= 0) and lf["factors"][1] > 1.5   # at 10 items
    out = tmp_path / "sim"
    assert main(["simulate", "--bank", str(root / "bank"), str(root / "tgt.csv"), "--design",
                 "adaptive", "--max-items", "10", "--min-items", "10", "-o", str(out),
                 "-q"]) == 0
    ps = pd.read_csv(out / "person_scores.csv").set_index("subject_id")
    t = truth.reindex(ps.index)
    covered = ((ps["score_lo"] <= t) & (t <= ps["score_hi"])).mean()
    assert covered >= 0.9        # 0.33 with the interval fitted on 50-item tests alone


def test_every_prediction_path_applies_the_same_factor(folder):
    root, _ = folder
    link = load_bank_dir(root / "bank").link
    ids = link.item_ids[:7]
    answers = {i: 0.4 + 0.05 * k for k, i in enumerate(ids)}
    one = link.predict(0.3, 0.5, answers)
    administered = pd.DataFrame({"subject_id": "x", "item_id": ids,
                                 "score": list(answers.values())})
    batch = predict_batch(link, [0.3], [0.5], answer_table(link, ["x"], administered))
    asked = np.isin(link.item_ids, ids)[None, :]
    y = np.zeros((1, len(link.item_ids)))
    y[0, asked[0]] = [answers[i] for i in np.asarray(link.item_ids)[asked[0]]]
    score, lo, hi = link.predict_many(np.array([0.3]), np.array([0.5]), asked=asked, y=y)
    for got in ((batch.lo[0], batch.hi[0]), (lo[0], hi[0])):
        assert got == pytest.approx((one.lo, one.hi), abs=1e-12)
    plain = ScoreLink.from_dict({**link.to_dict(), "length_factor": None})
    wide = one.hi - one.lo
    assert wide > plain.predict(0.3, 0.5, answers).hi - plain.predict(0.3, 0.5, answers).lo
    assert link._length(7) == pytest.approx(np.interp(np.log(7), np.log(link.length_factor[
        "counts"]), link.length_factor["factors"]))
    assert link._length(0) == 1.0 and link._length(500) == 1.0


def test_the_factor_round_trips_and_bad_ones_are_refused(folder):
    root, _ = folder
    d = json.loads((root / "bank" / "link.json").read_text())
    again = ScoreLink.from_dict(d)
    assert again.to_dict()["length_factor"] == d["length_factor"]
    for bad in ({"counts": [10, 5], "factors": [2, 1]}, {"counts": [5], "factors": [0]},
                {"counts": [5, 10], "factors": [2]}):
        with pytest.raises(BankError, match="length factor"):
            ScoreLink.from_dict({**d, "length_factor": bad})
