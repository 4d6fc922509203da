"""The dimensionality check every calibration runs (atlascat.irt.dimensionality): silent on
one-trait data, a warning on random answers and on two weakly correlated traits, in the Python
result's warnings, in ``atlas calibrate``'s output and in its --summary JSON; binary, graded
and continuous scores alike. The thresholds' study: benchmarks/bench_dimensionality.py."""
from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest

from atlascat import calibrate
from atlascat.irt.dimensionality import (Dimensionality, DimensionalityWarning,
                                         parallel_analysis)


def one_trait(n, p, seed):
    rng = np.random.default_rng(seed)
    a, b, th = np.exp(rng.normal(0, 0.5, p)), rng.normal(0, 1, p), rng.standard_normal(n)
    return 1 / (1 + np.exp(-a * (th[:, None] - b))), rng


def two_traits(n, p, seed, r=0.3):
    """Two traits of correlation ``r``, each measured by half of the items."""
    rng = np.random.default_rng(seed)
    th = rng.standard_normal((n, 2)) @ np.linalg.cholesky([[1, r], [r, 1]]).T
    a, b = np.exp(rng.normal(0, 0.5, p)), rng.normal(0, 1, p)
    half = (np.arange(p) >= p // 2).astype(int)
    return 1 / (1 + np.exp(-a * (th[:, half] - b))), rng


def binary(prob_rng):
    prob, rng = prob_rng
    return (rng.random(prob.shape) < prob).astype(float)


def fit(y, **kw):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = calibrate(y, **kw)
    return res, [w for w in caught if issubclass(w.category, DimensionalityWarning)]


def test_one_trait_is_silent_two_traits_and_noise_are_not():
    res, caught = fit(binary(one_trait(300, 60, 1)))
    assert res.settings["dimensionality"]["one_trait"] and not caught
    assert not any("measure" in m for m in res.settings["defaults"]["warnings"])
    res, caught = fit(binary(two_traits(300, 60, 1)))
    d = res.settings["dimensionality"]
    assert d["second_dimension"] and not d["one_trait"] and len(caught) == 1
    assert "measure two things" in res.settings["defaults"]["warnings"][-1]
    res, caught = fit((np.random.default_rng(2).random((40, 30)) < 0.5).astype(float))
    assert not res.settings["dimensionality"]["one_trait"] and len(caught) == 1
    assert "do not measure one thing" in str(caught[0].message)


def test_graded_and_continuous_scores_are_checked():
    prob, rng = two_traits(300, 40, 3)
    ratings = np.clip(np.floor(prob * 4 + rng.random(prob.shape)), 0, 4)
    res, caught = fit(ratings, model="graded")
    assert res.settings["dimensionality"]["second_dimension"] and len(caught) == 1
    assert "measure two things" in res.settings["warnings"][-1]
    res, caught = fit(np.clip(prob + rng.normal(0, 0.15, prob.shape), 0, 1))   # F1-like
    assert res.settings["dimensionality"]["second_dimension"] and len(caught) == 1
    prob, rng = one_trait(300, 40, 3)
    res, caught = fit(np.clip(np.floor(prob * 4 + rng.random(prob.shape)), 0, 4), model="gpcm")
    assert res.settings["dimensionality"]["one_trait"] and not caught


def test_small_samples_rarely_cry_wolf():
    """25 models x 40 items of one trait: at most 2 alarms in 40 seeded matrices (the study's
    rate is about 1%); random answers of that size: every one flagged."""
    alarms = sum(not parallel_analysis(binary(one_trait(25, 40, s)), rng=s).one_trait
                 for s in range(40))
    assert alarms <= 2
    rng = np.random.default_rng(0)
    assert all(parallel_analysis((rng.random((25, 40)) < rng.uniform(0.2, 0.8, 40)).astype(float),
                                 rng=s).noise for s in range(20))


def test_pattern_frequencies_are_people(shared_data):
    """LSAT6 (1000 people as 32 patterns with frequencies): one trait, and the check draws
    people in proportion to the frequencies."""
    df = pd.read_csv(shared_data / "classic" / "lsat6_patterns.csv")
    res, caught = fit(df.drop(columns="freq").to_numpy(float), weights=df["freq"].to_numpy(float),
                      model="2pl")
    d = res.settings["dimensionality"]
    assert d["one_trait"] and not caught and d["n_models"] == 250 and d["n_items"] == 5


def test_record_round_trip_and_one_function():
    from atlascat.bankdir import checks
    from atlascat.irt import dimensionality

    assert checks.parallel_analysis is dimensionality.parallel_analysis
    d = parallel_analysis(binary(two_traits(200, 40, 4)), rng=0, expected=None)
    assert np.isnan(d.residual) and not d.second_dimension   # no fitted model: raw only
    back = Dimensionality.from_dict(json.loads(json.dumps(d.to_dict())))
    assert json.dumps(back.to_dict()) == json.dumps(d.to_dict())


@pytest.mark.parametrize("ordinal", [False, True])
def test_atlas_calibrate_says_it_and_the_summary_keeps_it(tmp_path, capsys, ordinal):
    """Once, as ``warning: ...`` (a whole process: main), and in --summary's settings."""
    from atlascat.cli import main

    prob, rng = two_traits(300, 40, 5)
    y = np.clip(np.floor(prob * 4 + rng.random(prob.shape)), 0, 4) if ordinal else \
        (rng.random(prob.shape) < prob).astype(int)
    pd.DataFrame(y, index=[f"m{i}" for i in range(300)],
                 columns=[f"q{j}" for j in range(40)]).to_csv(tmp_path / "r.csv")
    args = ["calibrate", str(tmp_path / "r.csv"), "-o", str(tmp_path / "bank.csv"),
            "--summary", str(tmp_path / "s.json"), "--quiet"]
    assert main(args + (["--model", "graded"] if ordinal else [])) == 0
    out = "".join(capsys.readouterr())
    assert out.count("warning: the items measure two things") == 1, out
    s = json.loads((tmp_path / "s.json").read_text())["settings"]
    assert s["dimensionality"]["second_dimension"] is True
    said = s["warnings"] if ordinal else s["defaults"]["warnings"]
    assert any("measure two things" in m for m in said)


def test_a_bank_folder_names_a_second_trait(tmp_path):
    """build-bank's summary row and warnings for a matrix whose items show two traits (each
    half of the items measures its own, uncorrelated), read from the calibration's check."""
    from typer.testing import CliRunner

    from atlascat.cli import app

    y = binary(two_traits(300, 60, 4, r=0.0))
    pd.DataFrame(y, index=[f"m{i}" for i in range(300)],
                 columns=[f"q{j}" for j in range(60)]).rename_axis("model").to_csv(
        tmp_path / "two.csv")
    r = CliRunner().invoke(app, ["build-bank", str(tmp_path / "two.csv"), "-o",
                                 str(tmp_path / "folder")])
    assert r.exit_code == 0, r.output + str(r.exception)
    said = " ".join(r.output.split())
    assert "items measure one thing NO: two factors, second eigenvalue" in said, said
    assert said.count("warning: the items measure two things") == 1
    manifest = json.loads((tmp_path / "folder" / "manifest.json").read_text())
    assert manifest["dimensionality"]["second_dimension"] is True
