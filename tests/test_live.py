"""Live evaluation: item content, scorers, subjects over HTTP (with faults), the SQLite store,
resumable runs (in-process and a SIGKILLed `atlas evaluate` subprocess), lm-eval import."""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import HANG_S

from atlascat.cat.config import CATConfig
from atlascat.errors import BankError, ConfigError, ResponseDataError
from atlascat.catalogue import BankRef
from atlascat.live import runner, service
from atlascat.content.items import attach_content, build_prompt, item_record, load_item_content
from atlascat.catalogue import content_bank_path, load_content_bank
from atlascat.content.parsing import parse_choices
from atlascat.live.lmeval import read_lmeval_samples
from atlascat.live.mockserver import MockOpenAIServer
from atlascat.live.scorers import (extract_choice, extract_number, get_scorer, register_scorer,
                                   score_answer)
from atlascat.live.store import RunStore
from atlascat.live.subjects import (CallableSubject, OpenAICompatible, SimulatedSubject,
                                    SubjectError)

ROOT = Path(__file__).resolve().parents[1]
THETA = 0.5      # the scripted model's true ability
SEED = 7         # the scripted model's answer seed
CAT_SEED = 3     # the CAT's seed


@pytest.fixture(scope="module")
def bank():
    """The bank ``--bank arc`` means (the CLI runs below must see the same items)."""
    return BankRef.from_option("arc").load()


@pytest.fixture(scope="module")
def items_dir(shared_data):
    return shared_data / "openllm" / "items"


def fast_store(path) -> RunStore:
    return RunStore(path, synchronous="NORMAL")


def delivered(log):
    """Requests the server answered and the client received (200, well-formed, not hung)."""
    return [e for e in log if e["status"] == 200 and not e.get("malformed") and not e.get("hung")]


