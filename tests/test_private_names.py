"""No module uses a private name of another package: no ``from ..x import _name`` across
packages, and no ``obj._name`` where ``_name`` is defined only in another package (a package's
privates are its own; what another package needs is public)."""
from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "src" / "atlascat"


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _package(rel: Path) -> str:
    """The top-level package (or module) a file belongs to: ``suite``, ``cli``, ``errors``."""
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _target(rel: Path, node: ast.ImportFrom) -> str | None:
    """The top-level package an ImportFrom reads from (None: outside atlascat)."""
    if node.level:
        here = list(rel.parent.parts)
        base = here[: len(here) - (node.level - 1)] if node.level > 1 else here
        parts = base + (node.module.split(".") if node.module else [])
    elif (node.module or "").split(".")[0] == "atlascat":
        parts = node.module.split(".")[1:]
    else:
        return None
    return parts[0] if parts else None


def private_uses(pkg: Path = PKG) -> list[str]:
    trees = {path.relative_to(pkg): ast.parse(path.read_text(encoding="utf-8"))
             for path in sorted(pkg.rglob("*.py"))}
    defined: dict[str, set[str]] = {}        # private name -> packages defining it
    for rel, tree in trees.items():
        for node in ast.walk(tree):
            names = []
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names = [node.name]
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names = [node.attr]
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names = [node.id]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names = [node.target.id]
            for n in names:
                if _private(n):
                    defined.setdefault(n, set()).add(_package(rel))
    out = []
    for rel, tree in trees.items():
        here = _package(rel)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                target = _target(rel, node)
                for alias in node.names:
                    if target and target != here and _private(alias.name):
                        out.append(f"{rel.as_posix()}:{node.lineno} imports {alias.name} from "
                                   f"{target}")
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) \
                    and _private(node.attr):
                owners = defined.get(node.attr, set())
                if owners and here not in owners:
                    out.append(f"{rel.as_posix()}:{node.lineno} uses .{node.attr} of "
                               f"{', '.join(sorted(owners))}")
    return out


def test_the_scan_finds_a_private_use(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "m.py").write_text("class L:\n    def _curve(self): ...\n"
                                          "def _helper(): ...\n")
    (tmp_path / "b" / "n.py").write_text("from ..a.m import _helper\n"
                                          "def f(link):\n    return link._curve()\n")
    found = private_uses(tmp_path)
    assert found == ["b/n.py:1 imports _helper from a", "b/n.py:3 uses ._curve of a"]


def test_no_module_uses_a_private_name_of_another_package():
    assert private_uses() == []
