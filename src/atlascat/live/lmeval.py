"""Import lm-evaluation-harness sample logs (``samples_<task>_<timestamp>.jsonl``) as responses.

(The matrix alone. :mod:`atlascat.bankdir.samplelogs` reads the same files with every item's
requests, for ``atlas build-bank``; this module reads its records, ``.jsonl.gz`` and the older
repr-string spelling included, through it.)

lm-eval-harness run with ``--log_samples`` writes one JSON object per document and line::

    {"doc_id": 0, "doc": {..., "metabench_idx": 263}, "target": "...", "filter": "none",
     "resps": [...], "filtered_resps": [...], "acc": 1.0, "acc_norm": 0.0, ...}

under ``<output_path>/<model name with '/' written '__'>/``. This is the format of the metabench
repository's logs. Each file is one subject (the model), each line one item:

- item id: ``doc[id_field]`` when the doc has it (default ``metabench_idx``, the id used by
  the response matrices and banks), else ``doc_ids[doc_id]`` when a mapping or sequence is
  given (e.g. the row order of the item file), else ``doc_id`` itself;
- score: the ``metric`` field (default: the first of ``exact_match``, ``acc``, ``acc_norm``
  present); values are 0/1 (partial credit in [0, 1] is kept as is);
- several filters for one doc (e.g. GSM8K ``strict-match`` / ``flexible-extract``): pass
  ``filter_name``; without it the file must have one filter only.

The subjects x items result is a :class:`~atlascat.responses.ResponseMatrix` (items a subject
did not answer are missing), ready for calibration or scoring.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np

from ..errors import ResponseDataError

__all__ = ["read_lmeval_samples", "read_lmeval_file", "METRIC_ORDER"]

METRIC_ORDER = ("exact_match", "acc", "acc_norm")


def read_lmeval_file(path, *, metric: str | None = None, id_field: str = "metabench_idx",
                     doc_ids: Mapping | Sequence | None = None,
                     filter_name: str | None = None) -> dict[str, float]:
    """``{item_id: score}`` from one ``samples_*.jsonl`` file (see the module docstring)."""
    from ..bankdir.samplelogs import iter_records

    path = Path(path)
    scores: dict[str, float] = {}
    filters: set[str] = set()
    chosen_metric = metric
    # records of .jsonl or .jsonl.gz, repr-string fields parsed (bankdir.samplelogs)
    for lineno, rec in iter_records(path):
        flt = str(rec.get("filter", "none"))
        filters.add(flt)
        if filter_name is not None and flt != filter_name:
            continue
        if chosen_metric is None:
            chosen_metric = next((m for m in METRIC_ORDER if m in rec), None)
            if chosen_metric is None:
                raise ResponseDataError(
                    f"{path}:{lineno}: none of the metrics {METRIC_ORDER} is present; name "
                    f"the score field with metric=... (fields: {sorted(rec)[:12]})")
        if chosen_metric not in rec:
            raise ResponseDataError(f"{path}:{lineno}: metric {chosen_metric!r} missing")
        try:
            value = float(rec[chosen_metric])
        except (TypeError, ValueError) as exc:
            raise ResponseDataError(f"{path}:{lineno}: {chosen_metric}={rec[chosen_metric]!r} "
                                    "is not a number") from exc
        if not 0.0 <= value <= 1.0:
            raise ResponseDataError(f"{path}:{lineno}: {chosen_metric}={value:g} outside [0, 1]")
        doc = rec.get("doc") if isinstance(rec.get("doc"), dict) else {}
        doc_id = rec["doc_id"]
        if id_field and id_field in doc:
            item = str(doc[id_field])
        elif doc_ids is not None:
            try:
                item = str(doc_ids[doc_id] if isinstance(doc_ids, Mapping) else doc_ids[int(doc_id)])
            except (KeyError, IndexError, ValueError) as exc:
                raise ResponseDataError(f"{path}:{lineno}: doc_id {doc_id!r} not in the given "
                                        "doc_ids mapping") from exc
        else:
            item = str(doc_id)
        if item in scores:
            raise ResponseDataError(
                f"{path}:{lineno}: item {item} appears twice"
                + (f" (filters {sorted(filters)}: pass filter_name=...)" if len(filters) > 1 else ""))
        scores[item] = value
    if filter_name is None and len(filters) > 1:
        raise ResponseDataError(f"{path}: several filters {sorted(filters)}; choose one with "
                                "filter_name=...")
    if filter_name is not None and not scores:
        raise ResponseDataError(f"{path}: no line with filter {filter_name!r} (found {sorted(filters)})")
    if not scores:
        raise ResponseDataError(f"{path}: no samples")
    return scores


def read_lmeval_samples(paths, *, task: str | None = None, metric: str | None = None,
                        id_field: str = "metabench_idx", doc_ids=None,
                        filter_name: str | None = None, subject_ids: Iterable[str] | None = None,
                        item_ids: Sequence[str] | None = None):
    """A response matrix from lm-eval-harness sample logs.

    Parameters
    ----------
    paths : a file, a folder (searched recursively for ``samples_*.jsonl``) or a list of them
    task : keep only ``samples_<task>_*.jsonl`` files (required when the folder has several tasks)
    metric, id_field, doc_ids, filter_name : see :func:`read_lmeval_file`
    subject_ids : one id per file, in file order (default: the parent folder name with
        ``__`` read as ``/``, lm-eval's convention); files of one subject are merged, each
        item's sample from the subject's latest run (``samplelogs.RERUN_RULE``)
    item_ids : column order (default: sorted numerically when all ids are integers)

    Returns
    -------
    ResponseMatrix (subjects x items, NaN where a subject has no sample for an item)
    """
    from ..responses import ResponseMatrix

    from ..bankdir.harnessruns import runs_by_model, task_of
    from ..bankdir.samplelogs import task_files

    files, _, names = task_files(paths, task, subject_ids)
    several = len({task_of(f) for f in files}) > 1     # a group's tasks: item ids task/id
    merged: dict[str, dict[str, float]] = {}
    for name, tasks in runs_by_model(names, files).items():
        into = merged.setdefault(name, {})
        for t, task_runs in tasks.items():
            prefix = f"{t}/" if several else ""
            for f in task_runs:              # the latest run first: each item's latest sample
                scores = read_lmeval_file(f, metric=metric, id_field=id_field,
                                          doc_ids=doc_ids, filter_name=filter_name)
                into.update({prefix + i: v for i, v in scores.items()
                             if prefix + i not in into})
    if item_ids is None:
        all_items = sorted({i for s in merged.values() for i in s})
        if all(i.lstrip("-").isdigit() for i in all_items):
            all_items.sort(key=int)
        item_ids = all_items
    col = {item: j for j, item in enumerate(item_ids)}
    values = np.full((len(merged), len(item_ids)), np.nan)
    for r, scores in enumerate(merged.values()):
        for item, v in scores.items():
            if item in col:
                values[r, col[item]] = v
    return ResponseMatrix(values, list(merged), list(item_ids), on_empty="keep")
