"""The run pages and reports as a user reads them: every number and word is the run's own
(review of the reports, h-report)."""
from __future__ import annotations

import html
import re

import pandas as pd

from atlascat.cat.config import CATConfig
from atlascat.catalogue import load_content_bank
from atlascat.live.report import render_run_report
from atlascat.live.service import evaluate
from atlascat.live.store import RunStore
from atlascat.live.subjects.spec import subject_from_spec
from atlascat.live.toylm import ToyLM

MODEL = "Kukedlc/SuperMente-7B-v4"


def _text(page: str) -> str:
    return html.unescape(re.sub("<[^>]+>", " ", page))


def test_a_replayed_answer_is_not_said_to_be_stored_cut(tmp_path):
    """A replayed TruthfulQA step stores its outputs whole (longer than the page's note that
    replaces them): the page must not say the stored answer was cut."""
    bank = load_content_bank("truthfulqa")
    store = RunStore(tmp_path / "runs.sqlite")
    res = evaluate(bank, subject_from_spec(f"replay:truthfulqa#{MODEL}", bank=bank),
                   store=store, bank_ref="shipped:truthfulqa",
                   config=CATConfig(min_items=6, max_items=6, se_stop=None))
    steps = store.steps(res.run_id)
    long = steps["answer_chars"].astype(float) > len("recorded score, replayed (the matrix "
                                                     "holds scores, not the model's text)")
    assert long.any()                              # the case the note was wrongly added to
    assert (steps["answer_chars"] == steps["answer"].str.len()).all()   # stored whole
    page = _text(render_run_report(store, res.run_id, bank=bank))
    assert page.count("recorded score, replayed") == 6
    assert "stored cut" not in page


def test_an_answer_stored_cut_says_so(tmp_path):
    """A model's answer longer than the store keeps is shown with its length and hash."""
    bank = load_content_bank("arc")
    store = RunStore(tmp_path / "runs.sqlite", max_answer_chars=10)
    res = evaluate(bank, ToyLM(seed=1), store=store, bank_ref="shipped:arc",
                   config=CATConfig(min_items=3, max_items=3, se_stop=None))
    steps = store.steps(res.run_id)
    assert (steps["answer_chars"] > 10).all() and (steps["answer"].str.len() <= 10).all()
    page = _text(render_run_report(store, res.run_id))   # no bank: the stored text itself
    for chars in steps["answer_chars"]:
        assert f"[stored cut: {int(chars)} characters, sha256" in page


def _legend(svg: str):
    """The trajectory legend's two texts (x, text) and its line's x1, from the SVG."""
    import xml.etree.ElementTree as ET

    root = ET.fromstring(svg)
    ns = "{http://www.w3.org/2000/svg}"
    texts = [(float(t.get("x")), "".join(t.itertext())) for t in root.iter(f"{ns}text")
             if t.get("font-size") == "11" and not "".join(t.itertext())[0].isdigit()]
    line = [float(ln.get("x1")) for ln in root.iter(f"{ns}line") if ln.get("stroke-width")]
    return texts, line[0]


def test_the_trajectory_legend_does_not_print_over_itself():
    """A bank folder's predictor plots "predicted score" with its "95% interval": the band's
    label ends before the line's sample begins (11 px type: 0.6 em a character at least), as
    theta's short labels did."""
    from atlascat.live.trajectory import trajectory_svg

    for svg in (trajectory_svg([0.3, 0.4, 0.42], None, label="predicted score",
                               axis="predicted MuSR score (%)", scale=100.0,
                               band=([0.0, 0.2, 0.3], [1.0, 0.6, 0.5]), limits=(0, 100)),
                trajectory_svg([0.1, 0.3], [0.5, 0.4])):
        texts, line_x1 = _legend(svg)
        (band_x, band_label), (line_x, line_label) = texts[-2:]
        assert band_x + 0.6 * 11 * len(band_label) < line_x1 < line_x
        assert line_x + 0.6 * 11 * len(line_label) <= 760 - 15 + 1   # inside the plot


