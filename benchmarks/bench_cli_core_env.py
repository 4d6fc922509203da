"""``atlas calibrate`` in a core-only install vs the dev install (run as a script).

A plain ``pip install atlascat`` has the core dependencies only (pyproject ``dependencies``),
without ``array_api_compat``; the array-namespace helpers (:mod:`atlascat.irt.arrays`) must not
cost more there. This times the CLI end to end, process start included::

    python3 -m venv /tmp/corevenv && /tmp/corevenv/bin/pip install -q .   # core deps only
    .venv/bin/python benchmarks/bench_cli_core_env.py /tmp/corevenv/bin/atlas .venv/bin/atlas \\
        --dev-pythonpath src

Each argument is an ``atlas`` executable or a Python interpreter (then ``python -m atlascat``).
The two commands run alternately (``--repeat`` times each, so both see the same machine load) on
``atlas calibrate DATA --model 3pl --mirt-defaults -o TMP``; printed: the median wall seconds
of each (and of the fit's own seconds, which the CLI prints), and core / dev (acceptance: at
most 1.2). ``--baseline PATH`` adds a third command (e.g. a core-only install of an older
checkout) to the rotation.
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

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "openllm" / "tiny_arc.csv.gz"


def command(path: str) -> list[str]:
    """``[atlas]`` or ``[python, -m, atlascat]`` for an executable path."""
    return [path, "-m", "atlascat"] if Path(path).name.startswith("python") else [path]


def run_once(cmd: list[str], data: str, out: str, env: dict) -> tuple[float, float]:
    """(wall seconds of the process, the fit's own seconds as the CLI reports them)."""
    args = cmd + ["calibrate", data, "--model", "3pl", "--mirt-defaults", "-o", out]
    t0 = time.perf_counter()
    proc = subprocess.run(args, env=env, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"{' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    fit = re.search(r"converged, ([0-9.]+) s", proc.stdout + proc.stderr)
    return dt, float(fit.group(1)) if fit else float("nan")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("core", help="atlas (or python) of the core-only install")
    ap.add_argument("dev", help="atlas (or python) of the dev install")
    ap.add_argument("--dev-pythonpath", default=None,
                    help="PYTHONPATH for the dev command (e.g. src, to time a checkout)")
    ap.add_argument("--baseline", default=None, help="a third atlas/python to time alongside")
    ap.add_argument("--data", default=str(DATA))
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)

    base_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    base_env.setdefault("OPENBLAS_NUM_THREADS", "1")
    dev_env = dict(base_env)
    if args.dev_pythonpath:
        dev_env["PYTHONPATH"] = str(Path(args.dev_pythonpath).resolve())
    runs = [("core", command(args.core), base_env), ("dev", command(args.dev), dev_env)]
    if args.baseline:
        runs.append(("baseline", command(args.baseline), base_env))
    times = {label: [] for label, _, _ in runs}
    fits = {label: [] for label, _, _ in runs}
    with tempfile.TemporaryDirectory() as tmp:
        for label, cmd, env in runs:   # warm-up (file cache, .pyc), not timed
            run_once(cmd, args.data, str(Path(tmp) / label), env)
        for _ in range(args.repeat):
            for label, cmd, env in runs:
                wall, fit = run_once(cmd, args.data, str(Path(tmp) / label), env)
                times[label].append(wall)
                fits[label].append(fit)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"atlas calibrate {Path(args.data).name} --model 3pl --mirt-defaults "
          f"(median of {args.repeat}, alternating)")
    for label, _, _ in runs:
        fit = statistics.median(fits[label])
        print(f"  {label:9s} {med[label]:7.3f} s wall (fit {fit:.2f} s)   runs: "
              + " ".join(f"{t:.3f}" for t in times[label]))
    ratio = med["core"] / med["dev"]
    print(f"  core / dev = {ratio:.3f}  ({'ok' if ratio <= 1.2 else 'ABOVE'} the 1.2 bound)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
