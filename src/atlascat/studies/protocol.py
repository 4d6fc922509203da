"""The real-data comparison protocol behind ``atlas benchmark`` (ATLAS paper, section 5).

Steps (every random choice flows from one seeded ``numpy.random.Generator``):

1. **Split** the models 90/10, stratified by total score (:func:`atlascat.filtering.stratified_split`).
2. **Filter and calibrate on the train models only**: the paper's psychometric item filter
   (:func:`atlascat.filtering.filter_items`, optional) and a joint calibration
   (:func:`atlascat.irt.calibrate.calibrate`). With ``model="bic"`` (default) the IRT model is
   chosen on the train answers by BIC among ``model_candidates`` (2PL, 3PL;
   :func:`select_model`): exact-match generation (GSM8K) has no guessing and gets a 2PL,
   multiple choice (ARC, TruthfulQA) a 3PL; ``model="auto"`` means what it means in
   ``calibrate``: the default for the data's size. Scores in [0, 1] that are not all 0/1 are
   calibrated with each item's dispersion (``dispersion="auto"``; :mod:`atlascat.irt.dispersion`),
   which the bank carries: the CAT, the references and the fixed forms are then scored under
   the extended quasi-likelihood (:func:`atlascat.irt.ability.estimate_ability`). Test models never touch the bank.
2b. **SE calibration on a validation split of the train models** (``se_calibration``, reported
   next to the raw coverage, never in its place): a bank calibrated on the other train models,
   the CAT replayed on the validation models, and the factor
   k_tau = q_0.95(|theta_hat - theta_ref| / SE) / 1.96 (:func:`validation_se_factors`).
3. **Reference**: each test model's whole-bank theta is its WLE on every bank item (with SE);
   its full accuracy is its mean score on the bank's items.
4. **Methods**: each estimates every test model from that model's own real answers on the items
   the method picks.

   - ATLAS CAT at each tau: :func:`atlascat.cat.simulate.simulate_cat` replays the real matrix
     (paper defaults: first item near theta0, MFI with randomesque 5, EAP, stop at SE <= tau after
     30 items); theta and SE are the CAT's own final estimate.
   - Fixed forms: Random-k (averaged over replicates), tinyBenchmarks anchor points, the
     metabench-style information subset, greedy D/A/E-optimal forms
     (:func:`atlascat.design.optimal.optimal_form`) over the train models' theta distribution.
     Every fixed form is scored with the same EAP settings (61 nodes on [-6, 6], N(0, 1) prior;
     SE = posterior SD).

   Accuracy: p-IRT reconstruction from each method's theta and answers
   (:func:`atlascat.studies.reconstruction`), and the method's direct estimate (mean score on its
   items, cluster-weighted for anchor points).
5. **Metrics** per method (:mod:`atlascat.studies.metrics`): items, theta MAE +- SE, IES and RIE
   vs Random-k, 95% coverage, p-IRT accuracy MAE +- SE, exposure, overlap, time per model.

:class:`BenchmarkRun` holds everything and writes / reads a run directory::

    run.json                  settings, sizes, calibration and filter summaries, timings
    persons.csv.gz            one row per (method, replicate, test model)
    summary.csv               one row of metrics per method
    table_{ability,accuracy,security}.{csv,md}, tables.md
    exposure.csv              exposure rate of every bank item under every method
    forms.csv                 the items of every fixed form (method, replicate, position, item_id, weight)
    trajectories.csv          theta and SE after each item of example CAT runs
    reference.csv             test models' whole-bank theta, SE and full accuracy
    bank.csv                  the calibrated bank
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from ..irt.defaults import QUADPTS, THETA_RANGE
from .._version import __version__
from ..errors import AtlasError, ConfigError, RunFolderError, warn_user
from ..irt.bank import ItemBank
from ..irt.dispersion import is_binary
from ..responses import ResponseMatrix
from . import metrics
from .baselines import FixedForm, aipw_accuracy, anchor_points, information_form, random_forms
from .config import BenchmarkConfig

__all__ = ["BenchmarkConfig", "BenchmarkRun", "run_benchmark", "plan_stages", "cat_label",
           "WRITTEN_FILES", "select_model", "n_item_parameters", "validation_se_factors"]

RUN_FILES = ("run.json", "persons.csv.gz", "summary.csv")
#: every file :meth:`BenchmarkRun.write` writes (a folder holding some of them but no
#: run.json is no run folder: refused, never overwritten)
WRITTEN_FILES = RUN_FILES + ("reference.csv", "exposure.csv", "forms.csv", "trajectories.csv",
                             "bank.csv", "tables.md")


#: the fewest train models a bank is calibrated on (fewer: refused, naming test_size)
MIN_TRAIN = 5


def cat_label(tau: float) -> str:
    """The method label of an ATLAS run stopped at SE ``tau`` in the studies' tables."""
    return f"ATLAS tau={tau:g}"


