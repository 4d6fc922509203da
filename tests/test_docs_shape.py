"""The README is a front door and docs/ a manual (issue 42): the README at most 160 lines with the
set-up commands under its title and no path into ``../shared`` (a user's clone has none); no
docs page over 400 lines; no history in either (how a figure was reached, dated measurements,
rejected alternatives and work sessions belong to the study pages in ``benchmarks/``)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = sorted(p.name for p in DOCS.glob("*.md"))

README_MAX_LINES = 160
PAGE_MAX_LINES = 400

# history, not manual: each pattern with what it catches
HISTORY = [
    (r"\bbefore this (work|change|release|rule|field|session)\b", "before this work"),
    (r"\bthe issue'?s? (figure|goal|target|own)", "the issue's figure"),
    (r"\b(issue|issues) #?\d+\b|\(issue\b", "an issue number"),
    (r"\bnot kept\b|\btried and (dropped|not)\b|\bmeasured and not\b", "a rejected alternative"),
    (r"\b(first|second|third|fourth|fifth|sixth|previous|earlier|last|this|that|one|a|the) "
     r"(work )?session of (work|this)\b|\b(first|second|third|fourth|fifth|sixth|previous|"
     r"earlier|last)('s)? (work )?session\b", "a work session"),
    (r"\b20\d\d-\d\d-\d\d\b", "a dated measurement"),
    (r"\bas landed\b|\bthe code (as landed|before)\b|\bfirst version of this\b", "an old version"),
    (r"\(was:? ", "what the code did before"),
]


def history_in(text: str) -> list[str]:
    """Lines of ``text`` that tell history, each as 'LINE: what it is: the words'."""
    found = []
    for n, line in enumerate(text.splitlines(), 1):
        for pattern, what in HISTORY:
            m = re.search(pattern, line, flags=re.IGNORECASE)
            if m:
                found.append(f"{n}: {what}: {m.group(0)!r}")
    return found


def test_history_check_catches_each_kind():
    bad = ["37.1 s before this work", "the issue's figure was 61 s", "see issue 27",
           "(issue 18)", "measured and not kept", "a rule tried and dropped",
           "in the third session", "measured on 2026-11-27", "the code as landed",
           "refused (was: a raw KeyError)", "on 2026-11-27's second session"]
    for line in bad:
        assert history_in(line), line
    good = ["a live session records answers", "`CATSession.to_dict()` persists the session",
            "kept for parity with the paper", "the issue tracker", "was refused with one line",
            "session's snapshot", "the suite session picks items"]
    for line in good:
        assert not history_in(line), (line, history_in(line))


def test_readme_is_a_front_door():
    text = README.read_text()
    lines = text.splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines (at most {README_MAX_LINES})"
    assert lines[0].startswith("# "), "README.md starts with its title"
    head = text[:text.index("\n## ")] if "\n## " in text else text
    fence = re.search(r"```bash\n(.*?)```", head, flags=re.S)
    assert fence, "the set-up commands stand in a ```bash block under the title"
    assert "make demo" in fence.group(1) and "make test" in fence.group(1)
    assert text.index("make demo") > text.index(lines[0]), "set-up commands under the title"
    assert "../shared" not in text, "README.md: a user's clone has no ../shared (use bundled names)"


def test_readme_tells_no_history():
    found = history_in(README.read_text())
    assert not found, "README.md tells history:\n" + "\n".join(found)


@pytest.mark.parametrize("page", PAGES)
def test_docs_page_is_a_manual(page):
    text = (DOCS / page).read_text()
    n = len(text.splitlines())
    assert n <= PAGE_MAX_LINES, (f"docs/{page} has {n} lines (at most {PAGE_MAX_LINES}): move "
                                 "studies to benchmarks/ beside their scripts")
    found = history_in(text)
    assert not found, f"docs/{page} tells history (move it to benchmarks/):\n" + "\n".join(found)


def test_docs_links_to_benchmark_pages_resolve():
    """A study moved to benchmarks/ is linked from the manual: every such link points at a file."""
    for page in ["README.md"] + [f"docs/{p}" for p in PAGES]:
        path = ROOT / page
        for target in re.findall(r"\]\(([^)#]+\.md)(?:#[^)]*)?\)", path.read_text()):
            if target.startswith("http"):
                continue
            assert (path.parent / target).resolve().exists(), f"{page}: broken link {target}"


def heading_anchors(text: str) -> set[str]:
    """The anchors GitHub gives a page's headings (lower case, punctuation dropped, spaces as
    hyphens, a repeated heading numbered -1, -2, ...); fenced blocks hold no headings."""
    found, seen, fence = set(), {}, False
    for line in text.splitlines():
        if line.startswith("```"):
            fence = not fence
        m = None if fence else re.match(r"#{1,6} (.*)", line)
        if m:
            slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            found.add(slug if n == 0 else f"{slug}-{n}")
    return found


def test_heading_anchors_follow_githubs_rule():
    text = ("# The link (`ScoreLink`)\n```\n# not a heading\n```\n"
            "## Outside the data, misfit\n## Outside the data, misfit\n")
    assert heading_anchors(text) == {"the-link-scorelink", "outside-the-data-misfit",
                                     "outside-the-data-misfit-1"}


def test_docs_links_to_a_section_find_it():
    """A link to a section (`page.md#anchor`, `#anchor`) of the README, a docs page or a study
    page names a heading that page has: a renamed section breaks no link silently."""
    pages = ["README.md"] + [f"docs/{p}" for p in PAGES]
    broken = []
    for page in pages:
        path = ROOT / page
        for target, anchor in re.findall(r"\]\(([^)#\s]*)#([^)\s]+)\)", path.read_text()):
            if target.startswith("http"):
                continue
            linked = (path.parent / target).resolve() if target else path
            if linked.suffix == ".md" and linked.exists() and \
                    anchor not in heading_anchors(linked.read_text()):
                broken.append(f"{page}: {target}#{anchor}")
    assert not broken, "links to sections that do not exist:\n" + "\n".join(broken)
