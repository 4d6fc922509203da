"""Log-likelihood backends: ToyLM, the mock server's completions-with-logprobs path, HFSubject
(tiny offline transformers model) and LMEvalSubject.

The ToyLM / server tests are core (no torch). The HF and lm_eval tests need torch +
transformers (+ lm_eval) and are skipped with a reason where those are absent; run them with
``/work/torchenv/bin/python -m pytest tests/test_live_backends.py``.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import httpx
import numpy as np
import pytest

from atlascat.errors import AtlasError
from atlascat.live.mockserver import MockOpenAIServer
from atlascat.content.requests import Request
from atlascat.live.toylm import ToyLM, cut_at_stop, harness_pair

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT.parent / "shared" / "protocol" / "golden_requests.json"
sys.path.insert(0, str(Path(__file__).resolve().parent))

# ----------------------------------------------------------------------------- items
SHOTS = "\n\n".join(
    f"Question: What is {a} plus {b}?\nAnswer: {a + b}" for a, b in
    [(2, 3), (10, 5), (7, 8), (12, 30), (1, 1), (40, 2), (9, 9), (3, 14)])
ARC_CTX = SHOTS + "\n\nQuestion: Which of these is a source of heat energy?\nAnswer:"
ARC = [Request("loglikelihood", ARC_CTX, " " + c)
       for c in ["the sun", "a block of ice", "the shade of a tree", "a glass of cold water"]]
MMLU_CTX = ("The following are multiple choice questions (with answers) about physics.\n\n"
            "What is 2+2?\nA. 3\nB. 4\nC. 5\nD. 6\nAnswer: B\n\n"
            "What boils at 100 C?\nA. iron\nB. salt\nC. water\nD. gold\nAnswer:")
MMLU = [Request("loglikelihood", MMLU_CTX, " " + k) for k in "ABCD"]
HELLA_CTX = ("Removing ice from car: Then, the man writes over the snow covering the window of a "
             "car, and a woman wearing winter clothes smiles. then, the man continues removing "
             "the snow on his car.\n\nRoof shingle removal: A man is sitting on a roof. He")
HELLA = [Request("loglikelihood", HELLA_CTX, c) for c in
         [" is using wrap to wrap a pair of skis.", " starts pulling up roofing on a roof.",
          "  Wear gloves.", " is holding a rubik's cube."]]   # "  Wear": HellaSwag's 2 spaces
WINO_SHOTS = ("Sarah was a much better surgeon than Maria so Sarah always got the harder cases."
              "\n\nThe trophy doesn't fit into the brown suitcase because the trophy is too large.")
WINO = [Request("loglikelihood", WINO_SHOTS + "\n\nIan volunteered to eat Dennis's menudo after "
                "already having a bowl because " + who, " despised eating intestine.")
        for who in ("Ian", "Dennis")]
GSM_CTX = ("Question: Natalia sold clips to 48 of her friends in April, and then she sold half as "
           "many clips in May. How many clips did Natalia sell altogether?\nAnswer: Natalia sold "
           "48/2 = <<48/2=24>>24 clips in May.\n#### 72\n\nQuestion: Tom has 3 apples and buys 4 "
           "more. How many apples does he have?\nAnswer:")
GSM = [Request("generate_until", GSM_CTX, until=(":", "Question:", "Question"), max_gen_toks=24)]
#: requests whose joint tokenization may merge across the boundary (" 1" + "5" -> " 15",
#: a word cut in two); the tests check that some do for the tokenizer at hand
MERGE = [Request("loglikelihood", "Answer: 1", "5 apples"), Request("loglikelihood", "Answer: 1", "5"),
         Request("loglikelihood", "Question: Which of these is a source of heat energy?\nAnsw",
                 "er: the sun"),
         Request("loglikelihood", "Natalia sold cl", "ips in May"),
         Request("loglikelihood", "the man continues remov", "ing the snow")]
ITEMS = {"arc": ARC, "mmlu": MMLU, "hellaswag": HELLA, "winogrande": WINO}


def golden_items(per_bench: int = 3) -> dict[str, list[list[Request]]]:
    """The protocol's golden requests (up to 3 items per benchmark), where the shared folder has
    them."""
    if not GOLDEN.is_file():
        return {}
    data = json.loads(GOLDEN.read_text())
    out = {}
    for bench, items in data.items():
        if bench.startswith("_"):
            continue
        out[bench] = [[Request("loglikelihood", r["context"], r["continuation"])
                       if r.get("continuation") is not None else
                       Request("generate_until", r["context"], until=tuple(r["until"]),
                               max_gen_toks=int(r.get("max_gen_toks", 256)))
                       for r in it["requests"]] for it in items[:per_bench]]
    return out


def server_loglikelihood(url: str, requests, *, batch: bool = False) -> list[float]:
    """What a completions client does: echo the prompt with logprobs, sum the log-probabilities
    of the tokens at or after the end of the context."""
    pairs = [harness_pair(r.context, r.continuation) for r in requests]
    prompts = [c + k for c, k in pairs]
    body = {"model": "m", "echo": True, "logprobs": 1, "max_tokens": 0, "temperature": 0}
    with httpx.Client(timeout=60) as client:
        if batch:
            res = client.post(url + "/completions", json={**body, "prompt": prompts})
            res.raise_for_status()
            choices = sorted(res.json()["choices"], key=lambda c: c["index"])
        else:
            choices = []
            for p in prompts:
                res = client.post(url + "/completions", json={**body, "prompt": p})
                res.raise_for_status()
                choices.append(res.json()["choices"][0])
    out = []
    for (ctx, _), ch in zip(pairs, choices):
        lp = ch["logprobs"]
        out.append(sum(v for v, o in zip(lp["token_logprobs"], lp["text_offset"]) if o >= len(ctx)))
    return out


# ----------------------------------------------------------------------------- ToyLM
class TestToyLM:
    def test_tokens_offsets_and_determinism(self):
        lm = ToyLM(seed=3)
        text = ARC_CTX + " the sun"
        toks, lps, offs = lm.token_logprobs(text)
        assert "".join(toks) == text
        assert offs == [sum(map(len, toks[:i])) for i in range(len(toks))]
        assert lps[0] is None and all(v < 0 for v in lps[1:])
        # token log-probabilities are sums of character log-probabilities
        assert np.isclose(sum(lps[1:]), lm.char_logprobs(text)[len(toks[0]):].sum())
        assert ToyLM(seed=3).token_logprobs(text) == (toks, lps, offs)
        assert ToyLM(seed=4).token_logprobs(text)[1] != lps
        # a proper distribution over the next character
        assert np.isclose(np.exp(lm._next_logprobs("Answer:")).sum(), 1.0)
        # top alternatives: the most likely next characters, at each token's start
        tops = lm.top_logprobs(text[:200], 3)
        assert tops[0] is None and len(tops) == len(lm.tokenize(text[:200]))
        at = len(toks[0]) + len(toks[1])
        nxt = lm._next_logprobs(text[:at])
        assert list(tops[2].values()) == pytest.approx(sorted(nxt, reverse=True)[:3])

    def test_loglikelihood_is_the_harness_computation(self):
        lm = ToyLM()
        for r in ARC + WINO:
            ctx, cont = harness_pair(r.context, r.continuation)
            lp = lm.char_logprobs(ctx + cont)
            assert lm.loglikelihood([r])[0] == pytest.approx(lp[len(ctx):].sum(), abs=1e-12)
        # merge across the boundary: ctx tokens [.., " 1"], whole [.., " 15", " apples"]:
        # the harness scores whole[len(ctx):] = [" apples"] after "Answer: 1"
        assert lm.tokenize("Answer: 1")[-1] == " 1" and " 15" in lm.tokenize("Answer: 15 apples")
        lp = lm.char_logprobs("Answer: 1 apples")
        assert lm.loglikelihood(MERGE[:1])[0] == pytest.approx(lp[len("Answer: 1"):].sum())
        assert lm.loglikelihood(MERGE[1:2]) == [0.0]   # nothing left to score, as the harness
        # trailing whitespace of the context moves to the continuation
        a = lm.loglikelihood([Request("loglikelihood", "Question: x\nAnswer: ", "the sun")])
        assert a == lm.loglikelihood([Request("loglikelihood", "Question: x\nAnswer:", " the sun")])

    def test_generation_greedy_with_stops(self):
        lm = ToyLM()
        free = lm.generate_until([Request("generate_until", GSM_CTX, max_gen_toks=40)])[0]
        assert len(lm.tokenize(free)) == 40
        stop = free[10:13]
        cut = lm.generate_until([Request("generate_until", GSM_CTX, until=(stop,),
                                         max_gen_toks=40)])[0]
        assert cut == free[:free.index(stop)] and cut == cut_at_stop(free, (stop,))
        assert lm.generate_until(GSM) == lm.generate_until(GSM)

    @pytest.mark.parametrize("order", [1, 2, 3])
    def test_each_position_is_its_own_histories_distribution(self, order):
        """Distributions are computed once per distinct history and the last text's are kept:
        every position still gets its own, and a second text none of the first's."""
        lm = ToyLM(seed=2, order=order)
        for text in (ARC_CTX + " the sun", "ab\u2603 ab\u2603 ab", ARC_CTX + " ice", "a"):
            got = lm.char_logprobs(text)
            want = [lm._next_logprobs(text[:t])[min(ord(ch), 256)] for t, ch in enumerate(text)]
            assert got.tolist() == pytest.approx(want, abs=1e-12)
            tops = lm.top_logprobs(text, 4)
            starts = np.cumsum([len(t) for t in lm.tokenize(text)])[:-1]
            assert [sorted(t.values(), reverse=True) for t in tops[1:]] == [
                pytest.approx(sorted(lm._next_logprobs(text[:s]), reverse=True)[:4])
                for s in starts]

    def test_bad_order(self):
        with pytest.raises(AtlasError, match="order"):
            ToyLM(order=5)


