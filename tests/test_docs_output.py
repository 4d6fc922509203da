"""Printed output the docs show outside a ```text transcript (an indented block, a figure in the
prose, a code comment's result) is what the code gives now (the transcripts themselves:
tests/test_docs_examples.py, slow; tests/test_docs_transcripts_fast.py). Each check is fast (a
few seconds at most): it computes the shown figure by a library call or the one command the
page shows, not by running the whole page."""
from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np

DOCS = Path(__file__).resolve().parents[1] / "docs"


def indented_block_after(page: str, marker: str) -> str:
    """The indented (4-space) block that follows the line holding ``marker`` on ``page``, its
    lines joined by single spaces."""
    lines = (DOCS / page).read_text().splitlines()
    start = next(n for n, line in enumerate(lines) if marker in line) + 1
    while not lines[start].strip():
        start += 1
    block = []
    for line in lines[start:]:
        if not line.startswith("    "):
            break
        block.append(line.strip())
    assert block, f"{page}: no indented block after {marker!r}"
    return " ".join(block)


def test_calibration_page_shows_the_small_sample_warning_as_printed():
    from atlascat.irt.defaults import DefaultsWarning, resolve

    shown = indented_block_after("calibration.md", "raises a `DefaultsWarning`")
    n, m = (int(x) for x in re.match(r"(\d+) subjects x (\d+) items", shown).groups())
    values = (np.random.default_rng(0).random((n, m)) < 0.6).astype(float)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        resolve("auto", "auto", "auto", values, None)
    printed = [str(w.message) for w in caught if issubclass(w.category, DefaultsWarning)]
    assert printed == [shown], f"calibration.md shows\n  {shown}\nthe code prints\n  {printed}"


def test_the_malformed_input_catalogue_is_counted_as_it_is():
    """README's headline row and robustness.md count the catalogue of tests/test_malformed_inputs.py
    as it now stands (cases, CLI runs, commands, library and file calls)."""
    from typer.main import get_command

    import test_malformed_inputs as catalogue
    from atlascat.cli import app

    cli, api, files = len(catalogue.CLI_CASES), len(catalogue.API_CASES), len(catalogue.FILE_API)
    commands = {a.split()[0] for _, a, _ in catalogue.CLI_CASES if a}
    assert commands == set(get_command(app).commands), "a command without a malformed case"
    readme = (DOCS.parent / "README.md").read_text()
    m = re.search(r"a catalogue of (\d+) malformed inputs across all (\d+) commands", readme)
    assert m and [int(x) for x in m.groups()] == [cli + api + files, len(commands)], m
    page = " ".join((DOCS / "robustness.md").read_text().split())
    m = re.search(r"the catalogue, (\d+) cases \((\d+) CLI runs over all (\d+) commands: [^;]*; "
                  r"(\d+) library calls; (\d+) file", page)
    assert m and [int(x) for x in m.groups()] == [cli + api + files, cli, len(commands), api,
                                                   files], m


def comment_on(page: str, code: str) -> str:
    """The ``# comment`` of the line of ``page`` that holds ``code`` (what the page says that
    line gives)."""
    line = next(x for x in (DOCS / page).read_text().splitlines() if code in x)
    return line.split("#", 1)[1].strip()


def test_leaderboard_page_shows_what_the_link_predicts():
    """leaderboard.md: `link.predict(theta=0.8, se=0.2)` gives the score, interval and
    percentile its comment shows."""
    from atlascat.catalogue import load_score_link

    shown = [float(x) for x in re.findall(r"\d+\.\d+", comment_on(
        "leaderboard.md", "p.score, p.lo, p.hi, p.percentile"))]
    p = load_score_link("arc").predict(theta=0.8, se=0.2)
    assert shown == [round(p.score, 3), round(p.lo, 3), round(p.hi, 3), round(p.percentile, 1)]
    assert (p.flag, p.warning) == ("", "")


def test_protocol_page_shows_an_items_requests_and_rule():
    """protocol.md: ARC item 3's first request and its scoring rule, as the comments show."""
    from atlascat.catalogue import load_content_bank
    from atlascat.live import build_item_requests, build_requests

    bank = load_content_bank("arc")
    first = re.search(r'continuation="([^"]*)"', comment_on("protocol.md", "reqs = build_"))
    assert build_requests(bank, "3")[0].continuation == first.group(1)
    item = build_item_requests(bank, "3")
    assert str((item.rule, item.gold, item.norm)).replace("'", '"') == \
        comment_on("protocol.md", "item.rule, item.gold, item.norm")
    assert comment_on("protocol.md", "item.score([").startswith(
        f"{item.score([-9.0, -8.5, -3.1, -9.9])}:")


