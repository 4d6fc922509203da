"""The CLI keeps options and display (issue 28): no function over 150 lines in cli/, no command
module importing another, and no private name of a CLI module imported anywhere."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "atlascat"
CLI = SRC / "cli"
MAX_LINES = 150


def _functions(tree):
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


@pytest.mark.parametrize("path", sorted(CLI.glob("*.py")), ids=lambda p: p.name)
def test_no_cli_function_is_over_150_lines(path):
    tree = ast.parse(path.read_text())
    long = [(f.name, f.end_lineno - f.lineno + 1) for f in _functions(tree)
            if f.end_lineno - f.lineno + 1 > MAX_LINES]
    assert not long, f"{path.name}: {long}"


def _imports(path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            yield node


@pytest.mark.parametrize("path", sorted(CLI.glob("cmd_*.py")), ids=lambda p: p.name)
def test_no_command_imports_another_command(path):
    bad = [f"{n.module}" for n in _imports(path)
           if n.module and n.module.split(".")[-1].startswith("cmd_")
           and (n.level > 0 or n.module.startswith("atlascat.cli."))]
    assert not bad, f"{path.name} imports {bad}"


def test_no_private_name_of_the_cli_is_imported():
    """Neither the package nor the tests reach into a CLI module's private names."""
    bad = []
    tests = Path(__file__).resolve().parent
    for path in [*sorted(SRC.rglob("*.py")), *sorted(tests.glob("*.py"))]:
        inside_cli = path.parent == CLI
        for n in _imports(path):
            module = n.module or ""
            from_cli = module.startswith("atlascat.cli") or (inside_cli and n.level == 1)
            private = [a.name for a in n.names if a.name.startswith("_")
                       and not a.name.startswith("__")]
            if from_cli and private:
                bad.append(f"{path.name}: from {'.' * n.level}{module} import {private}")
    assert not bad, "\n".join(bad)


def test_commands_registered_when_needed_list_every_command(capsys):
    """`atlas NAME` registers the module of NAME; `atlas --help` and the app's command list
    then hold every command, in the order of their modules, whatever ran before."""
    import subprocess
    import sys

    from atlascat.cli import app, main

    code = ("import sys\nfrom atlascat.cli import app, main\nmain(['simulate', '--help'])\n"
            "print([c.name for c in app._commands], file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**__import__("os").environ, "PYTHONPATH": str(SRC.parent)})
    assert proc.stderr.strip().splitlines()[-1] == "['simulate']"
    assert main(["score", "--help"]) == 0
    names = [c.name for c in app.registered_commands]
    assert names == sorted(names, key=lambda n: n.replace("-", "_")) and len(names) > 10
    assert [g.name for g in app.registered_groups] == ["arena"]
    assert main(["--help"]) == 0
    listed = capsys.readouterr().out
    assert all(f"  {n} " in listed for n in names + ["arena"])
