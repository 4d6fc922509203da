"""Item calibration by marginal maximum likelihood with the EM algorithm (Bock and Aitkin, 1981).

Model (as mirt, no 1.702 scaling), slope-intercept form used internally::

    P_j(theta) = c_j + (u_j - c_j) sigma(a_j theta + d_j),   b_j = -d_j / a_j,
    theta ~ N(0, 1)   (Rasch: a_j = 1 and theta ~ N(0, sigma^2) with sigma^2 estimated).

This module is the driver: settings, input checks, defaults, the result. The pieces live in
rooms of their own, each documented with its formulas:

* :mod:`atlascat.irt.itemmodel` - internal parameters, node log-probabilities, priors and the
  exact derivatives of the complete-data objective;
* :mod:`atlascat.irt.estep` - the E-step over the quadrature grid (also EAP scoring's kernel)
  and :func:`marginal_loglik`;
* :mod:`atlascat.irt.mstep` - the batched Newton / Fisher-scoring M-step with line search;
* :mod:`atlascat.irt.start` - classical starting values (Lord and Novick, 1968);
* :mod:`atlascat.irt.squarem` - SQUAREM acceleration (Varadhan and Roland, 2008);
* :mod:`atlascat.irt.em` - the EM loop, convergence (mirt's rule) and the float32 -> float64
  switch;
* :mod:`atlascat.irt.partitioned` - partitioned calibration (the ATLAS paper, appendix C.2).

Every kernel is written against the Python array API standard (:mod:`atlascat.irt.arrays`), so
NumPy (default), PyTorch and CuPy arrays run the same code (``device="cuda"``).

References
----------
Bock, R. D. and Aitkin, M. (1981). Marginal maximum likelihood estimation of item parameters:
application of an EM algorithm. Psychometrika 46, 443-459.
Mislevy, R. J. (1986). Bayes modal estimation in item response models. Psychometrika 51, 177-195.
Varadhan, R. and Roland, C. (2008). Simple and globally convergent methods for accelerating the
convergence of any EM algorithm. Scandinavian Journal of Statistics 35, 335-353.
Chalmers, R. P. (2012). mirt: A multidimensional item response theory package for the R
environment. Journal of Statistical Software 48(6).
"""
from __future__ import annotations

import time

import numpy as np

from ..errors import ConfigError, ResponseDataError, warn_user
from . import arrays
from .colstats import binary_counts
from .dimensionality import record as record_dimensionality
from .dispersion import with_dispersion
from .defaults import (AUTO, CONVERGENCE, LINK, MAX_ITER, MODELS, QUADPTS, THETA_RANGE, TOL,
                       IdentificationWarning, is_auto, resolve as resolve_defaults)
from .em import fit_joint
from .estep import marginal_loglik
from .itemmodel import ItemModel, at_bounds, to_bank
from .compare import n_parameters
from .partitioned import fit_partitioned
from .priors import parse_prior
from .result import CalibrationResult

# the kernels' former private names the tests still reach through this module
from .estep import plan_blocks as _plan_blocks  # noqa: F401
from .itemmodel import UC_GAP as _UC_GAP  # noqa: F401
from .itemmodel import ItemModel as _ItemModel, prior_terms as _prior_terms  # noqa: F401
from .mstep import line_search_host as _line_search_host  # noqa: F401
from .mstep import line_search_masked as _line_search_masked, mstep as _mstep  # noqa: F401
from .start import start_values as _start_values  # noqa: F401

__all__ = ["MODELS", "CalibrationResult", "Calibrator", "calibrate", "marginal_loglik"]

ORDINAL = ("graded", "gpcm", "pcm")   # ordinal items: atlascat.irt.polycal
LINKS = ("mean-sigma", "mean-mean")


# ====================================================================== estimator


