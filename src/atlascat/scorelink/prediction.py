"""A predicted benchmark score (a shipped bank's leaderboard score, a bank folder's score of its
source models' benchmark) and the notes of the floor / ceiling stops."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace


@dataclass(frozen=True)
class ScorePrediction:
    """A predicted benchmark score (0-1: a shipped bank's leaderboard score, a bank folder's
    score of its own benchmark) with its 95% interval and percentile."""

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
    #: (low, high) of the metric's own scale the prediction prints on (a ``--score-range``
    #: bank folder's link: :attr:`ScoreLink.metric_range`), None: percent; the fields stay 0-1
    scale: tuple | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict:
        d = asdict(self)
        d.pop("scale")
        d["warnings"] = list(self.warnings)
        return d

    @property
    def warning(self) -> str:
        """The warnings as one line ("" when there are none)."""
        return "; ".join(self.warnings)

    def __str__(self) -> str:
        pct = "" if self.percentile is None else f", percentile {self.percentile:.0f}"
        score, lo, hi = (on_scale(v, self.scale) for v in (self.score, self.lo, self.hi))
        text = f"{score} (95% {lo}-{hi}{pct})"
        return text + (f" [warning: {self.warning}]" if self.warnings else "")


def on_scale(value: float, scale=None) -> str:
    """A 0-1 score as a printed prediction writes it: in percent ("71.9"), or on a metric's
    own ``scale`` (low, high) as low + (high - low) x value ("3.98" on 1-5), with
    :func:`score_digits` decimals."""
    if scale is None:
        return score_text(100 * float(value))
    lo, hi = (float(v) for v in scale)
    return score_text(lo + (hi - lo) * float(value), scale)


def score_digits(scale=None) -> int:
    """The one digits rule: the decimals every output writes a predicted score, its interval,
    a difference of two, an observed or model-based mean with, by the width of the scale it is
    shown on (``scale``: (low, high) of a metric's own scale; None: a 0-1 score in percent,
    0-100): 1 decimal for a width of 20 or more (percent, a 0-100 BLEU), 2 for 2 or more (a
    1-5 or 1-10 rating), 3 below (a 0-1 metric kept on its scale). A tenth of a point is the
    same share of a 0-100 scale as a thousandth of a 0-1 one."""
    if scale is None:
        return 1
    width = abs(float(scale[1]) - float(scale[0]))
    return 1 if width >= 20 else 2 if width >= 2 else 3


def score_text(value: float, scale=None, digits: int | None = None) -> str:
    """``value``, already in the units it is shown in (percent points, or a metric's own
    ``scale``), with :func:`score_digits` decimals (or ``digits``): "71.9" in percent, "3.98"
    on 1-5; a small negative rounded to zero reads "0.0", not "-0.0"."""
    text = f"{float(value):.{score_digits(scale) if digits is None else digits}f}"
    return text[1:] if text.startswith("-") and not text.strip("-0.") else text


def level(value: float, scale=None) -> str:
    """A score level (0-1) as a note writes it: in percent ("62%"), or on a metric's own
    ``scale`` (low, high) as low + (high - low) x value, to :func:`score_digits` ("6.62" on a
    1-10 rating, "37.2" on a 0-100 BLEU)."""
    return f"{100 * value:.0f}%" if scale is None else on_scale(value, scale)


def chance_reach(lo: float, hi: float, chance: float, scale=None,
                 floor_word: str = "chance") -> str:
    """The note of a score whose 95% interval (``lo``, ``hi``) reaches within 2 points of
    ``chance``: "its 95% interval (49% to 81%) reaches down to chance (50%): the score may be no
    better than guessing" ("nearly down to" when ``lo`` stays just above chance); the score
    itself may be far above chance (:func:`level` on a metric's ``scale``; a link that knows no
    chance level, ``floor_word`` "the bottom of the scale": no word of guessing)."""
    to = "down to" if lo <= chance else "nearly down to"
    guess = ": the score may be no better than guessing" if floor_word == "chance" else ""
    return (f"its 95% interval ({level(lo, scale)} to {level(hi, scale)}) reaches {to} "
            f"{floor_word} ({level(chance, scale)}){guess}")


def stop_note(prediction: ScorePrediction, stop_reason: str | None,
              chance: float | None = None, scale=None, floor_word: str = "chance") -> str | None:
    """The one-line note of an adaptive test stopped by the floor / ceiling rule (or by the
    score-precision rule with chance inside the interval):
    "at or near chance (<= X%)" (X = the upper bound; "at or near the bottom of the link's
    data" when chance is excluded by the interval) or "at or near the top (>= X%)" (X = the
    lower bound; on a metric's own ``scale`` (low, high) when given, :func:`level`); stopped
    by the score-precision or information rule, :func:`chance_reach` (the interval reaches
    chance, the score may not be near it); None for any other stop reason. ``floor_word``: what
    the lowest score is called (a link that knows no chance level: "the bottom of the scale",
    :attr:`ScoreLink.floor_word`)."""
    if stop_reason == "floor":
        where = (f"at or near {floor_word}" if chance is None or prediction.lo <= chance + 0.02
                 else "at or near the bottom of the link's data")
        return f"{where} (<= {level(prediction.hi, scale)})"
    if stop_reason == "ceiling":
        return f"at or near the top (>= {level(prediction.lo, scale)})"
    if (stop_reason in ("score_precision", "min_information") and chance is not None
            and prediction.lo <= chance + 0.02):
        # stopped where more items cannot help and chance cannot be excluded
        return chance_reach(prediction.lo, prediction.hi, chance, scale, floor_word)
    return None


def with_stop_note(pred: ScorePrediction, stop_reason, chance, scale=None,
                   floor_word: str = "chance") -> ScorePrediction:
    note = stop_note(pred, stop_reason, chance, scale, floor_word)
    if note is None:
        return pred
    return replace(pred, warnings=(note, *pred.warnings),
                   flag="+".join(f for f in (str(stop_reason), pred.flag) if f))
