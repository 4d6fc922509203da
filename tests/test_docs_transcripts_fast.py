"""The docs' printed examples that need nothing made before them, run in the fast pass.

tests/test_docs_examples.py runs every ```text transcript of every page in order (slow: a page
at a time); here the self-contained ones that take a few seconds each run on their own, so a
changed figure or wording in them shows before the slow pass: each named block's commands
run in a fresh folder (``../shared`` beside it) and must print the lines the page shows, as
tests/docs_blocks.py compares them (run ids and seconds may differ)."""
from __future__ import annotations

import pytest

from docs_blocks import check_transcript, doc_blocks, run_shell, transcript, user_folder

#: (page, the first command of a ```text block that depends on no block above it)
STANDALONE = [
    ("leaderboard.md", "atlas evaluate --bank arc --subject simulate:0.5 -o runs/half -q"),
    ("leaderboard.md", "atlas evaluate --bank arc --subject simulate:-3 --se-stop 0.2"),
    ("cli.md", "atlas simulate arc --bank arc --min-items 30 --max-items 3"),
    ("design.md", "atlas design --bank paper-hellaswag -k 10"),
    ("calibration.md", "atlas calibrate ../shared/data/classic/lsat7_patterns.csv"),
    ("robustness.md", "python -c \"import pandas as pd; pd.DataFrame({'model'"),
]


def standalone_block(page: str, first: str):
    """The ```text block of ``page`` whose first command starts with ``first``."""
    for b in doc_blocks(page):
        steps = transcript(b.text) if b.lang == "text" else []
        if steps and steps[0][0].startswith(first):
            return b, steps
    raise AssertionError(f"docs/{page}: no transcript starts with `{first}` (update STANDALONE)")


def test_every_standalone_block_is_found():
    for page, first in STANDALONE:
        b, steps = standalone_block(page, first)
        assert b.directive in ("", "no-output-check") and any(out for _, out in steps), b.where


@pytest.mark.parametrize("page,first", STANDALONE, ids=[f"{p}:{c.split()[1]}"
                                                        for p, c in STANDALONE])
def test_standalone_transcript_prints_what_the_page_shows(page, first, tmp_path, shared_data):
    b, steps = standalone_block(page, first)
    work, env = user_folder(tmp_path, shared_data)
    for cmd, shown in steps:
        out = run_shell(cmd, work, env, f"{b.where}: `{cmd}` failed")
        if shown and b.directive != "no-output-check":
            check_transcript(out, shown, b.where, cmd)