# ----------------------------------------------------------------------------- mock server
class TestServerLogprobs:
    def test_completions_echo_logprobs_format(self):
        lm = ToyLM()
        with MockOpenAIServer(lm=lm) as srv:
            body = {"model": "toy", "prompt": ARC_CTX + " the sun", "echo": True, "logprobs": 2,
                    "max_tokens": 0}
            res = httpx.post(srv.url + "/completions", json=body, timeout=30)
            assert res.status_code == 200
            ch = res.json()["choices"][0]
            assert ch["text"] == body["prompt"] and ch["finish_reason"] == "length"
            lp = ch["logprobs"]
            n = len(lp["tokens"])
            assert n == len(lp["token_logprobs"]) == len(lp["text_offset"]) == len(lp["top_logprobs"])
            assert "".join(lp["tokens"]) == body["prompt"]
            assert lp["token_logprobs"][0] is None and lp["top_logprobs"][0] is None
            assert all(len(t) == 2 for t in lp["top_logprobs"][1:])
            assert (lp["tokens"], lp["token_logprobs"], lp["text_offset"]) == \
                tuple(lm.token_logprobs(body["prompt"]))
            assert res.json()["usage"]["prompt_tokens"] == n
            models = httpx.get(srv.url + "/models", timeout=10).json()["data"]
            assert models[0]["id"] == lm.name

    @pytest.mark.parametrize("batch", [False, True])
    def test_server_loglikelihoods_equal_the_model(self, batch):
        lm = ToyLM(seed=1)
        reqs = [r for rs in ITEMS.values() for r in rs]
        with MockOpenAIServer(lm=lm) as srv:
            got = server_loglikelihood(srv.url, reqs, batch=batch)
        assert np.allclose(got, lm.loglikelihood(reqs), atol=1e-9, rtol=0)
        for rs in ITEMS.values():  # the choices are told apart
            assert len(set(np.round(lm.loglikelihood(rs), 6))) == len(rs)

    def test_generation_and_chat(self):
        lm = ToyLM()
        with MockOpenAIServer(lm=lm) as srv:
            body = {"model": "toy", "prompt": GSM_CTX, "max_tokens": 24, "temperature": 0,
                    "stop": list(GSM[0].until)}
            ch = httpx.post(srv.url + "/completions", json=body, timeout=30).json()["choices"][0]
            assert ch["text"] == lm.generate_until(GSM)[0]
            chat = {"model": "toy", "messages": [{"role": "user", "content": GSM_CTX}],
                    "max_tokens": 24, "stop": list(GSM[0].until)}
            msg = httpx.post(srv.url + "/chat/completions", json=chat, timeout=30).json()
            assert msg["choices"][0]["message"]["content"] == ch["text"]

    def test_llamacpp_mode_returns_no_prompt_logprobs(self):
        body = {"model": "toy", "prompt": ARC_CTX + " the sun", "echo": True, "logprobs": 1,
                "max_tokens": 0}
        with MockOpenAIServer(lm=ToyLM(), prompt_logprobs="none") as srv:
            ch = httpx.post(srv.url + "/completions", json=body, timeout=30).json()["choices"][0]
        assert ch["text"] == "" and ch["logprobs"] is None
        with MockOpenAIServer(lm=ToyLM(), prompt_logprobs="null") as srv:
            ch = httpx.post(srv.url + "/completions", json=body, timeout=30).json()["choices"][0]
        assert ch["text"] == body["prompt"]
        assert ch["logprobs"]["tokens"] and all(v is None for v in ch["logprobs"]["token_logprobs"])
        with pytest.raises(AtlasError, match="prompt_logprobs"):
            MockOpenAIServer(lm=ToyLM(), prompt_logprobs="some")

    def test_bad_prompt_and_faults_in_lm_mode(self):
        seen = []

        def fault(n, item_id, times):
            seen.append((n, item_id, times))
            return "429" if n == 1 else None

        with MockOpenAIServer(lm=ToyLM(), fault=fault) as srv:
            body = {"prompt": "Answer: yes", "echo": True, "logprobs": 0, "max_tokens": 0}
            assert httpx.post(srv.url + "/completions", json=body).status_code == 429
            assert httpx.post(srv.url + "/completions", json=body).status_code == 200
            bad = httpx.post(srv.url + "/completions", json={"prompt": [1, 2, 3], "echo": True,
                                                            "logprobs": 0, "max_tokens": 0})
            assert bad.status_code == 400 and "prompt" in bad.json()["error"]["message"]
        assert seen[:2] == [(1, None, 0), (2, None, 1)]


