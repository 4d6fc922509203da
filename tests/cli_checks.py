"""Shared checks of `atlas` command lines run in-process (tests import it as a module)."""
from __future__ import annotations

from atlascat.cli import main


def run_cli(argv) -> int:
    """``atlas ARGV`` in-process (every argument as text); its exit code."""
    return main([str(a) for a in argv])


def one_line_error(capsys, argv, *needles) -> str:
    """Run ``argv``; assert exit 2 and exactly one ``error:`` line on stderr holding every
    needle; return that line."""
    rc = run_cli(argv)
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("error: "), (rc, err)
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]
