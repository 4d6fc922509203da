"""One consistent CLI: option names, help texts, deprecated aliases, bundled names, output that
never truncates data, library defaults, and a progress bar that ends where the fit ended."""
from __future__ import annotations

import io
import json
import re

import numpy as np
import pandas as pd
import pytest
import typer
from rich.console import Console

import atlascat as at
from atlascat import catalogue
import atlascat.cli._common as display
from atlascat.cli import app, main
from atlascat.irt.bank import ItemBank

OWNED_ELSEWHERE = {"evaluate", "runs"}   # live-runner's commands


def _commands():
    root = typer.main.get_command(app)

    def walk(cmd, path=()):
        if hasattr(cmd, "commands"):
            for name, sub in cmd.commands.items():
                yield from walk(sub, path + (name,))
        else:
            yield path, cmd

    return [(" ".join(p), c) for p, c in walk(root) if p[0] not in OWNED_ELSEWHERE]


COMMANDS = _commands()


@pytest.mark.parametrize("name,cmd", COMMANDS, ids=[n for n, _ in COMMANDS])
def test_every_option_has_help_in_one_default_style(name, cmd):
    for p in cmd.params:
        if getattr(p, "hidden", False) or p.name == "help":
            continue
        assert (p.help or "").strip(), f"{name}: {p.name} has no help"
        # defaults are shown by typer as [default: X]; computed ones are written the same way
        assert not re.search(r"\(default|Default \w|; default ", p.help), f"{name}: {p.name}: {p.help}"
        if p.param_type_name == "option" and isinstance(p.default, bool):
            assert p.is_flag, f"{name}: {p.name} is a bool option that takes a value"


@pytest.mark.parametrize("name,cmd", COMMANDS, ids=[n for n, _ in COMMANDS])
def test_output_is_dash_o_output(name, cmd):
    outs = [p for p in cmd.params if p.param_type_name == "option"
            and any(o in ("-o", "--out", "--output") for o in p.opts) and not p.hidden]
    for p in outs:
        assert "-o" in p.opts and "--output" in p.opts, f"{name}: {p.opts}"


def test_model_means_the_irt_model():
    for name, cmd in COMMANDS:
        for p in cmd.params:
            if "--model" in getattr(p, "opts", []):
                assert "IRT model" in p.help, name


def test_flags_have_no_value_placeholder(capsys):
    with pytest.raises(SystemExit):
        app(["fit", "--help"], prog_name="atlas")
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if "--json" in ln)
    assert "<bool>" not in line and "BOOLEAN" not in line


# --------------------------------------------------------------------------- fixtures
@pytest.fixture
def small(tmp_path):
    rng = np.random.default_rng(4)
    ids = [f"q{j}" for j in range(10)]
    bank = ItemBank(ids, rng.uniform(0.8, 2, 10), np.linspace(-1.5, 1.5, 10))
    bank.write(tmp_path / "bank.csv")
    theta = rng.normal(size=120)
    y = (rng.random((120, 10)) < bank.probability(theta)).astype(int)
    df = pd.DataFrame(y, columns=ids)
    df.insert(0, "model", [f"m{i}" for i in range(120)])
    df.to_csv(tmp_path / "resp.csv", index=False)
    pd.DataFrame({"subject_id": ["a", "b"], "theta": [0.0, 1.0]}).to_csv(tmp_path / "th.csv",
                                                                         index=False)
    return tmp_path


# --------------------------------------------------------------------------- aliases
def test_simulate_old_spellings_are_gone(small, capsys):
    """An unreleased package keeps no shims: --responses and --out were renamed before 0.1.0
    (CHANGELOG.md), and typer refuses them with its one-line usage error."""
    for old in (["--responses", str(small / "resp.csv")], ["--out", str(small / "o")]):
        rc = main(["simulate", "--bank", str(small / "bank.csv"), *old, "-o", str(small / "s")])
        assert rc == 2 and "No such option" in capsys.readouterr().err


def test_simulate_positional_responses(small, capsys):
    out = small / "sim2"
    assert main(["simulate", str(small / "resp.csv"), "--bank", str(small / "bank.csv"),
                 "-o", str(out), "--min-items", "3", "--max-items", "5"]) == 0
    assert "deprecated" not in capsys.readouterr().err
    assert len(pd.read_csv(out / "person_scores.csv")) == 120


