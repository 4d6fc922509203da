"""Shipped suite definitions (``suites/<name>.json``), found by name; a suite is read into a
:class:`~atlascat.suite.Suite` by :func:`atlascat.suite.load_suite`."""
from __future__ import annotations

from pathlib import Path

from ..errors import ConfigError
from .files import DATA_DIR

#: the folder of the bundled suite definitions
SUITES_DIR = DATA_DIR / "suites"


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
