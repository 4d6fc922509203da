"""The library raises and returns; the CLI words it: no string in the library (outside
docstrings) tells the user to run an ``atlas`` command. The commands a library error calls for
are added by the CLI (:func:`atlascat.cli._common.cli_advice`)."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from atlascat.errors import BankFolderError, BankKindError, RunFolderError

PKG = Path(__file__).resolve().parents[1] / "src" / "atlascat"


def _commands() -> str:
    import typer

    from atlascat.cli import app

    return "|".join(sorted(typer.main.get_command(app).commands, key=len, reverse=True))


def cli_text(pkg: Path = PKG, commands: str | None = None) -> dict[str, list[int]]:
    """Library file -> lines of string literals (not docstrings) naming ``atlas <command>``."""
    pat = re.compile(rf"\batlas ({commands or _commands()})\b")
    out: dict[str, list[int]] = {}
    for path in sorted(pkg.rglob("*.py")):
        rel = path.relative_to(pkg).as_posix()
        if rel.startswith("cli/"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = {id(node.body[0].value) for node in ast.walk(tree)
                if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                     ast.AsyncFunctionDef))
                and node.body and isinstance(node.body[0], ast.Expr)
                and isinstance(node.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and id(node) not in docs and pat.search(node.value):
                out.setdefault(rel, []).append(node.lineno)
    return out


def test_the_scan_finds_cli_text(tmp_path):
    (tmp_path / "m.py").write_text('"""Run atlas score."""\n'
                                   'def f():\n    raise ValueError("resume with atlas evaluate")\n')
    assert cli_text(tmp_path, "evaluate|score") == {"m.py": [3]}


def test_no_cli_text_in_the_library():
    found = cli_text()
    assert found == {}


@pytest.mark.parametrize("exc,words", [
    (BankFolderError("'x' is not a bank folder (no manifest.json)"), "atlas build-bank"),
    (BankKindError("--bank 'openllm-v1' is a suite, not one bank", "suite"), "--suite"),
    (BankKindError("--suite 'arc' is a bank, not a suite", "bank"), "--bank"),
    (RunFolderError("'x' is not a benchmark run directory"), "atlas benchmark")])
def test_the_cli_words_the_fix(exc, words, capsys):
    from atlascat.cli._common import print_error

    print_error(exc)
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {exc}; ") and words in err and "\n" not in err
