"""Exception hierarchy. Every error ATLAS raises on bad input is an :class:`AtlasError`.

Messages say what is wrong, where (row / column / item id), and how to fix it.
"""
from __future__ import annotations


class AtlasError(Exception):
    """Base class of every error raised by ATLAS on bad input or impossible requests."""


class ResponseDataError(AtlasError, ValueError):
    """A response matrix is malformed (ids, values, shape, missing data)."""


class BankError(AtlasError, ValueError):
    """An item bank is malformed (columns, non-finite parameters, c >= u, ...)."""


class ConvergenceError(AtlasError, RuntimeError):
    """An iterative estimator could not produce a usable result."""


class ConfigError(AtlasError, ValueError):
    """A setting is out of range or inconsistent with others."""


class LiveRunError(AtlasError, RuntimeError):
    """A live evaluation failed in a way the user can resume from."""
