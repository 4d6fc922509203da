"""SmolLM2's adaptive tests again without the model: its recorded answers replayed.

``bench_real_model.py --full-pass BENCH`` stored the model's answer to every item of five shipped
banks (``benchmarks/results/real_model/full_BENCH.json``; the model answers log-likelihood items
deterministically, and the adaptive runs' answers are the same ones). This replays them as one
model named as the ``hf:`` subject was (its run's ``model``, so it draws from the same random
stream, ``subject_generator(seed, name)``) through ``atlas evaluate --bank BENCH --subject
replay:ROW.csv#MODEL --seed 0``, the command ``--adaptive`` runs with ``hf:``: the items, theta,
SE and predicted score a run of the model with this code would give, without torch or the
model file. GSM8K is left out (its full pass was not run). With the code of the published runs
it asks their items exactly (``adaptive_BENCH.json``).

    OPENBLAS_NUM_THREADS=1 nice python benchmarks/real_model_replay.py [--seed 0] [BENCH ...]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "real_model"
BENCHES = ("arc", "hellaswag", "mmlu", "truthfulqa", "winogrande")


def replay(bench: str, seed: int, tmp: Path) -> dict:
    """The replayed run's ``--json`` record, with the published run and full pass beside it."""
    full = json.loads((RESULTS / f"full_{bench}.json").read_text())
    published = json.loads((RESULTS / f"adaptive_{bench}.json").read_text())
    model, scores = published["model"], full["scores"]
    row = tmp / f"{bench}.csv"
    row.write_text("model," + ",".join(scores) + "\n"
                   + model + "," + ",".join(str(int(s)) for s in scores.values()) + "\n")
    cmd = [sys.executable, "-m", "atlascat", "evaluate", "--bank", bench, "--subject",
           f"replay:{row}#{model}", "--seed", str(seed), "-o", str(tmp / bench), "--json",
           "--quiet"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"atlas evaluate failed ({proc.returncode}): {proc.stderr[-2000:]}")
    run = json.loads(proc.stdout)[0]
    return {"bench": bench, "run": run, "full": full, "published": published}


def line(r: dict) -> str:
    run, full, pub = r["run"], r["full"], r["published"]
    p = run["prediction"]
    shared = len(set(run["items"]) & set(pub["items"]))
    return (f"| {r['bench']} | {run['n_items']} ({run['stop_reason']}) | {run['theta']:.2f} +- "
            f"{run['se']:.2f} | {100 * p['score']:.1f} ({100 * p['lo']:.1f}-{100 * p['hi']:.1f}) "
            f"| {100 * run['model_based_score']:.1f} | {100 * full['accuracy']:.1f} | "
            f"{full['theta_all_items']:.2f} +- {full['se']:.2f} | {shared} of "
            f"{len(pub['items'])} |")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("benches", nargs="*", default=list(BENCHES))
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    print("| bench | items asked (stop) | theta +- SE | predicted leaderboard score | "
          "model-based accuracy on the bank | full-bank accuracy | theta from the full bank | "
          "items shared with the published run |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for bench in a.benches:
            print(line(replay(bench, a.seed, Path(tmp))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
