"""Sample logs of SIMULATED models made from one real lm-evaluation-harness log: a recipe's data.

A bank folder needs the logs of 20 or more models; to try ``atlas build-bank`` on sample logs
before running the harness on 20 models, :func:`simulated_sample_logs` takes one real
``samples_<task>_*.jsonl[.gz]`` of a multiple-choice task and writes the logs of ``n_models``
simulated models. Every record keeps what the real log holds (``doc``, ``arguments``: the exact
requests, ``target``, hashes, the field spellings: a Python-repr log stays one); only the
answers are simulated. Model m has an ability theta_m (spread evenly over [-2, 2]), item i a
difficulty b_i and slope a_i (drawn once), and the model's probability of the true options is
the continuous score

    mc2_im ~ Beta(k p, k (1 - p)),   p = expit(a_i (theta_m - b_i)),  k = 8,

its log-likelihoods (``resps``, ``filtered_resps``) are made so that lm-eval's TruthfulQA mc2
formula (:func:`atlascat.content.requests.mc2_score`: the true options' share of the
probability) gives exactly mc2_im, and ``acc`` is the harness's argmax rule on them. The true
options are those the doc's ``mc1_targets`` / ``mc2_targets`` labels mark (1s first, as lm-eval
orders them), WinoGrande's ``answer``, else the ``target`` index. The model folders are named
``simulated__model-XX`` (read as ``simulated/model-XX``): the models are simulated. A task
with one true option (WinoGrande's ``answer``, a ``target`` index) logs ``acc`` alone.
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np

from ..content.parsing import parse_literal
from ..errors import ResponseDataError

__all__ = ["simulated_sample_logs"]

_CONCENTRATION = 8.0


def _raw(path: Path) -> list[dict]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _value(v):
    return parse_literal(v, "field") if isinstance(v, str) and v[:1] in "[{(" else v


def _n_requests(rec: dict) -> int:
    args = _value(rec["arguments"])
    return len(args)


def _true_options(rec: dict, n: int) -> tuple[list[int], bool] | None:
    """(the indices of the true options, whether the doc's labels told them: an mc2 item);
    None when the record does not say. From the doc's ``mc2_targets`` / ``mc1_targets``
    labels, WinoGrande's ``answer`` ("1" / "2" of ``option1`` / ``option2``), else the
    ``target`` when it is an option's index."""
    doc = _value(rec.get("doc"))
    if isinstance(doc, dict):
        for key in ("mc2_targets", "mc1_targets"):
            t = doc.get(key)
            if isinstance(t, dict) and len(t.get("labels", [])) == n:
                true = [j for j, v in enumerate(t["labels"]) if v]
                if 0 < len(true) < n:
                    return true, true == list(range(len(true)))
        answer = str(doc.get("answer", "")).strip()
        if "option1" in doc and answer.isdigit() and 1 <= int(answer) <= n:
            return [int(answer) - 1], False
    t = str(rec.get("target", "")).strip()
    return ([int(t)], False) if t.isdigit() and int(t) < n else None


def simulated_sample_logs(real_file, out_dir, n_models: int = 24, *, held_out: int = 0,
                          held_out_dir=None, seed: int = 0) -> list[Path]:
    """Write the sample logs of ``n_models`` simulated models (module docstring) under
    ``out_dir/simulated__model-XX/`` from the real log ``real_file``, and of ``held_out`` more,
    with abilities among theirs, under ``held_out_dir`` (default ``<out_dir>_held_out``; new
    models to check a bank against); returns the files. Items whose true options the record does not
    tell are left out; ``mc2`` is logged where the doc's labels mark true options that come
    first (TruthfulQA), ``acc`` (the first true option has the largest log-likelihood) always."""
    real = Path(real_file)
    if not real.exists():
        raise ResponseDataError(f"{str(real)!r} does not exist; give a real samples_*.jsonl log")
    recs = [r for r in _raw(real) if "arguments" in r]
    keep = [(r, _n_requests(r)) for r in recs]
    keep = [(r, n, _true_options(r, n)) for r, n in keep if n >= 2]
    keep = [(r, n, k) for r, n, k in keep if k is not None]
    if not keep:
        raise ResponseDataError(f"{real.name}: no multiple-choice record whose true options "
                                "the log tells (mc1_targets / mc2_targets labels, an option1 / "
                                "option2 answer or a target index)")
    rng = np.random.default_rng(seed)
    a = rng.lognormal(0.0, 0.3, len(keep))
    b = rng.normal(0.0, 1.0, len(keep))
    name = real.name.removesuffix(".gz")
    files = []
    total = int(n_models) + int(held_out)
    out_of = set(np.linspace(1, total - 2, int(held_out)).round().astype(int)) if held_out else set()
    for m in range(total):
        theta = -2.0 + 4.0 * m / max(1, total - 1)
        root = (held_out_dir or f"{out_dir}_held_out") if m in out_of else out_dir
        folder = Path(root) / f"simulated__model-{m:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        lines = []
        for (rec, n, (k, mc2)), ai, bi in zip(keep, a, b):
            p = 1.0 / (1.0 + np.exp(-ai * (theta - bi)))
            score = float(np.clip(rng.beta(_CONCENTRATION * p, _CONCENTRATION * (1 - p)),
                                  1e-4, 1 - 1e-4))
            ll = -rng.uniform(5.0, 40.0, size=n)
            false = np.ones(n, bool)
            false[k] = False
            w = rng.dirichlet(np.ones(len(k))) * score / (1.0 - score) * np.exp(ll[false]).sum()
            ll[k] = np.log(w)
            score = float(np.exp(ll[k]).sum() / np.exp(ll).sum())     # exactly as mc2 computes
            acc = float(int(np.argmax(ll)) == k[0])
            repr_log = isinstance(rec["arguments"], str)
            resps = [[[repr(float(v)) if repr_log else float(v),
                       "False" if repr_log else False]] for v in ll]
            new = dict(rec)
            new["resps"] = str(resps) if repr_log else resps
            new["filtered_resps"] = str([r[0] for r in resps]) if repr_log else [
                r[0] for r in resps]
            new["acc"] = str(acc) if repr_log else acc
            if mc2:
                new["mc2"] = repr(score) if repr_log else score
            lines.append(json.dumps(new))
        f = folder / name
        f.write_text("\n".join(lines) + "\n", encoding="utf-8")
        files.append(f)
    return files
