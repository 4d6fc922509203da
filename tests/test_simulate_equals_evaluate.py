"""One promise, every kind of bank: ``atlas simulate`` on a model's recorded answers and a live
``atlas evaluate`` of the same model (a ``replay:`` subject answering from the same matrix)
with the same seed ask the same items in the same order and give the same theta, SE and
predicted score with its interval: a bank folder, a shipped bank by name, a bank file whose
``benchmark`` column names a shipped benchmark, a plain bank file, a graded bank; with the
default options and with each stop option."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from atlascat.cli import main

#: the option sets every bank kind is run with (evaluate and simulate take each the same way)
OPTIONS = {
    "default": [],
    "max-items": ["--max-items", "12"],
    "min-items": ["--min-items", "6", "--max-items", "25"],
    "se-stop": ["--se-stop", "0.45"],
    "bound-margin": ["--bound-margin", "0.1", "--max-items", "60"],
    "no-bound-stop": ["--no-bound-stop", "--max-items", "15"],
    "fixed-length": ["--fixed-length", "9"],
    "batch-size": ["--batch-size", "3", "--max-items", "15"],
    "se-method": ["--se-method", "posterior", "--max-items", "20"],
}
#: the same, with the selection rules (evaluate takes them as simulate does)
SELECTION = {
    "randomesque": ["--randomesque", "3", "--max-items", "20"],
    "selection-kl": ["--selection", "kl", "--max-items", "15"],
    "selection-random": ["--selection", "random", "--max-items", "10"],
}
KINDS = ("folder", "shipped", "gsm8k", "named-file", "plain-file", "graded")
#: what an ordinal bank's adaptive test has not: both commands refuse it in one line
REFUSED = {("graded", "selection-kl"): "'kl' is for binary banks",
           ("graded", "batch-size"): "asks one item a round",
           # the score link's floor / top stop: a bank without a link has none to set
           ("plain-file", "bound-margin"): "no score link",
           ("graded", "bound-margin"): "no score link"}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Each bank kind's (--bank, matrix to replay, the models asked live)."""
    from atlascat.catalogue import BankRef
    from atlascat.catalogue.matrices import resolve_responses
    from atlascat.irt import polytomous as poly
    from atlascat.irt.polybank import PolyBank

    root = tmp_path_factory.mktemp("sim_eval")
    rng = np.random.default_rng(5)
    out = {}
    # a bank folder built from a 2PL matrix of 70 models on 40 items; 2 other models replayed
    a, b = rng.lognormal(0.2, 0.3, 40), rng.normal(0, 1, 40)
    theta = rng.normal(0, 1, 72)
    y = (rng.random((72, 40)) < 1 / (1 + np.exp(-a * (theta[:, None] - b)))).astype(int)
    df = pd.DataFrame(y, index=[f"m{i}" for i in range(72)],
                      columns=[f"q{j}" for j in range(40)]).rename_axis("model")
    df.iloc[:70].to_csv(root / "source.csv")
    df.iloc[70:].to_csv(root / "targets.csv")
    assert main(["build-bank", str(root / "source.csv"), "-q", "-o", str(root / "bank")]) == 0
    out["folder"] = (str(root / "bank"), root / "targets.csv", ["m70", "m71"])
    # the shipped ARC bank and three leaderboard models' recorded answers
    ref = BankRef.from_option("arc")
    rm = resolve_responses("arc", normalize_ids=True, on_empty="keep")
    bank = ref.load()
    frame = pd.DataFrame(rm.aligned_values(bank.item_ids, extra="ignore"), index=rm.subject_ids,
                         columns=bank.item_ids).rename_axis("model")
    models = [str(m) for m in frame.index[[3, 900, 1800]]]
    frame.loc[models].to_csv(root / "arc3.csv")
    out["shipped"] = ("arc", root / "arc3.csv", models[:2])
    gsm = BankRef.from_option("gsm8k").load()
    rm = resolve_responses("gsm8k", normalize_ids=True, on_empty="keep")
    frame = pd.DataFrame(rm.aligned_values(gsm.item_ids, extra="ignore"), index=rm.subject_ids,
                         columns=gsm.item_ids).rename_axis("model")
    frame.iloc[[10, 1500]].to_csv(root / "gsm2.csv")
    out["gsm8k"] = ("gsm8k", root / "gsm2.csv", [str(frame.index[1500])])
    # the same items as bank files: with the benchmark column (arc), and plain item parameters
    full = bank.to_frame()
    assert set(full["benchmark"].dropna()) == {"arc"}
    full[["item_id", "a", "b", "c", "u", "benchmark"]].to_csv(root / "arc_named.csv",
                                                              index=False)
    full[["item_id", "a", "b", "c", "u"]].to_csv(root / "arc_plain.csv", index=False)
    out["named-file"] = (str(root / "arc_named.csv"), root / "arc3.csv", models[:2])
    out["plain-file"] = (str(root / "arc_plain.csv"), root / "arc3.csv", models[:2])
    # a graded bank of 15 prompts rated 1-5, 3 models
    ids = [f"p{j}" for j in range(15)]
    ga = rng.lognormal(0.2, 0.3, 15)
    d = -np.sort(rng.normal(0, 1.2, (15, 4)), axis=1) * ga[:, None]
    graded = PolyBank(ids, np.column_stack([ga, d]), "graded", [np.arange(1.0, 6.0)] * 15)
    graded.write(root / "graded.csv")
    cats = poly.sample(graded.models, graded.params, rng.normal(size=3), rng)
    pd.DataFrame(cats + 1, index=["r0", "r1", "r2"], columns=ids).rename_axis("model") \
        .to_csv(root / "ratings.csv")
    out["graded"] = (str(root / "graded.csv"), root / "ratings.csv", ["r0", "r2"])
    return root, out


