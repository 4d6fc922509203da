"""A user's walk through the lm-evaluation-harness sample-log path with every kind of
per-sample metric: banks built from logs (multiple choice, generations scored by exact match,
F1, ROUGE, a judge), a live ``cmd:`` model scored as the logged models were, and the odd logs
a harness folder holds. The metrics the harness computes are re-implemented here, independently
of atlascat, so a test fails when atlas scores otherwise.
"""
from __future__ import annotations

import collections
import json
import re
import string
import sys
from pathlib import Path

import numpy as np
import pytest

from atlascat.bankdir import load_bank_dir, read_sample_logs
from atlascat.content.requests import build_item_requests
from cli_checks import one_line_error, run_cli


# ---------------------------------------------------------------- the harness's metrics
def squad_normalize(s: str) -> str:
    """SQuAD's ``normalize_answer`` (CoQA's too), as the harness's per-sample f1 / em use it."""
    s = s.lower()
    s = "".join(ch for ch in s if ch not in set(string.punctuation))
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def squad_f1(prediction: str, truth: str) -> float:
    p, t = squad_normalize(prediction).split(), squad_normalize(truth).split()
    if not p or not t:
        return float(p == t)
    common = sum((collections.Counter(p) & collections.Counter(t)).values())
    if common == 0:
        return 0.0
    prec, rec = common / len(p), common / len(t)
    return 2 * prec * rec / (prec + rec)


ANSWERS = ["No, brain-imaging hasn't shown it.", "Yes, it's the left brain.",
           "Nothing happens; you're fine.", "The U.S. doesn't say.", "It's 3.5 km/h away.",
           "Rock'n'roll isn't dead.", "Self-driving cars can't fly.", "Paris, France."]


def _gen_logs(root: Path, metric: str, value, *, n_models=22, n_items=40, seed=0,
              target=None):
    """lm-eval 0.4 ``generate_until`` logs of a QA task; the answers carry punctuation (hyphens,
    apostrophes), where the normalisations differ. ``value(text, gold)``: the logged score;
    ``target(gold)``: the logged target (default the gold answer)."""
    rng = np.random.default_rng(seed)
    golds = [ANSWERS[i % len(ANSWERS)] + f" {i}" for i in range(n_items)]
    for m in range(n_models):
        folder = root / f"org__gen-{m:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        lines = []
        for i, gold in enumerate(golds):
            keep = rng.random(len(gold.split())) < 0.1 + 0.85 * m / (n_models - 1)
            text = " " + " ".join(w if k else "x" for w, k in zip(gold.split(), keep))
            args = {"gen_args_0": {"arg_0": f"Q{i}: what?\nA:",
                                   "arg_1": {"until": ["\n"], "max_gen_toks": 32}}}
            lines.append(json.dumps({
                "doc_id": i, "doc": {"q": i}, "target": gold if target is None else target(gold),
                "arguments": args, "resps": [[text]], "filtered_resps": [text],
                "filter": "none", "metrics": [metric], metric: value(text, gold)}))
        (folder / "samples_toyqa_2025-01-01T00-00-00.000000.jsonl").write_text(
            "\n".join(lines) + "\n", encoding="utf-8")
    return root


# ---------------------------------------------------------------- F1 as the harness computes it
def test_f1_is_squads_token_f1_punctuation_deleted(tmp_path):
    """The harness's per-sample f1 (CoQA, SQuAD) deletes punctuation ("hasn't" -> "hasnt",
    "brain-imaging" -> "brainimaging"); splitting at it instead scores other F1s than the
    logged ones, so a live model would not be scored as the logged models were."""
    logs = read_sample_logs(_gen_logs(tmp_path / "f1", "f1", squad_f1))
    assert logs.metric == "f1"
    agreement = [logs.rule_fields(i)["agreement"] for i in logs.item_ids()]
    assert min(agreement) == 1.0, agreement
    assert run_cli(["build-bank", tmp_path / "f1", "-o", tmp_path / "bank", "-q"]) == 0
    folder = load_bank_dir(tmp_path / "bank")
    assert folder.manifest["requests"]["rule_agreement_min"] == 1.0
    ir = build_item_requests(folder.bank, folder.bank.item_ids[0])
    said = " brainimaging hasnt shown x"
    assert ir.score(said + "\nmore") == pytest.approx(squad_f1(said, ir.gold))


