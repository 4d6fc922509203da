"""The Open LLM Leaderboard's requests (lm-evaluation-harness b281b09), rebuilt per item.

Checked against three references:
- ``../shared/protocol/golden_requests.json``: the exact requests of 18 items (3 a benchmark),
  produced by running the b281b09 task classes;
- every item's ``*_longprompt`` (the prompt the leaderboard logged): our context must equal it
  for ARC, HellaSwag, MMLU and GSM8K; for WinoGrande it is the longprompt with its last
  segment replaced as the harness does;
- the harness formats re-implemented here from ``openllm_v1.md`` (independently of the module),
  applied to the item's own fields and to the ``*_shot_k`` columns.
"""
from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from atlascat.errors import AtlasError, BankError, LiveRunError
from atlascat.irt.bank import ItemBank
from atlascat.live import ItemRequests, Request, build_item_requests, build_requests
from atlascat.content.items import attach_content, content_item_ids, item_record, load_item_content
from atlascat.content.requests import GSM8K_UNTIL, QA_PROMPT, REQUEST_COLUMNS, gsm8k_cut, gsm8k_extract, requests_from_record, score_outputs

BENCHES = ("arc", "hellaswag", "mmlu", "truthfulqa", "winogrande", "gsm8k")
LONGPROMPT = {"arc": "alltwentyfiveshot_longprompt", "hellaswag": "alltenshot_longprompt",
              "mmlu": "allfiveshot_longprompt", "winogrande": "allfiveshot_longprompt",
              "gsm8k": "allfiveshot_longprompt"}
N_CONTENT = {"arc": 245, "hellaswag": 151, "mmlu": 198, "truthfulqa": 290, "winogrande": 239,
             "gsm8k": 486}
N_IN_DENSE = {"arc": 245, "hellaswag": 63, "mmlu": 102, "truthfulqa": 157, "winogrande": 114,
              "gsm8k": 486}


@pytest.fixture(scope="module")
def items_dir(shared_data):
    return shared_data / "openllm" / "items"


@pytest.fixture(scope="module")
def golden(shared_data):
    return json.loads((shared_data.parent / "protocol" / "golden_requests.json").read_text())


@pytest.fixture(scope="module")
def raw(items_dir):
    """The item parquet rows of each benchmark, keyed by matrix item id."""
    out = {}
    for bench in BENCHES:
        df = pd.concat([pd.read_parquet(items_dir / f"{bench}.parquet"),
                        pd.read_parquet(items_dir / f"{bench}-secondary.parquet")],
                       ignore_index=True)
        key = df["mb_sub_idx"] if bench == "mmlu" else df["metabench_idx"]
        out[bench] = {str(k): rec for k, rec in zip(key, df.to_dict("records"))}
    return out


@pytest.fixture(scope="module")
def banks(items_dir):
    """A bank of every content item per benchmark (dummy 2PL parameters), content attached."""
    out = {}
    for bench in BENCHES:
        content = load_item_content(bench, items_dir)
        n = len(content)
        bank = ItemBank(content["item_id"].tolist(), np.ones(n), np.linspace(-2, 2, n))
        out[bench] = attach_content(bank, content, missing="error")
    return out


# ------------------------------------------------------------ the harness formats, from the spec
def _hs_pre(t: str) -> str:
    t = t.strip().replace(" [title]", ". ")
    return re.sub(r"\[.*?\]", "", t).replace("  ", " ")


def _doc(bench: str, d: dict) -> tuple[str, str]:
    """(doc_to_text, doc_to_target) of one document given as plain fields."""
    if bench == "arc":
        key = {"1": "A", "2": "B", "3": "C", "4": "D", "5": "E"}.get(d["key"], d["key"])
        return f"Question: {d['question']}\nAnswer:", " " + list(d["texts"])["ABCDE".index(key)]
    if bench == "hellaswag":
        query = _hs_pre(d["activity_label"] + ": " + d["ctx_a"] + " " + d["ctx_b"].capitalize())
        return query, " " + _hs_pre(list(d["endings"])[int(d["label"])])
    if bench == "mmlu":
        opts = "".join(f"{k}. {c}\n" for k, c in zip("ABCD", d["choices"]))
        return d["question"].strip() + "\n" + opts + "Answer:", " " + "ABCD"[int(d["answer"])]
    if bench == "gsm8k":
        return f"Question: {d['question']}\nAnswer:", " " + d["answer"]
    if bench == "winogrande":
        s = d["sentence"]
        i = s.index("_")
        opt = d["option1"] if str(d["answer"]) == "1" else d["option2"]
        return s[:i] + opt, " " + s[i + 1:].strip()
    raise AssertionError(bench)


