"""Bank folders (``atlas build-bank``): from a matrix or lm-eval sample logs to ``--bank DIR``.

The real sample logs (``../shared/data/lmeval_samples/pythia-14m``) are of one model; a bank
needs 20, so the logs of 21 models are made from each real file (``tests/lmeval_logs.py``:
every record kept as logged, only the answers differ). What is checked against the logs is
what the real file holds: every item's requests.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from atlascat.bankdir import (build_bank, is_bank_dir, load_bank_dir, parse_arguments,
                              predict_scores, read_sample_logs)
from atlascat.cli import app
from atlascat.content.requests import build_item_requests
from atlascat.errors import AtlasError, ConfigError, ResponseDataError

from lmeval_logs import generation_logs, logged_requests, read_raw, synthetic_models

REAL = Path(__file__).resolve().parents[2] / "shared" / "data" / "lmeval_samples" / "pythia-14m"


def _real(task: str) -> Path:
    files = sorted(REAL.glob(f"samples_metabench_{task}_secondary_*.jsonl.gz"))
    assert files, f"no real {task} sample log in {REAL}"
    return files[0]


@pytest.fixture(scope="module")
def logs_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("logs")
    for task in ("winogrande", "truthfulqa"):
        synthetic_models(_real(task), root / task, 21)
    generation_logs(root / "gen")
    return root


@pytest.fixture(scope="module")
def built(logs_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("banks")
    return {task: build_bank(logs_dir / task, out / task)
            for task in ("winogrande", "truthfulqa", "gen")}


def test_chance_comes_from_the_options_of_the_logged_items(built):
    """From sample logs the floor is the score of answering at random: 1 / options averaged
    over the items (WinoGrande's two options: 0.5), 0 for generated answers; a known
    benchmark keeps its own, and a matrix 0."""
    from atlascat.bankdir.builder import default_chance

    settings = {t: built[t].manifest["settings"] for t in built}
    assert settings["winogrande"]["chance"] == pytest.approx(0.5)
    assert settings["winogrande"]["chance_from"] == "options"
    assert 0.0 < settings["truthfulqa"]["chance"] < 0.5      # mc1: several options an item
    assert settings["gen"]["chance"] == 0.0 and settings["gen"]["chance_from"] == "options"
    for task in built:
        assert built[task].link.support["floor"] <= settings[task]["chance"] + 1e-12
    assert default_chance("ARC") == (0.25, "benchmark") and default_chance("x") == (0.0, "matrix")
    meta = pd.DataFrame({"choices": [["a", "b"], ["a", "b", "c", "d"], []]})
    assert default_chance("x", meta) == (pytest.approx((0.5 + 0.25 + 0.0) / 3), "options")
    mc2 = pd.DataFrame({"choices": [["t1", "t2", "f1", "f2", "f3"], ["a", "b"]],
                        "mc2_true": [2, 0]})      # mc2: 2 true of 5; an mc1 item: 1 of 2
    assert default_chance("x", mc2) == (pytest.approx((2 / 5 + 1 / 2) / 2), "options")


# ----------------------------------------------------------------------------- reading logs
def test_both_spellings_of_arguments_are_read():
    py_repr = "{'gen_args_0': {'arg_0': 'Q: x?\\nA:', 'arg_1': ' yes'}, " \
              "'gen_args_1': {'arg_0': 'Q: x?\\nA:', 'arg_1': ' no'}}"
    as_json = {"gen_args_0": {"arg_0": "Q: x?\nA:", "arg_1": " yes"},
               "gen_args_1": {"arg_0": "Q: x?\nA:", "arg_1": " no"}}
    from atlascat.content.parsing import parse_literal

    a, b = parse_arguments(parse_literal(py_repr)), parse_arguments(as_json)
    assert a == b and [r.continuation for r in a] == [" yes", " no"]
    assert parse_arguments([["Q:", " yes"], ["Q:", " no"]]) == a[:0] + tuple(
        type(a[0])("loglikelihood", "Q:", c) for c in (" yes", " no"))
    gen = parse_arguments({"gen_args_0": {"arg_0": "Q", "arg_1": {"until": "\n",
                                                                  "max_gen_toks": 7}}})
    assert gen[0].kind == "generate_until" and gen[0].until == ("\n",) and gen[0].max_gen_toks == 7
    with pytest.raises(ResponseDataError, match="loglikelihood_rolling"):
        parse_arguments({"gen_args_0": {"arg_0": "some text"}})


def test_real_logs_read_with_their_requests():
    """The real files: WinoGrande in JSON form, TruthfulQA as Python repr strings."""
    for task, n_items, n_req in (("winogrande", 106, 2), ("truthfulqa", 136, None)):
        logs = read_sample_logs(_real(task), subject_ids=["pythia-14m"])
        assert logs.metric == "acc" and logs.models == ["pythia-14m"]
        assert len(logs.items) == n_items == logs.matrix().n_items
        raw = read_raw(_real(task))
        for rec in raw:
            item = next(i for i in logs.items.values() if i.doc_id == str(rec["doc_id"]))
            assert [(r.context, r.continuation) for r in item.requests] == logged_requests(rec)
            if n_req:
                assert len(item.requests) == n_req
        scores = logs.scores["pythia-14m"]
        assert sorted(scores.values())[0] == 0.0 and set(scores.values()) <= {0.0, 1.0}


# ----------------------------------------------------------------------------- acceptance 3
@pytest.mark.parametrize("task", ["winogrande", "truthfulqa"])
@pytest.mark.slow
def test_bank_requests_equal_the_logged_arguments(built, logs_dir, task):
    """Every item of a bank built from the real logs asks exactly the logged requests, and its
    rule reproduces every logged score (the harness's own)."""
    folder = built[task]
    raw = {str(r["doc"]["metabench_idx"] if isinstance(r["doc"], dict) else
               __import__("ast").literal_eval(r["doc"])["metabench_idx"]): r
           for r in read_raw(_real(task))}
    assert len(folder.bank) == len(raw)          # no item lost
    for item in folder.bank.item_ids:
        ir = build_item_requests(folder.bank, item)
        assert [(r.context, r.continuation) for r in ir.requests] == \
            logged_requests(raw[str(item)])
    stored = {r["item_id"]: r for r in folder.requests}
    assert set(stored) == set(map(str, folder.bank.item_ids))
    for item, rec in stored.items():
        assert [(q["context"], q["continuation"]) for q in rec["requests"]] == \
            logged_requests(raw[item])
    man = folder.manifest
    assert man["requests"]["rule_agreement_min"] == 1.0
    assert man["source"]["task"] == f"metabench_{task}_secondary"
    assert man["source"]["metric"] == "acc" and man["n_models"] == 21
    # WinoGrande: the option is in the context, the continuation shared; gold from the answers
    if task == "winogrande":
        ir = build_item_requests(folder.bank, folder.bank.item_ids[0])
        assert ir.requests[0].continuation == ir.requests[1].continuation
        assert ir.requests[0].context != ir.requests[1].context


def _served(srv) -> list:
    """Every prompt the toy server received (a batched body holds a list)."""
    out = []
    for e in srv.log:
        p = e["body"].get("prompt")
        out.extend(p if isinstance(p, list) else [p])
    return out


@pytest.mark.slow
def test_live_evaluate_asks_exactly_the_logged_requests(built, tmp_path):
    from atlascat.live.mockserver import MockOpenAIServer
    from atlascat.live.toylm import ToyLM

    folder = built["winogrande"]
    out = tmp_path / "run"
    with MockOpenAIServer(lm=ToyLM(seed=1)) as srv:
        r = CliRunner().invoke(app, ["evaluate", "--bank", str(folder.path), "--subject",
                                     f"completions:{srv.url}", "--llm", "toy", "--max-items",
                                     "8", "--min-items", "8", "--design", "adaptive", "-q",
                                     "-o", str(out)])
        served = _served(srv)
    assert r.exit_code == 0, r.output
    row = json.loads((out / "results.json").read_text())[0]
    assert row["n_items"] == 8 and row["protocol"] == "source models"
    lb = row["prediction"]
    assert 0.0 <= lb["lo"] <= lb["score"] <= lb["hi"] <= 1.0
    asked = [str(s["item_id"]) for s in _steps(out)]
    stored = {r["item_id"]: r for r in folder.requests}
    expected = [q["context"] + q["continuation"] for i in asked for q in stored[i]["requests"]]
    assert sorted(served) == sorted(expected)


def _steps(out: Path) -> list:
    import sqlite3

    with sqlite3.connect(out / "runs.sqlite") as con:
        return [{"item_id": i} for (i,) in con.execute("select item_id from steps")]


@pytest.mark.slow
def test_generation_items_travel_with_their_stops(built, tmp_path):
    """generate_until items: the context, stop strings and token limit of each logged item."""
    from atlascat.live.mockserver import MockOpenAIServer
    from atlascat.live.toylm import ToyLM

    folder = built["gen"]
    assert folder.manifest["requests"]["rules"] == ["exact_match"]
    stored = {r["item_id"]: r["requests"][0] for r in folder.requests}
    out = tmp_path / "run"
    with MockOpenAIServer(lm=ToyLM()) as srv:
        r = CliRunner().invoke(app, ["evaluate", "--bank", str(folder.path), "--subject",
                                     f"completions:{srv.url}", "--llm", "toy", "--max-items",
                                     "6", "--min-items", "6", "-q", "-o", str(out)])
        bodies = [e["body"] for e in srv.log]
    assert r.exit_code == 0, r.output
    asked = [s["item_id"] for s in _steps(out)]
    got = sorted((b["prompt"], tuple(b["stop"]), b["max_tokens"]) for b in bodies)
    want = sorted((stored[i]["context"], tuple(stored[i]["until"]), stored[i]["max_gen_toks"])
                  for i in asked)
    assert got == want and len({w[2] for w in want}) > 1   # limits differ per item
    ir = build_item_requests(folder.bank, asked[0])
    gold = str(ir.gold)
    assert ir.score([f" {gold}\n"]) == 1 and ir.score([f" {int(gold) + 1}"]) == 0


# ----------------------------------------------------------------------------- matrix path
@pytest.fixture(scope="module")
def matrix_bank(tmp_path_factory, shared_data):
    from atlascat.responses import ResponseMatrix

    rm = ResponseMatrix.read(shared_data / "benchpred" / "helm_mmlu.csv.gz")
    idx = np.random.default_rng(0).permutation(rm.n_subjects)
    root = tmp_path_factory.mktemp("matrix")
    rm.subset(subjects=idx[:20]).write(root / "source.csv")
    rm.subset(subjects=idx[20:]).write(root / "targets.csv")
    r = CliRunner().invoke(app, ["build-bank", str(root / "source.csv"), "-o",
                                 str(root / "bank")])
    assert r.exit_code == 0, r.output
    # the summary says what a matrix cannot: its chance level (and the predictor keeps it)
    assert "chance level" in r.output and "give --chance for multiple" in r.output
    # and how its predictor combines its parts at 20 models: the mean of IRT and ridge,
    # precision weights
    # (not "weights fitted from 40 models": the folder has 20)
    assert "IRT + ridge, their mean (below 40 source models; fitted weights from 40)" in r.output
    assert "precision weights (below 60 source models; a fitted weight from 60)" in r.output
    assert "fitted from 40 models" not in r.output
    return root


@pytest.mark.slow
def test_build_bank_then_simulate_writes_scores_with_intervals(matrix_bank):
    root = matrix_bank
    folder = load_bank_dir(root / "bank")
    assert folder.manifest["n_models"] == 20 and folder.manifest["source"]["kind"] == "matrix"
    assert folder.requests is None and folder.link.info["n_models"] == 20
    assert folder.link.support["min_models"] == 0.5 and folder.manifest["cross_fit"]["factor"] >= 1
    # a matrix says nothing of chance: a weaker model's interval may reach down to 0
    assert folder.manifest["settings"]["chance"] == 0.0 == folder.link.support["floor"]
    assert folder.manifest["settings"]["chance_from"] == "matrix"
    assert json.loads((root / "bank" / "predictor.json").read_text())["settings"]["chance"] == 0.0
    r = CliRunner().invoke(app, ["simulate", "--bank", str(root / "bank"),
                                 str(root / "targets.csv"), "--max-items", "50", "-o",
                                 str(root / "sim")])
    assert r.exit_code == 0, r.output
    ps = pd.read_csv(root / "sim" / "person_scores.csv")
    shipped = ("score", "score_lo", "score_hi")
    assert set(shipped) <= set(ps.columns) and len(ps) == 63
    assert (ps["n_items"] <= 50).all() and (ps["n_items"] >= 30).all()
    s, lo, hi = (ps[c].to_numpy() for c in shipped)
    assert ((0 <= lo) & (lo <= s) & (s <= hi) & (hi <= 1)).all()
    from atlascat.responses import ResponseMatrix

    tgt = ResponseMatrix.read(root / "targets.csv")
    truth = pd.Series(np.nanmean(tgt.values, 1), index=tgt.subject_ids)[ps["subject_id"]]
    err = np.abs(s - truth.to_numpy())
    assert err.mean() < 0.05                      # 3.1 points measured (seed 0)
    assert np.mean((lo <= truth.to_numpy()) & (truth.to_numpy() <= hi)) >= 0.85


@pytest.mark.slow
def test_simulate_design_option_picks_the_design(matrix_bank, tmp_path):
    """--design adaptive: the adaptive test scored by the link (no predictor columns);
    --design predictor: the predictor (exactly --max-items items); without RESPONSES the
    predictor is one clear error."""
    root = matrix_bank
    args = ["simulate", "--bank", str(root / "bank"), str(root / "targets.csv"),
            "--max-items", "40"]
    r = CliRunner().invoke(app, args + ["--design", "adaptive", "-o", str(tmp_path / "a")])
    assert r.exit_code == 0, r.output
    ada = pd.read_csv(tmp_path / "a" / "person_scores.csv")
    assert "method" not in ada.columns and (ada["n_items"] <= 40).all()
    r = CliRunner().invoke(app, args + ["--design", "predictor", "-o", str(tmp_path / "p")])
    assert r.exit_code == 0, r.output
    pre = pd.read_csv(tmp_path / "p" / "person_scores.csv")
    assert set(pre["method"]) <= {"combined", "design"} and (pre["n_items"] == 40).all()
    bad = CliRunner().invoke(app, ["simulate", "--bank", str(root / "bank"), "--thetas",
                                   str(tmp_path / "none.csv"), "--design", "predictor",
                                   "-o", str(tmp_path / "x")])
    assert bad.exit_code != 0 and "--design predictor needs" in str(bad.exception)


@pytest.mark.slow
def test_score_accepts_a_bank_folder(matrix_bank, tmp_path):
    out = tmp_path / "scores.csv"
    r = CliRunner().invoke(app, ["score", str(matrix_bank / "targets.csv"), "--bank",
                                 str(matrix_bank / "bank"), "-o", str(out)])
    assert r.exit_code == 0, r.output
    df = pd.read_csv(out)
    assert len(df) == 63 and np.corrcoef(df["theta"], df["mean_score"])[0, 1] > 0.9
    # the folder's prediction from all answers follows the accuracy (2.6 points apart on
    # average, measured: the link is fitted for 50-item tests on 20 models)
    assert (df["score_lo"] <= df["score"]).all()
    assert np.abs(df["score"] - df["mean_score"]).mean() < 0.035
    assert np.corrcoef(df["score"], df["mean_score"])[0, 1] > 0.95


@pytest.mark.slow
def test_a_bank_folder_is_a_suite_member(matrix_bank):
    from atlascat.suite.definition import SuiteMember

    m = SuiteMember("mine", str(matrix_bank / "bank")).resolve()
    folder = load_bank_dir(matrix_bank / "bank")
    assert m.source == str(matrix_bank / "bank") and len(m.bank) == len(folder.bank)
    assert m.link.to_dict() == folder.link.to_dict()


@pytest.mark.slow
def test_predict_scores_is_the_link_with_answers(matrix_bank):
    folder = load_bank_dir(matrix_bank / "bank")
    items = list(folder.bank.item_ids[:40])
    persons = pd.DataFrame({"subject_id": ["a", "b"], "theta": [-1.0, 1.0], "se": [0.3, 0.3]})
    adm = pd.DataFrame({"subject_id": ["a"] * 40 + ["b"] * 40, "item_id": items * 2,
                        "score": [0.0] * 40 + [1.0] * 40})
    p = predict_scores(folder, persons, adm)
    assert p["score"].iloc[0] < p["score"].iloc[1]
    one = folder.link.predict(1.0, 0.3, responses=dict(zip(items, [1.0] * 40)))
    assert p["score"].iloc[1] == pytest.approx(one.score)


@pytest.mark.slow
def test_loader_exposes_extra_files(matrix_bank, tmp_path):
    import shutil

    d = tmp_path / "bank"
    shutil.copytree(matrix_bank / "bank", d)
    (d / "predictor.json").write_text("{}")
    folder = load_bank_dir(d)
    assert is_bank_dir(d) and folder.extra("predictor.json") == d / "predictor.json"
    assert folder.extra("other.json") is None and set(folder.extras) == {"predictor.json"}
    with pytest.raises(AtlasError, match="not a bank folder"):
        load_bank_dir(tmp_path)


@pytest.mark.slow
def test_scores_file_is_the_published_score(matrix_bank, tmp_path):
    from atlascat.responses import ResponseMatrix

    rm = ResponseMatrix.read(matrix_bank / "source.csv")
    pub = pd.DataFrame({"model": rm.subject_ids, "score": 100 * np.linspace(0.3, 0.8, 20)})
    pub.to_csv(tmp_path / "scores.csv", index=False)
    f = build_bank(matrix_bank / "source.csv", None, scores=tmp_path / "scores.csv", folds=0)
    assert f.link.support["score_range"] == pytest.approx((0.3, 0.8))
    assert "published scores" in f.manifest["score"]
    # published scores normalised for chance, (mean - 1/4) / (3/4): the predictor's design
    # estimate is mapped to them exactly, and simulate's predictions are on their scale
    mean = np.nanmean(rm.values, axis=1)
    pd.DataFrame({"model": rm.subject_ids, "score": (mean - 0.25) / 0.75}).to_csv(
        tmp_path / "norm.csv", index=False)
    r = CliRunner().invoke(app, ["build-bank", str(matrix_bank / "source.csv"), "-o",
                                 str(tmp_path / "bank"), "--scores", str(tmp_path / "norm.csv"),
                                 "--chance", "0.25"])
    assert r.exit_code == 0, r.output
    assert "score = -0.333 + 1.333 x item mean (+- 0.00 points)" in " ".join(r.output.split())
    sm = load_bank_dir(tmp_path / "bank").manifest["predictor"]["score_map"]
    assert sm["slope"] == pytest.approx(4 / 3) and sm["resid_sd"] < 1e-9
    r = CliRunner().invoke(app, ["simulate", "--bank", str(tmp_path / "bank"),
                                 str(matrix_bank / "targets.csv"), "--max-items", "50",
                                 "-o", str(tmp_path / "sim")])
    assert r.exit_code == 0, r.output
    ps = pd.read_csv(tmp_path / "sim" / "person_scores.csv").set_index("subject_id")
    t = ResponseMatrix.read(matrix_bank / "targets.csv")
    truth = pd.Series((np.nanmean(t.values, axis=1) - 0.25) / 0.75, index=t.subject_ids)
    err = np.abs(ps.score - truth.reindex(ps.index))
    assert err.mean() < 0.06 and (ps.method == "design").mean() < 0.5


# ----------------------------------------------------------------------------- small N link
def test_score_link_from_20_models_and_not_19(rng):
    from atlascat.irt.bank import ItemBank
    from atlascat.scorelink import ScoreLinkEstimator

    bank = ItemBank([f"i{j}" for j in range(60)], rng.lognormal(0, 0.3, 60), rng.normal(0, 1, 60))
    th = np.linspace(-2, 2, 20)
    p = 1 / (1 + np.exp(-bank.a * (th[:, None] - bank.b)))
    y = (rng.random(p.shape) < p).astype(float)
    s = y.mean(1)
    link = ScoreLinkEstimator(cat_config=False).fit(bank, y, s).link_
    assert link.info["n_models"] == 20 and link.support["min_models"] == 10.0
    from atlascat.scorelink.curve import knots_for, support_for

    assert [knots_for(n) for n in (16, 20, 24, 40, 400)] == [0, 1, 2, 6, 6]
    assert [support_for(n) for n in (20, 83, 400, 5000)] == [0.5, 2.075, 10.0, 10.0]
    assert link.predict(2.0, 0.2).score > link.predict(-2.0, 0.2).score
    with pytest.raises(ConfigError, match="at least 20 calibration models"):
        ScoreLinkEstimator(cat_config=False).fit(bank, y[:19], s[:19])


@pytest.mark.parametrize("task", ["winogrande", "gen"])
@pytest.mark.slow
def test_replay_on_a_bank_folder_gives_the_logged_scores(built, logs_dir, tmp_path, task):
    """replay: a source model's recorded answers, asked through the folder's requests and rule,
    come back as the scores it logged (log-likelihood and generation items)."""
    folder = built[task]
    rm = read_sample_logs(logs_dir / task).matrix()
    rm.write(tmp_path / "answers.csv")
    model = rm.subject_ids[7]
    out = tmp_path / "run"
    r = CliRunner().invoke(app, ["evaluate", "--bank", str(folder.path), "--subject",
                                 f"replay:{tmp_path / 'answers.csv'}#{model}", "--max-items",
                                 "10", "--min-items", "10", "--design", "adaptive", "-q",
                                 "-o", str(out)])
    assert r.exit_code == 0, r.output
    import sqlite3

    with sqlite3.connect(out / "runs.sqlite") as con:
        got = {str(i): float(s) for i, s in con.execute("select item_id, score from steps")}
    row = dict(zip(map(str, rm.item_ids), rm.values[7]))
    assert len(got) == 10 and got == {i: row[i] for i in got}


# ----------------------------------------------------------------------------- live predictor
@pytest.mark.slow
def test_live_predictor_asks_logged_requests_and_every_reader_agrees(built, tmp_path):
    """``atlas evaluate --bank DIR`` on a folder built from sample logs runs the folder's
    benchmark predictor: ``--max-items`` items drawn by its design, each asked exactly as
    logged (dropped items too), and one predicted score in results.json, ``atlas runs``, the
    HTML page and :func:`predict_run`."""
    from atlascat.live.service import predict_run
    from atlascat.live.mockserver import MockOpenAIServer
    from atlascat.live.report import describe_prediction
    from atlascat.live.store import RunStore
    from atlascat.live.toylm import ToyLM

    folder = built["winogrande"]
    assert folder.extra("predictor_items.parquet") is not None
    out = tmp_path / "run"
    with MockOpenAIServer(lm=ToyLM(seed=1)) as srv:
        r = CliRunner().invoke(app, ["evaluate", "--bank", str(folder.path), "--subject",
                                     f"completions:{srv.url}", "--llm", "toy", "--max-items",
                                     "12", "-q", "-o", str(out)])
        served = _served(srv)
    assert r.exit_code == 0, r.output
    assert "design: benchmark predictor" in r.output
    row = json.loads((out / "results.json").read_text())[0]
    lb = row["prediction"]
    assert row["n_items"] == 12 and row["stop_reason"] == "budget"
    assert lb["design"] == "benchmark predictor" and lb["n_items"] == 12
    assert lb["method"] in ("combined", "design")
    assert 0.0 <= lb["lo"] <= lb["score"] <= lb["hi"] <= 1.0
    # every item asked as logged (requests.jsonl holds the bank's items; the predictor's
    # items file holds every item, the filtered ones too)
    from atlascat.bankdir import load_predictor_items

    items = load_predictor_items(folder)
    asked = [str(s["item_id"]) for s in _steps(out)]
    assert len(set(asked)) == 12 and set(asked) <= set(map(str, items.item_ids))
    expected = [q.context + q.continuation for i in asked
                for q in build_item_requests(items, i).requests]
    assert sorted(served) == sorted(expected)
    # one number everywhere
    store = RunStore(out / "runs.sqlite")
    again = predict_run(store, row["run_id"])
    assert again["score"] == lb["score"] and (again["lo"], again["hi"]) == (lb["lo"], lb["hi"])
    runs = CliRunner().invoke(app, ["runs", "--db", str(out / "runs.sqlite")])
    assert runs.exit_code == 0 and describe_prediction(lb, short=True) in runs.output
    page = (out / "reports" / f"{row['run_id']}.html").read_text()
    assert __import__("html").escape(describe_prediction(lb)) in page
    assert "benchmark predictor" in page
    assert "<tr><td>endpoint kind</td><td>log-likelihood</td></tr>" in page   # what it asked
    # the adaptive test's stop options are refused with the predictor, taken with --design
    bad = CliRunner().invoke(app, ["evaluate", "--bank", str(folder.path), "--subject",
                                   "completions:http://127.0.0.1:9", "--llm", "toy",
                                   "--min-items", "8", "-o", str(tmp_path / "bad")])
    assert bad.exit_code != 0 and "--design adaptive" in str(bad.exception)
    assert not (tmp_path / "bad").exists()        # refused before any run store is made


@pytest.mark.slow
def test_live_predictor_run_resumes_exactly_after_a_failure(built, tmp_path):
    """A predictor run whose server fails mid-run is saved, resumes, and ends with the items,
    answers and prediction of an uninterrupted run with the same seed."""
    from atlascat.catalogue import BankRef
    from atlascat.live.service import LiveRun, predict_run
    from atlascat.live.mockserver import MockOpenAIServer
    from atlascat.live.subjects import subject_from_spec
    from atlascat.live.toylm import ToyLM

    ref = BankRef.from_option(str(built["winogrande"].path))
    failing = [False]

    def run(db):
        with MockOpenAIServer(lm=ToyLM(seed=2),
                              fault=lambda n, item, t: "500" if failing[0] and n >= 3 else None
                              ) as srv:
            subj = subject_from_spec(f"completions:{srv.url}", model="toy",
                                     bank=ref.predictor()[1], max_retries=0, backoff=0.01)
            ev = LiveRun.start(db, ref, [subj], seed=7, budget=10, batch_size=2)
            first = ev.run()[0]
            if first.status == "done":
                return first, ev, None
            failing[0] = False
            ev.close()                   # the failed run's store, as a crashed process's
            ev = LiveRun.resume(db, [first.run_id], subject_for=lambda desc, bank: subj)
            return ev.run()[0], ev, first

    whole, ev1, _ = run(tmp_path / "a.sqlite")
    failing[0] = True
    broken, ev2, first = run(tmp_path / "b.sqlite")
    with ev1, ev2:
        assert ev1.jobs[0].kind == ev1.store.get_run(whole.run_id)["kind"] == "predictor"
        assert first is not None and first.status == "error" and 0 < first.n_items < 10
        assert whole.status == broken.status == "done"
        assert (broken.items, broken.scores) == (whole.items, whole.scores)
        p1 = predict_run(ev1.store, whole.run_id)
        p2 = predict_run(ev2.store, broken.run_id)
        assert (p1["score"], p1["lo"], p1["hi"]) == (p2["score"], p2["lo"], p2["hi"])


@pytest.mark.slow
def test_folder_from_62_models_predicts_with_its_ridge_part_live(tmp_path, shared_data):
    """From 62 source models the folder's predictor has its ridge part and fitted design weight
    (the build summary says so, the manifest and predictor.json keep them), and a live run on
    recorded answers asks the budget and predicts inside its interval with them."""
    from atlascat.predict import BenchmarkPredictor
    from atlascat.responses import ResponseMatrix

    rm = ResponseMatrix.read(shared_data / "benchpred" / "helm_mmlu.csv.gz")
    idx = np.random.default_rng(0).permutation(rm.n_subjects)
    rm.subset(subjects=idx[:62]).write(tmp_path / "source.csv")
    targets = rm.subset(subjects=idx[62:])
    targets.write(tmp_path / "targets.csv")
    r = CliRunner().invoke(app, ["build-bank", str(tmp_path / "source.csv"), "-o",
                                 str(tmp_path / "bank"), "--chance", "0.25"])
    assert r.exit_code == 0, r.output
    assert "IRT + ridge, weights fitted" in r.output
    assert "predictor's design weight" in r.output
    folder = load_bank_dir(tmp_path / "bank")
    assert folder.manifest["predictor"]["ridge"] is True
    pj = json.loads((tmp_path / "bank" / "predictor.json").read_text())
    assert pj["version"] == 8 and pj["calibration"]["gamma"] is not None
    assert pj["calibration"]["score_map"] is None      # no --scores: the item mean
    assert pj["calibration"]["design_weight"] == folder.manifest["predictor"]["design_weight"]
    model = str(targets.subject_ids[0])
    out = tmp_path / "run"
    r = CliRunner().invoke(app, ["evaluate", "--bank", str(tmp_path / "bank"), "--subject",
                                 f"replay:{tmp_path / 'targets.csv'}#{model}", "-q",
                                 "-o", str(out)])
    assert r.exit_code == 0, r.output
    lb = json.loads((out / "results.json").read_text())[0]["prediction"]
    assert 0.0 <= lb["lo"] <= lb["score"] <= lb["hi"] <= 1.0
    assert len(_steps(out)) == 50 and BenchmarkPredictor.from_dict(pj).gamma_ is not None


# ----------------------------------------------------------------------------- orientation
def test_a_matrix_with_models_as_columns_is_flagged(tmp_path, rng):
    """A file whose rows are its items (models as columns) builds, but the build warns: more
    models than items and no more items than the test length; the right way round is quiet."""
    from atlascat.bankdir.builder import build_warnings

    th, b = rng.normal(0, 1, 25), rng.normal(0, 1, 70)
    y = (rng.random((25, 70)) < 1 / (1 + np.exp(-(th[:, None] - b)))).astype(float)
    df = pd.DataFrame(y, index=pd.Index([f"model-{i}" for i in range(25)], name="model"),
                      columns=[f"q{j}" for j in range(70)])
    df.to_csv(tmp_path / "right.csv")
    df.T.rename_axis("item").to_csv(tmp_path / "turned.csv")
    turned = build_bank(tmp_path / "turned.csv", tmp_path / "turned", seed=0)
    said = [w for w in build_warnings(turned.manifest) if "transpose" in w]
    assert said and said[0].startswith("70 models x 25 items"), build_warnings(turned.manifest)
    right = build_bank(tmp_path / "right.csv", tmp_path / "right", seed=0)
    assert not [w for w in build_warnings(right.manifest) if "transpose" in w]


def test_a_metric_atlas_cannot_compute_is_said_at_build_time():
    """Items kept as `metric:<name>` cannot be scored live from a model's outputs: the build
    says so (and which subjects can ask them) instead of leaving it to the first live run."""
    from atlascat.bankdir.builder import build_warnings

    def manifest(rules):
        return {"requests": {"n_items": 10, "rules": rules, "rule_agreement_min": None}}

    said = [w for w in build_warnings(manifest(["metric:judge_score"])) if "cannot compute" in w]
    assert said and "'judge_score'" in said[0] and "--subject cmd:COMMAND" in said[0]
    assert not [w for w in build_warnings(manifest(["acc_norm", "mc2"])) if "cannot" in w]


def test_the_build_reports_its_progress_step_by_step(tmp_path):
    """``build_bank(progress=...)`` is called after each step (read, calibration, link, each
    cross-fitting fold, predictor, folder written), counting up to its total: what the
    command's progress bar shows on a long build."""
    from atlascat.bankdir.builder import build_steps

    rng = np.random.default_rng(3)
    theta, b = rng.normal(size=40), rng.normal(size=60)
    y = (rng.random((40, 60)) < 1 / (1 + np.exp(-(theta[:, None] - b)))).astype(int)
    pd.DataFrame(y, index=[f"m{i}" for i in range(40)],
                 columns=[f"q{j}" for j in range(60)]).rename_axis("model").to_csv(
        tmp_path / "r.csv")
    calls = []
    build_bank(tmp_path / "r.csv", tmp_path / "bank", folds=2, budget=20,
               progress=lambda done, total: calls.append((done, total)))
    assert calls == [(k, build_steps(2)) for k in range(1, build_steps(2) + 1)]
    assert build_steps(2) == 7


def test_a_build_from_sample_logs_counts_each_file_read(tmp_path):
    """From sample logs the progress counts one step per model's file read, then the build's
    other steps, up to a total that says so from the first call."""
    from atlascat.bankdir.builder import build_steps

    files = generation_logs(tmp_path / "logs", n_models=22, n_items=12)
    calls = []
    build_bank(tmp_path / "logs", tmp_path / "bank", folds=0,
               progress=lambda done, total: calls.append((done, total)))
    total = build_steps(0) - 1 + len(files)
    assert calls == [(k, total) for k in range(1, total + 1)]


def test_a_chat_subject_reads_an_exact_match_generation_and_refuses_f1(tmp_path):
    """From generation logs, an exact-match item's chat answer is scored by its text (the
    "exact" scorer: the run ends, APPROXIMATE); items scored by F1 have no text scorer, and
    ``openai:`` is refused with one line before any run is created."""
    from atlascat.cli import main
    from atlascat.live.mockserver import MockOpenAIServer
    from atlascat.live.toylm import ToyLM

    generation_logs(tmp_path / "logs", n_models=22, n_items=12)
    folder = build_bank(tmp_path / "logs", tmp_path / "bank", folds=0)
    assert set(folder.bank.metadata["scorer"]) == {"exact"}
    f1 = tmp_path / "f1logs"
    for f in (tmp_path / "logs").rglob("samples_*.jsonl"):
        recs = [json.loads(x) for x in f.read_text().splitlines()]
        for r in recs:
            r["metrics"], r["f1"] = ["f1"], 0.5 * r["exact_match"] + 0.25
        (f1 / f.parent.name).mkdir(parents=True)
        (f1 / f.parent.name / f.name).write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    build_bank(f1, tmp_path / "f1bank", folds=0)
    with MockOpenAIServer(lm=ToyLM(seed=1)) as srv:
        assert main(["evaluate", "--bank", str(tmp_path / "bank"), "--subject",
                     f"openai:{srv.url}", "--llm", "toy", "--max-items", "5", "-q", "-o",
                     str(tmp_path / "run")]) == 0
        assert main(["evaluate", "--bank", str(tmp_path / "f1bank"), "--subject",
                     f"openai:{srv.url}", "--llm", "toy", "--max-items", "5", "-q", "-o",
                     str(tmp_path / "f1run")]) == 2
    row = json.loads((tmp_path / "run" / "results.json").read_text())[0]
    assert row["status"] == "done" and row["n_items"] == 5 and row["protocol"] == "approximate"
    assert not (tmp_path / "f1run").exists()