def _both(data, kind, options, tmp_path, seed="4"):
    """(simulate's person_scores.csv, its selected_items.csv, {model: results.json row})."""
    _, banks = data
    bank, matrix, models = banks[kind]
    sim = tmp_path / "sim"
    assert main(["simulate", str(matrix), "--bank", bank, "--seed", seed, *options, "-q",
                 "-o", str(sim)]) == 0
    persons = pd.read_csv(sim / "person_scores.csv", dtype={"subject_id": str}) \
        .set_index("subject_id")
    asked = pd.read_csv(sim / "selected_items.csv", dtype={"subject_id": str, "item_id": str})
    live = {}
    for model in models:
        out = tmp_path / f"live_{model.replace('/', '_')}"
        assert main(["evaluate", "--bank", bank, "--subject", f"replay:{matrix}#{model}",
                     "--seed", seed, *options, "-q", "-o", str(out)]) == 0
        live[model] = json.loads((out / "results.json").read_text())[0]
    return persons, asked, live


def _check(persons, asked, live):
    for model, row in live.items():
        order = "order" if "order" in asked.columns else "step"   # a graded bank's: step
        mine = asked[asked["subject_id"] == model].sort_values(order)["item_id"].tolist()
        assert [str(i) for i in row["items"]] == mine, model
        assert row["theta"] == pytest.approx(persons.loc[model, "theta"], abs=1e-9), model
        assert row["se"] == pytest.approx(persons.loc[model, "se"], abs=1e-9), model
        assert row["stop_reason"] == persons.loc[model, "stop_reason"], model
        pred = row.get("prediction") or {}
        assert ("score" in pred) == ("score" in persons.columns), (model, pred)
        if "score" in pred:
            np.testing.assert_allclose(
                [pred["score"], pred["lo"], pred["hi"]],
                persons.loc[model, ["score", "score_lo", "score_hi"]].to_numpy(float),
                rtol=1e-9, err_msg=model)


@pytest.mark.parametrize("options", list(OPTIONS), ids=list(OPTIONS))
@pytest.mark.parametrize("kind", KINDS)
def test_simulate_and_a_live_replay_agree(data, kind, options, tmp_path, capsys):
    """The same items in the same order, the same theta, SE and stop reason, the same predicted
    score and interval (or none in both), for every bank kind and stop option."""
    if (kind, options) in REFUSED:
        return _refused_by_both(data, kind, OPTIONS[options], REFUSED[kind, options],
                                tmp_path, capsys)
    _check(*_both(data, kind, OPTIONS[options], tmp_path))


@pytest.mark.parametrize("options", list(SELECTION), ids=list(SELECTION))
@pytest.mark.parametrize("kind", KINDS)
def test_the_selection_rules_agree(data, kind, options, tmp_path, capsys):
    """The selection options (evaluate takes them as simulate does): the same items."""
    if (kind, options) in REFUSED:
        return _refused_by_both(data, kind, SELECTION[options], REFUSED[kind, options],
                                tmp_path, capsys)
    _check(*_both(data, kind, SELECTION[options], tmp_path))


