"""One way from command-line options to a configuration, for every command.

Defaults come from the configuration classes (:class:`~atlascat.cat.config.CATConfig`,
:class:`~atlascat.suite.SuiteConfig`, :class:`~atlascat.live.runner.PromptSettings`,
:class:`~atlascat.irt.calibrate.Calibrator`, :class:`~atlascat.studies.protocol.BenchmarkConfig`)
and the constants they name (:mod:`atlascat.irt.defaults`), never restated here or in a command
(``tests/test_config_defaults.py``); values are validated there only, and
:data:`OPTION_NAMES` is the one map from their fields to the options that set them, so a
ConfigError names what the user typed (:func:`cli_names`). What stays here is what only a
command line has: options given together that contradict each other (``--fixed-length`` with
``--max-items``, a bank folder's predictor with the adaptive test's stops) and "not given" (None)
resolved to the default. A score link's stops are added to a CAT's by the library
(:func:`atlascat.scorelink.with_link_stops`).
"""
from __future__ import annotations

import re
from typing import Callable, TypeVar

from ..errors import ConfigError

__all__ = ["OPTION_NAMES", "COST_OPTIONS", "cli_names", "cat_config", "cost_fields",
           "suite_config", "predictor_only", "calibrator", "benchmark_config"]

T = TypeVar("T")

#: --bound-margin's help, the same in every command that takes it; its default is
#: :data:`atlascat.scorelink.settings.BOUND_MARGIN` (not imported: a command that needs no
#: score link does not load one; a test checks the two agree)
BOUND_MARGIN_HELP = ("Floor/top stop: how close to the curve's end counts as there "
                     "(score units; a folder's --score-range scale). "
                     "[default: 2% of the scale: 0.02 on 0-1]")

#: configuration field -> the option that sets it (CATConfig, SuiteConfig, PromptSettings)
OPTION_NAMES = {"min_items": "--min-items", "max_items": "--max-items", "se_stop": "--se-stop",
                "randomesque": "--randomesque", "batch_size": "--batch-size",
                "target_se": "--target-se", "max_tokens": "--max-tokens",
                "temperature": "--temperature", "prompt style": "--prompt-style",
                "selection": "--selection", "se_method": "--se-method", "theta0": "--theta0",
                "estimator": "--estimator",
                "r_max": "--r-max", "cost_per_item": "--cost-per-item",
                "cost_column": "--cost-column", "value_per_se": "--value-per-se",
                "budget": "--budget"}

#: the cost-aware stopping options (:class:`~atlascat.cat.config.Stopping`'s fields of the same
#: names): the adaptive test's, refused by a suite and a bank folder's predictor
COST_OPTIONS = ("cost_column", "cost_per_item", "value_per_se", "budget")


def cost_fields(o) -> dict:
    """The cost-aware stopping options ``o`` was given, as CATConfig fields."""
    return {k: getattr(o, k) for k in COST_OPTIONS if getattr(o, k, None) is not None}


def cli_names(build: Callable[[], T], names: dict[str, str] | None = None) -> T:
    """``build()``, with the configuration's field names in a ConfigError (or a
    ConvergenceError, whose advice names a setting) replaced by the options that set them:
    :data:`OPTION_NAMES`, and ``names`` (a command's own fields, as ``{"prior_games":
    "--prior-games"}``) first."""
    from ..errors import ConvergenceError

    try:
        return build()
    except (ConfigError, ConvergenceError) as exc:
        msg = str(exc)
        for field, opt in {**(names or {}), **OPTION_NAMES}.items():
            msg = re.sub(rf"(?<![-\w]){re.escape(field)}(?![\w])", opt, msg)
        raise type(exc)(msg) from exc


def cat_config(*, se_stop: float | None = None, min_items: int | None = None,
               max_items: int | None = None, fixed_length: int | None = None,
               reference: bool = False, **fields):
    """A CATConfig from a command's options (None: not given, the class's default;
    ``min_items`` is capped at ``max_items`` when only the latter is given). ``fixed_length``:
    exactly N items, no SE stop; it replaces --se-stop / --min-items / --max-items.
    ``reference``: on catR's grid (:meth:`CATConfig.reference`)."""
    from ..cat.config import CATConfig

    if reference:
        fields = {**{k: v for k, v in CATConfig.reference().to_dict().items()
                     if k in ("quadpts", "theta_range", "quadrature_rule")}, **fields}

    if fixed_length is not None:
        given = [opt for opt, v in (("--se-stop", se_stop), ("--min-items", min_items),
                                    ("--max-items", max_items)) if v is not None]
        if given:
            raise ConfigError(f"--fixed-length {fixed_length} sets the test length; drop "
                              f"{', '.join(given)}")
        if fixed_length < 1:
            raise ConfigError(f"--fixed-length must be >= 1, got {fixed_length}")
        return cli_names(lambda: CATConfig.fixed_length(int(fixed_length), **fields))
    d = CATConfig().stopping
    max_items = d.max_items if max_items is None else int(max_items)
    if min_items is None:
        min_items = min(d.min_items, max(max_items, 0))
    se_stop = d.se_stop if se_stop is None else se_stop
    return cli_names(lambda: CATConfig(se_stop=se_stop, min_items=int(min_items),
                                       max_items=max_items, **fields))