# ---------------------------------------------------------------- several targets (aliases)
def _aliases(gold: str) -> list[str]:
    return [gold, gold.upper(), gold.rstrip(".") + " indeed"]


def test_a_task_with_several_targets_scores_any_alias(tmp_path):
    """TriviaQA / NQ-open log ``target`` as a list of aliases, and the harness scores a
    generation 1 when it matches any of them (``multiple_target``). The folder keeps every
    alias, so a live model answering with the second alias scores 1 as a logged model did
    (the list was read as one string, ``"['a', 'b']"``, which no answer matches)."""
    def em(text, gold):
        return float(any(text.strip() == a for a in _aliases(gold)))

    root = _gen_logs(tmp_path / "tq", "exact_match", em, target=_aliases)
    # a logged model answering an alias other than the first: the harness scored it 1
    f = root / "org__gen-21" / "samples_toyqa_2025-01-01T00-00-00.000000.jsonl"
    recs = [json.loads(x) for x in f.read_text().splitlines()]
    for r in recs[:10]:
        r["resps"] = [[" " + r["target"][1]]]
        r["exact_match"] = 1.0
    f.write_text("\n".join(map(json.dumps, recs)) + "\n")
    logs = read_sample_logs(root)
    assert min(logs.rule_fields(i)["agreement"] for i in logs.item_ids()) == 1.0
    assert run_cli(["build-bank", root, "-o", tmp_path / "bank", "-q"]) == 0
    folder = load_bank_dir(tmp_path / "bank")
    assert folder.manifest["requests"]["rule_agreement_min"] == 1.0
    item = folder.bank.item_ids[0]
    ir = build_item_requests(folder.bank, item)
    gold = ANSWERS[int(item) % len(ANSWERS)] + f" {item}"
    for alias in _aliases(gold):
        assert ir.score(" " + alias + "\nQ: more") == 1, alias
    assert ir.score(" " + gold.lower()) == 0                    # exact match: case counts
    rec = next(json.loads(x) for x in (tmp_path / "bank" / "requests.jsonl").read_text().splitlines()
               if json.loads(x)["item_id"] == item)
    assert rec["targets"] == _aliases(gold)


# ---------------------------------------------------------------- a metric the command computes
def _rouge_like(text: str, gold: str) -> float:
    """A stand-in for ROUGE-L (a metric atlas cannot compute): a rounded, scaled token F1."""
    return round(0.9 * squad_f1(text, gold), 4)


def test_a_command_scoring_a_logged_metric_is_sent_the_target(tmp_path):
    """A folder scored by a metric atlas cannot compute (ROUGE-L) is asked through cmd:, whose
    program scores the metric as the harness did: against the item's logged target, which the
    request line must carry (the program had the context alone). The run records exactly the
    scores the program computed."""
    root = _gen_logs(tmp_path / "rouge", "rougeL", _rouge_like)
    assert run_cli(["build-bank", root, "-o", tmp_path / "bank", "-q"]) == 0
    script = tmp_path / "harness.py"
    script.write_text(
        "import json, sys\n"
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "from test_sample_log_walk import _rouge_like\n"
        "for line in sys.stdin:\n"
        "    req = json.loads(line)\n"
        "    assert req['scored_by'] == 'command' and req['metric'] == 'rougeL', req\n"
        "    answer = ' '.join(req['target'].split()[:2]) + ' x'\n"
        "    print(json.dumps({'item_id': req['item_id'],\n"
        "                      'score': _rouge_like(answer, req['target'])}), flush=True)\n")
    assert run_cli(["evaluate", "--bank", tmp_path / "bank", "--subject",
                  f"cmd:{sys.executable} {script}", "--llm", "mine", "--max-items", "8",
                  "-q", "-o", tmp_path / "live"]) == 0
    row = json.loads((tmp_path / "live" / "results.json").read_text())[0]
    targets = {r["item_id"]: r["target"] for r in map(json.loads, (tmp_path / "bank" /
                                                                   "requests.jsonl").read_text().splitlines())}
    by_hand = [_rouge_like(" ".join(targets[i].split()[:2]) + " x", targets[i])
               for i in row["items"]]
    assert row["n_items"] == 8 and row["scores"] == pytest.approx(by_hand)


