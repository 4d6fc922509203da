"""The settings of a suite test (:class:`SuiteConfig`), apart from the session so that a
command line reads its defaults without loading the suite machinery."""
from __future__ import annotations

from dataclasses import asdict, dataclass

from ..errors import ConfigError

__all__ = ["SuiteConfig"]


@dataclass
class SuiteConfig:
    """Settings of a suite test. ``target_se``: stop once the aggregate's SE (points) is at or
    below it (None, the default: the test is the ``max_items`` budget: on held-out leaderboard
    models the error keeps falling with more items while the SE sits near its floor, the joint
    link's residual, see :meth:`SuiteSession.floor_se`); ``member_weight``: weight of the
    members' own variances in the selection; ``corrections``: add each member link's
    observed-answer correction; ``neighbours``: the joint link's neighbour correction (when
    the link has one, :mod:`atlascat.suite.neighbours`)."""

    target_se: float | None = None
    max_items: int = 150
    min_items: int = 30
    batch_size: int = 6
    randomesque: int = 2
    member_weight: float = 0.05
    min_per_member: int = 10
    corrections: bool = True
    neighbours: bool = True
    draws: int = 512
    seed: int = 0

    def __post_init__(self):
        if self.max_items < 1:
            raise ConfigError(f"max_items must be >= 1, got {self.max_items}")
        if not 0 <= self.min_items <= self.max_items:
            raise ConfigError(f"min_items ({self.min_items}) must be in 0..max_items "
                              f"({self.max_items})")
        for name in ("batch_size", "randomesque"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.draws < 16:
            raise ConfigError(f"draws must be >= 16, got {self.draws}")
        if self.target_se is not None and not self.target_se > 0:
            raise ConfigError(f"target_se must be > 0 points, got {self.target_se}")

    def to_dict(self) -> dict:
        return asdict(self)
