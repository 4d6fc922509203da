"""Shipped suite definitions (``suites/<name>.json``), found by name, and the one reader of a
suite file's members; a suite is read into a :class:`~atlascat.suite.Suite` by
:func:`atlascat.suite.load_suite`."""
from __future__ import annotations

import json
from pathlib import Path

from ..errors import ConfigError
from .files import DATA_DIR

__all__ = ["SUITES_DIR", "SEP", "bundled_suites", "suite_path", "read_suite", "suite_members"]

#: the folder of the bundled suite definitions
SUITES_DIR = DATA_DIR / "suites"
#: separates a member's name from the item id in a suite's composite bank (``arc/17``)
SEP = "/"


def bundled_suites() -> list[str]:
    """Names of the suites shipped with the package."""
    return sorted(p.stem for p in SUITES_DIR.glob("*.json"))


def suite_path(name: str) -> Path:
    """Path of a bundled suite definition."""
    path = SUITES_DIR / f"{str(name).lower()}.json"
    if not path.exists():
        raise ConfigError(f"no bundled suite {name!r}; bundled: {', '.join(bundled_suites())} "
                          "(or give the path of a suite JSON file)")
    return path


def read_suite(path) -> dict:
    """A suite file's JSON."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"suite file {str(path)!r} does not exist")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ConfigError(f"suite file {str(path)!r} is not valid JSON: {exc}") from None


def suite_members(d) -> list[tuple[str, str, float]]:
    """(name, bank, weight) of each member of a suite's plain data (``bank`` defaults to the
    name, ``weight`` to 1)."""
    try:
        return [(str(m["name"]), str(m.get("bank", m["name"])), float(m.get("weight", 1.0)))
                for m in d["members"]]
    except (KeyError, TypeError, AttributeError) as exc:
        raise ConfigError(f"a suite needs 'members' with a 'name' each ({exc})") from None
