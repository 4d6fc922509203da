"""Sample logs of many models made from one real lm-evaluation-harness log (test helper).

A bank needs at least 20 source models; the real logs here are of one model. Each synthetic
model keeps every record of the real file as it is (``doc``, ``arguments``, ``target``, hashes,
field spellings: a repr-string log stays one) and only answers differently: with a per-model
ability it picks the gold option or another one, and its ``resps`` / ``filtered_resps`` and
metric are rewritten to agree (the picked option gets the largest log-likelihood). So the
requests of every item are exactly the real log's, and the answers are consistent with the
harness's rule, as in a real multi-model run.
"""
from __future__ import annotations

import ast
import gzip
import json
from pathlib import Path

import numpy as np


def read_raw(path) -> list[dict]:
    """The records of a samples_*.jsonl[.gz] file, fields as stored (no parsing)."""
    path = Path(path)
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def logged_requests(rec: dict) -> list[tuple]:
    """(arg_0, arg_1) of every request of a raw record, parsed independently of atlascat."""
    args = rec["arguments"]
    if isinstance(args, str):
        args = ast.literal_eval(args)
    if isinstance(args, dict):
        keys = sorted(args, key=lambda k: int(k.rsplit("_", 1)[1]))
        return [(args[k]["arg_0"], args[k]["arg_1"]) for k in keys]
    return [tuple(a) for a in args]


def _gold(rec: dict, n: int) -> int:
    doc = rec["doc"]
    if isinstance(doc, str):
        doc = ast.literal_eval(doc)
    if "answer" in doc and "option1" in doc:          # WinoGrande: answer is "1" / "2"
        return int(doc["answer"]) - 1
    t = str(rec.get("target", "0")).strip()
    return int(t) if t.isdigit() and int(t) < n else 0


def synthetic_models(real_file, out_dir, n_models: int = 21, *, metric: str = "acc",
                     seed: int = 0) -> list[Path]:
    """Write ``n_models`` model folders ``out_dir/model-XX/<real file name>`` (uncompressed
    ``.jsonl``); abilities spread from chance to strong. Returns the files."""
    rng = np.random.default_rng(seed)
    recs = read_raw(real_file)
    name = Path(real_file).name.removesuffix(".gz")
    files = []
    for m in range(n_models):
        p_gold = 0.15 + 0.8 * m / max(1, n_models - 1)
        folder = Path(out_dir) / f"org__model-{m:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        lines = []
        for rec in recs:
            n = len(logged_requests(rec))
            gold = _gold(rec, n)
            pick = gold if rng.random() < p_gold else int(rng.choice([j for j in range(n)
                                                                       if j != gold]))
            ll = -rng.uniform(5, 60, size=n)
            ll[pick] = ll.max() + rng.uniform(0.1, 2.0)
            repr_log = isinstance(rec["arguments"], str)
            resps = [[[f"{v}" if repr_log else float(v), "False" if repr_log else False]]
                     for v in ll]
            filtered = [r[0] for r in resps]
            score = float(pick == gold)
            new = dict(rec)
            new["resps"] = str(resps) if repr_log else resps
            new["filtered_resps"] = str(filtered) if repr_log else filtered
            new[metric] = str(score) if repr_log else score
            lines.append(json.dumps(new))
        f = folder / name
        f.write_text("\n".join(lines) + "\n", encoding="utf-8")
        files.append(f)
    return files


def generation_logs(out_dir, n_models: int = 22, n_items: int = 12, *, seed: int = 0,
                    task: str = "toy_arith") -> list[Path]:
    """lm-eval 0.4.x-style ``generate_until`` logs (JSON ``arguments`` with generation kwargs,
    ``exact_match``) of a toy arithmetic task: the request contexts, stop strings and token
    limits differ per item so that a test sees each travel."""
    rng = np.random.default_rng(seed)
    items = []
    for i in range(n_items):
        a, b = int(rng.integers(2, 50)), int(rng.integers(2, 50))
        ctx = f"Question: What is {a} plus {b}?\nAnswer:"
        until = ["\n\n", "Question:"] if i % 2 == 0 else ["\n"]
        items.append((i, ctx, until, 16 + i, str(a + b)))
    files = []
    for m in range(n_models):
        p = 0.1 + 0.85 * m / max(1, n_models - 1)
        folder = Path(out_dir) / f"org__gen-{m:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        lines = []
        for i, ctx, until, max_toks, gold in items:
            right = rng.random() < p
            text = f" {gold}" if right else f" {int(gold) + 1}"
            args = {"gen_args_0": {"arg_0": ctx, "arg_1": {"until": until, "do_sample": False,
                                                          "max_gen_toks": max_toks}}}
            lines.append(json.dumps({
                "doc_id": i, "doc": {"question": ctx, "answer": gold}, "target": gold,
                "arguments": args, "resps": [[text + until[0] + "more"]],
                "filtered_resps": [text], "filter": "none", "metrics": ["exact_match"],
                "exact_match": float(right), "doc_hash": "x", "prompt_hash": "y",
                "target_hash": "z"}))
        f = folder / f"samples_{task}_2025-01-01T00-00-00.000000.jsonl"
        f.write_text("\n".join(lines) + "\n", encoding="utf-8")
        files.append(f)
    return files


def f1_logs(out_dir, n_models: int = 30, n_items: int = 40, *, seed: int = 0,
            task: str = "toy_qa") -> list[Path]:
    """lm-eval 0.4.x ``generate_until`` logs of a toy QA task scored by the per-sample token
    ``f1`` (continuous scores in [0, 1]): each model keeps each word of the gold answer with a
    probability rising with its ability, the rest replaced by ``x`` (SQuAD's f1 of such a
    generation, computed here on whitespace words, which hold no punctuation)."""
    rng = np.random.default_rng(seed)
    golds = [" ".join(f"w{i}{k}" for k in range(3 + i % 5)) for i in range(n_items)]
    files = []
    for m in range(n_models):
        folder = Path(out_dir) / f"org__qa-{m:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        lines = []
        for i, gold in enumerate(golds):
            words = gold.split()
            keep = rng.random(len(words)) < 0.1 + 0.85 * m / max(1, n_models - 1)
            said = [w if k else "x" for w, k in zip(words, keep)]
            common = int(keep.sum())
            f1 = 0.0 if common == 0 else common / len(words)   # len(said) == len(words)
            args = {"gen_args_0": {"arg_0": f"Q{i}: what?\nA:",
                                   "arg_1": {"until": ["\n"], "max_gen_toks": 32}}}
            text = " " + " ".join(said)
            lines.append(json.dumps({
                "doc_id": i, "doc": {"q": i}, "target": gold, "arguments": args,
                "resps": [[text]], "filtered_resps": [text], "filter": "none",
                "metrics": ["f1"], "f1": f1}))
        f = folder / f"samples_{task}_2025-01-01T00-00-00.000000.jsonl"
        f.write_text("\n".join(lines) + "\n", encoding="utf-8")
        files.append(f)
    return files