def _item_fields(bench: str, rec: dict) -> dict:
    if bench == "arc":
        return {"question": rec["question"], "texts": rec["choices"]["text"], "key": rec["answerKey"]}
    return rec


def _shot_fields(bench: str, rec: dict, k: int) -> dict:
    """The k-th shot as metabench's ``*_shot_k`` columns give it."""
    g = lambda name: rec[f"{bench}_{name}_shot_{k}"]  # noqa: E731
    if bench == "arc":
        return {"question": g("question"), "texts": g("choices")["text"], "key": g("answerKey")}
    if bench == "hellaswag":
        return {"activity_label": g("activity_labels"), "ctx_a": g("ctx_a"), "ctx_b": g("ctx_b"),
                "endings": g("endings"), "label": g("label")}
    if bench == "mmlu":
        return {"question": g("question"), "choices": g("choices"), "answer": g("answers")}
    if bench == "gsm8k":
        return {"question": g("prompt"), "answer": g("answer")}
    return {"sentence": g("prompt"), "option1": g("option1"), "option2": g("option2"),
            "answer": g("answer")}


N_SHOTS = {"arc": 25, "hellaswag": 10, "mmlu": 5, "winogrande": 5, "gsm8k": 5}


def _context_from_shot_columns(bench: str, rec: dict) -> str:
    """The whole harness context rebuilt from fields only (no longprompt)."""
    shots = ["".join(_doc(bench, _shot_fields(bench, rec, k))) for k in range(1, N_SHOTS[bench] + 1)]
    head = ""
    if bench == "mmlu":
        head = ("The following are multiple choice questions (with answers) about "
                + rec["subject"].replace("_", " ") + ".\n\n")
    return head + "\n\n".join(shots) + "\n\n" + _doc(bench, _item_fields(bench, rec))[0]


# =============================================================================== golden
class TestGolden:
    def test_all_golden_requests_match_exactly(self, golden, banks, tmp_path):
        n = 0
        for bench in BENCHES:
            # through a parquet round trip: what a shipped bank gives
            path = banks[bench].write(tmp_path / f"{bench}.parquet")
            bank = ItemBank.read(path)
            for item in golden[bench]:
                iid = item.get("mb_sub_idx", str(item["metabench_idx"]))
                ir = build_item_requests(bank, iid)
                assert isinstance(ir, ItemRequests) and ir.item_id == iid
                reqs = build_requests(bank, iid)
                assert reqs == list(ir.requests) and all(isinstance(r, Request) for r in reqs)
                want = item["requests"]
                assert len(reqs) == len(want), (bench, iid)
                for got, exp in zip(reqs, want):
                    assert got.context == exp["context"], (bench, iid)
                    if exp["type"] == "loglikelihood":
                        assert got.kind == "loglikelihood" and got.until == ()
                        assert got.continuation == exp["continuation"], (bench, iid)
                    else:
                        assert got.kind == "generate_until" and got.continuation is None
                        assert list(got.until) == exp["until"]
                        assert got.max_gen_toks == exp["max_gen_toks"] == 256
                assert ir.gold == item["gold"], (bench, iid)
                if "norm_chars" in want[0]:
                    assert list(ir.norm) == [r["norm_chars"] for r in want]
                if bench == "truthfulqa":
                    assert ir.n_choices == item["n_mc1"]
                    assert ir.mc2_true == sum(item["mc2_labels"])
                    sets = [r["target_set"] for r in want]
                    assert sets == ["mc1"] * item["n_mc1"] + ["mc2"] * len(item["mc2_labels"])
                n += 1
        assert n == 18

    def test_rules(self, banks):
        assert {b: build_item_requests(banks[b], banks[b].item_ids[0]).rule for b in BENCHES} == {
            "arc": "acc_norm", "hellaswag": "acc_norm", "mmlu": "acc", "truthfulqa": "mc1",
            "winogrande": "partial", "gsm8k": "gsm8k_exact"}


