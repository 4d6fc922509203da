"""Batched adaptive rounds (next_items / record_many / simulate_cat(batch_size=k)) and the
import structure of atlascat.cat."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

CAT_DIR = Path(__file__).resolve().parents[1] / "src" / "atlascat" / "cat"


def _cat_imports(cat_dir: Path = CAT_DIR) -> dict[str, set[str]]:
    """Module -> the atlascat.cat modules it imports (module level or inside functions)."""
    graph = {}
    for path in sorted(cat_dir.glob("*.py")):
        name = path.stem
        deps = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                mod = node.module or ""
                if node.level == 1:          # from .x import ..., from . import x
                    targets = [mod] if mod else [a.name for a in node.names]
                elif node.level == 0 and mod.startswith("atlascat.cat."):
                    targets = [mod.split(".")[2]]
                elif node.level == 0 and mod == "atlascat.cat":
                    targets = [a.name for a in node.names]
                else:
                    targets = []
                deps.update(t.split(".")[0] for t in targets)
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.startswith("atlascat.cat."):
                        deps.add(a.name.split(".")[2])
        graph[name] = {d for d in deps if (cat_dir / f"{d}.py").exists() and d != name}
    return graph


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
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


class TestImportStructure:
    def test_no_cycle_among_cat_modules(self):
        graph = _cat_imports()
        assert {"engine", "exposure", "exposure_control"} <= set(graph)
        assert "engine" in graph["exposure"] and "exposure_control" in graph["engine"]
        cycle = _find_cycle(graph)
        assert cycle is None, "import cycle: " + " -> ".join(cycle)

    def test_cycle_detector_sees_a_lazy_cycle(self, tmp_path):
        # the old engine <-> exposure cycle went through imports inside functions
        (tmp_path / "engine.py").write_text("def f():\n    from .exposure import g\n")
        (tmp_path / "exposure.py").write_text("def g():\n    from .engine import f\n")
        (tmp_path / "other.py").write_text("from . import engine\n")
        graph = _cat_imports(tmp_path)
        assert graph == {"engine": {"exposure"}, "exposure": {"engine"}, "other": {"engine"}}
        assert _find_cycle(graph) in (["engine", "exposure", "engine"],
                                      ["exposure", "engine", "exposure"])

    @pytest.mark.parametrize("first", ["atlascat.cat.exposure", "atlascat.cat.exposure_control",
                                       "atlascat.cat.engine", "atlascat.cat.stopping"])
    def test_import_any_module_first(self, first):
        code = (f"import {first}\n"
                "from atlascat.cat.exposure import calibrate_sympson_hetter, ExposureTracker\n"
                "from atlascat.cat.engine import CATSession, simulate_cat\n"
                "print('ok')")
        env_path = str(CAT_DIR.parents[1])
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env={"PYTHONPATH": env_path, "OPENBLAS_NUM_THREADS": "1",
                                  "PATH": "/usr/bin:/bin"}, timeout=120)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "ok"
