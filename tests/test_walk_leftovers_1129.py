"""Two leftovers of the 2026-11-29 walks.

1. ``atlas calibrate --scores`` (and the calibration result's per-subject theta / SE) scored
   EAP on the fit's 61-node grid while ``atlas score`` and ``estimate_ability`` score on
   mirt's fscores grid (121 nodes on [-6, 6]): on a 100-item bank the two disagreed in the
   fourth decimal. Now they are the same numbers (the fit's own grid is unchanged).
2. A suite member whose 95% interval reaches down to chance was warned "at or near chance
   (<= 81%)" although predicted at 78%: the warning now says what is true (the interval
   reaches chance: the score may be no better than guessing), fired exactly as before.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from atlascat.cli import main
from atlascat.irt import polytomous as poly
from atlascat.irt.ability import estimate_ability
from atlascat.irt.bank import ItemBank
from atlascat.irt.calibrate import calibrate
from atlascat.irt.defaults import QUADPTS, SCORE_QUADPTS
from atlascat.irt.polybank import PolyBank
from atlascat.irt.polycal import calibrate_ordinal
from atlascat.responses import ResponseMatrix

N_SUBJECTS, N_ITEMS = 300, 100


@pytest.fixture(scope="module")
def binary(tmp_path_factory):
    """0/1 answers of 300 models to 100 2PL items (5% missing)."""
    root = tmp_path_factory.mktemp("leftovers_binary")
    rng = np.random.default_rng(11)
    a, b = rng.lognormal(0.2, 0.3, N_ITEMS), rng.normal(0, 1, N_ITEMS)
    theta = rng.normal(size=N_SUBJECTS)
    y = (rng.random((N_SUBJECTS, N_ITEMS)) < 1 / (1 + np.exp(-a * (theta[:, None] - b))))
    y = y.astype(float)
    y[rng.random(y.shape) < 0.05] = np.nan
    frame = pd.DataFrame(y, index=[f"m{i}" for i in range(N_SUBJECTS)],
                         columns=[f"i{j}" for j in range(N_ITEMS)]).rename_axis("model")
    frame.to_csv(root / "answers.csv")
    return root, frame


@pytest.fixture(scope="module")
def ratings(tmp_path_factory):
    """Ratings 1-5 of 300 models on 40 graded items (5% missing)."""
    root = tmp_path_factory.mktemp("leftovers_graded")
    rng = np.random.default_rng(12)
    m = 40
    a = rng.lognormal(0.3, 0.3, m)
    d = -np.sort(rng.normal(0, 1.5, (m, 4)), axis=1) * a[:, None]
    r = poly.sample("graded", np.column_stack([a, d]), rng.normal(size=N_SUBJECTS),
                    rng).astype(float) + 1
    r[rng.random(r.shape) < 0.05] = np.nan
    frame = pd.DataFrame(r, index=[f"m{i}" for i in range(N_SUBJECTS)],
                         columns=[f"q{j}" for j in range(m)]).rename_axis("model")
    frame.to_csv(root / "ratings.csv")
    return root, frame


def _same_scores(scores_csv, expected: pd.DataFrame):
    got = pd.read_csv(scores_csv).set_index("subject_id")
    exp = expected.set_index("subject_id").loc[got.index]
    np.testing.assert_allclose(got["theta"], exp["theta"], atol=1e-8, rtol=0)
    np.testing.assert_allclose(got["se"], exp["se"], atol=1e-8, rtol=0)


@pytest.mark.parametrize("model", ["2pl", "rasch"])
def test_calibrate_scores_are_atlas_scores_on_the_written_bank(binary, tmp_path, model):
    root, frame = binary
    bank, scores, scored = tmp_path / "bank.csv", tmp_path / "theta.csv", tmp_path / "s.csv"
    assert main(["calibrate", str(root / "answers.csv"), "--model", model, "--no-filter",
                 "-o", str(bank), "--scores", str(scores), "--quiet"]) == 0
    written = ItemBank.read(bank)
    _same_scores(scores, estimate_ability(frame, written, "eap"))
    assert main(["score", str(root / "answers.csv"), "--bank", str(bank), "-o",
                 str(scored)]) == 0
    cli = pd.read_csv(scored).set_index("subject_id")
    got = pd.read_csv(scores).set_index("subject_id").loc[cli.index]
    np.testing.assert_allclose(got["theta"], cli["theta"], atol=1e-7, rtol=1e-7)
    np.testing.assert_allclose(got["se"], cli["se"], atol=1e-7, rtol=1e-7)


def test_the_result_exposes_fscores_scores_and_keeps_the_fit_grid(binary):
    _, frame = binary
    rm = ResponseMatrix(frame.to_numpy(), frame.index.to_numpy(), frame.columns.to_numpy())
    res = calibrate(rm, model="2pl", filter=False)
    assert res.settings["quadpts"] == QUADPTS != SCORE_QUADPTS     # the fit's own grid
    exp = estimate_ability(frame, res.bank, "eap")
    np.testing.assert_allclose(res.theta, exp["theta"], atol=1e-10, rtol=0)
    np.testing.assert_allclose(res.theta_se, exp["se"], atol=1e-10, rtol=0)


@pytest.mark.parametrize("model", ["graded", "pcm"])
def test_ordinal_calibrate_scores_are_atlas_scores(ratings, tmp_path, model):
    root, frame = ratings
    bank, scores, scored = tmp_path / "bank.csv", tmp_path / "theta.csv", tmp_path / "s.csv"
    assert main(["calibrate", str(root / "ratings.csv"), "--model", model, "-o", str(bank),
                 "--scores", str(scores), "--quiet"]) == 0
    _same_scores(scores, estimate_ability(frame, PolyBank.read(bank), "eap"))
    assert main(["score", str(root / "ratings.csv"), "--bank", str(bank), "-o",
                 str(scored)]) == 0
    cli = pd.read_csv(scored).set_index("subject_id")
    got = pd.read_csv(scores).set_index("subject_id").loc[cli.index]
    np.testing.assert_allclose(got["theta"], cli["theta"], atol=1e-7, rtol=1e-7)
    res = calibrate_ordinal(frame, model=model)
    exp = estimate_ability(frame, res.bank, "eap")
    np.testing.assert_allclose(res.theta, exp["theta"], atol=1e-10, rtol=0)
    assert res.settings["quadpts"] == QUADPTS


# ---------------------------------------------------------------- 2. the chance warning
def test_a_member_above_chance_is_not_said_to_be_at_chance():
    from atlascat.catalogue.links import load_score_link
    from atlascat.live.suite_session import member_warning

    wino = load_score_link("winogrande")
    chance = wino.support["chance"]
    w = member_warning(wino, 0.78, chance - 0.01, 0.81)
    assert w is not None and "at or near" not in w, w              # fires as before
    assert "reaches down to chance (50%)" in w and "may be no better than guessing" in w, w
    assert "49%" in w and "81%" in w, w
    near = member_warning(wino, 0.78, chance + 0.015, 0.81)
    assert near is not None and "nearly down to chance (50%)" in near, near
    assert member_warning(wino, 0.78, chance + 0.03, 0.81) is None   # the rule unchanged


def test_a_precision_stop_with_chance_in_the_interval_says_so_and_a_floor_stop_is_unchanged():
    from atlascat.scorelink.prediction import ScorePrediction, stop_note

    pred = ScorePrediction(0.6, 0.24, 0.7, 50.0, "arc", (), "", None, None)
    note = stop_note(pred, "score_precision", 0.25)
    assert note.startswith("its 95% interval (24% to 70%) reaches down to chance (25%)"), note
    assert stop_note(pred, "min_information", 0.25) == note
    assert stop_note(pred, "floor", 0.25) == "at or near chance (<= 70%)"
    assert stop_note(pred, "score_precision", 0.20) is None
