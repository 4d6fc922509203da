"""Any per-item metric through ``atlas build-bank`` / ``simulate`` / ``evaluate``: scales
(``--score-range``), continuous per-sample metrics of sample logs (mc2, f1; a metric atlas cannot
compute is refused live, naming it), corpus-level metrics refused, and the docs' sample-log
recipe on logs of simulated models made from the real logs in ../shared/data/lmeval_samples/.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from atlascat.bankdir import (load_bank_dir, read_sample_logs, simulated_sample_logs)
from atlascat.content.requests import build_item_requests, mc2_score, token_f1
from atlascat.errors import BankError
from atlascat.responses import ResponseMatrix
from cli_checks import one_line_error, run_cli

REAL = Path(__file__).resolve().parents[2] / "shared" / "data" / "lmeval_samples" / "pythia-14m"


def _real(task: str) -> Path:
    files = sorted(REAL.glob(f"samples_metabench_{task}_secondary_*.jsonl.gz"))
    assert files, f"no real {task} sample log in {REAL}"
    return files[0]


def _scaled_matrix(tmp_path, lo, hi, *, integer=False, n=40, items=80, seed=0):
    rng = np.random.default_rng(seed)
    th, b = rng.normal(0, 1, n), rng.normal(0, 1, items)
    y = np.clip(1 / (1 + np.exp(-(th[:, None] - b))) + rng.normal(0, 0.1, (n, items)), 0, 1)
    v = lo + (hi - lo) * y
    v = np.rint(v) if integer else v
    df = pd.DataFrame(v, index=pd.Index([f"m{i}" for i in range(n)], name="model"),
                      columns=[f"i{j}" for j in range(items)])
    df.iloc[:30].to_csv(tmp_path / "src.csv")
    df.iloc[30:].to_csv(tmp_path / "tgt.csv")
    return df


def test_score_range_maps_in_once_and_every_prediction_back(tmp_path, capsys):
    """A BLEU-like matrix on 0-100: built with --score-range 0 100, modelled on 0-1 (the
    folder's bank and predictor see 0-1), and simulate's predictions are in BLEU points,
    within a few points of the targets' means and covered by their intervals."""
    df = _scaled_matrix(tmp_path, 0, 100)
    assert run_cli(["build-bank", tmp_path / "src.csv", "-o", tmp_path / "bank",
                 "--score-range", "0", "100"]) == 0
    assert "score scale" in capsys.readouterr().out
    folder = load_bank_dir(tmp_path / "bank")
    assert folder.manifest["settings"]["score_range"] == [0.0, 100.0]
    pj = json.loads((tmp_path / "bank" / "predictor.json").read_text())
    assert max(pj["calibration"]["source_range"]) <= 1.0           # modelled on 0-1
    assert run_cli(["simulate", "--bank", tmp_path / "bank", tmp_path / "tgt.csv",
                 "--max-items", "40", "-o", tmp_path / "sim"]) == 0
    ps = pd.read_csv(tmp_path / "sim" / "person_scores.csv")
    truth = df.iloc[30:].mean(axis=1).reindex(ps["subject_id"]).to_numpy()
    est, lo, hi = (ps[c].to_numpy() for c in ps.columns[2:5])
    assert truth.mean() > 20 and np.abs(est - truth).mean() < 4.0     # points of BLEU
    summary = json.loads((tmp_path / "sim" / "summary.json").read_text())
    assert summary["scale"] == [0.0, 100.0] and summary["score_mean"] == pytest.approx(est.mean())
    assert np.mean((lo <= truth) & (truth <= hi)) >= 0.8
    # the same matrix on 0-1 gives the same predictions, divided by 100
    (df.iloc[:30] / 100).to_csv(tmp_path / "src01.csv")
    (df.iloc[30:] / 100).to_csv(tmp_path / "tgt01.csv")
    assert run_cli(["build-bank", tmp_path / "src01.csv", "-o", tmp_path / "bank01"]) == 0
    assert run_cli(["simulate", "--bank", tmp_path / "bank01", tmp_path / "tgt01.csv",
                 "--max-items", "40", "-o", tmp_path / "sim01"]) == 0
    p01 = pd.read_csv(tmp_path / "sim01" / "person_scores.csv")
    np.testing.assert_allclose(p01.iloc[:, 2].to_numpy() * 100, est, atol=1e-6)


def test_a_percent_matrix_is_told_its_scale_not_called_ratings(tmp_path, capsys):
    """Right / wrong written as 0 / 100 is a percent scale: `atlas calibrate` says to divide
    (or build with --score-range 0 100), not to fit ratings; build-bank names --score-range
    first and does not send the user to the graded model it cannot fit."""
    rng = np.random.default_rng(3)
    df = pd.DataFrame(100.0 * (rng.random((30, 40)) < 0.6),
                      index=pd.Index([f"m{i}" for i in range(30)], name="model"),
                      columns=[f"i{j}" for j in range(40)])
    df.to_csv(tmp_path / "pct.csv")
    line = one_line_error(capsys, ["calibrate", tmp_path / "pct.csv", "-o", tmp_path / "b.csv"],
                           "only 0 and 100", "divide by 100", "--score-range 0 100")
    assert "ratings" not in line and "graded" not in line
    line = one_line_error(capsys, ["build-bank", tmp_path / "pct.csv", "-o", tmp_path / "f"],
                           "outside [0, 1]", "--score-range LO HI", "a percent or BLEU: 0 100")
    assert "graded" not in line and line.count("--score-range") == 1


def test_zero_one_scores_read_on_a_percent_range_say_so(tmp_path, capsys):
    """0-1 scores built with --score-range 0 100 end up within 1% of the range: every item
    falls to the filter; the line says where the scores reach and to drop --score-range (not
    "the response matrix is empty")."""
    _scaled_matrix(tmp_path, 0, 1)
    line = one_line_error(capsys, ["build-bank", tmp_path / "src.csv", "-o", tmp_path / "b",
                                    "--score-range", "0", "100"],
                           "no item's scores vary", "reach only", "of --score-range 0 100",
                           "need no --score-range")
    assert "empty" not in line


def test_bad_scales_are_one_line(tmp_path, capsys):
    """Ratings outside the declared range, a matrix off [0, 1] without a range, a range that is
    not one: one line each, exit 2."""
    _scaled_matrix(tmp_path, 1, 10, integer=True)
    one_line_error(capsys, ["build-bank", tmp_path / "src.csv", "-o", tmp_path / "b1",
                             "--score-range", "1", "5"], "outside the declared range [1, 5]",
                    "--score-range")
    one_line_error(capsys, ["build-bank", tmp_path / "src.csv", "-o", tmp_path / "b2"],
                    "outside [0, 1]", "--score-range LO HI")
    one_line_error(capsys, ["build-bank", tmp_path / "src.csv", "-o", tmp_path / "b3",
                             "--score-range", "10", "1"], "--score-range", "LO < HI")
    assert run_cli(["build-bank", tmp_path / "src.csv", "-o", tmp_path / "b4",
                 "--score-range", "1", "10"]) == 0                   # a 1-10 judge rating


def test_simulate_of_another_benchmarks_results_on_a_folder_is_one_line(tmp_path, capsys):
    """Results whose item ids are none of the folder's (another benchmark's matrix) are
    refused in one line by the folder's predictor, not predicted 0.0 from 0 items."""
    df = _scaled_matrix(tmp_path, 0, 100)
    assert run_cli(["build-bank", tmp_path / "src.csv", "-o", tmp_path / "bank",
                 "--score-range", "0", "100"]) == 0
    capsys.readouterr()
    df.iloc[30:].rename(columns=lambda c: f"other_{c}").to_csv(tmp_path / "other.csv")
    line = one_line_error(capsys, ["simulate", tmp_path / "other.csv", "--bank",
                                    tmp_path / "bank", "-o", tmp_path / "sim"],
                           "none of the 80 response items", "'other_i0'")
    assert "Mean of empty slice" not in line and not (tmp_path / "sim").exists()


def test_a_target_without_answers_is_flagged_not_predicted_zero(tmp_path, capsys):
    """A target row with no answer to any of the folder's items gets no prediction (NaN, flag
    ``no_items``, a warning), not 0.0 with the interval 0.0-0.0; the others are predicted."""
    df = _scaled_matrix(tmp_path, 0, 100)
    assert run_cli(["build-bank", tmp_path / "src.csv", "-o", tmp_path / "bank",
                 "--score-range", "0", "100"]) == 0
    tgt = df.iloc[30:].copy()
    tgt.iloc[0, :] = np.nan
    tgt.to_csv(tmp_path / "blank.csv")
    assert run_cli(["simulate", tmp_path / "blank.csv", "--bank", tmp_path / "bank",
                 "-o", tmp_path / "sim"]) == 0
    ps = pd.read_csv(tmp_path / "sim" / "person_scores.csv", index_col="subject_id")
    empty = ps.loc[tgt.index[0]]
    assert empty["n_items"] == 0 and empty["score_flag"] == "no_items"
    assert empty[["score", "score_lo", "score_hi", "percentile"]].isna().all()
    assert "nothing to predict" in empty["score_warning"]
    assert ps.drop(tgt.index[0])["score"].notna().all()
    assert ps.drop(tgt.index[0])["method"].isin(["combined", "design"]).all()


def test_a_target_asked_every_answer_it_has_says_the_score_is_their_mean(tmp_path, capsys):
    """A target row with answers to fewer items than the budget is asked every one of them:
    its score is their mean with an interval of no width, which simulate and a live replay
    say in a warning instead of passing it off as a prediction over every item."""
    df = _scaled_matrix(tmp_path, 0, 100)
    assert run_cli(["build-bank", tmp_path / "src.csv", "-o", tmp_path / "bank",
                 "--score-range", "0", "100"]) == 0
    tgt = df.iloc[30:].copy()
    tgt.iloc[0, 30:] = np.nan                                  # 30 answers, budget 50
    tgt.to_csv(tmp_path / "sparse.csv")
    assert run_cli(["simulate", tmp_path / "sparse.csv", "--bank", tmp_path / "bank",
                 "-o", tmp_path / "sim"]) == 0
    ps = pd.read_csv(tmp_path / "sim" / "person_scores.csv", index_col="subject_id")
    row = ps.loc[tgt.index[0]]
    assert row["n_items"] == 30 and "answered only 30 of the 80 items" in row["score_warning"]
    others = ps.drop(tgt.index[0])["score_warning"].fillna("")
    assert not others.str.contains("answered only").any()
    capsys.readouterr()
    assert run_cli(["evaluate", "--bank", tmp_path / "bank", "--subject",
                  f"replay:{tmp_path / 'sparse.csv'}#{tgt.index[0]}", "-q",
                  "-o", tmp_path / "live"]) == 0
    assert "answered only 30 of the 80 items" in capsys.readouterr().err
    live = json.loads((tmp_path / "live" / "results.json").read_text())[0]["prediction"]
    assert live["warning"] == row["score_warning"] and live["score"] == pytest.approx(
        row["score"])


def test_scores_file_of_a_score_range_folder_is_on_the_metrics_scale(tmp_path, capsys):
    """--scores with --score-range 1 10: the published scores are judge ratings (1-10) as the
    results are, mapped to 0-1 as they are (not read as percent), and simulate predicts on
    1-10 near the targets' means; a score outside [1, 10] (a 0-1 one too) is one line."""
    df = _scaled_matrix(tmp_path, 1, 10)
    means = df.mean(axis=1)
    means.iloc[:30].rename("score").to_csv(tmp_path / "scores.csv", index_label="model")
    assert run_cli(["build-bank", tmp_path / "src.csv", "-o", tmp_path / "bank", "--scores",
                 tmp_path / "scores.csv", "--score-range", "1", "10"]) == 0
    capsys.readouterr()
    assert run_cli(["simulate", "--bank", tmp_path / "bank", tmp_path / "tgt.csv",
                 "--max-items", "40", "-o", tmp_path / "sim"]) == 0
    ps = pd.read_csv(tmp_path / "sim" / "person_scores.csv")
    truth = means.reindex(ps["subject_id"]).to_numpy()
    assert np.abs(ps.iloc[:, 2].to_numpy() - truth).mean() < 0.5      # points of the 1-10 scale
    for bad, value in (("high", 10.5), ("share", 0.6)):
        wrong = means.iloc[:30].copy()
        wrong.iloc[3] = value
        wrong.rename("score").to_csv(tmp_path / f"{bad}.csv", index_label="model")
        one_line_error(capsys, ["build-bank", tmp_path / "src.csv", "-o", tmp_path / bad,
                                 "--scores", tmp_path / f"{bad}.csv", "--score-range", "1", "10"],
                        f"score of 'm3' is {value:g}", "outside the declared range [1, 10]")


def test_chance_of_a_score_range_folder_is_on_the_metrics_scale(tmp_path, capsys):
    """--chance with --score-range 1 10 is a rating (2.8: 0.2 of the scale, shown as 2.8);
    one outside [1, 10] (a 0-1 share) is one line."""
    _scaled_matrix(tmp_path, 1, 10)
    assert run_cli(["build-bank", tmp_path / "src.csv", "-o", tmp_path / "bank", "--chance", "2.8",
                 "--score-range", "1", "10"]) == 0
    assert "2.80 on the metric's scale (--chance)" in capsys.readouterr().out   # 1-10: 2 digits
    folder = load_bank_dir(tmp_path / "bank")
    settings = folder.manifest["settings"]   # as the summary and --chance: the metric's scale
    assert settings["chance"] == pytest.approx(2.8) and settings["chance_from"] == "given"
    assert folder.link.support["chance"] == pytest.approx(0.2)   # modelled on 0-1
    predictor = json.loads((tmp_path / "bank" / "predictor.json").read_text())
    assert predictor["settings"]["chance"] == pytest.approx(0.2)
    one_line_error(capsys, ["build-bank", tmp_path / "src.csv", "-o", tmp_path / "b2",
                             "--chance", "0.25", "--score-range", "1", "10"],
                    "--chance 0.25", "outside the declared range [1, 10]")


def test_a_score_range_folder_predicts_as_the_same_folder_built_on_0_1(tmp_path):
    """The manifest's chance on the metric's scale changes nothing the folder computes: built
    on 1-10 with --chance 2.8, reloaded, it predicts what the folder built on the same scores
    mapped to 0-1 with --chance 0.2 predicts (mapped back)."""
    from atlascat.bankdir import build_bank, replay_predictor

    df = _scaled_matrix(tmp_path, 1, 10, n=36)
    unit = (df - 1) / 9
    build_bank(tmp_path / "src.csv", tmp_path / "ten", chance=2.8, score_range=(1, 10),
               folds=0)
    unit.iloc[:30].to_csv(tmp_path / "unit.csv")
    plain = build_bank(tmp_path / "unit.csv", tmp_path / "one", chance=0.2, folds=0)
    ten = load_bank_dir(tmp_path / "ten")
    assert ten.manifest["settings"]["chance"] == pytest.approx(2.8)
    assert plain.manifest["settings"]["chance"] == pytest.approx(0.2)
    got = replay_predictor(ten, tmp_path / "tgt.csv", budget=20, seed=1)
    want = replay_predictor(plain, unit.iloc[30:], budget=20, seed=1)
    assert len(got) == 6
    for col in ("score", "score_lo", "score_hi"):
        np.testing.assert_allclose(got[col], 1 + 9 * want[col], rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(got["percentile"], want["percentile"], rtol=1e-9)


def _gen_logs(root: Path, metric: str, n_models=22, n_items=60, seed=0, value=None):
    """Generation logs (lm-eval 0.4 spelling) of a toy QA task with a continuous metric."""
    rng = np.random.default_rng(seed)
    gold = [" ".join(rng.choice(["red", "blue", "green", "big", "small", "cat", "dog"], 3))
            for _ in range(n_items)]
    for m in range(n_models):
        folder = root / f"org__gen-{m:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        lines = []
        for i in range(n_items):
            keep = rng.random(3) < 0.15 + 0.8 * m / (n_models - 1)
            words = [w if k else "x" for w, k in zip(gold[i].split(), keep)]
            text = " " + " ".join(words)
            score = token_f1(text, gold[i]) if value is None else value(text, gold[i])
            args = {"gen_args_0": {"arg_0": f"Q{i}: name three words\nA:",
                                   "arg_1": {"until": ["\n"], "max_gen_toks": 12}}}
            lines.append(json.dumps({
                "doc_id": i, "doc": {"q": i}, "target": gold[i], "arguments": args,
                "resps": [[text + "\nmore"]], "filtered_resps": [text], "filter": "none",
                "metrics": [metric], metric: score}))
        (folder / "samples_toyqa_2025-01-01T00-00-00.000000.jsonl").write_text(
            "\n".join(lines) + "\n", encoding="utf-8")
    return root


def test_f1_logs_keep_their_rule_and_reproduce_the_logged_scores(tmp_path):
    logs = read_sample_logs(_gen_logs(tmp_path / "f1", "f1"))
    assert logs.metric == "f1" and logs.continuous
    fields = logs.rule_fields(logs.item_ids()[0])
    assert fields["rule"] == "f1" and fields["agreement"] == 1.0
    assert run_cli(["build-bank", tmp_path / "f1", "-o", tmp_path / "bank"]) == 0
    folder = load_bank_dir(tmp_path / "bank")
    assert folder.manifest["requests"]["rules"] == ["f1"]
    assert folder.manifest["requests"]["rule_agreement_min"] == 1.0
    ir = build_item_requests(folder.bank, folder.bank.item_ids[0])
    assert 0.0 < ir.score(" " + ir.gold.split()[0] + " x y") < 1.0
    said = ir.choice(" " + ir.gold.split()[0] + " x y\nmore")       # what the page shows
    assert said["extracted"] == ir.gold.split()[0] + " x y" and said["gold"] == ir.gold


def test_a_live_f1_run_says_token_f1_and_mean_score(tmp_path, capsys):
    """A live run on an f1 folder: the protocol says the generation is scored by token F1 (not
    "exact match"), and the result reads a mean score, never "accuracy ... k/n", even when
    every F1 the model got is exactly 0 (a continuous folder's 0 is a score)."""
    from atlascat.live.mockserver import MockOpenAIServer
    from atlascat.live.toylm import ToyLM

    _gen_logs(tmp_path / "f1", "f1")
    assert run_cli(["build-bank", tmp_path / "f1", "-o", tmp_path / "bank"]) == 0
    capsys.readouterr()
    with MockOpenAIServer(lm=ToyLM(seed=1)) as srv:
        assert run_cli(["evaluate", "--bank", tmp_path / "bank", "--subject",
                      f"completions:{srv.url}", "--llm", "toylm", "--max-items", "6",
                      "-o", tmp_path / "live"]) == 0
    out = capsys.readouterr().out
    row = json.loads((tmp_path / "live" / "results.json").read_text())[0]
    assert row["continuous"] is True and "generation, token F1" in row["protocol_label"]
    assert "(generation, token F1)" in out and "exact match" not in out
    assert "  mean score: observed" in out and "accuracy:" not in out, out
    page = (tmp_path / "live" / "reports" / f"{row['run_id']}.html").read_text()
    assert "<tr><td>endpoint kind</td><td>generation</td></tr>" in page   # what it asked
    assert run_cli(["info", tmp_path / "bank"]) == 0     # the folder named as the run names it
    said = capsys.readouterr().out
    assert ("  benchmark: toyqa\n  metric: f1: each model's mean score over all 60 items, in "
            "percent (0-100)\n") in said
    assert f"metric: {row['prediction']['metric']}, in percent" in said


def test_f1_logs_whose_scores_contradict_their_outputs_say_so(tmp_path, capsys):
    """f1 logs whose scores are not the F1 of their own logged outputs build a folder, but
    the summary warns that a live run (which scores by the rule) will not score as the harness
    did; logs that agree with their outputs get no such warning."""
    _gen_logs(tmp_path / "ok", "f1")
    assert run_cli(["build-bank", tmp_path / "ok", "-o", tmp_path / "b_ok"]) == 0
    assert "scoring rule" not in capsys.readouterr().err
    _gen_logs(tmp_path / "bad", "f1", value=lambda t, g: round(1 - token_f1(t, g), 6))
    assert run_cli(["build-bank", tmp_path / "bad", "-o", tmp_path / "b_bad"]) == 0
    err = capsys.readouterr().err
    warn = [ln for ln in err.splitlines() if "scoring rule (f1) reproduces" in ln]
    assert len(warn) == 1 and "not as the harness scored" in warn[0] and "--metric" in warn[0]
    req = load_bank_dir(tmp_path / "b_bad").manifest["requests"]
    assert req["rule_disagreeing_items"] > 0 and req["rule_agreement_min"] < 1


def test_a_metric_atlas_cannot_compute_is_refused_live_by_name(tmp_path, capsys):
    """ROUGE-L logs build a folder (the requests kept); asking it of a model's outputs is
    refused in one line naming rougeL, while an item-scored subject (cmd:) runs it."""
    rouge = lambda text, gold: round(0.9 * token_f1(text, gold), 4)     # noqa: E731
    _gen_logs(tmp_path / "rouge", "rougeL", value=rouge)
    assert run_cli(["build-bank", tmp_path / "rouge", "-o", tmp_path / "bank"]) == 0
    capsys.readouterr()
    folder = load_bank_dir(tmp_path / "bank")
    assert folder.manifest["requests"]["rules"] == ["metric:rougeL"]
    with pytest.raises(BankError, match="'rougeL'.*cmd:COMMAND"):
        build_item_requests(folder.bank, folder.bank.item_ids[0])
    one_line_error(capsys, ["evaluate", "--bank", tmp_path / "bank", "--subject",
                             "completions:http://127.0.0.1:9", "--llm", "toy",
                             "-o", tmp_path / "live"], "'rougeL'", "cmd:")
    script = tmp_path / "score.py"
    script.write_text("import json, sys\nfor line in sys.stdin:\n"
                      "    i = json.loads(line)['item_id']\n"
                      "    print(json.dumps({'item_id': i, 'score': 0.25}), flush=True)\n")
    assert run_cli(["evaluate", "--bank", tmp_path / "bank", "--subject",
                 f"cmd:{sys.executable} {script}", "--llm", "mine", "--max-items", "20",
                 "-q", "-o", tmp_path / "cmd"]) == 0
    row = json.loads((tmp_path / "cmd" / "results.json").read_text())[0]
    assert row["n_items"] == 20 and abs(row["prediction"]["score"] - 0.25) < 0.05


def test_corpus_level_metric_is_refused(tmp_path, capsys):
    """lm-eval logs a corpus metric (BLEU of a translation task, macro F1) as a (reference,
    prediction) pair per sample: not a mean over items, refused in one line."""
    root = _gen_logs(tmp_path / "bleu", "bleu", value=lambda text, gold: [gold, text])
    one_line_error(capsys, ["build-bank", root, "-o", tmp_path / "bank"], "'bleu'",
                    "corpus", "not a mean over items", "--metric")


def test_known_harness_range_maps_bleu_max(tmp_path):
    """TruthfulQA-gen's bleu_max is logged in points (0-100): read on that range by default."""
    root = _gen_logs(tmp_path / "bm", "bleu_max", value=lambda t, g: 100 * token_f1(t, g))
    logs = read_sample_logs(root)
    assert logs.score_range == (0.0, 100.0)
    assert max(v for sc in logs.scores.values() for v in sc.values()) <= 1.0


def test_logs_on_another_scale_write_held_out_models_on_that_scale(tmp_path, capsys):
    """A folder built from bleu_max logs reads RESPONSES in BLEU points, so the held-out
    models' matrix written from their logs is in points too (0.45 read as 0.45 BLEU would
    predict a score 100 times too small), and simulate predicts each one's mean in points."""
    bleu = lambda t, g: round(100 * token_f1(t, g), 2)                 # noqa: E731
    root = _gen_logs(tmp_path / "bm", "bleu_max", n_models=26, value=bleu)
    held = tmp_path / "held"
    held.mkdir()
    for m in (3, 12, 21):                                               # held-out models
        (root / f"org__gen-{m:02d}").rename(held / f"org__gen-{m:02d}")
    logs = read_sample_logs(held)
    out = logs.write(tmp_path / "held.csv")
    truth = pd.read_csv(out, index_col=0)
    assert truth.to_numpy().max() > 1.0                                 # BLEU points, as logged
    assert np.allclose(truth.to_numpy() / 100, logs.matrix().values)    # the matrix: on [0, 1]
    assert run_cli(["build-bank", root, "-o", tmp_path / "bank"]) == 0
    assert run_cli(["simulate", out, "--bank", tmp_path / "bank", "-o", tmp_path / "sim"]) == 0
    ps = pd.read_csv(tmp_path / "sim" / "person_scores.csv", index_col="subject_id")
    mean = truth.mean(axis=1).reindex(ps.index)
    assert (np.abs(ps["score"] - mean) < 10).all(), (ps["score"], mean)


def test_sample_log_recipe_end_to_end(tmp_path, monkeypatch):
    """The docs' recipe: logs of simulated models from the real TruthfulQA log (its
    requests, simulated answers, the mc2 metric), built into a folder, checked on held-out
    simulated models, and a new model asked live exactly the logged requests."""
    from atlascat.live.mockserver import MockOpenAIServer
    from atlascat.live.toylm import ToyLM

    monkeypatch.chdir(tmp_path)
    real = _real("truthfulqa")
    files = simulated_sample_logs(real, "logs", n_models=24, held_out=8, seed=0)
    assert len(files) == 32 and all("simulated" in str(f) for f in files)
    raw = [json.loads(x) for x in files[0].read_text().splitlines()]
    real_args = {}
    import gzip
    with gzip.open(real, "rt") as fh:
        for line in fh:
            r = json.loads(line)
            real_args[r["doc_id"]] = r["arguments"]
    assert all(r["arguments"] == real_args[r["doc_id"]] for r in raw)     # the real requests
    read_sample_logs("logs_held_out", metric="mc2").matrix().write("held_out.csv")
    assert run_cli(["build-bank", "logs", "--metric", "mc2", "-o", "tqa"]) == 0
    folder = load_bank_dir("tqa")
    assert folder.manifest["requests"]["rules"] == ["mc2"]
    assert folder.manifest["requests"]["rule_agreement_min"] == 1.0
    assert run_cli(["simulate", "--bank", "tqa", "held_out.csv", "--max-items", "50",
                 "-o", "sim"]) == 0
    ps = pd.read_csv("sim/person_scores.csv")
    truth = ResponseMatrix.read("held_out.csv").to_frame().mean(axis=1)
    truth = truth.reindex(ps["subject_id"]).to_numpy()
    est, lo, hi = (ps[c].to_numpy() for c in ps.columns[2:5])
    assert np.abs(est - truth).mean() < 0.05 and np.mean((lo <= truth) & (truth <= hi)) >= 0.75
    with MockOpenAIServer(lm=ToyLM(seed=1)) as srv:
        assert run_cli(["evaluate", "--bank", "tqa", "--subject", f"completions:{srv.url}",
                     "--llm", "toylm", "--max-items", "12", "-q", "-o", "live"]) == 0
        served = [p for e in srv.log for p in (e["body"]["prompt"] if isinstance(
            e["body"].get("prompt"), list) else [e["body"].get("prompt")])]
    row = json.loads(Path("live/results.json").read_text())[0]
    assert row["n_items"] == 12
    lb = row["prediction"]
    assert 0.0 <= lb["lo"] <= lb["score"] <= lb["hi"] <= 1.0
    import sqlite3
    with sqlite3.connect("live/runs.sqlite") as con:
        steps = con.execute("select item_id, score from steps").fetchall()
    assert any(0 < s < 1 for _, s in steps)                    # continuous scores stored
    from atlascat.bankdir import load_predictor_items
    items = load_predictor_items(folder)
    expected = [q.context + q.continuation for i, _ in steps
                for q in build_item_requests(items, i).requests]
    assert sorted(served) == sorted(expected)
    ir = build_item_requests(items, steps[0][0])
    assert ir.rule == "mc2" and ir.mc2_true >= 1
    assert mc2_score([0.0, 0.0], 1) == pytest.approx(0.5)
