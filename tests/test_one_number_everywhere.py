"""One number everywhere, for every kind of bank: a live ``atlas evaluate`` with recorded
answers (``replay:``) and then every surface that shows the run -- the command's printed lines
(per-step lines, the run table, the summary), ``results.json``, ``atlas runs`` (table,
``--json``, ``--run ID``, ``--run ID --json``), the HTML page and
:meth:`RunResult.from_store` -- give the same predicted score with its interval, the same
observed and model-based mean scores and the same score for each asked item (up to the
display's rounding), each on the bank's scale: in percent for 0/1 and [0, 1] scores, on the
metric's own scale for a folder built with ``--score-range``. Each item's score is also
checked against the recorded answer it replays, so a surface on the wrong scale (0.42 where
42.0 is meant, 4200%) fails.

Kinds covered: a shipped bank (``--bank arc``), bank folders from a 0/1 matrix, from
continuous scores in [0, 1] and from a 0-100 metric (``--score-range 0 100``), each by the
adaptive test and by the folder's benchmark predictor, and a suite run (``simulate:``: a
suite takes no ``replay:`` subject)."""
from __future__ import annotations

import html
import json
import re
from html.parser import HTMLParser

import numpy as np
import pandas as pd
import pytest

from atlascat.cli import main
from test_any_metric import _scaled_matrix

SHIPPED_MODEL = "Kukedlc/SuperMente-7B-v4"
NUM = r"-?\d+\.\d+"


# ------------------------------------------------------------------------------- the runs
@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """Bank folders of 30 simulated source models (80 items), with 10 more models' recorded
    answers (``tgt.csv``) to replay: 0/1 scores, continuous scores in [0, 1], and a 0-100
    metric built with ``--score-range 0 100``; and a model far below them all, ``weak``,
    scoring 2% of the scale on every item."""
    root = tmp_path_factory.mktemp("one_number_folders")
    out = {}
    for name, hi, integer, extra in (("binary", 1, True, []), ("continuous", 1, False, []),
                                     ("bleu", 100, False, ["--score-range", "0", "100"])):
        d = root / name
        d.mkdir()
        _scaled_matrix(d, 0, hi, integer=integer)
        tgt = pd.read_csv(d / "tgt.csv", index_col=0)
        tgt.loc["weak"] = 0.0 if integer else 0.02 * hi
        tgt.to_csv(d / "tgt.csv")
        assert main(["build-bank", str(d / "src.csv"), "-o", str(d / "bank"), "-q",
                     *extra]) == 0
        out[name] = d
    return out


BLEU = (0.0, 100.0)
#: (bank kind, design or None, the scale its numbers read on (None: percent), more options,
#: the replayed model)
CASES = {
    "shipped": ("shipped", None, None, [], SHIPPED_MODEL),
    "matrix01-adaptive": ("binary", "adaptive", None, [], "m31"),
    "matrix01-predictor": ("binary", "predictor", None, [], "m31"),
    "continuous-adaptive": ("continuous", "adaptive", None, ["--batch-size", "4"], "m31"),
    "continuous-predictor": ("continuous", "predictor", None, [], "m31"),
    "score-range-adaptive": ("bleu", "adaptive", BLEU, [], "m31"),
    "score-range-predictor": ("bleu", "auto", BLEU, [], "m31"),   # auto: the folder's predictor
    # rounds of 4: each step shows the prediction after its round, on the page as on its line
    "score-range-predictor-rounds": ("bleu", "auto", BLEU, ["--batch-size", "4"], "m31"),
    # below every source model: the floor's note and the warnings on the metric's scale too
    "score-range-adaptive-floor": ("bleu", "adaptive", BLEU, [], "weak"),
    "score-range-predictor-outside": ("bleu", "auto", BLEU, [], "weak"),
    "matrix01-adaptive-below": ("binary", "adaptive", None, [], "weak"),
}


