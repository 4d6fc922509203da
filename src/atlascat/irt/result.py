"""What a calibration returns: :class:`CalibrationResult`."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .bank import ItemBank

__all__ = ["CalibrationResult"]


@dataclass
class CalibrationResult:
    """What a calibration produced (the estimator's fitted attributes, as a plain object)."""

    bank: ItemBank
    model: str
    loglik: float
    loglik_trace: np.ndarray
    n_iter: int
    converged: bool
    seconds: float
    theta: np.ndarray
    theta_se: np.ndarray
    subject_ids: np.ndarray
    latent_variance: float = 1.0
    log_posterior: float | None = None
    dropped_items: list = field(default_factory=list)
    filter_report: object = None
    partitions: list | None = None
    linking: list | None = None
    settings: dict = field(default_factory=dict)

    def __repr__(self) -> str:
        state = "converged" if self.converged else "NOT converged"
        drop = f", {len(self.dropped_items)} dropped" if len(self.dropped_items) else ""
        return (f"CalibrationResult(model={self.model!r}, n_items={len(self.bank)}, "
                f"n_subjects={len(self.subject_ids)}, loglik={self.loglik:.4g}, "
                f"n_iter={self.n_iter} {state}{drop}, {self.seconds:.2g} s)")

    def to_dict(self) -> dict:
        """JSON-ready summary (no per-subject arrays)."""
        out = {
            "model": self.model,
            "n_items": len(self.bank),
            "n_subjects": int(len(self.subject_ids)),
            "loglik": self.loglik,
            "log_posterior": self.log_posterior,
            "n_iter": int(self.n_iter),
            "converged": bool(self.converged),
            "seconds": round(float(self.seconds), 3),
            "latent_variance": self.latent_variance,
            "dropped_items": [str(i) for i in self.dropped_items],
            "settings": self.settings,
            "loglik_trace": [float(v) for v in self.loglik_trace],
        }
        if self.filter_report is not None:
            out["filtering"] = self.filter_report.to_dict()
        if self.partitions is not None:
            out["partitions"] = [{"n_items": len(p), **lk} for p, lk in zip(self.partitions, self.linking)]
        return out
