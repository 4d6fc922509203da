"""CATConfig: every setting of an adaptive test, validated once at construction.

The defaults follow the ATLAS paper (Algorithm 1): start at theta0 = 0 with an item drawn at
random among those with |b - theta0| < 0.5, then maximum Fisher information with randomesque
top-5, EAP ability with an N(0, 1) prior, stop when at least 30 items were given and the SE is at
most ``se_stop``, or at 500 items. ``CATConfig.reference()`` returns the exact settings of the
paper's catR run (33 quadrature nodes on [-4, 4], trapezoidal integration as catR's ``eapEst``).

A config is an immutable value object: change it with :func:`dataclasses.replace` or
``config.replace(...)``; ``to_dict()`` / ``from_dict()`` round-trip through JSON.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace
from typing import Mapping

from ..errors import ConfigError
from ..validation import check_finite

__all__ = ["CATConfig", "SELECTION_METHODS", "SE_METHODS", "EXPOSURE_METHODS"]

SELECTION_METHODS = ("mfi", "kl", "astrat", "random")
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


@dataclass(frozen=True)
class CATConfig:
    """Settings of a computerized adaptive test.

    Parameters
    ----------
    theta0 : float
        Starting ability; the first item is drawn uniformly among the items with
        ``|b - theta0| < first_item_window`` (the item nearest to theta0 if there is none).
    first_item_window : float
        Half-width of that window (0.5 in the paper).
    randomesque : int
        After the first item, pick uniformly among the ``randomesque`` best items by the selection
        criterion (Kingsbury and Zara, 1989); 1 = always the best.
    min_items, max_items : int
        No precision rule stops the test before ``min_items`` items; it always stops at
        ``max_items``.
    se_stop : float or None
        Stop once SE <= se_stop (and n >= min_items). None disables the SE rule.
    se_method : {"information", "posterior"}
        ``information``: SE = 1 / sqrt(sum_j I_j(theta) + 1 / prior_sd^2), catR's ``semTheta``
        for a Bayesian estimate (what the paper's code used); ``posterior``: the posterior SD.
    prior_mean, prior_sd : float
        Normal prior of the EAP estimate.
    quadpts, theta_range : int, (float, float)
        Equally spaced quadrature grid for the EAP posterior (mirt: 61 on [-6, 6]; catR: 33 on
        [-4, 4]).
    quadrature_rule : {"rectangle", "trapezoid"}
        Node weights: equal (mirt) or trapezoidal, half weight at both ends (catR's
        ``integrate.catR``).
    selection : {"mfi", "kl", "astrat", "random"}
        Maximum Fisher information; Kullback-Leibler information over
        ``theta +- kl_width / sqrt(n)`` (Chang and Ying, 1996); a-stratified with the b closest to
        theta inside the current stratum (Chang and Ying, 1999); or uniform random.
    kl_width, kl_points : float, int
        KL integration half-width constant c (delta_n = c / sqrt(n)) and Gauss-Legendre points.
    astrat_strata, astrat_stage_items : int, int or None
        Number of a-strata (equal-sized, ascending a) and items given per stratum before moving
        up (default ceil(min_items / astrat_strata)); after the last stage the top stratum is used.
    reliability_stop : float or None
        Stop once 1 - posterior variance / prior variance >= this value (n >= min_items).
    min_info_stop : float or None
        Stop once the best remaining item has Fisher information below this value at theta
        (n >= min_items): the bank has nothing left worth asking.
    exposure, r_max, exposure_params, eligibility_cohort
        Exposure control (``exposure.py``): ``"sympson_hetter"`` administers a selected item j
        with probability K_j (``exposure_params``: item id -> K_j, from
        ``calibrate_sympson_hetter``); ``"eligibility"`` (restricted method) makes an item
        ineligible once its exposure rate reached ``r_max``. ``sh_max_trials`` bounds the trials
        per step.
    content_column, content_targets, content_length
        Content balancing by the maximum priority index (``content.py``; Cheng and Chang, 2009):
        the metadata column holding each item's content area, the target proportion of each area
        (summing to 1), and the planned test length the targets apply to (default: max_items for
        a fixed-length test, else min_items; beyond it the targets scale with the test length).
    floor_theta, ceiling_theta, bound_z : float or None, float or None, float
        Floor / ceiling stop (``stopping.py``): stop once theta + bound_z SE < floor_theta
        (reason ``floor``) or theta - bound_z SE > ceiling_theta (``ceiling``), n >= min_items.
    score_curve, score_sd_stop : tuples of floats or None
        Score-precision stop (``stopping.py``): a score link's curve (published score against
        theta) and the target SD of the score's theta part, both on ``linspace(-6, 6, K)``;
        stop once the SD of the curve over N(theta, SE^2) is <= the target at theta (reason
        ``score_precision``, n >= min_items): where the curve is flat (chance level, the top)
        more items cannot narrow the predicted score's interval. From
        ``ScoreLink.stop_settings()``.
        A bank with a score link gives them: ``config.replace(**link.stop_settings(margin))``
        (where the link's curve is within ``margin`` of its lowest / highest value).
    cost_per_item, cost_column, value_per_se, budget
        Cost-aware stopping (``stopping.py``): stop when value_per_se x (expected SE reduction of
        the next best item) < its cost (n >= min_items); stop before the total cost would exceed
        ``budget``. Item costs come from ``cost_column`` in the bank metadata, else
        ``cost_per_item``.
    """

    theta0: float = 0.0
    first_item_window: float = 0.5
    randomesque: int = 5
    min_items: int = 30
    max_items: int = 500
    se_stop: float | None = 0.1
    se_method: str = "information"
    prior_mean: float = 0.0
    prior_sd: float = 1.0
    quadpts: int = 61
    theta_range: tuple = (-6.0, 6.0)
    quadrature_rule: str = "rectangle"
    selection: str = "mfi"
    kl_width: float = 3.0
    kl_points: int = 7
    astrat_strata: int = 4
    astrat_stage_items: int | None = None
    reliability_stop: float | None = None
    min_info_stop: float | None = None
    # ---- phase 2: exposure control
    exposure: str = "none"
    r_max: float = 0.2
    exposure_params: Mapping[str, float] | None = None
    sh_max_trials: int = 20
    # ---- phase 2: content balancing
    content_column: str | None = None
    content_targets: Mapping[str, float] | None = None
    content_length: int | None = None
    # ---- phase 2: cost-aware stopping
    cost_per_item: float | None = None
    cost_column: str | None = None
    value_per_se: float | None = None
    budget: float | None = None
    # ---- floor / ceiling stop (thresholds from a score link)
    floor_theta: float | None = None
    ceiling_theta: float | None = None
    bound_z: float = 1.96
    # ---- score precision (from a score link)
    score_curve: tuple | None = None
    score_sd_stop: tuple | None = None

    def __post_init__(self):
        set_ = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731
        for name in ("theta0", "first_item_window", "prior_mean", "prior_sd", "kl_width", "r_max"):
            set_(name, check_finite(getattr(self, name), name))
        for name in ("randomesque", "min_items", "max_items", "quadpts", "kl_points",
                     "astrat_strata", "sh_max_trials"):
            value = getattr(self, name)
            if isinstance(value, bool) or int(value) != value:
                raise ConfigError(f"{name} must be an integer, got {value!r}")
            set_(name, int(value))
        if self.first_item_window < 0:
            raise ConfigError(f"first_item_window must be >= 0, got {self.first_item_window}")
        if self.randomesque < 1:
            raise ConfigError(f"randomesque must be >= 1 (1 = always the best item), got {self.randomesque}")
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
        if self.se_method not in SE_METHODS:
            raise ConfigError(f"se_method must be one of {SE_METHODS}, got {self.se_method!r}")
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
        set_("theta_range", (lo, hi))
        if self.quadrature_rule not in QUADRATURE_RULES:
            raise ConfigError(f"quadrature_rule must be one of {QUADRATURE_RULES}, "
                              f"got {self.quadrature_rule!r}")
        if self.selection not in SELECTION_METHODS:
            raise ConfigError(f"selection must be one of {SELECTION_METHODS}, got {self.selection!r}")
        if self.kl_width <= 0 or self.kl_points < 1:
            raise ConfigError("kl_width must be positive and kl_points >= 1")
        if self.astrat_strata < 1:
            raise ConfigError(f"astrat_strata must be >= 1, got {self.astrat_strata}")
        if self.astrat_stage_items is not None:
            if int(self.astrat_stage_items) != self.astrat_stage_items or self.astrat_stage_items < 1:
                raise ConfigError(f"astrat_stage_items must be a positive integer or None, "
                                  f"got {self.astrat_stage_items!r}")
            set_("astrat_stage_items", int(self.astrat_stage_items))
        rel = self.reliability_stop
        if rel is not None:
            rel = float(rel)
            if not 0 < rel < 1:
                raise ConfigError(f"reliability_stop must be in (0, 1), got {self.reliability_stop!r}")
            set_("reliability_stop", rel)
        set_("min_info_stop", _opt_positive("min_info_stop", self.min_info_stop))
        # ---- exposure
        if self.exposure not in EXPOSURE_METHODS:
            raise ConfigError(f"exposure must be one of {EXPOSURE_METHODS}, got {self.exposure!r}")
        if not 0 < self.r_max <= 1:
            raise ConfigError(f"r_max must be in (0, 1], got {self.r_max}")
        if self.sh_max_trials < 1:
            raise ConfigError(f"sh_max_trials must be >= 1, got {self.sh_max_trials}")
        if self.exposure_params is not None:
            params = {}
            for key, value in dict(self.exposure_params).items():
                value = float(value)
                if not 0 <= value <= 1:
                    raise ConfigError(f"exposure parameter of item {key!r} must be in [0, 1], "
                                      f"got {value}")
                params[str(key)] = value
            set_("exposure_params", params)
        if self.exposure == "sympson_hetter" and self.exposure_params is None:
            raise ConfigError(
                "exposure='sympson_hetter' needs exposure_params (item id -> K); compute them with "
                "atlascat.cat.exposure_calibration.calibrate_sympson_hetter(bank, config, thetas, rng)"
            )
        # ---- content
        if (self.content_column is None) != (self.content_targets is None):
            raise ConfigError("content balancing needs both content_column and content_targets")
        if self.content_targets is not None:
            targets = {str(k): float(v) for k, v in dict(self.content_targets).items()}
            if not targets or any(not (math.isfinite(v) and v >= 0) for v in targets.values()):
                raise ConfigError(f"content_targets must map areas to proportions >= 0, got {targets}")
            total = sum(targets.values())
            if abs(total - 1.0) > 1e-6:
                raise ConfigError(f"content_targets must sum to 1, they sum to {total:.6g}")
            set_("content_targets", targets)
            if self.selection not in ("mfi", "kl"):
                raise ConfigError("content balancing (maximum priority index) needs a non-negative "
                                  "criterion: selection='mfi' or 'kl'")
        if self.content_length is not None:
            if int(self.content_length) != self.content_length or self.content_length < 1:
                raise ConfigError(f"content_length must be a positive integer, got {self.content_length!r}")
            set_("content_length", int(self.content_length))
        # ---- cost
        set_("cost_per_item", _opt_positive("cost_per_item", self.cost_per_item, allow_zero=True))
        set_("value_per_se", _opt_positive("value_per_se", self.value_per_se, allow_zero=True))
        set_("budget", _opt_positive("budget", self.budget))
        if self.value_per_se is not None and self.cost_per_item is None and self.cost_column is None:
            raise ConfigError("cost-aware stopping (value_per_se) needs cost_per_item or cost_column")
        if self.budget is not None and self.cost_per_item is None and self.cost_column is None:
            raise ConfigError("a budget needs cost_per_item or cost_column")
        # ---- floor / ceiling
        for name in ("floor_theta", "ceiling_theta"):
            if getattr(self, name) is not None:
                set_(name, check_finite(getattr(self, name), name))
        set_("bound_z", check_finite(self.bound_z, "bound_z"))
        if self.bound_z < 0:
            raise ConfigError(f"bound_z must be >= 0, got {self.bound_z}")
        if (self.floor_theta is not None and self.ceiling_theta is not None
                and self.floor_theta >= self.ceiling_theta):
            raise ConfigError(f"floor_theta ({self.floor_theta}) must be below ceiling_theta "
                              f"({self.ceiling_theta})")
        # ---- score precision
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
            set_("score_curve", curve)
            set_("score_sd_stop", target)

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
        """A fixed-length test of ``n_items`` items (no precision stop)."""
        base = dict(min_items=n_items, max_items=n_items, se_stop=None)
        base.update(overrides)
        return cls(**base)

    def replace(self, **changes) -> "CATConfig":
        """A copy with some fields changed (validated again)."""
        return replace(self, **changes)

    # ------------------------------------------------------------------ derived
    @property
    def is_fixed_length(self) -> bool:
        return (self.min_items == self.max_items or
                (self.se_stop is None and self.reliability_stop is None and
                 self.min_info_stop is None and self.value_per_se is None and self.budget is None
                 and self.floor_theta is None and self.ceiling_theta is None
                 and self.score_curve is None))

    @property
    def stage_items(self) -> int:
        """Items per a-stratum stage."""
        if self.astrat_stage_items is not None:
            return self.astrat_stage_items
        return max(1, math.ceil(max(self.min_items, 1) / self.astrat_strata))

    @property
    def uniforms_per_step(self) -> int:
        """Uniform draws one selection consumes from an examinee's generator.

        One for the randomesque (or first-item) pick; with Sympson-Hetter, a pick and a trial per
        round (``2 * sh_max_trials``). Fixed per config so that a batched simulation and
        step-by-step sessions consume every examinee's stream identically.
        """
        return 2 * self.sh_max_trials if self.exposure == "sympson_hetter" else 1

    # ------------------------------------------------------------------ serialization
    def to_dict(self) -> dict:
        """JSON-serializable dict of every field."""
        d = asdict(self)
        d["theta_range"] = list(self.theta_range)
        for key in ("exposure_params", "content_targets"):
            if d[key] is not None:
                d[key] = dict(d[key])
        return d

    @classmethod
    def from_dict(cls, d: Mapping) -> "CATConfig":
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ConfigError(f"unknown CATConfig field(s) {unknown}; known: {sorted(known)}")
        d = dict(d)
        if "theta_range" in d:
            d["theta_range"] = tuple(d["theta_range"])
        for key in ("score_curve", "score_sd_stop"):
            if d.get(key) is not None:
                d[key] = tuple(d[key])
        return cls(**d)