def _evaluate(case, folders, tmp_path, capsys):
    """Run the case; return (results.json's row, stdout, stderr, run dir, recorded answers of
    the replayed model on the matrix's own scale, the command's options)."""
    kind, design, _, more, model = CASES[case]
    out = tmp_path / "run"
    if kind == "shipped":
        from atlascat.catalogue import load_responses

        argv = ["--bank", "arc", "--subject", f"replay:arc#{model}", "--batch-size",
                "8", "--se-stop", "0.2"]
        recorded = load_responses("arc").to_frame().loc[model]
    else:
        d = folders[kind]
        tgt = pd.read_csv(d / "tgt.csv", index_col=0)
        argv = ["--bank", str(d / "bank"), "--subject", f"replay:{d / 'tgt.csv'}#{model}",
                "--design", design, "--max-items", "20", *more]
        recorded = tgt.loc[model]
    assert main(["evaluate", *argv, "-o", str(out)]) == 0
    cap = capsys.readouterr()
    row = json.loads((out / "results.json").read_text())[0]
    return row, cap.out, cap.err, out, recorded, argv


# ------------------------------------------------------------------------------ readers
def _close(shown, value, decimals: int, what: str):
    """``shown`` (text) is ``value`` written with ``decimals`` decimals."""
    assert shown is not None, f"{what}: not shown"
    assert abs(float(shown) - value) <= 0.5 * 10 ** -decimals + 1e-9, (what, shown, value)


def _columns(lines, first: str) -> list[dict]:
    """The rows of a plain-text table printed by ``print_frame`` (pandas ``to_string``:
    right-aligned columns) whose header line starts with ``first``: {column: cell text}."""
    at = next(k for k, ln in enumerate(lines) if ln.split()[:1] == [first])
    header = lines[at]
    ends = [m.end() for m in re.finditer(r"\S+", header)]
    names = header.split()
    rows = []
    for ln in lines[at + 1:]:
        if not ln.strip() or len(ln) < ends[-1] - 1:
            break
        starts = [0, *ends[:-1]]
        rows.append({n: ln[s:e].strip() for n, s, e in zip(names, starts, ends)})
    return rows


class _Tables(HTMLParser):
    """The page's outermost tables, each a list of rows of cell texts (a table nested in a
    cell, an item's log-likelihoods, stays text of that cell)."""

    def __init__(self):
        super().__init__()
        self.tables, self.depth, self.cell = [], 0, None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.depth += 1
            if self.depth == 1:
                self.tables.append([])
        elif self.depth == 1 and tag == "tr":
            self.tables[-1].append([])
        elif self.depth == 1 and tag in ("td", "th"):
            self.cell = []

    def handle_endtag(self, tag):
        if tag == "table":
            self.depth -= 1
        elif self.depth == 1 and tag in ("td", "th") and self.cell is not None:
            self.tables[-1][-1].append(" ".join("".join(self.cell).split()))
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)


def _page(path) -> tuple[str, dict, list[dict]]:
    """The HTML page's text, its summary (key -> value) and its items table (header -> cell
    per row)."""
    raw = path.read_text()
    parser = _Tables()
    parser.feed(raw)
    kv = next(t for t in parser.tables if t and len(t[0]) == 2 and t[0][0] == "model")
    items = next(t for t in parser.tables if t and t[0][:2] == ["#", "item"])
    body = re.sub(r"<(style|script)\b.*?</\1>", " ", raw, flags=re.S)
    text = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", body)).split())
    return text, dict(kv), [dict(zip(items[0], r)) for r in items[1:]]


def _prediction_text(text: str, lb=None) -> tuple[str, str, str, str] | None:
    """(score, lo, hi, unit) of "predicted ... score[:] X[%] (95% interval LO-HI[%]), Nth
    percentile"; ``lb``: the prediction whose percentile N is, rounded."""
    m = re.search(rf"predicted [^:]*?(?:score|average):? ({NUM})(%?) \(95% interval ({NUM})-"
                  rf"({NUM})(%?)\)(?:, (\d+)(?:st|nd|rd|th) percentile)?", text)
    if m is None:
        return None
    assert m.group(2) == m.group(5), m.group(0)     # both ends in the score's unit
    if lb is not None:
        assert m.group(6) is not None and int(m.group(6)) == round(lb["percentile"]), m.group(0)
    return m.group(1), m.group(3), m.group(4), m.group(2)


