"""A completions server whose echoed prompt log-probabilities are one token late (as
llama-cpp-python's server 0.3.36 returns them, captured in tests/data) is refused with a clear
error instead of being scored with wrong numbers (issue 19, item 2)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from atlascat.content.requests import Request
from atlascat.live.mockserver import MockOpenAIServer
from atlascat.live.subjects import (OpenAICompletionsSubject, ShiftedPromptLogprobsError,
                                    echo_alignment)
from atlascat.live.toylm import ToyLM

DATA = Path(__file__).parent / "data" / "llamacpp_echo_shifted.json"


def _unshift(lp: dict) -> dict:
    """The same reply with every distribution put back on the token it predicts."""
    tops = lp["top_logprobs"]
    return {**lp, "top_logprobs": [None, *tops[:-1]]}


def test_a_real_llama_cpp_reply_is_shifted_and_its_repair_aligned():
    lp = json.loads(DATA.read_text())
    assert echo_alignment(lp) == "shifted"
    assert echo_alignment(_unshift(lp)) == "aligned"
    short = {k: v[:20] for k, v in lp.items()}
    assert echo_alignment(short) == "unknown"            # too few tokens to tell
    assert echo_alignment(None) == "unknown"
    assert echo_alignment({"tokens": lp["tokens"], "top_logprobs": None}) == "unknown"


class KnowingLM(ToyLM):
    """A toy LM whose most likely next token is always the one that comes: a model that
    predicts its text (what a real LM does on a good share of tokens)."""

    def top_logprobs(self, text, n):
        toks, lps, _ = self.token_logprobs(text)
        return [None if v is None else {t: -0.05, "#never#": -3.0} for t, v in zip(toks, lps)]


REQS = [Request("loglikelihood", "The quick brown fox jumps over the lazy dog. " * 4 + "Answer:",
                continuation=c) for c in (" yes", " no")]


@pytest.mark.parametrize("mode, refused", [("full", False), ("shifted", True)])
def test_completions_subject_refuses_a_shifted_server(mode, refused):
    with MockOpenAIServer(lm=KnowingLM(), prompt_logprobs=mode) as srv, \
            OpenAICompletionsSubject(srv.url, "toy", max_retries=0) as subject:
        if refused:
            with pytest.raises(ShiftedPromptLogprobsError, match="one token late"):
                subject.loglikelihood(REQS)
        else:
            got = subject.loglikelihood(REQS)
            assert got == pytest.approx(KnowingLM().loglikelihood(REQS), abs=1e-9)
            assert subject.echo_alignment == "aligned"


def test_a_random_toy_model_is_let_through():
    with MockOpenAIServer(lm=ToyLM(), prompt_logprobs="full") as srv, \
            OpenAICompletionsSubject(srv.url, "toy", max_retries=0) as subject:
        assert len(subject.loglikelihood(REQS)) == 2
        assert subject.echo_alignment == "unknown"


def test_chance_hits_on_a_long_prompt_are_not_a_verdict():
    """A toy LM's single-character guesses hit the next token 5 times in ~1,000 tokens of an
    ARC prompt (found by the docs test): chance, not a shifted server."""
    n = 1000
    toks = [f"w{i}" for i in range(n)]
    tops = [None] + [{"x": -1.0} for _ in range(n - 1)]
    for i in (10, 200, 400, 600, 800):          # 5 positions whose guess is the next token
        tops[i] = {toks[i + 1]: -1.0}
    assert echo_alignment({"tokens": toks, "top_logprobs": tops}) == "unknown"
    for i in range(1, n - 1, 5):                # a fifth of them: shifted
        tops[i] = {toks[i + 1]: -1.0}
    assert echo_alignment({"tokens": toks, "top_logprobs": tops}) == "shifted"
