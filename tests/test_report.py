"""The HTML report is one self-contained file: no scripts, no external resources, every image
an embedded PNG, the three tables present, and well-formed markup."""
from __future__ import annotations

import base64
from html.parser import HTMLParser

import numpy as np
import pytest

from atlascat.studies.protocol import BenchmarkConfig, run_benchmark
from atlascat.studies.report import build_report, write_report
from atlascat.irt.bank import ItemBank
from atlascat.responses import ResponseMatrix

VOID = {"meta", "img", "br", "hr", "link", "input", "source", "col", "area", "base", "wbr"}


class _Collector(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.attrs, self.stack, self.errors = [], [], [], []
        self.text = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs.append((tag, dict(attrs)))
        if tag not in VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"unexpected </{tag}> with open {self.stack[-3:]}")
        else:
            self.stack.pop()

    def handle_data(self, data):
        self.text.append(data)


@pytest.fixture(scope="module")
def runs():
    rng = np.random.default_rng(21)
    n, j = 400, 70
    bank = ItemBank([f"i{k}" for k in range(j)], rng.lognormal(0.3, 0.3, j), rng.normal(0, 1, j),
                    rng.uniform(0, 0.2, j))
    y = (rng.random((n, j)) < bank.probability(rng.normal(size=n))).astype(float)
    rm = ResponseMatrix(y, [f"m{k}" for k in range(n)], bank.item_ids)
    cfg = BenchmarkConfig(seed=2, taus=(0.3, 0.4), random_k=25, random_replicates=2, anchor_k=15,
                          info_k=15, optimal_k=15, optimal_criteria=("A",), model_fit=False)
    first = run_benchmark(rm, cfg, name="first")
    second = run_benchmark(rm, BenchmarkConfig(**{**cfg.__dict__, "seed": 3}), name="second")
    return first, second


def _parse(text):
    p = _Collector()
    p.feed(text)
    p.close()
    return p


def test_single_run_report_is_self_contained(runs, tmp_path):
    first, _ = runs
    first.write(tmp_path / "run")
    path = write_report(tmp_path / "run", tmp_path / "report.html")
    text = path.read_text(encoding="utf-8")
    p = _parse(text)
    assert not p.errors and not p.stack, (p.errors, p.stack)
    assert p.tags[0] == "html" and "script" not in p.tags and "link" not in p.tags
    assert "iframe" not in p.tags and "url(" not in text
    for tag, attrs in p.attrs:
        for key in ("src", "href"):
            if key in attrs:
                assert attrs[key].startswith(("data:image/png;base64,", "#")), (tag, key)
    images = [a["src"] for t, a in p.attrs if t == "img"]
    assert len(images) >= 6  # error-vs-items, identity, theta/accuracy, TIF, exposure, trajectory
    for src in images:
        png = base64.b64decode(src.split(",", 1)[1], validate=True)
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 2000
    assert all(a.get("alt") for t, a in p.attrs if t == "img")
    assert p.tags.count("table") == 3
    body = " ".join(p.text)
    for needle in ("Table 2", "Table 3", "Table 6", "θ MAE ± SE", "Coverage 95%", "Overlap",
                   "ATLAS tau=0.3", "Random-25", "Anchor-15", "A-optimal-15"):
        assert needle in body, needle


@pytest.mark.slow
def test_multi_run_report_has_overview(runs):
    text = build_report(list(runs), title="Two runs")
    p = _parse(text)
    assert not p.errors
    assert p.tags.count("table") == 1 + 2 * 3
    assert "Overview" in " ".join(p.text)
    assert {a.get("href") for t, a in p.attrs if t == "a"} == {"#run0", "#run1"}
    assert {a.get("id") for t, a in p.attrs if t == "h2" and a.get("id")} == {"run0", "run1"}


def test_settings_name_the_forms_the_tables_hold():
    """The report's "fixed forms" line lists the methods of the tables, with the size actually
    used (a size above the bank is capped at it) and no form that was switched off."""
    rng = np.random.default_rng(4)
    n, j = 200, 30
    bank = ItemBank([f"i{k}" for k in range(j)], rng.lognormal(0.3, 0.3, j), rng.normal(0, 1, j))
    y = (rng.random((n, j)) < bank.probability(rng.normal(size=n))).astype(float)
    rm = ResponseMatrix(y, [f"m{k}" for k in range(n)], bank.item_ids)
    cfg = BenchmarkConfig(seed=1, taus=(0.4,), random_k=500, random_replicates=2, anchor_k=0,
                          info_k=10, optimal_k=0, model_fit=False, se_calibration=False,
                          filter=False, model="2pl")
    run = run_benchmark(rm, cfg, name="capped")
    text = " ".join(_parse(build_report([run])).text)
    assert "Random-30 x 2 replicates, Info-10" in text, text[:2000]
    assert "Anchor-0" not in text and "optimal-0" not in text and "Random-500" not in text
    assert "leaderboard" not in text   # a simulated matrix: the lead says "recorded answers"


def test_error_figure_labels_neither_overlap_nor_leave_the_axes():
    """Methods of one length with nearly equal errors (ARC's Info-100 0.131, Anchor-100 0.129)
    get labels that do not print over each other, and the longest test's label stays inside."""
    import pandas as pd

    from atlascat.studies.report import _fig_error_vs_items

    summary = pd.DataFrame({
        "method": ["Random-100", "Anchor-100", "Info-100", "D-optimal-100", "ATLAS tau=0.1",
                   "ATLAS tau=0.3"],
        "items_mean": [100.0, 100.0, 100.0, 100.0, 169.1, 31.0],
        "theta_mae": [0.120, 0.129, 0.131, 0.098, 0.030, 0.133],
        "theta_mae_se": [0.004, 0.008, 0.012, 0.007, 0.002, 0.010]})
    fig = _fig_error_vs_items(summary)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    ax = fig.axes[0]
    boxes = {t.get_text(): t.get_window_extent(renderer) for t in ax.texts}
    assert set(boxes) == set(summary.method)
    names = list(boxes)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            assert not boxes[a].overlaps(boxes[b]), (a, b)
    frame = ax.get_window_extent(renderer)
    assert all(frame.x0 <= box.x0 and box.x1 <= frame.x1 for box in boxes.values())