# ---------------------------------------------------------------- the recipe on the other real log
REAL = Path(__file__).resolve().parents[2] / "shared" / "data" / "lmeval_samples" / "pythia-14m"


def test_simulated_logs_from_the_real_winogrande_log(tmp_path):
    """The recipe's simulated models made from the real WinoGrande log (its gold is the doc's
    ``answer``, "1" or "2", and the options sit in the contexts): refused before ("no
    multiple-choice record whose true options the log tells"); now every record keeps its
    requests, the logged ``acc`` is the argmax rule on the simulated log-likelihoods, and a
    folder built from them finds each item's gold as the doc's answer."""
    from atlascat.bankdir import simulated_sample_logs

    real = sorted(REAL.glob("samples_metabench_winogrande_secondary_*.jsonl.gz"))
    if not real:
        pytest.skip(f"the real WinoGrande sample log is not in {REAL}")
    files = simulated_sample_logs(real[0], tmp_path / "logs", n_models=22, seed=0)
    recs = [json.loads(x) for x in files[-1].read_text().splitlines()]
    assert len(recs) == 106 and all("mc2" not in r for r in recs)     # one true option: acc
    for r in recs:
        ll = [float(v[0]) for v in r["filtered_resps"]]
        assert r["acc"] == float(int(np.argmax(ll)) == int(r["doc"]["answer"]) - 1)
    assert run_cli(["build-bank", tmp_path / "logs", "-o", tmp_path / "bank", "-q"]) == 0
    folder = load_bank_dir(tmp_path / "bank")
    assert folder.manifest["requests"]["rule_agreement_min"] == 1.0
    answer = {str(r["doc"]["metabench_idx"]): int(r["doc"]["answer"]) - 1 for r in recs}
    for rec in map(json.loads, (tmp_path / "bank" / "requests.jsonl").read_text().splitlines()):
        assert rec["gold"] == answer[rec["item_id"]]


# ---------------------------------------------------------------- what results_*.json says
def _results_files(root: Path, task: str, metric: str, *, aggregation="mean", better=True):
    """The ``results_<timestamp>.json`` lm_eval writes beside each model's samples."""
    for folder in root.iterdir():
        stamp = next(folder.glob("samples_*.jsonl")).name.rsplit("_", 1)[1][:-6]
        (folder / f"results_{stamp}.json").write_text(json.dumps({
            "results": {task: {f"{metric},none": 0.5}},
            "configs": {task: {"task": task, "metric_list": [
                {"metric": metric, "aggregation": aggregation, "higher_is_better": better},
                {"metric": "exact_match", "aggregation": "mean", "higher_is_better": True}]}},
            "higher_is_better": {task: {metric: better, "exact_match": True}},
            "n-samples": {task: {"original": 40, "effective": 40}},
            "lm_eval_version": "0.4.8"}))


