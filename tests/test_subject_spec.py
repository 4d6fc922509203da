"""One subject vocabulary and one run kind: ``SubjectSpec`` parses every ``--subject``, a stored
subject's ``type`` is its spec's kind and rebuilds the same subject, and a run's kind is stored
once when it is created."""
from __future__ import annotations

import shlex
import sqlite3
import sys

import pytest

from atlascat.cat.config import CATConfig
from atlascat.catalogue import BankRef, load_responses
from atlascat.errors import ConfigError
from atlascat.live.service import LiveRun
from atlascat.live.store import RUN_KINDS, RunStore
from atlascat.live.subjects import (HTTP_OPTIONS, SUBJECT_KINDS, SimulatedSubject, SubjectSpec,
                                    subject_from_spec)
from atlascat.suite import SuiteConfig


@pytest.fixture(scope="module")
def arc():
    return BankRef.from_option("arc").load()


@pytest.mark.parametrize("text, model, match", [
    ("nokind", None, "use one of"),
    ("completions:", "m", "use one of"),
    ("teleport:x", None, "unknown kind 'teleport'"),
    ("sim:0.5", None, "unknown kind 'sim'"),
    ("completions:http://127.0.0.1:1/v1", None, "--llm NAME"),
    ("openai:http://127.0.0.1:1/v1", None, "--llm NAME"),
    ("replay:arc", None, "replay:MATRIX.csv#MODEL"),
    ("cmd:python score.py {model}", None, "names {model}"),
    ("simulate:11", None, "THETA must be a finite number"),
])
def test_bad_specs_are_one_line_errors(text, model, match):
    with pytest.raises(ConfigError, match=match) as err:
        SubjectSpec.parse(text, model)
    assert "\n" not in str(err.value)


def test_parse_reads_every_kind_and_prints_back():
    for kind, usage in SUBJECT_KINDS.items():
        assert usage.startswith(kind + ":")
    spec = SubjectSpec.parse(" CMD: python s.py {model} ", "m1")
    assert (spec.kind, spec.target, spec.model, str(spec)) == (
        "cmd", "python s.py {model}", "m1", "cmd:python s.py {model}")
    assert spec.several_models and not SubjectSpec.parse("cmd:python s.py").several_models
    assert SubjectSpec.parse("completions:http://h/v1", "a").with_model("b").model == "b"
    assert not SubjectSpec.parse("simulate:0.5").several_models


def _specs(tmp_path, arc):
    rm = load_responses("arc")
    prog = tmp_path / "score.py"
    prog.write_text("import sys\n")
    return [
        ("simulate:0.25:3", "sim", {"chat": False}),
        (f"replay:arc#{rm.subject_ids[7]}", None, {}),
        ("cmd:" + shlex.join([sys.executable, str(prog), "{model}"]), "m 1", {"timeout": 9.0}),
        ("completions:http://127.0.0.1:9/v1", "toy", {"timeout": 7.0, "batch_prompts": 4,
                                                       "api_key_env": "MY_KEY"}),
        ("openai:http://127.0.0.1:9/v1", "toy", {"chat": False, "max_retries": 2}),
    ]


def test_a_stored_subject_is_rebuilt_by_the_same_spec(tmp_path, arc):
    pytest.importorskip("httpx")
    for text, model, settings in _specs(tmp_path, arc):
        spec = SubjectSpec.parse(text, model)
        subject = spec.build(arc, **settings)
        desc = subject.describe()
        assert desc["type"] == spec.kind, text          # one vocabulary, stored as typed
        again = SubjectSpec.rebuild(desc, arc)
        assert again.cache_key == subject.cache_key and again.describe() == desc, text


def test_rebuild_takes_this_calls_http_settings_but_keeps_the_stored_key_variable():
    pytest.importorskip("httpx")
    stored = subject_from_spec("completions:http://127.0.0.1:9/v1", model="toy", timeout=7.0,
                               api_key_env="MY_KEY").describe()
    again = SubjectSpec.rebuild(stored, timeout=3.0, api_key_env="OPENAI_API_KEY", device="cpu")
    assert (again.timeout, again.api_key_env, again.batch_prompts) == (3.0, "MY_KEY", 16)
    assert SubjectSpec.rebuild(stored).timeout == 7.0
    assert {"timeout", "max_retries", "backoff", "api_key_env", "limiter"} <= set(HTTP_OPTIONS)


