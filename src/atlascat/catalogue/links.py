"""Shipped score links, one per content bank (``banks/<bench>_link.json``)."""
from __future__ import annotations

from pathlib import Path

from ..errors import AtlasError, BankError, ConfigError
from ..irt.bank import ItemBank
from ..scorelink.score_link import ScoreLink
from .banks import load_content_bank
from .files import CONTENT_BENCHMARKS, data_path

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
    return ScoreLink.read(score_link_path(bench))


def bundled_link(bank_arg) -> ScoreLink | None:
    """The score link of ``bank_arg`` when it names a bundled content bank (not a file path)
    or a bank folder (``atlas build-bank``).

    ``atlas simulate --bank arc`` (and friends) use it to add the predicted leaderboard score.
    """
    name = str(bank_arg)
    from ..bankdir.folder import is_bank_dir, load_bank_dir

    if is_bank_dir(name):
        return load_bank_dir(name).link  # a bank folder carries its own link
    if Path(name).exists() or name.lower() not in LINK_BENCHMARKS:
        return None
    try:
        return load_score_link(name.lower())
    except BankError:
        return None


def load_bundled_bank(bench: str) -> ItemBank:
    """The shipped content bank ``datasets/data/banks/<bench>.parquet`` (item content kept)."""
    name = str(bench).lower()
    if name not in LINK_BENCHMARKS:
        raise ConfigError(f"no bundled content bank {bench!r}; "
                          f"bundled: {', '.join(LINK_BENCHMARKS)}")
    return load_content_bank(name)