# =============================================================================== items
class TestItems:
    def test_parse_choices_all_forms(self):
        expect = (["A", "B"], ["x]y", "it's"])
        arr = np.array(["x]y", "it's"], dtype=object)
        assert parse_choices({"label": np.array(["A", "B"], dtype=object), "text": arr}) == expect
        assert parse_choices({"label": ["A", "B"], "text": ["x]y", "it's"]}) == expect
        # the stringified dict of numpy arrays found in some item files: parsed without eval
        assert parse_choices(repr({"label": np.array(["A", "B"], dtype=object), "text": arr})) == expect
        assert parse_choices(json.dumps({"label": ["A", "B"], "text": ["x]y", "it's"]})) == expect
        assert parse_choices(arr) == expect
        with pytest.raises(BankError):
            parse_choices("{'text': __import__('os').system('true')}")

    # items with content found under the id of the dense matrix or the published bank
    @pytest.mark.parametrize("bench, n_items, n_matched", [
        ("arc", 245, 245), ("gsm8k", 486, 486), ("hellaswag", 151, 150), ("mmlu", 198, 102),
        ("truthfulqa", 290, 290), ("winogrande", 239, 239)])
    def test_loaders_give_matrix_ids_and_valid_keys(self, items_dir, bench, n_items, n_matched):
        from atlascat import catalogue

        df = load_item_content(bench, items_dir)
        assert len(df) == n_items and df["item_id"].is_unique
        ids = set(catalogue.load_responses(bench).item_ids)
        if bench != "mmlu":
            ids |= set(catalogue.load_paper_bank(bench).item_ids)
        assert len(ids & set(df["item_id"])) == n_matched
        for rec in df.to_dict("records"):
            if rec["scorer"] == "mc":
                assert rec["answer"] in "ABCDEFGHIJKLMN"[:len(rec["choices"])]
                assert len(rec["choices"]) >= 2 and rec["question"]
            else:
                float(rec["answer"])

    def test_arc_key_points_at_the_labelled_answer(self, items_dir):
        raw = pd.read_parquet(items_dir / "arc.parquet")
        df = load_item_content("arc", items_dir).set_index("item_id")
        for rec in raw.to_dict("records"):
            labels, texts = parse_choices(rec["choices"])
            row = df.loc[str(rec["metabench_idx"])]
            key_text = texts[labels.index(rec["answerKey"])]
            assert row["choices"][ord(row["answer"]) - ord("A")] == key_text

    def test_truthfulqa_options_are_shuffled_but_keyed(self, items_dir):
        raw = pd.read_parquet(items_dir / "truthfulqa.parquet")
        df = load_item_content("truthfulqa", items_dir).set_index("item_id")
        firsts = []
        for rec in raw.to_dict("records"):
            targets = rec["mc1_targets"]
            correct = targets["choices"][int(np.argmax(targets["labels"]))]
            row = df.loc[str(rec["metabench_idx"])]
            assert row["choices"][ord(row["answer"]) - ord("A")] == correct
            assert sorted(row["choices"]) == sorted(targets["choices"])
            firsts.append(row["answer"] == "A")
        assert np.mean(firsts) < 0.5  # the source always lists the correct answer first

    def test_shipped_bank_has_content_and_is_small(self, items_dir):
        bank = load_content_bank("arc")

        # 239 of the 245 content items survive the filter on the whole leaderboard population
        # (union matrices); the IRT model is chosen per benchmark for the leaderboard score
        # (docs/leaderboard.md)
        assert len(bank) == 239 and bank.model in ("2pl", "3pl", "4pl")
        assert content_bank_path("arc").stat().st_size < 1_000_000
        from atlascat.irt.ability import eap
        from atlascat.live.build_bank import population_matrix

        rm = population_matrix("arc", items_dir)
        assert set(bank.item_ids) <= set(rm.item_ids)
        assert (bank.a > 0).all() and (bank.c < 0.9).all() and (np.abs(bank.b) < 10).all()
        # it reproduces the observed item p-values at the population's own thetas
        y = rm.aligned_values(bank.item_ids, extra="ignore")
        implied = np.where(np.isnan(y), np.nan, bank.probability(eap(y, bank)[0]))
        implied, observed = np.nanmean(implied, axis=0), np.nanmean(y, axis=0)
        assert np.corrcoef(implied, observed)[0, 1] > 0.995
        assert np.abs(implied - observed).max() < 0.08
        content = load_item_content("arc", items_dir).set_index("item_id")
        meta = bank.metadata
        for col in ("question", "answer", "scorer", "fewshot"):
            assert (meta[col].to_numpy() == content.loc[list(bank.item_ids), col].to_numpy()).all()
        assert all(list(a) == list(b) for a, b in zip(meta["choices"],
                                                      content.loc[list(bank.item_ids), "choices"]))

    def test_attach_content(self, items_dir):
        from atlascat import catalogue

        published = catalogue.load_paper_bank("arc")
        content = load_item_content("arc", items_dir)
        joined = attach_content(published, content)
        assert len(joined) == 245
        np.testing.assert_array_equal(joined.b, published.subset(list(joined.item_ids)).b)
        with pytest.raises(BankError, match="have no content"):
            attach_content(published, content, missing="error")

    def test_prompts(self, bank, items_dir):
        item = item_record(bank, bank.item_ids[0])
        p = build_prompt(item)
        text = p.messages[-1]["content"]
        for letter, choice in zip("ABCD", item["choices"]):
            assert f"\n{letter}. {choice}" in text
        assert p.hash() == build_prompt(item).hash()
        assert p.hash() != build_prompt(item, temperature=0.5).hash()
        assert p.hash() != build_prompt(item, kind="completion").hash()
        few = build_prompt(item, kind="completion", style="few-shot")
        raw = pd.concat([pd.read_parquet(items_dir / "arc.parquet"),
                         pd.read_parquet(items_dir / "arc-secondary.parquet")])
        long = raw.set_index(raw["metabench_idx"].astype(str)).loc[item["item_id"],
                                                                    "alltwentyfiveshot_longprompt"]
        assert few.text == long
        hs = load_item_content("hellaswag", items_dir).iloc[0].to_dict()
        with pytest.raises(ConfigError, match="zero-shot"):
            build_prompt(hs, style="few-shot")


