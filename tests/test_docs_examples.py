"""The examples in docs/*.md run as written (issue 19, item 4: docs that run).

Every fenced block of a docs page is one of:

- ```python: run, in order, in a fresh folder with ``../shared`` beside it; consecutive python
  blocks share one process (a later block may use the names an earlier one made, as a reader
  going down the page would) until a shell command comes between them;
- ```bash: every line (with its ``\\`` continuations) is a command, run in that folder in order;
- ```text with ``$ command`` lines: the command runs, and the lines under it (up to the next
  ``$`` line or the end of the block) are what it prints: each must appear in its output, in
  order (spaces collapsed; run ids, report paths and seconds may differ);
- any other block is a diagram or printed output, and may not hold a command (a line starting
  with ``atlas `` or ``python ``): such a block must say what it is with a directive.

A directive is an HTML comment on the line just above the fence::

    <!-- docs-test: skip REASON -->        not run; the reason is required and shown
    <!-- docs-test: synopsis -->           usage lines: every `atlas SUB` exists and every
                                           --option it names is in `atlas SUB --help`
    <!-- docs-test: same-as-readme -->     every command is one the README test runs
    <!-- docs-test: no-output-check REASON -->  run a text block, do not compare its output
    <!-- docs-test: server COMMAND -->     start COMMAND (a server) first, for the rest of the page
    <!-- docs-test: own-folder -->         README only: the block depends on no command above it
                                           and runs in a fresh folder of its own

Servers are started on their ``--port`` (or a free one when it is taken; the page's URLs follow).
"""
from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from docs_blocks import (COMMAND, DOCS, KINDS, Block, check_transcript, doc_blocks, normalize,
                         run_shell, shell_commands, start_server, synopsis_lines, transcript,
                         user_folder)
from test_readme_commands import README, readme_commands

PAGES = sorted(p.name for p in DOCS.glob("*.md"))


# ------------------------------------------------------------------ the page's own rules

def test_parser_reads_blocks_directives_and_transcripts():
    page = textwrap.dedent("""\
        text
        <!-- docs-test: skip needs a GPU -->

        ```python
        x = 1
        ```
        ```text
        $ atlas a \\
          --b 1
        out 1
        out 2
        $ atlas c
        ```
        """)
    b = doc_blocks("x.md", page)
    assert [(x.lang, x.line, x.directive, x.argument) for x in b] == [
        ("python", 4, "skip", "needs a GPU"), ("text", 7, "", "")]
    assert transcript(b[1].text) == [("atlas a --b 1", ["out 1", "out 2"]), ("atlas c", [])]
    assert shell_commands("# c\natlas x \\\n  --y 2   # why\n\natlas z\n") == [
        "atlas x --y 2", "atlas z"]
    assert normalize("run 9b39a87d5fa9:  150 items in 2.5 s") == "run <run>: 150 items in <seconds>"


def test_transcript_check_catches_a_changed_number():
    out = "M2 = 11.94 on 5 df\nrun 0123456789ab: 45 items in 2.5 s\nreport: r/0123456789ab.html\n"
    check_transcript(out, ["run fedcba987654: 45 items in 3 s", "report: r/fedcba987654.html"],
                     "x.md:1", "atlas x")
    with pytest.raises(AssertionError, match="no longer prints"):
        check_transcript(out, ["M2 = 11.95 on 5 df"], "x.md:1", "atlas x")
    with pytest.raises(AssertionError, match="no longer prints"):      # order matters
        check_transcript(out, ["report: r/0123456789ab.html", "M2 = 11.94 on 5 df"], "x", "y")


@pytest.mark.parametrize("page", PAGES)
def test_every_block_is_run_or_says_why_not(page):
    """A command in a block the test does not run must be marked with a directive and a reason."""
    for b in doc_blocks(page):
        assert not b.directive or b.directive in KINDS, f"{b.where}: unknown directive {b.directive}"
        assert b.directive != "own-folder", f"{b.where}: own-folder is for the README's blocks"
        if b.directive in ("skip", "no-output-check"):
            assert len(b.argument) > 5, f"{b.where}: say why the block is not run / checked"
        if b.lang in ("python", "bash") or b.directive:
            continue
        if b.lang == "text" and transcript(b.text):
            continue
        stray = [ln for ln in b.text.splitlines() if COMMAND.match(ln)]
        assert not stray, (f"{b.where}: a command in a ```{b.lang or ' '} block that no test "
                           f"runs: {stray[0]!r}; make it ```bash, a `$ ` line of a ```text "
                           "block, or add a docs-test directive")


def synopsis_problem(line: str) -> str | None:
    """What is wrong with one `atlas ...` usage line (None: the command and options exist)."""
    from typer.main import get_command
    from atlascat.cli import app

    words = line.split()
    if not words or words[0] != "atlas":
        return None
    cmd, path = get_command(app), []
    for w in words[1:]:
        sub = getattr(cmd, "commands", {}).get(w)
        if sub is None:
            break
        cmd, path = sub, path + [w]
    if not path:
        return f"`{line}` names no atlas command"
    known = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)}
    for opt in re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", line):
        if opt not in known:
            return f"`atlas {' '.join(path)}` has no option {opt}"
    return None


def test_synopsis_check_catches_a_wrong_option_or_command():
    assert synopsis_problem("atlas calibrate R -o bank.csv [--model 2pl] [--quiet]") is None
    assert "no option --modle" in synopsis_problem("atlas calibrate R [--modle 2pl]")
    assert "no atlas command" in synopsis_problem("atlas calibrat R")


