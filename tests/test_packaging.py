"""What ``pip install atlascat`` gives a user on a fresh machine, checked without building a wheel
(the build backend needs setuptools >= 77 and the network) and without the network: the files
pyproject.toml's package data ships (every data file the package reads at run time, and a copy of
just those files running the README's commands outside the repository), the source
distribution's MANIFEST.in (tests, docs, studies, licence), the metadata (licence, version,
dependency floors the code needs), and the optional extras (each missing one is one line that
names it)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "src" / "atlascat"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _package_data() -> set[Path]:
    """The non-Python files the wheel ships: pyproject.toml's package-data globs under
    src/atlascat (setuptools expands them as recursive globs)."""
    globs = PYPROJECT["tool"]["setuptools"]["package-data"]["atlascat"]
    return {p for g in globs for p in PKG.glob(g) if p.is_file() and "__pycache__" not in p.parts}


def _tracked(under: str) -> list[Path]:
    """The repository's files under ``under`` (git ls-files; the files on disk without git)."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", under], cwd=ROOT, capture_output=True,
                             check=True).stdout.decode()
        files = [ROOT / f for f in out.split("\0") if f]
    except (OSError, subprocess.CalledProcessError):
        files = [p for p in (ROOT / under).rglob("*") if p.is_file()]
    return [p for p in files if "__pycache__" not in p.parts and p.suffix != ".pyc"
            and p.exists()]


def test_every_file_the_package_holds_is_shipped():
    """A data file under src/atlascat that no package-data glob matches is missing from the wheel
    (the code would read it in the repository and fail after pip install)."""
    shipped = _package_data()
    missing = [str(p.relative_to(PKG)) for p in _tracked("src/atlascat")
               if p.suffix != ".py" and p not in shipped]
    assert not missing, f"not in pyproject.toml's package-data: {missing}"


def test_the_files_the_catalogue_names_are_shipped():
    """Every bundled file the catalogue, the content banks and the suites read by name lies in
    the package and is package data (not in the repository's docs/, benchmarks/ or ../shared)."""
    import atlascat
    from atlascat import catalogue
    from atlascat.catalogue.files import RESPONSE_BENCHMARKS
    from atlascat.catalogue.suites import SUITES_DIR
    from atlascat.content.items import SHIPPED_BANKS

    pkg = Path(atlascat.__file__).resolve().parent     # src/atlascat, or an installed copy
    data = catalogue.DATA_DIR
    assert data.resolve().is_relative_to(pkg)
    names = ([f"dense_{b}.csv.gz" for b in RESPONSE_BENCHMARKS]
             + [f"{b}_3pl_bank.csv.gz" for b in catalogue.BANK_BENCHMARKS]
             + [f"banks/{b}.parquet" for b in catalogue.CONTENT_BENCHMARKS]
             + [f"banks/{b}_link.json" for b in catalogue.CONTENT_BENCHMARKS]
             + list(SHIPPED_BANKS.values()) + list(catalogue.BATTLES.values()))
    files = [data / n for n in names] + sorted(SUITES_DIR.glob("*.json"))
    assert len(files) > 30 and all(f.is_file() for f in files), [f for f in files
                                                                  if not f.is_file()]
    shipped = _package_data()
    assert not [str(f) for f in files if PKG / f.resolve().relative_to(pkg) not in shipped]
    assert (PKG / "irt" / "kernels" / "mstep.cu") in shipped        # read by atlascat.irt.fused


def _installed_copy(dest: Path) -> Path:
    """What the wheel installs, copied: the package's .py files and its package data only."""
    keep = _package_data() | {p for p in PKG.rglob("*.py") if "__pycache__" not in p.parts}
    for src in keep:
        target = dest / "atlascat" / src.relative_to(PKG)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)
    return dest