def test_a_subject_that_cannot_be_rebuilt_says_so():
    with pytest.raises(ConfigError, match="cannot rebuild a 'callable' subject"):
        SubjectSpec.rebuild({"type": "callable", "model": "f"})


def test_the_run_kind_is_stored_once_and_read_back(tmp_path, arc):
    store = RunStore(tmp_path / "runs.sqlite", synchronous="NORMAL")
    adaptive = LiveRun.start(store, BankRef.from_option("arc"),
                             [SimulatedSubject(arc, 0.3, seed=1)],
                             config=CATConfig(se_stop=0.5, min_items=3, max_items=5))
    suite = BankRef.from_option("openllm-v1", kinds=("suite",))
    whole = LiveRun.start(store, suite, [SimulatedSubject(suite.load(), 0.3, seed=1)],
                          config=SuiteConfig(max_items=6, min_items=6))
    assert [j.kind for j in adaptive.jobs + whole.jobs] == ["adaptive", "suite"]
    runs = store.list_runs().set_index("run_id")["kind"].to_dict()
    assert runs == {adaptive.jobs[0].run_id: "adaptive", whole.jobs[0].run_id: "suite"}
    resumed = LiveRun.resume(store, [whole.jobs[0].run_id, adaptive.jobs[0].run_id])
    assert [j.kind for j in resumed.jobs] == ["suite", "adaptive"]
    assert [r.status for r in resumed.run()] == ["done", "done"]
    rows = resumed.results()
    assert "average" in rows[0] and "theta" not in rows[0] and rows[1]["theta"] is not None
    with pytest.raises(Exception, match="kind is one of"):
        store.create_run(model="m", subject={}, cache_key="k", bank_ref=None, bank_hash="h",
                         n_bank_items=1, config={}, prompt={}, seed=0, session={},
                         kind="suite run")
    assert set(RUN_KINDS) == {"adaptive", "predictor", "suite"}


def test_an_older_store_gets_each_runs_kind_once(tmp_path, arc):
    db = tmp_path / "old.sqlite"
    store = RunStore(db, synchronous="NORMAL")
    subject = SimulatedSubject(arc, 0.3, seed=1)
    ids = [LiveRun.start(store, BankRef.from_option("arc"), [subject]).jobs[0].run_id]
    suite = BankRef.from_option("openllm-v1", kinds=("suite",))
    ids.append(LiveRun.start(store, suite, [SimulatedSubject(suite.load(), 0.3)]).jobs[0].run_id)
    store.close()
    con = sqlite3.connect(db)
    con.execute("UPDATE runs SET kind='adaptive'")
    con.execute("UPDATE meta SET value='2' WHERE key='schema_version'")
    con.commit()
    con.close()
    kinds = RunStore(db).list_runs().set_index("run_id")["kind"]
    assert [kinds[i] for i in ids] == ["adaptive", "suite"]


def test_one_resume_continues_a_suite_run_and_a_single_bank_run(tmp_path, arc, capsys):
    import json

    from atlascat.cli import main

    db = tmp_path / "runs.sqlite"
    store = RunStore(db, synchronous="NORMAL")
    suite = BankRef.from_option("openllm-v1", kinds=("suite",))
    ids = [LiveRun.start(store, suite, [SimulatedSubject(suite.load(), 0.3)],
                         config=SuiteConfig(max_items=6, min_items=6)).jobs[0].run_id,
           LiveRun.start(store, BankRef.from_option("arc"), [SimulatedSubject(arc, 0.3)],
                         config=CATConfig(se_stop=0.5, min_items=3, max_items=5)).jobs[0].run_id]
    store.close()
    assert main(["evaluate", "--resume", ids[0], "--resume", ids[1], "--db", str(db),
                 "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["run_id"] for r in rows] == ids and [r["status"] for r in rows] == ["done"] * 2
    assert rows[0]["average"]["score"] is not None and rows[1]["theta"] is not None
