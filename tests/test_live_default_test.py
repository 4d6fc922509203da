"""One default test for a bank, from Python and the command line: ``LiveRun.start(bank,
subjects, seed=S)`` with no ``config`` and ``atlas evaluate --bank BANK --subject ... --seed
S`` with no test option ask the same items and give the same theta, SE and prediction
(:func:`atlascat.live.designs.run_config`, used by both). The library's default was the
paper's CATConfig() alone (30 items at least, no score-link stops), the command's ARC test
45 items at least with the link's floor / top stops: the same model got two results."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from atlascat.catalogue import BankRef
from atlascat.cli import main
from atlascat.live.service import LiveRun
from atlascat.live.subjects import SubjectSpec

SEED = 3


@pytest.fixture(scope="module")
def banks(tmp_path_factory):
    """A bank folder built from a small 2PL matrix, and a graded bank file."""
    from atlascat.irt.polybank import PolyBank

    root = tmp_path_factory.mktemp("default_test")
    rng = np.random.default_rng(5)
    a, b = rng.lognormal(0.2, 0.3, 40), rng.normal(0, 1, 40)
    theta = rng.normal(0, 1, 60)
    y = (rng.random((60, 40)) < 1 / (1 + np.exp(-a * (theta[:, None] - b)))).astype(int)
    pd.DataFrame(y, index=[f"s{i}" for i in range(60)], columns=[f"q{j}" for j in range(40)]) \
        .rename_axis("model").to_csv(root / "m.csv")
    assert main(["build-bank", str(root / "m.csv"), "--name", "m", "--budget", "10", "-q",
                 "-o", str(root / "folder")]) == 0
    ids = [f"p{j}" for j in range(15)]
    ga = rng.lognormal(0.2, 0.3, 15)
    d = -np.sort(rng.normal(0, 1.2, (15, 4)), axis=1) * ga[:, None]
    PolyBank(ids, np.column_stack([ga, d]), "graded", [np.arange(1.0, 6.0)] * 15) \
        .write(root / "graded.csv")
    return root


def _python(tmp_path, bank, subject, kinds=None, **kw):
    ref = BankRef.from_option(bank, **({"kinds": kinds} if kinds else {}))
    live = LiveRun.start(tmp_path / "py.sqlite", ref,
                         [SubjectSpec.parse(subject, "m0").build(ref, seed=SEED)], seed=SEED,
                         **kw)
    live.run(raise_errors=True)
    return live


def _cli(tmp_path, option, bank, subject, *extra):
    out = tmp_path / "cli"
    assert main(["evaluate", option, bank, "--subject", subject, "--llm", "m0",
                 "--seed", str(SEED), *extra, "-q", "-o", str(out)]) == 0
    from atlascat.live.store import RunStore

    store = RunStore(out / "runs.sqlite")
    live = LiveRun.resume(store, list(store.list_runs()["run_id"]))
    live.run(raise_errors=True)   # finished: returns at once
    return live


def _same(py, cli, keys=("theta", "se", "n_items", "stop_reason", "prediction")):
    (a,), (b,) = py.results(), cli.results()
    for key in keys:
        assert a.get(key) == b.get(key), (key, a.get(key), b.get(key))
    steps = [live.store.steps(live.jobs[0].run_id)[["item_id", "score"]] for live in (py, cli)]
    assert steps[0]["item_id"].tolist() == steps[1]["item_id"].tolist()
    assert steps[0]["score"].tolist() == steps[1]["score"].tolist()
    assert py.store.get_run(py.jobs[0].run_id)["config"] == \
        cli.store.get_run(cli.jobs[0].run_id)["config"]
    py.close()
    cli.close()                                   # their stores, read to the end
    return a


def test_a_bundled_bank_asks_the_commands_test_from_python(tmp_path):
    """ARC: the bank's shortest test (45) and its link's stops, from both (Python asked 30)."""
    row = _same(_python(tmp_path, "arc", "simulate:0.4"),
                _cli(tmp_path, "--bank", "arc", "simulate:0.4"))
    assert row["n_items"] >= 45 and row["prediction"] is not None


def test_a_bank_folder_its_predictor_and_its_adaptive_test(tmp_path, banks):
    folder = str(banks / "folder")
    py = _python(tmp_path / "p", folder, "simulate:0.2")
    assert py.jobs[0].kind == "predictor"
    _same(py, _cli(tmp_path / "p", "--bank", folder, "simulate:0.2"))
    row = _same(_python(tmp_path / "a", folder, "simulate:0.2", design="adaptive"),
                _cli(tmp_path / "a", "--bank", folder, "simulate:0.2", "--design", "adaptive"))
    assert row["prediction"] is not None


def test_an_ordinal_bank(tmp_path, banks):
    _same(_python(tmp_path, str(banks / "graded.csv"), "simulate:-0.3"),
          _cli(tmp_path, "--bank", str(banks / "graded.csv"), "simulate:-0.3"))


def test_a_suite_takes_the_runs_seed(tmp_path):
    """A suite with no config: SuiteConfig with the run's seed (it was seed 0 whatever was
    given), as --seed gives it."""
    py = _python(tmp_path, "openllm-v1", "simulate:0.3", kinds=("suite",))
    cli = _cli(tmp_path, "--suite", "openllm-v1", "simulate:0.3")
    (a,), (b,) = py.results(), cli.results()
    assert py.store.get_run(py.jobs[0].run_id)["seed"] == SEED
    assert a["n_items"] > 0 and a["average"] is not None
    for key in ("average", "se_points", "benchmarks", "n_items", "stop_reason"):
        assert a.get(key) == b.get(key), (key, a.get(key), b.get(key))
    steps = [live.store.steps(live.jobs[0].run_id)["item_id"].tolist() for live in (py, cli)]
    py.close()
    cli.close()
    assert steps[0] == steps[1]
