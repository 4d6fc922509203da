"""``atlas simulate --suite`` (issue 18): one replay, one suite_scores.csv."""
from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from atlascat import catalogue
from atlascat.cli import main
from atlascat.cli._common import one_bank as single_bank
from atlascat.suite import member_matrices
from atlascat.errors import ConfigError

BENCHES = ["arc", "hellaswag", "mmlu", "truthfulqa", "winogrande", "gsm8k"]


@pytest.fixture(scope="module")
def matrices(tmp_path_factory):
    """Small slices of the bundled dense matrices; the first model has no MMLU answers."""
    d = tmp_path_factory.mktemp("suite_mats")
    ids = None
    for b in BENCHES:
        path = catalogue.data_path(f"dense_{b}.csv.gz")
        df = pd.read_csv(path, nrows=4000)
        if ids is None:
            ids = list(df.iloc[:4, 0])
        df = df[df.iloc[:, 0].isin(ids)]
        if b == "mmlu":
            df = df[df.iloc[:, 0] != ids[0]]
        df.to_csv(d / f"{b}.csv", index=False)
    return d, ids


@pytest.mark.slow
def test_simulate_suite_writes_suite_scores(matrices, tmp_path, capsys):
    d, ids = matrices
    out = tmp_path / "run"
    pairs = [f"{b}={d / (b + '.csv')}" for b in BENCHES]
    rc = main(["simulate", "--suite", "openllm-v1", *pairs, "-o", str(out), "--max-items", "60",
               "--min-items", "10", "--seed", "1"])
    assert rc in (0, None)
    df = pd.read_csv(out / "suite_scores.csv")
    cols = ["subject_id", "n_items", "stop_reason", "average", "average_lo", "average_hi",
            "average_percentile"]
    for b in BENCHES:
        cols += [b, f"{b}_lo", f"{b}_hi", f"{b}_items", f"{b}_percentile"]
    assert list(df.columns) == cols
    assert set(df["subject_id"]) >= set(ids[:1])
    assert (df["n_items"] <= 60).all()
    assert (df[[f"{b}_items" for b in BENCHES]].sum(axis=1) == df["n_items"]).all()
    for k in ["average", *BENCHES]:
        assert ((df[f"{k}_lo"] <= df[k]) & (df[k] <= df[f"{k}_hi"])).all()
        assert df[k].between(0, 1).all()
    first = df[df["subject_id"] == ids[0]].iloc[0]
    assert first["mmlu_items"] == 0 and np.isfinite(first["mmlu"])
    summary = json.loads((out / "summary.json").read_text())
    assert summary["suite"] == "openllm-v1" and summary["config"]["max_items"] == 60
    # the summary says how many had answers on all six (the first model has no MMLU answers)
    present = [set(pd.read_csv(d / f"{b}.csv").iloc[:, 0]) for b in BENCHES]
    full = sum(all(s in p for p in present) for s in df["subject_id"])
    assert ids[0] not in set.intersection(*present)
    assert summary["n_subjects"] == len(df) and summary["n_all_members"] == full < len(df)
    captured = capsys.readouterr()
    assert "suite_scores.csv" in captured.out
    assert re.search(rf"with answers on all members\s+{full}\b", captured.out)
    assert f"{len(df) - full} of {len(df)} examinees lack answers on some member" in captured.err