# =============================================================================== scorers
class TestScorers:
    CHOICES = ["a consumer", "a decomposer", "A mouth full of bristles", "producer"]

    @pytest.mark.parametrize("reply, letter", [
        ("B", "B"), ("(C)", "C"), ("B. a decomposer", "B"), ("Answer: D", "D"),
        ("The answer is **C**", "C"), ("the answer is a consumer", "A"),
        ("A mouth full of bristles.", "C"), (" a decomposer", "B"), ("producer\n", "D"),
        ("I pick option B", "B"), ("D is correct", "D"), ("no idea", None), ("", None),
    ])
    def test_choice_extraction(self, reply, letter):
        assert extract_choice(reply, self.CHOICES) == letter

    @pytest.mark.parametrize("reply, value", [
        ("so 40 + 2 = 42\n#### 42", "42"), ("#### 3,000", "3000"), ("The answer is $18.", "18"),
        ("first 5, then 7.", "7"), ("42.0", "42"), ("-3", "-3"), ("nothing", None),
    ])
    def test_numbers(self, reply, value):
        got = extract_number(reply)
        assert (got is None) if value is None else got == __import__("decimal").Decimal(value)

    def test_scoring_and_registry(self):
        mc = {"item_id": "1", "choices": self.CHOICES, "answer": "C", "scorer": "mc"}
        assert score_answer(mc, "The answer is (C).") == 1
        assert score_answer(mc, "B") == 0
        g = {"item_id": "2", "choices": [], "answer": "1000", "scorer": "gsm8k"}
        assert score_answer(g, "... #### 1,000") == 1
        assert score_answer(g, "#### 100") == 0
        register_scorer("test-contains", lambda item, ans: int(item["answer"] in ans), overwrite=True)
        assert score_answer({"answer": "xyz", "scorer": "test-contains"}, "abc xyz") == 1
        assert score_answer(mc, "C", scorer=lambda item, ans: 0) == 0
        with pytest.raises(ConfigError, match="unknown scorer"):
            get_scorer("nope")
        with pytest.raises(ConfigError, match="0 or 1"):
            score_answer(mc, "C", scorer=lambda item, ans: 0.5)


