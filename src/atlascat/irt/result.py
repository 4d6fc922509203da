"""What a calibration returns: :class:`CalibrationResult`."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .bank import ItemBank
from .criteria import CriteriaMixin

__all__ = ["CalibrationResult"]


@dataclass
class CalibrationResult(CriteriaMixin):
    """What a calibration produced (the estimator's fitted attributes, as a plain object).

    ``bank`` (ItemBank, or PolyBank for graded / GPCM items), ``loglik`` (marginal
    log-likelihood, without the priors), ``loglik_trace``, ``n_iter``, ``converged``,
    ``seconds``; ``theta`` and ``theta_se`` (EAP per subject, in the order of
    ``subject_ids``: mirt's ``fscores`` on the bank, N(0, 1) and 121 nodes on [-6, 6], as
    ``estimate_ability`` and ``atlas score`` give them, not the fit's grid; a multiple-group
    fit's under each group's prior);
    ``aic`` / ``bic`` / ``sabic`` / ``hq`` and :meth:`information_criteria`;
    :meth:`standard_errors` and :meth:`to_frame` (with ``se=True``); ``settings`` (what was
    chosen, ``settings["defaults"]`` with its warnings); ``groups`` (a multiple-group fit,
    :mod:`atlascat.irt.groups`: the reference group and each group's size, latent mean and SD
    on the bank's scale). :func:`atlascat.irt.compare.anova` compares results.
    """

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
    n_observations: float | None = None   # subjects (sum of pattern frequencies)
    n_parameters: int | None = None       # estimated parameters (mirt's count)
    se: object = None                     # :class:`atlascat.irt.se.StandardErrors` (se=True)
    g2: dict | None = None                # mirt's G2 on the pattern table (atlascat.irt.gsquare)
    groups: dict | None = None            # multiple-group fit: reference, means, SDs (irt.groups)

    def information_criteria(self) -> dict:
        """loglik, n_parameters, n_observations, aic, bic, sabic, hq
        (:func:`atlascat.irt.compare.information_criteria`, mirt's definitions)."""
        from .compare import information_criteria, n_parameters

        k = self.n_parameters
        if k is None and isinstance(getattr(self.bank, "params", None), np.ndarray):
            k = int(np.isfinite(self.bank.params).sum())      # ordinal: a1, d1..dk per item
        if k is None:
            k = n_parameters(self.model, len(self.bank))
        n = self.n_observations if self.n_observations is not None else len(self.subject_ids)
        return information_criteria(self.loglik, k, n)

    def _criteria(self) -> dict:
        """The information criteria for :meth:`to_dict` (none for a result that cannot have
        them: one subject, a model without a parameter count)."""
        from ..errors import ConfigError

        try:
            crit = self.information_criteria()
        except ConfigError:
            return {}
        return {k: v for k, v in crit.items() if k != "loglik"}


    def standard_errors(self, format: str = "mirt", scale: str | None = None):
        """The item parameters with their standard errors, ``item_id, <p>, <p>_se, ...``
        (the ``frame`` of :mod:`atlascat.irt.se`'s standard errors); needs ``se=True``."""
        from ..errors import ConfigError

        if self.se is None:
            raise ConfigError("this calibration has no standard errors; calibrate with se=True")
        return self.se.frame(format, scale)

    def bank_with_standard_errors(self, format: str | None = None):
        """The bank with each parameter's standard error in format ``format`` (default the
        bank's own: "ours" for 0/1 items, "mirt" for graded / GPCM ones) as ``<p>_se`` metadata
        columns (a Rasch fit's as the equivalent 1PL, as the bank is): what ``atlas calibrate
        --se --format FORMAT -o BANK`` writes; the bank itself without ``se=True``."""
        if self.se is None:
            return self.bank
        import pandas as pd

        from .polybank import PolyBank

        bank = self.bank
        poly = isinstance(bank, PolyBank)
        format = format or ("mirt" if poly else "ours")
        se = self.standard_errors(format, scale="standard").filter(like="_se").reset_index(
            drop=True)
        old = None if bank.metadata is None else bank.metadata.reset_index(drop=True)
        if poly:
            meta = se if old is None else pd.concat([se, old], axis=1)
            return PolyBank(bank.item_ids, bank.params, bank.kinds, bank.levels,
                            scales=bank.scales, metadata=meta)
        meta = se if old is None else pd.concat([old, se], axis=1)
        return type(bank)(bank.item_ids, *bank.params, metadata=meta, model=bank.model)

    def to_frame(self, format: str | None = None):
        """The item table, one row per item: ``bank.to_frame(format)`` (default the bank's
        format: "ours" ``item_id, a, b, c, u`` for 0/1 items, "mirt" for graded / GPCM), with
        ``<p>_se`` beside each estimated parameter when calibrated with ``se=True`` (mirt's
        ``coef(mod, printSE = TRUE)`` as one table; the file ``atlas calibrate --se`` writes)."""
        bank = self.bank_with_standard_errors(format)
        return bank.to_frame() if format is None else bank.to_frame(format)

    def __repr__(self) -> str:
        state = "converged" if self.converged else "not converged"
        drop = f", {len(self.dropped_items)} dropped" if len(self.dropped_items) else ""
        n_rows = len(self.subject_ids)
        n = self.n_observations
        subjects = (f"n_subjects={n:g} ({n_rows} patterns)"
                    if n is not None and abs(float(n) - n_rows) > 1e-9 else f"n_subjects={n_rows}")
        se = ", se" if self.se is not None else ""
        groups = (f", {len(self.groups['groups'])} groups (reference "
                  f"{self.groups['reference']!r})" if self.groups else "")
        return (f"CalibrationResult(model={self.model!r}, n_items={len(self.bank)}, "
                f"{subjects}{groups}, loglik={self.loglik:.4g}, "
                f"n_iter={self.n_iter}, {state}{drop}{se}, {self.seconds:.2g} s)")

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
            **self._criteria(),
            **(self.g2 or {}),
            "dropped_items": [str(i) for i in self.dropped_items],
            "settings": self.settings,
            "loglik_trace": [float(v) for v in self.loglik_trace],
        }
        if self.se is not None:
            out["standard_errors"] = {
                "method": "Oakes observed information" + (
                    " of the log-posterior (posterior mode)" if self.se.posterior_mode else ""),
                "positive_definite": bool(self.se.info.positive_definite),
                "latent_variance_se": self.se.latent_variance_se}
        if self.groups is not None:
            out["groups"] = self.groups
        if self.filter_report is not None:
            out["filtering"] = self.filter_report.to_dict()
        if self.partitions is not None:
            out["partitions"] = [{"n_items": len(p), **lk} for p, lk in zip(self.partitions, self.linking)]
        return out