def _table_prediction(cell: str, lb, scale, what: str):
    """A table's "X[%] (LO-HI)" cell (" (!)" after it: the prediction has a warning)."""
    k, unit = (1.0, "") if scale else (100.0, "%")
    shown = re.fullmatch(rf"({NUM})(%?) \(({NUM})-({NUM})\)( \(!\))?", cell)
    assert shown and shown.group(2) == unit, (what, cell)
    assert bool(shown.group(5)) == bool(lb.get("warning")), (what, cell, lb)
    for g, key in zip((1, 3, 4), ("score", "lo", "hi")):
        _close(shown.group(g), k * lb[key], 1, f"{what} {key}")


def _check_warning(lb, text: str, scale, what: str):
    """The prediction's warning is in ``text``, its levels on the bank's scale: the floor's
    "(<= X)" is the interval's upper end (in percent: "(<= X%)", whole points)."""
    if not lb.get("warning"):
        return
    assert f"warning: {lb['warning']}" in text, (what, lb["warning"])
    if scale:     # no score in percent ("95% interval" is a confidence level, not a score)
        assert "%" not in lb["warning"].replace("95% interval", ""), lb["warning"]
    m = re.search(r"at or near (?:chance|the bottom of the scale) \(<= (\d+(?:\.\d)?)(%?)\)",
                  lb["warning"])
    if m:
        assert m.group(2) == ("" if scale else "%"), lb["warning"]
        _close(m.group(1), lb["hi"] * (1 if scale else 100), 1 if scale else 0, what)


# ------------------------------------------------------------------------------- checks
def _check_row_against_answers(row, recorded, scale, bank):
    """results.json's row: each item's score is the answer replayed, on the matrix's own
    scale; the model-based score is the bank's expected mean score at theta (a benchmark
    predictor's: its model part, over every item it draws from), on the bank's scale, and so
    is the prediction."""
    from atlascat.catalogue import BankRef

    low, high = scale if scale else (0.0, 1.0)
    if "design" in row:   # the model part the prediction pools, so the score lies between
        pred = row["prediction"]
        assert row["model_based_score"] == pytest.approx(pred["model_part"])
        if pred["method"] == "combined":
            parts = sorted((pred["model_part"], pred["design_score"]))
            assert parts[0] - 1e-9 <= pred["score"] <= parts[1] + 1e-9
    else:
        mean = float(np.mean(BankRef.from_option(bank).load().probability(row["theta"])))
        assert row["model_based_score"] == pytest.approx(low + (high - low) * mean, rel=1e-9)
    truth = recorded.loc[[str(i) for i in row["items"]]].to_numpy(float)
    assert np.allclose(row["scores"], truth, atol=1e-9)
    assert row["score_sum"] == pytest.approx(truth.sum(), abs=1e-9)
    assert row["observed_score"] == pytest.approx(truth.mean(), abs=1e-12)
    assert low <= row["model_based_score"] <= high
    lb = row["prediction"]
    assert low <= lb["lo"] <= lb["score"] <= lb["hi"] <= high
    assert lb.get("scale") == (list(scale) if scale else None)
    assert row.get("scale") == (list(scale) if scale else None)
    # a number on the wrong scale (0.46 for 46, or 46 for 0.46) is far from the model's mean
    # score over every item of the matrix
    full = recorded.to_numpy(float)
    assert abs(lb["score"] - np.nanmean(full)) < 0.25 * (high - low), (lb, np.nanmean(full))