# =============================================================================== subjects
class TestOpenAICompatible:
    def test_chat_and_completion_with_tokens(self, bank):
        item = item_record(bank, bank.item_ids[5])
        with MockOpenAIServer(bank, THETA, seed=SEED) as srv:
            for chat in (True, False):
                with OpenAICompatible(srv.url, "mock", chat=chat, timeout=5) as subj:
                    ans = subj.ask(build_prompt(item, kind=subj.kind), item)
                assert score_answer(item, ans.text) == int(srv.correct(item["item_id"]))
                assert ans.prompt_tokens > 20 and ans.completion_tokens >= 1
                assert ans.latency_s > 0 and ans.attempts == 1
        assert [e["path"] for e in srv.log] == ["/v1/chat/completions", "/v1/completions"]

    def test_retries_429_500_malformed_and_timeout_then_succeeds(self, bank):
        item = item_record(bank, bank.item_ids[0])
        script = {1: "429", 2: "500", 3: "malformed", 4: "hang"}
        sleeps = []
        with MockOpenAIServer(bank, THETA, seed=SEED, hang_s=1.0,
                              fault=lambda n, i, t: script.get(n)) as srv:
            with OpenAICompatible(srv.url, "mock", timeout=0.3, max_retries=4, backoff=0.01,
                                  sleep=sleeps.append) as subj:
                ans = subj.ask(build_prompt(item), item)
        assert ans.attempts == 5
        assert sleeps == [0.01, 0.02, 0.04, 0.08]  # exponential backoff
        assert [e["fault"] for e in srv.log] == ["429", "500", "malformed", "hang", None]
        assert len(delivered(srv.log)) == 1
        assert score_answer(item, ans.text) == int(srv.correct(item["item_id"]))

    def test_gives_up_with_a_clear_error(self, bank):
        item = item_record(bank, bank.item_ids[0])
        with MockOpenAIServer(bank, THETA, fault=lambda n, i, t: "500") as srv:
            with OpenAICompatible(srv.url, "mock", max_retries=2, backoff=0, timeout=5) as subj, \
                    pytest.raises(SubjectError, match=r"failed 3 attempt\(s\); last: HTTP 500"):
                subj.ask(build_prompt(item), item)
        assert len(srv.log) == 3

    def test_auth_error_names_the_variable_not_the_key(self, bank, monkeypatch):
        item = item_record(bank, bank.item_ids[0])
        monkeypatch.setenv("ATLAS_TEST_WRONG_KEY", "sk-wrong-123456789")
        with MockOpenAIServer(bank, THETA, api_key="sk-right") as srv:
            with OpenAICompatible(srv.url, "mock", api_key_env="ATLAS_TEST_WRONG_KEY",
                                  timeout=5) as subj, pytest.raises(SubjectError) as err:
                subj.ask(build_prompt(item), item)
        assert "ATLAS_TEST_WRONG_KEY" in str(err.value) and "sk-wrong" not in str(err.value)
        assert "sk-wrong" not in repr(subj) and "sk-wrong" not in json.dumps(subj.describe())
        with pytest.raises(TypeError):
            __import__("pickle").dumps(subj)

    def test_concurrency_limit_is_shared(self, bank):
        limiter = threading.BoundedSemaphore(2)
        items = [item_record(bank, i) for i in bank.item_ids[:6]]
        with MockOpenAIServer(bank, THETA, hang_s=0.15, fault=lambda n, i, t: "hang") as srv:
            subjects = [OpenAICompatible(srv.url, f"m{k}", limiter=limiter, timeout=5)
                        for k in range(3)]
            threads = [threading.Thread(target=subjects[k % 3].ask,
                                        args=(build_prompt(it), it)) for k, it in enumerate(items)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            for subj in subjects:
                subj.close()
        assert len(srv.log) == 6 and srv.max_in_flight == 2

    def test_bad_settings(self):
        with pytest.raises(ConfigError):
            OpenAICompatible("ftp://x", "m")
        with pytest.raises(ConfigError):
            OpenAICompatible("http://127.0.0.1:1/v1", "")
        assert OpenAICompatible("http://127.0.0.1:9", "m").base_url == "http://127.0.0.1:9/v1"


# =============================================================================== runs
def reference_run(bank, tmp_path, theta=THETA, seed=SEED, cat_seed=CAT_SEED, config=None,
                  name=None):
    """An uninterrupted in-process run of the simulated subject (same policy as the server)
    under the model name ``name`` (its stream of random choices is the model's own:
    ``subject_generator(cat_seed, name)``)."""
    return service.evaluate(bank, SimulatedSubject(bank, theta, seed=seed, name=name),
                           seed=cat_seed, config=config,
                           store=fast_store(tmp_path / f"reference_{name}.sqlite"))


class _Crash(BaseException):
    """Stands in for the process dying in the middle of a request."""


class TestRunsInProcess:
    def test_scripted_subject_recovered_within_2se(self, bank, tmp_path):
        store = fast_store(tmp_path / "cov.sqlite")
        hits = []
        for s in range(50):
            res = service.evaluate(bank, SimulatedSubject(bank, THETA, seed=1000 + s),
                                  store=store, seed=s, config=CATConfig(se_stop=0.1))
            assert res.status == "done" and res.stop_reason in ("se", "bank_exhausted")
            assert res.n_items >= 30 and (res.se <= 0.1 or res.n_items == len(bank))
            hits.append(abs(res.theta - THETA) <= 2 * res.se)
        assert np.mean(hits) >= 0.9, np.mean(hits)

    def test_pending_written_before_asking_and_crash_resume_is_exact(self, bank, tmp_path):
        ref = reference_run(bank, tmp_path)
        db = tmp_path / "crash.sqlite"
        sim = SimulatedSubject(bank, THETA, seed=SEED)
        asked = []

        def fn(item, prompt):
            con = sqlite3.connect(db)
            row = con.execute("SELECT status, prompt FROM steps WHERE item_id=? ORDER BY step DESC",
                              (item["item_id"],)).fetchone()
            con.close()
            assert row == ("pending", prompt.render())  # committed before the question is sent
            asked.append(item["item_id"])
            if len(asked) == 12:
                raise _Crash()
            return sim.ask(prompt, item).text

        subj = CallableSubject(fn, name=sim.name)
        store = fast_store(db)
        rid = runner.start_run(store, bank, subj, seed=CAT_SEED)
        with pytest.raises(_Crash):
            runner.continue_run(store, rid, bank, subj)
        info = store.get_run(rid)
        steps = store.steps(rid)
        assert info["n_items"] == 11 and info["status"] == "running"
        assert (steps["status"] == "answered").sum() == 11
        assert steps.iloc[-1]["status"] == "pending" and steps.iloc[-1]["item_id"] == asked[-1]
        assert len(info["session"]["scores"]) == 11  # snapshot saved with the 11th answer
        res = service.resume(fast_store(db), rid, bank=bank, subject=subj)
        assert res.items == ref.items and res.scores == ref.scores
        assert res.theta == ref.theta and res.se == ref.se
        assert asked[11] == asked[12] and len(set(asked)) == len(asked) - 1  # only the pending one
        assert store.steps(rid)["times_asked"].max() == 2

    def test_a_run_stored_with_an_old_flat_config_resumes(self, bank, tmp_path):
        """A run stored before CATConfig was composed of parts (flat keys, and none of the
        floor / ceiling / score-precision settings of later versions) resumes exactly."""
        config = CATConfig(se_stop=0.2, min_items=8, max_items=40, randomesque=3)
        ref = reference_run(bank, tmp_path, config=config)
        old = {k: v for k, v in config.to_dict().items()
               if k not in ("floor_theta", "ceiling_theta", "bound_z", "score_curve",
                            "score_sd_stop")}
        sim = SimulatedSubject(bank, THETA, seed=SEED)
        asked = []

        def fn(item, prompt):
            asked.append(item["item_id"])
            if len(asked) == 6:
                raise _Crash()
            return sim.ask(prompt, item).text

        db = tmp_path / "old.sqlite"
        subj = CallableSubject(fn, name=sim.name)
        store = fast_store(db)
        rid = runner.start_run(store, bank, subj, seed=CAT_SEED, config=config)
        with pytest.raises(_Crash):
            runner.continue_run(store, rid, bank, subj)
        con = sqlite3.connect(db)
        session = json.loads(con.execute("SELECT session_json FROM runs WHERE run_id=?",
                                         (rid,)).fetchone()[0])
        session["config"] = old
        con.execute("UPDATE runs SET session_json=?, config_json=? WHERE run_id=?",
                    (json.dumps(session), json.dumps(old), rid))
        con.commit()
        con.close()
        res = service.resume(fast_store(db), rid, bank=bank, subject=subj)
        assert res.status == "done" and res.items == ref.items and res.scores == ref.scores
        assert (res.theta, res.se, res.stop_reason) == (ref.theta, ref.se, ref.stop_reason)

    def test_cache_answers_repeat_questions(self, bank, tmp_path):
        calls = []
        sim = SimulatedSubject(bank, THETA, seed=SEED)

        def fn(item, prompt):
            calls.append(item["item_id"])
            return sim.ask(prompt, item).text

        store = fast_store(tmp_path / "cache.sqlite")
        subj = CallableSubject(fn, name="cached-model")
        first = service.evaluate(bank, subj, store=store, seed=1)
        n = len(calls)
        second = service.evaluate(bank, subj, store=store, seed=1)
        assert len(calls) == n and second.items == first.items and second.theta == first.theta
        assert store.steps(second.run_id)["cached"].all()
        service.evaluate(bank, subj, store=store, seed=1, cache=False)
        assert len(calls) == 2 * n

    def test_several_models_concurrently(self, bank, tmp_path):
        subjects = [SimulatedSubject(bank, th, seed=SEED, name=f"m{th}") for th in (-0.5, 0.5, 1.5)]
        with service.LiveRun.start(tmp_path / "many.sqlite", bank, subjects, seed=1,
                                   config=CATConfig(se_stop=0.15, max_items=60)) as live:
            results = live.run()              # the store it opened closed after it
        for subj, res in zip(subjects, results):
            alone = service.evaluate(bank, SimulatedSubject(bank, subj.theta, seed=SEED,
                                                            name=subj.name),
                                    store=fast_store(tmp_path / "alone.sqlite"), seed=1,
                                    config=CATConfig(se_stop=0.15, max_items=60))
            assert res.status == "done" and res.items == alone.items and res.theta == alone.theta
        assert results[0].theta < results[1].theta < results[2].theta

    def test_faults_retried_run_completes_identically(self, bank, tmp_path):
        ref = reference_run(bank, tmp_path, name="mock")
        script = {3: "429", 5: "500", 7: "malformed", 9: "hang", 10: "500", 12: "drop"}
        with MockOpenAIServer(bank, THETA, seed=SEED, hang_s=0.8,
                              fault=lambda n, i, t: script.get(n)) as srv:
            subj = OpenAICompatible(srv.url, "mock", timeout=0.3, max_retries=3, backoff=0.01)
            res = service.evaluate(bank, subj, store=fast_store(tmp_path / "f.sqlite"), seed=CAT_SEED)
        assert res.status == "done"
        assert (res.items, res.scores, res.theta, res.se) == (ref.items, ref.scores, ref.theta, ref.se)
        got = [e["item_id"] for e in delivered(srv.log)]
        assert got == ref.items  # each item answered exactly once, in the CAT's order
        assert {e["fault"] for e in srv.log if e.get("fault")} == set(script.values())

    def test_persistent_failure_stops_resumable_then_resumes(self, bank, tmp_path, capsys):
        from atlascat.cli import main

        ref = reference_run(bank, tmp_path, name="mock")
        broken = {"on": True}
        db = tmp_path / "e.sqlite"
        with MockOpenAIServer(bank, THETA, seed=SEED,
                              fault=lambda n, i, t: "500" if broken["on"] and n > 8 else None) as srv:
            code = main(["evaluate", "--bank", "arc", "--subject", f"openai:{srv.url}",
                         "--llm", "mock", "--seed", str(CAT_SEED), "--db", str(db),
                         "--max-retries", "2", "--backoff", "0", "--timeout", "5", "-q",
                         "--no-bound-stop"])  # the in-process reference has no link stops
            err = capsys.readouterr().err
            assert code == 2
            assert "failed 3 attempt(s); last: HTTP 500: 'internal error'" in err
            assert "--resume" in err
            runs = RunStore(db).list_runs()
            assert runs.loc[0, "state"] == "error" and runs.loc[0, "n_items"] == 8
            assert runs.loc[0, "pending"] == 1
            rid = runs.loc[0, "run_id"]
            broken["on"] = False
            code = main(["evaluate", "--resume", rid, "--db", str(db), "--json"])
            out = capsys.readouterr().out
        assert code == 0
        res = json.loads(out)[0]
        assert (res["items"], res["theta"], res["se"]) == (ref.items, ref.theta, ref.se)
        assert [e["item_id"] for e in delivered(srv.log)] == ref.items


    def test_cli_several_models_share_the_concurrency_limit(self, bank, tmp_path, capsys):
        from atlascat.cli import main

        refs = {m: reference_run(bank, tmp_path, config=CATConfig(se_stop=0.15), name=m)
                for m in ("model-a", "model-b")}
        db = tmp_path / "two.sqlite"
        with MockOpenAIServer(bank, THETA, seed=SEED) as srv:
            code = main(["evaluate", "--bank", "arc", "--subject", f"openai:{srv.url}",
                         "--llm", "model-a", "--llm", "model-b", "--max-concurrency", "1",
                         "--se-stop", "0.15", "--seed", str(CAT_SEED), "--db", str(db), "--json",
                         "--no-bound-stop"])  # the in-process reference has no link stops
        out = capsys.readouterr().out
        assert code == 0
        results = json.loads(out)
        assert [r["model"] for r in results] == ["model-a", "model-b"]
        for r in results:  # the server's policy ignores the model name: each equals its
            ref = refs[r["model"]]   # reference (the model's own stream of choices)
            assert (r["status"], r["items"], r["theta"]) == ("done", ref.items, ref.theta)
            assert Path(r["report"]).exists()
        ref = refs["model-a"]
        assert srv.max_in_flight == 1 and len(srv.log) == sum(len(r.items) for r in refs.values())
        code = main(["runs", "--db", str(db), "--run", results[0]["run_id"], "--json",
                     "-o", str(tmp_path / "page.html")])
        listing = json.loads(capsys.readouterr().out)
        assert code == 0 and [s["item_id"] for s in listing["steps"]] == ref.items
        assert "model-a" in (tmp_path / "page.html").read_text()


# =============================================================================== subprocess
def atlas(*args, env=None, wait=True):
    cmd = [sys.executable, "-m", "atlascat", *map(str, args)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            cwd=ROOT, text=True)
    if not wait:
        return proc
    out, err = proc.communicate(timeout=HANG_S)
    return proc.returncode, out, err


def test_sigkill_mid_run_then_resume_matches_uninterrupted(bank, tmp_path):
    key = "sk-atlas-test-4f1d9c0e7b2a"
    env = {**os.environ, "ATLAS_TEST_KEY": key, "COLUMNS": "200"}
    common = ["--bank", "arc", "--llm", "mock-model", "--seed", CAT_SEED, "--se-stop", 0.1,
              "--api-key-env", "ATLAS_TEST_KEY", "--timeout", 10,
              "--no-bound-stop"]  # as the in-process reference run: SE rule only

    # uninterrupted reference through HTTP (its own server and database)
    with MockOpenAIServer(bank, THETA, seed=SEED, api_key=key) as srv:
        code, out, err = atlas("evaluate", "--subject", f"openai:{srv.url}", *common,
                               "--db", tmp_path / "ref.sqlite", "--json", env=env)
    assert code == 0, err
    ref = json.loads(out)[0]
    assert ref["status"] == "done" and ref["n_items"] >= 30
    ref_log = srv.log
    # the HTTP path reproduces the in-process simulated subject exactly
    local = reference_run(bank, tmp_path, name="mock-model")
    assert (ref["items"], ref["theta"], ref["se"]) == (local.items, local.theta, local.se)

    # the same run, SIGKILLed when it asks its 12th item, then resumed
    proc_box = {}
    kill_at = 12
    state = {"killed": None}

    def fault(n, item_id, times_seen):
        if state["killed"] is None and times_seen == 0 and n == kill_at:
            os.kill(proc_box["p"].pid, signal.SIGKILL)
            state["killed"] = item_id
            return "drop"
        return None

    db = tmp_path / "killed.sqlite"
    with MockOpenAIServer(bank, THETA, seed=SEED, api_key=key, fault=fault) as srv:
        proc_box["p"] = atlas("evaluate", "--subject", f"openai:{srv.url}", *common, "--db", db,
                              env=env, wait=False)
        out1, err1 = proc_box["p"].communicate(timeout=HANG_S)
        assert proc_box["p"].returncode == -signal.SIGKILL
        code, out, _ = atlas("runs", "--db", db, "--json", env=env)
        listed = json.loads(out)
        assert code == 0 and listed[0]["state"] == "interrupted"
        assert listed[0]["n_items"] == kill_at - 1 and listed[0]["pending"] == 1
        rid = listed[0]["run_id"]
        code, out2, err2 = atlas("evaluate", "--resume", rid, "--db", db, "--json", env=env)
    assert code == 0, err2
    res = json.loads(out2)[0]
    assert res["run_id"] == rid and res["status"] == "done"
    assert (res["items"], res["scores"], res["theta"], res["se"]) == \
        (ref["items"], ref["scores"], ref["theta"], ref["se"])

    # server log: no item answered twice; the only repeated request is the one in flight
    answered = [e["item_id"] for e in delivered(srv.log)]
    assert answered == ref["items"] and len(set(answered)) == len(answered)
    requested = [e["item_id"] for e in srv.log]
    assert len(requested) == len(answered) + 1
    assert requested[kill_at - 1] == requested[kill_at] == state["killed"] == ref["items"][kill_at - 1]
    assert [e["status"] for e in srv.log].count("dropped") == 1

    # security: the key was used, and is nowhere in databases, reports or output
    assert {e["auth"] for e in ref_log + srv.log} == {f"Bearer {key}"}
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.suffix == ".html" for p in files) and any(p.suffix == ".sqlite" for p in files)
    for p in files:
        assert key.encode() not in p.read_bytes(), p
    for text in (out1, err1, out2, err2, out):
        assert key not in text
    html = (tmp_path / "killed_reports" / f"{rid}.html").read_text()
    assert f"{res['theta']:.3f}" in html and "mock-model" in html