# =============================================================================== every item
class TestEveryItem:
    @pytest.mark.parametrize("bench", ["arc", "hellaswag", "mmlu", "gsm8k"])
    def test_context_is_the_longprompt(self, bench, banks, raw):
        bank = banks[bench]
        assert len(bank) == N_CONTENT[bench]
        for iid in bank.item_ids:
            rec = raw[bench][iid]
            long = rec[LONGPROMPT[bench]]
            reqs = build_requests(bank, iid)
            assert all(r.context == long for r in reqs), (bench, iid)
            # the final segment is the harness doc_to_text rebuilt from the item's own fields
            query = _doc(bench, _item_fields(bench, rec))[0]
            assert long.endswith("\n\n" + query), (bench, iid)
            # the rest is the few-shot block of the longprompt, verbatim
            assert reqs[0].context[: -len(query)] == long[: -len(query)]
            if bench == "gsm8k":
                assert len(reqs) == 1 and reqs[0].until == GSM8K_UNTIL
            else:
                ir = build_item_requests(bank, iid)
                assert [r.continuation[0] for r in reqs] == [" "] * len(reqs)
                if bench == "mmlu":
                    assert [r.continuation for r in reqs] == [" A", " B", " C", " D"]
                    assert long.startswith("The following are multiple choice questions "
                                           "(with answers) about "
                                           + rec["subject"].replace("_", " ") + ".\n\n")
                    assert ir.gold == int(rec["answer"])
                else:
                    target = _doc(bench, _item_fields(bench, rec))[1]
                    assert reqs[ir.gold].continuation == target

    @pytest.mark.parametrize("bench, n_match", [("arc", 245), ("mmlu", 198), ("gsm8k", 486),
                                                ("hellaswag", 77)])
    def test_whole_context_from_fields(self, bench, n_match, banks, raw):
        """Rebuilt from the shot columns + item fields only, the context equals the longprompt
        in every ARC/MMLU/GSM8K row; HellaSwag's shot columns are wrong in 74 of 151 rows
        (so the shots must come from the longprompt)."""
        same = [build_requests(banks[bench], iid)[0].context
                == _context_from_shot_columns(bench, raw[bench][iid])
                for iid in banks[bench].item_ids]
        assert sum(same) == n_match

    def test_hellaswag_two_leading_spaces(self, banks):
        ir = build_item_requests(banks["hellaswag"], "3235")
        assert all(r.continuation.startswith("  ") for r in ir.requests)
        assert ir.norm == (126, 151, 122, 98)
        assert [len(r.continuation) - 1 for r in ir.requests] == list(ir.norm)
        # at least one choice with its own leading space in 92 of the 151 items
        n = sum(any(r.continuation.startswith("  ") for r in build_requests(banks["hellaswag"], i))
                for i in banks["hellaswag"].item_ids)
        assert n == 92

    def test_hellaswag_preprocess_order(self):
        from atlascat.content.requests import hellaswag_preprocess as pre

        assert pre(" [title] Wear a hat.") == " Wear a hat."   # strip first: no " [title]" left
        assert pre("Go [title] Wear [step] it") == "Go. Wear it"
        assert pre("a [x]  [y]   b") == "a   b"   # 6 spaces, one pass of "  " -> " " leaves 3
        assert pre("[header] How to x [title] Do y.") == " How to x. Do y."

    def test_winogrande_partial_contexts(self, banks, raw):
        bank = banks["winogrande"]
        n_from_shots = 0
        for iid in bank.item_ids:
            rec = raw["winogrande"][iid]
            long, s = rec[LONGPROMPT["winogrande"]], rec["sentence"]
            segs = long.split("\n\n")
            assert len(segs) == 6 and segs[-1] == s  # metabench's last segment is the raw sentence
            i = s.index("_")
            reqs = build_requests(bank, iid)
            assert [r.context for r in reqs] == ["\n\n".join(segs[:-1] + [s[:i] + o])
                                                 for o in (rec["option1"], rec["option2"])]
            assert reqs[0].continuation == reqs[1].continuation == " " + s[i + 1:].strip()
            ir = build_item_requests(bank, iid)
            assert ir.gold == int(rec["answer"]) - 1
            # the correct request is the harness's doc_to_text + doc_to_target
            assert reqs[ir.gold].context.rsplit("\n\n", 1)[1] + reqs[ir.gold].continuation == \
                "".join(_doc("winogrande", rec))
            shots = "\n\n".join("".join(_doc("winogrande", _shot_fields("winogrande", rec, k)))
                                for k in range(1, 6))
            n_from_shots += reqs[0].context.rsplit("\n\n", 1)[0] == shots
        assert n_from_shots == 238  # item 469's shot 4 has "the  cream" in the longprompt only

    def test_truthfulqa(self, banks, raw):
        assert len(QA_PROMPT) == 573
        bank = banks["truthfulqa"]
        for iid in bank.item_ids:
            rec = raw["truthfulqa"][iid]
            reqs = build_requests(bank, iid)
            mc1, mc2 = list(rec["mc1_targets"]["choices"]), list(rec["mc2_targets"]["choices"])
            assert all(r.context == QA_PROMPT + "\n\nQ: " + rec["question"] + "\nA:" for r in reqs)
            assert [r.continuation for r in reqs] == [" " + c for c in mc1 + mc2]
            ir = build_item_requests(bank, iid)
            assert ir.n_choices == len(mc1) and ir.gold == 0

    def test_gsm8k_gold(self, banks, raw):
        for iid in banks["gsm8k"].item_ids:
            ir = build_item_requests(banks["gsm8k"], iid)
            m = re.search(r"#### (\-?[0-9\.\,]+)", raw["gsm8k"][iid]["answer"])
            assert ir.gold == m.group(1).strip().replace(",", "")
            assert ir.score(["x\n#### " + ir.gold]) == 1

    def test_content_ids_in_matrix_space(self, items_dir):
        from atlascat import catalogue

        for bench in BENCHES:
            ids = content_item_ids(bench, items_dir)
            assert len(ids) == len(set(ids)) == N_CONTENT[bench]
            dense = set(catalogue.load_responses(bench).item_ids)
            assert len(dense & set(ids)) == N_IN_DENSE[bench], bench
        assert "high_school_government_and_politics.117" in content_item_ids("mmlu", items_dir)