def test_readme_states_the_replayed_models_true_scores(shared_data):
    """The README's two replayed models: the leaderboard model's published ARC score, and the
    new model's mean over all the bundled ARC items (a model outside the tenth the README's
    bank is built from)."""
    import atlascat as at
    from atlascat.live.build_bank import load_published_scores

    readme = " ".join((DOCS.parent / "README.md").read_text().split())
    model = re.search(r"replay:arc#(\S+) --batch-size", readme).group(1)
    published = re.search(r"published ARC score (\d+\.\d)%", readme).group(1)
    scores = load_published_scores(shared_data / "openllm" / "leaderboard_scores.csv.gz", "arc")
    assert f"{100 * scores[model]:.1f}" == published
    new = re.search(r"--bank my_bank --subject replay:arc#(\S+)", readme).group(1)
    n_items, mean = re.search(r"Its mean over all (\d+) items: (\d+\.\d)%", readme).groups()
    arc = at.catalogue.load_responses("arc")
    row = list(arc.subject_ids).index(new)
    start, stop, step = (int(x) for x in re.search(
        r"subset\(subjects=range\((\d+), (\d+), (\d+)\)\)", readme).groups())
    assert row not in range(start, stop, step), "the new model is one of the source models"
    assert (str(arc.n_items), f"{100 * np.nanmean(arc.values[row]):.1f}") == (n_items, mean)


def test_calibration_page_shows_the_graded_banks_first_row(tmp_path, monkeypatch):
    """calibration.md: the columns and first row of the graded bank `atlas calibrate
    ratings.csv --model graded --se --format mirt` writes (the ratings made as the page makes
    them)."""
    from docs_blocks import doc_blocks
    from atlascat.cli import main

    make = next(b for b in doc_blocks("calibration.md") if b.lang == "python"
                and 'to_csv("ratings.csv")' in b.text)
    monkeypatch.chdir(tmp_path)
    exec(compile(make.text, make.where, "exec"), {"__name__": "__main__"})
    header, row = indented_block_after("calibration.md", "is nested in `gpcm`. Columns, each category's level:").split()
    assert main(["calibrate", "ratings.csv", "--model", "graded", "--se", "--format", "mirt",
                 "-o", "graded.csv", "-q"]) == 0
    lines = (tmp_path / "graded.csv").read_text().splitlines()
    assert lines[0] == header
    cells = lines[1].split(",")
    shown = row.split(",")
    head, tail = shown[:shown.index("...")], shown[shown.index("...") + 1:]
    assert cells[:2] == head[:2] and cells[len(cells) - len(tail):] == tail
    assert [f"{float(x):.3f}" for x in cells[2:len(head)]] == head[2:]


def test_live_page_states_where_a_suite_target_se_stops(tmp_path, capsys):
    """live.md: `--target-se 1.6` ends a theta-0.5 simulated model after the items, with the
    average and interval, the page states."""
    from atlascat.cli import main

    page = " ".join((DOCS / "live.md").read_text().split())
    items, avg, lo, hi = re.search(r"`--target-se 1\.6` ends a theta-0\.5 model after (\d+) "
                                   r"items \(average (\S+)%, interval (\S+)-(\S+)%\)",
                                   page).groups()
    assert main(["evaluate", "--suite", "openllm-v1", "--subject", "simulate:0.5",
                 "--target-se", "1.6", "-o", str(tmp_path / "run"), "-q"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"{items} items, stop: target_se" in out
    assert f"average: {avg}% (95% interval {lo}-{hi}%)" in out


def test_cat_page_counts_the_ordinal_tests_that_reached_the_se(tmp_path, monkeypatch, capsys):
    """cat.md: how many of the 400 simulated judge-rated models' tests reached SE 0.3 and how
    many used every prompt, as the page's commands give them (summary.json's stop reasons)."""
    import json

    from docs_blocks import doc_blocks
    from atlascat.cli import main

    make = next(b for b in doc_blocks("cat.md") if b.lang == "python"
                and 'to_csv("ratings.csv")' in b.text)
    monkeypatch.chdir(tmp_path)
    exec(compile(make.text, make.where, "exec"), {"__name__": "__main__"})
    page = " ".join((DOCS / "cat.md").read_text().split())
    se, rest = re.search(r"(\d+) of the 400 tests reached SE 0\.3 \(`summary\.json`, "
                         r"`stop_reasons`\); the other (\d+) used all 20", page).groups()
    assert main(["calibrate", "ratings.csv", "--model", "graded", "-o", "graded.csv", "-q"]) == 0
    assert main(["simulate", "ratings.csv", "--bank", "graded.csv", "--se-stop", "0.3",
                 "--min-items", "5", "--max-items", "30", "-o", "ordinal_run/", "-q"]) == 0
    reasons = json.loads((tmp_path / "ordinal_run" / "summary.json").read_text())["stop_reasons"]
    assert reasons == {"se": int(se), "bank_exhausted": int(rest)}
