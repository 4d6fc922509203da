"""Two CLI commands as whole processes, beside their peers in one run (issue 44, CPU part)::

    .venv/bin/python benchmarks/bench_cli_speed.py                         # 5 rounds, prints
    mkdir /tmp/before && git archive 05364a5 src | tar -x -C /tmp/before  # the code compared, then:
    .venv/bin/python benchmarks/bench_cli_speed.py --before-src /tmp/before/src \\
        --write /tmp/cli_speed_table.md   # the table of benchmarks/results/cli_speed.md

1. The README's adaptive test of the 386 HellaSwag test models on the paper's bank
   (``atlas simulate --bank hellaswag_3pl_bank.csv --thetas hellaswag_test_theta_wle.csv
   --se-stop 0.1 --seed 1 -o DIR`` as the README has it: no -q, output piped), goal: under
   1 s. With ``--before-src`` the same command from another checkout's ``src`` runs beside it,
   and the two runs' output files must agree (every number to 1e-12, every other cell exactly;
   the ``seconds`` column is a timing).
2. ``atlas calibrate tiny_arc.csv.gz --mirt-defaults -o bank.csv`` (3747 x 99, 3PL, 61 nodes,
   no priors) beside R mirt 1.45 on the same matrix with the same settings
   (``Rscript ../shared/tools/mirt_fit.R tiny_arc.csv.gz 3PL PREFIX``: 3PL, EM, 61 nodes, its
   defaults), goal: at least 3x faster.

Every command is its own process, started from this script, process start and library imports
included; one round runs each command once, in turn, so all see the same load; the figures are
medians over ``--rounds`` rounds (default 5) after one warm-up round that is not counted (it
also writes the compiled bytecode: the commands run with ``PYTHONPYCACHEPREFIX`` in a scratch
folder and bytecode writing on, as an installed package runs). Printed per command: median wall
seconds, median CPU seconds (user + system of the process and its children, which the other
work on a shared machine inflates less than the wall time), and the load average (1 min)
before each round.
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
BANKS = SHARED / "data" / "atlas_banks"
TINY_ARC = SHARED / "data" / "openllm" / "tiny_arc.csv.gz"
MIRT_SCRIPT = SHARED / "tools" / "mirt_fit.R"
OUTPUTS = ("person_scores.csv", "selected_items.csv", "item_exposure.csv", "item_positions.csv")
TIMING_COLUMNS = ("seconds",)


def simulate_args(out: Path) -> list[str]:
    return ["simulate", "--bank", str(BANKS / "hellaswag_3pl_bank.csv"), "--thetas",
            str(BANKS / "hellaswag_test_theta_wle.csv"), "--se-stop", "0.1", "--seed", "1",
            "-o", str(out)]


def calibrate_args(out: Path) -> list[str]:
    return ["calibrate", str(TINY_ARC), "--mirt-defaults", "-o", str(out)]


def run(cmd: list[str], env: dict) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one process; an error stops the benchmark."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()[-400:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def atlas_env(src: Path, pycache: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(src), PYTHONPYCACHEPREFIX=str(pycache))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def same_outputs(a: Path, b: Path, tol: float = 1e-12) -> float:
    """Largest absolute difference of the numbers in two simulate runs' files (AssertionError
    where a file, a column or a non-numeric cell differs)."""
    import numpy as np
    import pandas as pd

    worst = 0.0
    for name in OUTPUTS:
        x, y = pd.read_csv(a / name), pd.read_csv(b / name)
        assert list(x.columns) == list(y.columns) and x.shape == y.shape, name
        for col in (c for c in x.columns if c not in TIMING_COLUMNS):
            if x[col].dtype.kind == "f" or y[col].dtype.kind == "f":
                u, v = x[col].to_numpy(float), y[col].to_numpy(float)
                assert np.array_equal(np.isnan(u), np.isnan(v)), (name, col)
                d = float(np.nanmax(np.abs(u - v), initial=0.0))
                assert d <= tol, (name, col, d)
                worst = max(worst, d)
            else:
                u, v = x[col].fillna("").astype(str), y[col].fillna("").astype(str)
                assert (u == v).all(), (name, col)   # missing cells equal as empty
    return worst


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--before-src", type=Path, help="another checkout's src/ run beside ours")
    ap.add_argument("--no-mirt", action="store_true", help="skip calibrate and mirt")
    ap.add_argument("--write", type=Path, help="also write the table (markdown) to this file")
    args = ap.parse_args(argv)

    py = sys.executable
    tmp = Path(tempfile.mkdtemp(prefix="bench_cli_speed_"))
    commands = {  # name -> (argv, env)
        "simulate": ([py, "-m", "atlascat"] + simulate_args(tmp / "sim_now"),
                     atlas_env(ROOT / "src", tmp / "pyc_now")),
    }
    if args.before_src is not None:
        commands["simulate, before"] = ([py, "-m", "atlascat"] + simulate_args(tmp / "sim_before"),
                                        atlas_env(args.before_src.resolve(), tmp / "pyc_before"))
    have_r = shutil.which("Rscript") is not None and MIRT_SCRIPT.exists()
    if not args.no_mirt:
        commands["calibrate"] = ([py, "-m", "atlascat"] + calibrate_args(tmp / "bank.csv"),
                                 atlas_env(ROOT / "src", tmp / "pyc_now"))
        if have_r:
            commands["mirt"] = (["Rscript", str(MIRT_SCRIPT), str(TINY_ARC), "3PL",
                                 str(tmp / "mirt_arc")], dict(os.environ))
    times = {k: [] for k in commands}
    loads = []
    for r in range(args.rounds + 1):
        load = os.getloadavg()[0]
        for name, (cmd, env) in commands.items():
            wall, cpu = run(cmd, env)
            if r:  # round 0 warms up (bytecode, file cache)
                times[name].append((wall, cpu))
        if r:
            loads.append(load)
        print(f"round {r}{' (warm-up)' if not r else ''}: load {load:.1f}  "
              + "  ".join(f"{n} {times[n][-1][0]:.2f}s" if r else n for n in commands),
              file=sys.stderr)
    diff = None
    if args.before_src is not None:
        diff = same_outputs(tmp / "sim_before", tmp / "sim_now")

    med = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v))
           for k, v in times.items()}
    lines = [f"| command | wall s, median of {args.rounds} (all) | CPU s, median |",
             "|---|---|---|"]
    labels = {"simulate": "`atlas simulate` (386 HellaSwag models, --se-stop 0.1)",
              "simulate, before": "the same, code before (`--before-src`)",
              "calibrate": "`atlas calibrate tiny_arc --mirt-defaults`",
              "mirt": "R mirt 1.45.1, `mirt_fit.R tiny_arc 3PL`"}
    for k, v in times.items():
        lines.append(f"| {labels[k]} | **{med[k][0]:.2f}** ("
                     + ", ".join(f"{w:.2f}" for w, _ in v) + f") | {med[k][1]:.2f} |")
    facts = [f"load average (1 min) before each round: {', '.join(f'{x:.1f}' for x in loads)}"
             f" on {os.cpu_count()} cores"]
    if "mirt" in med:
        facts.append(f"calibrate vs mirt: {med['mirt'][0] / med['calibrate'][0]:.1f}x faster "
                     f"(wall), {med['mirt'][1] / med['calibrate'][1]:.1f}x (CPU)")
    if "simulate, before" in med:
        facts.append(f"simulate, before / now: {med['simulate, before'][0] / med['simulate'][0]:.2f}x"
                     f" (wall), {med['simulate, before'][1] / med['simulate'][1]:.2f}x (CPU); "
                     f"outputs equal to {diff:.1e}")
    table = "\n".join(lines + [""] + [f"- {f}" for f in facts])
    print(table)
    if args.write is not None:
        args.write.write_text(table + "\n", encoding="utf-8")
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