# =============================================================================== scoring
class TestScoring:
    def test_acc_norm_divides_by_choice_characters(self, banks):
        ir = build_item_requests(banks["arc"], "1070")  # " 5 N", " 10 N", " 20 N", " 30 N"; gold 2
        assert ir.norm == (3, 4, 4, 4)
        ll = [-3.3, -4.0, -4.3, -9.0]  # acc picks 0; per char: -1.1, -1.0, -1.075 -> picks 1
        assert ir.score(ll) == 0
        assert score_outputs("acc", ll, gold=2) == 0
        assert ir.score([-3.3, -4.4, -4.3, -9.0]) == 1  # per char -1.1, -1.1, -1.075
        assert ir.score([-3.0, -4.0, -4.0, -4.0]) == 0  # -1, -1, -1, -1: tie -> lowest index 0
        assert ir.score([-9.0, -4.0, -4.0, -4.0]) == 0  # tie between 1..3 -> 1, not gold 2
        assert ir.score([-9.0, -5.0, -4.0, -4.0]) == 1  # tie 2, 3 -> 2

    def test_acc_mc1_partial(self, banks):
        mmlu = build_item_requests(banks["mmlu"], "sociology.161")  # gold 3
        assert mmlu.score([-1, -1, -1, -0.5]) == 1 and mmlu.score([-1, -1, -0.5, -0.5]) == 0
        tqa = build_item_requests(banks["truthfulqa"], "533")  # 4 mc1, then 6 mc2
        ll = [-5.0, -6, -7, -8] + [0.0] * 6  # the mc2 requests do not enter mc1
        assert tqa.score(ll) == 1
        assert tqa.score([-6.0, -5, -7, -8] + [-99.0] * 6) == 0
        # mc2: normalized probability mass of the 3 true mc2 answers (labels 1,1,1,0,0,0)
        ll2 = [-1.0, -2.0, -3.0, -1.0, -2.0, -4.0]
        p = np.exp(ll2)
        assert tqa.mc2([0.0] * 4 + ll2) == pytest.approx(p[:3].sum() / p.sum())
        with pytest.raises(BankError, match="TruthfulQA"):
            build_item_requests(banks["arc"], "263").mc2([0.0] * 4)
        wg = build_item_requests(banks["winogrande"], "494")  # gold 1
        assert wg.score([-10.0, -9.0]) == 1 and wg.score([-9.0, -10.0]) == 0
        assert wg.score([-9.0, -9.0]) == 0  # tie -> option 1
        # a perfect subject scores 1 on every item, a contrary one 0
        for bench in ("arc", "hellaswag", "mmlu", "truthfulqa", "winogrande"):
            for iid in banks[bench].item_ids[:40]:
                ir = build_item_requests(banks[bench], iid)
                k, n = ir.n_choices, len(ir.requests)
                good = [-5.0 * (ir.norm[j] if ir.norm else 1) for j in range(n)]
                good[ir.gold] = -0.01
                bad = [-0.01] * n
                bad[ir.gold] = -1e4
                assert (ir.score(good), ir.score(bad)) == (1, 0), (bench, iid, k)

    def test_gsm8k_exact(self):
        assert gsm8k_cut("a Question: b", GSM8K_UNTIL) == "a "
        assert gsm8k_cut("5 + 5 = 10\n#### 10\n\nQuestion 2") == "5 + 5 = 10\n#### 10\n\n"
        assert gsm8k_extract("#### 1,600 dollars") == "1600"
        assert gsm8k_extract("#### -3.5") == "-3.5"
        assert gsm8k_extract("no answer") == "[invalid]"
        s = lambda text, gold="160": score_outputs("gsm8k_exact", [text], gold=gold)  # noqa: E731
        assert s(" 10 * 16 = <<10*16=160>>160\n#### 160") == 1
        assert s("#### 160.") == 0                   # string equality, not numeric
        assert s("#### 1,60") == 1                   # commas removed before comparing
        assert s("####160") == 0                     # the regex needs "#### "
        assert s("#### 12\n#### 160") == 0           # first match
        assert s("Step 1: #### 160") == 0            # ':' stops the generation first
        assert s("#### 160\n\nQuestion: next? #### 7") == 1
        assert s("#### -5", gold="-5") == 1
        assert s("") == 0
        assert score_outputs("gsm8k_exact", "#### 160", gold="160") == 1  # a bare string

    def test_bad_outputs_raise(self, banks):
        arc = build_item_requests(banks["arc"], "263")
        with pytest.raises(LiveRunError, match="every request"):
            arc.score([-1.0, -2.0])
        with pytest.raises(LiveRunError, match="invalid"):
            arc.score([-1.0, float("nan"), -2, -3])
        with pytest.raises(LiveRunError, match="numbers"):
            arc.score(["a", "b", "c", "d"])
        assert arc.score([-1.0, -np.inf, -np.inf, -np.inf]) == 0  # -inf is a valid log-prob
        gsm = build_item_requests(banks["gsm8k"], "474")
        with pytest.raises(LiveRunError, match="one generated"):
            gsm.score([-1.0])
        with pytest.raises(LiveRunError, match="one generated"):
            gsm.score(["a", "b"])
        assert isinstance(LiveRunError("x"), AtlasError)