class Calibrator:
    """Marginal maximum likelihood (MAP with priors) item calibration, scikit-learn style.

    Parameters
    ----------
    model : "auto" (default) | "rasch" | "1pl" | "2pl" | "3pl" | "4pl" | "graded" | "gpcm" |
        "pcm" ("graded" / "gpcm" / "pcm", the partial credit model, mirt's "Rasch" of ratings:
        ordinal ratings on any integer scale, :mod:`atlascat.irt.polycal`; the bank is a
        :class:`atlascat.irt.polybank.PolyBank`; ``value_range=(lo, hi)`` declares the
        ratings' range)
        "auto" chooses the model from the number of subjects (:mod:`atlascat.irt.defaults`:
        2PL below 500 subjects, 3PL below 1000, else 4PL) and says which and why (a warning, and
        ``result_.settings["defaults"]``).
        "rasch" is mirt's Rasch: slopes fixed at 1 and the latent variance sigma^2 estimated
        (``latent_variance_``); the bank and the thetas are that fit on the N(0, 1) scale every
        reader of a bank assumes: common slope a = sigma, b = -d / sigma, theta / sigma (what
        "1pl" fits).
    quadpts, theta_range : quadrature grid (61 nodes on [-6, 6], mirt's default)
    prior_a, prior_c : "auto" (default: the held-out winner's weak priors for the chosen model,
        e.g. a 2PL's a ~ lognorm(0,1)), None for no prior (mirt), or a prior (spec string or
        object from :mod:`atlascat.irt.priors`), e.g. ``prior_c="beta(5,17)"``
    prior_u : prior on the 4PL's upper asymptote u (a beta or logit-normal density on u, as for
        c), e.g. ``"beta(17,5)"``; "auto" (default) is the 4PL's measured prior beta(10,2)
        (none under ``mirt_defaults``), None is no prior. Whatever
        the prior, the 4PL's EM keeps u - c >= 1e-6 on every item (M-step line search,
        SQUAREM extrapolations and start values), so the bank's c < u always holds.
    mirt_defaults : True resolves "auto" to the paper's mirt fit (3PL, no priors) for parity
        (mirt's own default itemtype is the 2PL: model="2pl", prior_a=None)
    max_iter, tol : EM iteration cap (1000; mirt's is 500, but banks with many near-degenerate
        items need more) and convergence tolerance (max abs internal parameter change, 1e-4)
    accelerate : use SQUAREM (default True)
    partition_size : None for joint calibration, else partitioned calibration with partitions of
        at least this many items
    link : "mean-sigma" (default) or "mean-mean", for partitioned calibration
    filter : apply :func:`atlascat.filtering.filter_items` before calibrating (default False;
        ``atlas calibrate`` uses the same default, ``--filter`` turns it on)
    dtype : "float64" (default) or "float32" for the large matrix products of the E-step
        (everything else, the M-step included, runs in float64). float32 E-steps run while
        they make progress; once their rounding noise dominates (the log-likelihood falls, or
        gains less than 1e-5 per subject over 10 iterations) the EM finishes in float64, so
        the result meets the same stopping rule as a float64 fit
        (``settings["float32_iterations"]`` says how many ran in float32)
    device : "cpu" (NumPy, default) or "cuda" (PyTorch, else CuPy, through array_api_compat):
        where the EM runs; the data is moved there once and the loop reads back one small
        vector per iteration
    memory_limit : bytes the E-step may use on the device (default: no bound on the CPU, 80%
        of the free memory on a GPU); larger data is processed in blocks of subjects
    random_state : seed or numpy Generator (partition assignment)
    dispersion : None (default: every score through the Bernoulli quasi-likelihood), "auto"
        (scores in [0, 1] that are not all 0/1: a second EM with each item's E-step term
        divided by its dispersion phi_j, the extended quasi-likelihood, which keeps the
        slopes of continuous scores from coming out 10-20% low; :mod:`atlascat.irt.dispersion`;
        joint calibration only) or one phi per item. The bank then carries phi_j in its
        metadata column ``dispersion``, which the adaptive test reads (0/1 answers: no column)
    callback : optional callable ``callback(info: dict)`` called after every recorded EM
        iteration with keys ``iteration``, ``loglik``, ``max_change``, ``worst_item`` (the item
        with the largest change), ``partition``, ``n_partitions``
    max_newton : Newton iterations per M-step
    start : optional ItemBank holding starting values for (some of) the items (warm start)
    convergence : "params" (mirt's rule: largest internal parameter change < tol) or "icc"
        (largest change of any item characteristic curve on the grid < tol)
    se : also compute the item parameters' standard errors from the observed information
        (Oakes, 1999; mirt's ``SE = TRUE``; :mod:`atlascat.irt.se`), in ``result_.se`` and
        ``result_.standard_errors()``; joint calibration only
    check_dimensions : check that the items measure one thing (random answers, or a second
        trait: :mod:`atlascat.irt.dimensionality`), kept in ``settings["dimensionality"]``
        and said in the warnings; False for a fit whose verdict is not read (a cross-fitting
        fold, a candidate model)

    Fitted attributes
    -----------------
    bank_, loglik_, loglik_trace_, n_iter_, converged_, seconds_, latent_variance_, theta_,
    theta_se_, dropped_items_, filter_report_, defaults_ (the resolved model, priors, reason and
    warnings), result_ (a :class:`CalibrationResult`).
    """

    def __init__(self, model: str = AUTO, *, quadpts: int = QUADPTS, theta_range=THETA_RANGE,
                 prior_a=AUTO, prior_c=AUTO, prior_u=AUTO, max_iter: int = MAX_ITER,
                 tol: float = TOL, accelerate: bool = True, partition_size: int | None = None,
                 link: str = LINK, filter: bool = False, dtype: str = "float64",
                 random_state=None, callback=None, max_newton: int = 8, start=None,
                 convergence: str = CONVERGENCE, mirt_defaults: bool = False, device="cpu",
                 memory_limit: float | None = None, value_range=None, se: bool = False,
                 dispersion=None, check_dimensions: bool = True):
        self.model = model
        self.value_range = value_range
        self.mirt_defaults = mirt_defaults
        self.quadpts = quadpts
        self.theta_range = theta_range
        self.prior_a = prior_a
        self.prior_c = prior_c
        self.prior_u = prior_u
        self.max_iter = max_iter
        self.tol = tol
        self.accelerate = accelerate
        self.partition_size = partition_size
        self.link = link
        self.filter = filter
        self.dtype = dtype
        self.random_state = random_state
        self.callback = callback
        self.max_newton = max_newton
        self.start = start
        self.convergence = convergence
        self.device = device
        self.memory_limit = memory_limit
        self.se = se
        self.dispersion = dispersion
        self.check_dimensions = check_dimensions

    def get_params(self, deep: bool = True) -> dict:
        """The ``__init__`` settings as a dict (scikit-learn's ``get_params``; ``deep`` is
        accepted for its ``clone`` and has nothing nested to expand)."""
        from .._repr import get_settings

        return get_settings(self)

    def set_params(self, **params) -> "Calibrator":
        """Change settings in place and return ``self`` (scikit-learn's ``set_params``); the
        next :meth:`fit` uses them."""
        from .._repr import set_settings

        return set_settings(self, params)

    def __getattr__(self, name):
        # only reached when normal lookup fails: a fitted attribute read before fit
        if name.endswith("_") and not name.startswith("_"):
            from ..errors import NotFittedError

            raise NotFittedError(f"this Calibrator is not fitted, so it has no {name!r}; call "
                                 "fit(responses) first")
        raise AttributeError(f"'Calibrator' object has no attribute {name!r}")

    def __repr__(self) -> str:
        """The settings that differ from the defaults, as scikit-learn shows an estimator."""
        from .._repr import changed_settings

        return f"Calibrator({changed_settings(self)})"

    # ------------------------------------------------------------------ validation
    def check_settings(self, choice=None):
        """The settings checked (a ConfigError of one line on the first bad one) before any
        data is read; returns (model, prior_a, prior_c, prior_u) with the priors parsed.
        ``choice``: the model and priors resolved from the data (:mod:`atlascat.irt.defaults`);
        without it "auto" stays unresolved and the rest is checked."""
        model = str(self.model if choice is None else choice.model).lower()
        pa, pc, pu = ((self.prior_a, self.prior_c, self.prior_u) if choice is None
                      else (choice.prior_a, choice.prior_c, choice.prior_u))
        if choice is None and (is_auto(model) or is_auto(pa) or is_auto(pc) or is_auto(pu)):
            pa, pc = (None if is_auto(pa) else pa), (None if is_auto(pc) else pc)
            pu = None if is_auto(pu) else pu
            if is_auto(model):
                model = "3pl"      # validate the rest; the model is chosen in fit
        from ..validation import check_finite

        for name in ("quadpts", "max_iter", "tol", "max_newton"):
            check_finite(getattr(self, name), name)   # text or NaN: a ConfigError naming it
        try:
            np.random.default_rng(self.random_state)   # a Generator is returned as it is
        except (TypeError, ValueError):
            raise ConfigError(f"random_state must be a seed (whole number >= 0), a numpy "
                              f"Generator or None, got {self.random_state!r}") from None
        if model in ORDINAL:
            return self._check_ordinal(model, pa, pc, pu)
        if model not in MODELS:
            raise ConfigError(f"unknown model {self.model!r}; choose one of "
                              f"{', '.join(MODELS + ORDINAL)}")
        if int(self.quadpts) < 5:
            raise ConfigError(f"quadpts must be at least 5, got {self.quadpts}")
        if not int(self.max_iter) >= 1:
            raise ConfigError(f"max_iter must be >= 1, got {self.max_iter}")
        if not float(self.tol) > 0:
            raise ConfigError(f"tol must be positive, got {self.tol}")
        from .bank import ItemBank

        if self.start is not None and not isinstance(self.start, ItemBank):
            raise ConfigError(f"start must be an ItemBank (ItemBank.read reads a bank file), not "
                              f"a {type(self.start).__name__}")
        if self.link not in LINKS:
            raise ConfigError(f"unknown link {self.link!r}; choose one of {', '.join(LINKS)}")
        if self.convergence not in ("params", "icc"):
            raise ConfigError(f"convergence must be 'params' or 'icc', not {self.convergence!r}")
        if self.dtype not in ("float64", "float32"):
            raise ConfigError(f"dtype must be 'float64' or 'float32', got {self.dtype!r}")
        arrays.backend_for(self.device)  # unknown device / missing GPU library -> ConfigError
        if self.memory_limit is not None and not float(self.memory_limit) > 0:
            raise ConfigError(f"memory_limit must be a positive number of bytes, got "
                              f"{self.memory_limit!r}")
        if self.partition_size is not None:
            if int(self.partition_size) < 2:
                raise ConfigError(f"partition_size must be >= 2, got {self.partition_size}")
            if self.dispersion is not None:
                raise ConfigError("dispersion needs a joint calibration (one likelihood's "
                                  "residuals per item); drop partition_size or dispersion")
            if self.se:
                raise ConfigError("standard errors need a joint calibration (the observed "
                                  "information of one likelihood); drop partition_size "
                                  "(--partition-size) or se (--se)")
            if model == "rasch":
                raise ConfigError(
                    "partitioned calibration links partitions on the N(0, 1) scale; use model "
                    "'1pl' (the same fit with a common slope) instead of 'rasch'"
                )
        prior_a = parse_prior(None if pa == "none" else pa, "a")
        prior_c = parse_prior(None if pc == "none" else pc, "c")
        prior_u = parse_prior(None if pu == "none" else pu, "c")  # beta / logitnorm, as c
        if prior_a is not None and model in ("rasch", "1pl"):
            raise ConfigError(f"a prior on the slope needs a 2PL/3PL/4PL model, not {model!r}")
        if prior_c is not None and model not in ("3pl", "4pl"):
            raise ConfigError(f"a prior on c needs a 3PL or 4PL model, not {model!r}")
        if prior_u is not None and model != "4pl":
            raise ConfigError(f"a prior on u needs the 4PL model, not {model!r}; drop prior_u "
                              "(CLI --prior-u) or pass model='4pl'")
        return model, prior_a, prior_c, prior_u

    def _check_ordinal(self, model, pa, pc, pu):
        """Settings of a graded / gpcm / pcm fit: a slope prior only, no partitions."""
        for name, v in (("prior_c", pc), ("prior_u", pu)):
            if v not in (None, "auto", "none"):
                raise ConfigError(f"{name} needs a 3PL or 4PL model, not {model!r}; the ordinal "
                                  "models take a slope prior only (prior_a)")
        binary_only = {"partition_size": self.partition_size is not None,
                       "filter": bool(self.filter), "dtype": self.dtype != "float64",
                       "device": str(self.device).lower() != "cpu",
                       "convergence": self.convergence != "params"}
        given = [k for k, on in binary_only.items() if on]
        if given:
            raise ConfigError(f"{', '.join(given)} set for model {model!r}: these settings are "
                              "the binary models'; the ordinal EM runs on the CPU in float64, "
                              "unfiltered, jointly, with mirt's rule on the parameters")
        if int(self.quadpts) < 5 or not float(self.tol) > 0 or not int(self.max_iter) >= 1:
            raise ConfigError("quadpts >= 5, tol > 0 and max_iter >= 1 are needed")
        prior_a = parse_prior(None if pa in (None, "none", "auto") else pa, "a")
        return model, prior_a, None, None

    def _fit_ordinal(self, responses, weights, se_callback=None, grouping=(None, None)):
        from .polycal import calibrate_ordinal

        model, prior_a, _, _ = self.check_settings()
        res = calibrate_ordinal(responses, model, weights=weights, prior_a=prior_a,
                                value_range=self.value_range, quadpts=int(self.quadpts),
                                theta_range=self.theta_range, max_iter=int(self.max_iter),
                                tol=float(self.tol), accelerate=self.accelerate,
                                max_newton=self.max_newton, callback=self.callback,
                                start=self.start, se=self.se, se_callback=se_callback,
                                check_dimensions=self.check_dimensions, groups=grouping[0],
                                reference_group=grouping[1])
        self.result_, self.bank_, self.loglik_ = res, res.bank, res.loglik
        self.loglik_trace_, self.n_iter_, self.converged_ = res.loglik_trace, res.n_iter, \
            res.converged
        self.seconds_, self.latent_variance_ = res.seconds, res.latent_variance
        self.theta_, self.theta_se_ = res.theta, res.theta_se
        self.dropped_items_, self.filter_report_, self.defaults_ = [], None, None
        return self

    # ------------------------------------------------------------------ fit
    def fit(self, responses, weights=None, se_callback=None, *, groups=None,
            reference_group=None):
        """Calibrate on a ResponseMatrix (or an array, NaN = missing) and set the fitted attributes.
        ``se_callback(done, total)``: with ``se=True``, called as the standard errors' observed
        information is computed (columns done of all; :mod:`atlascat.irt.information`).
        ``groups``: each subject's group (a mapping subject id -> group, or one label per
        subject in their order) for a multiple-group calibration (:mod:`atlascat.irt.groups`:
        shared items, the ``reference_group``'s trait N(0, 1), every other group's mean and SD
        estimated; ``result_.groups``); the binary models (joint calibration) and graded /
        gpcm / pcm (pcm as Rasch: the reference group's variance estimated too; with
        ``se=True`` the groups' means and variances get standard errors too,
        :mod:`atlascat.irt.groupse`)."""
        from .._blas import small_products
        from .._heap import retained_heap

        # the EM's temporaries reuse freed memory (atlascat._heap); its products are small
        # for BLAS threads except a large joint E-step's (atlascat._blas)
        if groups is None and reference_group is not None:
            raise ConfigError("reference_group needs groups (each subject's group)")
        if str(self.model).lower() in ORDINAL:
            return self._fit_ordinal(responses, weights, se_callback, (groups, reference_group))
        with retained_heap(), small_products():
            return self._fit(responses, weights, se_callback, (groups, reference_group))

    def _fit(self, responses, weights=None, se_callback=None, grouping=(None, None)):
        from ..responses import ResponseMatrix

        from ..responses import as_labelled_responses
        from ..validation import check_identified, check_subjects

        start = time.perf_counter()
        model, prior_a, prior_c, prior_u = self.check_settings()
        # all-missing rows and columns dropped below, after the groups are matched to the
        # subjects given (a group label per subject stays with its subject)
        responses = as_labelled_responses(responses, on_empty="keep")  # DataFrames keep labels
        if not isinstance(responses, ResponseMatrix):
            arr = responses if isinstance(responses, np.ndarray) else \
                np.asarray(responses, dtype=object)
            if arr.ndim != 2:
                raise ResponseDataError(f"responses must be 2-D (subjects x items), got shape {arr.shape}")
            responses = ResponseMatrix(arr, weights=weights, on_empty="keep")
        elif weights is not None:
            responses = ResponseMatrix(responses.values, responses.subject_ids, responses.item_ids,
                                       weights=weights, on_empty="keep")
        group_map = self._group_map(grouping[0], responses.subject_ids)
        observed = ~np.isnan(responses.values)
        if not (observed.any(axis=0).all() and observed.any(axis=1).all()):
            # a matrix read with on_empty="keep": an item nobody answered has no parameters to
            # fit, a subject without answers adds to BIC's n only; dropped with a warning, as
            # from an array or DataFrame
            responses = ResponseMatrix(responses, on_empty="drop")
        check_subjects(responses.n_subjects)
        report = None
        if self.filter:
            from ..filtering import filter_items

            responses, report = filter_items(responses)
        if group_map is not None:
            from .groups import group_labels

            group_set = group_labels(group_map, responses.subject_ids, grouping[1])
        values = responses.values
        item_ids = responses.item_ids
        # 0/1 answers: their counts, in one pass, shared by the checks and the start values
        counts = binary_counts(values)
        # NaN-ignoring column extremes, no temporaries (every column has a response)
        constant = counts.constant() if counts is not None else \
            np.fmin.reduce(values, axis=0) == np.fmax.reduce(values, axis=0)
        dropped = [str(i) for i in item_ids[constant]]
        if dropped:
            warn_user(
                f"{len(dropped)} item(s) have the same response from every subject who saw them "
                f"(their MLE is at infinity) and were left out: {dropped[:10]}")
            counts = None if counts is None else counts.without(constant, values)
            values = np.take(values, np.flatnonzero(~constant), axis=1)  # 4x boolean indexing
            item_ids = item_ids[~constant]
        if values.shape[1] == 0:
            raise ResponseDataError("no item with variation in its responses is left to calibrate")
        check_identified(values, model)  # e.g. one item under a 2PL: refuse, never "converge"
        w = responses.weights
        # a GPU's EM leaves the host's cores idle: the fingerprint is hashed meanwhile
        fingerprint = _in_background(_fingerprint, values, w, item_ids) \
            if str(self.device).lower().startswith("cuda") else None
        choice = resolve_defaults(self.model, self.prior_a, self.prior_c, values, w,
                                  mirt_defaults=self.mirt_defaults, stacklevel=4,
                                  prior_u=self.prior_u, counts=counts)
        model, prior_a, prior_c, prior_u = self.check_settings(choice)
        self.defaults_ = choice
        rng = self.random_state if isinstance(self.random_state, np.random.Generator) \
            else np.random.default_rng(self.random_state)
        item_model = ItemModel(model if model != "1pl" else "rasch", prior_a, prior_c, prior_u)
        settings = {"model": model, "quadpts": int(self.quadpts),
                    "theta_range": [float(v) for v in self.theta_range],
                    "prior_a": None if prior_a is None else str(prior_a),
                    "prior_c": None if prior_c is None else str(prior_c),
                    "prior_u": None if prior_u is None else str(prior_u),
                    "max_iter": int(self.max_iter), "tol": float(self.tol),
                    "accelerate": bool(self.accelerate), "partition_size": self.partition_size,
                    "link": self.link if self.partition_size else None, "dtype": self.dtype,
                    "defaults": choice.to_dict(), "device": str(self.device)}
        from .dispersion import is_binary

        if not is_binary(values):   # a quasi-likelihood: no likelihood-ratio test (anova)
            settings["scores"] = "continuous"
            if group_map is not None:
                raise ConfigError("groups need 0/1 answers; these scores are continuous")
        if self.se:   # refuse fractional scores before the EM, not after it
            from .information import category_indices
            category_indices(values)
        if group_map is not None:
            from .groups import group_result

            result = group_result(values, w, item_model, item_ids, model, group_set,
                                  self._em_settings(), start=self.start, counts=counts,
                                  se=self.se, se_callback=se_callback,
                                  subject_ids=responses.subject_ids, dropped_items=dropped,
                                  filter_report=report, settings=settings)
        elif self.partition_size is None or values.shape[1] < 2 * int(self.partition_size):
            fit = fit_joint(values, w, item_model, start_bank=self.start, item_ids=item_ids,
                            counts=counts, **self._em_settings())
            # Rasch and 1PL: the bank on the N(0, 1) scale every reader of a bank assumes
            # (common slope sqrt(latent variance)), thetas on the same scale
            bank = to_bank(item_ids, fit["th"], item_model,
                           "1pl" if model == "rasch" else model, fit["var"])
            phi = self._dispersion(values, bank)
            if phi is not None:       # continuous scores: the extended quasi-likelihood
                fit = fit_joint(values, w, item_model, start_bank=bank, item_ids=item_ids,
                                item_scale=1.0 / phi, **self._em_settings())
                bank = to_bank(item_ids, fit["th"], item_model,
                               "1pl" if model == "rasch" else model, fit["var"])
                settings["dispersion"] = [round(float(v), 4) for v in phi]
                bank = with_dispersion(bank, phi)
            if self.dtype == "float32":  # iterations before the float64 finish
                settings["float32_iterations"] = fit["float32_iterations"]
            if model in ("rasch", "1pl"):
                sd = np.sqrt(fit["var"])
                fit["theta"], fit["theta_se"] = fit["theta"] / sd, fit["theta_se"] / sd
            result = CalibrationResult(
                bank=bank, model=model, loglik=fit["loglik"], loglik_trace=fit["trace"],
                n_iter=fit["n_iter"], converged=fit["converged"], seconds=0.0,
                theta=fit["theta"], theta_se=fit["theta_se"], subject_ids=responses.subject_ids,
                latent_variance=fit["var"], log_posterior=fit["log_posterior"],
                dropped_items=dropped, filter_report=report, settings=settings)
            if self.se:
                result.se = _standard_errors(values, w, fit, item_model, item_ids, model,
                                             self.quadpts, self.theta_range, se_callback)
        else:
            result = fit_partitioned(values, w, item_ids, item_model, model, rng,
                                     partition_size=int(self.partition_size), link=self.link,
                                     **self._em_settings())
            result.subject_ids = responses.subject_ids
            result.dropped_items = dropped
            result.filter_report = report
            result.settings = settings
        if result.groups is None:   # a group's subjects are scored under its own prior
            # the subjects' scores as atlas score gives them on the bank (EAP, N(0, 1), 121
            # nodes on [-6, 6], its default quadrature); the fit's own grid is the EM's only
            from .ability import fscores

            result.theta, result.theta_se = fscores(values, result.bank, device=self.device,
                                                    memory_limit=self.memory_limit)
        result.n_observations = float(responses.n_subjects if w is None else np.sum(w))
        result.n_parameters = n_parameters(model, len(item_ids))
        if result.groups is not None:   # each other group's mean and variance
            result.n_parameters += 2 * (len(result.groups["groups"]) - 1)
        elif self.partition_size is None and settings.get("scores") != "continuous":
            result.g2 = _g2(values, w, result.bank, result.n_parameters, self.quadpts,
                            self.theta_range)
        bound = at_bounds(result.bank, model)
        if bound is not None:   # the CLI prints the defaults' warnings; Python users get it here
            result.settings["defaults"].setdefault("warnings", []).append(bound)
            warn_user(bound, IdentificationWarning)
        if self.check_dimensions:   # random answers or two traits: said in the warnings
            record_dimensionality(result, values, w, item_ids,
                                  result.settings["defaults"].setdefault("warnings", []),
                                  self.random_state)
        result.settings["data_fingerprint"] = fingerprint.result() if fingerprint else \
            _fingerprint(values, w, item_ids)
        result.seconds = time.perf_counter() - start
        self.result_ = result
        self.bank_ = result.bank
        self.loglik_ = result.loglik
        self.loglik_trace_ = result.loglik_trace
        self.n_iter_ = result.n_iter
        self.converged_ = result.converged
        self.seconds_ = result.seconds
        self.latent_variance_ = result.latent_variance
        self.theta_ = result.theta
        self.theta_se_ = result.theta_se
        self.dropped_items_ = dropped
        self.filter_report_ = report
        return self

    def _group_map(self, groups, subject_ids):
        """``groups`` as a dict subject id -> label (:func:`atlascat.irt.groups.group_mapping`),
        or None; the settings a multiple-group fit cannot take refused in one line."""
        if groups is None:
            return None
        given = [name for name, on in (
            ("partition_size (--partition-size)", self.partition_size is not None),
            ("dtype (--dtype)", self.dtype != "float64"),
            ("convergence (--convergence)", self.convergence != "params")) if on]
        if given:
            raise ConfigError(f"{', '.join(given)} set with groups: a multiple-group "
                              "calibration is joint, in float64, with mirt's rule on the "
                              "parameters")
        from .groups import group_mapping

        return group_mapping(groups, subject_ids)

    def _dispersion(self, values, bank):
        """phi per item for the tempered refit (``dispersion``), or None: 0/1 answers, or
        ``dispersion=None`` (the plain quasi-likelihood)."""
        if self.dispersion is None:
            return None
        if isinstance(self.dispersion, str):
            if self.dispersion != "auto":
                raise ConfigError(f"dispersion must be None, 'auto' or one value per item, got "
                                  f"{self.dispersion!r}")
            from .dispersion import estimated_dispersion

            return estimated_dispersion(values, bank, self.quadpts, self.theta_range)
        from ..validation import check_prob_array

        phi = check_prob_array(self.dispersion, "dispersion").reshape(-1)
        if phi.shape != (values.shape[1],) or not np.all((phi > 0) & np.isfinite(phi)):
            raise ConfigError(f"dispersion needs {values.shape[1]} positive values, one per "
                              "item calibrated")
        return phi

    # ------------------------------------------------------------------ the EM (irt/em.py)
    def _em_settings(self) -> dict:
        """The settings :func:`atlascat.irt.em.fit_joint` takes from this estimator."""
        return {"quadpts": int(self.quadpts), "theta_range": self.theta_range,
                "device": self.device, "dtype": self.dtype, "memory_limit": self.memory_limit,
                "max_iter": int(self.max_iter), "tol": float(self.tol),
                "accelerate": self.accelerate, "convergence": self.convergence,
                "max_newton": self.max_newton, "callback": self.callback}