def completions_client():
    """live-runner's OpenAICompletionsSubject (merged from its branch)."""
    from atlascat.live import subjects

    if not hasattr(subjects, "OpenAICompletionsSubject"):
        pytest.skip("OpenAICompletionsSubject is not in this branch yet (live-runner's)")
    return subjects.OpenAICompletionsSubject


def test_completions_client_against_the_toylm_server():
    client_cls = completions_client()
    lm = ToyLM(seed=5)
    reqs = [r for rs in ITEMS.values() for r in rs]
    with MockOpenAIServer(lm=lm) as srv, client_cls(srv.url, "toy") as client:
        got = client.loglikelihood(reqs)
        assert client.generate_until(GSM) == lm.generate_until(GSM)
    assert np.allclose(got, lm.loglikelihood(reqs), atol=1e-9, rtol=0)
    with MockOpenAIServer(lm=lm, prompt_logprobs="none") as srv, \
            client_cls(srv.url, "toy") as client:
        with pytest.raises(AtlasError, match="log-probabilities"):
            client.loglikelihood(reqs[:2])


def test_nothing_listening_says_to_check_the_url_and_port():
    """A completions URL with no server behind it (a wrong port): the error names the URL and
    says what to check, not only the transport exception."""
    import socket

    client_cls = completions_client()
    with socket.socket() as s:          # a port that was free a moment ago: nothing listens
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = client_cls(f"http://127.0.0.1:{port}/v1", "toy", max_retries=0)
    with pytest.raises(AtlasError) as err:
        client.loglikelihood([r for rs in ITEMS.values() for r in rs][:1])
    msg = str(err.value)
    assert f"127.0.0.1:{port}" in msg and "cannot connect" in msg
    assert "check that a server runs at this URL and port" in msg