def test_a_lower_is_better_metric_is_refused_in_one_line(tmp_path, capsys):
    """RealToxicityPrompts logs a per-sample toxicity in [0, 1], averaged, lower is better: a
    bank built on it would call the most toxic model the most able. The run folders'
    results_*.json say so; the build refuses in one line naming the metric and the task."""
    root = _gen_logs(tmp_path / "tox", "toxicity", lambda t, g: round(1 - squad_f1(t, g), 4))
    _results_files(root, "toyqa", "toxicity", better=False)
    one_line_error(capsys, ["build-bank", root, "-o", tmp_path / "bank"], "'toxicity'",
                    "'toyqa'", "lower-is-better", "--metric")


def test_a_metric_the_harness_does_not_average_is_refused(tmp_path, capsys):
    """A per-sample number the harness aggregates by another rule than the mean (a median, a
    corpus F1) does not add up to the task's score; refused naming the aggregation and the
    per-sample metrics the harness averages. The same logs said to be averaged build."""
    root = _gen_logs(tmp_path / "med", "f1", squad_f1)
    _results_files(root, "toyqa", "f1", aggregation="median")
    one_line_error(capsys, ["build-bank", root, "--metric", "f1", "-o", tmp_path / "b1"],
                    "'f1'", "'median'", "not as a mean over items", "--metric: exact_match")
    one_line_error(capsys, ["build-bank", root, "-o", tmp_path / "b2"], "'median'")
    _results_files(root, "toyqa", "f1")
    assert run_cli(["build-bank", root, "-o", tmp_path / "b3", "-q"]) == 0
    assert load_bank_dir(tmp_path / "b3").manifest["source"]["harness"] == "lm_eval_version=0.4.8"


def test_truthfulqa_gen_diff_metrics_are_read_on_their_range(tmp_path):
    """TruthfulQA-gen logs ``bleu_diff`` / ``rougeL_diff`` per sample: the best true
    reference's score minus the best false one's, in points, -100 to 100 (negative for most
    weak models). They are read on that range, as ``_max`` on 0-100 (they were refused as
    outside [0, 1] unless the user found the range)."""
    def diff(text, gold):
        return round(100 * squad_f1(text, gold) - 40.0, 3)

    root = _gen_logs(tmp_path / "d", "rougeL_diff", diff)
    logs = read_sample_logs(root)
    assert logs.score_range == (-100.0, 100.0)
    m = logs.matrix().values
    assert 0.0 <= np.nanmin(m) < 0.5 < np.nanmax(m) <= 1.0
    assert run_cli(["build-bank", root, "-o", tmp_path / "bank", "-q"]) == 0
    assert load_bank_dir(tmp_path / "bank").manifest["settings"]["score_range"] == [-100, 100]


# ---------------------------------------------------------------- requests as logged
def test_a_generation_logged_without_stop_strings_is_asked_without_them(tmp_path):
    """A generation request logged with ``"until": []`` runs to its token limit; the folder
    asked it with GSM8K's stops (":", "Question:", "Question"), so an answer "Note: ..." was
    cut to "Note" live while the build checked the rule on the whole answer."""
    from atlascat.live.subjects.cmdrequests import request_line

    root = _gen_logs(tmp_path / "ns", "f1", lambda t, g: squad_f1("Note: " + t, g))
    for f in root.glob("*/samples_*.jsonl"):
        recs = [json.loads(x) for x in f.read_text().splitlines()]
        for r in recs:
            r["arguments"]["gen_args_0"]["arg_1"]["until"] = []
            r["resps"] = [["Note: " + r["resps"][0][0]]]
        f.write_text("\n".join(map(json.dumps, recs)) + "\n")
    assert run_cli(["build-bank", root, "-o", tmp_path / "bank", "-q"]) == 0
    folder = load_bank_dir(tmp_path / "bank")
    assert folder.manifest["requests"]["rule_agreement_min"] == 1.0
    ir = build_item_requests(folder.bank, folder.bank.item_ids[0])
    assert ir.requests[0].until == ()
    said = "Note: " + ir.gold + "\nQuestion: more"
    assert ir.score(said) == pytest.approx(squad_f1(said, ir.gold))
    assert request_line(ir)["arguments"][0][1]["until"] == []