# =============================================================================== storage
class TestStorage:
    def test_context_stored_once_per_item(self, banks, tmp_path):
        sizes = {}
        for bench in BENCHES:
            bank = banks[bench]
            meta = bank.metadata
            assert set(REQUEST_COLUMNS) <= set(meta.columns) and len(meta) == len(bank)
            if bench in ("arc", "hellaswag", "mmlu", "gsm8k"):
                assert (meta["fewshot"] == "").all()  # not a second copy of the context
            path = tmp_path / f"{bench}.parquet"
            bank.to_frame().to_parquet(path, index=False, compression="zstd")
            sizes[bench] = path.stat().st_size
            back = ItemBank.read(path)
            for iid in bank.item_ids[:25]:
                assert build_item_requests(back, iid) == build_item_requests(bank, iid)
        # all content items of each benchmark, zstd: a few hundred KB at most
        assert max(sizes.values()) < 700_000, sizes
        assert sum(sizes.values()) < 2_000_000, sizes

    def test_csv_round_trip(self, banks, tmp_path):
        for bench in ("winogrande", "gsm8k", "truthfulqa"):
            bank = banks[bench].subset(list(banks[bench].item_ids[:20]))
            back = ItemBank.read(bank.write(tmp_path / f"{bench}.csv"))
            for iid in bank.item_ids:
                assert build_item_requests(back, iid) == build_item_requests(bank, iid)

    def test_chat_fields_kept(self, banks, items_dir):
        """The chat path's fields (question, choices, letter key, fewshot) are unchanged."""
        for bench in ("arc", "mmlu", "gsm8k"):
            content = load_item_content(bench, items_dir, requests=False).set_index("item_id")
            bank = banks[bench]
            for iid in bank.item_ids[:30]:
                rec = item_record(bank, iid)
                for col in ("question", "answer", "scorer", "fewshot"):
                    assert rec[col] == content.loc[iid, col]
                assert list(rec["choices"]) == list(content.loc[iid, "choices"])
        assert item_record(banks["truthfulqa"], banks["truthfulqa"].item_ids[0])["fewshot"] == ""

    def test_errors(self, banks, items_dir):
        bare = ItemBank(["1", "2"], [1.0, 1.0], [0.0, 1.0])
        with pytest.raises(BankError, match="no item content"):
            build_requests(bare, "1")
        with pytest.raises(BankError, match="not in the bank"):
            build_requests(banks["arc"], "no-such-item")
        meta = pd.DataFrame({"question": ["q", "r"]})
        with pytest.raises(BankError, match="no request data"):
            build_requests(bare.with_metadata(meta.assign(item_id=["1", "2"])), "1")
        with pytest.raises(BankError, match="unknown scoring rule"):
            requests_from_record({"rule": "bleurt", "context": "x", "continuations": [" a", " b"]})
        with pytest.raises(BankError, match="gold index"):
            requests_from_record({"rule": "acc", "context": "x", "continuations": [" a", " b"],
                                  "gold": 2})
        with pytest.raises(BankError, match="not the|does not end"):
            from atlascat.content.requests import request_fields

            rec = pd.read_parquet(items_dir / "arc.parquet").iloc[0].to_dict()
            rec["question"] = rec["question"] + " (edited)"
            request_fields("arc", rec, "x")