@pytest.mark.parametrize("page", PAGES)
def test_synopses_name_real_commands_and_options(page):
    for b in doc_blocks(page):
        if b.directive == "synopsis":
            for line in synopsis_lines(b.text):
                problem = synopsis_problem(line)
                assert problem is None, f"{b.where}: {problem}"


def test_same_as_readme_blocks_are_the_readmes_commands():
    readme = set(readme_commands(README.read_text()))
    for page in PAGES:
        for b in doc_blocks(page):
            if b.directive != "same-as-readme":
                continue
            for cmd in shell_commands(b.text):
                assert cmd in readme or cmd == "python -m atlascat.demo", (
                    f"{b.where}: `{cmd}` is not a README command the README test runs")


# ------------------------------------------------------------------ running the pages

# The page's Python process: reads "FILE\tWHERE" lines, runs each file in one namespace, and
# ends each block's output with a status line. A deprecated name in an example is an error:
# the docs teach the current API.
WORKER = """\
import sys, traceback, warnings
warnings.filterwarnings("error", category=DeprecationWarning, module="__main__")
ns = {"__name__": "__main__"}
for line in sys.stdin:
    path, where = line.rstrip("\\n").split("\\t")
    try:
        exec(compile(open(path).read(), where, "exec"), ns)
        status = "ok"
    except BaseException:
        traceback.print_exc(file=sys.stdout)
        status = "failed"
    print("\\n__DOCS_BLOCK_DONE__", status, flush=True)
"""


class PageRunner:
    """Runs one page's blocks in order in ``work`` (``../shared`` beside it)."""

    def __init__(self, tmp_path: Path, shared: Path):
        self.work, self.env = user_folder(tmp_path, shared)
        self.servers: list[subprocess.Popen] = []
        self.ports: dict[str, str] = {}
        self.python: list[Block] = []
        self.worker: subprocess.Popen | None = None
        self.blocks_run = 0

    def url(self, text: str) -> str:
        for old, new in self.ports.items():
            text = text.replace(f"127.0.0.1:{old}", f"127.0.0.1:{new}")
        return text

    def start_server(self, b: Block) -> None:
        proc, named, port = start_server(b.argument, self.work, self.env)
        self.servers.append(proc)
        self.ports[named] = str(port)

    def shell(self, cmd: str, where: str) -> str:
        return run_shell(self.url(cmd), self.work, self.env, f"{where}: `{cmd}` failed")

    def run_python(self) -> None:
        """The page's python blocks so far, in order, in the page's one Python process (started
        on first use, kept across shell commands: names carry down the page); a failing block
        is named."""
        if not self.python:
            return
        if self.worker is None:
            script = self.work / "_docs_worker.py"
            script.write_text(WORKER)
            self.worker = subprocess.Popen([sys.executable, script.name], cwd=self.work,
                                           env=self.env, stdin=subprocess.PIPE,
                                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                           text=True)
        for n, b in enumerate(self.python):
            path = self.work / f"_docs_block{self.blocks_run + n}.py"
            path.write_text(self.url(b.text) + "\n")
            self.worker.stdin.write(f"{path.name}\t{b.where}\n")
            self.worker.stdin.flush()
            out, status = [], "the page's Python process ended"
            for line in self.worker.stdout:
                if line.startswith("__DOCS_BLOCK_DONE__"):
                    status = line.split()[-1]
                    break
                out.append(line)
            assert status == "ok", f"{b.where} failed ({status}):\n{''.join(out)[-3000:]}"
        self.blocks_run += len(self.python)
        self.python = []

    def close(self) -> None:
        if self.worker is not None:
            self.worker.stdin.close()
            self.worker.wait(timeout=30)
            self.worker.stdout.close()
        for p in self.servers:
            p.terminate()
            p.wait(timeout=10)


@pytest.mark.slow
def test_readme_python_runs_as_written(tmp_path, shared_data):
    """The README's Python examples (its shell commands: tests/test_readme_commands.py)."""
    blocks = [b for b in doc_blocks("README.md", README.read_text()) if b.lang == "python"
              and b.directive != "skip"]
    assert blocks
    runner = PageRunner(tmp_path, shared_data)
    runner.python = blocks
    try:
        runner.run_python()
    finally:
        runner.close()


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES)
def test_page_runs_as_written(page, tmp_path, shared_data):
    runnable = [b for b in doc_blocks(page)
                if b.directive not in ("skip", "synopsis", "same-as-readme")
                and (b.lang in ("python", "bash") or b.directive == "server"
                     or (b.lang == "text" and transcript(b.text)))]
    if not runnable:
        return
    runner = PageRunner(tmp_path, shared_data)
    try:
        for b in runnable:
            if b.directive == "server":
                runner.run_python()
                runner.start_server(b)
            if b.lang == "python":
                runner.python.append(b)
                continue
            runner.run_python()          # shell after python: the python ran first
            if b.lang == "bash":
                for cmd in shell_commands(b.text):
                    runner.shell(cmd, b.where)
            elif b.lang == "text":
                for cmd, expected in transcript(b.text):
                    out = runner.shell(cmd, b.where)
                    if b.directive != "no-output-check":
                        check_transcript(out, expected, b.where, cmd)
        runner.run_python()
    finally:
        runner.close()
