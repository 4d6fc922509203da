"""The predicted benchmark score of a model tested on a built bank folder: the ONE place.

``simulate`` (replayed answers) and ``evaluate`` (live answers) both predict here, from the
loaded :class:`~atlascat.bankdir.folder.BankFolder` (every function also takes the folder's
path) and what the tests observed: per model, the score (0-1, or the folder's metric scale)
with its 95% interval.

Two designs, both read here:

- an adaptive test (the CAT) scored by the folder's score link
  (:meth:`atlascat.scorelink.ScoreLink.predict`: ``g(theta, SE)`` plus the answered items' residual
  correction, interval from the source models' replayed tests): :func:`predict_scores`;
- the folder's benchmark predictor (``predictor.json``,
  :class:`atlascat.predict.BenchmarkPredictor`): it chooses the items itself and stays right
  for models unlike the source models (stronger, other families), its interval valid by
  design: :func:`replay_predictor` (recorded answers) and :func:`load_predictor`.
"""
from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd

from ..scorelink.frames import COLUMNS
from .defaults import PREDICTOR_FILE, PREDICTOR_ITEMS_FILE

__all__ = ["read_answers", "predict_scores", "predict_matrix_scores", "results_items",
           "replay_predictor", "load_predictor", "load_predictor_items",
           "as_folder", "read_targets", "logged_targets", "is_sample_logs",
           "source_models_among", "in_sample_warning", "in_sample_line",
           "PREDICTOR_ITEMS_FILE", "PREDICTION_COLUMNS",
           "PREDICTOR_FILE", "metric_scale", "folder_words", "to_metric_scale", "continuous_scores",
           "observed_means",
           "exhausted_warning"]

#: columns of :func:`predict_scores`: every bank's ``person_scores.csv`` names
#: (:data:`atlascat.scorelink.frames.COLUMNS`)
PREDICTION_COLUMNS = tuple(COLUMNS)


def as_folder(folder):
    """``folder`` itself (a :class:`~atlascat.bankdir.folder.BankFolder`), or the bank folder
    at the path ``folder`` (:func:`~atlascat.bankdir.folder.load_bank_dir`)."""
    from .folder import BankFolder, load_bank_dir

    return folder if isinstance(folder, BankFolder) else load_bank_dir(folder)


def read_targets(folder, responses):
    """The targets' answers as a ResponseMatrix on 0-1: a file path read as ``atlas simulate
    --bank DIR RESPONSES`` reads it (ids normalized, blank rows kept; a folder built with
    ``--score-range LO HI`` maps its scores from that scale; on a folder built from sample
    logs, held-out models' logs, a folder or ``.jsonl[.gz]`` files, read with its task,
    metric, filter and scale), else anything
    :func:`~atlascat.responses.as_response_matrix` takes, already on 0-1 (a score outside it
    is refused with one line)."""
    from pathlib import Path

    from ..catalogue.matrices import resolve_responses
    from ..errors import ResponseDataError
    from ..responses import as_response_matrix

    folder = as_folder(folder)
    scale = metric_scale(folder)
    logged = logged_targets(folder, responses)
    if logged is not None:
        return logged
    if isinstance(responses, (str, Path)):
        if scale is not None:
            from .scaled import read_scaled_matrix

            return read_scaled_matrix(responses, scale, folder=True, normalize_ids=True,
                                      on_empty="keep")
        return resolve_responses(responses, normalize_ids=True, on_empty="keep")
    try:
        return as_response_matrix(responses)   # a score off 0-1 is refused with one line
    except ResponseDataError as exc:
        if scale is None:
            raise
        lo, hi = scale   # in memory: on 0-1, unlike the folder's file (its metric's scale)
        raise ResponseDataError(
            f"{str(exc).split(';')[0]}; answers in memory are read on 0-1, and this folder's "
            f"scores are on {lo:g}-{hi:g}: give the file's path (read on that scale) or the "
            f"answers mapped to 0-1, (score - {lo:g}) / {hi - lo:g}") from None