def plan_stages(config: BenchmarkConfig) -> list[str]:
    """Names of the stages :func:`run_benchmark` reports to its ``progress`` callback, in order."""
    stages = ["split", "calibrate"] + (["model fit"] if config.model_fit else [])
    stages += (["SE calibration"] if config.se_calibration and config.taus else []) + ["reference"]
    if config.random_k:
        stages.append(f"Random-{config.random_k}")
    if config.anchor_k:
        stages.append(f"Anchor-{config.anchor_k}")
    if config.info_k:
        stages.append(f"Info-{config.info_k}")
    if config.optimal_k:
        stages += [f"{c}-optimal-{config.optimal_k}" for c in config.optimal_criteria]
    stages += [cat_label(t) for t in config.taus]
    stages.append("metrics")
    return stages


# ----------------------------------------------------------------------------- result object
@dataclass
class BenchmarkRun:
    """Everything one benchmark run produced; :meth:`write` / :meth:`read` a run directory."""

    name: str
    config: BenchmarkConfig
    bank: ItemBank
    persons: pd.DataFrame
    summary: pd.DataFrame
    reference: pd.DataFrame
    exposure: pd.DataFrame
    forms: pd.DataFrame
    trajectories: pd.DataFrame
    info: dict

    @property
    def methods(self) -> list[str]:
        return list(self.summary["method"])

    @property
    def continuous(self) -> bool:
        """Whether the answers are continuous scores (a model's mean is its mean score, not an
        accuracy: :func:`atlascat.studies.tables.in_words`)."""
        return (self.info or {}).get("scores") == "continuous"

    def tables(self) -> dict[str, pd.DataFrame]:
        from .tables import make_tables

        return make_tables(self.summary)

    def write(self, run_dir) -> Path:
        from .tables import write_tables

        from ..validation import check_output_dir

        out = check_output_dir(run_dir, option=None, what="run folder", writes=WRITTEN_FILES,
                               marker="run.json")
        out.mkdir(parents=True, exist_ok=True)
        meta = {"name": self.name, "atlascat_version": __version__,
                "config": _jsonable(asdict(self.config)), **_jsonable(self.info)}
        (out / "run.json").write_text(json.dumps(meta, indent=2), encoding="utf-8")
        self.persons.to_csv(out / "persons.csv.gz", index=False)
        self.summary.to_csv(out / "summary.csv", index=False)
        self.reference.to_csv(out / "reference.csv", index=False)
        self.exposure.to_csv(out / "exposure.csv", index=False)
        self.forms.to_csv(out / "forms.csv", index=False)
        self.trajectories.to_csv(out / "trajectories.csv", index=False)
        self.bank.write(out / "bank.csv")
        write_tables(self.summary, out, continuous=self.continuous)
        return out

    @classmethod
    def read(cls, run_dir) -> "BenchmarkRun":
        path = Path(run_dir)
        missing = [f for f in RUN_FILES if not (path / f).exists()]
        if missing:
            raise RunFolderError(f"{path} is not a benchmark run directory (missing {missing})",
                                 path=path)
        try:
            meta = json.loads((path / "run.json").read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise RunFolderError(f"{path / 'run.json'} cannot be read ({exc})", path=path) from None
        if not isinstance(meta, dict) or not isinstance(meta.get("config", {}), dict):
            raise RunFolderError(f"{path / 'run.json'} is not a benchmark run's record (a JSON "
                                 "object with a 'config' object)", path=path)
        cfg = meta.pop("config", {})
        known = BenchmarkConfig.__dataclass_fields__
        config = BenchmarkConfig(**{k: v for k, v in cfg.items() if k in known})
        name = meta.pop("name", path.name)
        meta.pop("atlascat_version", None)
        str_ids = {"subject_id": str, "item_id": str}

        def opt(fname, **kw):
            f = path / fname
            if f.exists() and f.stat().st_size > 1:
                return _run_table(path, fname, **kw)
            return pd.DataFrame(columns=list(_RUN_COLUMNS.get(fname, ())))

        return cls(name=name, config=config, bank=ItemBank.read(path / "bank.csv"),
                   persons=_run_table(path, "persons.csv.gz", dtype=str_ids),
                   summary=_run_table(path, "summary.csv"),
                   reference=opt("reference.csv", dtype=str_ids),
                   exposure=opt("exposure.csv", dtype=str_ids),
                   forms=opt("forms.csv", dtype=str_ids),
                   trajectories=opt("trajectories.csv", dtype=str_ids), info=meta)


# the columns each table of a run folder must hold (its readers index them)
_RUN_COLUMNS = {"summary.csv": ("method",),
                "persons.csv.gz": ("method", "subject_id", "theta", "se", "n_items"),
                "reference.csv": ("subject_id", "theta_ref", "accuracy_full"),
                "trajectories.csv": ("method", "subject_id")}


def _run_table(path: Path, fname: str, **kw) -> pd.DataFrame:
    """One table of a run folder; unreadable or lacking a column it needs: RunFolderError."""
    import zlib

    f = path / fname
    try:
        df = pd.read_csv(f, **kw)
    except (OSError, EOFError, UnicodeDecodeError, zlib.error, pd.errors.EmptyDataError,
            pd.errors.ParserError) as exc:
        raise RunFolderError(f"{f} cannot be read ({str(exc).splitlines()[0]})",
                             path=path) from None
    lacking = [c for c in _RUN_COLUMNS.get(fname, ()) if c not in df.columns]
    if lacking:
        raise RunFolderError(f"{f} lacks the column(s) {lacking} a benchmark run writes",
                             path=path)
    return df


def _jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.floating,)):
        return None if not np.isfinite(obj) else float(obj)
    if isinstance(obj, float) and not np.isfinite(obj):
        return None
    if isinstance(obj, np.ndarray):
        return _jsonable(obj.tolist())
    if isinstance(obj, (np.bool_,)):
        return bool(obj)
    return obj


