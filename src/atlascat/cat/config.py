"""CATConfig: the settings of an adaptive test, composed of five parts that validate themselves.

The defaults follow the ATLAS paper (Algorithm 1): start at theta0 = 0 with an item drawn at
random among those with |b - theta0| < 0.5, then maximum Fisher information with randomesque
top-5, EAP ability with an N(0, 1) prior, stop when at least 30 items were given and the SE is at
most ``se_stop``, or at 500 items. ``CATConfig.reference()`` returns the exact settings of the
paper's catR run (33 quadrature nodes on [-4, 4], trapezoidal integration as catR's ``eapEst``).

The parts, with their fields (the flat keyword of ``CATConfig(...)`` where it differs):

- :class:`Estimation`: method (``estimator``), prior_mean, prior_sd, quadpts, theta_range,
  quadrature_rule, se_method
- :class:`Selection`: criterion (``selection``), theta0, first_item_window, randomesque,
  kl_width, kl_points, astrat_strata, astrat_stage_items
- :class:`Stopping`: min_items, max_items, se_stop, reliability_stop, min_info_stop,
  floor_theta, ceiling_theta, bound_z, score_curve, score_sd_stop, cost_per_item, cost_column,
  value_per_se, budget, rules (``stop_rules``)
- :class:`Exposure`: method (``exposure``), r_max, params (``exposure_params``), sh_max_trials
- :class:`Content`: column (``content_column``), targets (``content_targets``), length
  (``content_length``)

Like catsim's simulator, which composes selector, estimator and stopper objects, the engine
takes components a user writes: ``Selection(criterion=obj)`` with a
:class:`~atlascat.cat.selection.SelectionCriterion` (``scores(theta, n_items, used, params)``
-> (n, J), higher = better) and ``Stopping(rules=(obj, ...))`` with
:class:`~atlascat.cat.stopping.StopRule` objects (``check(engine, rows)`` -> bool array),
checked after the built-in rules. Both work on rows = examinees, so the batched
:func:`~atlascat.cat.simulate.simulate_cat` and :class:`~atlascat.cat.session.CATSession` run
them alike.

A config is an immutable value object: ``config.replace(max_items=50)`` (flat names, the other
settings kept) or ``dataclasses.replace(config, stopping=...)`` (parts). ``to_dict()`` /
``from_dict()`` round-trip through JSON with the flat names (the format stored with live runs;
``from_dict`` also takes ``{"stopping": {...}, ...}``); a config holding custom components is a
Python object only and ``to_dict`` refuses it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Any, Mapping

from ..irt.defaults import QUADPTS, THETA_RANGE
from ..errors import ConfigError
from ..validation import check_finite

__all__ = ["CATConfig", "Estimation", "Selection", "Stopping", "Exposure", "Content",
           "SELECTION_METHODS", "SE_METHODS", "EXPOSURE_METHODS", "ESTIMATORS"]

ESTIMATORS = ("eap", "map", "ml", "wle")   # catR's EAP, BM, ML, WL (cat.estimators)

SELECTION_METHODS = ("mfi", "mfi-cost", "kl", "astrat", "random")
SE_METHODS = ("information", "posterior")
QUADRATURE_RULES = ("rectangle", "trapezoid")
EXPOSURE_METHODS = ("none", "sympson_hetter", "eligibility")


def _opt_positive(name, value, *, allow_zero=False):
    if value is None:
        return None
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{name} must be a number or None, got {value!r}") from None
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        raise ConfigError(f"{name} must be {'non-negative' if allow_zero else 'positive'} "
                          f"and finite, got {value!r}")
    return value


def _integers(part, names, labels=None):
    """Check that the named fields hold integers (not bools) and store them as int."""
    for name in names:
        value = getattr(part, name)
        label = (labels or {}).get(name, name)
        if isinstance(value, bool) or int(value) != value:
            raise ConfigError(f"{label} must be an integer, got {value!r}")
        object.__setattr__(part, name, int(value))


def _finite(part, names, labels=None):
    for name in names:
        label = (labels or {}).get(name, name)
        object.__setattr__(part, name, check_finite(getattr(part, name), label))


class _Part:
    """Shared by the parts: ``replace`` and a JSON-able dict of the plain fields."""

    def replace(self, **changes):
        """A copy with some fields changed (validated again)."""
        return replace(self, **changes)


class _NamedPart(_Part):
    """A part whose flat keyword names one of its fields (``selection`` the criterion,
    ``exposure`` the method): comparing the part itself with a name is a mistake that would be
    silently False, so it raises."""

    _named = ""

    def __eq__(self, other):
        if isinstance(other, str):
            raise TypeError(f"compare config.{type(self).__name__.lower()}.{self._named} with "
                            f"{other!r}, not the {type(self).__name__} part")
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, f.name) == getattr(other, f.name) for f in fields(self))

    __hash__ = None


@dataclass(frozen=True)
class Estimation(_Part):
    """Ability estimate on a fixed grid and its SE.

    method : (flat keyword ``estimator``) "eap" (posterior mean), "map" (posterior mode, catR's
        "BM"), "ml" (maximum likelihood) or "wle" (Warm's weighted likelihood), each bounded to
        ``theta_range`` as catR's ``thetaEst`` (:mod:`atlascat.cat.estimators`); the SE of
        "map" is 1 / sqrt(I + 1 / prior_sd^2), of "ml" and "wle" 1 / sqrt(I) (``semTheta``).
    prior_mean, prior_sd : normal prior of the EAP and MAP estimates.
    quadpts, theta_range : equally spaced grid (mirt: 61 on [-6, 6]; catR: 33 on [-4, 4]).
    quadrature_rule : "rectangle" (equal weights, mirt) or "trapezoid" (half weight at both
        ends, catR's ``integrate.catR``).
    se_method : "information": SE = 1 / sqrt(sum_j I_j(theta) + 1 / prior_sd^2), catR's
        ``semTheta`` for a Bayesian estimate (the paper's code); "posterior": the posterior SD.
    """

    method: str = "eap"
    prior_mean: float = 0.0
    prior_sd: float = 1.0
    quadpts: int = QUADPTS
    theta_range: tuple = THETA_RANGE
    quadrature_rule: str = "rectangle"
    se_method: str = "information"

    def __post_init__(self):
        _finite(self, ("prior_mean", "prior_sd"))
        _integers(self, ("quadpts",))
        if self.method not in ESTIMATORS:
            raise ConfigError(f"estimator must be one of {ESTIMATORS}, got {self.method!r}")
        if self.se_method not in SE_METHODS:
            raise ConfigError(f"se_method must be one of {SE_METHODS}, got {self.se_method!r}")
        if self.se_method == "posterior" and self.method != "eap":
            raise ConfigError(f"se_method 'posterior' is the EAP's posterior SD; estimator "
                              f"{self.method!r} has the information SE (se_method='information')")
        if self.prior_sd <= 0:
            raise ConfigError(f"prior_sd must be positive, got {self.prior_sd}")
        if self.quadpts < 3:
            raise ConfigError(f"quadpts must be >= 3, got {self.quadpts}")
        try:
            lo, hi = (float(v) for v in self.theta_range)
        except (TypeError, ValueError):
            raise ConfigError(f"theta_range must be (low, high), got {self.theta_range!r}") from None
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise ConfigError(f"theta_range must be finite with low < high, got {self.theta_range!r}")
        object.__setattr__(self, "theta_range", (lo, hi))
        if self.quadrature_rule not in QUADRATURE_RULES:
            raise ConfigError(f"quadrature_rule must be one of {QUADRATURE_RULES}, "
                              f"got {self.quadrature_rule!r}")


@dataclass(frozen=True, eq=False)
class Selection(_NamedPart):
    """How the next item is chosen.

    criterion : "mfi" (maximum Fisher information), "mfi-cost" (the most Fisher information per
        unit of the item's cost, :class:`Stopping`'s ``cost_column`` or ``cost_per_item``),
        "kl" (Kullback-Leibler information over
        ``theta +- kl_width / sqrt(n)``, Chang and Ying, 1996), "astrat" (a-stratified, the b
        closest to theta inside the current stratum, Chang and Ying, 1999), "random", or a
        :class:`~atlascat.cat.selection.SelectionCriterion` object of your own.
    theta0, first_item_window : the first item is drawn uniformly among the items with
        ``|b - theta0| < first_item_window`` (the nearest item if there is none).
    randomesque : after the first item, pick uniformly among the ``randomesque`` best items by
        the criterion (Kingsbury and Zara, 1989); 1 = always the best.
    kl_width, kl_points : KL half-width constant c (delta_n = c / sqrt(n)), Gauss-Legendre points.
    astrat_strata, astrat_stage_items : number of a-strata (equal-sized, ascending a) and items
        per stratum before moving up (default ceil(min_items / astrat_strata)).
    """

    _named = "criterion"
    criterion: Any = "mfi"
    theta0: float = 0.0
    first_item_window: float = 0.5
    randomesque: int = 5
    kl_width: float = 3.0
    kl_points: int = 7
    astrat_strata: int = 4
    astrat_stage_items: int | None = None

    def __post_init__(self):
        _finite(self, ("theta0", "first_item_window", "kl_width"))
        _integers(self, ("randomesque", "kl_points", "astrat_strata"))
        if self.first_item_window < 0:
            raise ConfigError(f"first_item_window must be >= 0, got {self.first_item_window}")
        if self.randomesque < 1:
            raise ConfigError(f"randomesque must be >= 1 (1 = always the best item), got {self.randomesque}")
        crit = self.criterion
        if isinstance(crit, str):
            if crit not in SELECTION_METHODS:
                raise ConfigError(f"selection must be one of {SELECTION_METHODS}, got {crit!r}")
        elif isinstance(crit, type):
            raise ConfigError(f"selection takes a criterion object, not the class: "
                              f"{crit.__name__}() instead of {crit.__name__}")
        elif not callable(getattr(crit, "scores", None)):
            raise ConfigError(f"selection must be one of {SELECTION_METHODS} or an object with a "
                              f"scores(theta, n_items, used, params) method (a "
                              f"SelectionCriterion), got {crit!r}")
        if self.kl_width <= 0 or self.kl_points < 1:
            raise ConfigError("kl_width must be positive and kl_points >= 1")
        if self.astrat_strata < 1:
            raise ConfigError(f"astrat_strata must be >= 1, got {self.astrat_strata}")
        if self.astrat_stage_items is not None:
            if int(self.astrat_stage_items) != self.astrat_stage_items or self.astrat_stage_items < 1:
                raise ConfigError(f"astrat_stage_items must be a positive integer or None, "
                                  f"got {self.astrat_stage_items!r}")
            object.__setattr__(self, "astrat_stage_items", int(self.astrat_stage_items))

    @property
    def is_custom(self) -> bool:
        """True when the criterion is a user's object rather than a named one."""
        return not isinstance(self.criterion, str)

    @property
    def nonnegative(self) -> bool:
        """Whether the criterion's scores can be weighted by priority factors (content
        balancing): mfi and kl, or a custom criterion that says so (``nonnegative = True``)."""
        if self.is_custom:
            return bool(getattr(self.criterion, "nonnegative", False))
        return self.criterion in ("mfi", "mfi-cost", "kl")


@dataclass(frozen=True)
class Stopping(_Part):
    """When the test ends (the rules: :mod:`atlascat.cat.stopping`).

    min_items, max_items : no precision rule stops the test before ``min_items`` items; it
        always stops at ``max_items``.
    se_stop : stop once SE <= se_stop (None: no SE rule).
    reliability_stop : stop once 1 - posterior variance / prior variance >= this value.
    min_info_stop : stop once the best remaining item has Fisher information below this value.
    floor_theta, ceiling_theta, bound_z : stop once theta + bound_z SE < floor_theta (reason
        ``floor``) or theta - bound_z SE > ceiling_theta (``ceiling``).
    score_curve, score_sd_stop : a score link's curve and the target SD of the score's theta
        part on ``linspace(-6, 6, K)``: stop once the SD of the curve over N(theta, SE^2) is
        <= the target at theta (``score_precision``). From ``ScoreLink.stop_settings()``:
        ``config.replace(**link.stop_settings(margin))``.
    cost_per_item, cost_column, value_per_se, budget : cost-aware stopping: stop when
        value_per_se x (expected SE reduction of the next best item) < its cost; stop before the
        total cost would exceed ``budget``. Costs from the bank metadata column ``cost_column``
        or one ``cost_per_item`` for every item (not both).
    rules : your own :class:`~atlascat.cat.stopping.StopRule` objects, checked after the
        built-in rules and before ``max_items``; a rule with ``precision = True`` only fires
        once n >= min_items.

    All except ``max_items`` (and ``budget``) wait for ``min_items``.
    """

    min_items: int = 30
    max_items: int = 500
    se_stop: float | None = 0.1
    reliability_stop: float | None = None
    min_info_stop: float | None = None
    floor_theta: float | None = None
    ceiling_theta: float | None = None
    bound_z: float = 1.96
    score_curve: tuple | None = None
    score_sd_stop: tuple | None = None
    cost_per_item: float | None = None
    cost_column: str | None = None
    value_per_se: float | None = None
    budget: float | None = None
    rules: tuple = ()

    def __post_init__(self):
        set_ = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731
        _integers(self, ("min_items", "max_items"))
        if self.max_items < 1:
            raise ConfigError(f"max_items must be >= 1, got {self.max_items}")
        if self.min_items < 0:
            raise ConfigError(f"min_items must be >= 0, got {self.min_items}")
        if not 0 <= self.min_items <= self.max_items:
            raise ConfigError(
                f"min_items ({self.min_items}) must be between 0 and max_items ({self.max_items}); "
                "lower min_items or raise max_items"
            )
        set_("se_stop", _opt_positive("se_stop", self.se_stop))
        rel = self.reliability_stop
        if rel is not None:
            rel = float(rel)
            if not 0 < rel < 1:
                raise ConfigError(f"reliability_stop must be in (0, 1), got {self.reliability_stop!r}")
            set_("reliability_stop", rel)
        set_("min_info_stop", _opt_positive("min_info_stop", self.min_info_stop))
        self._check_cost()
        self._check_bounds()
        self._check_score()
        rules = (self.rules,) if callable(getattr(self.rules, "check", None)) else self.rules
        try:
            rules = tuple(rules)
        except TypeError:
            raise ConfigError(f"stop_rules must be StopRule objects (a check(engine, rows) method "
                              f"and a reason), got {self.rules!r}") from None
        for rule in rules:
            if isinstance(rule, type):
                raise ConfigError(f"stop_rules take rule objects, not a class: "
                                  f"{rule.__name__}(...) instead of {rule.__name__}")
            if not callable(getattr(rule, "check", None)) or not isinstance(
                    getattr(rule, "reason", None), str):
                raise ConfigError(f"stop rule {rule!r} needs a check(engine, rows) method and a "
                                  "reason (a string); subclass atlascat.cat.stopping.StopRule")
        set_("rules", rules)

    def _check_cost(self):
        set_ = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731
        set_("cost_per_item", _opt_positive("cost_per_item", self.cost_per_item, allow_zero=True))
        set_("value_per_se", _opt_positive("value_per_se", self.value_per_se, allow_zero=True))
        set_("budget", _opt_positive("budget", self.budget))
        if self.cost_per_item is not None and self.cost_column is not None:
            raise ConfigError(f"give the items' costs as cost_column ({self.cost_column!r}) or "
                              f"cost_per_item ({self.cost_per_item:g}), not both")
        if self.value_per_se is not None and self.cost_per_item is None and self.cost_column is None:
            raise ConfigError("cost-aware stopping (value_per_se) needs cost_per_item or cost_column")
        if self.budget is not None and self.cost_per_item is None and self.cost_column is None:
            raise ConfigError("a budget needs cost_per_item or cost_column")

    def _check_bounds(self):
        for name in ("floor_theta", "ceiling_theta"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, check_finite(getattr(self, name), name))
        _finite(self, ("bound_z",))
        if self.bound_z < 0:
            raise ConfigError(f"bound_z must be >= 0, got {self.bound_z}")
        if (self.floor_theta is not None and self.ceiling_theta is not None
                and self.floor_theta >= self.ceiling_theta):
            raise ConfigError(f"floor_theta ({self.floor_theta}) must be below ceiling_theta "
                              f"({self.ceiling_theta})")

    def _check_score(self):
        if (self.score_curve is None) != (self.score_sd_stop is None):
            raise ConfigError("score_curve and score_sd_stop go together (both from "
                              "ScoreLink.stop_settings())")
        if self.score_curve is not None:
            curve = tuple(float(v) for v in self.score_curve)
            target = tuple(float(v) for v in self.score_sd_stop)
            if (len(curve) < 2 or len(curve) != len(target)
                    or not all(math.isfinite(v) for v in curve + target)
                    or min(target) < 0):
                raise ConfigError("score_curve and score_sd_stop must be finite, of one length "
                                  ">= 2, with score_sd_stop >= 0")
            object.__setattr__(self, "score_curve", curve)
            object.__setattr__(self, "score_sd_stop", target)

    @property
    def is_fixed_length(self) -> bool:
        """Every examinee gets ``max_items`` items (no rule can stop the test earlier)."""
        return (self.min_items == self.max_items or
                (self.se_stop is None and self.reliability_stop is None and
                 self.min_info_stop is None and self.value_per_se is None and self.budget is None
                 and self.floor_theta is None and self.ceiling_theta is None
                 and self.score_curve is None and not self.rules))


@dataclass(frozen=True, eq=False)
class Exposure(_NamedPart):
    """Item exposure control (:mod:`atlascat.cat.exposure`).

    method : "none"; "sympson_hetter" administers a selected item j with probability K_j
        (``params``: item id -> K_j, from
        :func:`~atlascat.cat.exposure_calibration.calibrate_sympson_hetter`); "eligibility"
        (restricted method) makes an item ineligible once its exposure rate reached ``r_max``.
    sh_max_trials : Sympson-Hetter trials per selection.
    """

    _named = "method"
    method: str = "none"
    r_max: float = 0.2
    params: Mapping[str, float] | None = None
    sh_max_trials: int = 20

    def __post_init__(self):
        _finite(self, ("r_max",))
        _integers(self, ("sh_max_trials",))
        if self.method not in EXPOSURE_METHODS:
            raise ConfigError(f"exposure must be one of {EXPOSURE_METHODS}, got {self.method!r}")
        if not 0 < self.r_max <= 1:
            raise ConfigError(f"r_max must be in (0, 1], got {self.r_max}")
        if self.sh_max_trials < 1:
            raise ConfigError(f"sh_max_trials must be >= 1, got {self.sh_max_trials}")
        if self.params is not None:
            params = {}
            for key, value in dict(self.params).items():
                value = float(value)
                if not 0 <= value <= 1:
                    raise ConfigError(f"exposure parameter of item {key!r} must be in [0, 1], "
                                      f"got {value}")
                params[str(key)] = value
            object.__setattr__(self, "params", params)
        if self.method == "sympson_hetter" and self.params is None:
            raise ConfigError(
                "exposure='sympson_hetter' needs exposure_params (item id -> K); compute them with "
                "atlascat.cat.exposure_calibration.calibrate_sympson_hetter(bank, config, thetas, "
                "rng)"
            )

    @property
    def uniforms_per_step(self) -> int:
        """Uniform draws one selection consumes from an examinee's generator: one for the
        randomesque (or first-item) pick; with Sympson-Hetter, a pick and a trial per round."""
        return 2 * self.sh_max_trials if self.method == "sympson_hetter" else 1


@dataclass(frozen=True)
class Content(_Part):
    """Content balancing by the maximum priority index (:mod:`atlascat.cat.content`; Cheng and
    Chang, 2009).

    column : the bank metadata column holding each item's content area.
    targets : target proportion of each area (summing to 1).
    length : the planned test length the targets apply to (default: max_items for a
        fixed-length test, else min_items; beyond it the targets scale with the test length).
    """

    column: str | None = None
    targets: Mapping[str, float] | None = None
    length: int | None = None

    def __post_init__(self):
        if (self.column is None) != (self.targets is None):
            raise ConfigError("content balancing needs both content_column and content_targets")
        if self.targets is not None:
            targets = {str(k): float(v) for k, v in dict(self.targets).items()}
            if not targets or any(not (math.isfinite(v) and v >= 0) for v in targets.values()):
                raise ConfigError(f"content_targets must map areas to proportions >= 0, got {targets}")
            total = sum(targets.values())
            if abs(total - 1.0) > 1e-6:
                raise ConfigError(f"content_targets must sum to 1, they sum to {total:.6g}")
            object.__setattr__(self, "targets", targets)
        if self.length is not None:
            if int(self.length) != self.length or self.length < 1:
                raise ConfigError(f"content_length must be a positive integer, got {self.length!r}")
            object.__setattr__(self, "length", int(self.length))

    @property
    def enabled(self) -> bool:
        return self.column is not None


#: part name -> its class
PARTS = {"estimation": Estimation, "selection": Selection, "stopping": Stopping,
         "exposure": Exposure, "content": Content}
#: flat keyword of CATConfig(...) -> (part, field of the part)
FLAT = {
    "estimator": ("estimation", "method"),
    **{f.name: ("estimation", f.name) for f in fields(Estimation) if f.name != "method"},
    "selection": ("selection", "criterion"),
    **{f.name: ("selection", f.name) for f in fields(Selection) if f.name != "criterion"},
    **{f.name: ("stopping", f.name) for f in fields(Stopping) if f.name != "rules"},
    "stop_rules": ("stopping", "rules"),
    "exposure": ("exposure", "method"), "r_max": ("exposure", "r_max"),
    "exposure_params": ("exposure", "params"), "sh_max_trials": ("exposure", "sh_max_trials"),
    "content_column": ("content", "column"), "content_targets": ("content", "targets"),
    "content_length": ("content", "length"),
}

_DEFAULT_PARTS = {name: cls() for name, cls in PARTS.items()}


@dataclass(frozen=True, init=False, repr=False)
class CATConfig:
    """Settings of a computerized adaptive test: ``estimation``, ``selection``, ``stopping``,
    ``exposure`` and ``content`` parts (each validates itself; see the module docstring for
    their fields).

    ``CATConfig(stopping=Stopping(max_items=50), selection=Selection(criterion="kl"))`` composes
    parts; ``CATConfig(max_items=50, selection="kl")`` is the same config by flat keywords, each
    routed to its part (flat keywords given with a part change that part's field). ``selection``
    and ``exposure`` take a part, or as a flat keyword the criterion ("mfi", ..., or an object)
    and the method ("none", ...). ``stop_rules=(rule, ...)`` adds your own stopping rules.
    """

    estimation: Estimation
    selection: Selection
    stopping: Stopping
    exposure: Exposure
    content: Content

    def __init__(self, *, estimation: Estimation | None = None, selection=None,
                 stopping: Stopping | None = None, exposure=None, content: Content | None = None,
                 **flat):
        given = dict(estimation=estimation, selection=selection, stopping=stopping,
                     exposure=exposure, content=content)
        parts: dict[str, Any] = {}
        for name, value in given.items():
            part = _as_part(name, value)
            if part is not None:
                parts[name] = part
            elif value is not None:  # selection / exposure as a flat keyword: criterion / method
                flat[name] = value
        for name, part in _compose(parts, flat).items():
            object.__setattr__(self, name, part)
        self.__post_init__()

    def __post_init__(self):
        """Checks across parts."""
        if self.content.enabled and not self.selection.nonnegative:
            raise ConfigError("content balancing (maximum priority index) needs a non-negative "
                              "criterion: selection='mfi' or 'kl'")
        stop = self.stopping
        if (self.selection.criterion == "mfi-cost" and stop.cost_column is None
                and not stop.cost_per_item):
            raise ConfigError("selection 'mfi-cost' (information per unit cost) needs the items' "
                              "costs: cost_column (or a positive cost_per_item)")

    def __repr__(self) -> str:
        """The settings that differ from the defaults, by their flat names."""
        default = _DEFAULT_PARTS
        diff = []
        for key, (part, attr) in FLAT.items():
            value = getattr(getattr(self, part), attr)
            if value != getattr(default[part], attr):
                diff.append(f"{key}={value!r}")
        return f"CATConfig({', '.join(diff)})"

    # ------------------------------------------------------------------ constructors
    @classmethod
    def reference(cls, **overrides) -> "CATConfig":
        """The paper's catR settings: 33 trapezoidal nodes on [-4, 4], information SE, MFI top-5.

        catR's ``thetaEst(method="EAP")`` integrates with the trapezoidal rule over
        ``parInt = c(-4, 4, 33)``; ``semTheta`` (method "BM") is the information SE.
        """
        base = dict(quadpts=33, theta_range=(-4.0, 4.0), quadrature_rule="trapezoid",
                    se_method="information", selection="mfi", randomesque=5, min_items=30,
                    max_items=500, se_stop=0.1, theta0=0.0, first_item_window=0.5,
                    prior_mean=0.0, prior_sd=1.0)
        base.update(overrides)
        return cls(**base)

    @classmethod
    def fixed_length(cls, n_items: int, **overrides) -> "CATConfig":
        """A fixed-length test of ``n_items`` items (no precision stop, nor a cost one)."""
        stops = [k for k in ("budget", "value_per_se") if overrides.get(k) is not None]
        if stops:   # they would end the test before its n_items
            raise ConfigError(f"a fixed-length test of {n_items} items has no other stop; drop "
                              f"{' and '.join(stops)}")
        base = dict(min_items=n_items, max_items=n_items, se_stop=None)
        base.update(overrides)
        return cls(**base)

    def replace(self, **changes) -> "CATConfig":
        """A copy with some settings changed (flat keywords or parts), validated again; every
        setting not named is kept (``config.replace(selection="kl")`` keeps randomesque)."""
        parts = {name: getattr(self, name) for name in PARTS}
        for name in PARTS:
            part = _as_part(name, changes.get(name))
            if part is not None:
                parts[name] = part
                del changes[name]
        return CATConfig(**_compose(parts, changes))

    # ------------------------------------------------------------------ derived
    @property
    def is_fixed_length(self) -> bool:
        return self.stopping.is_fixed_length

    @property
    def stage_items(self) -> int:
        """Items per a-stratum stage (default ceil(min_items / astrat_strata))."""
        sel = self.selection
        if sel.astrat_stage_items is not None:
            return sel.astrat_stage_items
        return max(1, math.ceil(max(self.stopping.min_items, 1) / sel.astrat_strata))

    @property
    def uniforms_per_step(self) -> int:
        """Uniform draws one selection consumes from an examinee's generator.

        One for the randomesque (or first-item) pick; with Sympson-Hetter, a pick and a trial per
        round (``2 * sh_max_trials``). Fixed per config so that a batched simulation and
        step-by-step sessions consume every examinee's stream identically.
        """
        return self.exposure.uniforms_per_step

    @property
    def has_custom_components(self) -> bool:
        """A selection criterion or stop rules of the user's (Python objects, not in JSON)."""
        return self.selection.is_custom or bool(self.stopping.rules)

    # ------------------------------------------------------------------ serialization
    def to_dict(self) -> dict:
        """JSON-serializable dict of every setting by its flat name (the stored format);
        ``estimator`` only when it is not the default "eap", so that the stored form of every
        EAP config is the one earlier versions wrote (``from_dict`` fills the default in)."""
        if self.has_custom_components:
            raise ConfigError("a CATConfig with a custom selection criterion or stop rules holds "
                              "Python objects and has no JSON form; keep the config object, or "
                              "use the named criteria and rules to store it")
        d = {}
        for key, (part, attr) in FLAT.items():
            value = getattr(getattr(self, part), attr)
            if key == "stop_rules" or (key == "estimator" and value == "eap"):
                continue
            if isinstance(value, Mapping):
                value = dict(value)
            elif isinstance(value, tuple):
                value = list(value)
            d[key] = value
        return d

    def cache_key(self) -> str:
        """A key of every setting; custom components count by identity (the engine's tables
        are cached by it and hold the components, so their ids are not reused meanwhile)."""
        d = {}
        for key, (part, attr) in FLAT.items():
            value = getattr(getattr(self, part), attr)
            if key == "stop_rules":
                value = tuple(("custom", id(r)) for r in value)
            elif key == "selection" and self.selection.is_custom:
                value = ("custom", id(value))
            d[key] = value
        return repr(sorted(d.items(), key=lambda kv: kv[0]))

    @classmethod
    def from_dict(cls, d: Mapping) -> "CATConfig":
        """The config of ``to_dict()`` (flat names, as stored by every version) or of
        ``{"stopping": {...}, "selection": {...}, ...}`` (parts by their field names)."""
        d = dict(d)
        unknown = sorted(set(d) - set(FLAT) - set(PARTS))
        if unknown:
            raise ConfigError(f"unknown CATConfig field(s) {unknown}; known: {sorted(FLAT)}")
        if "stop_rules" in d:
            raise ConfigError("stop_rules are Python objects; give them to CATConfig(...), "
                              "not from_dict")
        for key in ("theta_range", "score_curve", "score_sd_stop"):
            if d.get(key) is not None and not isinstance(d[key], Mapping):
                d[key] = tuple(d[key])
        return cls(**d)


def _as_part(name: str, value):
    """``value`` as the part ``name`` (a part, or its fields as a dict); None when it is None
    or, for ``selection`` / ``exposure``, a flat value (a criterion, a method)."""
    cls = PARTS[name]
    if value is None or isinstance(value, cls):
        return value
    if isinstance(value, Mapping):
        return _part_from_dict(cls, value, name)
    if name in ("selection", "exposure"):
        return None
    raise ConfigError(f"{name} must be a {cls.__name__} (atlascat.cat.config), "
                      f"got {type(value).__name__}")


def _compose(parts: Mapping, flat: Mapping) -> dict:
    """Every part: the given one (default: the class's defaults) with the flat keywords that
    belong to it applied, each part changed once (so its checks see all of its new values)."""
    unknown = sorted(set(flat) - set(FLAT))
    if unknown:
        raise ConfigError(f"unknown CATConfig setting(s) {unknown}; known: {sorted(FLAT)} "
                          f"or the parts {sorted(PARTS)}")
    changes: dict[str, dict] = {}
    for key, value in flat.items():
        part, attr = FLAT[key]
        changes.setdefault(part, {})[attr] = value
    out = {}
    for name, cls in PARTS.items():
        part, kw = parts.get(name), changes.get(name, {})
        out[name] = cls(**kw) if part is None else (replace(part, **kw) if kw else part)
    return out


def _part_from_dict(cls, d: Mapping, name: str):
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(d) - known)
    if unknown:
        raise ConfigError(f"unknown {name} setting(s) {unknown}; known: {sorted(known)}")
    d = dict(d)
    for key in ("theta_range", "score_curve", "score_sd_stop"):
        if d.get(key) is not None:
            d[key] = tuple(d[key])
    return cls(**d)


def tested_under_one_prior(bank, config: CATConfig) -> None:
    """A :class:`~atlascat.irt.grouplabels.GroupPriorWarning` where ``bank`` is a multiple-group
    fit's (it records its groups' priors): the adaptive test estimates every examinee under
    the config's one prior (the reference group's scale)."""
    from ..irt.grouplabels import warn_single_prior

    est = config.estimation
    warn_single_prior(bank, "tested", (est.prior_mean, est.prior_sd))