def suite_config(*, target_se=None, min_items=None, max_items=None, batch_size=None,
                 randomesque=None, seed: int = 0, fixed_length: int | None = None,
                 se_stop: float | None = None):
    """A SuiteConfig from a command's options (None: the class's default; ``min_items`` never
    above ``max_items`` unless given). ``se_stop`` is a single bank's and is refused."""
    from ..suite import SuiteConfig

    if se_stop is not None:
        raise ConfigError("--se-stop is a single bank's theta SE; with --suite the test stops on "
                          "the average's SE in points: use --target-se")
    if fixed_length is not None:
        if min_items is not None or max_items is not None or target_se is not None:
            raise ConfigError("--fixed-length sets the test length; drop --min-items, "
                              "--max-items and --target-se")
        if fixed_length < 1:
            raise ConfigError(f"--fixed-length must be >= 1, got {fixed_length}")
        min_items = max_items = int(fixed_length)
    d = SuiteConfig()
    max_items = d.max_items if max_items is None else int(max_items)
    given = {k: v for k, v in dict(target_se=target_se, batch_size=batch_size,
                                   randomesque=randomesque).items() if v is not None}
    min_items = min(d.min_items, max(max_items, 0)) if min_items is None else int(min_items)
    return cli_names(lambda: SuiteConfig(max_items=max_items, min_items=min_items,
                                         seed=int(seed), **given))


def predictor_only(o, given=()) -> None:
    """A bank folder's predictor asks --max-items items of its own design: the adaptive test's
    stop options (``o.fixed_length``, ``o.se_stop``, ``o.min_items``) are an error with it,
    and so is a --max-items below 2; ``given``: (option, whether given) pairs of the command's
    other adaptive-test options (item selection, theta's estimator, the link's stops)."""
    for opt, value in (("--fixed-length", o.fixed_length), ("--se-stop", o.se_stop),
                       ("--min-items", o.min_items), ("--r-max", getattr(o, "r_max", None)),
                       *((OPTION_NAMES[k], v) for k, v in cost_fields(o).items()),
                       *((opt, True if on else None) for opt, on in given)):
        if value is not None:
            raise ConfigError(f"{opt} is the adaptive test's; this bank folder's predictor asks "
                              "--max-items items of its own design (or --design adaptive)")
    if o.max_items is not None and o.max_items < 2:
        raise ConfigError(f"--max-items must be at least 2 for a bank folder's predictor (its "
                          f"design-based interval needs two answers), got {o.max_items}")


def calibrator(*, model: str, filter_: bool | None = None, **settings):
    """A Calibrator from ``atlas calibrate``'s options, its settings checked before any data is
    read (``filter_`` None: the library's default)."""
    from ..irt.calibrate import Calibrator

    extra = {} if filter_ is None else {"filter": filter_}
    cal = Calibrator(model.lower(), **settings, **extra)
    cal.check_settings()
    return cal


def benchmark_config(*, test_size: float, prior_a=None, prior_c=None, se_method=None, **fields):
    """A BenchmarkConfig from ``atlas benchmark``'s options: the calibration's priors and the
    CAT's SE method passed on only when given (the library's defaults otherwise)."""
    from ..studies.protocol import BenchmarkConfig

    if not 0.0 < test_size < 1.0:
        raise ConfigError(f"--test-size must be in (0, 1), got {test_size}")
    cal = {k: v for k, v in (("prior_a", prior_a), ("prior_c", prior_c)) if v}
    cat = {"se_method": se_method} if se_method else {}
    return cli_names(lambda: BenchmarkConfig(test_size=test_size, calibrate_options=cal,
                                             cat_options=cat, **fields), BENCHMARK_OPTIONS)


#: BenchmarkConfig's fields -> ``atlas benchmark``'s options (its errors name what was typed)
BENCHMARK_OPTIONS = {"random_k": "--random-k", "random_replicates": "--replicates",
                     "anchor_k": "--anchor-k", "info_k": "--info-k", "optimal_k": "--optimal-k",
                     "CAT SE thresholds": "--taus", "optimal-form criteria": "--criteria",
                     "test_size": "--test-size"}
