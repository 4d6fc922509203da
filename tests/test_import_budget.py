"""What a command loads: ``atlas simulate`` on a bank file and a theta file (the README's adaptive
test of the HellaSwag models) imports only what it needs, not pandas, pydantic, the plotting,
statistics or live-evaluation code; and ``atlas --help`` loads neither pandas nor SciPy. Checked on the modules
left in ``sys.modules`` of a fresh process, not on a clock."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

SRC = Path(__file__).resolve().parents[1] / "src"

_RUN = """
import json, sys
from atlascat.cli import main
code = main(sys.argv[2:])
json.dump({"code": code, "modules": sorted(sys.modules)}, open(sys.argv[1], "w"))
"""

#: prefixes of modules the simulate command on a bank file must not import: its CSV files are
#: read and written without pandas (atlascat._table), its options converted without typer's
#: pydantic layer (atlascat.cli._params); numpy.ma is what np.unique and np.median load
NOT_FOR_SIMULATE = ("pandas", "pyarrow", "pydantic", "numpy.ma", "scipy", "matplotlib",
                    "sklearn", "torch", "atlascat.live", "atlascat.bankdir",
                    "atlascat.scorelink", "atlascat.studies", "atlascat.predict",
                    "atlascat.design", "rich.progress",
                    "rich.table")  # rich's: -q, piped
#: light settings modules under those prefixes that the commands' help texts read
SETTINGS = ("atlascat.studies", "atlascat.studies.config", "atlascat.bankdir",
            "atlascat.bankdir.defaults")


def _modules(tmp_path: Path, *args: str) -> set[str]:
    out = tmp_path / "modules.json"
    env = dict(os.environ, PYTHONPATH=str(SRC))
    proc = subprocess.run([sys.executable, "-c", _RUN, str(out), *args], env=env,
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    res = json.loads(out.read_text())
    assert res["code"] == 0, proc.stderr[-2000:]
    return set(res["modules"])


def _loaded(modules: set[str], prefixes) -> list[str]:
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in prefixes))


def test_simulate_on_a_bank_file_imports_only_what_it_needs(tmp_path):
    rng = np.random.default_rng(3)
    n = 2500  # large enough for the pruned maximum-information search (>= 2000 items)
    rows = ["item_id,a,b,c"] + [f"i{j},{a:.6f},{b:.6f},{c:.6f}" for j, (a, b, c) in enumerate(
        zip(rng.lognormal(0.0, 0.3, n), rng.normal(0.0, 1.2, n), rng.uniform(0.0, 0.3, n)))]
    (tmp_path / "bank.csv").write_text("\n".join(rows) + "\n")
    thetas = ["subject_id,theta"] + [f"m{i},{t:.4f}" for i, t in enumerate(rng.normal(size=12))]
    (tmp_path / "thetas.csv").write_text("\n".join(thetas) + "\n")
    mods = _modules(tmp_path, "simulate", "--bank", "bank.csv", "--thetas", "thetas.csv",
                    "--se-stop", "0.3", "--max-items", "40", "--seed", "1", "-o", "out", "-q")
    assert (tmp_path / "out" / "person_scores.csv").exists()
    assert "atlascat.cat.simulate" in mods  # the check saw the command's own imports
    assert [m for m in _loaded(mods, NOT_FOR_SIMULATE) if m not in SETTINGS] == []
    # the command modules are imported when needed: `atlas simulate` loads its own only
    assert sorted(m for m in mods if m.startswith("atlascat.cli.cmd_")) == [
        "atlascat.cli.cmd_simulate"]


def test_calibrate_imports_no_scipy_stats_or_optimize(tmp_path):
    rng = np.random.default_rng(4)
    theta, b = rng.normal(size=(300, 1)), rng.normal(size=(1, 15))
    y = (rng.random((300, 15)) < 1.0 / (1.0 + np.exp(-(theta - b)))).astype(int)
    rows = ["subject_id," + ",".join(f"i{j}" for j in range(15))]
    rows += [f"m{i}," + ",".join(map(str, r)) for i, r in enumerate(y)]
    (tmp_path / "y.csv").write_text("\n".join(rows) + "\n")
    mods = _modules(tmp_path, "calibrate", "y.csv", "--mirt-defaults", "-o", "bank.csv", "-q")
    assert (tmp_path / "bank.csv").exists() and "atlascat.irt.calibrate" in mods
    assert _loaded(mods, ("scipy.stats", "scipy.optimize", "matplotlib", "atlascat.live")) == []


def test_help_loads_neither_pandas_nor_scipy(tmp_path):
    for args in (["--help"], ["simulate", "--help"]):
        mods = _modules(tmp_path, *args)
        assert "atlascat.cli.cmd_simulate" in mods
        assert ("atlascat.cli.cmd_score" in mods) == (args == ["--help"])  # every command listed
        assert _loaded(mods, ("pandas", "scipy", "pydantic", "matplotlib",
                              "atlascat.cat.simulate", "atlascat.irt.bank",
                              "atlascat.live.service")) == []
