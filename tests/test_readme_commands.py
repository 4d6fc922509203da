"""Every command in the README runs as written, in order, from a fresh folder (issue 19, item 4).

The commands are read from the README itself: every line of a ```bash block (``make`` lines
excepted: they are the suite's own entry points) and every ``$ ...`` command of a ```text block
(with its ``\\`` continuation lines), whose output must contain the lines the README shows under
it (tests/docs_blocks.py; ``<!-- docs-test: no-output-check REASON -->`` above a block that
shows another run's output). They run in a temporary folder that has ``../shared``
beside it, exactly as a user in a clone would type them. A command ending in ``&`` starts a
server: it is started in the background (on a free port when 8000 is taken; the URLs of the
later commands follow it) and stopped at the end. A block marked
``<!-- docs-test: own-folder -->`` depends on no command above it: it runs in a fresh folder of
its own, as a test of its own, which make test's second worker runs beside the rest.
"""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from docs_blocks import (check_transcript, doc_blocks, run_shell, shell_commands, start_server,
                         transcript, user_folder)

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def readme_parts(text: str) -> dict[str, list[tuple[str, list[str] | None, str]]]:
    """The README's commands by the folder they run in: ``"main"`` (in README order), and one
    part per ``own-folder`` block, named by where it is. Each step is (command, the output the
    README shows for it or None, where): every line of a ```bash block (``make`` lines
    excepted: they are the suite's own entry points) and every ``$ ...`` command of a ```text
    block, with the lines shown under it (None where the block's directive is
    ``no-output-check`` or it shows nothing)."""
    parts: dict[str, list] = {"main": []}
    for b in doc_blocks("README.md", text):
        if b.directive == "skip":
            continue
        if b.lang == "bash":
            steps = [(c, None, b.where) for c in shell_commands(b.text)
                     if not c.startswith("make ")]
        elif b.lang == "text":
            steps = [(c, (out or None) if b.directive != "no-output-check" else None, b.where)
                     for c, out in transcript(b.text)]
        else:
            continue
        parts.setdefault(b.where if b.directive == "own-folder" else "main", []).extend(steps)
    return parts


def readme_steps(text: str) -> list[tuple[str, list[str] | None, str]]:
    """Every part's steps (:func:`readme_parts`), "main" first."""
    return [step for steps in readme_parts(text).values() for step in steps]


def readme_commands(text: str) -> list[str]:
    """The README's shell commands, in order (see :func:`readme_steps`)."""
    return [c for c, _, _ in readme_steps(text)]


def test_readme_parser_finds_the_commands():
    cmds = readme_commands(README.read_text())
    assert any(c.startswith("atlas calibrate") for c in cmds)
    assert any(c.startswith("atlas evaluate") and "--batch-size 8" in c for c in cmds)
    assert not any(c.startswith("make ") or c.endswith("\\") for c in cmds)
    assert readme_commands("```bash\natlas a \\\n  --b 1\n```\n```text\n$ atlas c \\\n"
                           "   --d\nout\n```\n") == ["atlas a --b 1", "atlas c --d"]


def readme_arc_table(text: str) -> dict[str, list[str]]:
    """The README's ARC benchmark table: method -> [items, MAE +- SE, IES, coverage]."""
    head = "| Method | Items | theta MAE +- SE | IES | Coverage 95% |"
    lines = text[text.index(head):].splitlines()[2:]
    rows = {}
    for line in lines:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0]] = cells[1:]
    return rows


def check_readme_arc_table(text: str, table_csv: Path) -> None:
    """The README's ARC table is what `atlas benchmark` now prints (issue 19: tables that
    reproduce with their stated command)."""
    import pandas as pd

    got = pd.read_csv(table_csv).set_index("method")
    for method, (items, mae, ies, cov) in readme_arc_table(text).items():
        r = got.loc[method]
        now = [f"{r.items_mean:.1f}", f"{r.theta_mae:.3f} +- {r.theta_mae_se:.3f}",
               f"{r.ies:.3f}", f"{100 * r.coverage:.1f}%"]
        assert [items, mae, ies, cov] == now, (
            f"README's ARC table, {method}: {[items, mae, ies, cov]} but the command now gives "
            f"{now}; regenerate the table")


def test_readme_arc_table_is_parsed():
    rows = readme_arc_table(README.read_text())
    assert {"Random-100", "ATLAS tau=0.2"} <= set(rows) and all(len(v) == 4 for v in rows.values())


def written_outputs(cmd: str) -> list[str]:
    """The ``-o`` / ``--output`` paths a command names (none with a shell variable in them)."""
    words = cmd.split()
    return [words[k + 1] for k, w in enumerate(words[:-1])
            if w in ("-o", "--output") and "$" not in words[k + 1]]


def test_readme_parts_split_at_own_folder_blocks():
    text = ("```bash\natlas a -o x\n```\n<!-- docs-test: own-folder -->\n```bash\n"
            "atlas b --output y/\natlas c\n```\n```bash\natlas d\n```\n")
    parts = readme_parts(text)
    assert {k: [c for c, _, _ in v] for k, v in parts.items()} == {
        "main": ["atlas a -o x", "atlas d"], "README.md:5": ["atlas b --output y/", "atlas c"]}
    assert written_outputs("atlas b --output y/ && atlas r -o $b") == ["y/"]
    assert [c for c, _, _ in readme_steps(text)] == [
        "atlas a -o x", "atlas d", "atlas b --output y/", "atlas c"]


@pytest.mark.slow
@pytest.mark.parametrize("part", list(readme_parts(README.read_text())))
def test_every_readme_command_runs_as_written(part, tmp_path, shared_data):
    work, env = user_folder(tmp_path, shared_data)
    servers: list[subprocess.Popen] = []
    port = None
    steps = readme_parts(README.read_text())[part]
    try:
        for cmd, shown, where in steps:
            if port is not None:
                cmd = cmd.replace("127.0.0.1:8000", f"127.0.0.1:{port}")
            if cmd.endswith("&"):
                proc, _, used = start_server(cmd[:-1].strip(), work, env)
                servers.append(proc)
                port = used
                continue
            out = run_shell(cmd, work, env, f"{where}: README command failed: {cmd}")
            if shown:
                check_transcript(out, shown, where, cmd)
    finally:
        for p in servers:
            p.terminate()
            p.wait(timeout=10)
    for cmd, _, where in steps:
        for path in written_outputs(cmd):
            assert (work / path).exists(), f"{where}: `{cmd}` wrote no {path}"
    if part == "main":
        assert (work / "runs" / "arc" / "report.html").exists()
        check_readme_arc_table(README.read_text(), work / "runs" / "arc" / "table_ability.csv")
        assert (work / "runs" / "my-model" / "results.json").exists()
