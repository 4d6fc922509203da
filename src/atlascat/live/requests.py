"""Stand-in for the ``protocol`` helper's module: ONLY the ``Request`` dataclass of the contract.

The protocol helper's ``requests.py`` (with ``ItemRequests``, ``build_requests``, ...) replaces
this file at merge.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Request:
    kind: str                      # "loglikelihood" | "generate_until"
    context: str
    continuation: str | None = None   # loglikelihood only
    until: tuple[str, ...] = ()       # generate_until only
    max_gen_toks: int = 256