# ----------------------------------------------------------------------------- real items
BENCHES = ("arc", "hellaswag", "mmlu", "truthfulqa", "winogrande", "gsm8k")


@pytest.fixture(scope="module")
def bank_items(shared_data):
    """The first two content items of each benchmark as ItemRequests (build_item_requests on
    a bank with the content attached)."""
    from atlascat.irt.bank import ItemBank
    from atlascat.content.items import attach_content, load_item_content
    from atlascat.content.requests import build_item_requests

    out = {}
    for bench in BENCHES:
        content = load_item_content(bench, shared_data / "openllm" / "items").head(2)
        bank = ItemBank(content["item_id"].tolist(), np.ones(2), np.zeros(2))
        bank = attach_content(bank, content, missing="error")
        out[bench] = [build_item_requests(bank, i) for i in bank.item_ids]
    return out


def answer_through(subject_ll, subject_gen, items) -> list[int]:
    """Score ItemRequests with a subject's loglikelihood / generate_until."""
    scores = []
    for it in items:
        outs = (subject_ll(list(it.requests)) if it.kind == "loglikelihood"
                else subject_gen(list(it.requests)))
        scores.append(it.score(outs))
    return scores


@pytest.mark.slow
def test_every_benchmark_through_the_toylm_server(bank_items):
    """Each benchmark's real requests answered by ToyLM in process and through the mock
    server's completions-with-logprobs path: the same log-likelihoods, generations and 0/1."""
    lm = ToyLM()
    with MockOpenAIServer(lm=lm) as srv:
        def served_gen(reqs):
            out = []
            for r in reqs:
                body = {"prompt": r.context, "max_tokens": r.max_gen_toks, "temperature": 0,
                        "stop": list(r.until)}
                out.append(httpx.post(srv.url + "/completions", json=body,
                                      timeout=60).json()["choices"][0]["text"])
            return out

        for bench, items in bank_items.items():
            for it in items[:1]:
                if it.kind == "loglikelihood":
                    assert np.allclose(server_loglikelihood(srv.url, it.requests),
                                       lm.loglikelihood(it.requests), atol=1e-9, rtol=0)
            direct = answer_through(lm.loglikelihood, lm.generate_until, items[:1])
            served = answer_through(lambda rs: server_loglikelihood(srv.url, rs), served_gen,
                                    items[:1])
            assert direct == served and set(direct) <= {0, 1}, bench


