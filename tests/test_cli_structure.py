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