def _g2(values, w, bank, k, quadpts, theta_range) -> dict | None:
    """mirt's G2 of a binary fit on its pattern table (:mod:`atlascat.irt.gsquare`)."""
    from .gsquare import g2
    from .quadrature import normal_quadrature

    quad = normal_quadrature(int(quadpts), theta_range)
    log_p, log_q = bank.log_probability(quad.nodes)          # (Q, J) each
    log_prob = np.stack([log_q.T, log_p.T], axis=2)           # (J, Q, 2): wrong, right
    return g2(values, w, log_prob, quad.log_weights, [2] * len(bank), k)


def _standard_errors(values, w, fit, item_model, item_ids, model, quadpts, theta_range,
                     progress=None):
    from .quadrature import normal_quadrature
    from .se import binary_standard_errors

    quad = normal_quadrature(int(quadpts), theta_range)
    return binary_standard_errors(values, w, fit["th"], item_model, fit["var"],
                                  item_ids=item_ids, nodes=quad.nodes,
                                  log_weights=quad.log_weights, model=model, progress=progress)


def _fingerprint(values, w, item_ids) -> str:
    """A short hash of the calibrated responses, the same for a matrix and its response
    patterns with frequencies, whatever the order of rows and columns (anova refuses models
    fitted to other data)."""
    import hashlib

    order = np.argsort(np.asarray(item_ids).astype(str))
    codes = _binary_codes(values, order)
    h = hashlib.sha1()
    if codes is None:   # scores other than 0/1: unique rows of the scores themselves
        rows, inv = np.unique(np.nan_to_num(values[:, order], nan=-1.0), axis=0,
                              return_inverse=True)
        h.update(np.ascontiguousarray(rows).tobytes())
    else:
        # 0/1 answers: rows of one-byte codes (missing 0 < wrong 1 < right 2, the order of
        # -1 < 0 < 1) sort bytewise as the scores' rows sort numerically; the unique rows are
        # hashed as the scores they stand for, -1, 0, 1 (float64)
        m = codes.shape[1]
        rows, inv = np.unique(codes.view(f"V{m}").reshape(-1), return_inverse=True)
        rows = rows.view(np.uint8).reshape(len(rows), m)
        for s in range(0, len(rows), 256):
            h.update((rows[s:s + 256].astype(np.float64) - 1.0).tobytes())
    freq = np.bincount(inv.reshape(-1), weights=None if w is None else w,
                       minlength=len(rows))
    h.update(np.round(np.asarray(freq, dtype=float), 9).tobytes())
    h.update("|".join(np.asarray(item_ids)[order].astype(str)).encode())
    return h.hexdigest()[:16]


