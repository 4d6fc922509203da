"""An ordinal bank calibrated on fewer than PREDICTION_MIN_SOURCES source models says that its
predicted mean rating's interval leaves out the calibration's error (held-out coverage
0.75-0.92 from 40-60 source models: benchmarks/results/polytomous.md): at calibration, and in
every output that predicts with it (atlas score, atlas simulate, a live run's prediction)."""
from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from atlascat.cli import app
from atlascat.irt import polytomous as poly
from atlascat.irt.defaults import PREDICTION_MIN_SOURCES
from atlascat.irt.polycal import calibrate_ordinal

N_ITEMS = 15


def _ratings(n: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    a = rng.uniform(0.8, 2.0, N_ITEMS)
    d = np.sort(rng.normal(0, 1.0, (N_ITEMS, 3)), axis=1)[:, ::-1]
    y = poly.sample("graded", np.column_stack([a, d]), rng.normal(size=n), rng)   # 0-3
    return pd.DataFrame(y, index=[f"m{i}" for i in range(n)],
                        columns=[f"q{j}" for j in range(N_ITEMS)]).rename_axis("model")


def _fit(n: int):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = calibrate_ordinal(_ratings(n), "graded", value_range=(0, 3))
    return res, [str(w.message) for w in caught]


def test_the_calibration_warns_below_the_sources_an_interval_needs():
    """40 models on a 0-3 rubric: 10 subjects a parameter, so no identification warning, but
    the interval it predicts with undercovers: said once; from 100 models, not."""
    res, said = _fit(40)
    assert any(f"40 subjects (fewer than {PREDICTION_MIN_SOURCES})" in m and
               "--score-range" in m for m in said)
    assert res.bank.source_models() == 40
    assert "fewer than 100" in res.bank.few_sources_warning()
    res, said = _fit(PREDICTION_MIN_SOURCES)
    assert not any("fewer than 100" in m for m in said)
    assert res.bank.few_sources_warning() is None


def test_nothing_predicted_nothing_to_warn():
    bank = _fit(40)[0].bank
    full = np.zeros((2, len(bank)))
    assert bank.few_sources_warning(full) is None           # every item rated: exact
    full[0, 3] = np.nan
    assert "source models' ratings" in bank.few_sources_warning(full)
    bare = bank.subset(list(bank.item_ids))
    bare.metadata = None                                      # a bank that does not say
    assert bare.source_models() is None and bare.few_sources_warning() is None


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    path = tmp_path_factory.mktemp("few")
    _ratings(40).to_csv(path / "src.csv")
    _ratings(3, seed=1).to_csv(path / "new.csv")
    r = CliRunner().invoke(app, ["calibrate", str(path / "src.csv"), "--model", "graded",
                                 "--rating-range", "0", "3", "-o", str(path / "bank.csv"), "-q"])
    assert r.exit_code == 0, r.output + str(r.exception)
    return path


def test_score_simulate_and_a_live_run_say_it(files):
    plan = ["--se-stop", "0.5", "--min-items", "3", "--max-items", "6"]
    r = CliRunner().invoke(app, ["simulate", str(files / "new.csv"), "--bank",
                                 str(files / "bank.csv"), *plan, "-o", str(files / "sim")])
    assert r.exit_code == 0, r.output + str(r.exception)
    assert "calibrated on 40 source models" in " ".join(r.output.split())
    summary = json.loads((files / "sim" / "summary.json").read_text())
    assert "fewer than 100" in summary["warnings"][0]
    pd.DataFrame({"subject_id": ["a", "b"], "theta": [0.0, 1.0]}).to_csv(files / "th.csv",
                                                                          index=False)
    r = CliRunner().invoke(app, ["simulate", "--thetas", str(files / "th.csv"), "--bank",
                                 str(files / "bank.csv"), *plan, "-o", str(files / "drawn")])
    assert r.exit_code == 0, r.output + str(r.exception)
    assert "source models' ratings" not in r.output   # answers drawn from the bank: exact
    assert "warnings" not in json.loads((files / "drawn" / "summary.json").read_text())
    r = CliRunner().invoke(app, ["evaluate", "--bank", str(files / "bank.csv"), "--subject",
                                 f"replay:{files / 'new.csv'}#m1", *plan, "-q", "-o",
                                 str(files / "live")])
    assert r.exit_code == 0, r.output + str(r.exception)
    pred = json.loads((files / "live" / "results.json").read_text())[0]["prediction"]
    assert "calibrated on 40 source models" in pred["warning"]
    r = CliRunner().invoke(app, ["runs", "--db", str(files / "live" / "runs.sqlite")])
    assert "(!)" in r.output
    partial = pd.read_csv(files / "new.csv", index_col=0).iloc[:, :5]
    partial.to_csv(files / "part.csv")
    r = CliRunner().invoke(app, ["score", str(files / "part.csv"), "--bank",
                                 str(files / "bank.csv"), "-o", str(files / "s.csv")])
    assert r.exit_code == 0 and "calibrated on 40 source models" in " ".join(r.output.split())
    r = CliRunner().invoke(app, ["score", str(files / "new.csv"), "--bank",
                                 str(files / "bank.csv"), "-o", str(files / "s.csv")])
    assert r.exit_code == 0 and "source models' ratings" not in r.output   # all rated: exact


def test_compare_models_inherits_the_runs_warning(files):
    """Two runs on the same few-source bank: the difference's interval is made of theirs, so
    compare-models says their warning once (both runs), in its output and --json."""
    from atlascat.live.compare import compare_runs

    plan = ["--se-stop", "0.5", "--min-items", "3", "--max-items", "6", "-q"]
    for m in ("m0", "m2"):
        r = CliRunner().invoke(app, ["evaluate", "--bank", str(files / "bank.csv"), "--subject",
                                     f"replay:{files / 'new.csv'}#{m}", *plan, "-o",
                                     str(files / f"run_{m}")])
        assert r.exit_code == 0, r.output + str(r.exception)
    out = compare_runs(files / "run_m0", files / "run_m2")
    assert out["warning"].startswith("both runs on bank: the bank was calibrated on 40 source")
    assert out["rows"][0]["warnings"] == [out["warning"]]
    r = CliRunner().invoke(app, ["compare-models", str(files / "run_m0"), str(files / "run_m2")])
    assert r.exit_code == 0 and "warning: both runs on bank" in " ".join(r.output.split())
