"""Issue 28, "Daily use": the small things a user meets every day (each fixed item that a test
can see; the others are tested where their feature is: `atlas runs` without --db in
test_live_cli_ux.py, --help and one-line warnings in test_cli_conventions.py, --model auto in
test_evaluate_protocol.py)."""
from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from conftest import HANG_S

from atlascat.errors import LiveRunError
from atlascat.live.mockserver import MockOpenAIServer, main as mockserver_main


@pytest.fixture
def taken_port():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    yield sock.getsockname()[1]
    sock.close()


def test_mock_server_on_a_taken_port_is_one_line(taken_port, capsys):
    with pytest.raises(LiveRunError, match=f"cannot serve on 127.0.0.1:{taken_port}.*--port"):
        MockOpenAIServer(None, port=taken_port)
    assert mockserver_main(["--port", str(taken_port)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: cannot serve on") and len(err.strip().splitlines()) == 1


def test_mock_server_module_exits_2_without_a_traceback(taken_port):
    run = subprocess.run([sys.executable, "-m", "atlascat.live.mockserver", "--lm", "toylm",
                          "--port", str(taken_port)], capture_output=True, text=True,
                         timeout=HANG_S)
    assert run.returncode == 2
    assert "Traceback" not in run.stderr and run.stderr.startswith("error: cannot serve on")


def test_load_responses_takes_a_path_as_the_cli_does(shared_data):
    from atlascat.catalogue import load_responses
    from atlascat.errors import ResponseDataError

    path = shared_data / "openllm" / "tiny_truthfulqa.csv.gz"
    assert load_responses(str(path)).shape == load_responses(path).shape == (4635, 97)
    assert load_responses("arc").shape == (2193, 317)          # names still work
    with pytest.raises(ResponseDataError, match="'no/such.csv' does not exist; check the path"):
        load_responses("no/such.csv")
    with pytest.raises(ResponseDataError, match="neither an existing file nor a bundled"):
        load_responses("nope")


def test_readme_counts_the_commands_and_says_to_activate_the_venv():
    import re

    from conftest import ROOT

    from atlascat.cli import app

    readme = " ".join((ROOT / "README.md").read_text().split())
    n = len(app.registered_commands) + len(app.registered_groups)   # `atlas --help` lists
    assert f"across all {n} commands" in readme, re.findall(r"across all \d+ commands", readme)
    assert "source .venv/bin/activate" in readme and ".venv/bin/atlas" in readme


# ------------------------------------------- issue 42: the defects a new user met (one test each)
def _finished_run(tmp_path, capsys, theta: str, name: str) -> str:
    """A finished simulated run on arc written with -o (its own store) -> its run id."""
    import json

    from atlascat.cli import main

    assert main(["evaluate", "--bank", "arc", "--subject", f"simulate:{theta}:3", "-o",
                 str(tmp_path / name), "-q"]) == 0, capsys.readouterr().err
    capsys.readouterr()
    return json.loads((tmp_path / name / "results.json").read_text())[0]["run_id"]


def test_compare_models_by_run_id_finds_the_runs_atlas_runs_lists(tmp_path, capsys):
    """Two runs written with -o: `atlas runs` lists both, so compare-models finds both by id;
    the header names the models with their ids, and every number has one decimal."""
    import re

    from atlascat.cli import main

    a, b = _finished_run(tmp_path, capsys, "1.5", "tuned"), _finished_run(tmp_path, capsys,
                                                                          "-0.5", "base")
    assert main(["runs"]) == 0 and {a, b} <= set(capsys.readouterr().out.split())
    assert main(["compare-models", a, b]) == 0
    out = capsys.readouterr().out
    assert f"simulated(theta=1.5) (run {a})" in out and f"simulated(theta=-0.5) (run {b})" in out
    row = next(ln for ln in out.splitlines() if ln.strip().startswith("arc"))
    numbers = re.findall(r"(?<!\d)-?\d+\.\d+", row)   # each run's score with its interval,
    assert len(numbers) == 9 and all(re.fullmatch(r"-?\d+\.\d", n) for n in numbers), row
    assert re.search(r"\d\.\d \(\d+\.\d-\d+\.\d\)", row), row   # "72.8 (69.5-76.1)"
    assert main(["compare-models", a, "nope"]) == 2
    assert "no run 'nope'" in capsys.readouterr().err


def test_steps_count_from_one_wherever_a_user_sees_them(tmp_path, capsys):
    """The progress lines, `atlas runs --run` (table and JSON) and the HTML page all number the
    first item 1."""
    import json
    import re

    from atlascat.cli import main

    db = tmp_path / "r.sqlite"
    assert main(["evaluate", "--bank", "arc", "--subject", "simulate:0.5:3", "--db", str(db),
                 "--max-items", "5", "--min-items", "5"]) == 0
    progress = [int(n) for n in re.findall(r"step +(\d+)", capsys.readouterr().err)]
    assert progress == [1, 2, 3, 4, 5]
    run_id = json.loads(_json_runs(db, capsys))[0]["run_id"]
    assert main(["runs", "--db", str(db), "--run", run_id, "--json",
                 "-o", str(tmp_path / "page.html")]) == 0
    assert [s["step"] for s in json.loads(capsys.readouterr().out)["steps"]] == [1, 2, 3, 4, 5]
    assert main(["runs", "--db", str(db), "--run", run_id]) == 0
    table = capsys.readouterr().out.splitlines()
    assert [ln.split()[0] for ln in table[2:-1]] == ["1", "2", "3", "4", "5"]
    assert table[-1].startswith("predicted ")     # the run's predicted score follows
    page = (tmp_path / "page.html").read_text()
    assert re.findall(r"<tr><td class='num'>(\d+)</td>", page)[:5] == ["1", "2", "3", "4", "5"]


def _json_runs(db, capsys) -> str:
    from atlascat.cli import main

    assert main(["runs", "--db", str(db), "--json"]) == 0
    return capsys.readouterr().out


def test_atlas_runs_gives_scores_in_percent_beside_the_percent_score(tmp_path, capsys):
    """Observed and model-based accuracy are in percent, as the predicted score beside them."""
    import json

    from atlascat.cli import main

    db = tmp_path / "r.sqlite"
    assert main(["evaluate", "--bank", "arc", "--subject", "simulate:0.5:3", "--db", str(db),
                 "-q"]) == 0
    capsys.readouterr()
    rec = json.loads(_json_runs(db, capsys))[0]
    assert main(["runs", "--db", str(db)]) == 0
    head, row = capsys.readouterr().out.splitlines()[1:3]
    cells = dict(zip(head.split(), row.split()))
    assert cells["observed"] == f"{100 * rec['observed_score']:.1f}%"
    assert cells["model-based"] == f"{100 * rec['model_based_score']:.1f}%"
    assert cells["theta"] == f"{rec['theta']:.3f}"


def test_quiet_is_one_option_that_prints_only_the_essentials(tmp_path, capsys, shared_data):
    """-q/--quiet is defined once (same help everywhere); with it no table is printed, only the
    result lines (evaluate) or the files written (simulate)."""
    import typer

    from atlascat.cli import app, main
    from atlascat.cli._common import QUIET_HELP

    commands = typer.main.get_command(app).commands
    for name in ("evaluate", "calibrate", "simulate", "benchmark", "build-bank"):
        quiet = next(p for p in commands[name].params if p.name == "quiet")
        assert set(quiet.opts) == {"-q", "--quiet"} and quiet.help == QUIET_HELP, name
    assert main(["evaluate", "--bank", "arc", "--subject", "simulate:0.5:3", "--db",
                 str(tmp_path / "r.sqlite"), "-q"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("simulated(theta=0.5) on arc: theta = ")
    assert not any("Live evaluation" in ln or ln.split()[:1] == ["run"] for ln in out)
    assert [ln.split(":")[0].strip() for ln in out[1:] if "minimum" not in ln] == [
        "predicted leaderboard score", "protocol", "accuracy", "report"]
    matrix = shared_data / "openllm" / "tiny_arc.csv.gz"
    assert main(["simulate", str(matrix), "--bank", "paper-arc", "--max-items", "5", "-o",
                 str(tmp_path / "sim"), "-q"]) == 0
    assert [ln.split()[0] for ln in capsys.readouterr().out.splitlines()] == ["wrote"]
    assert main(["simulate", str(matrix), "--bank", "paper-arc", "--max-items", "5", "-o",
                 str(tmp_path / "sim")]) == 0                  # without -q: the figure table
    assert "examinees" in capsys.readouterr().out


def test_warnings_go_to_stderr_only(tmp_path, capsys):
    """A result's warning is printed on stderr, as every other warning and note, never stdout."""
    assert main_ok(["evaluate", "--bank", "arc", "--subject", "simulate:-3", "--db",
                    str(tmp_path / "r.sqlite"), "-q"])
    got = capsys.readouterr()
    assert "warning:" not in got.out
    assert any(ln.startswith(("warning: at or near chance", "warning: its 95% interval"))
               for ln in got.err.splitlines())


def main_ok(argv) -> bool:
    from atlascat.cli import main

    return main(argv) == 0


def test_a_test_held_to_the_banks_minimum_says_so_where_the_result_is(tmp_path, capsys,
                                                                       shared_data):
    """The quick start's --se-stop 0.2 on arc ends at the bank's 45-item minimum: the result
    says that the minimum, not the SE, set the length, and how to change it."""
    from atlascat.cli import main
    from atlascat.cli._common import min_items_note

    note = ("stopped at the bank's minimum of 45 items (the stop rule was met by then: the "
            "predicted score precise enough); --min-items to change")   # which rule it was
    assert main(["evaluate", "--bank", "arc", "--subject", "simulate:0.5:3", "--se-stop", "0.2",
                 "--db", str(tmp_path / "r.sqlite"), "-q"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "(45 items" in out[0] and out[1].strip() == note
    matrix = shared_data / "openllm" / "dense_arc.csv.gz"
    assert main(["simulate", str(matrix), "--bank", "arc", "--se-stop", "0.2", "-o",
                 str(tmp_path / "sim"), "-q"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert "tests stopped at the bank's minimum of 45 items (the stop rule was met by then: " \
        in first and first.endswith("); --min-items to change") and " of " in first
    # a length rule, or a test that went on past the minimum, says nothing
    assert min_items_note([45], ["max_items"], 45, False) is None
    assert min_items_note([50], ["se"], 45, False) is None
    assert min_items_note([10, 12], ["se", "se"], 10, True) == (
        "1 of 2 tests stopped at the minimum of 10 items (the stop rule was met by then: SE "
        "at or below --se-stop); --min-items to change")
    assert "(the stop rule was met by then: no item left informative enough)" in min_items_note(
        [30], ["min_information"], 30, False)   # a --score-range folder's SE 0.5 at 30 items


def test_a_bank_file_without_a_link_names_the_default_minimum(tmp_path, capsys):
    """A calibrated bank file has no score link and so no minimum of its own: the tests held to
    30 items were held by the default, and the note says so (not "the bank's minimum")."""
    from atlascat.cli import main

    assert main(["calibrate", "arc", "-o", str(tmp_path / "bank.csv"), "-q"]) == 0
    assert main(["simulate", "arc", "--bank", str(tmp_path / "bank.csv"), "--se-stop", "0.2",
                 "-o", str(tmp_path / "sim"), "-q"]) == 0
    out = capsys.readouterr().out
    assert "tests stopped at the default minimum of 30 items" in out, out
    assert "bank's minimum" not in out


def _kv(page: str) -> dict:
    import html
    import re

    return {k: html.unescape(v) for k, v in re.findall(r"<tr><td>([^<]+)</td><td>(.*?)</td>",
                                                       page)}


def test_the_html_protocol_rows_say_what_was_done(tmp_path, capsys):
    """A simulated run (one bank, and a suite) sent no request: its page says so and names how
    the items are asked (shots, log-likelihood), never a chat endpoint or a zero-shot prompt."""
    import json
    from pathlib import Path

    from atlascat.cli import main

    pages = {}
    for name, what in (("one", ["--bank", "arc"]), ("suite", ["--suite", "openllm-v1",
                                                              "--max-items", "12"])):
        assert main(["evaluate", *what, "--subject", "simulate:0.5:3", "-o",
                     str(tmp_path / name), "-q"]) == 0
        row = json.loads((tmp_path / name / "results.json").read_text())[0]
        pages[name] = Path(row["report"]).read_text()
    capsys.readouterr()
    for name, page in pages.items():
        kv = _kv(page)
        assert kv["endpoint kind"].startswith("none: simulated"), name
        assert "arc: 25-shot, log-likelihood (acc_norm)" in kv["requests"], name
        assert "prompt" not in kv and "zero-shot" not in page and "chat" not in page, name
    assert "gsm8k: 5-shot, generation (gsm8k_exact)" in _kv(pages["suite"])["requests"]


def test_the_arena_example_runs_on_the_bundled_battles(tmp_path, capsys):
    """`atlas arena fit arena-demo` (the README's example) runs on the bundled file, which is
    exactly what its documented generator gives; the ratings recover the made-up truth's order."""
    import numpy as np
    import pandas as pd

    from atlascat.catalogue import resolve_battles
    from atlascat.cli import main
    from atlascat.design.arena import DEMO_RATINGS, random_battles

    shipped = pd.read_csv(resolve_battles("arena-demo"))
    again = random_battles(DEMO_RATINGS, 400, tie_param=1.5, rng=np.random.default_rng(0))
    pd.testing.assert_frame_equal(shipped, again.astype(object), check_dtype=False)
    assert main(["arena", "fit", "arena-demo", "-o", str(tmp_path / "ratings.csv")]) == 0
    assert "8 players, 400 games" in capsys.readouterr().out
    ratings = pd.read_csv(tmp_path / "ratings.csv")
    truth = pd.Series(DEMO_RATINGS)[ratings["player"]].to_numpy()
    assert np.corrcoef(truth, ratings["rating"])[0, 1] > 0.9
    assert main(["arena", "schedule", "arena-demo", "-n", "10"]) == 0
    assert "next 10 pairs" in capsys.readouterr().out
    (tmp_path / "arena-demo").write_text("model_a,model_b,winner\nx,y,a\ny,x,a\n")  # a file wins
    assert resolve_battles(tmp_path / "arena-demo") == tmp_path / "arena-demo"


def test_pattern_frequencies_count_people_not_rows(tmp_path, capsys, shared_data):
    """LSAT7 is 32 response patterns of 1,000 people: calibrate and score say both."""
    from atlascat.cli import main

    lsat7 = str(shared_data / "classic" / "lsat7_patterns.csv")
    bank = str(tmp_path / "b.csv")
    assert main(["calibrate", lsat7, "--freq-column", "freq", "--model", "2pl", "--prior-a",
                 "none", "-o", bank]) == 0
    assert " on 1000 subjects (32 response patterns): " in capsys.readouterr().out
    assert main(["score", lsat7, "--bank", bank, "--freq-column", "freq"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith(
        "1000 subjects (32 response patterns), median SE ")
    matrix = str(shared_data / "openllm" / "tiny_truthfulqa.csv.gz")   # no frequencies: rows
    assert main(["calibrate", matrix, "--model", "2pl", "-o", bank, "-q"]) == 0
    assert " on 4635 subjects: " in capsys.readouterr().out


def test_scores_are_read_by_header_names(tmp_path):
    """build-bank --scores: the columns are found by name (any order), never by position."""
    import pandas as pd

    from atlascat.bankdir import read_scores
    from atlascat.errors import ConfigError

    path = tmp_path / "s.csv"
    pd.DataFrame({"score": [60.0, 40.0], "note": ["x", "y"], "model": ["m1", "m2"]}).to_csv(
        path, index=False)
    assert read_scores(path, ["m1", "m2"]).to_dict() == {"m1": 0.6, "m2": 0.4}
    pd.DataFrame({"name": ["m1", "m2"], "value": [0.6, 0.4]}).to_csv(path, index=False)
    with pytest.raises(ConfigError, match=r"has columns name, value; it needs a model column "
                                          r"\(model, subject_id, name or Model_Name\) and a "
                                          r"'score' column"):
        read_scores(path, ["m1", "m2"])


def test_the_old_model_flag_of_evaluate_hints_at_llm():
    """`atlas evaluate --model X` (X an LLM) in a shell: one line, exit 2, `did you mean --llm X?`"""
    run = subprocess.run([sys.executable, "-m", "atlascat", "evaluate", "--bank", "arc",
                          "--subject", "simulate:0", "--model=my-org/my-model"],
                         capture_output=True, text=True, timeout=HANG_S)
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.strip().splitlines() == [
        "error: atlas evaluate has no --model (that is the IRT model); did you mean "
        "--llm my-org/my-model?"]


@pytest.mark.parametrize("port", ["70000", "-1", "abc"])
def test_mock_server_on_an_impossible_port_is_one_line(port, capsys):
    """`python -m atlascat.live.mockserver --port 70000`: one line, exit 2, no traceback."""
    from atlascat.errors import ConfigError

    assert mockserver_main(["--port", port]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1 and port in err
    if port == "70000":
        with pytest.raises(ConfigError, match="--port 70000 is not a TCP port"):
            MockOpenAIServer(None, port=70000)
        run = subprocess.run([sys.executable, "-m", "atlascat.live.mockserver", "--port", port],
                             capture_output=True, text=True, timeout=HANG_S)
        assert run.returncode == 2 and "Traceback" not in run.stderr
        assert run.stderr.strip().splitlines() == [
            "error: --port 70000 is not a TCP port: give 1-65535 (0: any free port)"]


def _help_at_80(command: list) -> list:
    import os

    from pathlib import Path

    atlas = Path(sys.executable).parent / "atlas"   # the console script a user runs
    run = subprocess.run([str(atlas), *command, "--help"], capture_output=True, text=True,
                         timeout=HANG_S, env={**os.environ, "COLUMNS": "80"})
    assert run.returncode == 0, run.stderr
    return run.stdout.splitlines()


@pytest.mark.parametrize("command,most_lines", [(["evaluate"], 130), (["simulate"], 90)])
def test_help_is_readable_at_80_columns(command, most_lines):
    """`atlas evaluate --help` at 80 columns: at most 130 lines, every option's help in a column
    at least 40 characters wide, no line past 80, the usage line first."""
    import re

    lines = _help_at_80(command)
    assert len(lines) <= most_lines and max(map(len, lines)) <= 80
    assert lines[0] == f"Usage: atlas {' '.join(command)} [OPTIONS]" + (
        " [RESPONSES]..." if command == ["simulate"] else "")
    starts = [m.start(2) for ln in lines if (m := re.match(r"^  (-\S.*?\S)  +(\S)", ln))]
    column = max(set(starts), key=starts.count)
    assert 80 - column >= 40, column
    assert not any("list[" in ln or "│" in ln for ln in lines)
