"""Live runner on the leaderboard's protocol: the OpenAI completions-with-logprobs subject (against
a stub server on 127.0.0.1 speaking the legacy logprobs format), rounds of k items (one
log-likelihood call per round, pending rows committed before asking, exact resume), the replay
subject, ``atlas evaluate`` output (protocol label, predicted leaderboard score), and the live
faults of issue 12 (null content, trickling server, concurrent --resume, echoed API key, 5 MB
replies, bad --subject values, the install hint).

The request builder (``atlascat.content.requests``), ``CATSession.next_items`` / ``record_many`` and
the score link are written by other modules; the tests install small stand-ins for them (see
``protocol`` and ``batched_session`` below) so that they exercise this module's code only.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import sqlite3
import subprocess
import sys
import threading
import time
import types
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from conftest import HANG_S

from atlascat.cat.config import CATConfig
from atlascat.cat.session import CATSession
from atlascat.errors import AtlasError, ConfigError, LiveRunError, RunStoppedError
from atlascat.catalogue import BankRef
from atlascat.live import runner, service
from atlascat.content.items import item_record
from atlascat.live.mockserver import MockOpenAIServer
from atlascat.live.store import RunStore
from atlascat.live.subjects import (NoPromptLogprobsError, OpenAICompatible,
                                    OpenAICompletionsSubject, ReplaySubject, SimulatedSubject,
                                    SubjectError, continuation_logprob, harness_split,
                                    subject_from_spec)

ROOT = Path(__file__).resolve().parents[1]
FAST = CATConfig(se_stop=0.3, min_items=8, max_items=24)


@pytest.fixture(scope="module")
def bank():
    """The bank ``--bank arc`` means (CLI runs and resumes see the same items)."""
    return BankRef.from_option("arc").load()


def fast_store(path, **kw) -> RunStore:
    return RunStore(path, synchronous="NORMAL", **kw)


from atlascat.content.requests import Request, build_item_requests  # noqa: E402


@pytest.fixture
def protocol():
    """``atlascat.content.requests``: the leaderboard's requests and rules (the real module; a
    stand-in here once made ``bank_hash`` cache a hash without the request columns on the
    module-scoped bank, so a later resume saw "a different bank")."""
    import atlascat.content.requests as mod

    return mod


@pytest.fixture
def batched_session():
    """Joint selection (``CATSession.next_items`` / ``record_many``) is the CAT engine's."""
    assert hasattr(CATSession, "next_items") and hasattr(CATSession, "record_many")


# =============================================================================== a tiny LM + server
def toy_tokens(text: str):
    """Whitespace-led word tokens with offsets, and a deterministic log-probability for each
    token given the previous one (the first token has none, as in the OpenAI format)."""
    toks = [(m.group(), m.start()) for m in re.finditer(r"\s*\S+|\s+$", text)]
    out = []
    for i, (tok, off) in enumerate(toks):
        if i == 0:
            lp = None
        else:
            h = hashlib.sha256((toks[i - 1][0] + "\x00" + tok).encode()).digest()
            lp = -0.05 - int.from_bytes(h[:4], "little") / 2 ** 32 * 6.0
        out.append((tok, lp, off))
    return out


def toy_loglikelihood(context: str, continuation: str) -> float:
    ctx, cont = harness_split(context, continuation)
    return float(sum(lp for _, lp, off in toy_tokens(ctx + cont) if off >= len(ctx)))


class ToyLLSubject:
    """The toy LM in process (what the server computes), for runs without HTTP."""

    kind = "loglikelihood"
    name = "toy"
    cache_key = "toy@inprocess"

    def __init__(self):
        self.calls = []

    def describe(self):
        return {"type": "toy", "model": self.name}

    def loglikelihood(self, requests):
        self.calls.append(list(requests))
        return [toy_loglikelihood(r.context, r.continuation) for r in requests]

    def generate_until(self, requests):  # pragma: no cover - no generation items here
        raise AssertionError


class _LocalServer:
    """A threaded HTTP server on 127.0.0.1 (random port) serving one handler class."""

    def _serve(self, handler):
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self):
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


class StubCompletions(_LocalServer):
    """OpenAI legacy ``/v1/completions`` on 127.0.0.1 with the toy LM.

    mode: ``ok`` | ``nolists`` (400 for a list prompt) | ``nologprobs`` (llama.cpp: no logprobs)
    | ``noecho`` (logprobs of generated tokens only) | ``zeros`` (every log-prob 0)
    | ``no_max0`` (refuses max_tokens=0)."""

    def __init__(self, mode="ok"):
        self.mode = mode
        self.log = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _reply(self, status, obj):
                body = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stub.log.append(body)
                prompts = body["prompt"] if isinstance(body["prompt"], list) else [body["prompt"]]
                if stub.mode == "nolists" and isinstance(body["prompt"], list):
                    return self._reply(400, {"error": {"message": "prompt must be a string"}})
                if stub.mode == "no_max0" and body.get("max_tokens") == 0:
                    return self._reply(400, {"error": {"message": "max_tokens must be >= 1"}})
                choices = []
                for i, p in enumerate(prompts):
                    gen = ""
                    if body.get("max_tokens"):
                        gen = " 42 is it.\n\nQuestion: more"
                    if stub.mode == "nologprobs":
                        choices.append({"index": i, "text": gen, "logprobs": None,
                                        "finish_reason": "length"})
                        continue
                    text = (p if body.get("echo") else "") + gen
                    toks = toy_tokens(text) if text else []
                    if stub.mode == "noecho":
                        toks = [t for t in toks if t[2] >= len(p)] if body.get("echo") else toks
                    lp = {"tokens": [t for t, _, _ in toks],
                          "token_logprobs": [0.0 if stub.mode == "zeros" and v is not None else v
                                             for _, v, _ in toks],
                          "text_offset": [o for _, _, o in toks],
                          "top_logprobs": [None for _ in toks]}
                    choices.append({"index": i, "text": text,
                                    "logprobs": lp if body.get("logprobs") else None,
                                    "finish_reason": "length"})
                choices.reverse()  # servers need not keep the order: index says which is which
                self._reply(200, {"object": "text_completion", "choices": choices,
                                  "usage": {"prompt_tokens": 10 * len(prompts),
                                            "completion_tokens": 0}})

        self._serve(Handler)