def _check_cli(row, out, err, scale, design):
    """The command's printed lines: the run table, the summary and each step's line; ->
    each step's estimate as its line prints it: the predictor's (score, lo, hi), else
    (theta, SE)."""
    k, unit = (1.0, "") if scale else (100.0, "%")
    lb, rid = row["prediction"], row["run_id"]
    lines = out.splitlines()
    table = {r["run"]: r for r in _columns(lines, "run")}
    _table_prediction(table[rid]["predicted"], lb, scale, "run table")
    assert int(table[rid]["items"]) == row["n_items"]
    s, lo, hi, u = _prediction_text(out, lb)
    assert u == unit
    for v, key in ((s, "score"), (lo, "lo"), (hi, "hi")):
        _close(v, k * lb[key], 1, f"summary {key}")
    means = re.search(rf": observed ({NUM})(%?) .*; model-based ({NUM})(%?) ", out)
    assert means and means.group(2) == means.group(4) == unit, out
    _close(means.group(1), k * row["observed_score"], 1, "observed (CLI)")
    _close(means.group(3), k * row["model_based_score"], 1, "model-based (CLI)")
    _check_warning(lb, err, scale, "the command's warning")
    theta = re.search(rf"theta = ({NUM}) \+- ({NUM})", out)
    _close(theta.group(1), row["theta"], 3, "theta (CLI)")
    _close(theta.group(2), row["se"], 3, "SE (CLI)")
    # each step's line: its item, its score and, for the predictor, the prediction after it
    steps = re.findall(r"step\s+(\d+)\s+item (\S+)\s+(correct|wrong|score (\S+))\s+(.*)", err)
    assert [s[1] for s in steps] == [str(i) for i in row["items"]]
    estimates = []
    for (_, _, mark, value, rest), score in zip(steps, row["scores"]):
        if mark in ("correct", "wrong"):
            assert score == (mark == "correct")
        else:
            _close(value, score, 1 if scale else 2, "step line score")
        if design is not None and design != "adaptive":
            m = re.fullmatch(rf"predicted ({NUM})(%?) \(({NUM})-({NUM})\)", rest.strip())
            assert m and m.group(2) == unit, rest
            estimates.append(m.group(1, 3, 4))
        else:
            m = re.fullmatch(rf"theta \+?({NUM})\s+SE ({NUM})", rest.strip())
            assert m, rest
            estimates.append(m.group(1, 2))
    _close(estimates[-1][0], k * lb["score"] if len(estimates[-1]) == 3 else row["theta"],
           1 if len(estimates[-1]) == 3 else 3, "the last step's estimate")
    return estimates


def _check_runs(row, db, capsys, scale, estimates):
    """``atlas runs`` (table, --json) and ``atlas runs --run ID`` (table, --json)."""
    k, unit = (1.0, "") if scale else (100.0, "%")
    lb, rid = row["prediction"], row["run_id"]
    assert main(["runs", "--db", str(db), "--json"]) == 0
    listed = {r["run_id"]: r for r in json.loads(capsys.readouterr().out)}[rid]
    for key in ("theta", "se", "score_sum", "observed_score", "model_based_score", "n_items"):
        assert listed[key] == pytest.approx(row[key], rel=1e-12, abs=1e-12), key
    assert listed["prediction"] == lb
    assert listed.get("scale") == row.get("scale")

    assert main(["runs", "--db", str(db)]) == 0
    table = {r["run_id"]: r for r in _columns(capsys.readouterr().out.splitlines(),
                                              "run_id")}[rid]
    for col, key in (("observed", "observed_score"), ("model-based", "model_based_score")):
        assert table[col].endswith("%") == (unit == "%"), table
        _close(table[col].rstrip("%"), k * row[key], 1, f"runs table {col}")
    _close(table["theta"], row["theta"], 3, "runs table theta")
    _close(table["se"], row["se"], 3, "runs table se")
    _table_prediction(table["predicted"], lb, scale, "runs table")

    assert main(["runs", "--db", str(db), "--run", rid, "--json"]) == 0
    one = json.loads(capsys.readouterr().out)
    run = one["run"]
    assert one["prediction"] == lb
    for key in ("theta", "se", "score_sum", "observed_score", "model_based_score", "n_items"):
        assert run[key] == pytest.approx(row[key], rel=1e-12, abs=1e-12), key
    answered = [s for s in one["steps"] if s["status"] == "answered"]
    assert [s["item_id"] for s in answered] == [str(i) for i in row["items"]]
    assert [s["score"] for s in answered] == pytest.approx(row["scores"], abs=1e-12)
    for s, est in zip(answered, estimates):
        if len(est) == 2:    # an adaptive test's theta and SE after the step's round
            _close(est[0], s["theta"], 3, "step theta")
            _close(est[1], s["se"], 3, "step SE")

    assert main(["runs", "--db", str(db), "--run", rid]) == 0
    text = capsys.readouterr().out
    steps = [r for r in _columns(text.splitlines(), "step") if r["status"] == "answered"]
    assert [r["item_id"] for r in steps] == [str(i) for i in row["items"]]
    continuous = any(0 < v < 1 for v in row["scores"]) and not scale
    for r, score in zip(steps, row["scores"]):   # as the page and the step lines print it
        _close(r["score"], score, 1 if scale else 2 if continuous else 0, "runs --run score")
        assert len(r["score"].partition(".")[2]) == (1 if scale else 2 if continuous else 0)
    s, lo, hi, u = _prediction_text(text.splitlines()[-1], lb)
    assert u == unit
    for v, key in ((s, "score"), (lo, "lo"), (hi, "hi")):
        _close(v, k * lb[key], 1, f"runs --run {key}")