def test_a_bank_without_content_has_no_empty_question_and_key_columns(tmp_path):
    """A bank of parameters only (a folder built from a response matrix, a calibrated bank
    file): its items have no question and no key, so the items table has no such columns (they
    were 50 empty cells each); a bank with content keeps them."""
    from atlascat.catalogue import load_bank
    from atlascat.irt.bank import ItemBank

    full = load_bank("arc")
    bare = ItemBank(full.item_ids, *full.params)
    answers = tmp_path / "answers.csv"
    pd.DataFrame([[k % 2 for k in range(len(full))]], index=pd.Index(["m"], name="model"),
                 columns=full.item_ids).to_csv(answers)
    for bank, shown in ((bare, False), (full, True)):
        store = RunStore(tmp_path / f"{shown}.sqlite")
        res = evaluate(bank, subject_from_spec(f"replay:{answers}#m", bank=bank), store=store,
                       config=CATConfig(min_items=5, max_items=5, se_stop=None))
        page = render_run_report(store, res.run_id, bank=bank)
        head = re.search("<thead><tr>(.*?)</tr></thead>", page.split("<h2>Items</h2>")[1])[1]
        assert ("<th>question</th>" in head) == shown and ("<th>key</th>" in head) == shown
        body = page.split("<h2>Items</h2>")[1].split("</table>")[0]
        row = re.findall("<tr><td class='num'>1</td>.*?</tr>", body)[0]
        assert row.count("<td") == head.count("<th")    # each row as wide as its header


def test_the_item_axis_labels_stand_apart_on_a_long_run():
    """A run of 346 items (a bank folder asked whole) labelled every 10th item: 35 labels
    printed over each other, the last two ("340", "346") on top of one another. Each label now
    stands clear of the next (0.6 em a character of 11 px type), with 1 and the last item."""
    import xml.etree.ElementTree as ET

    from atlascat.live.trajectory import trajectory_svg

    for n in (1, 7, 45, 150, 346, 1000, 5000):
        svg = trajectory_svg(list(range(n)), [0.5] * n)
        root = ET.fromstring(svg)
        y_axis = {t.get("y") for t in root.iter("{http://www.w3.org/2000/svg}text")
                  if t.get("text-anchor") == "middle" and "".join(t.itertext()).isdigit()}
        assert len(y_axis) == 1
        ticks = [(float(t.get("x")), "".join(t.itertext()))
                 for t in root.iter("{http://www.w3.org/2000/svg}text")
                 if t.get("y") in y_axis and "".join(t.itertext()).isdigit()]
        labels = [int(k) for _, k in ticks]
        assert labels[0] == 1 and labels[-1] == n and labels == sorted(set(labels))
        for (xa, a), (xb, b) in zip(ticks, ticks[1:]):
            assert xb - xa >= 0.6 * 11 * (len(a) + len(b)) / 2, (n, a, b)
        assert len(ticks) >= min(n, 5)                 # still a scale to read


def test_a_test_longer_than_the_bank_says_it_asked_the_whole_bank(tmp_path):
    """``--min-items 500`` on a bank of 346 items asks all of them: the settings line said
    "items 500-346 (the whole bank)", a range that runs backwards."""
    from atlascat.catalogue import load_bank

    bank = load_bank("arc").subset(list(range(8)))
    answers = tmp_path / "answers.csv"
    pd.DataFrame([[1, 0] * 4], index=pd.Index(["m"], name="model"),
                 columns=bank.item_ids).to_csv(answers)
    store = RunStore(tmp_path / "runs.sqlite")
    res = evaluate(bank, subject_from_spec(f"replay:{answers}#m", bank=bank), store=store,
                   config=CATConfig(min_items=20, max_items=30, se_stop=None))
    assert len(store.steps(res.run_id)) == 8
    page = _text(render_run_report(store, res.run_id, bank=bank))
    assert "items 20-8" not in page and "items 20-" not in page
    assert "items all 8 (the whole bank; at least 20 asked for)" in page


def test_a_replayed_rating_is_called_a_rating(tmp_path):
    """On a graded bank the items table's column is "rating": each replayed step says it is a
    recorded rating from a matrix of ratings, not a "recorded score"."""
    import numpy as np

    from atlascat.irt.polybank import PolyBank

    rng = np.random.default_rng(0)
    ids = [f"p{j}" for j in range(6)]
    a = rng.lognormal(0.2, 0.3, 6)
    d = -np.sort(rng.normal(0, 1.0, (6, 4)), axis=1) * a[:, None]
    bank = PolyBank(ids, np.column_stack([a, d]), "graded", [np.arange(1.0, 6.0)] * 6)
    ratings = tmp_path / "ratings.csv"
    pd.DataFrame([[1, 2, 3, 4, 5, 3]], index=pd.Index(["m"], name="model"),
                 columns=ids).to_csv(ratings)
    store = RunStore(tmp_path / "runs.sqlite")
    res = evaluate(bank, subject_from_spec(f"replay:{ratings}#m", bank=bank), store=store,
                   config=CATConfig(min_items=4, max_items=4, se_stop=None))
    page = _text(render_run_report(store, res.run_id, bank=bank))
    assert page.count("recorded rating, replayed (the matrix holds ratings, not the model's "
                      "text)") == 4
    assert "recorded score" not in page


