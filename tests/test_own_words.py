"""Your benchmark in your words (issue 43): a bank file's run names its benchmark, not its
path; a bank folder's protocol reads as the source models', never "leaderboard"; a continuous
score is printed as a score, and a bank folder built with --score-range shows every number on
the metric's own scale (step lines, the result, ``atlas runs``, the HTML page, compare-models
and the score link's warnings)."""
from __future__ import annotations

import html
import json
import re
import sys

import numpy as np
import pandas as pd
import pytest

from typer.testing import CliRunner

from atlascat.cli import app, main

SCRIPT = """\
import json, os, sys
import pandas as pd

answers = pd.read_csv(sys.argv[1], index_col=0).loc[sys.argv[2]]
lo, hi = (float(v) for v in sys.argv[3:5])          # the metric's scale: it prints on it
fail = sys.argv[5] if len(sys.argv) > 5 else None
for n, line in enumerate(sys.stdin, 1):
    item = json.loads(line)["item_id"]
    score = lo + (hi - lo) * float(answers[item])
    if fail and n == 4 and os.path.exists(fail):
        score = hi + 1.0                             # a score off the scale
    print(json.dumps({"item_id": item, "score": score}), flush=True)
"""


@pytest.fixture(scope="module")
def longbench(tmp_path_factory, shared_data):
    """QMSum's per-item ROUGE in [0, 1] (30 source models, 10 targets), built three ways: as
    it is (--name qmsum), x 100 as a BLEU-like 0-100 metric and as a 1-10 judge rating (both
    with --score-range); a scoring program answering from the targets' 0-1 scores."""
    df = pd.read_csv(shared_data / "longbench" / "longbench_qmsum.csv.gz", index_col=0)
    idx = np.random.default_rng(0).permutation(len(df))
    root = tmp_path_factory.mktemp("own_words")
    source, targets = df.iloc[idx[:30]], df.iloc[idx[30:]]
    targets.to_csv(root / "targets.csv")
    (root / "score.py").write_text(SCRIPT)
    for name, (lo, hi) in {"qmsum": (0, 1), "bleu": (0, 100), "judge": (1, 10)}.items():
        (lo + (hi - lo) * source).to_csv(root / f"{name}.csv")
        scale = [] if name == "qmsum" else ["--score-range", str(lo), str(hi)]
        r = CliRunner().invoke(app, ["build-bank", str(root / f"{name}.csv"), "--name", name,
                                     *scale, "-o", str(root / name)])
        assert r.exit_code == 0, r.output
        (root / f"{name}.out").write_text(r.output)
    return root, targets


def _cmd(root, model, lo=0, hi=1, fail=None) -> str:
    """The scoring program, printing each score on the scale lo..hi (``fail``: a file that,
    while it exists, makes the fourth score one off the scale)."""
    return (f"cmd:{sys.executable} {root / 'score.py'} {root / 'targets.csv'} {model} {lo} {hi}"
            + ("" if fail is None else f" {fail}"))


def _steps(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if "  step " in ln]


def _item(line: str) -> str:
    return re.search(r"item (\S+)", line).group(1)


def test_a_continuous_runs_steps_print_the_score(longbench, tmp_path, capsys):
    """Scores in [0, 1] (ROUGE): each step prints "score 0.23", never "correct" / "wrong" for
    a score between; the observed line is the mean score."""
    root, targets = longbench
    model = str(targets.index[0])
    assert main(["evaluate", "--bank", str(root / "qmsum"), "--subject", _cmd(root, model),
                 "--llm", "t0", "--max-items", "8", "-o", str(tmp_path / "run")]) == 0
    cap = capsys.readouterr()
    steps = _steps(cap.err)
    assert len(steps) == 8
    answers = targets.loc[model]
    between = [ln for ln in steps if 0 < answers[_item(ln)] < 1]
    assert between, "the target answered no item with a score strictly between 0 and 1"
    for line in between:
        assert f"score {answers[_item(line)]:.2f}  predicted " in line, line
    assert not any("correct" in ln or "wrong" in ln for ln in steps[steps.index(between[0]):])
    assert "(the mean score over the 8 items asked)" in cap.out
    assert "0/1 or a score in [0, 1] out" in cap.out        # the protocol says what came back


