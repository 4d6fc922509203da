"""The package's floors (README "Layout"): no import circle among the modules of src/atlascat,
imports inside functions included; no module importing from a floor above its own; no file over
800 lines."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "src" / "atlascat"

# bottom to top; a module may import from its own floor or a lower one
FLOORS: tuple[tuple[str, ...], ...] = (
    ("errors", "_version", "_heap", "_blas", "_lazy", "_table", "_repr", "_startup"),
    ("validation",),
    ("responses", "filtering"),
    ("irt",),
    ("cat", "design", "content"),
    ("scorelink", "predict"),
    ("catalogue", "datasets", "bankdir"),
    ("studies", "suite"),
    ("live",),
    ("cli", "demo", "__main__", "__init__"),
)
MAX_LINES = 800


def module_names(pkg: Path = PKG) -> dict[str, Path]:
    """Dotted name (without the 'atlascat.' prefix, package = its __init__) -> file."""
    names = {}
    for path in sorted(pkg.rglob("*.py")):
        parts = list(path.relative_to(pkg).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join(parts) or "__init__"] = path
    return names


def import_graph(pkg: Path = PKG) -> dict[str, set[str]]:
    """Module -> the package modules it imports (module level or inside functions)."""
    names = module_names(pkg)
    graph = {}
    for name, path in names.items():
        is_pkg = path.name == "__init__.py"
        here = [] if name == "__init__" else name.split(".")
        package = here if is_pkg else here[:-1]
        deps = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
                    mod = ".".join(base + ([node.module] if node.module else []))
                elif (node.module or "").split(".")[0] == "atlascat":
                    mod = node.module[len("atlascat."):] if "." in node.module else ""
                else:
                    continue
                # "from pkg import sub" imports the submodule; any other name, the module
                subs = [f"{mod}.{a.name}" if mod else a.name for a in node.names]
                found = [s if s in names else (mod or "__init__") for s in subs]
            elif isinstance(node, ast.Import):
                found = [a.name[len("atlascat."):] if "." in a.name else "__init__"
                         for a in node.names if a.name.split(".")[0] == "atlascat"]
            else:
                continue
            deps.update(f for f in found if f in names and f != name)
        graph[name] = deps
    return graph


def floor_of(name: str) -> int:
    top = name.split(".")[0]
    for i, members in enumerate(FLOORS):
        if top in members:
            return i
    raise KeyError(f"module atlascat.{name} sits on no floor: add {top!r} to FLOORS in "
                   "tests/test_layering.py and to the README's Layout")


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}

    def visit(node, stack):
        state[node] = 1
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                return stack + [node, dep]
            if dep not in state:
                found = visit(dep, stack + [node])
                if found:
                    return found
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node, [])
            if found:
                return found
    return None


def upward_imports(graph) -> list[str]:
    return sorted(f"atlascat.{a} (floor {floor_of(a)}) imports atlascat.{b} (floor {floor_of(b)})"
                  for a, deps in graph.items() for b in deps if floor_of(b) > floor_of(a))


def test_every_module_has_a_floor():
    for name in module_names():
        floor_of(name)


def test_no_import_circle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import circle: " + " -> ".join(f"atlascat.{m}" for m in cycle)


def test_nothing_imports_from_a_floor_above():
    assert upward_imports(import_graph()) == []


def test_no_file_over_the_limit():
    long = {str(p.relative_to(PKG)): n for p in PKG.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}, f"split these files (at most {MAX_LINES} lines each): {long}"


# ------------------------------------------------------------------ the checker itself
def _tree(tmp_path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return tmp_path


def test_checker_sees_a_lazy_circle_across_folders(tmp_path):
    pkg = _tree(tmp_path, {
        "__init__.py": "",
        "irt/__init__.py": "",
        "irt/bank.py": "def f():\n    from ..validation import g\n",
        "validation.py": "def g():\n    from .irt.bank import f\n",
    })
    graph = import_graph(pkg)
    assert graph["irt.bank"] == {"validation"} and graph["validation"] == {"irt.bank"}
    assert find_cycle(graph) is not None


def test_checker_sees_an_upward_import(tmp_path):
    pkg = _tree(tmp_path, {
        "__init__.py": "",
        "responses.py": "import atlascat.irt.bank\n",
        "irt/__init__.py": "from . import bank\n",
        "irt/bank.py": "from atlascat.errors import E\n",
        "errors.py": "E = 1\n",
    })
    graph = import_graph(pkg)
    assert graph["responses"] == {"irt.bank"} and graph["irt"] == {"irt.bank"}
    assert graph["irt.bank"] == {"errors"}
    assert upward_imports(graph) == [
        "atlascat.responses (floor 2) imports atlascat.irt.bank (floor 3)"]


def test_checker_reads_the_top_package_as_the_top_floor(tmp_path):
    pkg = _tree(tmp_path, {"__init__.py": "from .live import run\n", "live/__init__.py":
                           "from atlascat import errors\n", "errors.py": "",
                           "live/run.py": "import atlascat\n"})
    graph = import_graph(pkg)
    assert graph["live.run"] == {"__init__"}
    assert upward_imports(graph) == ["atlascat.live.run (floor 8) imports atlascat.__init__ "
                                     "(floor 9)"]


@pytest.mark.parametrize("name", ["errors", "irt.bank", "catalogue", "cli.cmd_evaluate"])
def test_floors_are_ordered(name):
    if name in module_names():
        assert floor_of("errors") <= floor_of(name) <= floor_of("cli")