# ----------------------------------------------------------------------------- LMEvalSubject
def test_lmeval_missing_is_a_clear_error(monkeypatch):
    from atlascat.live.lmeval_backend import LMEvalSubject, parse_lmeval_spec

    for mod in [m for m in sys.modules if m == "lm_eval" or m.startswith("lm_eval.")] + ["lm_eval"]:
        monkeypatch.setitem(sys.modules, mod, None)
    with pytest.raises(AtlasError, match=r"pip install 'atlascat\[lmeval\]'"):
        LMEvalSubject("hf,pretrained=gpt2")
    assert parse_lmeval_spec("lmeval:hf,pretrained=gpt2,dtype=float32") == \
        ("hf", "pretrained=gpt2,dtype=float32")
    assert parse_lmeval_spec("local-completions,base_url=http://x/v1/completions") == \
        ("local-completions", "base_url=http://x/v1/completions")
    with pytest.raises(AtlasError, match="model type"):
        parse_lmeval_spec("pretrained=gpt2")


def test_hf_missing_is_a_clear_error(monkeypatch):
    from atlascat.live.hf import HFSubject, hf_subject_from_spec

    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(AtlasError, match=r"pip install 'atlascat\[hf\]'"):
        HFSubject("gpt2")
    with pytest.raises(AtlasError, match="key=value"):
        hf_subject_from_spec("gpt2,colour=blue")


# ----------------------------------------------------------------------------- transformers
@pytest.fixture(scope="module")
def torch_mod():
    torch = pytest.importorskip("torch", reason="torch not installed (optional extra "
                                                "atlascat[hf]); HF backend tests skipped")
    torch.set_num_threads(1)  # the test machines are shared; one thread is fastest there
    return torch


@pytest.fixture(scope="module")
def tiny_path(torch_mod, tmp_path_factory):
    pytest.importorskip("transformers", reason="transformers not installed (atlascat[hf])")
    pytest.importorskip("tokenizers", reason="tokenizers not installed (atlascat[hf])")
    from tiny_lm import make_tiny_lm

    texts = [r.context for items in golden_items().values() for it in items for r in it]
    t0 = time.perf_counter()
    path = make_tiny_lm(tmp_path_factory.mktemp("tiny") / "llama", arch="llama",
                        texts=texts + [ARC_CTX, HELLA_CTX, MMLU_CTX, GSM_CTX])
    print(f"\n[tiny model built offline in {time.perf_counter() - t0:.2f} s]")
    return path


@pytest.fixture(scope="module")
def hf64(tiny_path):
    from atlascat.live.hf import HFSubject

    return HFSubject(str(tiny_path), dtype="float64", device="cpu", batch_size=8)


def all_requests(golden: bool = True) -> list[Request]:
    """The synthetic items of each format, and one golden item per benchmark (real contexts:
    ARC 25-shot, HellaSwag 10-shot, MMLU 5-shot, TruthfulQA mc1+mc2, WinoGrande 2 contexts)."""
    reqs = [r for rs in ITEMS.values() for r in rs]
    if golden:
        for items in golden_items(1).values():
            for it in items:
                reqs += [r for r in it if r.kind == "loglikelihood"]
    return reqs


def reference_loglikelihood(subject, r: Request, max_length: int) -> float:
    """The harness's per-request computation, written out plainly (batch of one, no cache)."""
    import torch

    tok, model = subject.tokenizer, subject.model
    ctx, cont = harness_pair(r.context, r.continuation)
    ctx_ids = tok(ctx, add_special_tokens=False)["input_ids"]
    whole = tok(ctx + cont, add_special_tokens=False)["input_ids"]
    cont_ids = whole[len(ctx_ids):]
    if not cont_ids:
        return 0.0
    inp = (ctx_ids + cont_ids)[-(max_length + 1):][:-1]
    with torch.inference_mode():
        logits = model(torch.tensor([inp])).logits[0]
    lp = torch.log_softmax(logits.double(), dim=-1)[len(inp) - len(cont_ids):]
    return float(lp[torch.arange(len(cont_ids)), torch.tensor(cont_ids)].sum())


