"""ATLAS: Adaptive Testing for LLM Ability Scoring.

Calibrate an item bank from a response matrix (IRT 1PL-4PL by marginal maximum likelihood),
score models (theta with a standard error), and run computerized adaptive tests, simulated or
live against a model endpoint.

Public names are imported lazily so that ``import atlascat`` and the CLI start fast.
"""
from ._startup import quiet_start as _quiet_start

_quiet_start()   # the atlas command alone: a Ctrl-C while it starts is one line, not a traceback

import importlib as _importlib  # noqa: E402

from ._version import __version__
from .errors import (AtlasError, BankError, BankFolderError, ConfigError, ConvergenceError,
                     LiveRunError, NotFittedError, ResponseDataError)

# public name -> module that defines it
_LAZY = {
    "ResponseMatrix": "atlascat.responses",
    "tinybenchmarks_threshold": "atlascat.responses",
    "filter_items": "atlascat.filtering",
    "FilterReport": "atlascat.filtering",
    "stratified_split": "atlascat.filtering",
    "ItemBank": "atlascat.irt.bank",
    "PolyBank": "atlascat.irt.polybank",
    "calibrate": "atlascat.irt.calibrate",
    "Calibrator": "atlascat.irt.calibrate",
    "CalibrationResult": "atlascat.irt.calibrate",
    "estimate_ability": "atlascat.irt.ability",
    "AbilityResult": "atlascat.irt.ability",
    "anova": "atlascat.irt.compare",
    "CATConfig": "atlascat.cat.config",
    "CATSession": "atlascat.cat.session",
    "OrdinalCATSession": "atlascat.cat.ordinal",
    "CATResult": "atlascat.cat.result",
    "simulate_cat": "atlascat.cat.simulate",
    "ExposureTracker": "atlascat.cat.exposure",
    "BenchmarkPredictor": "atlascat.predict",
    "load_bank": "atlascat.catalogue",
    "load_suite": "atlascat.suite",
    "Suite": "atlascat.suite",
    "load_responses": "atlascat.catalogue",
    "catalogue": "atlascat.catalogue",
}

_MODULES = {"catalogue"}  # names that are modules themselves; all others are attributes

__all__ = ["__version__", "AtlasError", "BankError", "BankFolderError", "ConfigError",
           "ConvergenceError", "LiveRunError", "NotFittedError", "ResponseDataError", *_LAZY]


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'atlascat' has no attribute {name!r}")
    mod = _importlib.import_module(module)
    value = mod if name in _MODULES else getattr(mod, name)
    globals()[name] = value
    return value


def __dir__():
    """The public names (``__all__``), not the helpers and submodules this module holds."""
    return sorted(__all__)
