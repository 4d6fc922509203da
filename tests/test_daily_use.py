"""Issue 28, "Daily use": the small things a user meets every day (each fixed item that a test
can see; the others are tested where their feature is: `atlas runs` without --db in
test_live_cli_ux.py, --help and one-line warnings in test_cli_conventions.py, --model auto in
test_evaluate_protocol.py)."""
from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from conftest import HANG_S

from atlascat.errors import LiveRunError
from atlascat.live.mockserver import MockOpenAIServer, main as mockserver_main


@pytest.fixture
def taken_port():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    yield sock.getsockname()[1]
    sock.close()


def test_mock_server_on_a_taken_port_is_one_line(taken_port, capsys):
    with pytest.raises(LiveRunError, match=f"cannot serve on 127.0.0.1:{taken_port}.*--port"):
        MockOpenAIServer(None, port=taken_port)
    assert mockserver_main(["--port", str(taken_port)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: cannot serve on") and len(err.strip().splitlines()) == 1


def test_mock_server_module_exits_2_without_a_traceback(taken_port):
    run = subprocess.run([sys.executable, "-m", "atlascat.live.mockserver", "--lm", "toylm",
                          "--port", str(taken_port)], capture_output=True, text=True,
                         timeout=HANG_S)
    assert run.returncode == 2
    assert "Traceback" not in run.stderr and run.stderr.startswith("error: cannot serve on")


def test_load_responses_takes_a_path_as_the_cli_does(shared_data):
    from atlascat.catalogue import load_responses
    from atlascat.errors import ResponseDataError

    path = shared_data / "openllm" / "tiny_truthfulqa.csv.gz"
    assert load_responses(str(path)).shape == load_responses(path).shape == (4635, 97)
    assert load_responses("arc").shape == (2193, 317)          # names still work
    with pytest.raises(ResponseDataError, match="'no/such.csv' does not exist; check the path"):
        load_responses("no/such.csv")
    with pytest.raises(ResponseDataError, match="neither an existing file nor a bundled"):
        load_responses("nope")


def test_readme_counts_the_commands_and_says_to_activate_the_venv():
    import re

    from conftest import ROOT

    from atlascat.cli import app

    readme = " ".join((ROOT / "README.md").read_text().split())
    n = len(app.registered_commands) + len(app.registered_groups)   # `atlas --help` lists
    assert f"across all {n} commands" in readme, re.findall(r"across all \d+ commands", readme)
    assert "source .venv/bin/activate" in readme and ".venv/bin/atlas" in readme
