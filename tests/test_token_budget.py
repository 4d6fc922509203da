"""``atlas evaluate --token-budget N``: a live run stops once its next round is expected to take
it past N tokens (prompt + completion, as the server reports them), the budget is kept with the
run (a resumed run obeys it), and a subject that reports no tokens is refused."""
from __future__ import annotations

import json
import sqlite3

import pytest

from atlascat.cli import main
from atlascat.live.mockserver import MockOpenAIServer
from atlascat.live.runner import check_token_budget, token_budget_stop
from atlascat.live.store import RunStore
from atlascat.live.toylm import ToyLM


def _evaluate(url, out, *extra):
    return main(["evaluate", "--bank", "arc", "--subject", f"completions:{url}", "--llm", "toy",
                 "--fixed-length", "12", "-o", str(out), "--json", "-q", *extra])


def _run(out) -> dict:
    with sqlite3.connect(out / "runs.sqlite") as con:
        con.row_factory = sqlite3.Row
        return dict(con.execute("select * from runs").fetchone())


def test_the_run_stops_at_its_token_budget_and_keeps_it(tmp_path, capsys):
    with MockOpenAIServer(lm=ToyLM(seed=3)) as srv:
        assert _evaluate(srv.url, tmp_path / "free") == 0
        free = _run(tmp_path / "free")
        per_item = (free["prompt_tokens"] + free["completion_tokens"]) / free["n_items"]
        budget = int(5.5 * per_item)
        capsys.readouterr()
        assert _evaluate(srv.url, tmp_path / "capped", "--token-budget", str(budget)) == 0
    row = json.loads(capsys.readouterr().out)[0]
    run = _run(tmp_path / "capped")
    assert free["n_items"] == 12 and free["stop_reason"] != "token_budget"
    assert run["stop_reason"] == row["stop_reason"] == "token_budget"
    assert run["token_budget"] == budget and 3 <= run["n_items"] < 12
    spent = run["prompt_tokens"] + run["completion_tokens"]
    assert spent <= budget * 1.25       # stopped on the expected tokens of the next item
    assert spent + spent / run["n_items"] > budget   # ... and only when it would not fit
    page = (tmp_path / "capped" / "reports" / f"{run['run_id']}.html").read_text()
    assert f"of a budget of {budget}" in page and "token_budget" in page


def test_the_stop_rule():
    assert not token_budget_stop(None, 10**9, 5, 1)
    assert not token_budget_stop(100, 0, 0, 6)          # the first round is always asked
    assert not token_budget_stop(100, 80, 4, 1)         # 80 + 20 = 100 fits
    assert token_budget_stop(100, 81, 4, 1)
    assert token_budget_stop(100, 60, 4, 4)             # a round of 4 would not fit


@pytest.mark.parametrize("value", [0, -3, 2.5, "abc", True, 2 ** 63])
def test_a_budget_is_a_whole_number_of_tokens(value):
    class Http:
        name, reports_tokens = "m", True

    with pytest.raises(Exception, match="whole number of tokens"):
        check_token_budget(Http(), value)


def test_a_subject_without_token_counts_is_refused(tmp_path, capsys, shared_data):
    matrix = shared_data / "openllm" / "dense_arc.csv.gz"
    code = main(["evaluate", "--bank", "arc", "--subject", f"replay:{matrix}#0-hero/Matter-0.1-Slim-7B",
                 "--token-budget", "1000", "-o", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "does not report the tokens it uses" in err[0]
    assert not (tmp_path / "o" / "runs.sqlite").exists() or not _runs(tmp_path / "o")


def _runs(out):
    with sqlite3.connect(out / "runs.sqlite") as con:
        return con.execute("select count(*) from runs").fetchone()[0]


def test_a_resumed_run_keeps_its_own_budget(tmp_path, capsys):
    assert main(["evaluate", "--resume", "abc", "--token-budget", "10",
                 "--db", str(tmp_path / "r.sqlite")]) == 2
    assert "drop --token-budget" in capsys.readouterr().err


def test_a_server_that_reports_no_usage_cannot_keep_a_budget(tmp_path, capsys, monkeypatch):
    real = MockOpenAIServer.lm_completion

    def no_usage(self, body):
        reply = real(self, body)
        reply.pop("usage")
        return reply

    monkeypatch.setattr(MockOpenAIServer, "lm_completion", no_usage)
    with MockOpenAIServer(lm=ToyLM(seed=3)) as srv:
        code = _evaluate(srv.url, tmp_path / "o", "--token-budget", "500")
    assert code != 0
    assert "reported no token usage" in capsys.readouterr().err


def test_an_older_store_gets_the_budget_column(tmp_path):
    db = tmp_path / "old.sqlite"
    RunStore(db).close()
    con = sqlite3.connect(db)
    con.execute("ALTER TABLE runs DROP COLUMN token_budget")
    con.execute("UPDATE meta SET value='3' WHERE key='schema_version'")
    con.commit()
    con.close()
    store = RunStore(db)
    rid = store.create_run(model="m", subject={}, cache_key="k", bank_ref=None, bank_hash="h",
                           n_bank_items=1, config={}, prompt={}, seed=0, session={},
                           token_budget=77)
    assert store.get_run(rid)["token_budget"] == 77


def test_a_suite_run_keeps_its_budget_too(tmp_path):
    """A suite run asks rounds of six items: it stops once the next six are expected to pass
    the budget (here after its first round, whose tokens nearly fill it)."""
    with MockOpenAIServer(lm=ToyLM(seed=3)) as srv:
        args = ["evaluate", "--suite", "openllm-v1", "--subject", f"completions:{srv.url}",
                "--llm", "toy", "--max-items", "18", "--min-items", "18", "-q"]
        assert main([*args, "-o", str(tmp_path / "free")]) == 0
        free = _run(tmp_path / "free")
        first = _first_round_tokens(tmp_path / "free")
        assert main([*args, "--token-budget", str(int(first * 1.5)),
                     "-o", str(tmp_path / "cap")]) == 0
    run = _run(tmp_path / "cap")
    assert free["n_items"] == 18 and run["stop_reason"] == "token_budget"
    assert run["n_items"] == 6 and run["token_budget"] == int(first * 1.5)


def _first_round_tokens(out) -> int:
    with sqlite3.connect(out / "runs.sqlite") as con:
        return con.execute("select sum(prompt_tokens + completion_tokens) from steps "
                           "where step < 6").fetchone()[0]


def test_the_python_call_takes_the_budget(tmp_path):
    from atlascat.catalogue import BankRef
    from atlascat.live.service import evaluate
    from atlascat.live.subjects import OpenAICompletionsSubject

    with MockOpenAIServer(lm=ToyLM(seed=3)) as srv:
        res = evaluate(BankRef.from_option("arc"), OpenAICompletionsSubject(srv.url, "toy"),
                       store=tmp_path / "r.sqlite", token_budget=1)
    assert res.stop_reason == "token_budget" and res.n_items == 1   # the first round only
