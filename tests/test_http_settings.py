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
        data, _, attempts = subj._post_json("/chat/completions", {"model": "m"})
    finally:
        srv.shutdown()
        srv.server_close()
    assert attempts == 2 and data["choices"][0]["message"]["content"] == "B"
    assert len(waits) == 1 and low <= waits[0] <= high, waits