def _check_page(row, path, scale, estimates):
    """The HTML page: its headline, summary rows and items table."""
    k, unit = (1.0, "") if scale else (100.0, "%")
    lb = row["prediction"]
    text, kv, items = _page(path)
    _check_warning(lb, text, scale, "the page's warning")
    s, lo, hi, u = _prediction_text(text, lb)
    assert u == unit
    for v, key in ((s, "score"), (lo, "lo"), (hi, "hi")):
        _close(v, k * lb[key], 1, f"page {key}")
    observed = next(v for key, v in kv.items() if key.startswith("observed "))
    model = next(v for key, v in kv.items() if key.startswith("model-based "))
    for shown, key in ((observed, "observed_score"), (model, "model_based_score")):
        assert shown.endswith("%") == (unit == "%"), (key, shown)
        _close(shown.rstrip("%"), k * row[key], 1, f"page {key}")
    theta = re.fullmatch(rf"({NUM}) \[({NUM}), ({NUM})\]", kv["theta (95% CI)"])
    _close(theta.group(1), row["theta"], 3, "page theta")
    _close(theta.group(2), row["theta"] - 1.96 * row["se"], 3, "page theta CI")
    _close(theta.group(3), row["theta"] + 1.96 * row["se"], 3, "page theta CI")
    if scale:
        assert f"on the metric's own scale ({scale[0]:g}-{scale[1]:g})" in kv["metric"]
    assert [r["item"] for r in items] == [str(i) for i in row["items"]]
    continuous = any(0 < v < 1 for v in row["scores"]) and not scale
    for r, score in zip(items, row["scores"]):
        if scale:
            _close(r["score"], score, 1, "page item score")
        elif continuous:
            _close(r["score"], score, 2, "page item score")
        else:
            assert r["score"] == ("\u2713" if score == 1 else "\u2717"), (r["score"], score)
    for r, est in zip(items, estimates):   # each step's estimate, as its line printed it
        if len(est) == 3:    # the predictor's prediction after the step's round
            shown = r["predicted" if scale else "predicted %"], r["95% interval"]
            assert shown == (est[0], f"{est[1]}-{est[2]}"), (r, est)
        else:
            assert (float(r["theta"]), float(r["SE"])) == tuple(map(float, est)), (r, est)