# =============================================================================== completions subject
class TestCompletionsSubject:
    REQS = [Request("loglikelihood", "Question: Which is a star?\nAnswer:", " the Sun"),
            Request("loglikelihood", "Question: Which is a star?\nAnswer:", " the Moon"),
            Request("loglikelihood", "The capital of France is ", "Paris"),  # space moves over
            Request("loglikelihood", "A", " b c d")]

    def test_sums_continuation_logprobs_in_one_batched_request(self):
        with StubCompletions() as srv, \
                OpenAICompletionsSubject(srv.url, "toy", timeout=5) as subj:
            got = subj.loglikelihood(self.REQS)
        want = [toy_loglikelihood(r.context, r.continuation) for r in self.REQS]
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
        assert len(srv.log) == 1 and len(srv.log[0]["prompt"]) == 4  # one request, a list
        body = srv.log[0]
        assert (body["echo"], body["logprobs"], body["max_tokens"]) == (True, 1, 0)
        # the harness's whitespace rule: "... is " + "Paris" is read as "... is" + " Paris"
        assert body["prompt"][2] == "The capital of France is Paris"
        assert got[2] == pytest.approx(toy_tokens("The capital of France is Paris")[-1][1])
        assert subj.kind == "loglikelihood" and subj.protocol == "leaderboard"

    def test_boundary_rule(self):
        lp = {"tokens": ["Hello", " wor", "ld", "!"], "token_logprobs": [None, -1.0, -2.0, -4.0],
              "text_offset": [0, 5, 9, 11]}
        assert continuation_logprob(lp, 5, 12) == -7.0     # " world!"
        assert continuation_logprob(lp, 9, 12) == -6.0     # "ld!"
        assert continuation_logprob(lp, 9, 11) == -2.0     # generated "!" excluded
        assert continuation_logprob(lp, 7, 12) == -6.0     # straddling " wor" left to the context
        assert continuation_logprob(lp, 10, 11) == 0.0     # inside a straddler: the harness's 0
        assert harness_split("Answer: ", "Paris") == ("Answer:", " Paris")

    def test_batches_and_falls_back_to_one_prompt_per_request(self):
        reqs = self.REQS * 3
        want = [toy_loglikelihood(r.context, r.continuation) for r in reqs]
        with StubCompletions() as srv, \
                OpenAICompletionsSubject(srv.url, "toy", batch_prompts=5, timeout=5) as subj:
            got = subj.loglikelihood(reqs)
        assert got == pytest.approx(want) and sorted(len(b["prompt"]) for b in srv.log) == [2, 5, 5]
        with StubCompletions("nolists") as srv, \
                OpenAICompletionsSubject(srv.url, "toy", timeout=5, max_retries=0) as subj:
            assert subj.loglikelihood(reqs) == pytest.approx(want)
            n = len(srv.log)
            assert subj.loglikelihood(reqs[:2]) == pytest.approx(want[:2])
        assert len(srv.log) == n + 2  # remembered: no more list attempts
        with StubCompletions("no_max0") as srv, \
                OpenAICompletionsSubject(srv.url, "toy", timeout=5) as subj:
            got = subj.loglikelihood(reqs[:2])
        assert got == pytest.approx(want[:2]) and srv.log[-1]["max_tokens"] == 1

    @pytest.mark.parametrize("mode", ["nologprobs", "noecho"])
    def test_server_without_prompt_logprobs_is_refused_clearly(self, mode):
        with StubCompletions(mode) as srv, \
                OpenAICompletionsSubject(srv.url, "toy", timeout=5) as subj:
            with pytest.raises(NoPromptLogprobsError) as err:
                subj.loglikelihood(self.REQS)
        msg = str(err.value)
        assert "no log-probabilities for the prompt" in msg and "llama.cpp" in msg
        assert "openai:URL" in msg and "\n" not in msg
        assert isinstance(err.value, AtlasError) and not isinstance(err.value, LiveRunError)
        assert len(srv.log) == 1  # not retried: it cannot get better

    def test_generate_until_cuts_at_stop(self):
        with StubCompletions() as srv, \
                OpenAICompletionsSubject(srv.url, "toy", timeout=5) as subj:
            out = subj.generate_until(
                [Request("generate_until", "Q: 6*7?\nA:", until=("\n\n", "Question:"),
                         max_gen_toks=64)] * 2)
        assert out == [" 42 is it.", " 42 is it."]
        assert srv.log[0]["stop"] == ["\n\n", "Question:"] and srv.log[0]["max_tokens"] == 64


# =============================================================================== rounds
def _pending_rows(db):
    con = sqlite3.connect(db)
    rows = con.execute("SELECT step, item_id, status FROM steps ORDER BY step").fetchall()
    con.close()
    return rows


class _Crash(BaseException):
    """Stands in for the process dying in the middle of a request."""


