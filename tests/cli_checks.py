"""Shared checks of `atlas` command lines, run in-process or as a process of their own (tests
import it as a module)."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from atlascat.cli import main
from conftest import HANG_S

ROOT = Path(__file__).resolve().parents[1]


def run_cli(argv) -> int:
    """``atlas ARGV`` in-process (every argument as text); its exit code."""
    return main([str(a) for a in argv])


def one_line_error(capsys, argv, *needles) -> str:
    """Run ``argv``; assert exit 2 and exactly one ``error:`` line on stderr holding every
    needle; return that line."""
    rc = run_cli(argv)
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("error: "), (rc, err)
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


def atlas_process(*args, wait=True, env=None):
    """``python -m atlascat ARGS`` from the repository root in a process of its own, 200 columns
    wide (``env`` adds to the environment): ``(exit code, stdout, stderr)``, or the running
    ``Popen`` with ``wait=False``."""
    env = {**os.environ, "COLUMNS": "200", **(env or {})}
    proc = subprocess.Popen([sys.executable, "-m", "atlascat", *map(str, args)], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if not wait:
        return proc
    out, err = proc.communicate(timeout=HANG_S)
    return proc.returncode, out, err


def wait_for(cond, what: str, limit: float = 600.0) -> None:
    """Poll ``cond()`` until true; fail naming ``what`` after ``limit`` seconds."""
    deadline = time.monotonic() + limit
    while not cond():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.02)


def two_factor_answers(n_subjects: int, n_items: int, seed: int):
    """(bank, answers): a two-factor 2PL with simple structure (the first half of the items on
    factor 1, the rest on factor 2, slopes U(1.2, 2)) and its simulated 0/1 answers as a frame
    (subjects s0.. x items i0..), for the multidimensional commands' tests."""
    import numpy as np
    import pandas as pd

    from atlascat.irt.multidim import MultidimBank, simulate_responses

    rng = np.random.default_rng(seed)
    half = n_items // 2
    A = np.zeros((n_items, 2))
    A[:half, 0], A[half:, 1] = rng.uniform(1.2, 2, half), rng.uniform(1.2, 2, n_items - half)
    bank = MultidimBank([f"i{j}" for j in range(n_items)], A, np.linspace(-1, 1, n_items))
    y = simulate_responses(bank, rng.standard_normal((n_subjects, 2)), rng).astype(int)
    return bank, pd.DataFrame(y, index=[f"s{i}" for i in range(n_subjects)],
                              columns=bank.item_ids).rename_axis("subject")
