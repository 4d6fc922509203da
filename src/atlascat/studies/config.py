"""The settings of a benchmark study (:class:`BenchmarkConfig`), light enough for the CLI to
read its defaults without importing the study's code (:mod:`atlascat.studies.protocol`)."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import ConfigError
from ..irt.defaults import MODELS, QUADPTS, THETA_RANGE
from ..validation import N_BINS, TEST_SIZE

__all__ = ["BenchmarkConfig"]


@dataclass
class BenchmarkConfig:
    """Settings of :func:`run_benchmark` (all stored in ``run.json``).

    Parameters
    ----------
    seed : master seed; the split, calibration, baselines and CAT draw from one Generator
    test_size, n_bins : stratified split (share of test models, score bins)
    filter : apply the paper's item filter to the train matrix before calibration
    model, calibrate_options : IRT model ("bic", or any model of ``calibrate``: "auto" is
        its default for the data's size) and extra keyword arguments of ``calibrate``. "bic"
        fits every model of ``model_candidates`` on the train answers and keeps the one with
        the smallest BIC (:func:`select_model`)
    model_candidates : the models "bic" chooses among
    se_calibration, validation_size : estimate the CAT's SE scale factor per tau on a
        validation split (this share) of the train models (:func:`validation_se_factors`);
        the persons table then carries ``se_calibrated`` and the summary ``coverage_calibrated``
    taus : CAT SE thresholds
    cat_options : extra ``CATConfig`` fields (e.g. ``{"se_method": "posterior"}``)
    random_k, random_replicates : Random-k size and number of replicate draws (the IES reference)
    anchor_k, info_k : sizes of the anchor-point and information forms (every form size is capped
        at the bank size, and the method label carries the size actually used)
    optimal_k, optimal_criteria : size and criteria of the greedy optimal forms (empty: none)
    optimal_exchange : run the exchange pass after the greedy optimal-form phase
    quadpts, theta_range : EAP settings for every fixed form (and the prior N(0, 1))
    example_models : how many test models get a stored theta +- SE trajectory per CAT method
    model_fit, fit_partition_size : M2 / RMSEA / SRMSR / CFI / TLI of the bank on the train
        models, averaged over item partitions of about this size (the paper's procedure)
    """

    seed: int = 0
    test_size: float = TEST_SIZE
    n_bins: int = N_BINS
    filter: bool = True
    model: str = "bic"
    calibrate_options: dict = field(default_factory=dict)
    model_candidates: tuple = ("2pl", "3pl")
    se_calibration: bool = True
    validation_size: float = 0.2
    taus: tuple = (0.1, 0.2, 0.3)
    cat_options: dict = field(default_factory=dict)
    random_k: int = 100
    random_replicates: int = 10
    anchor_k: int = 100
    info_k: int = 100
    optimal_k: int = 100
    optimal_criteria: tuple = ("D", "A", "E")
    optimal_exchange: bool = False
    quadpts: int = QUADPTS
    theta_range: tuple = THETA_RANGE
    example_models: int = 3
    model_fit: bool = True
    fit_partition_size: int = 100

    def __post_init__(self):
        self.taus = tuple(float(t) for t in self.taus)
        self.optimal_criteria = tuple(str(c).upper() for c in self.optimal_criteria)
        self.theta_range = tuple(float(t) for t in self.theta_range)
        self.model = str(self.model).lower()
        self.model_candidates = tuple(str(m).lower() for m in self.model_candidates)
        known = MODELS + ("auto", "bic")
        unknown = [m for m in (self.model, *self.model_candidates) if m not in known]
        bad = [m for m in self.model_candidates if m in ("auto", "bic")]
        if unknown or bad:
            raise ConfigError(f"unknown IRT model(s) {unknown or bad}; use 'bic', 'auto' or one of "
                              f"{', '.join(MODELS)} (candidates of 'bic': models only)")
        if self.model == "bic" and not self.model_candidates:
            raise ConfigError("model='bic' needs at least one model in model_candidates")
        if not 0.0 < float(self.validation_size) < 1.0:
            raise ConfigError(f"validation_size must be in (0, 1), got {self.validation_size}")
        if not self.taus and not (self.random_k or self.anchor_k or self.info_k):
            raise ConfigError("nothing to compare: give at least one tau or one baseline")
        if not all(abs(t) < float("inf") for t in self.taus):   # NaN too
            raise ConfigError("CAT SE thresholds must be finite numbers, got "
                              + ", ".join(f"{t:g}" for t in self.taus))
        if any(t <= 0 for t in self.taus):
            raise ConfigError("CAT SE thresholds must be positive, got " + ", ".join(f"{t:g}" for t in self.taus))
        bad = [c for c in self.optimal_criteria if c not in ("D", "A", "E")]
        if bad:
            raise ConfigError(f"unknown optimal-form criteria {bad}; use D, A, E")
        for name in ("random_k", "anchor_k", "info_k", "optimal_k"):
            if int(getattr(self, name)) < 0:
                raise ConfigError(f"{name} must be >= 0 (0 switches the method off)")
        if int(self.random_replicates) < 1:
            raise ConfigError(f"random_replicates must be >= 1, got {self.random_replicates} "
                              "(random_k 0 switches Random-k off)")
        if int(self.random_replicates) > 10_000:   # past it: hours of scoring, no new answer
            raise ConfigError(f"random_replicates must be at most 10000, got "
                              f"{self.random_replicates}")