def test_simulate_suite_reports_the_error_against_published_averages(matrices, tmp_path,
                                                                      capsys):
    d, ids = matrices
    published = pd.DataFrame({"name": ids, **{b: np.linspace(40, 70, len(ids)) + k
                                              for k, b in enumerate(BENCHES)}})
    published.loc[1, "gsm8k"] = np.nan            # not every model has all six published
    published.to_csv(tmp_path / "scores.csv", index=False)
    out = tmp_path / "run"
    pairs = [f"{b}={d / (b + '.csv')}" for b in BENCHES]
    assert main(["simulate", "--suite", "openllm-v1", *pairs, "-o", str(out), "--max-items",
                 "30", "--min-items", "10", "--scores", str(tmp_path / "scores.csv")]) in (0, None)
    df = pd.read_csv(out / "suite_scores.csv")
    pub = dict(zip(ids, published[BENCHES].mean(axis=1, skipna=False) / 100))
    assert np.allclose(df["published_average"], df["subject_id"].map(pub), equal_nan=True)
    known = df[df["published_average"].notna()]
    err = json.loads((out / "summary.json").read_text())["error"]
    assert err["n"] == len(known) == len(ids) - 1
    assert err["mae_points"] == pytest.approx(
        100 * (known["average"] - known["published_average"]).abs().mean())
    assert err["coverage_95"] == pytest.approx(
        ((known["average_lo"] <= known["published_average"])
         & (known["published_average"] <= known["average_hi"])).mean())
    assert f"MAE vs published average (n={err['n']})" in capsys.readouterr().out


def test_bank_twice_points_to_suite(tmp_path, capsys):
    rc = main(["simulate", "arc", "--bank", "arc", "--bank", "hellaswag", "-o",
               str(tmp_path / "x")])
    assert rc == 2
    err = capsys.readouterr().err
    assert "--suite" in err and "2 times" in err
    with pytest.raises(ConfigError, match="--suite"):
        single_bank([])


def test_pairs_are_checked():
    names = BENCHES
    assert member_matrices(["arc=a.csv", "gsm8k"], names) == {"arc": "a.csv", "gsm8k": "gsm8k"}
    with pytest.raises(ConfigError, match="not a member"):
        member_matrices(["bbh=x.csv"], names)
    with pytest.raises(ConfigError, match="twice"):
        member_matrices(["arc=x.csv", "arc=y.csv"], names)
    with pytest.raises(ConfigError, match="BENCH=MATRIX"):
        member_matrices([], names)


def test_suite_options_are_refused_elsewhere(tmp_path, capsys):
    assert main(["simulate", "arc", "--bank", "arc", "--target-se", "0.5", "-o",
                 str(tmp_path / "y")]) == 2
    assert "--suite" in capsys.readouterr().err
    assert main(["simulate", "--suite", "openllm-v1", "--bank", "arc", "arc=arc", "-o",
                 str(tmp_path / "z")]) == 2
    assert "drop --bank" in capsys.readouterr().err


@pytest.mark.slow
def test_target_se_below_the_floor_is_said_and_one_above_it_stops_the_test(matrices, tmp_path,
                                                                            capsys):
    """The default test is the --max-items budget (no SE target); a target the average's SE can
    never reach (its floor is the joint link's residual) is reported once; a reachable one
    stops the test early with stop reason target_se."""
    from atlascat.suite import SuiteConfig, SuiteSession, load_suite

    assert SuiteConfig().target_se is None
    suite = load_suite("openllm-v1")
    floor = SuiteSession(suite).floor_se()[0]
    w, D = suite.weights, suite.joint_link.resid_cov
    assert floor == pytest.approx(100 * np.sqrt(w @ D @ w)) and 0.5 < floor < 2.0
    d, _ = matrices
    pairs = [f"{b}={d / (b + '.csv')}" for b in BENCHES]
    out = tmp_path / "low"
    assert main(["simulate", "--suite", "openllm-v1", *pairs, "-o", str(out), "--max-items",
                 "40", "--target-se", "0.5"]) in (0, None)
    err = capsys.readouterr().err
    assert "at or below the average's SE floor" in err and f"({floor:.2f} points" in err
    assert (pd.read_csv(out / "suite_scores.csv")["n_items"] == 40).all()
    out = tmp_path / "high"
    assert main(["simulate", "--suite", "openllm-v1", *pairs, "-o", str(out), "--max-items",
                 "150", "--target-se", "2.5"]) in (0, None)
    assert "SE floor" not in capsys.readouterr().err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["stop_reasons"].get("target_se", 0) >= 1
    assert pd.read_csv(out / "suite_scores.csv")["n_items"].min() < 150