@pytest.mark.optional
class TestHFSubject:
    def test_equals_the_harness_per_request_computation(self, hf64):
        reqs = all_requests() + MERGE
        t0 = time.perf_counter()
        got = hf64.loglikelihood(reqs)
        t_shared = time.perf_counter() - t0
        ref = [reference_loglikelihood(hf64, r, hf64.max_length) for r in reqs]
        assert np.allclose(got, ref, atol=1e-9, rtol=0)
        # some merge cases really merge: tok(ctx) is not a prefix of tok(ctx + cont)
        merged = 0
        for r in MERGE:
            ctx_ids, whole = hf64.encode(r.context), hf64.encode(r.context + r.continuation)
            merged += whole[:len(ctx_ids)] != ctx_ids
            assert hf64.encode_pair(r.context, r.continuation) == (ctx_ids, whole[len(ctx_ids):])
        assert merged >= 2
        print(f"\n[{len(reqs)} requests, shared-prefix scoring {t_shared:.2f} s, float64 CPU]")

    def test_is_greedy_as_the_harness(self, hf64, tiny_path):
        """``loglikelihood_greedy``'s flag: every continuation token is its position's argmax
        (shared-prefix and per-request paths), including continuations that are greedy."""
        import torch

        from atlascat.live.hf import HFSubject

        reqs = all_requests(golden=False) + MERGE
        for r in (ARC[0], MMLU[0], HELLA[0]):  # continuations the model itself would write
            new = hf64.generate_ids(hf64.encode(r.context), 3)
            reqs.append(Request("loglikelihood", r.context, hf64.decode(new)))
        ref = []
        for r in reqs:
            c, k = hf64.encode_pair(r.context, r.continuation)
            with torch.inference_mode():
                logits = hf64.model(torch.tensor([c + k])).logits[0]
            ref.append(all(int(logits[len(c) - 1 + t].argmax()) == k[t] for t in range(len(k))))
        assert any(ref) and not all(ref)
        for shared in (True, False):
            s = HFSubject(str(tiny_path), dtype="float64", batch_size=8, shared_prefix=shared)
            ll, greedy = s.loglikelihood_greedy(reqs)
            assert greedy == ref, shared
            assert ll == s.loglikelihood(reqs)

    def test_shared_prefix_equals_per_request_and_runs_each_context_once(self, tiny_path):
        from atlascat.live.hf import HFSubject

        reqs = all_requests()
        ctxs = {harness_pair(r.context, r.continuation)[0] for r in reqs}
        res, times = {}, {}
        for shared in (True, False):
            s = HFSubject(str(tiny_path), dtype="float32", batch_size=8, shared_prefix=shared)
            s.loglikelihood(reqs[:4])  # warm up
            t0 = time.perf_counter()
            res[shared] = np.array(s.loglikelihood(reqs))
            times[shared] = time.perf_counter() - t0
        diff = np.abs(res[True] - res[False]).max()
        assert diff < 1e-4, diff
        # one row per pass (no padding): every context runs exactly once
        s = HFSubject(str(tiny_path), dtype="float32", batch_size=1)
        assert np.allclose(s.loglikelihood(reqs), res[True], atol=1e-4, rtol=0)
        pairs = [s.encode_pair(r.context, r.continuation) for r in reqs]
        assert s.stats["tokens_run"] == sum(len(s.encode(c)) for c in ctxs) + \
            sum(len(k) - 1 for _, k in pairs)
        n_per_request = sum(len(c) + len(k) - 1 for c, k in pairs)
        print(f"\n[{len(reqs)} requests on {len(ctxs)} contexts, float32 CPU, 1 thread: shared "
              f"prefix {times[True]:.2f} s, per request {times[False]:.2f} s; tokens run "
              f"{s.stats['tokens_run']} vs {n_per_request}; max |diff| {diff:.1e}]")

    def test_truncation_as_the_harness(self, tiny_path):
        from atlascat.live.hf import HFSubject

        s = HFSubject(str(tiny_path), dtype="float64", max_length=48)
        reqs = ARC + WINO + [Request("loglikelihood", "Question: hi\nAnswer:", " the sun")]
        got = s.loglikelihood(reqs)
        ref = [reference_loglikelihood(s, r, 48) for r in reqs]
        assert np.allclose(got, ref, atol=1e-9, rtol=0)

    @pytest.mark.slow
    def test_server_backed_by_the_same_model_gives_identical_loglikelihoods(self, hf64):
        reqs = all_requests()
        for r in reqs:  # none of these merges across the boundary (that needs the harness's ids)
            c, k = harness_pair(r.context, r.continuation)
            assert hf64.encode(c + k)[:len(hf64.encode(c))] == hf64.encode(c)
        t0 = time.perf_counter()
        direct = hf64.loglikelihood(reqs)
        t_direct = time.perf_counter() - t0
        with MockOpenAIServer(lm=hf64) as srv:
            t0 = time.perf_counter()
            served = server_loglikelihood(srv.url, reqs)
            t_served = time.perf_counter() - t0
            batched = server_loglikelihood(srv.url, reqs[:6], batch=True)
        assert np.allclose(served, direct, atol=1e-6, rtol=0)
        assert np.allclose(batched, direct[:6], atol=1e-6, rtol=0)
        print(f"\n[{len(reqs)} requests: hf {t_direct:.2f} s, server {t_served:.2f} s; "
              f"max |diff| {np.abs(np.array(served) - direct).max():.1e}]")

    def test_gpt2_architecture(self, tiny_path, tmp_path):  # tiny_path: skips without torch
        from tiny_lm import make_tiny_lm

        from atlascat.live.hf import HFSubject

        path = make_tiny_lm(tmp_path / "gpt2", arch="gpt2", max_positions=256,
                            texts=[ARC_CTX, HELLA_CTX, MMLU_CTX])
        s = HFSubject(str(path), dtype="float64", batch_size=4)
        long = Request("loglikelihood", "word " * 300 + "end", " of it")   # > 256 tokens
        reqs = all_requests(golden=False) + MERGE + [long, long]
        got = s.loglikelihood(reqs)
        assert np.allclose(got, [reference_loglikelihood(s, r, 256) for r in reqs],
                           atol=1e-9, rtol=0)
        # empty context: the harness scores the continuation after the EOS token
        empty = s.loglikelihood([Request("loglikelihood", "", " the sun")])[0]
        import torch
        ids = [s.eos_token_id] + s.encode(" the sun")
        with torch.inference_mode():
            lp = torch.log_softmax(s.model(torch.tensor([ids])).logits[0].double(), -1)
        assert empty == pytest.approx(float(sum(lp[t, ids[t + 1]] for t in range(len(ids) - 1))),
                                      abs=1e-9)

    def test_hf_spec_and_completions_client_end_to_end(self, tiny_path, hf64):
        """``hf:`` through subject_from_spec, and live-runner's completions client against the
        server backed by the same model: identical log-likelihoods on every benchmark's items."""
        client_cls = completions_client()
        from atlascat.live.subjects import subject_from_spec

        hf = subject_from_spec(f"hf:{tiny_path},dtype=float64")
        reqs = all_requests()
        direct = hf.loglikelihood(reqs)
        with MockOpenAIServer(lm=hf64) as srv:
            served = client_cls(srv.url, "tiny").loglikelihood(reqs)
        assert np.allclose(served, direct, atol=1e-6, rtol=0)

    @pytest.mark.slow
    def test_every_benchmark_item_through_hf_and_the_server(self, hf64, bank_items):
        """Real requests of every benchmark (build_item_requests): scored in process and
        through the HF-backed mock server, identical log-likelihoods and the same 0/1."""
        with MockOpenAIServer(lm=hf64) as srv:
            for bench, items in bank_items.items():
                it = items[0]
                if it.kind == "loglikelihood":
                    direct = hf64.loglikelihood(it.requests)
                    served = server_loglikelihood(srv.url, it.requests)
                    assert np.allclose(served, direct, atol=1e-6, rtol=0), bench
                    assert it.score(direct) == it.score(served)
                else:  # GSM8K: greedy generation, cut at the stop strings, then '####' match
                    gen = hf64.generate_until(it.requests)
                    body = {"prompt": it.requests[0].context, "stop": list(it.requests[0].until),
                            "max_tokens": it.requests[0].max_gen_toks}
                    text = httpx.post(srv.url + "/completions", json=body,
                                      timeout=120).json()["choices"][0]["text"]
                    assert text == gen[0] and it.score(gen) in (0, 1)

    def test_token_strings_and_offsets(self, hf64):
        text = HELLA_CTX + "  Wear gloves."
        toks, lps, offs = hf64.token_logprobs(text)
        assert "".join(toks) == text and offs[0] == 0 and lps[0] is None
        assert all(a <= b for a, b in zip(offs, offs[1:]))
        assert len(toks) == len(hf64.encode(text))
        tops = hf64.top_logprobs(text[:40], 3)
        assert tops[0] is None and all(len(t) == 3 for t in tops[1:])
        with MockOpenAIServer(lm=hf64) as srv:  # longer than the model: 400, as vLLM
            res = httpx.post(srv.url + "/completions", json={
                "prompt": "word " * (hf64.max_length + 10), "echo": True, "logprobs": 1,
                "max_tokens": 0}, timeout=60)
        assert res.status_code == 400 and "tokens" in res.json()["error"]["message"]

    def test_generation_greedy_with_stops(self, hf64):
        import torch

        reqs = GSM + [Request("generate_until", g[0].context, until=g[0].until, max_gen_toks=256)
                      for g in golden_items(1).get("gsm8k", [])]
        for r in reqs:
            got = hf64.generate_until([Request("generate_until", r.context, until=(),
                                               max_gen_toks=12)])[0]
            # reference: plain greedy loop without a cache
            ids = hf64.encode(r.context)
            gen = []
            with torch.inference_mode():
                for _ in range(12):
                    nxt = int(hf64.model(torch.tensor([ids + gen])).logits[0, -1].argmax())
                    if nxt == hf64.eos_token_id:
                        break
                    gen.append(nxt)
            ref = hf64.tokenizer.decode(gen, skip_special_tokens=True)
            assert got == ref
            if len(ref) > 4:
                stop = ref[2:4]
                cut = hf64.generate_until([Request("generate_until", r.context, until=(stop,),
                                                   max_gen_toks=12)])[0]
                assert cut == ref[:ref.index(stop)]
        out = hf64.generate_until(reqs)
        assert all(isinstance(o, str) and not any(u in o for u in r.until)
                   for o, r in zip(out, reqs))
        # batched (left-padded) generation gives the same text here
        hf64.generation_batch_size = 4
        try:
            assert hf64.generate_until(reqs + reqs[:1]) == out + out[:1]
        finally:
            hf64.generation_batch_size = 1
        with MockOpenAIServer(lm=hf64) as srv:
            body = {"prompt": GSM_CTX, "max_tokens": GSM[0].max_gen_toks, "stop": list(GSM[0].until)}
            text = httpx.post(srv.url + "/completions", json=body, timeout=60).json()
        assert text["choices"][0]["text"] == out[0]

    def test_spec_and_describe(self, tiny_path):
        from atlascat.live.hf import hf_subject_from_spec

        s = hf_subject_from_spec(f"{tiny_path},dtype=float32,batch_size=2,shared_prefix=false",
                                 batch_size=5, max_length=64, device=None)
        assert (s.batch_size, s.shared_prefix, s.dtype, s.max_length) == (2, False, "float32", 64)
        from atlascat.live.hf import HFSubject
        t = HFSubject.from_spec(str(tiny_path), dtype="float64", name="tiny")
        assert (t.name, t.dtype) == ("tiny", "float64")
        d = s.describe()
        assert d["type"] == "hf" and d["device"] == "cpu" and "cache_key" not in d
        assert s.cache_key.startswith("hf:") and s.kind == "loglikelihood"
        with pytest.raises(AtlasError, match="cannot load"):
            hf_subject_from_spec(str(tiny_path) + "-missing,local_files_only=true")


