"""Shipped score links, one per content bank (``banks/<bench>_link.json``)."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import AtlasError, BankError, ConfigError
from ..irt.bank import ItemBank
from .banks import load_content_bank
from .files import CONTENT_BENCHMARKS, data_path

if TYPE_CHECKING:
    from ..scorelink.score_link import ScoreLink

#: the bundled content banks that carry a score link
LINK_BENCHMARKS = CONTENT_BENCHMARKS


def score_link_path(bench: str) -> Path:
    """Path of the score link shipped with the bundled content bank ``bench``."""
    name = str(bench).lower()
    if name not in LINK_BENCHMARKS:
        raise ConfigError(f"no score link for {bench!r}; bundled: {', '.join(LINK_BENCHMARKS)}")
    try:
        return data_path(f"banks/{name}_link.json")
    except AtlasError:
        raise BankError(f"the score link of {name!r} is not in this package; build it with "
                        "python -m atlascat.live.build_bank") from None


def load_score_link(bench: str) -> ScoreLink:
    """The score link shipped with the bundled content bank ``bench`` (arc, hellaswag, ...)."""
    from ..scorelink.score_link import ScoreLink  # lazy: a bank file's run needs no link

    return ScoreLink.read(score_link_path(bench))


def load_bundled_bank(bench: str) -> ItemBank:
    """The shipped content bank ``datasets/data/banks/<bench>.parquet`` (item content kept)."""
    name = str(bench).lower()
    if name not in LINK_BENCHMARKS:
        raise ConfigError(f"no bundled content bank {bench!r}; "
                          f"bundled: {', '.join(LINK_BENCHMARKS)}")
    return load_content_bank(name)


def own_benchmark_name(name: str, option: str = "--name") -> str:
    """``name`` for a bank of the user's own, refused (ConfigError naming ``option``) when it
    is a shipped benchmark's (:data:`LINK_BENCHMARKS`): a bank file naming one is scored by
    that benchmark's leaderboard score link ("predicted leaderboard score", the leaderboard's
    percentiles), not as the user's own benchmark."""
    if name in LINK_BENCHMARKS:
        raise ConfigError(f"{option} {name!r} is a shipped benchmark's name: a bank so named is "
                          "scored by its leaderboard score link, as the leaderboard's; give "
                          f"your benchmark its own name (e.g. {name}-mine)")
    return name