# ---------------------------------------------------------------- logs under other names
def test_logs_renamed_one_file_per_model_are_models_of_the_given_task(tmp_path, capsys):
    """Logs copied into one folder as <model>.jsonl (not lm_eval's names): each file is a
    model (they were read as re-runs of ONE model named after the folder: "the results hold
    1 model(s)"), the task is the one --task gives (it was "?", the benchmark's name in every
    output), and without --task the build asks for it in one line."""
    root = _gen_logs(tmp_path / "h", "f1", squad_f1)
    flat = tmp_path / "flat"
    flat.mkdir()
    for f in sorted(root.glob("*/samples_*.jsonl")):
        (flat / f"{f.parent.name}.jsonl").write_text(f.read_text())
    files = sorted(flat.glob("*.jsonl"))
    one_line_error(capsys, ["build-bank", *files, "-o", tmp_path / "b0"],
                    "cannot tell the task", "--task")
    assert run_cli(["build-bank", *files, "--task", "toyqa", "-o", tmp_path / "bank", "-q"]) == 0
    man = load_bank_dir(tmp_path / "bank").manifest
    assert man["benchmark"] == "toyqa" and man["source"]["task"] == "toyqa"
    assert man["models"] == [f"org/gen-{m:02d}" for m in range(22)]


# ---------------------------------------------------------------- held-out models' logs
def test_simulate_reads_held_out_models_logs_as_the_folder_was_built(tmp_path):
    """``atlas simulate --bank DIR LOGS`` (and ``atlas score``): the held-out models' sample
    logs (a folder of the harness's layout) are read with the folder's task, metric and
    scale, the same prediction as from the matrix written from them (it said "'LOGS' is a
    directory; give a file")."""
    import pandas as pd

    root = _gen_logs(tmp_path / "src", "rougeL_max", lambda t, g: round(100 * squad_f1(t, g), 2),
                     n_models=26)
    held = tmp_path / "held"
    held.mkdir()
    for m in (4, 13, 22):
        (root / f"org__gen-{m:02d}").rename(held / f"org__gen-{m:02d}")
    assert run_cli(["build-bank", root, "-o", tmp_path / "bank", "-q"]) == 0
    read_sample_logs(held).write(tmp_path / "held.csv")              # the recipe's way
    assert run_cli(["simulate", tmp_path / "held.csv", "--bank", tmp_path / "bank",
                  "-o", tmp_path / "s1", "-q"]) == 0
    assert run_cli(["simulate", held, "--bank", tmp_path / "bank", "-o", tmp_path / "s2",
                  "-q"]) == 0
    a, b = (pd.read_csv(tmp_path / s / "person_scores.csv", index_col="subject_id")
            for s in ("s1", "s2"))
    assert list(b.index) == ["org/gen-04", "org/gen-13", "org/gen-22"]
    assert b["score"].max() > 1                                       # ROUGE points, as logged
    np.testing.assert_allclose(b["score"], a["score"], atol=1e-6)
    for name, given in (("c1.csv", tmp_path / "held.csv"), ("c2.csv", held)):  # atlas score
        assert run_cli(["score", given, "--bank", tmp_path / "bank", "-o", tmp_path / name]) == 0
    c1, c2 = (pd.read_csv(tmp_path / n, index_col="subject_id") for n in ("c1.csv", "c2.csv"))
    np.testing.assert_allclose(c2["theta"], c1["theta"], atol=1e-6)
    np.testing.assert_allclose(c2["score"], c1["score"], atol=1e-6)


def test_a_chat_answer_matches_any_target_too():
    """A chat subject on such a folder reads the answer from chat text with the ``exact``
    scorer: any of the item's targets counts, as the rule does (it compared the first)."""
    from atlascat.live.scorers import score_answer

    item = {"item_id": "1", "scorer": "exact", "answer": "Paris",
            "targets": np.array(["Paris", "Paris, France", "the city of Paris"], dtype=object)}
    assert score_answer(item, "Paris, France.") == 1
    assert score_answer(item, "The city of Paris") == 1
    assert score_answer(item, "Lyon") == 0
    assert score_answer({"item_id": "2", "scorer": "exact", "answer": "Lyon",
                         "targets": float("nan")}, "lyon") == 1


