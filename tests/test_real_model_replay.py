"""benchmarks/real_model_replay.py: SmolLM2's recorded answers replayed through atlas evaluate
ask only items it answered, as the model's name, and the rows of real_model.md's table "With
each model's own random stream" are what the script prints."""
from __future__ import annotations

from pathlib import Path

import pytest

from conftest import load_benchmark

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def replayed(tmp_path_factory):
    rp = load_benchmark("real_model_replay")
    tmp = tmp_path_factory.mktemp("replay")
    return rp, {b: rp.replay(b, 0, tmp) for b in rp.BENCHES}


def test_replay_asks_the_recorded_answers_as_the_model(replayed):
    _, runs = replayed
    for bench, r in runs.items():
        run, full = r["run"], r["full"]
        assert run["model"] == r["published"]["model"], bench   # the hf: run's stream
        assert run["status"] == "done" and run["n_skipped"] == 0, bench
        assert [full["scores"][i] for i in run["items"]] == run["scores"], bench


def test_page_rows_are_the_scripts_output(replayed):
    rp, runs = replayed
    page = (ROOT / "benchmarks" / "results" / "real_model.md").read_text()
    section = page.split("**With each model's own random stream")[1]
    for bench, r in runs.items():
        cells = rp.line(r).split(" | ")
        # the page keeps bench, items (stop), theta, predicted score, model-based accuracy and
        # the items shared; the full-bank columns are the table above it
        row = " | ".join(cells[:5] + cells[7:])
        assert row in section, f"{bench}: {row!r} not on the page"
