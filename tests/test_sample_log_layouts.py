"""The output trees lm-evaluation-harness really writes, read by ``atlas build-bank``.

``lm_eval --log_samples --output_path OUT`` writes ``OUT/<org>__<model>/samples_<task>_<ts>.jsonl``
beside ``results_<ts>.json``, with ``<ts>`` = ``datetime.now().isoformat()`` with ':' -> '-';
lm-eval >= 0.4.3 writes every ``resps`` / ``filtered_resps`` leaf as a string
(``sanitize_list``). A user who ran the harness on 20 models has re-runs (several timestamps
for one model), group tasks (MMLU's subtasks, one file each), tasks with several metrics and
filters; :func:`harness_logs` writes such trees.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from atlascat.bankdir import read_sample_logs
from atlascat.cli import app, main

runner = CliRunner()


def stamp(hour: int = 10) -> str:
    return f"2025-03-01T{hour:02d}-00-00.123456"


def mc_record(task: str, doc_id: int, pick: int, n_opt: int = 4) -> dict:
    """One lm-eval 0.4.x multiple-choice sample (acc, acc_norm), the model picking ``pick``."""
    gold = (doc_id * 7 + len(task)) % n_opt
    q = f"Question: {task} number {doc_id}?\nAnswer:"
    conts = [f" option {chr(65 + j)}" for j in range(n_opt)]
    ll = -np.linspace(20.0, 5.0, n_opt)[::-1].copy()
    ll[[0, pick]] = ll[[pick, 0]]
    acc = float(pick == gold)
    return {"doc_id": doc_id, "doc": {"question": q, "choices": conts, "answer": gold},
            "target": str(gold),
            "arguments": {f"gen_args_{j}": {"arg_0": q, "arg_1": c} for j, c in enumerate(conts)},
            "resps": [[[str(v), "False"]] for v in ll],
            "filtered_resps": [[str(v), "False"] for v in ll], "filter": "none",
            "metrics": ["acc", "acc_norm"], "doc_hash": "d", "prompt_hash": "p",
            "target_hash": "t", "acc": acc, "acc_norm": acc}


def write_run(root: Path, model: str, task: str, records: list[dict], hour: int = 10) -> Path:
    folder = Path(root) / model.replace("/", "__")
    folder.mkdir(parents=True, exist_ok=True)
    f = folder / f"samples_{task}_{stamp(hour)}.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    (folder / f"results_{stamp(hour)}.json").write_text(json.dumps(
        {"results": {task: {}}, "lm_eval_version": "0.4.7"}), encoding="utf-8")
    return f


def harness_logs(root: Path, task: str = "arc_easy", n_models: int = 22, n_items: int = 60,
                 seed: int = 0) -> None:
    """``n_models`` models' runs of one multiple-choice task, abilities spread out."""
    rng = np.random.default_rng(seed)
    for m in range(n_models):
        p = 0.2 + 0.75 * m / (n_models - 1)
        recs = []
        for d in range(n_items):
            gold = (d * 7 + len(task)) % 4
            pick = gold if rng.random() < p else (gold + 1 + int(rng.integers(3))) % 4
            recs.append(mc_record(task, d, pick))
        write_run(root, f"org/model-{m:02d}", task, recs)


def test_a_rerun_keeps_each_items_latest_sample(tmp_path):
    """A model run twice (an earlier full run, a later --limit 10 re-run answering otherwise):
    each item is read from the latest run that logged it, the rest from the earlier run, and
    the logs say so; nothing is refused and nothing lost."""
    early = [mc_record("arc_easy", d, pick=0) for d in range(30)]
    late = [mc_record("arc_easy", d, pick=1) for d in range(10)]
    write_run(tmp_path, "org/m", "arc_easy", early, hour=9)
    newest = write_run(tmp_path, "org/m", "arc_easy", late, hour=11)
    write_run(tmp_path, "org/other", "arc_easy", early, hour=10)
    logs = read_sample_logs(tmp_path)
    assert sorted(logs.models) == ["org/m", "org/other"]
    want = {str(d): float((0 if d >= 10 else 1) == (d * 7 + 8) % 4) for d in range(30)}
    assert logs.scores["org/m"] == want
    assert logs.reruns == {"org/m": {"runs": 2, "kept": [str(newest)], "superseded": 10}}
    assert logs.outputs["org/m"]["3"] == [float(v[0]) for v in late[3]["filtered_resps"]]