# =============================================================================== the harness
def _harness_src():
    import os
    from pathlib import Path

    src = os.environ.get("ATLAS_HARNESS_B281B09")
    if not src or not (Path(src) / "lm_eval" / "tasks" / "winogrande.py").is_file():
        pytest.skip("needs the lm-evaluation-harness source at commit b281b09: set "
                    "ATLAS_HARNESS_B281B09 to a checkout of that commit (the folder holding "
                    "lm_eval/)")
    return Path(src)


class _Anything:
    def __call__(self, *a, **k):
        return _Anything()

    def __getattr__(self, name):
        return _Anything()

    def __mro_entries__(self, bases):
        return (object,)


@pytest.fixture(scope="module")
def harness_tasks():
    """The b281b09 task modules, imported with their heavy dependencies stubbed (restored after)."""
    import importlib
    import sys
    import types

    src = _harness_src()
    saved = {k: v for k, v in sys.modules.items() if k == "lm_eval" or k.startswith("lm_eval.")}
    heavy = ["datasets", "sqlitedict", "tqdm", "accelerate", "sacrebleu", "omegaconf",
             "sklearn", "sklearn.metrics", "rouge_score", "torch", "torch.nn",
             "torch.nn.functional", "transformers"]
    before = {m: sys.modules.get(m) for m in heavy}
    for k in saved:
        del sys.modules[k]
    for m in heavy:
        mod = types.ModuleType(m)
        mod.__getattr__ = lambda name: _Anything()  # PEP 562
        sys.modules[m] = mod
    pkg = types.ModuleType("lm_eval")
    pkg.__path__ = [str(src / "lm_eval")]
    sys.modules["lm_eval"] = pkg
    tpkg = types.ModuleType("lm_eval.tasks")
    tpkg.__path__ = [str(src / "lm_eval" / "tasks")]
    sys.modules["lm_eval.tasks"] = tpkg
    try:
        mods = {n: importlib.import_module(f"lm_eval.tasks.{n}") for n in
                ("arc", "hellaswag", "hendrycks_test", "truthfulqa", "winogrande", "gsm8k")}
        yield mods
    finally:
        for k in [k for k in sys.modules if k == "lm_eval" or k.startswith("lm_eval.")]:
            del sys.modules[k]
        sys.modules.update(saved)
        for m, v in before.items():
            if v is None:
                sys.modules.pop(m, None)
            else:
                sys.modules[m] = v


