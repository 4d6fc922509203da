"""The run pages and reports as a user reads them: every number and word is the run's own
(review of the reports, h-report)."""
from __future__ import annotations

import html
import re

from atlascat.cat.config import CATConfig
from atlascat.catalogue import load_content_bank
from atlascat.live.report import render_run_report
from atlascat.live.service import evaluate
from atlascat.live.store import RunStore
from atlascat.live.subjects.spec import subject_from_spec
from atlascat.live.toylm import ToyLM

MODEL = "Kukedlc/SuperMente-7B-v4"


def _text(page: str) -> str:
    return html.unescape(re.sub("<[^>]+>", " ", page))


def test_a_replayed_answer_is_not_said_to_be_stored_cut(tmp_path):
    """A replayed TruthfulQA step stores its outputs whole (longer than the page's note that
    replaces them): the page must not say the stored answer was cut."""
    bank = load_content_bank("truthfulqa")
    store = RunStore(tmp_path / "runs.sqlite")
    res = evaluate(bank, subject_from_spec(f"replay:truthfulqa#{MODEL}", bank=bank),
                   store=store, bank_ref="shipped:truthfulqa",
                   config=CATConfig(min_items=6, max_items=6, se_stop=None))
    steps = store.steps(res.run_id)
    long = steps["answer_chars"].astype(float) > len("recorded score, replayed (the matrix "
                                                     "holds scores, not the model's text)")
    assert long.any()                              # the case the note was wrongly added to
    assert (steps["answer_chars"] == steps["answer"].str.len()).all()   # stored whole
    page = _text(render_run_report(store, res.run_id, bank=bank))
    assert page.count("recorded score, replayed") == 6
    assert "stored cut" not in page


def test_an_answer_stored_cut_says_so(tmp_path):
    """A model's answer longer than the store keeps is shown with its length and hash."""
    bank = load_content_bank("arc")
    store = RunStore(tmp_path / "runs.sqlite", max_answer_chars=10)
    res = evaluate(bank, ToyLM(seed=1), store=store, bank_ref="shipped:arc",
                   config=CATConfig(min_items=3, max_items=3, se_stop=None))
    steps = store.steps(res.run_id)
    assert (steps["answer_chars"] > 10).all() and (steps["answer"].str.len() <= 10).all()
    page = _text(render_run_report(store, res.run_id))   # no bank: the stored text itself
    for chars in steps["answer_chars"]:
        assert f"[stored cut: {int(chars)} characters, sha256" in page