def test_a_log_and_its_gzipd_copy_are_one_run(tmp_path):
    """``samples_<task>_<ts>.jsonl`` beside its own ``.jsonl.gz`` (a copy of the same run) is
    not a re-run: read once, no re-runs said; a second timestamp still is one."""
    import gzip

    recs = [mc_record("arc_easy", d, pick=d % 4) for d in range(20)]
    f = write_run(tmp_path, "org/m", "arc_easy", recs)
    with gzip.open(f.with_name(f.name + ".gz"), "wt", encoding="utf-8") as out:
        out.write(f.read_text(encoding="utf-8"))
    write_run(tmp_path, "org/other", "arc_easy", recs)
    logs = read_sample_logs(tmp_path)
    assert logs.reruns == {}
    assert len(logs.scores["org/m"]) == 20
    write_run(tmp_path, "org/m", "arc_easy", recs[:5], hour=12)
    assert read_sample_logs(tmp_path).reruns["org/m"]["runs"] == 2


def test_a_rerun_is_stated_in_the_build_summary_and_manifest(tmp_path):
    harness_logs(tmp_path / "runs")
    again = [mc_record("arc_easy", d, pick=(d + 1) % 4) for d in range(60)]
    write_run(tmp_path / "runs", "org/model-03", "arc_easy", again, hour=12)
    res = runner.invoke(app, ["build-bank", str(tmp_path / "runs"), "-o", str(tmp_path / "b")])
    assert res.exit_code == 0, res.output
    assert "re-runs" in res.output and "latest run" in res.output
    src = json.loads((tmp_path / "b" / "manifest.json").read_text())["source"]
    assert src["reruns"]["org/model-03"]["superseded"] == 60
    assert src["reruns"]["org/model-03"]["kept"][0].endswith(f"_{stamp(12)}.jsonl")


def test_read_lmeval_samples_reads_reruns_by_the_same_rule(tmp_path):
    from atlascat.live.lmeval import read_lmeval_samples

    write_run(tmp_path, "org/m", "arc_easy", [mc_record("arc_easy", d, 0) for d in range(6)], 9)
    write_run(tmp_path, "org/m", "arc_easy", [mc_record("arc_easy", d, 1) for d in range(3)], 11)
    rm = read_lmeval_samples(tmp_path, metric="acc")
    built = read_sample_logs(tmp_path, metric="acc").matrix()
    assert rm.subject_ids == ["org/m"]
    np.testing.assert_array_equal(rm.values, built.values)
    assert rm.values[0, 1] == float(1 == (1 * 7 + 8) % 4)      # the later run's answer


MMLU = {"mmlu": ["mmlu_stem", "mmlu_other"], "mmlu_stem": ["mmlu_anatomy", "mmlu_astronomy"],
        "mmlu_other": ["mmlu_virology"], "mmlu_anatomy": [], "mmlu_astronomy": [],
        "mmlu_virology": []}