# ----------------------------------------------------------------------------- adapters
def n_item_parameters(model: str, n_items: int) -> int:
    """Free parameters of a calibrated bank: items x (1 to 4), plus the Rasch latent variance."""
    per = {"rasch": 1, "1pl": 1, "2pl": 2, "3pl": 3, "4pl": 4}[str(model).lower()]
    return per * int(n_items) + (1 if str(model).lower() in ("rasch", "1pl") else 0)


def _options_for(model: str, options: dict) -> dict:
    """``calibrate`` options valid for ``model`` (a prior on c only for the 3PL / 4PL)."""
    out = dict(options)
    if model not in ("3pl", "4pl"):
        out.pop("prior_c", None)
    if model in ("rasch", "1pl"):
        out.pop("prior_a", None)
    return out


def select_model(train: ResponseMatrix, candidates=("2pl", "3pl"), **options):
    """Choose the IRT model of a bank on the (train) answers by the Bayesian information criterion.

    Every candidate is calibrated on ``train`` (``calibrate(train, model, **options)``; a prior
    on c is passed only to models that have c) and scored by

        BIC_m = -2 log L_m + k_m log N,

    with log L_m the marginal log-likelihood (without the log prior), k_m the number of free item
    parameters (:func:`n_item_parameters`) and N the number of train models (sum of pattern
    weights) (Schwarz, 1978). The smallest BIC wins. BIC, unlike AIC, is consistent: with the
    2000-odd models of a leaderboard, an extra lower asymptote per item has to buy about
    log(2000) / 2 = 3.8 log-likelihood units per item to be kept. On exact-match generation
    (GSM8K) no guessing is possible and the 3PL's c are noise: BIC picks the 2PL, and so does the
    log-likelihood of held-out train models; on 4-choice items (ARC, TruthfulQA) it picks the 3PL.

    Returns ``(model, results, table)``: the chosen name, ``{model: CalibrationResult}`` and a
    list of JSON-able rows (model, loglik, n_params, n, bic, chosen).

    The fits' warnings (the calibration's identification notes, ...) are given once each after
    the choice, however many candidates raised them; one that only a candidate not chosen
    raised says so ("the 3pl candidate (not chosen by BIC): ...").
    """
    from ..irt.calibrate import ORDINAL, calibrate

    candidates = tuple(dict.fromkeys(str(m).lower() for m in candidates))
    if not candidates:
        raise ConfigError("select_model needs at least one candidate model")
    n = float(np.sum(train.weights)) if train.weights is not None else float(train.n_subjects)
    check = bool(options.get("check_dimensions", True))
    results, rows, said = {}, [], {}
    for m in candidates:
        # a binary candidate's dimensionality check waits for the choice: one check, not one
        # per candidate (the ordinal fits keep theirs)
        opts = {**_options_for(m, options), "check_dimensions": check and m in ORDINAL}
        res, held = _holding_warnings(lambda: calibrate(train, model=m, **opts))
        for warning in held:
            said.setdefault(warning, []).append(m)
        k = n_item_parameters(m, len(res.bank))
        results[m] = res
        rows.append({"model": m, "loglik": float(res.loglik), "n_params": k, "n": n,
                     "bic": float(-2.0 * res.loglik + k * np.log(n)),
                     "aic": float(-2.0 * res.loglik + 2.0 * k)})
    best = min(rows, key=lambda r: r["bic"])["model"]
    for r in rows:
        r["chosen"] = r["model"] == best
    if check and best not in ORDINAL:
        _check_dimensions(results[best], train, options.get("random_state"))
    for (message, category), models in said.items():
        if best not in models:
            message = (f"the {' and '.join(models)} candidate{'s' * (len(models) > 1)} (not "
                       f"chosen by BIC): {message}")
        warn_user(message, category)
    return best, results, rows


