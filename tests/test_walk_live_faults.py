"""`atlas evaluate` against a server that misbehaves (docs/live.md, "Retried"): slow past
--timeout, malformed JSON, a connection closed before or in the middle of its reply, 429 (with
Retry-After), a 200 whose body is an error. A few such replies are retried and the run ends as
one without them; a server that keeps failing ends in one `error:` line naming what it did,
and `--resume` (the server back) ends as the same run, nothing lost or asked twice."""
from __future__ import annotations

import json

import pytest

from cli_checks import run_cli

ARGS = ["evaluate", "--bank", "arc", "--llm", "toylm", "--min-items", "8", "--max-items", "8",
        "--max-retries", "1", "--backoff", "0", "--timeout", "1", "--seed", "3", "--json"]
SAME = ("theta", "se", "n_items", "status")
# "hang": the client's own 1 s deadline ("... (whole request)") or httpx's 1 s read timeout,
# whichever fires first on a loaded machine: both say "timed out after 1 s"
SAID = {"hang": "timed out after 1 s", "malformed": "malformed response",
        "drop": "Server disconnected without sending a response",
        "cut": "peer closed connection without sending complete message body",
        "429": "HTTP 429: 'rate limited'",
        "error200": "HTTP 200 whose body is an error: 'upstream overloaded'"}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """The mock (toy LM, log-likelihoods) with a switchable fault, and a run without faults."""
    import contextlib
    import io

    from atlascat.live.mockserver import MockOpenAIServer

    state = {"action": None, "on": lambda n: False}
    with MockOpenAIServer(None, hang_s=2.5,
                          fault=lambda n, i, t: state["action"] if state["on"](n) else None
                          ) as srv:
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            code = run_cli([*ARGS, "--subject", f"completions:{srv.url}", "--db",
                            tmp_path_factory.mktemp("ref") / "ref.sqlite"])
        assert code == 0
        yield srv, state, json.loads(out.getvalue())[0]


def evaluate(capsys, srv, *args):
    code = run_cli([*ARGS, "--subject", f"completions:{srv.url}", *args])
    out, err = capsys.readouterr()
    return code, (json.loads(out)[0] if code == 0 else None), err


@pytest.mark.parametrize("action", list(SAID))
def test_a_server_that_misbehaves_is_retried_or_stops_resumable(server, action, tmp_path,
                                                                capsys):
    srv, state, ref = server
    srv.log.clear()                                  # n counts from 1 again
    state.update(action=action, on=lambda n: n == 4)  # once: retried, the run as without it
    code, res, err = evaluate(capsys, srv, "--db", tmp_path / "once.sqlite", "--no-cache")
    assert code == 0, err
    assert SAID[action] in err and "retrying in 0 s" in err
    assert {k: res[k] for k in SAME} == {k: ref[k] for k in SAME}

    srv.log.clear()
    state["on"] = lambda n: n >= 4                   # from the 4th request on: it stops
    db = tmp_path / "down.sqlite"
    code, _, err = evaluate(capsys, srv, "--db", db, "--no-cache")
    lines = [ln for ln in err.splitlines() if ln.startswith("error: ")]
    assert code == 2 and len(lines) == 1, err
    assert "failed 2 attempt(s); last: " in lines[0] and SAID[action] in lines[0]
    assert "Traceback" not in err and "--resume" in lines[0]
    rid = lines[0].split("--resume ")[1].split()[0]
    state["on"] = lambda n: False                    # the server is back
    code = run_cli(["evaluate", "--resume", rid, "--db", db, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    res = json.loads(out)[0]
    assert {k: res[k] for k in SAME} == {k: ref[k] for k in SAME}
    assert res["n_asked"] == ref["n_asked"]          # nothing asked twice into the test
