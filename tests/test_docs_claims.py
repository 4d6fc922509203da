"""What the manual names exists, and its figures stand in what it links. Every `atlas COMMAND
--option` written inline in the README or docs/*.md is a command with that option; every other
inline ``--option`` is one of an atlas command, of the script or module the same paragraph
names (benchmarks/*.py, ``python -m atlascat.demo``) or of lm-evaluation-harness; every
``atlascat.dotted.name`` imports; every repository path in backticks and every relative link
(to any file, not only a page) points at something; every test it names
(`test_x.py::test_y`) is defined; every decimal figure beside a link to a study page stands in
that page. Fenced blocks are checked by tests/test_docs_examples.py (synopses, runs); links to
a page's sections by tests/test_docs_shape.py."""
from __future__ import annotations

import importlib
import re
from functools import lru_cache
from pathlib import Path

import pytest

from test_docs_examples import synopsis_problem

ROOT = Path(__file__).resolve().parents[1]
PAGES = ["README.md"] + sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md"))
OPTION = re.compile(r"(?<![\w-])(--[a-zA-Z][\w-]*)")
# options of tools the docs name and atlas does not own, each with the tool
FOREIGN = {"--log_samples": "lm_eval", "--limit": "lm_eval", "--model_args": "lm_eval",
           "--tasks": "lm_eval", "--output_path": "lm_eval", "--help": "every command"}
# where a repository path may start; ``shared/`` lies beside the checkout (../shared)
PATH_ROOTS = ("benchmarks/", "docs/", "src/", "tests/", "shared/")


def paragraphs(text: str) -> list[tuple[int, str]]:
    """(first line, text) of each paragraph outside fenced blocks (inline code only)."""
    out, start, buf, fence = [], 0, [], False
    for n, line in enumerate(text.splitlines() + [""], 1):
        if line.startswith("```"):
            fence = not fence
            line = ""
        if fence or not line.strip():
            if buf:
                out.append((start, " ".join(buf)))
            buf = []
            continue
        if not buf:
            start = n
        buf.append(line.strip())
    return out


def spans(text: str) -> list[tuple[int, str, str]]:
    """(line, inline code, its paragraph) of a page; table pipes written ``\\|`` unescaped."""
    return [(n, s.replace("\\|", "|"), para) for n, para in paragraphs(text)
            for s in re.findall(r"`([^`]+)`", para)]


@lru_cache(maxsize=None)
def atlas_options() -> frozenset[str]:
    from typer.main import get_command

    from atlascat.cli import app

    found: set[str] = set()

    def walk(cmd):
        for p in getattr(cmd, "params", []):
            found.update((*p.opts, *p.secondary_opts))
        for sub in getattr(cmd, "commands", {}).values():
            walk(sub)
    walk(get_command(app))
    return frozenset(found)


@lru_cache(maxsize=None)
def script_options(path: str) -> frozenset[str]:
    """The ``--options`` a script's argparse parser declares (read from its source)."""
    source = (ROOT / path).read_text()
    return frozenset(re.findall(r"add_argument\([^)]*?[\"'](--[\w-]+)[\"']", source))


def scripts_named(para: str) -> list[str]:
    found = re.findall(r"\b(benchmarks/\w+\.py)\b", para)
    found += [f"benchmarks/{m}" for m in re.findall(r"(?<![/\w])(\w+\.py)\b", para)
              if (ROOT / "benchmarks" / m).exists()]
    for module in re.findall(r"python -m (atlascat(?:\.\w+)+)", para):
        base = "src/" + module.replace(".", "/")
        found += [f for f in (f"{base}.py", f"{base}/__main__.py") if (ROOT / f).exists()]
    return found


def option_problem(option: str, span: str, para: str) -> str | None:
    """Why ``option`` (in inline code ``span`` of paragraph ``para``) names nothing, or None."""
    if option in atlas_options() or option in FOREIGN:
        return None
    if any(option in script_options(s) for s in scripts_named(para)):
        return None
    return f"`{span}`: {option} is no atlas option nor one of a script the paragraph names"