@pytest.mark.optional
class TestAgainstHarness:
    """Our requests and rules against the b281b09 task classes themselves, on every item.

    Only the formatting and scoring code of the harness runs; its heavy imports (torch,
    datasets, ...) are stubbed for the duration of the test."""

    @staticmethod
    def _task(cls, **attrs):
        t = cls.__new__(cls)
        t._fewshot_docs = None
        for k, v in attrs.items():
            setattr(t, k, v)
        return t

    def _doc(self, tasks, bench, r):
        if bench == "arc":
            t = self._task(tasks["arc"].ARCChallenge)
            ch = r["choices"]
            return t, t._process_doc({"id": "x", "question": r["question"], "answerKey": r["answerKey"],
                                      "choices": {"text": list(ch["text"]), "label": list(ch["label"])}})
        if bench == "hellaswag":
            t = self._task(tasks["hellaswag"].HellaSwag)
            return t, t._process_doc({**{k: r[k] for k in ("ctx_a", "ctx_b", "activity_label",
                                                            "label")}, "endings": list(r["endings"])})
        if bench == "mmlu":
            t = self._task(tasks["hendrycks_test"].GeneralHendrycksTest, DATASET_NAME=r["subject"])
            return t, t._process_doc({"question": r["question"], "choices": list(r["choices"]),
                                      "answer": int(r["answer"])})
        if bench == "truthfulqa":
            t = self._task(tasks["truthfulqa"].TruthfulQAMultipleChoice)
            return t, {"question": r["question"],
                       **{s: {k: list(v) for k, v in r[s].items()} for s in ("mc1_targets", "mc2_targets")}}
        if bench == "winogrande":
            t = self._task(tasks["winogrande"].Winogrande)
            return t, {k: r[k] for k in ("sentence", "option1", "option2", "answer")}
        t = self._task(tasks["gsm8k"].GradeSchoolMath8K)
        return t, {"question": r["question"], "answer": r["answer"]}

    @pytest.mark.parametrize("bench", BENCHES)
    def test_requests_and_scores_equal_the_harness(self, bench, harness_tasks, banks, raw):
        import random

        rng = np.random.default_rng(5)
        for iid in banks[bench].item_ids:
            r = raw[bench][iid]
            t, doc = self._doc(harness_tasks, bench, r)
            ir = build_item_requests(banks[bench], iid)
            if bench == "truthfulqa":
                ctx = t.fewshot_context(doc, 0, rnd=random.Random(0))
            else:
                long = r[LONGPROMPT[bench]]
                last = r["sentence"] if bench == "winogrande" else t.doc_to_text(doc)
                ctx = long[: len(long) - len(last)] + t.doc_to_text(doc)  # longprompt's shots
            hreqs = t.construct_requests(doc, ctx)
            hreqs = hreqs if isinstance(hreqs, (list, tuple)) else [hreqs]
            mine = [(q.context, q.continuation) if q.kind == "loglikelihood"
                    else (q.context, {"until": list(q.until)}) for q in ir.requests]
            assert mine == [tuple(h.args) for h in hreqs], (bench, iid)
            for _ in range(5):
                if bench == "gsm8k":
                    g = ir.gold
                    out = [r["answer"], f"#### {g}.", f"Step 1: #### {g}", f"#### {g}\nQuestion: 1",
                           "none", f"####{g}", f"#### 1{g}"][rng.integers(7)]
                    cut = out
                    for term in GSM8K_UNTIL:  # the harness LM cuts before process_results
                        cut = cut.split(term)[0]
                    assert ir.score([out]) == int(t.process_results(doc, [cut])["acc"])
                    continue
                lls = list(np.round(rng.normal(-5, 2, len(ir.requests)), int(rng.integers(0, 2))))
                res = t.process_results(doc, lls)
                metric = {"arc": "acc_norm", "hellaswag": "acc_norm", "mmlu": "acc",
                          "truthfulqa": "mc1", "winogrande": "acc"}[bench]
                assert ir.score(lls) == int(bool(res[metric])), (bench, iid, lls)
                if bench == "truthfulqa":
                    assert ir.mc2(lls) == pytest.approx(res["mc2"], abs=1e-12)


class TestShippedBanks:
    """Every item of every shipped content bank is asked exactly as the leaderboard asked it."""

    @pytest.mark.parametrize("bench", BENCHES)
    def test_shipped_requests_equal_fresh_ones(self, bench, items_dir):
        from atlascat.catalogue import load_content_bank

        bank = load_content_bank(bench)
        assert len(bank) > 0 and set(bank.item_ids) <= set(content_item_ids(bench, items_dir))
        ids = list(bank.item_ids)
        fresh = attach_content(ItemBank(ids, np.ones(len(ids)), np.zeros(len(ids))),
                               load_item_content(bench, items_dir))
        for iid in ids:
            assert build_requests(bank, iid) == build_requests(fresh, iid)
            assert build_item_requests(bank, iid).rule == build_item_requests(fresh, iid).rule
