"""The live run page shows per item the option chosen and the gold one with readable
log-likelihoods (or the generation and the number read from it), and a labelled trajectory
(issue 19, item 3)."""
from __future__ import annotations

import html
import json
import re

import pytest

from atlascat.cat.config import CATConfig
from atlascat.catalogue import load_content_bank
from atlascat.content.requests import build_item_requests
from atlascat.live.report import render_run_report
from atlascat.live.runner import evaluate
from atlascat.live.store import RunStore
from atlascat.live.toylm import ToyLM


@pytest.mark.parametrize("bench, rule", [("arc", "acc_norm"), ("winogrande", "partial"),
                                         ("gsm8k", "gsm8k_exact")])
def test_page_shows_choice_gold_and_loglikelihoods(tmp_path, bench, rule):
    bank = load_content_bank(bench)
    store = RunStore(tmp_path / "runs.sqlite")
    res = evaluate(bank, ToyLM(seed=1), store=store, bank_ref=f"shipped:{bench}",
                   config=CATConfig(min_items=4, max_items=4, se_stop=None))
    page = html.unescape(render_run_report(store, res.run_id, bank=bank))
    steps = store.steps(res.run_id)
    assert len(steps) == 4
    for rec in steps.to_dict("records"):
        ir = build_item_requests(bank, rec["item_id"])
        assert ir.rule == rule
        outputs = rec["answer"] if ir.kind == "generate_until" else json.loads(rec["answer"])
        c = ir.choice(outputs)
        if c["kind"] == "generation":
            assert f"answered {c['extracted']} (gold {c['gold']})" in re.sub("<[^>]+>", "", page)
            assert (c["extracted"] == c["gold"]) == (rec["score"] == 1)
            continue
        assert (c["chosen"] == c["gold"]) == (rec["score"] == 1)
        for ll in c["loglikelihood"]:
            assert f"{ll:.3f}" in page
    if rule != "gsm8k_exact":
        assert f"log-likelihoods ({rule})" in page and "chosen" in page
    assert ("per character" in page) == (rule == "acc_norm")
    assert "items asked" in page and "ability theta" in page and "theta (EAP)" in page
    assert "theta &#177; 1 SE" in render_run_report(store, res.run_id, bank=bank)


def test_choice_reads_like_the_score():
    bank = load_content_bank("truthfulqa")
    ir = build_item_requests(bank, bank.item_ids[0])
    n = len(ir.requests)
    outputs = [-5.0] * n
    outputs[1] = -1.0                     # a wrong mc1 target is the most likely
    c = ir.choice(outputs)
    assert c["chosen"] == 1 and c["gold"] == 0 and ir.score(outputs) == 0
    assert len(c["options"]) == (ir.n_choices or n)
    outputs[0] = -0.5
    assert ir.choice(outputs)["chosen"] == 0 and ir.score(outputs) == 1
