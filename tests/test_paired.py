"""Paired comparison (issue 18, item 5): the difference of two predicted scores with its 95%
interval, checked against a direct computation and by simulation; `atlas compare-models` on
two live runs."""
from __future__ import annotations

import json

import numpy as np
import pytest

from atlascat.cli import main
from atlascat.errors import ConfigError
from atlascat.studies.paired import (PAIR_SCALE, Z95, difference_interval,
                                      excess_agreement, limits_difference, paired_difference)


def test_difference_of_two_predictions_matches_the_formula():
    a = {"score": 0.62, "lo": 0.58, "hi": 0.66}
    b = {"score": 0.55, "lo": 0.50, "hi": 0.60}
    d = paired_difference(a, b, rho=0.3, scale=0.9)
    sa, sb = 0.08 / (2 * Z95), 0.10 / (2 * Z95)
    sd = 0.9 * np.sqrt(sa ** 2 + sb ** 2 - 2 * 0.3 * sa * sb)
    assert d["diff"] == pytest.approx(0.07)
    assert d["sd"] == pytest.approx(sd)
    assert (d["lo"], d["hi"]) == pytest.approx((0.07 - Z95 * sd, 0.07 + Z95 * sd))
    assert d["told_apart"] is True
    assert paired_difference(b, a, scale=1.0)["diff"] == pytest.approx(-0.07)
    same = paired_difference(a, a, scale=1.0)
    assert same["diff"] == 0 and not same["told_apart"]
    # a suite's average gets its own pair scale (fitted by benchmarks/suite_pair_scale.py)
    avg = paired_difference(a, b, benchmark="average")
    assert avg["scale"] == PAIR_SCALE["average"] < 1.0
    assert avg["sd"] == pytest.approx(PAIR_SCALE["average"] * np.hypot(sa, sb))


def test_asymmetric_intervals_bound_each_side_of_the_difference():
    """A prediction near the top of its interval (the benchmark predictor's pooled estimate, a
    widened interval): the difference's lower side comes from the first's lower side and the
    second's upper one. One sd per prediction around the point put the interval on the wrong
    side (a held-out pair 17 points apart on MuSR was outside -7 to 17)."""
    a = {"score": 0.445, "lo": 0.359, "hi": 0.519}
    b = {"score": 0.396, "lo": 0.241, "hi": 0.419}
    d = paired_difference(a, b, scale=1.0)
    assert d["diff"] == pytest.approx(0.049)
    assert d["lo"] == pytest.approx(0.049 - np.hypot(0.086, 0.023))
    assert d["hi"] == pytest.approx(0.049 + np.hypot(0.074, 0.155))
    assert d["lo"] <= 0.173 <= d["hi"]                 # the pair's true difference
    back = paired_difference(b, a, scale=1.0)          # the sign convention: first minus second
    assert (back["lo"], back["hi"]) == pytest.approx((-d["hi"], -d["lo"]))
    sym = limits_difference(0.6, 0.55, 0.65, 0.5, 0.44, 0.56, rho=0.3, scale=0.8)
    ref = difference_interval(0.1, 0.05 / Z95, 0.06 / Z95, rho=0.3, scale=0.8)
    assert (sym["lo"], sym["hi"]) == pytest.approx((ref["lo"], ref["hi"]))   # symmetric: the same


def test_asymmetric_intervals_cover_95_percent_of_simulated_pairs():
    """Errors with a long tail on one side (split normals, each prediction's own 95% interval
    exact): the difference's interval covers 95% of pairs; the symmetric sd around the point
    covered 83-93%."""
    rng = np.random.default_rng(0)
    n = 100_000

    def split_normal(low, high):
        z = np.abs(rng.standard_normal(n))
        return np.where(rng.random(n) < 0.5, -z * low, z * high)

    for la, ua, lb, ub in ((0.06, 0.02, 0.02, 0.06), (0.08, 0.01, 0.01, 0.08),
                           (0.06, 0.02, 0.06, 0.02)):
        ta, tb = rng.uniform(0.3, 0.7, (2, n))
        a, b = ta - split_normal(la, ua), tb - split_normal(lb, ub)
        d = limits_difference(a, a - Z95 * la, a + Z95 * ua, b, b - Z95 * lb, b + Z95 * ub)
        assert 0.94 <= np.mean((d["lo"] <= ta - tb) & (ta - tb <= d["hi"])) <= 0.96