@pytest.mark.slow
def test_the_shipped_files_alone_run_the_readme_outside_the_repository(tmp_path):
    """The packaged files, away from the repository (working folder elsewhere): bundled names
    resolve, a replayed live test, a bank folder built from a bundled subset and the arena demo
    run; nothing reaches for docs/, benchmarks/, tests/ or ../shared."""
    site = _installed_copy(tmp_path / "site")
    work = tmp_path / "work"
    work.mkdir()
    env = dict(os.environ, PYTHONPATH=str(site), OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")

    def atlas(*args: str) -> str:
        proc = subprocess.run([sys.executable, "-m", "atlascat", *args], cwd=work, env=env,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, (args, proc.stderr[-2000:])
        return proc.stdout

    probe = subprocess.run([sys.executable, "-c", "import atlascat; print(atlascat.__file__)"],
                           cwd=work, env=env, capture_output=True, text=True, check=True)
    assert Path(probe.stdout.strip()).resolve().is_relative_to(site.resolve())
    assert "items with c > 0.5" in atlas("info", "arc")
    out = atlas("evaluate", "--bank", "arc", "--subject", "replay:arc#Kukedlc/SuperMente-7B-v4",
                "--se-stop", "0.3", "-o", "runs/replayed", "-q")
    assert "predicted leaderboard score" in out
    subprocess.run([sys.executable, "-c", "import atlascat as at; at.catalogue.load_responses("
                    "'arc').subset(subjects=range(0, 2193, 20)).write('my_results.csv')"],
                   cwd=work, env=env, check=True, timeout=120)
    atlas("build-bank", "my_results.csv", "-o", "my_bank", "--name", "my-arc", "--chance", "0.25")
    assert {"bank.parquet", "link.json", "manifest.json"} <= {
        p.name for p in (work / "my_bank").iterdir()}
    assert "ratings" in atlas("arena", "fit", "arena-demo").lower()


def _manifest_covers(path: str, lines: list[str]) -> bool:
    """Whether MANIFEST.in's include / graft / global-exclude lines put ``path`` in the sdist."""
    inside = False
    for line in lines:
        cmd, *args = line.split()
        if cmd == "include" and any(Path(path).match(a) and "/" not in path for a in args):
            inside = True
        elif cmd == "graft" and any(path.startswith(a.rstrip("/") + "/") for a in args):
            inside = True
        elif cmd == "global-exclude" and any(Path(path).match(a) for a in args):
            inside = False
        elif cmd in ("prune", "exclude") and any(path.startswith(a.rstrip("/") + "/")
                                                 or path == a for a in args):
            inside = False
    return inside


def test_the_source_distribution_holds_tests_docs_and_licence():
    """setuptools puts only the package, README and tests/test_*.py in an sdist by itself:
    MANIFEST.in adds what running the tests from it needs (conftest.py, the helpers, tests/data,
    the docs and studies the tests read) and the licence and changelog."""
    lines = [ln.strip() for ln in (ROOT / "MANIFEST.in").read_text().splitlines()
             if ln.strip() and not ln.startswith("#")]
    wanted = [p.relative_to(ROOT).as_posix() for under in ("tests", "docs", "benchmarks")
              for p in _tracked(under)]
    wanted += ["LICENSE", "CHANGELOG.md", "README.md", "Makefile"]
    assert "tests/conftest.py" in wanted and any(w.startswith("tests/data/") for w in wanted)
    assert not [w for w in wanted if not _manifest_covers(w, lines)]
    assert not _manifest_covers("tests/__pycache__/conftest.cpython-311.pyc", lines)


def test_the_licence_is_declared_and_shipped():
    """The wheel carries the licence text (license-files), and the licence expression covers the
    bundled data, whose README gives its own licence (CC BY-NC-SA 4.0), not only the code's."""
    project = PYPROJECT["project"]
    assert "LICENSE" in project["license-files"] and (ROOT / "LICENSE").is_file()
    text = (ROOT / "LICENSE").read_text()
    assert "MIT License" in text and "CC BY-NC-SA 4.0" in text
    data_readme = (PKG / "datasets" / "data" / "README.md").read_text()
    assert "CC BY-NC-SA 4.0" in data_readme
    assert set(re.split(r"\s+AND\s+", project["license"])) == {"MIT", "CC-BY-NC-SA-4.0"}
    assert not [c for c in project.get("classifiers", []) if c.startswith("License ::")]


def test_metadata_version_python_and_entry_point():
    from atlascat import __version__

    project = PYPROJECT["project"]
    assert project["dynamic"] == ["version"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "atlascat._version.__version__"}
    head = next(ln for ln in (ROOT / "CHANGELOG.md").read_text().splitlines()
                if ln.startswith("## "))
    assert __version__ in head, (head, __version__)
    assert project["requires-python"] == ">=3.10"
    lo = int(project["requires-python"].split(".")[1])
    versions = [c.rsplit(" ", 1)[1] for c in project["classifiers"]
                if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)]
    assert versions and min(int(v.split(".")[1]) for v in versions) == lo
    assert project["scripts"] == {"atlas": "atlascat.cli:main"}


def _floor(requirement: str, extra: str | None = None) -> tuple[int, ...]:
    reqs = (PYPROJECT["project"]["dependencies"] if extra is None
            else PYPROJECT["project"]["optional-dependencies"][extra])
    spec = next(r for r in reqs if re.match(rf"{requirement}\b", r))
    return tuple(int(x) for x in spec.split(">=")[1].split("."))


def test_dependency_floors_hold_what_the_code_uses():
    """The oldest versions pip may keep must run the package: ``Generator.spawn`` (every adaptive
    test's per-examinee generators) is numpy >= 1.25; typer < 0.16 allows click 8.2+, with
    which ``atlas arena schedule --help`` fails (TypeError in make_metavar); both measured
    with the declared floors of everything else."""
    uses_spawn = [p for p in PKG.rglob("*.py") if ".spawn(" in p.read_text(encoding="utf-8")]
    assert uses_spawn
    assert _floor("numpy") >= (1, 25)
    assert _floor("typer") >= (0, 16)


def test_an_extra_with_gguf_holds_a_transformers_that_reads_gguf():
    """``hf:FILE.gguf`` loads through ``from_pretrained(..., gguf_file=...)``, which
    transformers has since 4.41.0: an extra that brings gguf (for it) with a transformers floor
    of 4.40 let pip keep a transformers that cannot read the file."""
    hf = (PKG / "live" / "hf.py").read_text(encoding="utf-8")
    assert 'kw["gguf_file"]' in hf
    extras = PYPROJECT["project"]["optional-dependencies"]
    with_gguf = [x for x, reqs in extras.items() if any(re.match(r"gguf\b", r) for r in reqs)]
    assert "hf" in with_gguf
    for extra in with_gguf:
        assert _floor("transformers", extra) >= (4, 41), extra


#: optional imports -> the extra that installs them (what each error message names)
EXTRA_OF = {"httpx": "live", "torch": "hf", "transformers": "hf", "gguf": "hf",
            "lm_eval": "lmeval", "array_api_compat": "gpu"}


def test_each_optional_import_is_in_the_extra_its_message_names():
    """Every ``pip install 'atlascat[X]'`` the code prints names an extra that exists, and each
    optional module the package imports lazily is in the extra named for it."""
    extras = PYPROJECT["project"]["optional-dependencies"]
    named = {m for p in PKG.rglob("*.py")
             for m in re.findall(r"atlascat\[([a-z-]+)\]", p.read_text(encoding="utf-8"))}
    assert named and named <= set(extras), named - set(extras)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "pip install 'atlascat[live]'" in readme           # the front door says how, no clone
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = page.read_text(encoding="utf-8")
        told = set(re.findall(r"atlascat\[([a-z-]+)\]", text))
        told |= set(re.findall(r"extras ((?:`[a-z-]+`,? ?)+)", text)[0].replace("`", "")
                    .replace(",", " ").split()) if page.name == "README.md" else set()
        assert told <= set(extras), (page.name, told - set(extras))
    dist = {"lm_eval": "lm-eval"}
    for module, extra in EXTRA_OF.items():
        reqs = [re.split(r"[<>=\[; ]", r)[0].lower().replace("_", "-") for r in extras[extra]]
        assert dist.get(module, module).replace("_", "-") in reqs, (module, extra)


def test_a_gguf_model_without_gguf_is_one_line_naming_the_extra(tmp_path, monkeypatch):
    """``hf:M.gguf`` with torch and transformers but not gguf: transformers' own ImportError is a
    traceback, so the subject says which extra brings gguf first."""
    from atlascat.errors import AtlasError
    from atlascat.live import hf as hf_mod

    torch = types.SimpleNamespace(cuda=types.SimpleNamespace(is_available=lambda: False),
                                  device=lambda d: types.SimpleNamespace(type=str(d)))
    monkeypatch.setattr(hf_mod, "_imports", lambda: (torch, types.SimpleNamespace()))
    monkeypatch.setitem(sys.modules, "gguf", None)            # import gguf -> ImportError
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    with pytest.raises(AtlasError, match=r"gguf package.*pip install 'atlascat\[hf\]'") as err:
        hf_mod.HFSubject(str(model), device="cpu")
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("model_type, missing, want", [
    ("hf", "torch", "pip install 'lm-eval[hf]'"),
    ("local-completions", "tenacity", "pip install 'lm-eval[api]'"),
    ("my-own-lm", "mylib", "pip install mylib"),
])
def test_an_lmeval_backend_without_its_packages_names_lm_evals_extra(monkeypatch, model_type,
                                                                     missing, want):
    """``pip install 'atlascat[lmeval]'`` brings lm-eval, whose backends' packages (torch,
    transformers, accelerate for ``hf``) are lm-eval's own extras since 0.4.9: the one line says
    which extra, not one package at a time."""
    from atlascat.errors import AtlasError
    from atlascat.live import lmeval_backend

    def get_model(name):
        raise ImportError(f"No module named {missing!r}", name=missing)

    registry = types.SimpleNamespace(get_model=get_model)
    monkeypatch.setattr(lmeval_backend, "_lm_eval", lambda: (registry, object))
    with pytest.raises(AtlasError, match=re.escape(f"({missing}): {want}")) as err:
        lmeval_backend.LMEvalSubject(f"{model_type},pretrained=x")
    assert "\n" not in str(err.value)