def _refused_by_both(data, kind, options, words, tmp_path, capsys):
    """What an ordinal bank's adaptive test has not (kl, rounds of items) and a bank without a
    score link has not (its floor / top stop): one line, exit 2, from both commands."""
    _, banks = data
    bank, matrix, models = banks[kind]
    for cmd in (["simulate", str(matrix)],
                ["evaluate", "--subject", f"replay:{matrix}#{models[0]}"]):
        assert main([*cmd, "--bank", bank, *options, "-q", "-o", str(tmp_path / cmd[0])]) == 2
        assert words in capsys.readouterr().err, cmd[0]


def test_a_bank_file_naming_a_shipped_benchmark_gets_its_stops_and_score(data, tmp_path):
    """A bank file whose ``benchmark`` column names a shipped benchmark is that benchmark's
    bank: both commands hold it to the benchmark's shortest test (ARC: 45 items) with its
    link's stops, and both predict the published score (a plain bank file: neither)."""
    named, _, _ = _both(data, "named-file", [], tmp_path / "named")
    plain, _, _ = _both(data, "plain-file", [], tmp_path / "plain")
    assert (named["n_items"] >= 45).all() and "score" in named.columns
    assert "score" not in plain.columns
    shipped, _, _ = _both(data, "shipped", [], tmp_path / "shipped")
    pd.testing.assert_frame_equal(named[["theta", "se", "n_items", "score"]],
                                  shipped[["theta", "se", "n_items", "score"]])


def test_adaptive_config_is_what_evaluate_runs(data, tmp_path):
    """The library's adaptive_config of a bank file naming ARC equals the shipped bank's: the
    link's stops and ARC's shortest test."""
    from atlascat.bankdir import adaptive_config

    root, _ = data
    assert adaptive_config(str(root / "arc_named.csv")) == adaptive_config("arc")
    assert adaptive_config(str(root / "arc_plain.csv")).stopping.min_items == 30
    assert adaptive_config("arc").stopping.min_items == 45


@pytest.mark.parametrize("args, words", [
    (["--resume", "abc", "--selection", "kl"], "drop --selection"),
    (["--resume", "abc", "--randomesque", "3"], "drop --randomesque"),
    (["--suite", "openllm-v1", "--subject", "simulate:0", "--selection", "kl"],
     "--selection is a single bank's adaptive test's"),
    (["--bank", "arc", "--subject", "simulate:0", "--selection", "best"], "--selection"),
    (["--bank", "arc", "--subject", "simulate:0", "--randomesque", "0"], "--randomesque"),
    (["--resume", "abc", "--estimator", "ml"], "drop --estimator"),
    (["--suite", "openllm-v1", "--subject", "simulate:0", "--estimator", "ml"],
     "--estimator is a single bank's adaptive test's"),
    (["--bank", "arc", "--subject", "simulate:0", "--estimator", "bm"], "--estimator must be"),
    (["--bank", "arc", "--subject", "simulate:0", "--estimator", "ml", "--se-method",
      "posterior"], "--se-method 'posterior' is the EAP's"),
])
def test_the_selection_options_refused_in_one_line(args, words, tmp_path, capsys):
    """A resumed run keeps its own selection, a suite chooses for its average; a bad value
    names the option: one line, exit 2."""
    assert main(["evaluate", *args, "--db", str(tmp_path / "s.sqlite")]) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1, err


#: the estimators of theta (evaluate takes --estimator as simulate does)
ESTIMATORS = {m: ["--estimator", m, "--max-items", "15"] for m in ("map", "ml", "wle")}


@pytest.mark.parametrize("method", list(ESTIMATORS))
@pytest.mark.parametrize("kind", ("folder", "plain-file", "graded"))
def test_the_estimators_agree(data, kind, method, tmp_path, capsys):
    """--estimator map / ml / wle: the same items, theta and SE live as simulated, and not
    the EAP's (the summary's config names the estimator), on an ordinal bank too."""
    persons, asked, live = _both(data, kind, ESTIMATORS[method], tmp_path)
    _check(persons, asked, live)
    summary = json.loads((tmp_path / "sim" / "summary.json").read_text())
    assert summary["settings" if kind == "graded" else "config"]["estimator"] == method
    assert {row.get("estimator") for row in live.values()} == {method}   # results.json
    assert f"theta ({method.upper()}) = " in capsys.readouterr().out   # the headline
    eap, _, eap_live = _both(data, kind, ["--max-items", "15"], tmp_path / "eap")
    assert not np.allclose(persons["theta"], eap.loc[persons.index, "theta"])
    assert all("estimator" not in row for row in eap_live.values())   # the EAP: as before
