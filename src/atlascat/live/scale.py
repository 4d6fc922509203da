"""A run's scores on its metric's own scale: a bank folder's (``atlas build-bank --score-range
LO HI``) or the rating scale an ordinal bank's items share (a judge's 1-10).

The run store keeps every item score's credit on [0, 1] (the scale the bank is modelled on; an
ordinal item's rating r as (r - lowest) / (highest - lowest)); what a run gives back,
:class:`~atlascat.live.runner.RunResult`, ``results.json`` and ``atlas runs``, reads on the
metric's own scale: low + (high - low) x credit (:func:`on_metric_scale`), with the scale
named beside the numbers (``scale``: [low, high]). An ordinal item's score is stored as its
rating, already on the scale (:class:`MetricScale` ``rated``).
"""
from __future__ import annotations

from typing import NamedTuple

__all__ = ["SCALED_FIELDS", "MetricScale", "on_metric_scale", "stored_scale", "run_scales"]


class MetricScale(NamedTuple):
    """A metric's own scale, [low, high]; ``rated``: the run's item scores are ratings, already
    on it (only the sums and means, stored as credits on [0, 1], are mapped)."""

    low: float
    high: float
    rated: bool = False


#: a run row's item scores and means, stored on [0, 1], shown on a metric's own scale
SCALED_FIELDS = ("observed_score", "model_based_score")


def on_metric_scale(row: dict, scale, *, steps: bool = False) -> dict:
    """A run's row (``results.json``, ``--json``, :meth:`RunResult.to_dict`) on its metric
    ``scale`` (low, high, or a :class:`MetricScale`), as every other output reads it: each
    item score x (``scores``; ``steps``: the row is one step, its ``score``) as low + (high -
    low) x unless the scale is ``rated`` (ratings are on it already), the means
    (:data:`SCALED_FIELDS`) likewise, ``score_sum`` as the sum of the mapped scores, and
    ``scale`` added; the answers' scores, sum and mean to 15 significant digits (the
    mapping's float noise dropped: a recorded 58.82 reads 58.82, not 58.820000000000007).
    The store keeps [0, 1]; ``scale`` None: ``row`` as it is."""
    if scale is None:
        return row
    rated = bool(getattr(scale, "rated", False))
    lo, hi = (float(v) for v in tuple(scale)[:2])

    def on(v, digits=True):
        if v is None or v != v:
            return None
        x = lo + (hi - lo) * float(v)
        return _digits(x) if digits else x

    out = dict(row)
    if steps:
        if not rated:
            out["score"] = on(row.get("score"))
        return out
    for key in SCALED_FIELDS:
        if key in out:   # the model's expectation as computed (the prediction's model part)
            out[key] = on(out[key], key != "model_based_score")
    if "scores" in out and not rated:
        out["scores"] = [on(v) for v in out["scores"]]
    if out.get("score_sum") is not None and out.get("n_items"):
        out["score_sum"] = _digits(lo * int(out["n_items"])
                                   + (hi - lo) * float(out["score_sum"]))
    out["scale"] = [lo, hi]
    return out


def _digits(x: float) -> float:
    """``x`` to 15 significant digits (a sum or mean of scores, not its last bits' noise)."""
    return float(f"{x:.15g}")


def stored_scale(bank_ref) -> MetricScale | None:
    """The metric scale of the bank a bank reference names (a
    :class:`~atlascat.catalogue.bankref.BankRef`, or its stored text): a bank folder's
    (:func:`atlascat.bankdir.predict.metric_scale`), or the rating scale an ordinal bank
    file's items share (:meth:`~atlascat.irt.polybank.PolyBank.rating_scale`, ``rated``);
    else None: another bank, a suite, no reference, or a bank no longer readable (its scores
    are then given on [0, 1], said so by an absent ``scale``)."""
    if not bank_ref:
        return None
    from ..catalogue.bankref import BankRef
    from ..errors import AtlasError

    try:
        ref = bank_ref if isinstance(bank_ref, BankRef) else BankRef.parse(bank_ref)
        if ref.kind == "file":
            from .subjects import is_ordinal

            bank = ref.load()
            scale = bank.rating_scale() if is_ordinal(bank) else None
            return None if scale is None else MetricScale(*scale, rated=True)
        if ref.kind != "dir":
            return None
        from ..bankdir.predict import metric_scale

        scale = metric_scale(ref.folder())
        return None if scale is None else MetricScale(*scale)
    except (AtlasError, OSError):
        return None


def run_scales(predictions, bank_refs) -> list:
    """Each run's metric scale, given its prediction (:func:`~atlascat.live.service.predict_run`)
    and its stored bank reference: the prediction's ``scale``, else (a run not done, which has
    no prediction yet) its bank's (:func:`stored_scale`, read once per bank), so a stopped
    run's scores read on the same scale as a finished one's."""
    known: dict = {}
    out = []
    for pred, ref in zip(predictions, bank_refs):
        if pred:                      # done: its prediction names its scale (or none)
            out.append(pred.get("scale"))
            continue
        key = str(ref) if ref else ""
        if key not in known:
            known[key] = stored_scale(ref)
        out.append(known[key])
    return out