def test_items_takes_the_bank_as_an_option_only(small, capsys):
    """The old `atlas items BANK` is gone (no shims in an unreleased package: CHANGELOG.md)."""
    assert main(["items", str(small / "bank.csv"), "--json"]) == 2
    assert "give the bank with --bank BANK" in capsys.readouterr().err
    assert main(["items", "--bank", str(small / "bank.csv"), str(small / "resp.csv"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["n_items"] == 10


@pytest.mark.parametrize("argv", [["benchmark", "R", "--out", "x"], ["compare", ".", "--out", "x"],
                                  ["report", ".", "--out", "x"], ["runs", "--html", "x.html"],
                                  ["items", "--bank", "arc", "--responses", "R"]])
def test_removed_spellings_are_usage_errors(argv, capsys):
    assert main(argv) == 2
    assert "No such option" in capsys.readouterr().err


# --------------------------------------------------------------------------- names
def test_bundled_names_mean_one_bank_everywhere(capsys):
    content = catalogue.BankRef.from_option("arc").load()
    paper = catalogue.BankRef.from_option("paper-arc").load()
    assert len(paper) == 839 and len(content) != len(paper)
    assert content.metadata is not None and "question" in content.metadata.columns
    for argv in (["items", "--bank", "arc", "--json"], ["info", "arc", "--json"]):
        assert main(argv) == 0
        rep = json.loads(capsys.readouterr().out)
        assert rep["n_items"] == len(content)
    assert main(["info", "paper-arc", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["n_items"] == 839


def test_info_prints_words_not_python_dicts(capsys):
    """`atlas info` names each parameter and prints its spread as `min 0.3, q05 1.9, ...`, and
    flagged items by id: no `{'min': ...}` or `[]` reprs on a reader's screen."""
    assert main(["info", "arc"]) == 0
    out = capsys.readouterr().out
    assert "a (slope): min " in out and "b (difficulty, on theta's scale): min " in out
    assert "{'" not in out and "[]" not in out and "['" not in out
    assert re.search(r"items with c > 0\.5: \d+ \(\d+(, \d+)*\)", out), out
    assert main(["info", "arc", "--json"]) == 0            # the JSON keeps its keys
    assert json.loads(capsys.readouterr().out)["quantiles"]["a"]["min"] > 0


def test_missing_content_bank_points_to_the_paper_bank():
    for bench in catalogue.CONTENT_BENCHMARKS:
        try:
            catalogue.content_bank_path(bench)
        except at.BankError as exc:
            assert bench in str(exc)
            if bench in catalogue.BANK_BENCHMARKS:
                assert f"paper-{bench}" in str(exc)


def test_bundled_matrix_name_as_responses(capsys):
    assert main(["score", "truthfulqa", "--bank", "paper-truthfulqa", "-m", "eap"]) == 0
    out = capsys.readouterr().out
    assert f"{catalogue.load_responses('truthfulqa').n_subjects} subjects" in out


# --------------------------------------------------------------------------- output
def test_piped_tables_never_truncate(capsys):
    run_id = "1f6c0ffee" + "0123456789abcdef" * 3
    df = pd.DataFrame({"run": [run_id], "model": ["org/" + "very-long-model-name-" * 4],
                       "theta": [0.123456789]})
    display.print_frame(df, title="runs")
    out = capsys.readouterr().out
    assert run_id in out and "very-long-model-name-" * 4 in out and "0.1235" in out
    assert "…" not in out and "..." not in out


def test_piped_prose_is_not_wrapped(capsys):
    display.console.print("word " * 60)
    assert len(capsys.readouterr().out.strip().splitlines()) == 1


def test_calibrate_progress_bar_ends_at_the_iteration_reached(small, monkeypatch):
    buf = io.StringIO()
    monkeypatch.setattr(display, "err_console", Console(file=buf, force_terminal=True, width=100))
    out = small / "bank_out.csv"
    assert main(["calibrate", str(small / "resp.csv"), "-o", str(out), "--model", "2pl",
                 "--max-iter", "700", "--summary", str(small / "s.json")]) == 0
    n_iter = json.loads((small / "s.json").read_text())["n_iter"]
    assert n_iter < 700
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", buf.getvalue())
    assert f"{n_iter}/{n_iter}" in text and "700/700" not in text


def test_cli_and_library_calibrate_defaults_agree(small):
    out = small / "cli_bank.csv"
    assert main(["calibrate", str(small / "resp.csv"), "-o", str(out), "--quiet"]) == 0
    lib = at.calibrate(at.ResponseMatrix.read(small / "resp.csv")).bank
    cli = ItemBank.read(out)
    assert list(cli.item_ids) == list(lib.item_ids)
    np.testing.assert_allclose(cli.a, lib.a, rtol=1e-12)
    np.testing.assert_allclose(cli.b, lib.b, rtol=1e-12)


def test_report_defaults_into_the_run_directory_not_the_cwd(tmp_path, monkeypatch):
    import atlascat.studies.report as report_mod

    seen = {}

    def fake_write_report(runs, out, title=None):
        seen["out"] = out
        out.write_text("<html></html>")
        return out

    monkeypatch.setattr(report_mod, "write_report", fake_write_report)
    monkeypatch.chdir(tmp_path)
    run = tmp_path / "runs" / "arc"
    run.mkdir(parents=True)
    assert main(["report", str(run)]) == 0
    assert seen["out"] == run / "report.html" and not (tmp_path / "report.html").exists()


def test_piped_usage_errors_are_one_line(capsys):
    assert main(["score", "--no-such-option"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--no-such-option" in err and "--help" in err


@pytest.mark.parametrize("argv, option", [
    (["evaluate", "--bank", "arc", "--subject", "simulate:0", "--subject", "simulate:1"],
     "--subject/-s"),
    (["evaluate", "--bank", "arc", "-s", "simulate:0", "--subject=simulate:1"], "--subject/-s"),
    (["info", "arc", "--json", "--json"], "--json"),
    (["simulate", "--bank", "arc", "--thetas", "t.csv", "--seed", "1", "--seed", "2"], "--seed"),
])
def test_an_option_of_one_value_given_twice_is_one_line(argv, option, tmp_path, monkeypatch,
                                                        capsys):
    """Every command (AtlasCommand) refuses an option of one value given twice, where click
    keeps the last silently: one line naming it, exit 2, nothing run or written."""
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{option} was given more than once" in err, err
    assert list(tmp_path.iterdir()) == []


def test_a_repeatable_option_may_be_given_again(tmp_path, capsys):
    """--llm (a list option, one name per model) is not refused by that check: the command's
    own rule answers (one simulate: model, one --llm)."""
    assert main(["evaluate", "--bank", "arc", "--subject", "simulate:0", "--llm", "a",
                 "--llm", "b", "-o", str(tmp_path / "out")]) == 2
    assert "was given more than once" not in capsys.readouterr().err


# --------------------------------------------------------------------------- help (issue 28)
def _help(name, monkeypatch, capsys) -> str:
    monkeypatch.setenv("COLUMNS", "400")   # one line per option: nothing wrapped
    with pytest.raises(SystemExit):
        app([*name.split(), "--help"], prog_name="atlas")
    return capsys.readouterr().out


def _usage(out: str) -> str:
    return next(ln for ln in out.splitlines() if ln.startswith("Usage: "))


@pytest.mark.parametrize("name", sorted(n for n, _ in COMMANDS))
def test_help_prints_every_help_text_whole(name, monkeypatch, capsys):
    """A help text's '[default: ...]' note is printed, not taken for rich markup and dropped
    ("Run name ." was "Run name [default: the file stem]."); no '<list[str]>', no '{ARG}'."""
    out = _help(name, monkeypatch, capsys)
    cmd = dict(COMMANDS)[name]
    for p in cmd.params:
        if p.help and not p.hidden and "[" in p.help:
            assert " ".join(p.help.split()) in " ".join(out.split()), (name, p.name)
    assert "<list[" not in out and "{" not in _usage(out)
    assert not re.search(r"\w \.(\s|$)", out), name


def test_help_shows_the_computed_defaults(monkeypatch, capsys):
    out = " ".join(_help("simulate", monkeypatch, capsys).split())
    for text in ("Never stop before this many items. [default: 30",
                 "Stop after this many items. [default: 500",
                 "[default: 1; --suite: 6", "Pick among the k best items. [default: 5"):
        assert text in out
    out = " ".join(_help("evaluate", monkeypatch, capsys).split())
    assert "Fewest items asked. [default: 30" in out and "[default: 1 = classic CAT" in out
    usage = _usage(_help("calibrate", monkeypatch, capsys))
    assert "atlas calibrate [OPTIONS] RESPONSES" in usage


def test_library_warnings_print_as_one_line(tmp_path, capsys):
    """Issue 28, daily use: calibrate printed a raw 'typer/main.py:1445: UserWarning: ...'."""
    from atlascat.cli import main

    rng = np.random.default_rng(2)
    y = (rng.random((300, 6)) < 0.6).astype(float)
    y[:, 2] = 1.0                                         # every model right: left out
    at.ResponseMatrix(y, [f"m{i}" for i in range(300)], [f"q{j}" for j in range(6)]).write(
        tmp_path / "resp.csv")
    assert main(["calibrate", str(tmp_path / "resp.csv"), "-o", str(tmp_path / "b.csv")]) == 0
    err = capsys.readouterr().err
    assert "warning: 1 item(s) have the same response from every subject" in err
    assert "UserWarning" not in err and ".py:" not in err


def test_bound_margin_help_states_the_default_it_uses():
    from atlascat.cli.cmd_simulate import HELP
    from atlascat.scorelink.settings import BOUND_MARGIN

    assert f"[default: {100 * BOUND_MARGIN:g}% of the scale: {BOUND_MARGIN:g} on 0-1]" in \
        HELP["bound_margin"]


def test_atlas_alone_prints_its_help_as_help(capsys):
    """`atlas` with no command shows the usage and the command list line by line (not folded
    into one 'error: Usage: ...' line), and exits 2 as any usage error."""
    assert main([]) == 2
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert lines[0].startswith("Usage: ") and not err.startswith("error:")
    assert any(ln.strip().startswith("evaluate ") for ln in lines)
    assert any(ln.strip().startswith("build-bank ") for ln in lines)
