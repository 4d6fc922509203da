"""The README's calibrate / score / simulate commands on a busy machine, BLAS threads unlimited
(as before ``atlascat._blas``) and limited, side by side (run as a script; prints a table)::

    .venv/bin/python benchmarks/bench_busy.py                 # 2 busy processes beside, 3 repeats
    .venv/bin/python benchmarks/bench_busy.py --load demo     # `make demo` beside instead
    .venv/bin/python benchmarks/bench_busy.py --load none     # a quiet-machine comparison
    git archive df37acf src | tar -x -C /tmp/landed           # the code as landed, then:
    .venv/bin/python benchmarks/bench_busy.py --before-src /tmp/landed/src

The commands are the README's Quick start lines on ``../shared/data/openllm/dense_arc.csv.gz``
(calibrate, then score and simulate with the bank it wrote). Each runs as its own
``python -m atlascat`` process, process start included, alternately "before" and "after", so
both see the same load. "After" is this checkout as it is (one BLAS thread for small products,
:mod:`atlascat._blas`); "before" is the same code with ``ATLAS_BLAS_THREADS=off`` (the thread
count OpenBLAS chose, one per core), or with ``--before-src DIR`` another checkout's ``src``
(e.g. the code as landed before this work) on ``PYTHONPATH``, threads left to OpenBLAS. The load is ``--load spin``: two processes
that keep a core busy each (``while True: pass``, niced to 0 like the commands), or ``--load
demo``: ``make demo`` restarted whenever it ends. Printed: the median wall seconds of each
command in each mode over ``--repeat`` runs, and before / after; and whether the outputs of the
two modes agree (banks and scores to 1e-8; every printed line with its timing cut).
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "openllm" / "dense_arc.csv.gz"


def commands(data: Path, out: Path) -> dict[str, list[str]]:
    """The README's Quick start lines, writing under ``out``."""
    bank = str(out / "arc_bank.csv")
    return {
        "calibrate": ["calibrate", str(data), "-o", bank, "--summary", str(out / "arc.json")],
        "score": ["score", str(data), "--bank", bank, "--method", "wle",
                  "-o", str(out / "scores.csv")],
        "simulate": ["simulate", str(data), "--bank", "arc", "--se-stop", "0.2",
                     "-o", str(out / "sim")],
    }


def start_load(kind: str, n: int) -> list[subprocess.Popen]:
    if kind == "none":
        return []
    if kind == "spin":
        return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    # make demo, restarted by a shell loop when it ends
    return [subprocess.Popen(["bash", "-c", "while true; do make -s demo >/dev/null 2>&1; done"],
                             cwd=ROOT, start_new_session=True)]


def stop_load(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.args and p.args[0] == "bash":
            os.killpg(p.pid, 15)
        else:
            p.terminate()
        p.wait()


def run(mode: str, argv: list[str], before_src: Path | None = None) -> tuple[float, str]:
    env = dict(os.environ)
    for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "PYTHONPATH"):
        env.pop(k, None)  # as a user's shell: no thread setting
    env.pop("ATLAS_BLAS_THREADS", None)
    if mode == "before" and before_src is not None:
        env["PYTHONPATH"] = str(before_src)
    elif mode == "before":
        env["ATLAS_BLAS_THREADS"] = "off"
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "atlascat", *argv], env=env,
                          capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({mode}): {done.stderr.strip()}")
    return seconds, done.stdout + done.stderr


def plain(text: str) -> list[str]:
    """Printed lines without their timings."""
    return [" ".join(re.sub(r"\d+(\.\d+)? ?(s|ms)\b", "T", ln).split())
            for ln in text.splitlines()]


def compare_outputs(dirs: dict[str, Path]) -> str:
    import numpy as np
    import pandas as pd

    worst = 0.0
    for rel in ("arc_bank.csv", "scores.csv", "sim/person_scores.csv"):
        a, b = (pd.read_csv(dirs[m] / rel).drop(columns="seconds", errors="ignore")
                for m in ("before", "after"))
        num = a.select_dtypes("number").columns
        if list(a.columns) != list(b.columns) or len(a) != len(b):
            return f"{rel}: different shape"
        diff = np.abs(a[num].to_numpy(float) - b[num].to_numpy(float))
        worst = max(worst, float(np.nanmax(np.where(np.isnan(diff), 0.0, diff))))
    return f"largest difference in banks / scores / simulated results: {worst:.1e}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--load", choices=["spin", "demo", "none"], default="spin")
    ap.add_argument("--busy", type=int, default=2, help="busy processes for --load spin")
    ap.add_argument("--before-src", type=Path, default=None,
                    help="'before' runs this src folder (another checkout) instead of "
                         "ATLAS_BLAS_THREADS=off")
    args = ap.parse_args(argv)
    with open("/proc/loadavg") as fh:
        load_before = fh.read().split()[:3]
    tmp = Path(tempfile.mkdtemp(prefix="atlas-busy-"))
    dirs = {m: tmp / m for m in ("before", "after")}
    for d in dirs.values():
        d.mkdir()
    times = {(m, c): [] for m in dirs for c in ("calibrate", "score", "simulate")}
    printed = {}
    load = start_load(args.load, args.busy)
    try:
        time.sleep(2.0 if load else 0.0)
        for rep in range(args.repeat):
            order = ("before", "after") if rep % 2 == 0 else ("after", "before")
            for name in ("calibrate", "score", "simulate"):
                for mode in order:
                    sec, out = run(mode, commands(args.data, dirs[mode])[name], args.before_src)
                    times[(mode, name)].append(sec)
                    printed[(mode, name)] = plain(out.replace(str(dirs[mode]), "OUT"))
                    print(f"  {name:9s} {mode:6s} {sec:6.2f} s", file=sys.stderr, flush=True)
    finally:
        stop_load(load)
    before = (f"before = {args.before_src}" if args.before_src
              else "before = ATLAS_BLAS_THREADS=off")
    print(f"{before}; load: {args.load} ({args.busy if args.load == 'spin' else ''} beside); "
          f"load average before the run {' '.join(load_before)}; {args.repeat} repeats, medians")
    print("| command | before (s) | after (s) | before / after |")
    print("|---|---:|---:|---:|")
    for name in ("calibrate", "score", "simulate"):
        b = statistics.median(times[("before", name)])
        a = statistics.median(times[("after", name)])
        print(f"| `atlas {name}` | {b:.1f} | {a:.1f} | {b / a:.1f}x |")
    same = all(printed[("before", n)] == printed[("after", n)] for n in ("calibrate", "score",
                                                                          "simulate"))
    print(f"printed output identical (timings cut): {same}; {compare_outputs(dirs)}")
    for n in ("calibrate", "score", "simulate"):
        for x, y in zip(printed[("before", n)], printed[("after", n)]):
            if x != y:
                print(f"  {n}: before {x!r}\n  {' ' * len(n)}  after  {y!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