class TestRounds:
    @pytest.mark.parametrize("k", [1, 4])
    def test_one_call_per_round_pending_committed_first_and_exact_resume(
            self, bank, tmp_path, protocol, batched_session, k):
        ref = service.evaluate(bank, ToyLLSubject(), store=fast_store(tmp_path / "ref.sqlite"),
                              seed=3, config=FAST, batch_size=k)
        assert ref.status == "done" and ref.protocol == "leaderboard" and ref.batch_size == k
        db = tmp_path / "crash.sqlite"
        toy = ToyLLSubject()
        seen = []

        class Crashing(ToyLLSubject):
            def loglikelihood(self, requests):
                rows = _pending_rows(db)
                pending = [i for _, i, s in rows if s == "pending"]
                seen.append(pending)
                # all choices of the round's items in this ONE call, all pending in the db
                assert len(requests) == sum(len(item_record(bank, i)["choices"]) for i in pending)
                assert 1 <= len(pending) <= k
                if len(seen) == 3:
                    raise _Crash()
                return toy.loglikelihood(requests)

        store = fast_store(db)
        rid = runner.start_run(store, bank, Crashing(), seed=3, config=FAST, batch_size=k)
        with pytest.raises(_Crash):
            runner.continue_run(store, rid, bank, Crashing())
        info = store.get_run(rid)
        assert info["n_items"] == len(seen[0]) + len(seen[1]) and info["status"] == "running"
        assert store.list_runs().loc[0, "pending"] == len(seen[2])
        res = service.resume(fast_store(db), rid, bank=bank, subject=Crashing())
        assert (res.items, res.scores, res.theta, res.se) == (ref.items, ref.scores, ref.theta, ref.se)
        assert seen[3] == seen[2]  # only the pending round asked again
        asked = [i for round_ in seen[:2] + seen[3:] for i in round_]
        assert asked == ref.items
        steps = store.steps(rid)
        assert steps["times_asked"].max() == 2 and (steps["status"] == "answered").all()
        if k > 1:
            assert len(seen) < len(ref.items)  # rounds, not single items
        assert json.loads(steps["answer"].iloc[0])[0] < 0  # the log-likelihoods are kept

    def test_a_reply_without_prompt_logprobs_midrun_is_retried(self, bank, tmp_path):
        """A completions server that has echoed prompt log-probabilities, then sends one reply
        without them (a proxy's glitch), is asked again: the run ends as an undisturbed one.
        It used to stop the run with "the server returns no log-probabilities" (not
        resumable, not retried). The first reply without them still refuses the server."""
        from atlascat.live.subjects import NoPromptLogprobsError
        from atlascat.live.toylm import ToyLM

        def run(fault, name):
            with MockOpenAIServer(lm=ToyLM(), fault=fault) as srv:
                subj = OpenAICompletionsSubject(srv.url, "toy", timeout=60, backoff=0)
                res = service.evaluate(bank, subj, store=fast_store(tmp_path / name), seed=3,
                                       config=FAST)
            return res, srv.log

        ref, _ = run(None, "ref.sqlite")
        res, log = run(lambda n, i, t: "nologprobs" if n == 4 else None, "glitch.sqlite")
        assert [e["fault"] for e in log].count("nologprobs") == 1
        assert (res.status, res.items, res.scores, res.theta, res.se) == \
            ("done", ref.items, ref.scores, ref.theta, ref.se)
        with pytest.raises(NoPromptLogprobsError, match="returned no log-probabilities"):
            run(lambda n, i, t: "nologprobs", "never.sqlite")

    def test_batched_rounds_over_http_equal_in_process(self, bank, tmp_path, protocol,
                                                       batched_session):
        ref = service.evaluate(bank, ToyLLSubject(), store=fast_store(tmp_path / "a.sqlite"),
                              seed=5, config=FAST, batch_size=4)
        with StubCompletions() as srv:
            subj = OpenAICompletionsSubject(srv.url, "toy", timeout=5, batch_prompts=64)
            res = service.evaluate(bank, subj, store=fast_store(tmp_path / "b.sqlite"), seed=5,
                                  config=FAST, batch_size=4)
        assert (res.items, res.scores, res.theta) == (ref.items, ref.scores, ref.theta)
        assert res.protocol == "leaderboard"
        assert len(srv.log) == -(-len(res.items) // 4)  # one HTTP request per round

    def test_constant_loglikelihoods_are_refused_not_scored(self, bank, tmp_path, protocol):
        with StubCompletions("zeros") as srv:
            subj = OpenAICompletionsSubject(srv.url, "toy", timeout=5)
            with pytest.raises(LiveRunError, match="same log-likelihood"):
                service.evaluate(bank, subj, store=fast_store(tmp_path / "z.sqlite"), config=FAST)
        assert RunStore(tmp_path / "z.sqlite").list_runs().loc[0, "state"] == "error"

    def test_chat_round_keeps_answers_that_arrived_before_a_crash(self, bank, tmp_path,
                                                                  batched_session):
        sim = SimulatedSubject(bank, 0.5, seed=7)
        ref = service.evaluate(bank, SimulatedSubject(bank, 0.5, seed=7), seed=2, config=FAST,
                              store=fast_store(tmp_path / "r.sqlite"), batch_size=3)
        assert ref.protocol == "simulated"
        asked, state = [], {"crash": True}

        class Flaky(SimulatedSubject):
            def ask(self, prompt, item):
                asked.append(item["item_id"])
                if state["crash"] and len(asked) == 5:
                    raise SubjectError("server went away")
                return sim.ask(prompt, item)

        db = tmp_path / "c.sqlite"
        subj = Flaky(bank, 0.5, seed=7)
        with pytest.raises(RunStoppedError, match="can be resumed") as stopped:
            service.evaluate(bank, subj, store=fast_store(db), seed=2, config=FAST, batch_size=3)
        store = fast_store(db)
        rid = store.list_runs().loc[0, "run_id"]
        assert (stopped.value.run_id, stopped.value.n_items, stopped.value.store) == (rid, 3, db)
        assert "atlas" not in str(stopped.value)    # the library says no command line
        statuses = store.steps(rid)["status"].tolist()
        assert statuses.count("scored") == 2 and statuses.count("pending") == 1
        state["crash"] = False
        res = service.resume(store, rid, bank=bank, subject=subj)
        assert (res.items, res.theta) == (ref.items, ref.theta)
        assert asked.count(asked[4]) == 2 and len(asked) == len(ref.items) + 1

    @pytest.mark.parametrize("k", [1, 3])
    def test_a_crash_after_the_answers_came_before_the_round_was_saved(self, bank, tmp_path,
                                                                       batched_session, k):
        """The process dies after a round's replies arrived and before the round's transaction
        (answers, scores, theta and the session snapshot) commits: a round asked concurrently
        (k > 1) kept each answer as it came and asks none again; one item at a time asks that
        one item again. Either way the run ends as an undisturbed one."""
        ref = service.evaluate(bank, SimulatedSubject(bank, 0.5, seed=7), seed=2, config=FAST,
                               store=fast_store(tmp_path / "r.sqlite"), batch_size=k)
        sim, asked = SimulatedSubject(bank, 0.5, seed=7), []

        class Counting(SimulatedSubject):
            def ask(self, prompt, item):
                asked.append(item["item_id"])
                return sim.ask(prompt, item)

        class Dying(RunStore):
            rounds = 0

            def complete_round(self, *args, **kw):
                Dying.rounds += 1
                if Dying.rounds == 3:
                    raise _Crash()
                return super().complete_round(*args, **kw)

        db = tmp_path / "d.sqlite"
        store = Dying(db, synchronous="NORMAL")
        rid = runner.start_run(store, bank, Counting(bank, 0.5, seed=7), seed=2, config=FAST,
                               batch_size=k)
        with pytest.raises(_Crash):
            runner.continue_run(store, rid, bank, Counting(bank, 0.5, seed=7))
        steps = fast_store(db).steps(rid)
        open_ = steps[steps["status"] != "answered"]
        assert 1 <= len(open_) <= k and open_["round"].nunique() == 1   # the third round's
        assert set(open_["status"]) == ({"pending"} if k == 1 else {"scored"})
        res = service.resume(fast_store(db), rid, bank=bank, subject=Counting(bank, 0.5, seed=7))
        assert (res.status, res.items, res.scores, res.theta, res.se) == \
            ("done", ref.items, ref.scores, ref.theta, ref.se)
        again = [i for i in set(asked) if asked.count(i) > 1]
        assert again == (list(open_["item_id"]) if k == 1 else [])

    def test_a_store_that_cannot_be_written_stops_the_run_in_one_line(self, bank, tmp_path):
        """The run store's disk fills up mid-run (SQLite's page limit stands in for it): the
        run stops with one LiveRunError naming the store (it was a bare sqlite3 error, a
        traceback at the command line), its saved answers intact, and resumes once the store
        can be written, as an undisturbed run."""
        ref = service.evaluate(bank, SimulatedSubject(bank, 0.5, seed=7), seed=2, config=FAST,
                               store=fast_store(tmp_path / "r.sqlite"))
        sim, asked = SimulatedSubject(bank, 0.5, seed=7), []
        db = tmp_path / "full.sqlite"
        store = fast_store(db)

        class FillsTheDisk(SimulatedSubject):
            def ask(self, prompt, item):
                asked.append(item["item_id"])
                if len(asked) == 5:       # no page more than the file has now
                    con = store._con()
                    pages = con.execute("PRAGMA page_count").fetchone()[0]
                    con.execute(f"PRAGMA max_page_count={pages}")
                return sim.ask(prompt, item)

        rid = runner.start_run(store, bank, FillsTheDisk(bank, 0.5, seed=7), seed=2, config=FAST)
        with pytest.raises(LiveRunError, match="the run store .* cannot be written") as err:
            runner.continue_run(store, rid, bank, FillsTheDisk(bank, 0.5, seed=7))
        assert str(db) in str(err.value) and "\n" not in str(err.value)
        again = fast_store(db)            # another process: the disk has room again
        assert 4 <= again.get_run(rid)["n_items"] < ref.n_items
        res = service.resume(again, rid, bank=bank, subject=SimulatedSubject(bank, 0.5, seed=7))
        assert (res.status, res.items, res.scores, res.theta, res.se) == \
            ("done", ref.items, ref.scores, ref.theta, ref.se)

    def test_batch_size_validated(self, bank, tmp_path):
        with pytest.raises(ConfigError, match="batch size"):
            service.evaluate(bank, ToyLLSubject(), store=fast_store(tmp_path / "x.sqlite"),
                            batch_size=0)


# =============================================================================== replay
class TestReplay:
    def test_replay_reproduces_recorded_answers(self, bank, tmp_path, protocol, batched_session):
        from atlascat import catalogue

        rm = catalogue.load_responses("arc")
        model = str(rm.subject_ids[100])
        row = dict(zip(map(str, rm.item_ids), rm.values[100]))
        subj = subject_from_spec(f"replay:arc#{model}", bank=bank)
        assert isinstance(subj, ReplaySubject) and subj.protocol == "leaderboard"
        res = service.evaluate(bank, subj, store=fast_store(tmp_path / "rp.sqlite"), seed=1,
                              config=CATConfig(se_stop=0.25, max_items=40), batch_size=4)
        assert res.status == "done" and res.n_items >= 30
        assert res.scores == [int(row[i]) for i in res.items]
        # a matrix file works the same, and names the model it lacks
        path = tmp_path / "m.csv"
        rm.subset(subjects=[model]).write(path)
        assert subject_from_spec(f"replay:{path}#{model}", bank=bank).answer_of(res.items[0]) == \
            res.scores[0]
        with pytest.raises(ConfigError, match="not a subject"):
            subject_from_spec(f"replay:{path}#nobody", bank=bank)


# =============================================================================== CLI output
def _fake_link(monkeypatch, fail=False):
    """The evaluation service reads a link that predicts 61.2% (59.2-63.2), 73rd percentile
    (``fail``: the link cannot be loaded)."""
    import atlascat.catalogue.bankref as mod
    from atlascat.scorelink.prediction import ScorePrediction

    class Link:
        def predict(self, theta, se, responses=None, stop_reason=None):
            assert responses and set(responses.values()) <= {0, 1}
            return ScorePrediction(0.612, 0.592, 0.632, percentile=73.2, benchmark="arc")

        def stop_settings(self, margin):
            return {}

    def load_score_link(bench):
        if fail:
            raise FileNotFoundError(f"no link for {bench}")
        assert bench == "arc"
        return Link()

    monkeypatch.setattr(mod, "_score_link", load_score_link)


class TestEvaluateCLI:
    def test_leaderboard_protocol_output(self, bank, tmp_path, capsys, monkeypatch, protocol,
                                         batched_session):
        from atlascat.cli import main

        _fake_link(monkeypatch)
        with StubCompletions() as srv:
            code = main(["evaluate", "--bank", "arc", "--subject", f"completions:{srv.url}",
                         "--llm", "toy", "--batch-size", "4", "--se-stop", "0.3",
                         "--max-items", "24", "--min-items", "8", "-o", str(tmp_path / "run"), "-q"])
        cap = capsys.readouterr()
        out = cap.out
        assert code == 0, cap.err
        assert "protocol: leaderboard (log-likelihood)" in out
        assert "predicted leaderboard score: 61.2% (95% interval 59.2-63.2%), 73rd percentile" in out
        assert re.search(r"theta = -?\d\.\d{3} \+- \d\.\d{3} \(\d+ items, rounds of 4\)", out)
        saved = json.loads((tmp_path / "run" / "results.json").read_text())
        assert saved[0]["protocol"] == "leaderboard" and saved[0]["batch_size"] == 4
        assert saved[0]["prediction"]["percentile"] == pytest.approx(73.2)
        assert (tmp_path / "run" / "runs.sqlite").exists()
        assert Path(saved[0]["report"]).parent == tmp_path / "run" / "reports"

    def test_chat_is_labelled_approximate_and_missing_link_is_a_note(self, bank, tmp_path,
                                                                     capsys, monkeypatch):
        from atlascat.cli import main

        _fake_link(monkeypatch, fail=True)
        with MockOpenAIServer(bank, 0.5, seed=7) as srv:
            code = main(["evaluate", "--bank", "arc", "--subject", f"openai:{srv.url}",
                         "--llm", "mock", "--se-stop", "0.3", "--max-items", "24", "--min-items", "8",
                         "--db", str(tmp_path / "c.sqlite"), "-q"])
        cap = capsys.readouterr()
        assert code == 0
        assert "protocol: APPROXIMATE (chat; differs from the bank's)" in cap.out
        assert "predicted leaderboard score: not available (no score link for 'arc'" in cap.out
        assert "APPROXIMATE" in cap.err
        code = main(["evaluate", "--bank", "arc", "--subject", f"openai:{srv.url}", "--llm", "m",
                     "--db", str(tmp_path / "c.sqlite"), "--json", "--max-items", "1",
                     "--min-items", "1", "--max-retries", "0", "--timeout", "1"])
        assert code == 2  # the server is gone: the run stops, resumable, with a message
        runs = RunStore(tmp_path / "c.sqlite").list_runs()
        assert set(runs["protocol"]) == {"approximate"}

    @pytest.mark.parametrize("spec, text", [
        ("simulate:nan", "simulate:nan: THETA must be a finite number"),
        ("simulate:abc", "simulate:abc: THETA must be a finite number"),
        ("simulate:inf", "simulate:inf: THETA must be a finite number"),
        ("bogus:1", "unknown kind 'bogus'"),
        ("replay:arc", "use replay:MATRIX.csv#MODEL"),
        ("openai", "use one of openai:URL"),
    ])
    def test_bad_subject_is_one_clear_line(self, tmp_path, capsys, spec, text):
        from atlascat.cli import main

        code = main(["evaluate", "--bank", "arc", "--subject", spec, "--db",
                     str(tmp_path / "s.sqlite")])
        err = capsys.readouterr().err
        assert code == 2 and text in err and err.count("\n") == 1, err
        assert "done" not in err and "\U0001f18e" not in err  # no emoji for ':abc:'

    @pytest.mark.parametrize("args, text", [
        (["--batch-size", "0", "--subject", "simulate:0"], "--batch-size must be >= 1"),
        (["--resume", "abc", "--batch-size", "4"], "drop --batch-size"),
        (["--subject", "completions:http://127.0.0.1:9/v1"], "--llm NAME"),
        (["--subject", "simulate:0", "-o", "FILE"], "is a file; give a directory"),
    ])
    def test_bad_options(self, tmp_path, capsys, args, text):
        from atlascat.cli import main

        (tmp_path / "FILE").write_text("x")
        args = [str(tmp_path / a) if a == "FILE" else a for a in args]
        code = main(["evaluate", "--bank", "arc", "--db", str(tmp_path / "o.sqlite"), *args])
        err = capsys.readouterr().err
        assert code == 2 and text in err and err.count("\n") == 1, err

    @pytest.mark.parametrize("args, option", [
        (["--seed", "0"], "--seed"),          # the default's value, given: the run keeps its own
        (["--no-bound-stop"], "--bound-stop / --no-bound-stop"),
        (["--bound-stop"], "--bound-stop / --no-bound-stop"),
        (["--bound-margin", "0.1"], "--bound-margin"),
        (["--prompt-style", "few-shot"], "--prompt-style"),
        (["--temperature", "0"], "--temperature"),
        (["--max-tokens", "5"], "--max-tokens"),
        (["--system", "Be brief."], "--system"),
        (["--completion"], "--chat / --completion"),
        (["--device", "cpu"], "--device"),
    ])
    def test_resume_refuses_every_setting_it_would_ignore(self, tmp_path, capsys, args, option):
        """A resumed run keeps its stops, seed, endpoint kind and prompts: each option that
        would change them is one line naming it (they were ignored without a word)."""
        from atlascat.cli import main

        code = main(["evaluate", "--resume", "abc", "--db", str(tmp_path / "r.sqlite"), *args])
        err = capsys.readouterr().err
        assert code == 2 and err == f"error: --resume continues a run with its own settings; " \
                                    f"drop {option}\n"

    def test_install_hint_printed_intact(self, tmp_path, capsys, monkeypatch):
        from atlascat.cli import main

        monkeypatch.setitem(sys.modules, "httpx", None)  # as if httpx were not installed
        code = main(["evaluate", "--bank", "arc", "--subject", "completions:http://127.0.0.1:9/v1",
                     "--llm", "m", "--db", str(tmp_path / "h.sqlite")])
        assert code == 2 and "pip install 'atlascat[live]'" in capsys.readouterr().err


# =============================================================================== issue-12 faults
class FaultServer(_LocalServer):
    """A chat server on 127.0.0.1 that misbehaves in one way (``mode``), answering the letter of
    ``reply(item)`` otherwise: ``null`` (content null), ``trickle`` (one byte every ``gap`` s),
    ``echo`` (the reply contains the request's API key), ``huge`` (a reply of ``size`` bytes)."""

    def __init__(self, bank, mode, *, gap=0.9, size=5_000_000):
        self.mode, self.log = mode, []
        mock = MockOpenAIServer(bank, 0.5, seed=7)  # only for its question -> item map / policy
        mock.stop()   # never served: its listening socket was left to the collector
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                text = body["messages"][-1]["content"]
                item = mock.identify(text)
                stub.log.append(item)
                answer = mock.reply(item, few_shot=False)
                if stub.mode == "null":
                    answer = None
                elif stub.mode == "echo":
                    answer = f"{answer} (my key is {self.headers['Authorization'][7:]})"
                elif stub.mode == "huge":
                    answer = answer + " " + "x" * size
                payload = json.dumps({"choices": [{"index": 0, "finish_reason": "stop",
                                                   "message": {"role": "assistant",
                                                               "content": answer}}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if stub.mode == "trickle":
                    try:
                        for b in payload:
                            self.wfile.write(bytes([b]))
                            self.wfile.flush()
                            time.sleep(gap)
                    except OSError:
                        pass
                else:
                    self.wfile.write(payload)

        self._serve(Handler)


class TestLiveFaults:
    def test_null_content_is_never_scored(self, bank, tmp_path):
        with FaultServer(bank, "null") as srv:
            subj = OpenAICompatible(srv.url, "m", timeout=5, max_retries=2, backoff=0)
            with pytest.raises(LiveRunError, match="no content"):
                service.evaluate(bank, subj, store=fast_store(tmp_path / "n.sqlite"))
        runs = RunStore(tmp_path / "n.sqlite").list_runs()
        assert runs.loc[0, "state"] == "error" and runs.loc[0, "n_items"] == 0
        assert len(srv.log) == 3  # asked, retried, then stopped (resumable)

    def test_unreadable_replies_are_never_scored_silently(self, bank, tmp_path):
        from atlascat.live.subjects import CallableSubject

        subj = CallableSubject(lambda item, prompt: "I cannot help with that.", name="refuser")
        with pytest.raises(LiveRunError, match="none of the model's first 10 replies"):
            service.evaluate(bank, subj, store=fast_store(tmp_path / "u.sqlite"))
        runs = RunStore(tmp_path / "u.sqlite").list_runs()
        assert runs.loc[0, "state"] == "error" and runs.loc[0, "n_items"] == 9

    def test_timeout_bounds_the_whole_request(self, bank):
        item = item_record(bank, bank.item_ids[0])
        from atlascat.content.items import build_prompt

        with FaultServer(bank, "trickle") as srv:
            subj = OpenAICompatible(srv.url, "m", timeout=1.5, max_retries=0)
            t0 = time.perf_counter()
            with pytest.raises(SubjectError, match=r"timed out after 1.5 s \(whole request\)"):
                subj.ask(build_prompt(item), item)
            elapsed = time.perf_counter() - t0
        assert elapsed < 2.5, elapsed  # the reply takes > 100 s at one byte per 0.9 s

    def test_echoed_key_redacted_and_huge_replies_capped(self, bank, tmp_path, monkeypatch):
        key = "sk-live-runner-0123456789abcdef"
        monkeypatch.setenv("ATLAS_TEST_KEY", key)
        db = tmp_path / "k.sqlite"
        with FaultServer(bank, "echo") as srv:
            subj = OpenAICompatible(srv.url, "m", api_key_env="ATLAS_TEST_KEY", timeout=5)
            res = service.evaluate(bank, subj, store=RunStore(db), config=FAST)
        assert res.status == "done"
        answers = RunStore(db).steps(res.run_id)["answer"]
        assert answers.str.contains(r"my key is \*\*\*", regex=True).all()
        for p in tmp_path.rglob("*"):
            if p.is_file():
                assert key.encode() not in p.read_bytes(), p

        db2 = tmp_path / "big.sqlite"
        with FaultServer(bank, "huge", size=5_000_000) as srv:
            subj = OpenAICompatible(srv.url, "m", timeout=20)
            res = service.evaluate(bank, subj, store=RunStore(db2, max_answer_chars=1000),
                                  config=CATConfig(se_stop=0.3, min_items=3, max_items=3))
        assert res.status == "done" and res.n_items == 3
        steps = RunStore(db2).steps(res.run_id)
        assert (steps["answer"].str.len() == 1000).all()
        assert (steps["answer_chars"] > 5_000_000).all()
        assert steps["answer_sha256"].str.fullmatch(r"[0-9a-f]{64}").all()
        con = sqlite3.connect(db2)
        assert con.execute("SELECT COUNT(*) FROM cache").fetchone()[0] == 0  # cut: not cached
        con.close()
        size = sum(p.stat().st_size for p in tmp_path.glob("big.sqlite*"))
        assert size < 1_000_000, size  # 3 x 5 MB replies

    def test_run_lock_in_process(self, bank, tmp_path):
        db = tmp_path / "l.sqlite"
        store = fast_store(db)
        rid = runner.start_run(store, bank, SimulatedSubject(bank, 0.5), config=FAST)
        store.claim(rid)
        with pytest.raises(LiveRunError, match="already being run by process"):
            fast_store(db).claim(rid)
        with pytest.raises(LiveRunError, match="already being run"):
            service.resume(fast_store(db), rid, bank=bank)
        store.release(rid)
        assert service.resume(fast_store(db), rid, bank=bank).status == "done"

    @pytest.mark.parametrize("other", ["finishes", "stops"])
    def test_a_resume_that_waited_for_the_lock_starts_from_the_run_as_it_is(self, bank,
                                                                           tmp_path, other):
        """Two processes resume one killed run at once: the one that reads the run while the
        other holds it, and takes the lock once the other has finished it (or stopped after
        more answers), continues from the run as the other left it. It continued from the
        snapshot it had read before: asking answered items again into new steps, counting
        them twice, turning a finished run back into a running one."""
        ref = service.evaluate(bank, SimulatedSubject(bank, 0.5, seed=7), seed=2, config=FAST,
                               store=fast_store(tmp_path / "r.sqlite"))
        sim, asked = SimulatedSubject(bank, 0.5, seed=7), {"a": [], "b": []}

        def subject(who, crash_at=None):
            class Asking(SimulatedSubject):
                def ask(self, prompt, item):
                    asked[who].append(item["item_id"])
                    if len(asked[who]) == crash_at:
                        raise _Crash()
                    return sim.ask(prompt, item)
            return Asking(bank, 0.5, seed=7)

        db = tmp_path / "two.sqlite"
        rid = runner.start_run(fast_store(db), bank, subject("a"), seed=2, config=FAST)
        with pytest.raises(_Crash):     # killed after 4 answers
            runner.continue_run(fast_store(db), rid, bank, subject("a", crash_at=5))
        second = fast_store(db)
        claim = second.claim

        def late_claim(run_id):         # meanwhile the other process runs it
            with contextlib.suppress(_Crash):
                runner.continue_run(fast_store(db), rid, bank,
                                    subject("a", crash_at=None if other == "finishes" else 9))
            claim(run_id)

        second.claim = late_claim
        res = runner.continue_run(second, rid, bank, subject("b"))
        if other == "stops":
            assert res.status == "done"
        res = runner.RunResult.from_store(fast_store(db), rid)
        assert (res.status, res.items, res.scores, res.theta, res.se, res.n_items) == \
            ("done", ref.items, ref.scores, ref.theta, ref.se, ref.n_items)
        steps = fast_store(db).steps(rid)
        assert len(steps) == len(ref.items) and (steps["status"] == "answered").all()
        assert not set(asked["b"]) & set(asked["a"][:-1])    # nothing answered asked again
        if other == "finishes":
            assert asked["b"] == []

    def test_a_refused_resume_writes_nothing(self, bank, tmp_path, capsys):
        """``--resume`` of a run another process is running: one line, exit 2, and neither
        its results.json row nor its page is written (they would say ``error`` for a run
        that is running, or overwrite the other process's finished row), the store as it
        was."""
        from atlascat.cli import main

        out = tmp_path / "run"
        db = out / "runs.sqlite"
        rid = runner.start_run(RunStore(db), bank, SimulatedSubject(bank, 0.5), config=FAST,
                               bank_ref="shipped:arc")
        other = RunStore(db)          # stands in for the process running it
        other.claim(rid)
        before = RunStore(db).get_run(rid)
        code = main(["evaluate", "--resume", rid, "-o", str(out), "-q"])
        err = capsys.readouterr().err.strip()
        assert code == 2 and err.count("\n") == 0 and "is already being run by" in err
        assert not (out / "results.json").exists() and not (out / "reports").exists()
        after = RunStore(db).get_run(rid)
        assert (after["status"], after["error"], after["updated_at"]) == \
            (before["status"], before["error"], before["updated_at"])
        other.release(rid)
        assert main(["evaluate", "--resume", rid, "-o", str(out), "-q"]) == 0
        rows = json.loads((out / "results.json").read_text())
        assert [r["status"] for r in rows] == ["done"]

    def test_a_resume_on_another_bank_is_refused_before_writing(self, bank, tmp_path, capsys):
        """``--resume RUN --bank OTHER``: one line, exit 2, and no results.json row or page
        (which was written with status ``error`` and the other bank's items), a finished run's
        too; the stored run as it was."""
        from atlascat.cli import main

        out = tmp_path / "run"
        db = out / "runs.sqlite"
        rid = runner.start_run(RunStore(db), bank, SimulatedSubject(bank, 0.5), config=FAST,
                               bank_ref="shipped:arc")
        before = RunStore(db).get_run(rid)
        code = main(["evaluate", "--resume", rid, "-o", str(out), "--bank", "hellaswag", "-q"])
        err = capsys.readouterr().err.strip()
        assert code == 2 and err.count("\n") == 0 and "started on a different bank" in err
        assert not (out / "results.json").exists() and not (out / "reports").exists()
        after = RunStore(db).get_run(rid)
        assert (after["status"], after["error"], after["bank_ref"]) == \
            (before["status"], before["error"], "shipped:arc")
        assert main(["evaluate", "--resume", rid, "-o", str(out), "-q"]) == 0
        done = json.loads((out / "results.json").read_text())
        capsys.readouterr()
        code = main(["evaluate", "--resume", rid, "-o", str(out), "--bank", "hellaswag", "-q"])
        assert code == 2 and "started on a different bank" in capsys.readouterr().err
        assert json.loads((out / "results.json").read_text()) == done

    @pytest.mark.slow
    def test_two_concurrent_resumes_of_one_run(self, bank, tmp_path, capsys):
        """A second ``--resume`` while the first is asking is refused; nothing is asked twice."""
        from atlascat.cli import main

        db = tmp_path / "two.sqlite"
        with MockOpenAIServer(bank, 0.5, seed=7, hang_s=0.25,
                              fault=lambda n, i, t: "hang") as srv:
            rid = runner.start_run(RunStore(db), bank, OpenAICompatible(srv.url, "mock"),
                                   config=CATConfig(se_stop=0.3, min_items=8, max_items=8),
                                   bank_ref="shipped:arc")
            env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
            proc = subprocess.Popen([sys.executable, "-m", "atlascat", "evaluate", "--resume",
                                     rid, "--db", str(db), "--json"], cwd=ROOT, env=env,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            deadline = time.time() + 60
            while time.time() < deadline and not srv.log:  # the first process is asking
                time.sleep(0.02)
            code = main(["evaluate", "--resume", rid, "--db", str(db)])
            err = capsys.readouterr().err
            out, perr = proc.communicate(timeout=HANG_S)
        assert code == 2 and f"run {rid} is already being run by process {proc.pid}" in err
        assert proc.returncode == 0, perr
        res = json.loads(out)[0]
        assert res["status"] == "done" and res["n_items"] == 8
        sent = [e["item_id"] for e in srv.log]
        assert len(sent) == len(set(sent)) == 8  # no item sent twice


# =============================================================================== with ToyLM
@pytest.mark.slow
def test_completions_client_equals_toylm_through_the_mock_server(bank, protocol, batched_session,
                                                                 tmp_path):
    """The HTTP completions path gives ToyLM's in-process log-likelihoods (to float summation
    order) and the same adaptive run. ToyLM and the mock server's logprobs mode come from the
    live-backends module (present once merged)."""
    toylm = pytest.importorskip("atlascat.live.toylm", reason="ToyLM is merged from live-backends")
    lm = toylm.ToyLM(seed=3, name="toy")
    ids = list(bank.item_ids[:25])
    reqs = [r for i in ids for r in build_item_requests(bank, i).requests]
    reqs += [Request("loglikelihood", "The capital of France is ", "Paris")]
    cfg = CATConfig(se_stop=0.3, min_items=6, max_items=10)
    ref = service.evaluate(bank, lm, store=fast_store(tmp_path / "a.sqlite"), config=cfg,
                          batch_size=4)
    with MockOpenAIServer(lm=lm) as srv:
        subj = OpenAICompletionsSubject(srv.url, "toy", timeout=30, batch_prompts=32)
        np.testing.assert_allclose(subj.loglikelihood(reqs), lm.loglikelihood(reqs),
                                   rtol=0, atol=1e-9)
        res = service.evaluate(bank, subj, store=fast_store(tmp_path / "b.sqlite"), config=cfg,
                              batch_size=4)
    assert (res.items, res.scores, res.theta) == (ref.items, ref.scores, ref.theta)
    with MockOpenAIServer(lm=lm, prompt_logprobs="none") as srv:  # llama.cpp-like
        with pytest.raises(NoPromptLogprobsError):
            service.evaluate(bank, OpenAICompletionsSubject(srv.url, "toy", timeout=30),
                            store=fast_store(tmp_path / "c.sqlite"), config=cfg)


# =============================================================================== real requests
@pytest.fixture(scope="module")
def request_banks(shared_data):
    """Content banks with the leaderboard's request data (atlascat.content.requests), one per
    benchmark with a dense matrix, restricted to the matrix's items."""
    from atlascat import catalogue
    from atlascat.content.items import attach_content, load_item_content

    out = {}
    for bench in ("arc", "hellaswag", "truthfulqa", "winogrande", "gsm8k"):
        rm = catalogue.load_responses(bench)
        bank = attach_content(catalogue.load_paper_bank(bench),
                              load_item_content(bench, shared_data / "openllm" / "items"))
        out[bench] = (bank.subset([i for i in bank.item_ids if i in set(rm.item_ids)]), rm)
    return out


@pytest.mark.parametrize("bench", ["arc", "hellaswag", "truthfulqa", "winogrande", "gsm8k"])
def test_replay_through_the_real_requests_and_rules(request_banks, batched_session, tmp_path,
                                                    bench):
    """Every benchmark's requests (log-likelihood and GSM8K generation) and scoring rule, asked
    in rounds of 4 of a replayed leaderboard model: the live scores are its recorded answers."""
    bank, rm = request_banks[bench]
    row = 11
    subj = ReplaySubject(rm, str(rm.subject_ids[row]), bank=bank)
    res = service.evaluate(bank, subj, store=fast_store(tmp_path / "r.sqlite"), batch_size=4,
                          config=CATConfig(se_stop=0.3, min_items=8, max_items=12), seed=2)
    recorded = dict(zip(map(str, rm.item_ids), rm.values[row]))
    assert res.status == "done" and res.protocol == "leaderboard" and res.n_items >= 8
    assert res.scores == [int(recorded[i] >= 0.5) for i in res.items]


def test_completions_over_http_on_real_requests(request_banks, batched_session, tmp_path):
    bank, _ = request_banks["winogrande"]  # partial scoring: contexts differ, one continuation
    cfg = CATConfig(se_stop=0.3, min_items=6, max_items=8)
    ref = service.evaluate(bank, ToyLLSubject(), store=fast_store(tmp_path / "a.sqlite"),
                          config=cfg, batch_size=4)
    with StubCompletions() as srv:
        res = service.evaluate(bank, OpenAICompletionsSubject(srv.url, "toy", timeout=10,
                                                             batch_prompts=64),
                              store=fast_store(tmp_path / "b.sqlite"), config=cfg, batch_size=4)
    assert (res.items, res.scores, res.theta) == (ref.items, ref.scores, ref.theta)
    assert len(srv.log) == -(-res.n_items // 4)


def test_bank_hash_extends_the_cat_sessions_fingerprint(bank):
    """A run's bank hash is the SHA-256 of ids and parameters (the CAT session's bank
    fingerprint: its first 16 hex digits) continued with the items' content, so content alone
    changes it; its value is that of the runs already stored."""
    from atlascat.cat.tables import bank_fingerprint
    from atlascat.irt.bank import ItemBank

    bare = ItemBank(bank.item_ids, *bank.params, model=bank.model)
    assert runner.bank_hash(bare)[:16] == bank_fingerprint(bare) == bank_fingerprint(bank)
    assert runner.bank_hash(bank) != runner.bank_hash(bare)
    assert runner.bank_hash(bank) == \
        "1a5b6ddabab8d39a399b12632dcc1742c9acbed0fc22ab293c61c124866ca965"