# =============================================================================== lm-eval import
def _write_samples(path: Path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")


class TestLmEvalImport:
    def test_metabench_logs_to_matrix(self, tmp_path):
        stamp = "2024-06-01T12-00-00.123456"
        _write_samples(tmp_path / "org__model-a" / f"samples_metabench_arc_{stamp}.jsonl", [
            {"doc_id": 0, "doc": {"question": "q", "metabench_idx": 263}, "acc": 1.0, "acc_norm": 0.0},
            {"doc_id": 1, "doc": {"question": "q", "metabench_idx": 514}, "acc": 0.0, "acc_norm": 1.0},
            {"doc_id": 2, "doc": {"question": "q", "metabench_idx": 3}, "acc": 1.0, "acc_norm": 1.0},
        ])
        _write_samples(tmp_path / "model-b" / f"samples_metabench_arc_{stamp}.jsonl", [
            {"doc_id": 1, "doc": {"metabench_idx": 514}, "acc": 1.0},
            {"doc_id": 0, "doc": {"metabench_idx": 263}, "acc": 0.0},
        ])
        rm = read_lmeval_samples(tmp_path)
        assert list(rm.subject_ids) == ["model-b", "org/model-a"]
        assert list(rm.item_ids) == ["3", "263", "514"]
        np.testing.assert_array_equal(rm.values, [[np.nan, 0, 1], [1, 1, 0]])
        norm = read_lmeval_samples(tmp_path / "org__model-a", metric="acc_norm")
        np.testing.assert_array_equal(norm.values, [[1, 0, 1]])

    def test_doc_id_mapping_filters_and_exact_match(self, tmp_path):
        f = tmp_path / "m" / "samples_gsm8k_2024-01-01T00-00-00.jsonl"
        _write_samples(f, [
            {"doc_id": 0, "filter": "strict-match", "exact_match": 1.0},
            {"doc_id": 0, "filter": "flexible-extract", "exact_match": 0.0},
            {"doc_id": 1, "filter": "strict-match", "exact_match": 0.0},
            {"doc_id": 1, "filter": "flexible-extract", "exact_match": 1.0},
        ])
        with pytest.raises(ResponseDataError, match="filter"):
            read_lmeval_samples(f)
        rm = read_lmeval_samples(f, filter_name="flexible-extract", doc_ids=["474", "1169"])
        assert list(rm.subject_ids) == ["m"] and list(rm.item_ids) == ["474", "1169"]
        np.testing.assert_array_equal(rm.values, [[0.0, 1.0]])

    def test_bad_logs(self, tmp_path):
        f = tmp_path / "m" / "samples_x_2024-01-01T00-00-00.jsonl"
        _write_samples(f, [{"doc_id": 0, "acc": 2.0}])
        with pytest.raises(ResponseDataError, match="outside"):
            read_lmeval_samples(f)
        f.write_text('{"doc_id": 0, "acc": 1}\nnot json\n')
        with pytest.raises(ResponseDataError, match=":2: not valid JSON"):
            read_lmeval_samples(f)
        with pytest.raises(ResponseDataError, match="no samples"):
            read_lmeval_samples(tmp_path, task="other")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(),
                    reason="reads a zombie process from /proc (Linux)")