def _folder(root):
    """A bank folder (``root/bank``, a benchmark predictor) built from 30 simulated source
    models x 80 items (``source.csv``); two more models' answers in ``targets.csv``."""
    import numpy as np

    from atlascat.bankdir import build_bank

    rng = np.random.default_rng(5)
    a, b = rng.lognormal(0, 0.3, 80), rng.normal(0, 1, 80)
    theta = rng.normal(0, 1, 32)
    y = (rng.random((32, 80)) < 1 / (1 + np.exp(-a * (theta[:, None] - b)))).astype(int)
    cols = [f"q{j}" for j in range(80)]
    frame = pd.DataFrame(y, index=[f"m{i}" for i in range(32)], columns=cols).rename_axis("model")
    frame.iloc[:30].to_csv(root / "source.csv")
    frame.iloc[30:].to_csv(root / "targets.csv")
    build_bank(root / "source.csv", root / "bank", folds=0)


def test_runs_shows_a_predictor_runs_predicted_score_after_each_step(tmp_path):
    """``atlas runs --run`` on a bank folder's predictor run: each step's predicted score and
    95% interval, the very texts of the run's page (the step table had theta alone, the page
    the prediction: two readers of one run disagreeing on what each step shows); the last
    step's is the run's predicted score."""
    import json

    import numpy as np
    from typer.testing import CliRunner

    from atlascat.cli import app
    from atlascat.live.report import describe_prediction

    _folder(tmp_path)
    out = tmp_path / "run"
    r = CliRunner().invoke(app, ["evaluate", "--bank", str(tmp_path / "bank"), "--subject",
                                 f"replay:{tmp_path / 'targets.csv'}#m31", "--max-items", "12",
                                 "-q", "-o", str(out)])
    assert r.exit_code == 0, r.output
    row = json.loads((out / "results.json").read_text())[0]
    r = CliRunner().invoke(app, ["runs", "--db", str(out / "runs.sqlite"), "--run",
                                 row["run_id"]])
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    head = next(ln for ln in lines if ln.lstrip().startswith("step"))
    assert "predicted %" in head and "95% interval" in head
    page = _text((out / "reports" / f"{row['run_id']}.html").read_text())
    table = page.split("Items")[-1]
    steps = [ln.split() for ln in lines if re.match(r"\s*\d+\s+q\d+\s+answered", ln)]
    assert len(steps) == 12
    for cells in steps:
        at = head.split().index("predicted")       # "predicted %": two header words
        pred, interval = cells[at], cells[at + 1]
        assert re.search(rf"\b{cells[1]}\b.*?\b{re.escape(pred)}\s+{re.escape(interval)}\b",
                         table), cells
    lb = row["prediction"]
    assert describe_prediction(lb, short=True) == f"{steps[-1][at]}% ({steps[-1][at + 1]})"


def test_a_predictor_runs_snapshot_describes_its_predictor_once(tmp_path, monkeypatch):
    """Each answer of a bank folder's predictor run stores the session's snapshot, which holds
    the predictor's description: packing the source models' answers took 1 s a step on MuSR
    (424 x 756; a replayed 50-item run took 41 s, 6 s now). The description is made once per
    session (and a resumed session's is the one it was read from), every snapshot the same."""
    import numpy as np

    from atlascat.predict import BenchmarkPredictor
    from atlascat.live.predictor_session import PredictorLiveSession

    rng = np.random.default_rng(1)
    a, b = rng.lognormal(0, 0.3, 60), rng.normal(0, 1, 60)
    theta = rng.normal(0, 1, 40)
    y = (rng.random((40, 60)) < 1 / (1 + np.exp(-a * (theta[:, None] - b)))).astype(float)
    from atlascat.irt.bank import ItemBank
    from atlascat.responses import ResponseMatrix

    ids = [f"q{j}" for j in range(60)]
    bank = ItemBank(ids, a, b)
    pred = BenchmarkPredictor(10).fit(bank, ResponseMatrix(y, item_ids=ids), rng=0)
    calls = []
    real = BenchmarkPredictor.to_dict
    monkeypatch.setattr(BenchmarkPredictor, "to_dict",
                        lambda self: calls.append(1) or real(self))
    session = PredictorLiveSession(pred, rng=0)
    snaps = []
    for _ in range(5):
        item = session.next_item()
        session.record(item, float(y[0, ids.index(item)]))
        snaps.append(session.to_dict())
    assert len(calls) == 1
    assert all(s["predictor"] == real(pred) for s in snaps)
    again = PredictorLiveSession.from_dict(snaps[-1])
    assert again.to_dict() == snaps[-1] and len(calls) == 1


