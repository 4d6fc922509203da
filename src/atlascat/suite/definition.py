"""A suite: several benchmarks asked as one test, and the aggregate of their scores.

A suite is plain data: its members (a name, a bank, a score link, a weight) and, once fitted,
the joint prior of the members' abilities (:class:`~atlascat.suite.prior.SuitePrior`). The
aggregate is the weighted mean of the members' published scores,

    average = sum_b w_b score_b,   sum_b w_b = 1

(the Open LLM Leaderboard v1 average: the six scores, w_b = 1/6). Bundled suites live in
``datasets/data/suites/<name>.json``; :func:`load_suite` reads one by name or path, and a user
builds another from their own banks with ``Suite(name, [SuiteMember(...), ...], prior)``.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..errors import ConfigError
from ..catalogue.bankref import BankRef, suite_member_ref
from ..catalogue.suites import bundled_suites, read_suite, suite_members, suite_path
from .link import SuiteLink
from .prior import SuitePrior

__all__ = ["Suite", "SuiteMember", "load_suite", "bundled_suites", "suite_path"]


@dataclass
class SuiteMember:
    """One benchmark of a suite: ``bank`` an ItemBank, a bundled bank name or a bank folder
    (``atlas build-bank``), ``link`` a ScoreLink (None: the bundled link of a bundled name, the
    folder's own link), ``weight`` its share of the aggregate."""

    name: str
    bank: Any = None
    weight: float = 1.0
    link: Any = None
    #: the bundled bank name this member was loaded from (what :meth:`Suite.to_dict` writes)
    source: str | None = None

    def resolve(self, base=None) -> "SuiteMember":
        """The member with its bank and link loaded (a bundled name or a bank folder read
        through :class:`~atlascat.catalogue.BankRef`). A bank given by name is found beside
        the suite's file first (``base``, its folder), then as a bundled bank's name, then
        as a path: a folder of the working directory that happens to share a bundled name
        does not replace a shipped suite's member."""
        bank, link, source = (self.bank if self.bank is not None else self.name), self.link, \
            self.source
        if isinstance(bank, str):
            ref = suite_member_ref(bank, base, option=f"suite member {self.name!r}")
            source, bank = bank, ref.load()
            link = ref.link if link is None else link
        if link is None:
            raise ConfigError(f"suite member {self.name!r} has a bank but no score link")
        return SuiteMember(self.name, bank, float(self.weight), link, source)


@dataclass
class Suite:
    """Members and (optional) joint prior of a suite; weights are normalized to sum to 1."""

    name: str
    members: Sequence[SuiteMember]
    prior: SuitePrior | None = None
    description: str = ""
    info: dict = field(default_factory=dict)
    #: the joint score link (:class:`~atlascat.suite.link.SuiteLink`); None: members' curves
    joint_link: SuiteLink | None = None

    def __post_init__(self):
        self.members = tuple(self.members)
        if not self.members:
            raise ConfigError("a suite needs at least one member")
        names = [m.name for m in self.members]
        if len(set(names)) != len(names):
            raise ConfigError(f"suite member names must be unique, got {names}")
        w = np.array([float(m.weight) for m in self.members])
        if not (np.all(np.isfinite(w)) and np.all(w >= 0) and w.sum() > 0):
            raise ConfigError(f"suite weights must be >= 0 and not all 0, got {w.tolist()}")
        if abs(w.sum() - 1.0) > 1e-12:    # normalize once (again would drift by an ulp)
            w = w / w.sum()
        self.members = tuple(m if m.weight == v else dataclasses.replace(m, weight=float(v))
                             for m, v in zip(self.members, w))
        if self.prior is not None and list(self.prior.names) != names:
            raise ConfigError(f"the suite prior is over {list(self.prior.names)}, the members "
                              f"are {names}; to leave a member out of the average keep it "
                              "with weight 0 (its answers still inform the others), or fit a "
                              "prior and joint link over these members (atlascat.suite."
                              "fit_prior, fit_joint_link)")

    def __repr__(self) -> str:
        """One line: the name and each member's bank size and weight (the banks, links and
        prior are attributes)."""
        parts = [f"{m.name}: " + (f"{len(m.bank)} items, " if hasattr(m.bank, "item_ids")
                                  else "") + f"weight {m.weight:.3g}" for m in self.members]
        extra = ", joint prior" if self.prior is not None else ""
        return f"Suite({self.name!r}, [{'; '.join(parts)}]{extra})"

    @property
    def names(self) -> list[str]:
        return [m.name for m in self.members]

    @property
    def weights(self) -> np.ndarray:
        return np.array([m.weight for m in self.members])

    def summary(self) -> dict:
        """What the suite measures: ``n_items`` (all members), ``aggregate`` (how the members'
        published scores combine) and per member its name, weight (normalized), item count and
        IRT model; each member's bank has its own theta scale, so its parameters are
        summarized per member (``ItemBank.summary``), never pooled."""
        s = self.resolved()
        w = s.weights / s.weights.sum()
        members = [{"name": m.name, "weight": float(wb), "n_items": len(m.bank),
                    "model": m.bank.model, "bank": m.source or m.name}
                   for m, wb in zip(s.members, w)]
        return {"name": self.name, "n_items": sum(m["n_items"] for m in members),
                "aggregate": "weighted mean of the members' published scores",
                "members": members}

    def resolved(self, base=None) -> "Suite":
        """The suite with every member's bank and link loaded (itself when they all are);
        ``base``: the folder of the suite's file (:meth:`SuiteMember.resolve`)."""
        if all(not isinstance(m.bank, str) and m.link is not None for m in self.members):
            return self
        return self.replace(members=[m.resolve(base) for m in self.members])

    def replace(self, **changes) -> "Suite":
        """A copy with some fields changed (``members``, ``prior``, ``joint_link``, ...)."""
        return dataclasses.replace(self, **{"info": dict(self.info), **changes})

    def to_dict(self) -> dict:
        members = []
        for m in self.members:
            bank = m.bank if isinstance(m.bank, str) else m.source
            if m.bank is not None and bank is None:
                raise ConfigError(f"member {m.name!r} holds an in-memory bank; only suites of "
                                  "bundled banks are written as plain data")
            members.append({"name": m.name, "bank": bank or m.name, "weight": m.weight})
        d = {"name": self.name, "description": self.description,
             "aggregate": "weighted mean of the members' published scores",
             "members": members, "info": self.info}
        if self.prior is not None:
            d["prior"] = self.prior.to_dict()
        if self.joint_link is not None:
            d["joint_link"] = self.joint_link.to_dict()
        return d

    @classmethod
    def from_dict(cls, d) -> "Suite":
        members = [SuiteMember(name, bank, weight) for name, bank, weight in suite_members(d)]
        prior = SuitePrior.from_dict(d["prior"]) if d.get("prior") else None
        joint = SuiteLink.from_dict(d["joint_link"]) if d.get("joint_link") else None
        return cls(str(d.get("name", "suite")), members, prior, str(d.get("description", "")),
                   dict(d.get("info", {})), joint)

    def write(self, path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), indent=1) + "\n")
        return path


def load_suite(name_or_path) -> Suite:
    """A suite by name (``"openllm-v1"``), suite JSON file or suite
    :class:`~atlascat.catalogue.BankRef`, banks and links loaded."""
    ref = BankRef.from_option(name_or_path, option="suite", kinds=("suite",))
    return Suite.from_dict(read_suite(ref.suite_file)).resolved(ref.suite_file.parent)

