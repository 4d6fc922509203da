"""A predicted leaderboard score and the notes of the floor / ceiling stops."""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace


@dataclass(frozen=True)
class ScorePrediction:
    """A predicted leaderboard score (0-1) with its 95% interval and percentile."""

    score: float
    lo: float
    hi: float
    percentile: float | None = None
    benchmark: str = ""
    #: one line each: outside the link's data, answers not fitting, stopped at the floor/top
    warnings: tuple = ()
    #: short machine-readable summary: "" or "+"-joined of below_data, above_data, misfit,
    #: floor, ceiling
    flag: str = ""
    #: Snijders' lz* of the answered items at theta (None: too few answers or none given)
    lz_star: float | None = None

    def to_dict(self) -> dict:
        d = asdict(self)
        d["warnings"] = list(self.warnings)
        return d

    @property
    def warning(self) -> str:
        """The warnings as one line ("" when there are none)."""
        return "; ".join(self.warnings)

    def __str__(self) -> str:
        pct = "" if self.percentile is None else f", percentile {self.percentile:.0f}"
        text = f"{100 * self.score:.1f} (95% {100 * self.lo:.1f}-{100 * self.hi:.1f}{pct})"
        return text + (f" [warning: {self.warning}]" if self.warnings else "")


def level(value: float, scale=None) -> str:
    """A score level (0-1) as a note writes it: in percent ("62%"), or on a metric's own
    ``scale`` (low, high) as low + (high - low) x value ("6.6" on a 1-10 rating)."""
    if scale is None:
        return f"{100 * value:.0f}%"
    lo, hi = (float(v) for v in scale)
    return f"{lo + (hi - lo) * value:.1f}"


def stop_note(prediction: ScorePrediction, stop_reason: str | None,
              chance: float | None = None, scale=None, floor_word: str = "chance") -> str | None:
    """The one-line note of an adaptive test stopped by the floor / ceiling rule (or by the
    score-precision rule with chance inside the interval):
    "at or near chance (<= X%)" (X = the upper bound; "at or near the bottom of the link's
    data" when chance is excluded by the interval) or "at or near the top (>= X%)" (X = the
    lower bound; on a metric's own ``scale`` (low, high) when given, :func:`level`); None for
    any other stop reason. ``floor_word``: what the lowest score is called (a link that knows
    no chance level: "the bottom of the scale", :attr:`ScoreLink.floor_word`)."""
    if stop_reason == "floor":
        where = (f"at or near {floor_word}" if chance is None or prediction.lo <= chance + 0.02
                 else "at or near the bottom of the link's data")
        return f"{where} (<= {level(prediction.hi, scale)})"
    if stop_reason == "ceiling":
        return f"at or near the top (>= {level(prediction.lo, scale)})"
    if (stop_reason in ("score_precision", "min_information") and chance is not None
            and prediction.lo <= chance + 0.02):
        # stopped where more items cannot help and chance cannot be excluded
        return f"at or near {floor_word} (<= {level(prediction.hi, scale)})"
    return None


def with_stop_note(pred: ScorePrediction, stop_reason, chance, scale=None,
                   floor_word: str = "chance") -> ScorePrediction:
    note = stop_note(pred, stop_reason, chance, scale, floor_word)
    if note is None:
        return pred
    return replace(pred, warnings=(note, *pred.warnings),
                   flag="+".join(f for f in (str(stop_reason), pred.flag) if f))