def _in_background(fn, *args):
    """``fn(*args)`` started in a thread (NumPy and hashlib release the GIL on large arrays):
    a ``concurrent.futures.Future`` whose ``result()`` waits and returns or raises."""
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="atlas-fingerprint")
    future = pool.submit(fn, *args)
    pool.shutdown(wait=False)    # the task runs on; the thread ends with it
    return future


def _binary_codes(values, order):
    """uint8 codes of a matrix of 0/1 answers (NaN 0, +0.0 1, 1.0 2), columns taken in
    ``order``, or None when any cell holds another value (-0.0 included: its row would not be
    the same bytes). Written a block of rows at a time, chunks of rows in threads
    (:func:`atlascat.irt.colstats.map_row_chunks`): no full-size temporary."""
    from .colstats import map_row_chunks

    n, m = values.shape
    out = np.empty((n, m), np.uint8)
    rows = max(1, (1 << 20) // max(1, m))

    def chunk(a, b):
        for s in range(a, b, rows):
            blk = values[s:min(s + rows, b)]
            bits = (blk if blk.dtype == np.float64 else blk.astype(np.float64)).view(np.uint64)
            zero = bits == 0
            one = bits == np.uint64(0x3FF0000000000000)
            n_nan = int(np.count_nonzero(np.isnan(bits.view(np.float64))))
            if np.count_nonzero(zero) + np.count_nonzero(one) + n_nan != blk.size:
                return False
            codes = zero.view(np.uint8)
            codes += one.view(np.uint8)
            codes += one.view(np.uint8)
            np.take(codes, order, axis=1, out=out[s:s + blk.shape[0]])
        return True

    return out if all(map_row_chunks(chunk, n, m)) else None


def calibrate(responses, model: str = AUTO, **settings) -> CalibrationResult:
    """Calibrate an item bank: ``Calibrator(model, **settings).fit(responses).result_``.

    By marginal maximum likelihood with the EM algorithm (Bock and Aitkin, 1981), as mirt:
    P_j(theta) = c_j + (u_j - c_j) sigma(a_j theta + d_j), theta ~ N(0, 1) (module docstring);
    ordinal ratings by the graded (Samejima, 1969) or generalized partial credit (Muraki, 1992)
    model.

    ``responses``: a pandas DataFrame (the models as its index, one column per item id; NaN or
    ``pd.NA`` for a missing answer; float, bool or nullable Int64), a ResponseMatrix, an array
    or nested list (subjects x items), or a file path. ``model``: "auto" (chosen from the
    number of subjects, and said), "rasch", "1pl", "2pl", "3pl", "4pl", "graded", "gpcm",
    "pcm". ``weights``: row frequencies of a response-pattern table. ``groups`` (with
    ``reference_group``): a multiple-group calibration (:meth:`Calibrator.fit`). See
    :class:`Calibrator` for the other settings (``se=True``, priors, ``random_state``,
    ``dispersion``, ...).

    Returns a :class:`CalibrationResult`: the bank, log-likelihood (and its trace per EM
    iteration), iterations, convergence flag, time, the subjects' EAP thetas (in the order of
    ``subject_ids``; mirt's ``fscores``, as :func:`~atlascat.irt.ability.estimate_ability` on the
    bank: 121 nodes, whatever ``quadpts`` the fit took), AIC / BIC, standard errors with ``se=True`` and what filtering dropped.
    """
    dims = next((k for k in ("dims", "n_dims") if k in settings), None)
    if dims is not None:   # mirt's mirt(data, K): said where it is, not a TypeError
        raise ConfigError(f"{dims}={settings[dims]!r}: calibrate fits one latent trait; the "
                          "exploratory K-dimensional 2PL is atlascat.irt.multidimcal."
                          "calibrate_multidim(responses, K)")
    weights = settings.pop("weights", None)
    groups = settings.pop("groups", None)
    reference = settings.pop("reference_group", None)
    return Calibrator(model, **settings).fit(responses, weights=weights, groups=groups,
                                             reference_group=reference).result_
