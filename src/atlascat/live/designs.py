"""What a live run on a bank asks, decided once for :class:`~atlascat.live.service.LiveRun`,
``atlas evaluate`` and :meth:`~atlascat.live.subjects.SubjectSpec.build`:

- :func:`choose_design` / :func:`check_design`: the adaptive test or a bank folder's benchmark
  predictor (:data:`DESIGNS`);
- :func:`design_bank`: the items a run of that design asks (the predictor's, or the bank);
- :func:`run_config`: the test a run of that design asks (``atlas evaluate``'s with no option
  and :meth:`LiveRun.start <atlascat.live.service.LiveRun.start>`'s with no ``config``: one
  default test for a bank, from Python and the command line);
- :func:`folder_settings`: what a subject on a bank folder is built with (the folder, its
  metric scale): ``replay:`` of sample logs reads them as the folder was built, ``simulate:``
  draws a folder of continuous scores' scores with its dispersions.
"""
from __future__ import annotations

from ..catalogue.bankref import BankRef
from ..errors import ConfigError

__all__ = ["DESIGNS", "check_design", "design_bank", "choose_design", "folder_settings",
           "run_config"]

DESIGNS = ("auto", "adaptive", "predictor")


def check_design(design: str) -> str:
    """``design`` if it is one of :data:`DESIGNS`, else one clear error."""
    if design not in DESIGNS:
        raise ConfigError(f"--design must be one of {', '.join(DESIGNS)}, got {design!r}")
    return design


def design_bank(ref: BankRef, design: str):
    """The bank a run of ``design`` ("adaptive" or "predictor") asks: the predictor's items
    (with their logged requests) or the bank itself."""
    return ref.predictor()[1] if design == "predictor" else ref.load()


def run_config(ref: BankRef, design: str, config=None, *, seed: int = 0,
               min_items: int | None = None, bound_stop: bool = True,
               bound_margin: float | None = None):
    """The configuration a run of ``design`` on ``ref`` asks with: the one place ``atlas
    evaluate`` and :meth:`LiveRun.start <atlascat.live.service.LiveRun.start>` (with no
    ``config``) take it from, so a bank's default test is the same from both.

    - "adaptive": :func:`~atlascat.bankdir.adaptive.adaptive_config` of ``config`` (None:
      CATConfig()): with a score link (a bundled bank, a bank folder, a bank file naming a
      shipped benchmark) its floor / top stops (``bound_stop``, ``bound_margin``) and the
      bank's own shortest test unless ``min_items`` is given (ARC: 45 items);
    - "suite": ``config`` (None: ``SuiteConfig(seed=seed)``, the suite's seed the run's);
    - "predictor": ``config`` (None: the predictor asks its own budget)."""
    if design == "predictor":
        return config
    if design == "suite":
        if config is not None:
            return config
        from ..suite.config import SuiteConfig

        return SuiteConfig(seed=int(seed))
    from ..bankdir.adaptive import adaptive_config

    return adaptive_config(ref, config, min_items=min_items, bound_stop=bound_stop,
                           bound_margin=bound_margin)


def choose_design(ref: BankRef, design: str = "auto") -> str:
    """"predictor" or "adaptive": ``auto`` takes a bank folder's benchmark predictor when it
    has one (its items asked by their logged requests, or by item id from a folder built from
    a matrix), else the adaptive test."""
    if check_design(design) == "adaptive":
        return design
    if ref.predictor() is not None:
        return "predictor"
    if design == "predictor":
        raise ConfigError(f"bank {ref.name} has no benchmark predictor: build a bank folder from "
                          "results with more items than the budget, or use the adaptive "
                          "design")
    return "adaptive"


def folder_settings(ref: BankRef | None) -> dict:
    """A bank folder's settings for the subject (:meth:`SubjectSpec.build
    <atlascat.live.subjects.SubjectSpec.build>`): ``score_range``, its metric scale (built with
    ``--score-range``: what a replayed matrix holds), and ``folder``, the
    :class:`~atlascat.bankdir.BankFolder` (``replay:`` of sample logs reads them as the folder
    was built; ``simulate:`` draws scores with its dispersions); both None for another bank."""
    folder = ref.folder() if ref is not None and ref.kind == "dir" else None
    if folder is None:
        return {"score_range": None, "folder": None}
    from ..bankdir.predict import metric_scale

    return {"score_range": metric_scale(folder), "folder": folder}