def is_sample_logs(responses) -> bool:
    """Whether ``responses`` names lm-evaluation-harness sample logs (an existing folder, as
    the harness writes one per model, or a ``.jsonl[.gz]`` file) rather than a matrix."""
    from pathlib import Path

    return isinstance(responses, (str, Path)) and (
        Path(responses).is_dir() or re.search(r"\.jsonl(\.gz)?$", str(responses)) is not None)


def logged_targets(folder, responses):
    """Held-out models' sample logs (a folder, ``.jsonl[.gz]`` files) read as the bank
    ``folder`` was built from its own (task, metric, filter, scale), a ResponseMatrix on 0-1;
    None when ``responses`` is no such path. A folder built from a response matrix given sample
    logs is refused with one line (it knows no task or metric to read them with)."""
    from ..errors import ResponseDataError

    if not is_sample_logs(responses):
        return None
    folder = as_folder(folder)
    source = (getattr(folder, "manifest", None) or {}).get("source") or {}
    if source.get("kind") != "sample_logs":
        raise ResponseDataError(
            f"{str(responses)!r} names sample logs (a folder, a .jsonl[.gz] file), but bank "
            f"folder {str(folder.path)!r} was built from a response matrix, so it knows no "
            "task or metric to read them with: give the models' answers as a matrix file "
            "(subject ids in the first column), or build the folder from sample logs")
    from .harnessruns import OtherTaskError
    from .samplelogs import read_sample_logs

    try:
        logs = read_sample_logs(responses, task=source.get("task"), metric=source.get("metric"),
                                filter_name=source.get("filter"), score_range=metric_scale(folder))
    except OtherTaskError as exc:     # not the folder's task: no --task to give here
        raise ResponseDataError(
            f"{str(responses)!r} holds sample logs of {exc.found}, and bank folder "
            f"{str(folder.path)!r} was built from logs of {source.get('task')!r}: give the "
            "models' logs of that task") from None
    return logs.matrix()


def read_answers(responses, ref, *, freq_column=None, normalize_ids: bool = False,
                 on_empty: str = "keep", option: str = "RESPONSES"):
    """The models' answers to score against ``ref`` (a :class:`~atlascat.catalogue.BankRef`):
    on a bank folder as the folder reads its own (held-out models' sample logs with its task
    and metric; a matrix on a ``--score-range`` folder's scale, BLEU 0-100 read as BLEU and
    mapped to 0-1), else the file or bundled name as it is. What ``atlas score``, ``items``,
    ``ranks`` and ``fit`` read RESPONSES with."""
    from ..catalogue.matrices import resolve_responses
    from .scaled import read_scaled_matrix

    kw = {"freq_column": freq_column, "normalize_ids": normalize_ids, "on_empty": on_empty}
    if getattr(ref, "kind", None) == "dir":
        folder = ref.folder()
        logged = logged_targets(folder, responses)
        if logged is not None:
            return logged
        scale = metric_scale(folder)
        if scale is not None:
            return read_scaled_matrix(responses, scale, folder=True, **kw)
    return resolve_responses(responses, option=option, **kw)


def metric_scale(folder):
    """(low, high) of the metric's own scale when the folder was built from scores on another
    scale than [0, 1] (``atlas build-bank --score-range LO HI``, or the harness's known range of
    BLEU / ROUGE), else None. Scores are modelled on [0, 1]; every prediction is mapped back,
    low + (high - low) x score, so the user reads BLEU on BLEU's scale."""
    rng = (getattr(folder, "manifest", None) or {}).get("settings", {}).get("score_range")
    return None if rng is None else (float(rng[0]), float(rng[1]))