@pytest.fixture(scope="module")
def lm_eval(tiny_path):
    return pytest.importorskip("lm_eval", reason="lm_eval not installed (atlascat[lmeval])")


@pytest.mark.optional
class TestLMEvalSubject:
    def test_fake_lm_gets_instances(self, lm_eval):
        from lm_eval.api.model import LM

        from atlascat.live.lmeval_backend import LMEvalSubject

        class Fake(LM):
            def __init__(self):
                super().__init__()
                self.seen = []

            def loglikelihood(self, requests):
                self.seen += [(r.request_type, r.args) for r in requests]
                return [(-float(len(r.args[1])), False) for r in requests]

            def loglikelihood_rolling(self, requests):
                raise NotImplementedError

            def generate_until(self, requests):
                self.seen += [(r.request_type, r.args) for r in requests]
                return [r.args[0][-3:] for r in requests]

        fake = Fake()
        s = LMEvalSubject(fake, name="fake")
        assert s.loglikelihood(ARC) == [-float(len(r.continuation)) for r in ARC]
        assert s.generate_until(GSM) == [GSM_CTX[-3:]]
        assert fake.seen[0] == ("loglikelihood", (ARC_CTX, " the sun"))
        assert fake.seen[-1] == ("generate_until", (GSM_CTX, {"until": list(GSM[0].until),
                                                              "max_gen_toks": 24,
                                                              "do_sample": False}))
        assert s.calls == 2 and s.name == "fake"

    def test_hf_backend_equals_hfsubject(self, lm_eval, tiny_path, hf64):
        from atlascat.live.lmeval_backend import LMEvalSubject

        s = LMEvalSubject(f"hf,pretrained={tiny_path},dtype=float64", batch_size=8, device="cpu")
        reqs = all_requests() + MERGE[:1]
        t0 = time.perf_counter()
        got = s.loglikelihood(reqs)
        t_lm = time.perf_counter() - t0
        assert np.allclose(got, hf64.loglikelihood(reqs), atol=1e-6, rtol=0)
        gens = s.generate_until(GSM)
        assert gens == hf64.generate_until(GSM)
        assert s.name == str(tiny_path) and s.describe()["model_type"] == "hf"
        print(f"\n[lm_eval hf backend: {len(reqs)} requests in {t_lm:.2f} s]")

    def test_local_completions_through_the_mock_server(self, lm_eval, hf64):
        """lm_eval's own completions client (token-id prompts, echo, logprobs) against the mock
        server backed by the tiny model: the harness's numbers, merge cases included."""
        pytest.importorskip("tenacity", reason="lm_eval's API models need tenacity (lm-eval[api])")
        from atlascat.live.lmeval_backend import LMEvalSubject

        reqs = all_requests(golden=False) + MERGE
        with MockOpenAIServer(lm=hf64) as srv:
            s = LMEvalSubject(f"local-completions,base_url={srv.url}/completions,model=tiny,"
                              f"tokenizer_backend=huggingface,tokenizer={hf64.model_name},"
                              f"max_length={hf64.max_length}")
            got = s.loglikelihood(reqs)
            gens = s.generate_until(GSM)
            assert all(isinstance(e["item_id"], type(None)) and e["status"] == 200
                       for e in srv.log)
        assert np.allclose(got, hf64.loglikelihood(reqs), atol=1e-6, rtol=0)
        assert gens == hf64.generate_until(GSM)