def test_a_killed_run_whose_process_is_not_reaped_lists_as_interrupted(tmp_path):
    """A run whose process was killed is ``interrupted`` in ``list_runs`` even while its pid
    still answers (its parent has not reaped it yet: a zombie): the run's lock, which the OS
    released when the process died, says it is gone."""
    db = tmp_path / "runs.sqlite"
    child = (
        "import sys, time\n"
        "from atlascat.live.store import RunStore\n"
        f"st = RunStore({str(db)!r})\n"
        "rid = st.create_run(model='m', subject={}, cache_key='k', bank_ref=None, bank_hash='h',\n"
        "                    n_bank_items=1, config={}, prompt={}, seed=0, session={})\n"
        "st.claim(rid)\n"
        "print(rid, flush=True)\n"
        "time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        rid = proc.stdout.readline().strip()
        store = RunStore(db)
        assert store.list_runs().set_index("run_id").loc[rid, "state"] == "running"
        os.kill(proc.pid, signal.SIGKILL)
        for _ in range(200):                     # dead, not reaped: its pid still answers
            with open(f"/proc/{proc.pid}/stat") as fh:
                if fh.read().split(")")[-1].split()[0] == "Z":
                    break
            threading.Event().wait(0.02)
        os.kill(proc.pid, 0)
        state = "running"
        for _ in range(100):      # the OS frees a dead process's lock a moment after its death
            state = store.list_runs().set_index("run_id").loc[rid, "state"]
            if state != "running":
                break
            threading.Event().wait(0.02)
        assert state == "interrupted"
        store.close()
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()