def folder_words(folder) -> dict:
    """What a bank folder measures, as every output names it (a run's prediction, ``atlas
    simulate``'s summary, ``atlas info``, the run page), read from its manifest here only:
    ``benchmark`` (its name: the task's or ``--name``), ``population`` "source models" (whose
    scores its percentiles rank among, :mod:`atlascat.scorelink.words`), ``metric`` (the logged metric, when
    known, and what the score is: "f1: each model's mean score over all 60 items") and, for a
    folder on its metric's own scale (:func:`metric_scale`), ``scale`` [low, high]."""
    from ..scorelink.words import SOURCE

    m = getattr(folder, "manifest", None) or {}
    metric = (m.get("source") or {}).get("metric")
    out = {"benchmark": folder.benchmark, "population": SOURCE,
           "metric": (f"{metric}: " if metric else "")
           + (m.get("score") or "each model's mean over the items")}
    scale = metric_scale(folder)
    if scale is not None:  # the score and its interval are on the metric's own scale
        out["scale"] = list(scale)
    return out


def observed_means(values, ref) -> tuple:
    """Each model's observed mean score over the items it answered (``values``: models x
    items on [0, 1] as the bank models them, NaN unanswered), with what a bank's outputs call
    it and the scale they show it on: ("accuracy", None) for right / wrong answers; ("mean
    score", None) for scores between 0 and 1 (or a folder of continuous scores); ("mean
    score", (low, high)) on a ``--score-range`` folder, the means mapped to its scale as
    low + (high - low) x mean (a 1-5 rating's 3.84, not 0.71). ``ref``: the bank's
    :class:`~atlascat.catalogue.BankRef` (a folder's manifest says its scale and scores)."""
    y = np.asarray(values, dtype=float)
    obs = ~np.isnan(y)
    mean = np.where(obs, y, 0.0).sum(1) / np.maximum(obs.sum(1), 1)
    folder = ref.folder() if getattr(ref, "kind", None) == "dir" else None
    scale = None if folder is None else metric_scale(folder)
    if scale is not None:
        return scale[0] + (scale[1] - scale[0]) * mean, "mean score", scale
    between = bool(np.any(obs & (y > 0) & (y < 1)))
    if between or (folder is not None and continuous_scores(folder)):
        return mean, "mean score", None
    return mean, "accuracy", None


def continuous_scores(folder) -> bool | None:
    """Whether the folder's items are scored on a continuum (a score strictly between its ends
    in the source results, or a metric on its own scale: F1, ROUGE, BLEU) rather than right /
    wrong; None for a folder whose manifest does not say (built before it was recorded)."""
    src = (getattr(folder, "manifest", None) or {}).get("source") or {}
    if metric_scale(folder) is not None:
        return True
    return None if "scores" not in src else src["scores"] == "continuous"


def to_metric_scale(frame: pd.DataFrame, folder, columns=None) -> pd.DataFrame:
    """``frame`` (a DataFrame, or columns: a dict of arrays) with the score and its interval
    ends (default the first three of :data:`PREDICTION_COLUMNS`) on the folder's metric scale
    (:func:`metric_scale`)."""
    scale = metric_scale(folder)
    if scale is None:
        return frame
    lo, hi = scale
    out = frame.copy()
    for c in (PREDICTION_COLUMNS[:3] if columns is None else columns):
        if c in out:
            out[c] = lo + (hi - lo) * out[c].astype(float)
    return out


def predict_scores(folder, persons: pd.DataFrame, administered: pd.DataFrame, *,
                   warn_se=None) -> pd.DataFrame:
    """Predicted score per model of a bank folder's test.

    Parameters
    ----------
    folder : BankFolder (:func:`atlascat.bankdir.load_bank_dir`) or its path
    persons : one row per model: ``subject_id``, ``theta``, ``se`` (and ``stop_reason``)
    administered : one row per answer: ``subject_id``, ``item_id``, ``score`` (0/1)

    Returns
    -------
    DataFrame in the order of ``persons`` with :data:`PREDICTION_COLUMNS`: the score, the
    lower and upper ends of its 95% interval (0-1, or the metric's own scale,
    :func:`metric_scale`), the percentile among the source models, a flag and a one-line
    warning ("" when none); ``warn_se``: the SE the flag and warning read
    (:func:`atlascat.scorelink.frames.predict_frame`; a fixed form's widened one).
    """
    from ..scorelink import predict_frame

    folder = as_folder(folder)
    out = predict_frame(folder.link, persons, administered, warn_se=warn_se)
    return to_metric_scale(_known_means(folder, out, persons, administered), folder)