def _check_page_again(row, run_dir, tmp_path, capsys):
    """``atlas runs --run ID -o FILE`` writes the page ``atlas evaluate`` wrote."""
    rid = row["run_id"]
    again = tmp_path / "again.html"
    assert main(["runs", "--db", str(run_dir / "runs.sqlite"), "--run", rid, "-o",
                 str(again)]) == 0
    capsys.readouterr()
    assert again.read_text() == (run_dir / "reports" / f"{rid}.html").read_text()


def _check_run_result(row, db):
    """:meth:`RunResult.from_store` reads as ``results.json``."""
    from atlascat.live.runner import RunResult
    from atlascat.live.store import RunStore

    res = RunResult.from_store(RunStore(db), row["run_id"]).to_dict()
    assert res["items"] == [str(i) for i in row["items"]]
    assert res["scores"] == pytest.approx(row["scores"], abs=1e-12)
    for key in ("theta", "se", "score_sum", "observed_score", "model_based_score", "n_items"):
        assert res[key] == pytest.approx(row[key], rel=1e-12, abs=1e-12), key
    assert res.get("scale") == row.get("scale")


@pytest.mark.parametrize("case", list(CASES))
def test_one_number_on_every_surface(case, folders, tmp_path, capsys):
    _, design, scale, *_ = CASES[case]
    row, out, err, run_dir, recorded, argv = _evaluate(case, folders, tmp_path, capsys)
    _check_row_against_answers(row, recorded, scale, argv[1])
    if CASES[case][-1] == "weak":   # below every source model: warned, and so checked below
        assert row["prediction"]["warning"]
        # a folder built from a matrix knows no chance level: its floor is the scale's bottom
        w = row["prediction"]["warning"]   # the floor rule's note, or a precision stop's
        floor_note = "at or near the bottom of the scale (<= " in w or \
            "reaches down to the bottom of the scale (" in w
        assert floor_note == case.endswith("floor")
        assert "chance" not in row["prediction"]["warning"]
    estimates = _check_cli(row, out, err, scale, design)
    _check_runs(row, run_dir / "runs.sqlite", capsys, scale, estimates)
    _check_page(row, run_dir / "reports" / f"{row['run_id']}.html", scale, estimates)
    _check_run_result(row, run_dir / "runs.sqlite")
    _check_page_again(row, run_dir, tmp_path, capsys)
    # the same command with --json prints the row results.json keeps (a new run, same answers)
    assert main(["evaluate", *argv, "--json", "-o", str(tmp_path / "again")]) == 0
    again = json.loads(capsys.readouterr().out)[0]
    assert again["run_id"] != row["run_id"]
    for key in ("items", "scores", "theta", "se", "score_sum", "observed_score",
                "model_based_score", "prediction"):
        assert again[key] == row[key], key


