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
from atlascat.live.service import evaluate
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
    if rule == "partial":  # WinoGrande: the two fillers are shown, not the shared ending
        meta = bank.metadata
        for rec in steps.to_dict("records"):
            for option in json.loads(meta.loc[rec["item_id"], "choices"]) \
                    if isinstance(meta.loc[rec["item_id"], "choices"], str) \
                    else list(meta.loc[rec["item_id"], "choices"]):
                assert f"{option} ..." in page, option
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


def test_winogrande_fillers_are_cut_at_a_word_boundary():
    from atlascat.live.report import _fillers

    shots = "Few-shot text.\n\nThe trophy did not fit because "
    assert _fillers([shots + "Sarah", shots + "Samuel"]) == ["Sarah", "Samuel"]
    # without the bank's choices, what differs is shown (a shared first word stays behind)
    assert _fillers([shots + "the suitcase", shots + "the trophy"]) == ["suitcase", "trophy"]


def test_single_bank_page_is_headlined_by_the_predicted_score(tmp_path):
    bank = load_content_bank("arc")
    store = RunStore(tmp_path / "runs.sqlite")
    res = evaluate(bank, ToyLM(seed=1), store=store, bank_ref="shipped:arc",
                   config=CATConfig(min_items=4, max_items=4, se_stop=None))
    lb = {"score": 0.61, "lo": 0.55, "hi": 0.66, "percentile": 40.0}
    page = html.unescape(render_run_report(store, res.run_id, bank=bank, leaderboard=lb))
    big = re.search(r"<p class='big'>(.*?)</p>", page).group(1)
    assert big.startswith("predicted leaderboard score: 61.0% (95% interval 55.0-66.0%)")
    assert "theta" not in big and "model-based" not in big
    assert page.count("95% interval 55.0-66.0%") == 1   # one interval per quantity
    assert "theta (95% CI)" in page   # theta stays, as its own quantity


def test_a_rounds_tokens_are_shared_by_its_items():
    """A round's requests go out together; the server's token counts are shared out: prompt
    tokens by request length, completion tokens to the generations, adding up exactly."""
    from atlascat.live.asking import round_tokens as _round_tokens

    arc, gsm = load_content_bank("arc"), load_content_bank("gsm8k")
    irs = [build_item_requests(arc, arc.item_ids[0]), build_item_requests(arc, arc.item_ids[1]),
           build_item_requests(gsm, gsm.item_ids[0])]
    got = _round_tokens({"prompt_tokens": 10, "completion_tokens": 3},
                        {"prompt_tokens": 1011, "completion_tokens": 60}, irs)
    assert sum(p for p, _ in got) == 1001 and [c for _, c in got] == [0, 0, 57]
    chars = [sum(len(r.context) + len(r.continuation or "") for r in ir.requests) for ir in irs]
    for (p, _), c in zip(got, chars):
        assert abs(p - 1001 * c / sum(chars)) < 1
    assert _round_tokens({}, None, irs) == [(None, None)] * 3