def predict_matrix_scores(folder, persons: pd.DataFrame, responses, *,
                          warn_se=None) -> pd.DataFrame:
    """:func:`predict_scores` from a ResponseMatrix of the models' answers (``atlas score
    RESPONSES --bank DIR``): every answer counts, those to items the bank dropped too, so a
    model that answered every item of the results gets its mean, known; ``warn_se`` as
    :func:`predict_scores`."""
    return predict_scores(folder, persons, responses.to_long(), warn_se=warn_se)


def _known_means(folder, out: pd.DataFrame, persons, administered) -> pd.DataFrame:
    """``out`` with the score of every model that answered all the items its score is the
    mean of (a folder without ``--scores``: every item of the results, the bank's and those
    the build dropped, as the manifest lists them) set to that mean, an interval of no width:
    the score is known, not predicted (as the predictor gives a model asked every item); the
    link's regression on theta is not."""
    import numpy as np

    m = folder.manifest or {}
    if (not str(m.get("score", "")).startswith("each model's mean score over all")
            or len(administered) == 0):
        return out
    result_ids = results_items(folder)
    if result_ids is None:
        return out
    given = administered[administered["item_id"].astype(str).isin(result_ids)
                         & np.isfinite(administered["score"].to_numpy(float))]
    given = given.drop_duplicates(["subject_id", "item_id"], keep="last")
    by = given.groupby(given["subject_id"].astype(str))["score"]
    counts, means = by.count(), by.mean()
    sid = persons["subject_id"].astype(str).to_numpy()
    full = counts.reindex(sid).fillna(0).to_numpy() >= len(result_ids)
    if not full.any():
        return out
    out = out.copy()
    known = means.reindex(sid).to_numpy(float)[full]
    for c in ("score", "score_lo", "score_hi"):
        out.loc[full, c] = known
    out.loc[full, "percentile"] = [folder.link.percentile(v) for v in known]
    out.loc[full, "score_flag"] = ""
    out.loc[full, "score_warning"] = ""
    return out


def results_items(folder) -> set | None:
    """The ids of every item of the results a folder was built from (the bank's and those
    the build dropped, as the manifest lists them: the items each model's mean score is
    over), or None when the manifest does not account for all of them."""
    folder = as_folder(folder)
    items = (folder.manifest or {}).get("items") or {}
    ids = {str(i) for i in folder.bank.item_ids}
    for key, value in items.items():
        if key.startswith("dropped_") and isinstance(value, list):
            ids.update(str(i) for i in value)
    n = items.get("n_results")
    return ids if n is None or len(ids) == n else None   # no count: the bank's (older folders)


def load_predictor(folder):
    """The folder's (a BankFolder or its path) :class:`~atlascat.predict.BenchmarkPredictor`,
    or None (a folder built without one)."""
    from ..errors import BankFolderError
    from ..predict import BenchmarkPredictor

    folder = as_folder(folder)
    path = folder.extra(PREDICTOR_FILE)
    if path is None:
        named = ((folder.manifest or {}).get("predictor") or {}).get("file")
        if named:      # built with one, since lost: not silently another design
            raise BankFolderError(
                f"bank folder {str(folder.path)!r} was built with a benchmark predictor, but its "
                f"{named} is missing: copy it back from the folder as built, or --design "
                "adaptive")
        return None
    try:
        predictor = BenchmarkPredictor.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError) as exc:
        raise BankFolderError(f"{str(path)!r} cannot be read ({exc})") from None
    predictor.score_range = metric_scale(folder)   # its predictions print on the scale
    return predictor


