"""A bad HTTP setting of `atlas evaluate` is one line that names its option and the value
given, before the run exists; --max-concurrency 0 is refused, not taken as 1."""
from __future__ import annotations

import pytest

from atlascat.cli import main
from atlascat.errors import ConfigError
from atlascat.live.subjects import OpenAICompletionsSubject


@pytest.mark.parametrize("option, value, want", [
    ("--timeout", "nan", "timeout (--timeout) must be a finite number of seconds > 0, got nan"),
    ("--timeout", "0", "timeout (--timeout) must be a finite number of seconds > 0, got 0.0"),
    ("--backoff", "-1", "backoff (--backoff) must be a finite number of seconds >= 0, got -1.0"),
    ("--max-retries", "-1", "max_retries (--max-retries) must be an integer >= 0, got -1"),
    ("--max-concurrency", "0", "--max-concurrency must be >= 1, got 0"),
])
def test_a_bad_http_setting_names_its_option(tmp_path, capsys, option, value, want):
    out = tmp_path / "run"
    code = main(["evaluate", "--bank", "arc", "--subject", "completions:http://127.0.0.1:9/v1",
                 "--llm", "m", option, value, "-o", str(out)])
    assert code == 2 and capsys.readouterr().err.strip() == f"error: {want}"
    assert not out.exists()


def test_the_library_names_the_setting_too():
    with pytest.raises(ConfigError, match=r"^max_reply_bytes must be an integer >= 1024, got 5$"):
        OpenAICompletionsSubject("http://127.0.0.1:9/v1", "m", max_reply_bytes=5)


@pytest.mark.parametrize("header, low, high", [
    ("7", 7, 7),                       # seconds
    ("120", 30, 30),                   # capped at max_backoff
    ("soon", 0.5, 0.5),                # unreadable: the backoff
    ("DATE+20", 15, 20),               # an HTTP date 20 s from now (it was read as no header)
])
def test_retry_after_is_honoured_in_seconds_or_as_a_date(header, low, high):
    """A 429's ``Retry-After`` sets the wait before the next attempt (longer than the backoff,
    at most ``max_backoff``), given in seconds or as an HTTP date (RFC 9110)."""
    import json
    import threading
    from email.utils import formatdate
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    import time

    from atlascat.live.subjects import OpenAICompatible

    calls = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            calls.append(1)
            if len(calls) == 1:
                value = formatdate(time.time() + 20, usegmt=True) if header == "DATE+20" \
                    else header
                body, status, extra = b'{"error": "slow down"}', 429, {"Retry-After": value}
            else:
                body, status, extra = json.dumps({"choices": [{"message": {"content": "B"}}]}
                                                 ).encode(), 200, {}
            self.send_response(status)
            for k, v in {"Content-Type": "application/json",
                         "Content-Length": str(len(body)), **extra}.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        waits = []
        subj = OpenAICompatible(f"http://127.0.0.1:{srv.server_address[1]}/v1", "m",
                                backoff=0.5, max_backoff=30, sleep=waits.append, timeout=60)
        with subj:   # its HTTP client closed
            data, _, attempts = subj._post_json("/chat/completions", {"model": "m"})
    finally:
        srv.shutdown()
        srv.server_close()
    assert attempts == 2 and data["choices"][0]["message"]["content"] == "B"
    assert len(waits) == 1 and low <= waits[0] <= high, waits


def test_a_retry_after_past_the_cap_is_said_in_words():
    """A server asking for a longer wait than ``max_backoff`` (30 s by default) is waited on for
    the cap only; each retry line and the final error said "retrying in 30 s" as if the server
    had asked for that. Both now name the wait it asked for and the cap."""
    from atlascat.errors import AtlasError
    from atlascat.live.mockserver import MockOpenAIServer
    from atlascat.live.subjects import OpenAICompatible

    body = {"model": "toylm", "messages": [{"role": "user", "content": "Question: 2+2?"}]}
    said = "not the 120 s its Retry-After asked for (a wait is capped at 2 s, max_backoff)"
    for failures in (1, 3):
        with MockOpenAIServer(None, fault=lambda n, i, t: "429:120" if n <= failures else None
                              ) as srv:
            waits, lines = [], []
            with OpenAICompatible(srv.url, "toylm", backoff=0.5, max_backoff=2, max_retries=2,
                                  sleep=waits.append) as subj:
                subj.on_retry = lines.append
                if failures == 1:
                    assert subj._post_json("/chat/completions", body)[2] == 2
                else:
                    with pytest.raises(AtlasError) as exc:
                        subj._post_json("/chat/completions", body)
        assert waits == [2.0] * min(failures, 2)
        assert lines == [f"toylm: HTTP 429: 'rate limited'; retrying in 2 s, {said}"] * len(waits)
    assert str(exc.value).endswith("last: HTTP 429: 'rate limited'; the server's Retry-After "
                                   "asked for 120 s, past the cap of 2 s on a wait "
                                   "(max_backoff): try again later")
    with MockOpenAIServer(None, fault=lambda n, i, t: "429:1" if n == 1 else None) as srv:
        lines = []
        with OpenAICompatible(srv.url, "toylm", backoff=0.5, max_backoff=2,
                              sleep=lambda s: None) as subj:
            subj.on_retry = lines.append
            subj._post_json("/chat/completions", body)
    assert lines == ["toylm: HTTP 429: 'rate limited'; retrying in 1 s"]   # within the cap