def name_problem(name: str) -> str | None:
    """Why the dotted name ``atlascat.x.y`` does not resolve (module, then attributes), or None."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return f"{name}: {'.'.join(parts[:i])} has no {'.'.join(parts[i:])}"
            obj = getattr(obj, attr)
        return None
    return f"{name} imports nothing"


def path_problem(word: str) -> str | None:
    path = word.split("#")[0].rstrip(".,;:)")
    base = ROOT.parent if path.startswith("shared/") else ROOT
    if re.search(r"[A-Z]{2,}|<|\{", path):        # a placeholder: FILE, <bench>, {a,b}
        return None
    hits = list(base.glob(path)) if "*" in path else [base / path] if (base / path).exists() else []
    return None if hits else f"{path} does not exist"


def problems(page: str, text: str | None = None) -> list[str]:
    text = (ROOT / page).read_text() if text is None else text
    found = []
    for line, span, para in spans(text):
        if span.startswith("atlas ") and not re.match(r"atlas ([A-Z]+ )?--help$", span):
            p = synopsis_problem(span)
            if p:
                found.append(f"{page}:{line}: {p}")
        elif not span.startswith(("pip ", "make ", "pytest", "lm_eval", "lm-eval", "git ")):
            found += [f"{page}:{line}: {p}" for o in OPTION.findall(span)
                      if (p := option_problem(o, span, para))]
        found += [f"{page}:{line}: {p}"
                  for n in re.findall(r"(?<![\w.])atlascat(?:\.[A-Za-z_]\w*)+", span)
                  if (p := name_problem(n))]
        found += [f"{page}:{line}: {p}" for w in re.findall(r"[^\s`'\"(]+", span)
                  if w.startswith(PATH_ROOTS) and (p := path_problem(w))]
        if p := named_test_problem(span):
            found.append(f"{page}:{line}: {p}")
    return found


@lru_cache(maxsize=None)
def defined_names(folder: str, pattern: str) -> frozenset[str]:
    """The ``test_*`` names ``pattern`` finds in the Python files under ``folder``."""
    return frozenset(re.findall(pattern, "\n".join(
        f.read_text() for f in (ROOT / folder).rglob("*.py")), flags=re.M))


def named_test_problem(span: str) -> str | None:
    """Why a test the page names (`test_x.py`, `test_x.py::test_y`, `test_y`) is not there; a
    bare name the library itself uses (`stratified_split`'s `test_size`) is not a test's."""
    m = re.fullmatch(r"(?:tests/)?(test_\w+\.py)(?:::(test_\w+))?|(test_\w+)", span)
    if not m:
        return None
    file, name, bare = m.groups()
    if file and not (ROOT / "tests" / file).exists():
        return f"no tests/{file}"
    if name and not re.search(rf"^\s*def {name}\b", (ROOT / "tests" / file).read_text(), re.M):
        return f"tests/{file} has no {name}"
    if bare and bare not in defined_names("tests", r"^\s*def (test_\w+)") and \
            bare not in defined_names("src", r"\b(test_\w+)\b"):
        return f"no test {bare}"
    return None


def test_the_checks_catch_a_wrong_option_name_and_path():
    page = ("Run `atlas score R --bank arc --sed 3` or `--max-itemz 5`.\n\n"
            "`benchmarks/bench_design.py` takes `--sections` and `--sectionz`.\n\n"
            "`atlascat.ItemBank` and `atlascat.irt.nothing_here`; `benchmarks/no_such.py`,"
            " `benchmarks/results/*.md`, `tests/data/none_*.csv`.\n\n"
            "Tested: `test_fit.py::test_lsat7_2pl_matches_mirt`, `test_fit.py::test_nope`,"
            " `test_nope_either`, `test_no_file.py`.\n")
    found = problems("x.md", page)
    assert len(found) == 9, "\n".join(found)
    for what in ("--sed", "--max-itemz", "--sectionz", "nothing_here", "no_such.py", "none_*",
                 "has no test_nope", "test_nope_either", "test_no_file.py"):
        assert sum(what in f for f in found) == 1, (what, found)
    assert all(f.startswith("x.md:") for f in found)


@pytest.mark.parametrize("page", PAGES)
def test_what_a_page_names_exists(page):
    found = problems(page)
    assert not found, "the page names what does not exist:\n" + "\n".join(found)


@pytest.mark.parametrize("page", PAGES)
def test_every_relative_link_resolves(page):
    """Links to any file or folder (a study's CSV, a script, a figure), not only to pages."""
    path = ROOT / page
    broken = [t for t in re.findall(r"\]\(([^)#\s]+)(?:#[^)\s]*)?\)", path.read_text())
              if not t.startswith(("http:", "https:", "mailto:"))
              and not (path.parent / t).resolve().exists()]
    assert not broken, f"{page}: broken links {broken}"


def test_scoring_page_states_the_3pls_gaps_to_mirt_as_measured():
    """docs/scoring.md: how far the 3PL's SEs (ML, MAP: catR's expected information against
    mirt's curvature) and WLE thetas (Warm's root against mirt's maximum) lie from mirt's
    ``fscores`` on LSAT7, to the digits the page gives."""
    import numpy as np
    import pandas as pd

    from atlascat import estimate_ability
    from atlascat.irt.bank import ItemBank

    data = ROOT / "tests" / "data" / "mirt_scores"
    answers = pd.read_csv(data / "lsat7.csv").drop(columns="freq")
    bank = ItemBank.read(data / "lsat7_3pl_items.csv")
    ref = pd.read_csv(data / "lsat7_3pl_scores.csv")
    se_gap, theta_gap = 0.0, 0.0
    for method in ("ML", "MAP", "WLE"):
        got = estimate_ability(answers, bank, method.lower())
        theta, se = got["theta"].to_numpy(), got["se"].to_numpy()
        want_t, want_se = ref[f"{method}_theta"].to_numpy(), ref[f"{method}_se"].to_numpy()
        ok = np.isfinite(theta) & np.isfinite(want_t) & np.isfinite(want_se)
        if method == "WLE":
            theta_gap = np.abs(theta[ok] - want_t[ok]).max()
        else:
            se_gap = max(se_gap, (np.abs(se[ok] - want_se[ok]) / want_se[ok]).max())
    page = " ".join((ROOT / "docs" / "scoring.md").read_text().split())
    pct = re.search(r"LSAT7 3PL: up to (\d+)% apart", page).group(1)
    gap = re.search(r"up to (\d\.\d+) apart on LSAT7's 3PL", page).group(1)
    assert pct == f"{100 * se_gap:.0f}", f"scoring.md: SEs up to {pct}%, measured {se_gap:.1%}"
    digits = len(gap.split(".")[1])
    assert gap == f"{theta_gap:.{digits}f}", f"scoring.md: WLE up to {gap}, measured {theta_gap}"


# ------------------------------------------------------------------ figures and their studies

FIGURE = re.compile(r"(?<![\w.\-/])(\d+(?:,\d{3})*\.\d+(?:e-\d+)?|\d+(?:\.\d+)?e-\d+)(?![\w.])")
# figures of a unit that links a study but come from elsewhere, with where they come from
SOURCED_ELSEWHERE = {("README.md", "61.5"): "the new model's mean: tests/test_docs_output.py"}


def units(text: str) -> list[tuple[int, str]]:
    """(first line, text) of each paragraph, list item and table row outside fenced blocks: the
    smallest piece of a page whose figures one link sources."""
    out, start, buf, fence = [], 0, [], False
    for n, line in enumerate(text.splitlines() + [""], 1):
        if line.startswith("```"):
            fence, line = not fence, ""
        new = line.lstrip().startswith(("* ", "- ", "|", "#"))
        if fence or not line.strip() or new:
            if buf:
                out.append((start, " ".join(buf)))
            buf = []
            if fence or not line.strip():
                continue
        if not buf:
            start = n
        buf.append(line.strip())
    return out


def figure_found(figure: str, numbers: set[str]) -> bool:
    """``figure`` is one of ``numbers``, or one of them rounded to its digits (a study's 0.087
    quoted as 0.09; 8.7e-4 as 9e-4)."""
    if figure in numbers:
        return True
    if "e" in figure:
        v = float(figure)
        return any("e" in x and abs(float(x) - v) <= 0.06 * v for x in numbers)
    digits, v = len(figure.split(".")[1]), float(figure.replace(",", ""))
    return any("." in x and "e" not in x and len(x.split(".")[1]) > digits
               and abs(float(x.replace(",", "")) - v) <= 0.5 * 10 ** -digits + 1e-12
               for x in numbers)


def study_text(path: Path, links: list[str]) -> str:
    """The pages ``links`` name, and the study pages a linked manual page links in turn."""
    text = ""
    for link in links:
        linked = (path.parent / link).resolve()
        text += " " + linked.read_text()
        if "benchmarks/results" not in str(linked):
            for study in re.findall(r"\]\(([^)#\s]*benchmarks/results/[^)#\s]+\.md)",
                                    linked.read_text()):
                text += " " + (linked.parent / study).resolve().read_text()
    return text


def unsourced_figures(page: str, text: str) -> list[str]:
    """Decimal figures of each unit of ``page`` that links a study (on the README: any page),
    found in none of the pages it links."""
    path, found = ROOT / page, []
    for line, unit in units(text):
        links = [t for t in re.findall(r"\]\(([^)#\s]+\.md)", unit) if not t.startswith("http")]
        if not links or (page != "README.md" and
                         not any("benchmarks/results/" in t for t in links)):
            continue
        source = study_text(path, links)
        numbers = set(FIGURE.findall(source)) | set(re.findall(r"\d+(?:\.\d+)?", source))
        found += [f"{page}:{line}: {f} (not in {', '.join(links)})"
                  for f in FIGURE.findall(re.sub(r"`[^`]*`", "", unit))
                  if not figure_found(f, numbers) and (page, f) not in SOURCED_ELSEWHERE]
    return found


def test_figure_check_catches_a_figure_its_study_lacks(tmp_path, monkeypatch):
    (tmp_path / "docs").mkdir()
    (tmp_path / "benchmarks" / "results").mkdir(parents=True)
    (tmp_path / "benchmarks" / "results" / "s.md").write_text(
        "| arc | 0.087 | 2.91 s | 8.7e-4 | 0.109 |\n")
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    page = ("MAE 0.09, 2.9 s, within 9e-4 ([s](../benchmarks/results/s.md)).\n\n"
            "WLE up to 0.10 apart, 3.1 s, 2e-3 ([s](../benchmarks/results/s.md)).\n\n"
            "No link here: 0.55.\n")
    assert [f.split(" (")[0] for f in unsourced_figures("docs/x.md", page)] == [
        "docs/x.md:3: 0.10", "docs/x.md:3: 3.1", "docs/x.md:3: 2e-3"]


@pytest.mark.parametrize("page", PAGES)
def test_figures_beside_a_study_link_are_in_the_study(page):
    """A figure in a paragraph, list item or table row that links a study page (on the README,
    any page) appears in it, as written or rounded: a study rerun with new figures breaks the
    manual's stale ones. (What the figure means is for a reader to check; this catches the
    figure that is nowhere in its source.)"""
    found = unsourced_figures(page, (ROOT / page).read_text())
    assert not found, "figures their linked pages do not hold:\n" + "\n".join(found)