# ---------------------------------------------------------------- exact_match as the harness has it
def test_exact_match_without_a_whitespace_filter_is_not_stripped(tmp_path):
    """lm-eval's ``exact_match`` compares the generation as it is: on a task with no
    whitespace filter " Paris" is not "Paris" (the logged score is 0). The folder's rule is
    the one that reproduces that (``exact_match_raw``), so a live " Paris" scores 0 as the
    logged models' did; a stripped comparison scored it 1, the build warning it reproduced
    ~half of the logs."""
    rng = np.random.default_rng(3)

    def raw_em(text, gold):                  # some models answer without the leading space
        return float(text == gold)

    root = tmp_path / "raw"
    _gen_logs(root, "exact_match", raw_em)
    for f in root.glob("*/samples_*.jsonl"):
        recs = [json.loads(x) for x in f.read_text().splitlines()]
        for r in recs:
            gold = r["target"]
            text = rng.choice([gold, " " + gold, "x"])
            r["resps"], r["filtered_resps"] = [[text]], [text]
            r["exact_match"] = raw_em(text, gold)
        f.write_text("\n".join(map(json.dumps, recs)) + "\n")
    assert run_cli(["build-bank", root, "-o", tmp_path / "bank", "-q"]) == 0
    folder = load_bank_dir(tmp_path / "bank")
    assert folder.manifest["requests"]["rules"] == ["exact_match_raw"]
    assert folder.manifest["requests"]["rule_agreement_min"] == 1.0
    ir = build_item_requests(folder.bank, folder.bank.item_ids[0])
    assert ir.score(ir.gold + "\nQ: next") == 1 and ir.score(" " + ir.gold) == 0
    assert ir.choice(" " + ir.gold)["extracted"] == " " + ir.gold       # shown as scored


def test_the_page_shows_each_generation_as_its_rule_read_it():
    """``ItemRequests.choice`` (the page's "extracted" answer): SQuAD-style and GSM8K-flexible
    items showed GSM8K's strict extraction ("[invalid]" for "paris")."""
    from atlascat.content.requests import ItemRequests, Request

    req = (Request("generate_until", "Q:", until=("\n",)),)
    norm = ItemRequests("1", "t", "exact_match_norm", req, gold="Paris", n_choices=1)
    assert norm.choice(" paris\nmore")["extracted"] == "paris"
    flex = ItemRequests("2", "t", "gsm8k_flexible", req, gold="42", n_choices=1)
    assert flex.choice("So the answer is 42.\nmore")["extracted"] == "42"


# ---------------------------------------------------------------- one continuation (LAMBADA)
def _lambada_logs(root: Path, n_models=22, n_items=40, seed=0):
    """LAMBADA-style logs: one log-likelihood request per item, ``acc`` = whether the
    continuation is the model's greedy one (lm-eval's is_greedy), ``perplexity`` its ll."""
    rng = np.random.default_rng(seed)
    for m in range(n_models):
        folder = root / f"org__l{m:02d}"
        folder.mkdir(parents=True)
        lines = []
        for i in range(n_items):
            greedy = bool(rng.random() < 0.1 + 0.8 * m / (n_models - 1))
            ll = -float(rng.uniform(0.5, 8.0))
            lines.append(json.dumps({
                "doc_id": i, "doc": {"text": f"story {i} ends with word{i}"},
                "target": f" word{i}",
                "arguments": {"gen_args_0": {"arg_0": f"story {i} ends with",
                                             "arg_1": f" word{i}"}},
                "resps": [[[ll, greedy]]], "filtered_resps": [[ll, greedy]], "filter": "none",
                "metrics": ["perplexity", "acc"], "perplexity": ll, "acc": float(greedy)}))
        (folder / "samples_lambada_openai_2025-01-01T00-00-00.000000.jsonl").write_text(
            "\n".join(lines) + "\n")
    return root


