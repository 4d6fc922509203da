"""Fenced blocks of the README and docs/*.md: the parser and the server starter shared by
tests/test_docs_examples.py and tests/test_readme_commands.py (see the former's docstring for
the rules)."""
from __future__ import annotations

import os
import re
import shlex
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from conftest import HANG_S

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
DIRECTIVE = re.compile(r"^<!--\s*docs-test:\s*([a-z-]+)\s*(.*?)\s*-->\s*$")
KINDS = {"skip", "synopsis", "same-as-readme", "no-output-check", "server", "own-folder"}
COMMAND = re.compile(r"^\s*(\$ )?(atlas|python|pip|PYTHONPATH=\S+ .*python)\s")
# what may differ between the page and a new run: run ids, report paths, timings
VOLATILE = [(re.compile(r"\b[0-9a-f]{12}\b"), "<run>"),
            (re.compile(r"\d+(\.\d+)? ?s\b"), "<seconds>")]


@dataclass
class Block:
    page: str
    line: int              # 1-based line of the opening fence
    lang: str
    text: str
    directive: str = ""
    argument: str = ""

    @property
    def where(self) -> str:
        return f"{'' if self.page == 'README.md' else 'docs/'}{self.page}:{self.line}"


def doc_blocks(page: str, text: str | None = None) -> list[Block]:
    """The fenced blocks of a docs page, each with the directive just above it (if any)."""
    lines = (text if text is not None else (DOCS / page).read_text()).splitlines()
    blocks, i = [], 0
    while i < len(lines):
        if lines[i].startswith("```"):
            start, lang = i, lines[i][3:].strip()
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            k = start - 1
            while k >= 0 and not lines[k].strip():
                k -= 1
            m = DIRECTIVE.match(lines[k]) if k >= 0 else None
            blocks.append(Block(page, start + 1, lang, "\n".join(lines[start + 1:j]),
                                m.group(1) if m else "", m.group(2) if m else ""))
            i = j + 1
        else:
            i += 1
    return blocks


def shell_commands(text: str) -> list[str]:
    """The lines of a bash block, continuations joined, comments and blank lines dropped."""
    out, pending = [], ""
    for line in text.splitlines():
        cmd = line.strip()
        if not pending and (not cmd or cmd.startswith("#")):
            continue
        pending += cmd
        if pending.endswith("\\"):
            pending = pending[:-1] + " "
            continue
        out.append(" ".join(re.sub(r"\s+#\s.*$", "", pending).split()))
        pending = ""
    return out


def synopsis_lines(text: str) -> list[str]:
    """Usage lines: an indented line continues the one above; trailing comments dropped."""
    out: list[str] = []
    for line in text.splitlines():
        if line[:1].isspace() and out:
            out[-1] += " " + line.strip()
        elif line.strip():
            out.append(line.strip())
    return [re.sub(r"\s+#\s.*$", "", x) for x in out]


def transcript(text: str) -> list[tuple[str, list[str]]]:
    """(command, expected output lines) of each ``$`` line of a text block."""
    out: list[tuple[str, list[str]]] = []
    cont = False
    for line in text.splitlines():
        if line.startswith("$ ") or cont:
            cmd = line[2:].strip() if not cont else line.strip()
            if cont:
                out[-1] = (out[-1][0] + " " + cmd.rstrip("\\").strip(), [])
            else:
                out.append((cmd.rstrip("\\").strip(), []))
            cont = cmd.endswith("\\")
        elif out and line.strip():
            out[-1][1].append(line)
    return out


def normalize(line: str) -> str:
    line = " ".join(line.split())
    for pattern, repl in VOLATILE:
        line = pattern.sub(repl, line)
    return line



def run_shell(cmd: str, cwd: Path, env: dict, failed: str) -> str:
    """``cmd`` in bash, stdout and stderr in one unbuffered stream (what a terminal shows, in
    its order); a non-zero exit fails with ``failed`` and the output's tail."""
    run = subprocess.run(["bash", "-c", cmd], cwd=cwd, env={**env, "PYTHONUNBUFFERED": "1"},
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         timeout=HANG_S)
    assert run.returncode == 0, f"{failed} (exit {run.returncode})\n{run.stdout[-3000:]}"
    return run.stdout


def check_transcript(out: str, expected: list[str], where: str, cmd: str) -> None:
    got = [normalize(x) for x in out.splitlines() if x.strip()]
    pos = 0
    for line in expected:
        want = normalize(line)
        try:
            pos = got.index(want, pos) + 1
        except ValueError:
            raise AssertionError(f"{where}: `{cmd}` no longer prints\n  {line.strip()}\n"
                                 f"it printed:\n" + "\n".join(got[-40:])) from None


def user_folder(tmp_path: Path, shared: Path) -> tuple[Path, dict]:
    """(work folder, environment) of a user in a fresh clone: ``tmp_path/work`` with
    ``../shared`` beside it, the run store in ``tmp_path/home``, this checkout's ``atlas`` and
    package first on the paths."""
    (tmp_path / "shared").symlink_to(shared.parent, target_is_directory=True)
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "ATLAS_HOME": str(tmp_path / "home"), "OPENBLAS_NUM_THREADS": "1",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "PYTHONPATH": str(ROOT / "src"), "MPLBACKEND": "Agg"}
    return work, env


def free_port(preferred: int) -> int:
    """``preferred`` when it is free on 127.0.0.1, else any free port."""
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", preferred))
            return preferred
        except OSError:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]


def start_server(cmd: str, cwd: Path, env: dict, timeout: float = 60.0):
    """Start a page's server command on its ``--port`` (8000 when it names none; a free port
    when that one is taken) and wait until it listens: -> (process, port named, port used)."""
    m = re.search(r"--port (\d+)", cmd)
    named = m.group(1) if m else "8000"
    port = free_port(int(named))
    cmd = re.sub(r"--port \d+", f"--port {port}", cmd) if m else f"{cmd} --port {port}"
    args = shlex.split(cmd)
    args[0] = sys.executable if args[0] == "python" else args[0]
    proc = subprocess.Popen(args, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise AssertionError(f"the server `{cmd}` exited with {proc.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc, named, port
        time.sleep(0.1)
    proc.terminate()
    raise AssertionError(f"the server `{cmd}` did not listen on port {port}")