def group_logs(root: Path, n_models: int = 22, n_items: int = 20, seed: int = 1) -> None:
    """``lm_eval --tasks mmlu,arc_easy``: one file per leaf task, the nesting in results."""
    rng = np.random.default_rng(seed)
    leaves = [t for t, members in MMLU.items() if not members]
    for m in range(n_models):
        p = 0.2 + 0.75 * m / (n_models - 1)
        folder = root / f"org__model-{m:02d}"
        folder.mkdir(parents=True)
        for task in [*leaves, "arc_easy"]:
            recs = []
            for d in range(n_items):
                gold = (d * 7 + len(task)) % 4
                recs.append(mc_record(task, d, gold if rng.random() < p else (gold + 1) % 4))
            (folder / f"samples_{task}_{stamp()}.jsonl").write_text(
                "".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
        (folder / f"results_{stamp()}.json").write_text(json.dumps(
            {"results": {}, "group_subtasks": {**MMLU, "arc_easy": []}}), encoding="utf-8")


def test_a_group_task_is_read_as_one_benchmark_of_its_tasks(tmp_path, capsys):
    """`--task mmlu` reads every leaf task the results files put under the group (nested
    groups too); item ids carry their task (doc ids repeat across tasks); a subgroup works."""
    group_logs(tmp_path)
    logs = read_sample_logs(tmp_path, task="mmlu")
    assert logs.task == "mmlu"
    assert logs.tasks == ["mmlu_anatomy", "mmlu_astronomy", "mmlu_virology"]
    assert len(logs.item_ids()) == 60 and "mmlu_virology/19" in logs.item_ids()
    stem = read_sample_logs(tmp_path, task="mmlu_stem")
    assert stem.tasks == ["mmlu_anatomy", "mmlu_astronomy"] and len(stem.item_ids()) == 40
    assert main(["build-bank", str(tmp_path), "-o", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert "mmlu (a group of 3 tasks), arc_easy" in " ".join(err.split())


def test_a_group_bank_keeps_each_items_logged_requests(tmp_path):
    group_logs(tmp_path / "runs")
    for f in (tmp_path / "runs").rglob("samples_arc_easy_*"):
        f.unlink()                                   # only the group: no --task needed
    res = runner.invoke(app, ["build-bank", str(tmp_path / "runs"), "-o", str(tmp_path / "b")])
    assert res.exit_code == 0, res.output
    assert "mmlu: a group of 3 tasks" in res.output
    logged = {}
    for f in (tmp_path / "runs" / "org__model-05").glob("samples_*.jsonl"):
        task = f.name[len("samples_"):].rsplit("_2025", 1)[0]
        for line in f.read_text().splitlines():
            rec = json.loads(line)
            logged[f"{task}/{rec['doc_id']}"] = [(a["arg_0"], a["arg_1"])
                                                 for a in rec["arguments"].values()]
    rows = [json.loads(x) for x in (tmp_path / "b" / "requests.jsonl").read_text().splitlines()]
    assert len(rows) == 60
    for row in rows:
        assert [(q["context"], q["continuation"]) for q in row["requests"]] == \
            logged[row["item_id"]]


def test_the_summary_says_which_metric_and_filter_were_read(tmp_path):
    """acc and acc_norm logged, no --metric: the summary says acc is the first of the two and
    that --metric chooses; with --metric acc_norm that row goes and the rule is acc_norm."""
    harness_logs(tmp_path / "runs")
    res = runner.invoke(app, ["build-bank", str(tmp_path / "runs"), "-o", str(tmp_path / "a")])
    assert res.exit_code == 0, res.output
    assert "the first the logs list of acc, acc_norm (--metric chooses another)" in res.output
    src = json.loads((tmp_path / "a" / "manifest.json").read_text())["source"]
    assert src["metric"] == "acc" and src["metrics_logged"] == ["acc", "acc_norm"]
    res = runner.invoke(app, ["build-bank", str(tmp_path / "runs"), "--metric", "acc_norm",
                              "-o", str(tmp_path / "n")])
    assert res.exit_code == 0, res.output
    assert "metric acc_norm" in res.output and "--metric chooses" not in res.output
    rows = (tmp_path / "n" / "requests.jsonl").read_text().splitlines()
    assert {json.loads(r)["rule"] for r in rows} == {"acc_norm"}


def test_a_task_with_two_filters_asks_for_one_and_says_it(tmp_path, capsys):
    from lmeval_logs import generation_logs

    for f in generation_logs(tmp_path / "runs", task="gsm8k"):
        recs = [json.loads(x) for x in f.read_text().splitlines()]
        f.write_text("".join(json.dumps({**r, "filter": flt}) + "\n" for r in recs
                             for flt in ("strict-match", "flexible-extract")))
    assert main(["build-bank", str(tmp_path / "runs"), "-o", str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err.strip()
    assert "--filter" in err and "strict-match" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "a").exists()
    res = runner.invoke(app, ["build-bank", str(tmp_path / "runs"), "--filter", "strict-match",
                              "-o", str(tmp_path / "b")])
    assert res.exit_code == 0, res.output
    assert "metric exact_match, filter strict-match" in " ".join(res.output.split())


def test_models_that_logged_different_items_are_refused_or_cut_to_the_common_ones(tmp_path,
                                                                                   capsys):
    """One model's run stopped at 45 of 60 docs: one line naming it and --common-items, nothing
    written; with --common-items the 45 items every model logged, the rest said."""
    harness_logs(tmp_path / "runs")
    f = next((tmp_path / "runs" / "org__model-07").glob("samples_*"))
    f.write_text("\n".join(f.read_text().splitlines()[:45]) + "\n")
    assert main(["build-bank", str(tmp_path / "runs"), "-o", str(tmp_path / "a")]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "15 of 60 items" in err and "'org/model-07' 45" in err and "--common-items" in err
    assert not (tmp_path / "a").exists()
    res = runner.invoke(app, ["build-bank", str(tmp_path / "runs"), "--common-items",
                              "-o", str(tmp_path / "b")])
    assert res.exit_code == 0, res.output
    assert "15 items left out: not every model logged them" in " ".join(res.output.split())
    m = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert m["items"]["n_results"] == 45
    assert m["items"]["dropped_missing"] == [str(i) for i in range(45, 60)]


@pytest.mark.parametrize("extra, says", [
    ({}, "its records hold no per-sample metric (bleu, chrf): these logs cannot build a bank"),
    ({"exact_match": 0.0}, "choose one of its per-sample metrics with --metric: exact_match")])
def test_a_corpus_metric_is_refused_naming_the_alternatives(tmp_path, capsys, extra, says):
    """WMT-style logs: bleu / chrf are (reference, prediction) pairs the harness scores over
    the corpus; the one line says which per-sample metric there is, or that there is none."""
    for m in range(21):
        recs = [{"doc_id": i, "doc": {"en": f"s{i}"}, "target": f"r{i}", "arguments": {
            "gen_args_0": {"arg_0": f"s{i} ->", "arg_1": {"until": ["\n"]}}},
            "resps": [[f"h{i}"]], "filtered_resps": [f"h{i}"], "filter": "none",
            "metrics": ["bleu", "chrf", *extra], "bleu": [f"r{i}", f"h{i}"],
            "chrf": [f"r{i}", f"h{i}"], **extra} for i in range(5)]
        write_run(tmp_path / "runs", f"org/m{m}", "wmt14-en-fr", recs)
    assert main(["build-bank", str(tmp_path / "runs"), "-o", str(tmp_path / "b")]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "whole corpus" in err and says in err
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize("generation, extracted", [
    (" Half of 48 is 24, so she sold $1,234.", "1234"),
    (" 5 apples and 12 pears make 17 fruits in all", "17"),
    (" So the answer is 7", "7"),
    (" She sold 48/2 = 24 clips.\n#### 72", "72"),
    (" I do not know", "[invalid]")])
def test_gsm8k_flexible_extract_is_the_harness_filter(generation, extracted):
    """lm-eval 0.4 gsm8k ``flexible-extract``: the last match of (-?[$0-9.,]{2,})|(-?[0-9]+),
    then exact_match's regexes_to_ignore (",", "$", "(?s).*#### ", "\\.$")."""
    from atlascat.content.requests import gsm8k_flexible_extract, score_outputs

    assert gsm8k_flexible_extract(generation) == extracted
    right = score_outputs("gsm8k_flexible", [generation + "\nQuestion: next"], gold=extracted,
                          until=("Question:",))
    assert right == int(extracted != "[invalid]")


def test_gsm8k_logs_read_with_flexible_extract_are_scored_by_their_rule(tmp_path):
    """GSM8K logged with both filters, read with --filter flexible-extract: the rule that
    reproduces every logged score is the flexible one (the strict rule would miss the answers
    without '#### '), and a live run scores by it."""
    rng = np.random.default_rng(3)
    for m in range(22):
        recs = []
        for d in range(30):
            gold = 10 + d
            right = rng.random() < 0.2 + 0.7 * m / 21
            said = gold if right else gold + 1
            gen = (f" Reasoning.\n#### {said}" if d % 3 == 0 else f" So she has ${said:,}.")
            for flt, got in (("strict-match", f"{said}" if d % 3 == 0 else "[invalid]"),
                             ("flexible-extract", f"{said}")):
                recs.append({
                    "doc_id": d, "doc": {"question": f"q{d}", "answer": f"Work.\n#### {gold}"},
                    "target": f"Work.\n#### {gold}", "arguments": {"gen_args_0": {
                        "arg_0": f"Question: q{d}\nAnswer:", "arg_1": {
                            "until": ["Question:", "</s>"], "do_sample": False}}},
                    "resps": [[gen]], "filtered_resps": [got], "filter": flt,
                    "metrics": ["exact_match"], "exact_match": float(got == str(gold))})
        write_run(tmp_path / "runs", f"org/m{m:02d}", "gsm8k", recs)
    logs = read_sample_logs(tmp_path / "runs", filter_name="flexible-extract")
    fields = [logs.rule_fields(i) for i in logs.item_ids()]
    assert {f["rule"] for f in fields} == {"gsm8k_flexible"}
    assert min(f["agreement"] for f in fields) == 1.0


def test_logs_of_a_limited_run_are_said_to_cover_part_of_the_task(tmp_path):
    """`lm_eval --limit 60`: each run's results_<ts>.json says 60 of 2376 documents
    (n-samples); the build warns that the bank's score is the mean over those."""
    harness_logs(tmp_path / "runs")
    for res in (tmp_path / "runs").rglob("results_*.json"):
        d = json.loads(res.read_text())
        d["n-samples"] = {"arc_easy": {"original": 2376, "effective": 60}}
        res.write_text(json.dumps(d))
    res = runner.invoke(app, ["build-bank", str(tmp_path / "runs"), "-o", str(tmp_path / "b")])
    assert res.exit_code == 0, res.output
    assert "the logs cover 60 of the task's 2376 documents" in " ".join(res.output.split())
    src = json.loads((tmp_path / "b" / "manifest.json").read_text())["source"]
    assert src["n_samples"] == {"logged": 60, "in_task": 2376}


def test_a_limited_rerun_over_a_full_run_covers_the_whole_task(tmp_path):
    """A full run, then a --limit 10 re-run of one model: every item is logged (10 from the
    re-run), so no coverage warning; the full run alone is said to cover all 60."""
    harness_logs(tmp_path)
    for res in tmp_path.rglob("results_*.json"):
        res.write_text(json.dumps({"n-samples": {"arc_easy": {"original": 60, "effective": 60}}}))
    again = write_run(tmp_path, "org/model-02", "arc_easy",
                      [mc_record("arc_easy", d, 0) for d in range(10)], hour=12)
    (again.parent / f"results_{stamp(12)}.json").write_text(json.dumps(
        {"n-samples": {"arc_easy": {"original": 60, "effective": 10}}}))
    logs = read_sample_logs(tmp_path)
    assert logs.n_samples == {"logged": 60, "in_task": 60}
    assert logs.reruns["org/model-02"]["superseded"] == 10


def test_a_squad_style_em_is_scored_by_the_normalised_match_it_reproduces(tmp_path):
    """em / f1 logs (SQuAD-style: 'Eiffel tower.' matches 'The Eiffel Tower'): the strict
    match would miss those the harness counted, so the 0/1 rule is the normalised one, which
    reproduces every logged score; a live answer is scored by it."""
    from atlascat.content.requests import score_outputs

    rng = np.random.default_rng(2)
    for m in range(22):
        recs = []
        for d in range(20):
            gold = f"The Eiffel Tower {d}"
            said = [gold, f"eiffel tower {d}.", "Paris"][int(rng.integers(3))]
            em = float(said != "Paris")
            recs.append({"doc_id": d, "doc": {"q": d}, "target": gold, "arguments": {
                "gen_args_0": {"arg_0": f"Q{d}?\nA:", "arg_1": {"until": ["\n"]}}},
                "resps": [[f" {said}\nQ"]], "filtered_resps": [f" {said}\nQ"],
                "filter": "none", "metrics": ["em", "f1"], "em": em, "f1": em})
        write_run(tmp_path / "runs", f"org/m{m:02d}", "squad_like", recs)
    logs = read_sample_logs(tmp_path / "runs")
    assert logs.metric == "em" and logs.match_rule == "exact_match_norm"
    fields = [logs.rule_fields(i) for i in logs.item_ids()]
    assert {f["rule"] for f in fields} == {"exact_match_norm"}
    assert min(f["agreement"] for f in fields) == 1.0
    assert score_outputs("exact_match_norm", [" eiffel TOWER 3!\nmore"], gold="The Eiffel Tower 3",
                         until=("\n",)) == 1
    assert score_outputs("exact_match", [" eiffel TOWER 3!\nmore"], gold="The Eiffel Tower 3",
                         until=("\n",)) == 0


def test_a_binary_metric_no_match_reproduces_is_kept_by_name(tmp_path):
    """TruthfulQA-gen's bleu_acc is 0/1 but no string match: read as exact match it would be
    scored live by another metric; it is kept as metric:bleu_acc (a live run refuses it by
    name, cmd: asks it), while an `em` the strict match reproduces keeps exact_match."""
    rng = np.random.default_rng(5)
    for m in range(22):
        recs = []
        for d in range(20):
            said = f"answer {d}" if rng.random() < 0.5 else f"other {d}"
            acc = float(rng.random() < 0.5)
            recs.append({"doc_id": d, "doc": {"q": d}, "target": f"answer {d}", "arguments": {
                "gen_args_0": {"arg_0": f"Q{d}?\nA:", "arg_1": {"until": ["\n\n"]}}},
                "resps": [[said]], "filtered_resps": [said], "filter": "none",
                "metrics": ["bleu_acc", "em"], "bleu_acc": acc,
                "em": float(said == f"answer {d}")})
        write_run(tmp_path / "runs", f"org/m{m:02d}", "truthfulqa_gen", recs)
    acc = read_sample_logs(tmp_path / "runs", metric="bleu_acc")
    assert {acc.rule_fields(i)["rule"] for i in acc.item_ids()} == {"metric:bleu_acc"}
    em = read_sample_logs(tmp_path / "runs", metric="em")
    assert {em.rule_fields(i)["rule"] for i in em.item_ids()} == {"exact_match"}
    assert min(em.rule_fields(i)["agreement"] for i in em.item_ids()) == 1.0


def test_logs_of_lm_eval_0_4_0_to_0_4_2_are_read(tmp_path):
    """lm-eval 0.4.0-0.4.2 wrote `<output_path>/<model_args, '/' and '=' -> '__'>_<task>.jsonl`,
    one JSON list (indent=2) per task, beside `results.json` (its `configs` name the tasks),
    `arguments` as lists, numbers as numbers, no `filter` / `metrics` fields: read as the
    newer layout, the model from `pretrained=`, the requests as logged."""
    rng = np.random.default_rng(6)
    for m in range(21):
        out = tmp_path / "runs" / f"run{m:02d}"
        out.mkdir(parents=True)
        (out / "results.json").write_text(json.dumps(
            {"results": {"arc_easy": {"acc,none": 0.5}}, "configs": {"arc_easy": {}}}))
        recs = []
        for d in range(12):
            rec = mc_record("arc_easy", d, int(rng.integers(4)))
            recs.append({"doc_id": d, "doc": rec["doc"], "target": int(rec["target"]),
                         "arguments": [[a["arg_0"], a["arg_1"]]
                                       for a in rec["arguments"].values()],
                         "resps": [[[float(r[0][0]), False]] for r in rec["resps"]],
                         "filtered_resps": [[float(r[0][0]), False] for r in rec["resps"]],
                         "acc": rec["acc"], "acc_norm": rec["acc_norm"]})
        name = f"pretrained__org__model-{m:02d},dtype__float16_arc_easy.jsonl"
        (out / name).write_text(json.dumps(recs, indent=2))
    logs = read_sample_logs(tmp_path / "runs")
    assert logs.task == "arc_easy" and logs.metric == "acc"
    assert logs.models[:2] == ["org/model-00", "org/model-01"] and len(logs.models) == 21
    assert len(logs.item_ids()) == 12
    assert logs.items["3"].requests[1].continuation == " option B"
    assert logs.rule_fields("3")["agreement"] == 1.0


def test_a_filter_the_logs_do_not_have_names_the_ones_they_have(tmp_path, capsys):
    harness_logs(tmp_path / "runs", n_models=20, n_items=6)
    assert main(["build-bank", str(tmp_path / "runs"), "--filter", "strict-match",
                 "-o", str(tmp_path / "b")]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "no samples with filter 'strict-match' (its filters: none; --filter picks one)" in err


def test_predict_only_logs_are_refused_saying_so(tmp_path, capsys):
    """`lm_eval --predict_only` logs `"metrics": ["bypass"], "bypass": 999`: not a score."""
    for m in range(20):
        rec = {**mc_record("arc_easy", 0, 0), "metrics": ["bypass"], "bypass": 999}
        write_run(tmp_path / "runs", f"org/m{m}", "arc_easy", [rec])
    assert main(["build-bank", str(tmp_path / "runs"), "-o", str(tmp_path / "b")]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "--predict_only" in err and "outside" not in err
