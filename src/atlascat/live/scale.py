"""A run's scores on a bank folder's metric scale (``atlas build-bank --score-range LO HI``).

The run store keeps every item score on [0, 1] (the scale the bank is modelled on); what a run
gives back, :class:`~atlascat.live.runner.RunResult`, ``results.json`` and ``atlas runs``, reads
on the metric's own scale: low + (high - low) x score (:func:`on_metric_scale`), with the scale
named beside the numbers (``scale``: [low, high]).
"""
from __future__ import annotations

__all__ = ["SCALED_FIELDS", "on_metric_scale", "stored_scale"]

#: a run row's item scores and means, stored on [0, 1], shown on a metric's own scale
SCALED_FIELDS = ("observed_score", "model_based_score")


def on_metric_scale(row: dict, scale, *, steps: bool = False) -> dict:
    """A run's row (``results.json``, ``--json``, :meth:`RunResult.to_dict`) on a bank folder's
    metric ``scale`` (low, high; ``atlas build-bank --score-range``), as every other output
    reads it: each item score x (``scores``; ``steps``: the row is one step, its ``score``) as
    low + (high - low) x, the means (:data:`SCALED_FIELDS`) likewise, ``score_sum`` as the sum
    of the mapped scores, and ``scale`` added. The store keeps [0, 1]; ``scale`` None: ``row``
    as it is."""
    if scale is None:
        return row
    lo, hi = (float(v) for v in scale)

    def on(v):
        return None if v is None or v != v else lo + (hi - lo) * float(v)

    out = dict(row)
    if steps:
        out["score"] = on(row.get("score"))
        return out
    for key in SCALED_FIELDS:
        if key in out:
            out[key] = on(out[key])
    if "scores" in out:
        out["scores"] = [on(v) for v in out["scores"]]
    if out.get("score_sum") is not None and out.get("n_items"):
        out["score_sum"] = lo * int(out["n_items"]) + (hi - lo) * float(out["score_sum"])
    out["scale"] = [lo, hi]
    return out


def stored_scale(bank_ref) -> tuple[float, float] | None:
    """(low, high) of the metric scale of the bank folder a bank reference names (a
    :class:`~atlascat.catalogue.bankref.BankRef`, or its stored text;
    :func:`atlascat.bankdir.predict.metric_scale`), else None: another bank, a suite, no
    reference, or a folder no longer readable (its scores are then given on [0, 1], said so
    by an absent ``scale``)."""
    if not bank_ref:
        return None
    from ..catalogue.bankref import BankRef
    from ..errors import AtlasError

    try:
        ref = bank_ref if isinstance(bank_ref, BankRef) else BankRef.parse(bank_ref)
        if ref.kind != "dir":
            return None
        from ..bankdir.predict import metric_scale

        return metric_scale(ref.folder())
    except (AtlasError, OSError):
        return None