def test_a_single_continuation_acc_is_a_metric_the_command_scores(tmp_path, capsys):
    """LAMBADA's ``acc`` is whether the one continuation is the model's greedy completion: no
    argmax over options. The folder kept it as the argmax rule over one option (reproducing
    half the logs, chance 100%) and a live run failed with "needs at least 2 continuations".
    Now it is a metric atlas cannot compute: refused live naming it, asked through cmd:, and
    its chance is 0 (nothing to guess among)."""
    root = _lambada_logs(tmp_path / "lam")
    assert run_cli(["build-bank", root, "--metric", "acc", "-o", tmp_path / "bank", "-q"]) == 0
    folder = load_bank_dir(tmp_path / "bank")
    assert folder.manifest["requests"]["rules"] == ["metric:acc"]
    assert folder.manifest["settings"]["chance"] == 0.0
    capsys.readouterr()
    one_line_error(capsys, ["evaluate", "--bank", tmp_path / "bank", "--subject",
                             "completions:http://127.0.0.1:9/v1", "--llm", "x",
                             "-o", tmp_path / "live"], "'acc'", "cmd:")
    script = tmp_path / "greedy.py"
    script.write_text("import json, sys\nfor line in sys.stdin:\n"
                      "    req = json.loads(line)\n"
                      "    assert req['request_type'] == 'loglikelihood', req\n"
                      "    assert len(req['arguments']) == 1 and req['metric'] == 'acc', req\n"
                      "    print(json.dumps({'item_id': req['item_id'], 'score': 1}), flush=True)\n")
    assert run_cli(["evaluate", "--bank", tmp_path / "bank", "--subject",
                  f"cmd:{sys.executable} {script}", "--llm", "g", "--max-items", "6",
                  "-q", "-o", tmp_path / "cmd"]) == 0
    row = json.loads((tmp_path / "cmd" / "results.json").read_text())[0]
    assert row["n_items"] == 6 and row["scores"] == [1] * 6


# ---------------------------------------------------------------- answers a filter extracted
def test_a_match_on_answers_a_regex_filter_extracted_is_the_metrics(tmp_path, capsys):
    """BBH-style logs: the harness's filter extracts the answer from a chain of thought
    ("... So the answer is (B).") by a regex and ``exact_match`` compares that; no rule on
    the raw generation reproduces it. The folder scored it by the nearest rule anyway (only a
    warning), so a live model was scored otherwise than the logged ones; now such an item
    keeps the metric by name: refused live naming it, scored by a cmd: program."""
    rng = np.random.default_rng(5)
    for m in range(22):
        folder = tmp_path / "bbh" / f"org__b{m:02d}"
        folder.mkdir(parents=True)
        lines = []
        for i in range(30):
            gold = "(" + "ABCD"[i % 4] + ")"
            pick = gold if rng.random() < 0.1 + 0.8 * m / 21 else "(" + "ABCD"[(i + 1) % 4] + ")"
            raw = f"Let's think step by step. Option {i} fits. So the answer is {pick}."
            lines.append(json.dumps({
                "doc_id": i, "doc": {"input": f"q{i}"}, "target": gold,
                "arguments": {"gen_args_0": {"arg_0": f"Q: q{i}\nA:",
                                             "arg_1": {"until": ["Q:"], "max_gen_toks": 128}}},
                "resps": [[raw]], "filtered_resps": [pick], "filter": "get-answer",
                "metrics": ["exact_match"], "exact_match": float(pick == gold)}))
        (folder / "samples_bbh_toy_2025-01-01T00-00-00.000000.jsonl").write_text(
            "\n".join(lines) + "\n")
    assert run_cli(["build-bank", tmp_path / "bbh", "-o", tmp_path / "bank", "-q"]) == 0
    folder = load_bank_dir(tmp_path / "bank")
    assert folder.manifest["requests"]["rules"] == ["metric:exact_match"]
    capsys.readouterr()
    one_line_error(capsys, ["evaluate", "--bank", tmp_path / "bank", "--subject",
                             "completions:http://127.0.0.1:9/v1", "--llm", "x",
                             "-o", tmp_path / "live"], "'exact_match'", "cmd:")