def test_a_continuous_folders_0_and_1_are_scores_not_right_and_wrong(longbench, tmp_path,
                                                                     capsys):
    """A model of a continuous folder that happens to score exactly 0 or 1 on every item it is
    asked reads "score 0.00" / "score 1.00" at every step, on the page too: the folder's
    scores are a continuum, whatever the model answered."""
    root, targets = longbench
    model = str(targets.index[0])
    (targets.loc[[model]] >= 0.2).astype(float).to_csv(tmp_path / "exact.csv")
    assert main(["evaluate", "--bank", str(root / "qmsum"), "--subject",
                 f"replay:{tmp_path / 'exact.csv'}#{model}", "--max-items", "6",
                 "-o", str(tmp_path / "run")]) == 0
    steps = _steps(capsys.readouterr().err)
    assert len(steps) == 6
    assert all(re.search(r"score [01]\.00  predicted", ln) for ln in steps), steps
    page = next((tmp_path / "run" / "reports").glob("*.html")).read_text()
    assert "correct)" not in page and "right / asked" not in page
    assert re.findall(r"<td>([01]\.00)</td>", page)        # each score as the step line's


def test_info_of_a_continuous_matrix_speaks_of_mean_scores(longbench, tmp_path, capsys):
    """``atlas info`` of ROUGE scores: mean score quantiles, scores in [0, 1]; of 0/1 answers:
    accuracy; the JSON key is the same for both."""
    root, targets = longbench
    assert main(["info", str(root / "targets.csv")]) == 0
    out = capsys.readouterr().out
    assert "scores: in [0, 1], not all 0/1" in out and "mean score per subject" in out
    assert "accuracy" not in out
    (targets >= 0.2).astype(int).to_csv(tmp_path / "binary.csv")
    assert main(["info", str(tmp_path / "binary.csv")]) == 0
    out = capsys.readouterr().out
    assert "scores: 0/1" in out and "accuracy per subject" in out
    assert main(["info", str(root / "targets.csv"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert "mean_score_quantiles" in summary and "accuracy_quantiles" not in summary


@pytest.mark.parametrize("name, scale", [("qmsum", "in percent (0-100)"),
                                         ("bleu", "on the metric's own scale (0-100)"),
                                         ("judge", "on the metric's own scale (1-10)")])
def test_info_of_a_bank_folder_names_its_benchmark_metric_and_scale(longbench, capsys, name,
                                                                     scale):
    """``atlas info DIR`` says what the folder measures as a run on it does (the prediction's
    benchmark, metric and scale: bankdir.predict.folder_words), its --json too."""
    from atlascat.bankdir import load_bank_dir
    from atlascat.bankdir.predict import folder_words

    root, _ = longbench
    assert main(["info", str(root / name)]) == 0
    out = capsys.readouterr().out.splitlines()
    words = folder_words(load_bank_dir(root / name))
    assert out[1:3] == [f"  benchmark: {name}", f"  metric: {words['metric']}, {scale}"], out
    assert main(["info", str(root / name), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["benchmark"] == name and summary["metric"] == words["metric"]
    assert summary.get("scale") == (None if name == "qmsum" else words["scale"])


@pytest.mark.parametrize("name, lo, hi", [("bleu", 0, 100), ("judge", 1, 10)])
def test_a_score_range_folder_reads_on_the_metrics_scale_everywhere(longbench, tmp_path,
                                                                    capsys, name, lo, hi):
    """BLEU 0-100 and a 1-10 judge: each step's score and predicted score, the result's mean
    score, the protocol, results.json's scores and means, ``atlas runs``' accuracies (its
    ``--json`` and ``--run`` too), the HTML page's step scores and observed mean, and
    compare-models' difference are on the metric's scale, never in percent of 0-1."""
    from atlascat.scorelink.prediction import score_text   # the one digits rule

    def t(v):     # 0-100: 1 decimal, 1-10: 2
        return score_text(v, (lo, hi))
    root, targets = longbench
    runs = []
    for k in (0, 1):
        model = str(targets.index[k])
        out = tmp_path / f"run{k}"
        assert main(["evaluate", "--bank", str(root / name), "--subject",
                     _cmd(root, model, lo, hi), "--llm", f"t{k}", "--max-items", "6",
                     "-o", str(out)]) == 0
        cap = capsys.readouterr()
        row = json.loads((out / "results.json").read_text())[0]
        runs.append((out, row))
        answers = lo + (hi - lo) * targets.loc[model]
        steps = _steps(cap.err)
        assert len(steps) == 6 and not any("%" in ln or "correct" in ln for ln in steps)
        for line in steps:
            assert f"score {t(answers[_item(line)])} " in line, line
        lb = row["prediction"]
        assert lb["scale"] == [lo, hi] and lo <= lb["lo"] <= lb["score"] <= lb["hi"] <= hi
        assert steps[-1].endswith(f"predicted {t(lb['score'])} ({t(lb['lo'])}-{t(lb['hi'])})")
        asked = answers[row["items"]].to_numpy(float)      # results.json: on the scale too
        assert row["scale"] == [lo, hi] and np.allclose(row["scores"], asked, atol=1e-6)
        assert row["score_sum"] == pytest.approx(asked.sum())
        obs = row["observed_score"]
        assert obs == pytest.approx(asked.mean()) and lo <= row["model_based_score"] <= hi
        assert f"a score on the metric's scale, {lo:g}-{hi:g}, out" in row["protocol_label"]
        assert (f"mean score, on the metric's own scale: observed {t(obs)} (the mean score "
                "over the 6 items asked)") in cap.out
        assert "accuracy: observed" not in cap.out
        page = html.unescape((out / "reports" / f"{row['run_id']}.html").read_text())
        assert f"<td>observed mean score (over the items asked, on the metric's own scale)" \
               f"</td><td>{t(obs)}</td>" in page
        svg = page[page.index("<svg"):page.index("</svg>")]
        ticks = [float(t) for t in re.findall(r"text-anchor='end'>(-?[0-9.]+)<", svg)]
        assert ticks and lo <= min(ticks) and max(ticks) <= hi, ticks   # the axis keeps to the scale
        labels = re.findall(r"text-anchor='end'>([^<]*)<", svg)       # as the steps print: 25.0
        assert all(re.fullmatch(r"-?[0-9]+\.[0-9]", t) for t in labels), labels
        first = targets.loc[model, _item(steps[0])]
        assert f"<td>{t(lo + (hi - lo) * first)}</td>" in page     # the first step's score
        assert "observed accuracy" not in page and " correct)" not in page
        assert main(["runs", "--db", str(out / "runs.sqlite"), "--run", row["run_id"], "-o",
                     str(tmp_path / f"again{k}.html")]) == 0     # the same page, rewritten
        capsys.readouterr()
        again = html.unescape((tmp_path / f"again{k}.html").read_text())
        strip = re.compile(r"<td>started / updated</td><td>[^<]*</td>")
        assert strip.sub("", again) == strip.sub("", page)
    assert main(["runs", "--db", str(runs[0][0] / "runs.sqlite")]) == 0
    table = capsys.readouterr().out
    obs = runs[0][1]["observed_score"]
    assert f" {t(obs)} " in table and "%" not in table
    head, first_row = table.splitlines()[1:3]
    assert dict(zip(head.split(), first_row.split()))["benchmark"] == name   # not the path
    db, rid = str(runs[0][0] / "runs.sqlite"), runs[0][1]["run_id"]
    assert main(["runs", "--db", db, "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)[0]
    for key in ("observed_score", "model_based_score", "score_sum"):
        assert rec[key] == pytest.approx(runs[0][1][key]), key
    assert main(["runs", "--db", db, "--run", rid, "--json"]) == 0
    steps = json.loads(capsys.readouterr().out)["steps"]
    assert np.allclose([s["score"] for s in steps], runs[0][1]["scores"])
    first, second = (r["prediction"]["score"] for _, r in runs)
    assert main(["compare-models", str(runs[0][0]), str(runs[1][0]), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert rows[0]["first"] == pytest.approx(first) and rows[0]["second"] == pytest.approx(second)
    assert rows[0]["difference"] == pytest.approx(first - second)


def test_the_python_apis_result_of_a_score_range_run_is_on_the_metrics_scale(longbench,
                                                                            tmp_path):
    """``atlascat.live.evaluate`` on a 1-10 folder: the RunResult's scores, score_sum,
    observed_score and model_based_score read on 1-10 and say so (``scale``), as results.json
    gives the CLI's run of the same model, seed and test; resumed or read from the store, the
    same; ``from_store(unit=True)``: as stored, 0-1."""
    from atlascat.cat.config import CATConfig
    from atlascat.catalogue import BankRef
    from atlascat.live import RunResult, RunStore, evaluate, resume, subject_from_spec

    root, targets = longbench
    model = str(targets.index[3])
    assert main(["evaluate", "--bank", str(root / "judge"), "--subject",
                 _cmd(root, model, 1, 10), "--llm", "t3", "--design", "adaptive",
                 "--min-items", "6", "--max-items", "6", "-q", "-o", str(tmp_path / "cli")]) == 0
    row = json.loads((tmp_path / "cli" / "results.json").read_text())[0]
    ref = BankRef.parse(str(root / "judge"))
    subject = subject_from_spec(_cmd(root, model, 1, 10), bank=ref.load(), model="t3",
                                score_range=(1, 10))
    store = RunStore(tmp_path / "api.sqlite")
    res = evaluate(ref, subject, store=store, config=CATConfig(min_items=6, max_items=6))
    assert res.scale == [1.0, 10.0] and res.items == row["items"]
    answers = (1 + 9 * targets.loc[model, res.items]).to_numpy(float)
    np.testing.assert_allclose(res.scores, answers, atol=1e-6)
    assert res.score_sum == pytest.approx(answers.sum())
    assert res.observed_score == pytest.approx(answers.mean()) == row["observed_score"]
    assert 1 <= res.model_based_score <= 10
    for key in ("scores", "score_sum", "observed_score", "model_based_score", "scale"):
        assert res.to_dict()[key] == pytest.approx(row[key]), key
    assert resume(store, res.run_id, subject=subject) == res
    assert RunResult.from_store(store, res.run_id) == res
    unit = RunResult.from_store(store, res.run_id, unit=True)
    assert unit.scale is None and "scale" not in unit.to_dict()
    assert unit.observed_score == pytest.approx(targets.loc[model, res.items].mean())
    np.testing.assert_allclose(unit.scores, targets.loc[model, res.items], atol=1e-6)


def test_a_score_range_folders_command_scores_on_the_metrics_scale(longbench, tmp_path,
                                                                   capsys):
    """A cmd: program on a 1-10 folder prints ratings (7.4, not 0.71): a score off [1, 10]
    stops the run with one line (exit 2) naming the item, the value and the range; the run,
    resumed once the program is fixed, ends as a run that never failed did; a second run of
    the same program reads the stored replies (the cache) on the scale too."""
    from atlascat.live.store import RunStore

    root, targets = longbench
    model = str(targets.index[2])
    flag = tmp_path / "off_the_scale"
    args = ["evaluate", "--bank", str(root / "judge"), "--llm", "t2", "--max-items", "8", "-q"]
    assert main([*args, "--subject", _cmd(root, model, 1, 10), "-o",
                 str(tmp_path / "whole")]) == 0
    whole = json.loads((tmp_path / "whole" / "results.json").read_text())[0]
    capsys.readouterr()
    flag.write_text("")
    out = tmp_path / "broken"
    assert main([*args, "--subject", _cmd(root, model, 1, 10, flag), "-o", str(out)]) == 2
    text = capsys.readouterr().err
    err = [ln for ln in text.splitlines() if ln.startswith("error: ")]
    assert len(err) == 1 and "Traceback" not in text, text
    assert re.search(r"item '[^']+' scored 11\.0, outside the bank folder's score range "
                     r"\[1, 10\]", err[0]) and "resume with: atlas evaluate --resume" in err[0]
    info = RunStore(out / "runs.sqlite").list_runs().iloc[0]
    assert info["state"] == "error" and int(info["n_items"]) == 3
    flag.unlink()
    assert main(["evaluate", "--resume", info["run_id"], "--db", str(out / "runs.sqlite"),
                 "-q"]) == 0
    capsys.readouterr()
    store = RunStore(out / "runs.sqlite")
    steps = store.steps(info["run_id"])
    first = RunStore(tmp_path / "whole" / "runs.sqlite")
    ref = first.steps(whole["run_id"])
    assert list(steps["item_id"]) == list(ref["item_id"])
    np.testing.assert_allclose(steps["score"].astype(float), ref["score"].astype(float))
    np.testing.assert_allclose(ref["score"].astype(float),
                               targets.loc[model, list(ref["item_id"])].to_numpy(float))
    from atlascat.live.service import predict_run

    assert predict_run(store, info["run_id"])["score"] == pytest.approx(
        whole["prediction"]["score"])
    # the same program and model again in the first run's store: every reply from the cache
    assert main([*args, "--subject", _cmd(root, model, 1, 10), "--db",
                 str(tmp_path / "whole" / "runs.sqlite")]) == 0
    capsys.readouterr()
    runs = RunStore(tmp_path / "whole" / "runs.sqlite").list_runs()
    again = first.steps([r for r in runs["run_id"] if r != whole["run_id"]][0])
    assert again["cached"].astype(bool).all()
    np.testing.assert_allclose(again["score"].astype(float), ref["score"].astype(float))


def test_a_score_range_links_warnings_and_chance_read_on_the_metrics_scale(longbench):
    """The folder's link writes its notes on the metric's scale (the loader gives it the
    folder's --score-range); build-bank's chance row too."""
    from atlascat.bankdir import load_bank_dir
    from atlascat.scorelink.honesty import warnings_for
    from atlascat.scorelink.prediction import ScorePrediction, level, stop_note

    root, _ = longbench
    assert level(0.5) == "50%" and level(0.5, (1, 10)) == "5.50" and level(1, (0, 100)) == "100.0"
    judge, plain = load_bank_dir(root / "judge"), load_bank_dir(root / "qmsum")
    assert judge.link.metric_range == (1.0, 10.0) and plain.link.metric_range is None
    text, _ = warnings_for(judge.link, 5.0, 0.5, False, True, None)
    assert text[0].endswith("the score may be as high as 10.00")
    text, _ = warnings_for(plain.link, 5.0, 0.5, False, True, None)
    assert text[0].endswith("the score may be as high as 100%")
    top = ScorePrediction(0.9, 0.8, 1.0)
    assert stop_note(top, "ceiling", 0.0, (1, 10)) == "at or near the top (>= 8.20)"
    assert stop_note(top, "ceiling", 0.0) == "at or near the top (>= 80%)"
    chance = {n: re.search(r"chance level +(.*)", (root / f"{n}.out").read_text()).group(1)
              for n in ("judge", "bleu", "qmsum")}
    assert chance["judge"].startswith("1.00 on the metric's scale (")
    assert chance["bleu"].startswith("0.0 on the metric's scale (")
    assert chance["qmsum"].startswith("0.0% (")


def test_a_bank_file_run_names_its_benchmark_not_its_path(tmp_path, capsys):
    """``atlas evaluate --bank some/dir/my_bench.csv``: the headline, results.json and the
    HTML page name "my_bench" (the file's stem), never the absolute path; with no score link
    the missing score is "predicted my_bench score", not a leaderboard's."""
    from atlascat.irt.bank import ItemBank

    (tmp_path / "some" / "dir").mkdir(parents=True)
    path = tmp_path / "some" / "dir" / "my_bench.csv"
    ids = [f"q{j}" for j in range(30)]
    ItemBank(ids, np.full(30, 1.2), np.linspace(-2, 2, 30)).write(path)
    pd.DataFrame([np.arange(30) % 2], index=["m0"], columns=ids).to_csv(tmp_path / "m.csv")
    out = tmp_path / "run"
    assert main(["evaluate", "--bank", str(path), "--subject", f"replay:{tmp_path / 'm.csv'}#m0",
                 "--max-items", "5", "-o", str(out), "-q"]) == 0
    cap = capsys.readouterr()
    lines = cap.out.splitlines()
    assert lines[0].startswith("m0 on my_bench: theta = "), lines[0]
    assert lines[1].startswith("  predicted my_bench score: not available (no score link")
    assert str(tmp_path) not in lines[0] and "leaderboard" not in (cap.out + cap.err).lower()
    row = json.loads((out / "results.json").read_text())[0]
    assert row["bench"] == "my_bench" and row["bank"] == str(path)   # the path stays the input
    page = html.unescape((out / "reports" / f"{row['run_id']}.html").read_text())
    assert "m0 on my_bench \u00b7" in page
    assert "predicted my_bench score" in page and "leaderboard" not in page.lower()


def test_a_bank_refs_title_is_a_benchmark_name():
    from atlascat.catalogue import BankRef

    assert BankRef("file", "/a/b/my_bench.csv.gz").title == "my_bench"
    assert BankRef("shipped", "arc").title == "arc"
    assert BankRef("suite", "openllm-v1").title == "openllm-v1"
    assert BankRef("suite", "/x/mine.json").title == "mine"


def test_a_bank_folders_protocol_is_the_source_models_in_every_table(mc2_folder, tmp_path, capsys):
    """A replay of a folder's logged requests: the evaluate table, ``atlas runs`` and ``atlas
    runs --run`` say "as the source models (mc2)", results.json and ``--json`` "source
    models", never "leaderboard"; a shipped bank's run keeps "leaderboard"."""
    from atlascat.live.report import protocol_name

    model = str(pd.read_csv(mc2_folder / "held.csv", index_col=0).index[0])
    out = tmp_path / "run"
    assert main(["evaluate", "--bank", str(mc2_folder / "bank"), "--subject",
                 f"replay:{mc2_folder / 'held.csv'}#{model}", "--max-items", "3",
                 "-o", str(out)]) == 0
    cap = capsys.readouterr()
    results = (out / "results.json").read_text()
    row = json.loads(results)[0]
    assert row["protocol"] == "source models" and "leaderboard" not in results.lower()
    text = cap.out + cap.err
    assert "as the source models (mc2)" in text and "leaderboard" not in text.lower()
    assert main(["runs", "--db", str(out / "runs.sqlite")]) == 0
    assert main(["runs", "--db", str(out / "runs.sqlite"), "--run", row["run_id"]]) == 0
    text = capsys.readouterr().out
    assert text.count("as the source models (mc2)") == 2 and "leaderboard" not in text.lower()
    assert main(["runs", "--db", str(out / "runs.sqlite"), "--json"]) == 0
    assert main(["runs", "--db", str(out / "runs.sqlite"), "--run", row["run_id"], "--json"]) == 0
    text = capsys.readouterr().out
    assert '"protocol": "source models"' in text and "leaderboard" not in text.lower()
    assert protocol_name("leaderboard", "shipped:arc") == "leaderboard"
    assert protocol_name("leaderboard", str(mc2_folder / "bank")) == "as the source models (mc2)"
    assert protocol_name("item command", str(mc2_folder / "bank")) == "item command"


def test_score_reads_a_score_range_folders_results_on_its_scale(longbench, tmp_path):
    """``atlas score`` on a --score-range folder reads RESPONSES on the metric's scale, as
    ``atlas simulate`` does (it refused BLEU 37.2 as "outside [0, 1]"), and predicts what the
    0-1 folder predicts, mapped to that scale."""
    root, targets = longbench
    (1 + 9 * targets).to_csv(tmp_path / "judged.csv")
    assert main(["score", str(tmp_path / "judged.csv"), "--bank", str(root / "judge"),
                 "-o", str(tmp_path / "judge.csv")]) == 0
    assert main(["score", str(root / "targets.csv"), "--bank", str(root / "qmsum"),
                 "-o", str(tmp_path / "plain.csv")]) == 0
    judge = pd.read_csv(tmp_path / "judge.csv").set_index("subject_id")
    plain = pd.read_csv(tmp_path / "plain.csv").set_index("subject_id")
    for col in ("score", "score_lo", "score_hi", "mean_score"):
        np.testing.assert_allclose(judge[col], 1 + 9 * plain[col], atol=1e-3)


@pytest.mark.parametrize("name, design", [("qmsum", "predictor"), ("bleu", "predictor"),
                                          ("judge", "adaptive")])
def test_a_live_replay_of_continuous_scores_agrees_with_simulate(longbench, tmp_path, name,
                                                                 design):
    """``replay:MATRIX#MODEL`` on a folder of continuous scores replays each score as recorded
    (it counted a ROUGE of 0.23 as wrong: 0.0% against simulate's 20.6%), and on a
    --score-range folder reads the matrix on the metric's scale: the same items, theta and
    prediction as ``atlas simulate`` with the same seed; a resumed run rebuilds that reading."""
    from atlascat.bankdir import load_bank_dir
    from atlascat.live.subjects import RecordedAnswers, SubjectSpec

    root, targets = longbench
    lo, hi = {"qmsum": (0, 1), "bleu": (0, 100), "judge": (1, 10)}[name]
    (lo + (hi - lo) * targets).to_csv(tmp_path / "t.csv")
    assert main(["simulate", str(tmp_path / "t.csv"), "--bank", str(root / name), "--seed",
                 "3", "--design", design, "-o", str(tmp_path / "sim"), "-q"]) == 0
    ps = pd.read_csv(tmp_path / "sim" / "person_scores.csv").set_index("subject_id")
    model = str(ps.index[2])
    assert main(["evaluate", "--bank", str(root / name), "--subject",
                 f"replay:{tmp_path / 't.csv'}#{model}", "--seed", "3", "--design", design,
                 "-o", str(tmp_path / "live"), "-q"]) == 0
    row = json.loads((tmp_path / "live" / "results.json").read_text())[0]
    assert row["n_items"] == ps.loc[model, "n_items"]
    np.testing.assert_allclose(row["theta"], ps.loc[model, "theta"], rtol=1e-9)
    got = row["prediction"]
    np.testing.assert_allclose([got["score"], got["lo"], got["hi"]],
                               ps.loc[model, ["score", "score_lo", "score_hi"]].to_numpy(float),
                               rtol=1e-9)
    from atlascat.live.store import RunStore

    desc = RunStore(tmp_path / "live" / "runs.sqlite").get_run(row["run_id"])["subject"]
    again = SubjectSpec.rebuild(desc, load_bank_dir(root / name).bank)   # as --resume does
    assert isinstance(again, RecordedAnswers)
    assert again.score_range == (None if name == "qmsum" else [lo, hi])
    item = str(targets.columns[0])
    subj = RecordedAnswers(tmp_path / "t.csv", model,
                           score_range=None if name == "qmsum" else (lo, hi))
    score, reply = subj.score_items([item])[0]
    assert score == pytest.approx(targets.loc[model, item])           # modelled on 0-1
    assert json.loads(reply)["score"] == pytest.approx(lo + (hi - lo) * targets.loc[model, item])
    assert subj.score_of(reply) == pytest.approx(score)              # a cached reply reads back
    # the same replay again in the same store: every reply from the cache, the same prediction
    assert main(["evaluate", "--bank", str(root / name), "--subject",
                 f"replay:{tmp_path / 't.csv'}#{model}", "--seed", "3", "--design", design,
                 "--db", str(tmp_path / "live" / "runs.sqlite"), "-o", str(tmp_path / "again"),
                 "-q"]) == 0
    second = json.loads((tmp_path / "again" / "results.json").read_text())[0]
    steps = RunStore(tmp_path / "live" / "runs.sqlite").steps(second["run_id"])
    assert steps["cached"].astype(bool).all()
    assert second["prediction"]["score"] == pytest.approx(got["score"], rel=1e-9)


def test_an_adaptive_simulation_of_a_folder_names_its_benchmark(longbench, tmp_path, capsys):
    """``atlas simulate --design adaptive`` on a 1-10 folder: the summary names the predicted
    judge score (its mean and width on 1-10), as the predictor's summary does, in the table and
    in summary.json."""
    root, targets = longbench
    (1 + 9 * targets).to_csv(tmp_path / "t.csv")
    assert main(["simulate", str(tmp_path / "t.csv"), "--bank", str(root / "judge"),
                 "--design", "adaptive", "-o", str(tmp_path / "sim")]) == 0
    out = capsys.readouterr().out
    ps = pd.read_csv(tmp_path / "sim" / "person_scores.csv")
    summary = json.loads((tmp_path / "sim" / "summary.json").read_text())
    assert summary["benchmark"] == "judge" and summary["scale"] == [1.0, 10.0]
    assert summary["score_mean"] == pytest.approx(ps["score"].mean())
    assert 1 <= summary["score_mean"] <= 10
    assert "predicted judge score, mean over models" in out
    from atlascat.scorelink.prediction import score_text   # the one digits rule: 1-10, 2

    assert f"{score_text(summary['score_mean'], (1, 10))} (95% intervals " \
        f"{score_text(summary['width_mean'], (1, 10))} points wide)" in out
