"""What a server said, kept to the end: a retried 5xx / 429 / 200-with-an-error-body names the
server's own error text once the retries give up (as a refused item's 400 does), and a refusal
is read from the error's attributes (``status``, ``said``), not parsed back from its text."""
from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

LONG = ("This model's maximum context length is 4096 tokens. However, you requested 5210 "
        "tokens (5194 in the messages, 16 in the completion). Please reduce the length of the "
        "messages or completion, or raise the server's --max-model-len; the request was "
        "rejected before it reached the engine.")


@contextmanager
def replying(status: int, body: bytes, headers=None):
    """A server answering every POST with ``status`` and ``body``; yields its base URL."""
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(status)
            for k, v in {"Content-Type": "application/json",
                         "Content-Length": str(len(body)), **(headers or {})}.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05},
                     daemon=True).start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}/v1"
    finally:
        srv.shutdown()
        srv.server_close()


def failed(url: str):
    """The SubjectError of a chat request to ``url`` once its one retry is spent."""
    from atlascat.live.subjects import OpenAICompatible, SubjectError

    subj = OpenAICompatible(url, "m", max_retries=1, sleep=lambda s: None, api_key_env=None)
    try:
        with pytest.raises(SubjectError) as got:
            subj._retrying("/chat/completions", {"model": "m"}, lambda d: d["choices"][0])
    finally:
        subj.close()
    return got.value


VLLM_503 = json.dumps({"object": "error", "type": "ServiceUnavailableError", "param": None,
                       "code": 503, "message": LONG}).encode()


@pytest.mark.parametrize("status, body, last, said", [
    (500, b'{"error": {"message": "internal error"}}', "HTTP 500: 'internal error'",
     "internal error"),
    # vLLM's shape, the message past the first 200 characters of the body (it was cut off)
    (503, VLLM_503, f"HTTP 503: {LONG[:300]!r}", LONG[:300]),
    (429, b'{"error": "slow down"}', "HTTP 429: 'slow down'", "slow down"),
    (502, b"<html><body>502 Bad Gateway</body></html>",
     "HTTP 502: '<html><body>502 Bad Gateway</body></html>'",
     "<html><body>502 Bad Gateway</body></html>"),
    (500, b"", "HTTP 500 (empty reply)", ""),
    # a 200 whose error body names a 5xx: it was reported as an HTTP 503 with the raw body
    (200, b'{"error": {"message": "upstream overloaded", "code": 503}}',
     "HTTP 200 whose body is an error (code 503): 'upstream overloaded'",
     "upstream overloaded"),
    (200, b'{"error": {"message": "upstream overloaded"}}',
     "HTTP 200 whose body is an error: 'upstream overloaded'", "upstream overloaded"),
])
def test_retries_given_up_name_the_servers_own_words(status, body, last, said):
    with replying(status, body, {"Retry-After": "0"}) as url:
        exc = failed(url)
    assert str(exc).endswith(f"failed 2 attempt(s); last: {last}"), str(exc)
    assert exc.said == said


def test_a_refusal_is_read_from_the_errors_attributes():
    """A 400's message is the error's ``said``, whole (up to 300 characters): the text was
    parsed back with a pattern that failed on a message cut at 300 characters of the body
    and kept the raw JSON fragment, URL and all."""
    from atlascat.live.refusals import refusal
    from atlascat.live.subjects import SubjectError

    body = json.dumps({"object": "error", "type": "BadRequestError", "param": None,
                       "code": 400, "message": LONG}).encode()
    with replying(400, body) as url:
        exc = failed(url)
    assert (exc.status, exc.said) == (400, LONG[:300])
    assert refusal(exc) == f"HTTP 400: {LONG[:300]}"
    detail = json.dumps({"detail": [{"loc": ["body", "prompt"], "msg": "field required"}]})
    with replying(422, detail.encode()) as url:
        assert refusal(failed(url)) == "HTTP 422: field required"
    with replying(413, b"") as url:
        assert refusal(failed(url)) == "HTTP 413 (empty reply)"
    # one raised by other code, without the reply: its own text
    assert refusal(SubjectError("too long", status=400)) == "too long"
    assert refusal(SubjectError("gone", status=404)) is None


def test_a_refused_items_message_is_unchanged_for_the_mock_servers_400():
    """What users saw of the mock's (vLLM's) context error stays as it was."""
    from atlascat.live.mockserver import CONTEXT_400, MockOpenAIServer
    from atlascat.live.refusals import refusal

    for action in ("400", "error200-400"):
        with MockOpenAIServer(None, fault=lambda n, i, t, a=action: a) as srv:
            exc = failed(srv.url)
        assert refusal(exc) == f"HTTP 400: {CONTEXT_400}"


def test_atlas_evaluate_names_the_servers_words_when_the_retries_give_up(tmp_path, capsys):
    """completions: (a list of prompts, then each alone) against a server that fails every
    request: one line naming the server's message, and the run can be resumed."""
    from atlascat.live.mockserver import MockOpenAIServer
    from cli_checks import run_cli

    with MockOpenAIServer(None, fault=lambda n, i, t: "500") as srv:
        code = run_cli(["evaluate", "--bank", "arc", "--llm", "toylm", "--subject",
                        f"completions:{srv.url}", "--max-retries", "1", "--backoff", "0",
                        "--db", tmp_path / "runs.sqlite", "-q"])
    err = capsys.readouterr().err
    assert code == 2, err
    lines = [ln for ln in err.splitlines() if ln.startswith("error: ")]
    assert len(lines) == 1 and "failed 2 attempt(s); last: HTTP 500: 'internal error'" \
        in lines[0], err
    assert "--resume" in err