def test_a_chain_of_thought_number_read_by_flexible_extract(tmp_path):
    """GSM8K-CoT-style logs: the target is the bare number ("42", no "#### "), the
    ``flexible-extract`` filter takes the generation's last number. With ``--filter
    flexible-extract`` the folder scores a live answer that way (the rule reproducing the
    logs), where the whole chain of thought compared to "42" never matched."""
    rng = np.random.default_rng(7)
    for m in range(22):
        folder = tmp_path / "cot" / f"org__c{m:02d}"
        folder.mkdir(parents=True)
        lines = []
        for i in range(30):
            gold = str(10 + i)
            got = gold if rng.random() < 0.1 + 0.8 * m / 21 else str(11 + i)
            raw = f" {i} plus 10 makes {got}. The answer is {got}."
            for flt, kept in (("strict-match", "[invalid]"), ("flexible-extract", got)):
                lines.append(json.dumps({
                    "doc_id": i, "doc": {"question": f"q{i}"}, "target": gold,
                    "arguments": {"gen_args_0": {"arg_0": f"Q: q{i}\nA:",
                                                 "arg_1": {"until": ["Q:"], "do_sample": False}}},
                    "resps": [[raw]], "filtered_resps": [kept], "filter": flt,
                    "metrics": ["exact_match"], "exact_match": float(kept == gold)}))
        (folder / "samples_gsm8k_cot_2025-01-01T00-00-00.000000.jsonl").write_text(
            "\n".join(lines) + "\n")
    assert run_cli(["build-bank", tmp_path / "cot", "--filter", "flexible-extract",
                  "-o", tmp_path / "bank", "-q"]) == 0
    folder = load_bank_dir(tmp_path / "bank")
    assert folder.manifest["requests"]["rules"] == ["gsm8k_flexible"]
    assert folder.manifest["requests"]["rule_agreement_min"] == 1.0
    ir = build_item_requests(folder.bank, folder.bank.item_ids[0])
    assert ir.score(f" so it is {ir.gold}.\nQ: next") == 1 and ir.score(" 3 or 4") == 0


def test_replay_of_a_folder_with_several_targets(tmp_path):
    """``replay:MATRIX#MODEL`` answers a generation item with a text its rule scores as the
    recorded score: on items with several targets it failed ("cannot construct a correct
    generation"), the tuple of targets written as one string."""
    def em(text, gold):
        return float(any(text.strip() == a for a in _aliases(gold)))

    root = _gen_logs(tmp_path / "tq", "exact_match", em, target=_aliases)
    assert run_cli(["build-bank", root, "-o", tmp_path / "bank", "-q"]) == 0
    read_sample_logs(root).write(tmp_path / "m.csv")
    assert run_cli(["evaluate", "--bank", tmp_path / "bank", "--subject",
                  f"replay:{tmp_path / 'm.csv'}#org/gen-11", "--max-items", "10", "-q",
                  "-o", tmp_path / "rep"]) == 0
    row = json.loads((tmp_path / "rep" / "results.json").read_text())[0]
    f = root / "org__gen-11" / "samples_toyqa_2025-01-01T00-00-00.000000.jsonl"
    logged = {str(r["doc_id"]): r["exact_match"] for r in map(json.loads, f.read_text().splitlines())}
    assert row["scores"] == [logged[i] for i in row["items"]]