def test_a_suite_runs_average_on_every_surface(tmp_path, capsys):
    """A suite run (``simulate:``: a suite takes no ``replay:`` subject) has no theta and no
    model-based score: its predicted average, each benchmark's predicted score and the
    observed accuracy read the same on every surface, and no surface gives the average (the
    run store's theta column) as a theta."""
    out = tmp_path / "run"
    assert main(["evaluate", "--suite", "openllm-v1", "--subject", "simulate:0.5:3",
                 "--max-items", "12", "--min-items", "12", "-o", str(out)]) == 0
    cap = capsys.readouterr()
    row = json.loads((out / "results.json").read_text())[0]
    rid, avg, db = row["run_id"], row["average"], out / "runs.sqlite"
    assert row["prediction"] == avg and 0 <= avg["lo"] <= avg["score"] <= avg["hi"] <= 1
    assert set(row["scores"]) <= {0, 1} and row["score_sum"] == sum(row["scores"])
    assert row["observed_score"] == pytest.approx(np.mean(row["scores"]))
    assert not {"theta", "se", "model_based_score"} & set(row)
    # the printed table and results.json's: each benchmark's score and interval, in percent
    printed = {m.group(1): m.group(2, 3, 4) for m in re.finditer(
        rf"^\s*(\S+)\s+({NUM})\s+({NUM})-({NUM})\s+\d+\s+\S+$", cap.out, flags=re.M)}
    expected = {b["name"]: b for b in row["benchmarks"]} | {"average": avg}
    assert set(printed) == set(expected)
    for name, (s, lo, hi) in printed.items():
        for v, key in ((s, "score"), (lo, "lo"), (hi, "hi")):
            _close(v, 100 * expected[name][key], 1, f"{name} {key}")
    s, lo, hi, u = _prediction_text(cap.out.replace("  average:", "predicted average:"), avg)
    assert u == "%"
    for v, key in ((s, "score"), (lo, "lo"), (hi, "hi")):
        _close(v, 100 * avg[key], 1, f"summary {key}")
    steps = re.findall(rf"step\s+\d+\s+item (\S+)\s+(correct|wrong)\s+average\s+({NUM})", cap.err)
    assert [s[0] for s in steps] == row["items"]
    assert [int(s[1] == "correct") for s in steps] == row["scores"]
    _close(steps[-1][2], 100 * avg["score"], 1, "last step's average")
    # atlas runs: the list (--json and table) and the run (--json and table)
    assert main(["runs", "--db", str(db), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)[0]
    assert listed["prediction"] == avg and listed["observed_score"] == row["observed_score"]
    assert listed["theta"] is None and listed["se"] is None and listed["model_based_score"] is None
    assert main(["runs", "--db", str(db)]) == 0
    table = _columns(capsys.readouterr().out.splitlines(), "run_id")[0]
    assert table["theta"] == table["se"] == table["model-based"] == "-"
    _close(table["observed"].rstrip("%"), 100 * row["observed_score"], 1, "runs observed")
    assert table["predicted"] == (f"{100 * avg['score']:.1f}% ({100 * avg['lo']:.1f}-"
                                  f"{100 * avg['hi']:.1f})")
    assert main(["runs", "--db", str(db), "--run", rid, "--json"]) == 0
    one = json.loads(capsys.readouterr().out)
    assert one["prediction"] == avg
    assert one["run"]["theta"] is None and one["run"]["model_based_score"] is None
    assert [s["score"] for s in one["steps"]] == row["scores"]
    assert main(["runs", "--db", str(db), "--run", rid]) == 0
    s, lo, hi, _ = _prediction_text(capsys.readouterr().out.splitlines()[-1], avg)
    _close(s, 100 * avg["score"], 1, "runs --run average")
    # the page: headline, its suite table, observed accuracy and each item's mark
    text, kv, items = _page(out / "reports" / f"{rid}.html")
    s, lo, hi, _ = _prediction_text(text, avg)
    for v, key in ((s, "score"), (lo, "lo"), (hi, "hi")):
        _close(v, 100 * avg[key], 1, f"page {key}")
    assert "theta (95% CI)" not in kv
    _close(kv["SE of the average"].removesuffix(" points"), row["se_points"], 2, "page SE")
    parser = _Tables()
    parser.feed((out / "reports" / f"{rid}.html").read_text())
    suite_table = next(t for t in parser.tables if t and t[0][:2] == ["benchmark", "predicted"])
    assert [dict(zip(suite_table[0], r)) for r in suite_table[1:]] == [
        {k: str(v) for k, v in r.items()} for r in row["table"]]
    _close(kv["observed accuracy (right / asked)"].rstrip("%"), 100 * row["observed_score"], 1,
           "page observed")
    assert [r["item"] for r in items] == row["items"]
    assert [r["score"] for r in items] == ["\u2713" if v else "\u2717" for v in row["scores"]]
    _close(items[-1]["average %"], 100 * avg["score"], 1, "page last average")
    _check_page_again(row, out, tmp_path, capsys)
    # Python: the stored result has no theta (its store column holds the average)
    from atlascat.live.runner import RunResult
    from atlascat.live.store import RunStore

    res = RunResult.from_store(RunStore(db), rid)
    assert res.scores == row["scores"] and res.observed_score == row["observed_score"]
    assert res.theta is None and res.se is None and res.model_based_score is None
