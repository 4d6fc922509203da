"""A bank folder's build speaks of its source models: the calibration's warnings, which count
"subjects" and name the Python keyword, read "source models" and the folder's ``--model`` in
the manifest and in what ``atlas build-bank`` prints; and the manifest is strict JSON (a
figure not computed is null, not NaN, which JSON parsers other than Python's refuse)."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
import pandas as pd

from atlascat.bankdir import build_bank
from atlascat.bankdir.builder import build_warnings
from atlascat.bankdir.checks import in_source_models
from atlascat.irt import polytomous as poly


def test_a_calibration_warning_in_source_models():
    said = ("40 subjects x 120 items: calibrated as a 2PL with a ~ lognorm(0,1), not a 3PL: "
            "below 500 subjects lower asymptotes are not identified and the prior keeps extreme slopes rare "
            "(docs/calibration.md); pass model= (CLI --model) to override")
    assert in_source_models(said) == (
        "40 source models x 120 items: calibrated as a 2PL with a ~ lognorm(0,1), not a 3PL: "
        "below 500 source models lower asymptotes are not identified and the prior keeps extreme slopes rare "
        "(docs/calibration.md); --model overrides it")


def test_a_judges_ratings_folder_warns_of_its_source_models(tmp_path):
    rng = np.random.default_rng(3)
    a = rng.lognormal(0.2, 0.3, 30)
    d = -np.sort(rng.normal(0, 1.3, (30, 9)), axis=1) * a[:, None]
    y = poly.sample("graded", np.column_stack([a, d]), rng.normal(size=30), rng) + 1   # 1-10
    pd.DataFrame(y, index=[f"m{i}" for i in range(30)],
                 columns=[f"p{j}" for j in range(30)]).rename_axis("model").to_csv(
        tmp_path / "judge.csv")
    folder = build_bank(tmp_path / "judge.csv", tmp_path / "bank", folds=0, score_range=(1, 10),
                        name="JudgeBench")
    said = build_warnings(folder.manifest)
    assert any("30 source models" in w for w in said), said
    assert not any("subjects" in w or "model=" in w for w in said), said

    text = (tmp_path / "bank" / "manifest.json").read_text()

    def refuse(name):
        raise ValueError(f"{name} is not JSON")

    manifest = json.loads(text, parse_constant=refuse)
    assert manifest["dimensionality"]["residual_eigenvalue"] is None   # not computed
    from atlascat.bankdir import load_bank_dir
    from atlascat.irt.dimensionality import Dimensionality

    dims = Dimensionality.from_dict(load_bank_dir(tmp_path / "bank").manifest["dimensionality"])
    assert math.isnan(dims.residual) and dims.first == pytest.approx(
        folder.manifest["dimensionality"]["first_eigenvalue"])
    assert not dims.second_dimension


def test_a_new_models_scores_off_a_folders_scale_are_worded_for_it(tmp_path):
    """Reading a new model's 1-10 ratings for a --score-range 1 10 folder (atlas score,
    simulate, replay:): an 11 names the folder's range, set at build (the command has no
    --score-range to check); text names the 1-10 scale, not [0, 1]."""
    from atlascat.bankdir.scaled import read_scaled_matrix
    from atlascat.errors import ResponseDataError

    df = pd.DataFrame([[3, 7], [11, 5]], index=["a", "b"], columns=["p0", "p1"])
    df.rename_axis("model").to_csv(tmp_path / "off.csv")
    with pytest.raises(ResponseDataError) as exc:
        read_scaled_matrix(tmp_path / "off.csv", (1, 10), folder=True)
    msg = str(exc.value)
    assert "outside the bank folder's score range [1, 10] (set when it was built" in msg
    assert "check --score-range" not in msg and "\n" not in msg
    with pytest.raises(ResponseDataError, match=r"check --score-range"):   # a build's option
        read_scaled_matrix(tmp_path / "off.csv", (1, 10))
    df.astype(object).where(df < 10, "good").rename_axis("model").to_csv(tmp_path / "t.csv")
    with pytest.raises(ResponseDataError, match=r"numbers on the scale \[1, 10\] or blank"):
        read_scaled_matrix(tmp_path / "t.csv", (1, 10), folder=True)


def test_right_wrong_items_mixed_into_ratings_warn(tmp_path):
    """Two 0/1 items among 0-10 ratings: the folder's build and the ordinal calibration say
    that a right answer would count as 1 point of 10; a 0-3 rubric's hard item rated 0 or 1,
    and ratings alone, do not."""
    import warnings

    from atlascat.irt.polycal import calibrate_ordinal
    from atlascat.validation import zero_one_items

    rng = np.random.default_rng(5)
    a = rng.lognormal(0.2, 0.3, 20)
    d = -np.sort(rng.normal(0, 1.3, (20, 10)), axis=1) * a[:, None]
    y = pd.DataFrame(poly.sample("graded", np.column_stack([a, d]), rng.normal(size=30), rng),
                     index=[f"m{i}" for i in range(30)], columns=[f"p{j}" for j in range(20)])
    mixed = y.assign(right=rng.integers(0, 2, 30), wrong=rng.integers(0, 2, 30))
    mixed.rename_axis("model").to_csv(tmp_path / "mixed.csv")
    said = zero_one_items(mixed.to_numpy(float), list(mixed.columns), (0, 10))
    assert said.startswith("2 item(s) (e.g. 'right') hold only 0 and 1 on the 0-10 scale")
    assert zero_one_items(y.to_numpy(float), list(y.columns), (0, 10)) is None
    assert zero_one_items(np.array([[0, 3], [1, 2.0]]), ["hard", "q"], (0, 3)) is None
    for run in (lambda: calibrate_ordinal(mixed, "graded", value_range=(0, 10)),
                lambda: build_bank(tmp_path / "mixed.csv", tmp_path / "bank", folds=0,
                                   score_range=(0, 10))):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            run()
        assert any("hold only 0 and 1 on the 0-10 scale" in str(w.message) for w in caught)