def test_interval_covers_95_percent_of_simulated_pairs():
    rng = np.random.default_rng(0)
    n = 20000
    sd_a, sd_b = rng.uniform(0.01, 0.05, n), rng.uniform(0.01, 0.05, n)
    rho = 0.5
    z1, z2 = rng.standard_normal((2, n))
    ea = sd_a * z1
    eb = sd_b * (rho * z1 + np.sqrt(1 - rho ** 2) * z2)
    true = rng.uniform(-0.1, 0.1, n)
    d = difference_interval(true + ea - eb, sd_a, sd_b, rho=rho)
    cover = np.mean((d["lo"] <= true) & (true <= d["hi"]))
    assert 0.94 <= cover <= 0.96
    wrong = difference_interval(true + ea - eb, sd_a, sd_b, rho=0.0)   # ignoring rho: too wide
    assert np.mean((wrong["lo"] <= true) & (true <= wrong["hi"])) > 0.98


def test_bad_input_is_a_clear_error():
    with pytest.raises(ConfigError, match="rho"):
        difference_interval(0.0, 0.01, 0.01, rho=1.5)
    with pytest.raises(ConfigError, match="rho must lie in"):
        difference_interval(0.0, 0.01, 0.01, rho=float("nan"))
    with pytest.raises(ConfigError, match="scale"):
        difference_interval(0.0, 0.01, 0.01, scale=0.0)
    with pytest.raises(ConfigError, match="no lo, hi"):
        paired_difference({"score": 0.5}, {"score": 0.4, "lo": 0.3, "hi": 0.5})


def test_excess_agreement():
    rng = np.random.default_rng(1)
    a = (rng.random((400, 200)) < 0.6).astype(float)
    b = (rng.random((400, 200)) < 0.6).astype(float)
    assert abs(np.mean(excess_agreement(a, b))) < 0.01          # independent: about 0
    assert np.all(excess_agreement(a, a) > 0.4)                   # identical: 1 - (p^2 + q^2)
    twin = np.where(rng.random(a.shape) < 0.9, a, b)
    assert 0.2 < np.mean(excess_agreement(a, twin)) < np.mean(excess_agreement(a, a))
    b[:, :50] = np.nan
    mask = np.zeros(a.shape, bool)
    mask[:, 100:] = True
    assert np.isfinite(excess_agreement(a, b, mask)).all()


def _two_runs(tmp_path, capsys, thetas, options) -> tuple:
    """Two finished `atlas evaluate` runs of simulated models in one store -> (db, run ids)."""
    db = tmp_path / "runs.sqlite"
    ids = []
    for theta in thetas:
        out = tmp_path / f"run{theta}"
        code = main(["evaluate", *options, "--subject", f"simulate:{theta}:3", "--db", str(db),
                     "-o", str(out)])
        assert code == 0, capsys.readouterr().err
        ids.append(json.loads((out / "results.json").read_text())[0]["run_id"])
        capsys.readouterr()
    return db, ids


def test_compare_models_on_two_live_runs(tmp_path, capsys):
    db, ids = _two_runs(tmp_path, capsys, ("1.5", "-0.5"), ["--bank", "arc", "--se-stop", "0.2"])
    code = main(["compare-models", ids[0], ids[1], "--db", str(db), "--json"])
    got = json.loads(capsys.readouterr().out)
    assert code == 0 and got["rows"][0]["benchmark"] == "arc"
    row = got["rows"][0]
    assert row["difference"] == pytest.approx(row["first"] - row["second"])
    assert row["lo"] < row["difference"] < row["hi"] and row["told_apart"] == "yes"
    code = main(["compare-models", ids[0], ids[1], "--db", str(db)])
    table = capsys.readouterr().out
    assert code == 0 and "arc" in table and "yes" in table
    code = main(["compare-models", ids[0], ids[0], "--db", str(db)])
    assert code != 0
    # the -o folders of runs stored with --db: the folders name the runs, --db holds them
    code = main(["compare-models", str(tmp_path / "run1.5"), str(tmp_path / "run-0.5"),
                 "--db", str(db), "--json"])
    assert code == 0 and json.loads(capsys.readouterr().out)["first"] == ids[0]
    code = main(["compare-models", ids[0], ids[1], "--db", str(db), "--rho", "nan"])
    assert code == 2 and "rho must lie in [-1, 1]" in capsys.readouterr().err
    code = main(["compare-models", ids[0], "nope", "--db", str(db)])
    assert code != 0 and "no run 'nope'" in capsys.readouterr().err


