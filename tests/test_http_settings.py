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