def _small_run(name: str, seed: int = 4):
    import numpy as np

    from atlascat.irt.bank import ItemBank
    from atlascat.responses import ResponseMatrix
    from atlascat.studies.protocol import BenchmarkConfig, run_benchmark

    rng = np.random.default_rng(seed)
    n, j = 200, 30
    bank = ItemBank([f"i{k}" for k in range(j)], rng.lognormal(0.3, 0.3, j), rng.normal(0, 1, j))
    y = (rng.random((n, j)) < bank.probability(rng.normal(size=n))).astype(float)
    rm = ResponseMatrix(y, [f"m{k}" for k in range(n)], bank.item_ids)
    cfg = BenchmarkConfig(seed=1, taus=(0.4,), random_k=10, random_replicates=1, anchor_k=0,
                          info_k=0, optimal_k=0, model_fit=False, se_calibration=False,
                          filter=False, model="2pl")
    return run_benchmark(rm, cfg, name=name)


def test_the_reports_overview_says_what_its_cells_are():
    """A report of several runs opens with the methods x benchmarks overview: its cells
    ("0.125 ± 0.003 (100)") are the theta MAE, its SE and the mean items, which the markdown
    of ``atlas compare`` titles and the page did not say."""
    from atlascat.studies.report import build_report
    from atlascat.studies.tables import WIDE_TITLE

    text = _text(build_report([_small_run("one"), _small_run("two", 5)]))
    over = text.split("Overview", 1)[1]
    assert over.lstrip().startswith(WIDE_TITLE)
    assert WIDE_TITLE == "Theta MAE ± SE (mean items) by benchmark"


def test_the_reports_calibration_line_is_the_demos():
    """``atlas report``'s calibration line reads as the demo prints it: the log-likelihood to
    one decimal ("-34406.7"), not "loglik -3.441e+04", the iterations and the seconds in
    words."""
    from atlascat.studies.report import build_report, calibration_words

    run = _small_run("calibration words")
    cal = run.info["calibration"]
    text = _text(build_report([run]))
    want = (f"2pl MML-EM, log-likelihood {cal['loglik']:.1f}, {cal['n_iter']} iterations, "
            f"converged {cal['converged']}, {cal['seconds']:.1f} s")
    assert calibration_words(cal) == want and want in text
    assert "e+0" not in text.split("calibration")[1][:120]


CRASH = """import json, sys
for n, line in enumerate(sys.stdin):
    if n == 6:
        sys.exit(3)
    print(json.dumps({"item_id": json.loads(line)["item_id"], "score": n % 2}), flush=True)
"""


def test_a_run_stopped_by_an_error_has_its_prediction_so_far_on_its_page(tmp_path):
    """A bank folder's run whose command dies after 6 answers: ``atlas runs`` shows the
    prediction from those 6 ("..., stopped by an error after 6 items"); the run's page and its
    results.json row showed theta alone, no prediction. All three now say the same."""
    import json
    import shlex
    import sys

    from typer.testing import CliRunner

    from atlascat.cli import app
    from atlascat.live.report import describe_prediction

    _folder(tmp_path)
    (tmp_path / "crash.py").write_text(CRASH)
    out = tmp_path / "run"
    r = CliRunner().invoke(app, ["evaluate", "--bank", str(tmp_path / "bank"), "--subject",
                                 "cmd:" + shlex.join([sys.executable, str(tmp_path / "crash.py")]),
                                 "--llm", "crashy", "-q", "-o", str(out)])
    assert r.exit_code != 0
    row = json.loads((out / "results.json").read_text())[0]
    assert row["status"] == "error" and row["n_items"] == 6
    lb = row["prediction"]
    assert lb["partial"] and lb["state"] == "error" and lb["answered"] == 6
    assert lb["score"] is not None and row["design"] == "benchmark predictor"
    words = describe_prediction(lb)
    assert words.endswith("stopped by an error after 6 items")
    page = _text((out / "reports" / f"{row['run_id']}.html").read_text())
    assert words in page
    runs = CliRunner().invoke(app, ["runs", "--db", str(out / "runs.sqlite")])
    assert describe_prediction(lb, short=True) in " ".join(runs.output.split())
