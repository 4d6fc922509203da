"""The information criteria of a fit as properties (``aic``, ``bic``, ``sabic``, ``hq``), for any
result with an ``information_criteria()`` method (:func:`atlascat.irt.compare.information_criteria`:
mirt's definitions, l the log-likelihood, k the estimated parameters, N the subjects)."""
from __future__ import annotations


class CriteriaMixin:
    """``aic``, ``bic``, ``sabic``, ``hq`` read from ``self.information_criteria()``."""

    @property
    def aic(self) -> float:
        """AIC = -2 l + 2 k (Akaike, 1974): l the log-likelihood, k the number of estimated
        parameters (mirt's count, ``n_parameters``)."""
        return self.information_criteria()["aic"]

    @property
    def bic(self) -> float:
        """BIC = -2 l + k ln N (Schwarz, 1978), N the number of subjects (pattern
        frequencies summed)."""
        return self.information_criteria()["bic"]

    @property
    def sabic(self) -> float:
        """Sample-size adjusted BIC = -2 l + k ln((N + 2) / 24) (Sclove, 1987)."""
        return self.information_criteria()["sabic"]

    @property
    def hq(self) -> float:
        """Hannan-Quinn criterion = -2 l + 2 k ln ln N (Hannan and Quinn, 1979)."""
        return self.information_criteria()["hq"]