def load_predictor_items(folder):
    """The predictor's items as an :class:`~atlascat.irt.bank.ItemBank` with their logged
    requests (what a live run on the predictor asks), or None (a folder built from a response
    matrix, or without a predictor)."""
    from ..content.items import normalize_loaded
    from ..errors import BankFolderError
    from ..irt.bank import ItemBank

    path = as_folder(folder).extra(PREDICTOR_ITEMS_FILE)
    if path is None:
        return None
    try:
        return normalize_loaded(ItemBank.read(path))
    except (OSError, ValueError, KeyError) as exc:
        raise BankFolderError(f"{str(path)!r} cannot be read ({exc})") from None


def source_models_among(folder, subject_ids) -> list[str]:
    """The ``subject_ids`` that are source models of the folder (its manifest's ``models``):
    their predictions are in-sample (the bank, link and predictor were fitted on their
    answers), not a test of a new model."""
    known = {str(m) for m in folder.manifest.get("models") or ()}
    return [str(s) for s in subject_ids if str(s) in known]


def in_sample_warning(among: list, n: int) -> str:
    """The one line for :func:`source_models_among`'s ``among`` of ``n`` models."""
    if n == 1:
        return (f"model {among[0]!r} is one of the bank folder's source models: its prediction "
                "is in-sample, fitted on its own answers; held-out models test the folder")
    return (f"{len(among)} of the {n} models are the bank folder's source models (e.g. "
            f"{among[0]!r}): their predictions are in-sample, fitted on their own answers; "
            "held-out models test the folder")


def in_sample_line(bank, models) -> str | None:
    """:func:`in_sample_warning` for the ``models`` (names: a live run's models, a matrix's
    subjects) tested on ``bank`` (a bank folder, its path or a stored bank reference), or
    None: none of them is a source model, or ``bank`` is no bank folder."""
    from pathlib import Path

    from ..errors import AtlasError

    models = [str(m) for m in models]
    try:
        folder = bank if not isinstance(bank, (str, Path)) else (
            as_folder(bank) if Path(str(bank)).is_dir() else None)
    except (AtlasError, OSError):
        return None
    among = source_models_among(folder, models) if folder is not None else []
    return in_sample_warning(among, len(models)) if among else None


def exhausted_warning(answered: int, items: int) -> str:
    """The warning of a target asked every one of the only ``answered`` of the predictor's
    ``items`` it has answers for (a recorded row with blank cells): its score is their mean,
    known exactly, not a prediction of the mean over all the items."""
    return (f"answered only {answered} of the {items} items and asked every one: the score is "
            f"their mean (an interval of no width), not a prediction over all {items}")