def _check_dimensions(result, train: ResponseMatrix, random_state) -> None:
    """The dimensionality check a binary ``calibrate(train, ...)`` runs, on the chosen fit only:
    the same models and items (after the calibration's filters), the same seed, the same
    verdict and warning (:func:`atlascat.irt.dimensionality.record`)."""
    from ..irt.dimensionality import record

    seen = train.subset(subjects=result.subject_ids, items=result.bank.item_ids)
    record(result, seen.values, seen.weights, seen.item_ids,
           result.settings["defaults"].setdefault("warnings", []), random_state)


def _holding_warnings(fit):
    """``(fit(), held)``: ``fit()`` with the user warnings it raises (``warn_user``'s: the
    calibration's identification notes, ...) held back, every one, as distinct ``(message,
    category)`` pairs in the order raised; any other warning is shown as it came."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UserWarning)
        out = fit()
    held = {}
    for w in caught:
        if issubclass(w.category, UserWarning):
            held.setdefault((str(w.message), w.category), None)
        else:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno, w.file, w.line)
    return out, list(held)


def _calibrate(train: ResponseMatrix, config: BenchmarkConfig, rng) -> tuple[ItemBank, dict]:
    """Joint calibration on the train models; returns the bank and a JSON-able summary.

    With ``config.model == "bic"`` the model is chosen by :func:`select_model` (BIC) and the
    summary carries the comparison under ``model_selection``.
    """
    from ..irt.calibrate import calibrate

    options = {"random_state": int(config.seed), **config.calibrate_options}
    if config.model == "bic":
        chosen, results, rows = select_model(train, config.model_candidates, **options)
        result = results[chosen]
    else:
        result = calibrate(train, model=config.model, **options)
        rows = None
    summary = {k: v for k, v in result.to_dict().items() if k != "loglik_trace"}
    if rows is not None:
        summary["model_selection"] = {"criterion": "BIC", "candidates": rows}
    return result.bank, summary


def validation_se_factors(train: ResponseMatrix, model: str, config: BenchmarkConfig,
                          rng: np.random.Generator) -> dict:
    """Empirical scale factor of the CAT's SE, estimated on held-out TRAIN models only.

    The train models are split again (stratified, ``config.validation_size`` of them held out);
    a bank of the same ``model`` is calibrated on the rest; each validation model's whole-bank
    WLE on that bank is its reference; the CAT at each tau replays its real answers. Then

        k_tau = q_0.95( |theta_hat_i - theta_ref_i| / SE_i ) / 1.96

    (q_0.95: the smallest validation ratio with at least 95% of the ratios at or below it)
    is the factor by which the stated SE must be widened for theta_hat +- 1.96 k SE to hold 95%
    of the validation models (k < 1: the SE was conservative). The test models are never used.
    Applying k to the test models' SE gives ``coverage_calibrated``, reported next to the raw
    coverage, never in its place. With fewer than 20 validation models it returns no factors;
    validation models the CAT gave every bank item (share in ``whole_bank``) are left out of the
    ratios (their theta is the reference's own), and a tau with fewer than 20 others left gets
    no factor (why in ``skipped``).

    Returns ``{"factors": {tau: k}, "n_fit": ..., "n_validation": ..., "raw_coverage": {tau: c}}``.
    """
    from ..filtering import stratified_split
    from ..irt.calibrate import calibrate

    try:
        fit, val = stratified_split(train, test_size=config.validation_size,
                                    n_bins=config.n_bins, rng=rng)
    except ConfigError:   # too few train models to hold any out: not the user's test_size
        return {"n_fit": int(train.n_subjects), "n_validation": 0, "factors": {},
                "raw_coverage": {}, "model": model,
                "note": "fewer than 20 validation models: no SE factor estimated"}
    out = {"n_fit": int(fit.n_subjects), "n_validation": int(val.n_subjects), "factors": {},
           "raw_coverage": {}, "whole_bank": {}, "model": model}
    if val.n_subjects < 20:
        out["note"] = "fewer than 20 validation models: no SE factor estimated"
        return out
    options = {"random_state": int(config.seed), **_options_for(model, config.calibrate_options)}

    def replay():
        bank = calibrate(fit, model=model, **{**options, "check_dimensions": False}).bank
        y_val = val.aligned_values(bank.item_ids, extra="ignore")
        ref = _score(y_val, bank, "wle", config)["theta"].to_numpy()
        z95 = 1.959963984540054
        for tau in config.taus:
            res = _run_cat(bank, ResponseMatrix(y_val, val.subject_ids, bank.item_ids), tau,
                           {**asdict(config), "example_models": 0}, rng)
            ratio = np.abs(res["theta"] - ref) / res["se"]
            # a model given every bank item is scored on its reference's own items: no test
            whole = res["administered"].sum(1) >= (~np.isnan(y_val)).sum(1)
            out["whole_bank"][float(tau)] = float(whole.mean())
            ratio = ratio[np.isfinite(ratio) & ~whole]
            if ratio.size < 20:
                out.setdefault("skipped", {})[float(tau)] = (
                    f"the CAT gave {whole.mean():.0%} of the validation models the whole bank "
                    f"(fewer than 20 others): no SE factor")
                continue
            # the smallest observed ratio with at least 95% of the models at or below it
            out["factors"][float(tau)] = float(np.quantile(ratio, 0.95, method="higher") / z95)
            out["raw_coverage"][float(tau)] = float(np.mean(ratio <= z95))

    # an internal bank on part of the train models: its notes (calibration, negative slopes:
    # the user's bank's own, given already, on fewer models) would read as the user's bank's
    _holding_warnings(replay)
    if out.get("skipped"):
        out["note"] = "; ".join(f"tau={t:g}: {why}" for t, why in out["skipped"].items())
    return out


def _model_fit(train: ResponseMatrix, bank: ItemBank, config: BenchmarkConfig, rng,
               binary: bool) -> dict:
    """Partition-averaged M2 fit indices of the bank on the (complete) train answers; M2 is a
    test of 0/1 answers, so on continuous scores (``binary`` False): ``{"skipped": why}``."""
    from ..irt.fit import m2_partitioned

    if not binary:
        return {"skipped": "M2 tests 0/1 answers; these are continuous scores"}
    table, summary = m2_partitioned(train, bank, partition_size=config.fit_partition_size,
                                    rng=rng)
    keys = ("RMSEA", "RMSEA_5", "RMSEA_95", "SRMSR", "CFI", "TLI", "M2", "df", "n_partitions")
    return {k: summary[k] for k in keys if k in summary}


def _with_dispersion(config: BenchmarkConfig, train: ResponseMatrix,
                     binary: bool | None = None) -> BenchmarkConfig:
    """Scores in [0, 1] that are not all 0/1: calibrate with each item's dispersion
    (``dispersion="auto"``, :mod:`atlascat.irt.dispersion`) unless ``calibrate_options`` says
    otherwise; the bank then carries it and the CAT's posterior, SE and information use it.
    ``binary``: whether ``train`` is all 0/1, when the caller knows."""
    from dataclasses import replace

    if binary is None:
        binary = is_binary(train.values)
    if "dispersion" in config.calibrate_options or binary:
        return config
    return replace(config, calibrate_options={**config.calibrate_options, "dispersion": "auto"})


def _score(y: np.ndarray, bank: ItemBank, method: str, config: BenchmarkConfig) -> pd.DataFrame:
    """EAP or WLE of every row; on a bank with dispersions (continuous scores) under the
    extended quasi-likelihood, as the adaptive test scores them (estimate_ability reads the
    bank's dispersion column)."""
    from ..irt.ability import estimate_ability

    return estimate_ability(y, bank, method=method, quadpts=config.quadpts,
                            theta_range=config.theta_range)


def _pirt(y: np.ndarray, administered: np.ndarray, theta: np.ndarray, bank: ItemBank) -> np.ndarray:
    """p-IRT accuracy on the bank's items from a method's theta and its answers."""
    from .reconstruction import pirt

    return np.asarray(pirt(np.where(administered, y, np.nan), bank, theta), dtype=float)


def _theta_histogram(thetas: np.ndarray, nodes: int = 41) -> tuple[np.ndarray, np.ndarray]:
    """The train thetas binned on an equally spaced grid (nodes, weights) for design criteria."""
    grid = np.linspace(-4.0, 4.0, nodes)
    idx = np.clip(np.rint((np.clip(thetas, -4, 4) + 4.0) / (8.0 / (nodes - 1))), 0, nodes - 1)
    w = np.bincount(idx.astype(int), minlength=nodes).astype(float)
    keep = w > 0
    return grid[keep], w[keep] / w.sum()


# ----------------------------------------------------------------------------- main entry
def run_benchmark(responses: ResponseMatrix, config: BenchmarkConfig | None = None, *,
                  name: str = "benchmark",
                  progress: Callable[[str], None] | None = None) -> BenchmarkRun:
    """Run the whole protocol on one response matrix (models x items).

    ``progress(stage)`` is called after each stage of :func:`plan_stages` (for a progress bar).
    """
    from ..filtering import filter_items, stratified_split

    config = config or BenchmarkConfig()
    if not isinstance(responses, ResponseMatrix):
        raise ConfigError("run_benchmark needs a ResponseMatrix (ResponseMatrix.read(path))")
    rng = np.random.default_rng(config.seed)
    done = progress or (lambda stage: None)
    timings: dict[str, float] = {}
    info: dict = {"source": None}

    # 1. split
    t0 = time.perf_counter()
    train, test = stratified_split(responses, test_size=config.test_size, n_bins=config.n_bins,
                                   rng=rng)
    if train.n_subjects < MIN_TRAIN:
        raise ConfigError(f"test_size {config.test_size} leaves {train.n_subjects} of the "
                          f"{responses.n_subjects} models to calibrate the bank on (at least "
                          f"{MIN_TRAIN}): lower it, or add models")
    timings["split"] = time.perf_counter() - t0
    done("split")

    # 2. filter + calibrate (train only)
    t0 = time.perf_counter()
    if config.filter:
        train_f, report = filter_items(train)
        info["filter"] = {k: v for k, v in report.to_dict().items()
                          if k not in ("dropped_items", "dropped_subjects")}
    else:
        train_f = train
    binary = is_binary(train_f.values)
    info["scores"] = "0/1" if binary else "continuous"
    config = _with_dispersion(config, train_f, binary)
    bank, cal = _calibrate(train_f, config, rng)
    info["calibration"] = cal
    timings["calibrate"] = time.perf_counter() - t0
    done("calibrate")
    if config.model_fit:
        t0 = time.perf_counter()
        # its own stream, so that switching the fit summary on or off changes no other result
        info["fit"] = _model_fit(train_f, bank, config, np.random.default_rng([config.seed, 1]),
                                 binary)
        timings["model fit"] = time.perf_counter() - t0
        done("model fit")
    se_factors: dict = {}
    if config.se_calibration and config.taus:
        t0 = time.perf_counter()
        # its own stream: switching it off changes no other result
        val = validation_se_factors(train_f, cal["model"], config,
                                    np.random.default_rng([config.seed, 2]))
        info["se_calibration"] = val
        se_factors = val["factors"]
        timings["SE calibration"] = time.perf_counter() - t0
        done("SE calibration")

    # 3. reference: whole-bank WLE and full accuracy of the test models; train thetas
    t0 = time.perf_counter()
    y_test = test.aligned_values(bank.item_ids, extra="ignore")
    obs_test = ~np.isnan(y_test)
    ref = _score(y_test, bank, "wle", config)
    subjects = test.subject_ids.astype(str)
    with np.errstate(invalid="ignore"):
        acc_full = np.where(obs_test, y_test, 0.0).sum(1) / obs_test.sum(1)
    reference = pd.DataFrame({"subject_id": subjects, "theta_ref": ref["theta"].to_numpy(),
                              "se_ref": ref["se"].to_numpy(), "accuracy_full": acc_full,
                              "n_items_full": obs_test.sum(1)})
    y_train = train_f.aligned_values(bank.item_ids, extra="ignore")
    train_theta = _score(y_train, bank, "eap", config)["theta"].to_numpy()
    timings["reference"] = time.perf_counter() - t0
    done("reference")

    persons, exposure_rows, form_rows, trajectories, security = [], [], [], [], {}
    reference_method = None  # Random-k with k capped at the bank size; IES is relative to it

    def add_fixed(form: FixedForm, method: str, build_seconds: float, lam: float | None = None):
        t1 = time.perf_counter()
        mask = np.zeros(len(bank), bool)
        mask[bank.index_of(form.item_ids)] = True
        adm = obs_test & mask[None, :]
        est = _score(np.where(adm, y_test, np.nan), bank, "eap", config)
        theta = est["theta"].to_numpy()
        pirt = _pirt(y_test, adm, theta, bank)
        direct = form.direct_accuracy(y_test[:, bank.index_of(form.item_ids)])
        peers = {} if lam is None else _random_form_peers(form, direct, pirt, lam)
        per_model = (time.perf_counter() - t1) / max(len(subjects), 1)
        persons.append(pd.DataFrame({
            "method": method, "replicate": form.replicate, "subject_id": subjects,
            "theta": theta, "se": est["se"].to_numpy(), "posterior_sd": est["se"].to_numpy(),
            "n_items": adm.sum(1),
            "accuracy_pirt": pirt, "accuracy_direct": direct, **peers, "seconds": per_model}))
        w = form.weights if form.weights is not None else np.full(len(form), 1.0 / len(form))
        form_rows.append(pd.DataFrame({"method": method, "replicate": form.replicate,
                                       "position": np.arange(1, len(form) + 1),
                                       "item_id": form.item_ids, "weight": w}))
        security.setdefault(method, []).append(metrics.security_summary(adm))
        exposure_rows.append((method, form.replicate, adm.mean(0)))
        timings[method] = timings.get(method, 0.0) + build_seconds + per_model * len(subjects)

    def _random_form_peers(form: FixedForm, direct, pirt, lam: float) -> dict:
        """The peers' accuracy estimates on a form: tinyBenchmarks' gp-IRT (its plain or
        cluster-weighted mean with p-IRT) and, on a random form, BenchPred's AIPW (a ridge
        learned on the train models)."""
        out = {"accuracy_gpirt": lam * direct + (1.0 - lam) * pirt}
        if form.name.startswith("Random-"):
            out["accuracy_aipw"] = aipw_accuracy(y_train, bank.index_of(form.item_ids), y_test)
        return out

    def gpirt_lambda(k: int) -> float:
        """gp-IRT's weight for k items from random draws on the train models (its own stream,
        tinyBenchmarks' b^2 / (b^2 + sigma^2)); stored in run.json by k."""
        from .reconstruction import estimate_gpirt_lambda

        lam = 1.0 if k >= len(bank) else estimate_gpirt_lambda(
            y_train, bank, k, rng=np.random.default_rng([config.seed, 3, k])).lam
        info.setdefault("gpirt_lambda", {})[str(k)] = lam
        return lam

    # 4a. fixed forms
    if config.random_k:
        t0 = time.perf_counter()
        k = min(config.random_k, len(bank))
        forms = random_forms(bank, k, n_replicates=max(1, config.random_replicates), rng=rng)
        lam = gpirt_lambda(k)
        build = (time.perf_counter() - t0) / len(forms)
        reference_method = f"Random-{k}"
        for form in forms:
            add_fixed(form, reference_method, build, lam)
        done(f"Random-{config.random_k}")
    if config.anchor_k:
        t0 = time.perf_counter()
        k = min(config.anchor_k, len(bank))
        form = anchor_points(y_train, bank, k, rng=rng)
        add_fixed(form, f"Anchor-{k}", time.perf_counter() - t0, gpirt_lambda(k))
        done(f"Anchor-{config.anchor_k}")
    if config.info_k:
        t0 = time.perf_counter()
        k = min(config.info_k, len(bank))
        form = information_form(bank, k, thetas=train_theta)
        add_fixed(form, f"Info-{k}", time.perf_counter() - t0)
        done(f"Info-{config.info_k}")
    if config.optimal_k and config.optimal_criteria:
        from ..design.optimal import optimal_form

        design = _theta_histogram(train_theta)
        for crit in config.optimal_criteria:
            t0 = time.perf_counter()
            k = min(config.optimal_k, len(bank))
            opt = optimal_form(bank, k, crit, thetas=design, exchange=config.optimal_exchange,
                               rng=rng)
            label = f"{crit}-optimal-{k}"
            add_fixed(FixedForm(label, opt.item_ids, info={"value": opt.value}), label,
                      time.perf_counter() - t0)
            done(f"{crit}-optimal-{config.optimal_k}")

    # 4b. CAT replaying the real answers
    for tau in config.taus:
        label = cat_label(tau)
        t0 = time.perf_counter()
        res = _run_cat(bank, test, tau, asdict(config), rng)
        timings[label] = time.perf_counter() - t0
        theta = res["theta"]
        adm = res["administered"]
        pirt = _pirt(y_test, adm, theta, bank)
        with np.errstate(invalid="ignore"):
            direct = np.where(adm, y_test, 0.0).sum(1) / adm.sum(1)
        persons.append(pd.DataFrame({
            "method": label, "replicate": 0, "subject_id": subjects, "theta": theta,
            "se": res["se"], "posterior_sd": res["posterior_sd"], "n_items": adm.sum(1),
            "accuracy_pirt": pirt,
            "accuracy_direct": direct, "seconds": res["seconds"],
            **({"se_calibrated": res["se"] * se_factors.get(float(tau), np.nan)}
               if config.se_calibration else {})}))
        security[label] = [metrics.security_summary(adm)]
        exposure_rows.append((label, 0, adm.mean(0)))
        if res.get("trajectories") is not None and len(res["trajectories"]):
            trajectories.append(res["trajectories"].assign(method=label))
        done(label)

    # 5. metrics
    persons_df = pd.concat(persons, ignore_index=True).merge(reference, on="subject_id",
                                                             how="left")
    summary = metrics.summarize_persons(persons_df, reference_method=reference_method)
    sec = pd.DataFrame([{"method": m, **pd.DataFrame(v).mean().to_dict()}
                        for m, v in security.items()])
    summary = summary.merge(sec, on="method", how="left")
    exposure = pd.DataFrame({"item_id": bank.item_ids.astype(str)})
    for method in dict.fromkeys(m for m, _, _ in exposure_rows):
        rates = [r for m, _, r in exposure_rows if m == method]
        exposure[method] = np.mean(rates, axis=0)
    done("metrics")

    info.update({
        "n_models": int(responses.n_subjects), "n_items_matrix": int(responses.n_items),
        "n_train": int(train.n_subjects), "n_train_calibrated": int(train_f.n_subjects),
        "n_test": int(test.n_subjects), "n_bank_items": int(len(bank)),
        "reference_method": reference_method, "timings_seconds": timings,
        "ies_definition": "IES = (theta MAE x mean items) / (Random-k theta MAE x its mean "
                          "items); lower is better; Random-k = 1",
        "coverage_definition": "share of test models with |theta_hat - theta_ref| <= 1.96 SE "
                               "(coverage_posterior: SE = posterior SD; coverage_joint: "
                               "<= 1.96 sqrt(SE^2 + SE_ref^2); coverage_calibrated: SE x k_tau, "
                               "k_tau estimated on a validation split of the train models)",
    })
    return BenchmarkRun(
        name=name, config=config, bank=bank, persons=persons_df, summary=summary,
        reference=reference, exposure=exposure,
        forms=pd.concat(form_rows, ignore_index=True) if form_rows else pd.DataFrame(),
        trajectories=(pd.concat(trajectories, ignore_index=True) if trajectories
                      else pd.DataFrame()), info=info)


def _run_cat(bank: ItemBank, test: ResponseMatrix, tau: float, config: dict, rng) -> dict:
    """Replay the test models' real answers through the CAT engine at SE threshold ``tau``.

    ``config``: the benchmark settings as a dict (``cat_options``, ``example_models``).

    Returns theta, se, administered (n_test, n_bank) boolean, seconds per model, and the
    step-by-step trajectories of ``config.example_models`` models.
    """
    from ..cat.config import CATConfig
    from ..cat.simulate import simulate_cat

    cat_config = CATConfig(se_stop=tau, **config["cat_options"])
    result = simulate_cat(bank, cat_config, responses=test, rng=rng)
    persons = result.persons
    if list(persons["subject_id"].astype(str)) != list(test.subject_ids.astype(str)):
        raise AtlasError("the CAT engine returned examinees in another order than the matrix")
    administered = result.asked_mask()
    # example trajectories: test models at evenly spaced quantiles of the CAT theta
    n_ex = min(int(config["example_models"]), len(persons))
    trajectories = None
    if n_ex > 0:
        order = np.argsort(persons["theta"].to_numpy(), kind="stable")
        picks = order[np.linspace(0, len(order) - 1, n_ex + 2)[1:-1].round().astype(int)]
        chosen = set(persons["subject_id"].astype(str).iloc[picks])
        adm = result.administered
        trajectories = adm[adm["subject_id"].astype(str).isin(chosen)].reset_index(drop=True)
    return {"theta": persons["theta"].to_numpy(float), "se": persons["se"].to_numpy(float),
            "posterior_sd": persons["posterior_sd"].to_numpy(float),
            "seconds": persons["seconds"].to_numpy(float), "administered": administered,
            "trajectories": trajectories, "wall_seconds": float(result.wall_seconds)}