def test_compare_models_states_the_sign_and_refuses_a_failed_run(tmp_path, capsys):
    """The JSON states the sign convention, as the table's title does; a run that stopped on
    an error is refused in one line that says how to finish it."""
    from atlascat.live.store import RunStore

    db, ids = _two_runs(tmp_path, capsys, ("1.0", "0.0"), ["--bank", "arc", "--max-items", "8"])
    assert main(["compare-models", ids[0], ids[1], "--db", str(db), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["sign"] == "first minus second"
    assert main(["compare-models", ids[0], ids[1], "--db", str(db)]) == 0
    assert "first minus second" in capsys.readouterr().out
    RunStore(db).fail_run(ids[1], "the harness crashed")
    assert main(["compare-models", ids[0], ids[1], "--db", str(db)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"error: run {ids[1]} has not finished (error): resume it to its end first; "
                   f"atlas evaluate --resume {ids[1]} --db {db}, then compare"), err


def test_compare_models_takes_run_folders(tmp_path, capsys):
    """RUN_A / RUN_B may be the folders `atlas evaluate -o` wrote (each with its own store)."""
    for theta, name in (("1.5", "tuned"), ("-0.5", "base")):
        code = main(["evaluate", "--bank", "arc", "--se-stop", "0.2", "--subject",
                     f"simulate:{theta}:3", "-o", str(tmp_path / name), "-q"])
        assert code == 0, capsys.readouterr().err
    capsys.readouterr()
    code = main(["compare-models", str(tmp_path / "tuned"), str(tmp_path / "base"), "--json"])
    got = json.loads(capsys.readouterr().out)
    assert code == 0 and got["rows"][0]["benchmark"] == "arc"
    assert got["rows"][0]["told_apart"] == "yes" and got["rows"][0]["difference"] > 0
    (tmp_path / "empty").mkdir()
    code = main(["compare-models", str(tmp_path / "tuned"), str(tmp_path / "empty")])
    assert code == 2 and "holds no results.json" in capsys.readouterr().err
    code = main(["compare-models", str(tmp_path / "tuned"), str(tmp_path / "tuned")])
    assert code == 2 and "two different runs" in capsys.readouterr().err


def test_compare_models_on_two_suite_runs(tmp_path, capsys):
    db, ids = _two_runs(tmp_path, capsys, ("1.0", "-1.0"),
                        ["--suite", "openllm-v1", "--max-items", "36"])
    code = main(["compare-models", ids[0], ids[1], "--db", str(db), "--json"])
    got = json.loads(capsys.readouterr().out)
    assert code == 0
    rows = {r["benchmark"]: r for r in got["rows"]}
    assert {"arc", "hellaswag", "mmlu", "truthfulqa", "winogrande", "gsm8k", "average"} == set(rows)
    avg = rows["average"]
    assert avg["lo"] < avg["difference"] < avg["hi"] and avg["told_apart"] == "yes"


def test_compare_models_refuses_two_scores_of_one_name(tmp_path, capsys):
    """A bank folder named arc predicts its source models' mean over its items, not the
    leaderboard's ARC score: the two runs of one model are not compared as if they were."""
    import atlascat as at

    rm = at.catalogue.load_responses("arc")
    rm.subset(subjects=range(0, 2193, 60), items=range(80)).write(tmp_path / "mine.csv")
    assert main(["build-bank", str(tmp_path / "mine.csv"), "-o", str(tmp_path / "bank"),
                 "--name", "arc", "--budget", "20", "--chance", "0.25", "-q"]) == 0
    model = str(rm.subject_ids[5])
    for bank, out, who in ((str(tmp_path / "bank"), "folder", model), ("arc", "shipped", model),
                           (str(tmp_path / "bank"), "other", str(rm.subject_ids[900]))):
        assert main(["evaluate", "--bank", bank, "--subject", f"replay:arc#{who}",
                     "-o", str(tmp_path / out), "-q"]) == 0
    capsys.readouterr()
    # two runs on the folder: its own intervals combined, without shipped ARC's pair scale
    assert main(["compare-models", str(tmp_path / "folder"), str(tmp_path / "other"),
                 "--json"]) == 0
    row = json.loads(capsys.readouterr().out)["rows"][0]
    preds = [json.loads((tmp_path / f / "results.json").read_text())[0]["prediction"]
             for f in ("folder", "other")]
    (a, b) = preds   # each side from the sides that bound it, at scale 1
    assert row["benchmark"] == "arc" and PAIR_SCALE["arc"] < 1
    assert row["hi"] - row["difference"] == pytest.approx(
        100 * np.hypot(a["hi"] - a["score"], b["score"] - b["lo"]))
    assert row["difference"] - row["lo"] == pytest.approx(
        100 * np.hypot(a["score"] - a["lo"], b["hi"] - b["score"]))
    from atlascat.live.compare import compare_runs

    assert compare_runs(tmp_path / "folder", tmp_path / "other")["warning"] is None
    # the predictor's errors are its own random draws, independent between runs: a rho
    # narrows the interval below 95% (bench_paired_folder.py), and is said so
    told = compare_runs(tmp_path / "folder", tmp_path / "other", rho=0.5)
    assert "rho 0.5 on arc: the benchmark predictor's error" in told["warning"]
    assert told["rows"][0]["warnings"] and "compare with rho 0" in told["warning"]
    code = main(["compare-models", str(tmp_path / "folder"), str(tmp_path / "shipped")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "both predict 'arc', but not one score" in err \
        and "the leaderboard's published score" in err and "\n" not in err, err


def test_compare_models_says_when_one_run_is_approximate(tmp_path, capsys):
    from atlascat.catalogue import BankRef
    from atlascat.live.mockserver import MockOpenAIServer

    with MockOpenAIServer(BankRef.from_option("arc").load(), 0.5, seed=3) as srv:
        assert main(["evaluate", "--bank", "arc", "--subject", f"openai:{srv.url}", "--llm",
                     "chat", "--se-stop", "0.3", "-o", str(tmp_path / "chat"), "-q"]) == 0
    assert main(["evaluate", "--bank", "arc", "--subject", "simulate:0.5", "--se-stop", "0.3",
                 "-o", str(tmp_path / "sim"), "-q"]) == 0
    capsys.readouterr()
    assert main(["compare-models", str(tmp_path / "chat"), str(tmp_path / "sim"), "--json"]) == 0
    err = capsys.readouterr().err
    assert "(APPROXIMATE), run" in err and "mixes two ways of asking" in err
    assert main(["compare-models", str(tmp_path / "sim"), str(tmp_path / "sim"), "--json"]) == 2


def test_a_run_answered_from_the_cache_says_so(tmp_path, capsys):
    """Two checkpoints served one after the other under one name: the second run of the same
    store gets the first one's answers from the cache; the command says so (--no-cache asks)."""
    from atlascat.catalogue import BankRef
    from atlascat.live.mockserver import MockOpenAIServer

    db = tmp_path / "runs.sqlite"
    errs = []
    with MockOpenAIServer(BankRef.from_option("arc").load(), 0.5, seed=3) as srv:
        for extra in ([], [], ["--no-cache"]):
            assert main(["evaluate", "--bank", "arc", "--subject", f"openai:{srv.url}", "--llm",
                         "ckpt", "--se-stop", "0.3", "--db", str(db), "-q", *extra]) == 0
            errs.append(capsys.readouterr().err)
    cached = [("answers came from the answer cache" in e) for e in errs]
    assert cached == [False, True, False]
    assert "a new checkpoint served under the same name needs --no-cache" in errs[1]


def test_compare_models_never_prints_a_negative_zero(tmp_path, capsys, monkeypatch):
    """A difference (or an interval end) that rounds to zero from below prints as 0.0, as
    any table cell does; --json gives the numbers as computed."""
    from atlascat.live import service

    db, ids = _two_runs(tmp_path, capsys, ("0.5", "0.6"), ["--bank", "arc", "--se-stop", "0.3"])
    preds = {ids[0]: {"score": 0.6000, "lo": 0.5996, "hi": 0.6004},
             ids[1]: {"score": 0.6003, "lo": 0.5999, "hi": 0.6007}}
    monkeypatch.setattr(service, "run_predictions",
                        lambda store, run_id, runs=None: {"arc": preds[run_id]})
    assert main(["compare-models", ids[0], ids[1], "--db", str(db)]) == 0
    table = capsys.readouterr().out
    assert "-0.0" not in table and " 0.0 " in table
    assert main(["compare-models", ids[0], ids[1], "--db", str(db), "--json"]) == 0
    row = json.loads(capsys.readouterr().out)["rows"][0]
    assert row["difference"] == pytest.approx(-0.03) and row["told_apart"] == "no"
