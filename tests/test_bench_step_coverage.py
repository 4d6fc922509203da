"""benchmarks/bench_step_coverage.py: the predictor's interval after each item on held-out
models; one task, split and seed: the 50-item interval is replay's, a live session shows the
same trajectory (both checked inside run_one), and the page's tables are written between their
markers."""
import pandas as pd
import pytest
from conftest import load_benchmark


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("bench_step_coverage")


@pytest.mark.slow
def test_one_run_and_the_page(bench, shared_data, tmp_path, monkeypatch):
    monkeypatch.setattr(bench.lb, "CACHE", tmp_path / "cache")
    res = pd.DataFrame(bench.run_one("continuous", "qmsum", "interpolation", 0))
    assert sorted(res.k.unique()) == list(bench.STEPS) and (res.n_targets == 10).all()
    by = res.set_index(["k", "interval"])
    assert by.loc[(50, "plain")].equals(by.loc[(50, "shown")])       # the budget: unchanged
    assert by.loc[(1, "shown"), "width"] == 100.0                      # one answer: 0-100
    assert by.loc[(2, "shown"), "width"] > by.loc[(2, "plain"), "width"]
    assert (by.loc[(2, "shown"), "mae"] == by.loc[(2, "plain"), "mae"])
    text = bench.tables(res)
    assert "| continuous | interpolation | 2 |" in text
    page = tmp_path / "page.md"
    page.write_text("# t\n\n<!-- tables -->\nold\n<!-- /tables -->\n\nprose\n")
    monkeypatch.setattr(bench, "MD", page)
    bench.write_md(text)
    body = page.read_text()
    assert "old" not in body and text in body and body.endswith("prose\n")