def replay_predictor(folder, responses, *, budget: int, seed: int = 0,
                     selected: bool = False):
    """The folder's predictor (``folder``: a BankFolder or its path) on recorded answers
    (``responses``: the targets' matrix, a file path read as ``atlas simulate`` reads it, or a
    ResponseMatrix / DataFrame on 0-1, :func:`read_targets`): one row per target, ``subject_id``, ``n_items`` (items used, at most ``budget``),
    :data:`PREDICTION_COLUMNS` (the score and its 95% interval, on the metric's scale: 0-1, or
    the folder's score range, :func:`metric_scale`), ``se`` (the score's standard error, on
    that scale), ``method`` ("combined", or "design" for a target outside the source models),
    the model-based and
    design-based parts and theta. Each target draws from its own Generator
    (:func:`~atlascat.predict.session.subject_generator` of ``seed`` and its id), as a live
    run of it with the same seed does. With ``selected``: (that frame, the items each target
    was asked: ``subject_id``, ``item_id``, ``order`` (1 = the first drawn) and ``score`` (its
    recorded answer, on the metric's scale), one row per answer)."""
    import numpy as np

    from ..errors import BankFolderError, ResponseDataError

    folder = as_folder(folder)
    responses = read_targets(folder, responses)
    predictor = load_predictor(folder)
    if predictor is None:
        raise BankFolderError(f"the bank folder {str(folder.path)!r} has no benchmark predictor "
                              f"({PREDICTOR_FILE}); predict_scores scores an adaptive test on it")
    known = {str(i) for i in predictor.item_ids_}
    if not any(str(i) in known for i in responses.item_ids):
        raise ResponseDataError(
            f"none of the {responses.n_items} response items is one of the bank folder's "
            f"{len(known)} items (responses: {[str(i) for i in responses.item_ids[:3]]}, "
            f"folder: {[str(i) for i in predictor.item_ids_[:3]]}); give the results of the "
            "benchmark the folder was built from")
    answered = np.isfinite(responses.aligned_values(predictor.item_ids_, extra="ignore"))
    some = answered.any(axis=1)          # a target with no answer to any item: no prediction
    if not some.any():
        raise ResponseDataError(f"none of the {responses.n_subjects} models has an answer to "
                                "any of the bank folder's items (every cell of theirs is blank)")
    asked_by = responses if some.all() else responses.subset(subjects=np.flatnonzero(some))
    out = predictor.replay(asked_by, budget=budget, seed=seed, asked=selected, on_scale=False)
    pct = [float(folder.link.percentile(v)) for v in out["score"]]
    warning = np.where(out["method"] == "design",
                       "unlike the source models: the design-based estimate (random items) is "
                       "used", "")
    count = answered[some].sum(axis=1)
    gone = (count < answered.shape[1]) & (out["n_items"].to_numpy() == count)
    warning = np.array([exhausted_warning(int(k), answered.shape[1]) if g else w
                        for w, g, k in zip(warning, gone, count)], dtype=object)
    scale = metric_scale(folder)
    width = 1.0 if scale is None else float(scale[1]) - float(scale[0])   # an SE has no offset
    frame = pd.DataFrame({
        "subject_id": out["subject_id"].astype(str), "n_items": out["n_items"],
        "score": out["score"], "score_lo": out["score_lo"], "score_hi": out["score_hi"],
        "percentile": pct, "score_flag": out["flag"], "score_warning": warning,
        "method": out["method"], "se": out["se"] * width, "model_score": out["model_score"],
        "model_part": out["model_part"], "design_score": out["design_score"],
        "theta": out["theta"]})
    if not some.all():                   # the others, in the responses' order
        frame = frame.set_index("subject_id").reindex(
            [str(s) for s in responses.subject_ids]).rename_axis("subject_id").reset_index()
        frame.loc[~some, ["n_items", "score_flag", "method"]] = [0, "no_items", ""]
        frame.loc[~some, "score_warning"] = ("no answer to any of the folder's items: nothing "
                                             "to predict from")
        frame["n_items"] = frame["n_items"].astype(int)
    frame = to_metric_scale(frame, folder, [*PREDICTION_COLUMNS[:3], "model_score",
                                            "model_part", "design_score"])
    if not selected:
        return frame
    return frame, _selected_items(out, asked_by, folder)


def _selected_items(replayed: pd.DataFrame, responses, folder) -> pd.DataFrame:
    """One row per answer of a replay (:meth:`BenchmarkPredictor.replay` with ``asked``):
    ``subject_id``, ``item_id``, ``order``, ``score`` (recorded, on the metric's scale)."""
    import numpy as np

    col = {str(i): j for j, i in enumerate(responses.item_ids)}
    subj = np.repeat(replayed["subject_id"].astype(str).to_numpy(),
                     [len(x) for x in replayed["items"]])
    items = [i for x in replayed["items"] for i in x]
    rows = np.repeat(np.arange(len(replayed)), [len(x) for x in replayed["items"]])
    values = responses.values[rows, [col[i] for i in items]] if items else np.zeros(0)
    order = np.concatenate([np.arange(1, len(x) + 1) for x in replayed["items"]]
                           or [np.zeros(0, int)])
    frame = pd.DataFrame({"subject_id": subj, "item_id": items, "order": order.astype(int),
                          "score": values})
    return to_metric_scale(frame, folder, ["score"])
