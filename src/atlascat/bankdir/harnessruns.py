"""How lm-evaluation-harness lays out its runs: the task and timestamp of a sample log's name,
a model's re-runs, and the group tasks the run folders' ``results_*.json`` name.

``lm_eval --log_samples --output_path OUT`` writes ``OUT/<model, '/' -> '__'>/`` with
``samples_<task>_<timestamp>.jsonl`` per task and ``results_<timestamp>.json`` per run
(``<timestamp>``: ``datetime.now().isoformat()`` with ':' written '-', so names sort in time).
A group task (``--tasks mmlu``) logs one file per leaf task (``mmlu_anatomy``, ...); the
results file's ``group_subtasks`` maps each group to its members (groups nest: ``mmlu`` ->
``mmlu_stem`` -> ``mmlu_anatomy``).
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Mapping, Sequence

from ..errors import ResponseDataError

__all__ = ["task_of", "legacy_task", "legacy_model", "run_stamp", "distinct_runs", "runs_by_model", "group_tasks", "task_sizes",
           "harness_version", "metric_refusal", "NOT_A_MEAN", "subject_of", "sample_files",
           "task_files", "OtherTaskError",
           "limit_warning", "RERUN_RULE"]

_SAMPLES = re.compile(r"^samples_(?P<task>.+?)_(?P<stamp>\d{4}-\d{2}-\d{2}T[\d\-:.]+)"
                      r"\.jsonl(\.gz)?$")

#: how re-runs of one model (several ``samples_<task>_<timestamp>`` files) are read
RERUN_RULE = ("each item's sample from the model's latest run (the file name's timestamp); "
              "items only an earlier run logged are kept from it")


def task_of(path: Path) -> str | None:
    """The task of ``samples_<task>_<timestamp>.jsonl[.gz]``, or of lm-eval 0.4.0-0.4.2's
    ``<model_args>_<task>.jsonl`` (:func:`legacy_task`); None for another name."""
    m = _SAMPLES.match(path.name)
    if m:
        return m.group("task")
    legacy = legacy_task(path)
    if legacy:
        return legacy
    name = re.sub(r"\.jsonl(\.gz)?$", "", path.name)
    if path.name.startswith("samples_") and name != path.name:
        return name[len("samples_"):]
    return None


_FOLDER_TASKS: dict[tuple[str, int], tuple[str, ...]] = {}


def _folder_tasks(folder: Path) -> tuple[str, ...]:
    """The tasks the ``results.json`` of lm-eval 0.4.0-0.4.2 in ``folder`` ran (its
    ``configs``), longest first; () without one."""
    res = folder / "results.json"
    try:
        key = (str(res), res.stat().st_mtime_ns)
    except OSError:
        return ()
    if key not in _FOLDER_TASKS:
        try:
            configs = json.loads(res.read_text(encoding="utf-8")).get("configs")
        except (OSError, ValueError, AttributeError):
            configs = None
        _FOLDER_TASKS[key] = tuple(sorted(map(str, configs), key=len, reverse=True)
                                   if isinstance(configs, dict) else ())
    return _FOLDER_TASKS[key]


def legacy_task(path: Path) -> str | None:
    """The task of a sample log lm-eval 0.4.0-0.4.2 wrote: ``<output_path>/<model_args, '/'
    and '=' -> '__'>_<task>.jsonl`` (one JSON list) beside its ``results.json``, whose
    ``configs`` name the task; None for another file."""
    name = re.sub(r"\.gz$", "", Path(path).name)
    if name.startswith("samples_") or not name.endswith(".jsonl"):
        return None
    return next((t for t in _folder_tasks(Path(path).parent)
                 if name.endswith(f"_{t}.jsonl") and len(name) > len(t) + 7), None)


def legacy_model(path: Path, task: str) -> str:
    """The model of a 0.4.0-0.4.2 log: its ``pretrained=`` argument ('__' read as '/')."""
    prefix = re.sub(r"\.gz$", "", Path(path).name)[: -len(f"_{task}.jsonl")]
    first = prefix.split(",")[0]
    return first.removeprefix("pretrained__").replace("__", "/")


def run_stamp(path: Path) -> str:
    """The run's timestamp of ``samples_<task>_<timestamp>.jsonl`` ('' without one)."""
    m = _SAMPLES.match(path.name)
    return m.group("stamp") if m else ""


def distinct_runs(files) -> set[str]:
    """The distinct runs among one model's logs of a task: their timestamps (a log and its
    gzip'd copy are one run; a log without a timestamp, lm-eval 0.4.0-0.4.2's, is its own)."""
    return {run_stamp(f) or str(f) for f in files}


def runs_by_model(names: Sequence[str], files: Sequence[Path]
                  ) -> dict[str, dict[str, list[Path]]]:
    """``{model: {task: [its log files, the latest run first]}}`` (by the timestamp in the
    file name, then the path): several files of one model and task are re-runs
    (:data:`RERUN_RULE`)."""
    runs: dict[str, dict[str, list[Path]]] = {}
    for name, f in zip(names, files):
        runs.setdefault(name, {}).setdefault(task_of(f) or "?", []).append(Path(f))
    return {name: {t: sorted(fs, key=lambda f: (run_stamp(f), str(f)), reverse=True)
                   for t, fs in tasks.items()} for name, tasks in runs.items()}


def group_tasks(files: Sequence[Path]) -> dict[str, frozenset[str]]:
    """Each group the ``results_*.json`` beside ``files`` name -> its leaf tasks (nested
    groups flattened); unreadable results files are passed over."""
    tree: dict[str, set[str]] = {}
    for folder in dict.fromkeys(Path(f).parent for f in files):
        for res in sorted(folder.glob("results_*.json")):
            try:
                d = json.loads(res.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            groups = d.get("group_subtasks") if isinstance(d, dict) else None
            for g, members in (groups.items() if isinstance(groups, dict) else ()):
                if isinstance(members, list) and members:
                    tree.setdefault(str(g), set()).update(map(str, members))

    def leaves(g: str, above: frozenset) -> set[str]:
        out: set[str] = set()
        for t in tree.get(g, ()):
            out |= leaves(t, above | {g}) if t in tree and t not in above else {t}
        return out

    return {g: frozenset(leaves(g, frozenset())) for g in tree}


def task_sizes(files: Sequence[Path]) -> dict[str, int]:
    """``{task: documents in the task}`` from each log's own ``results_<timestamp>.json``
    (``n-samples``' ``original``; a run with ``--limit`` logs fewer); {} for a task without."""
    out: dict[str, int] = {}
    for f in map(Path, files):
        task = str(task_of(f))
        try:
            n = json.loads((f.parent / f"results_{run_stamp(f)}.json").read_text(
                encoding="utf-8"))["n-samples"][task]
            out[task] = max(out.get(task, 0), int(n["original"]))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return out


def limit_warning(counts: dict | None) -> str | None:
    """The build's line when the logs cover only part of the task (``lm_eval --limit``):
    ``counts`` ``{"logged": items read, "in_task": documents in the task(s)}``."""
    if not counts or counts["logged"] >= counts["in_task"]:
        return None
    return (f"the logs cover {counts['logged']} of the task's {counts['in_task']} documents "
            "(lm_eval --limit, results_*.json): the bank's score is the mean over those, not "
            "over the whole task")


def harness_version(files: Sequence[Path]) -> str | None:
    """``lm_eval_version`` (or ``git_hash``) from a ``results_*.json`` beside the logs."""
    for folder in dict.fromkeys(f.parent for f in files):
        for res in sorted(folder.glob("results_*.json")):
            try:
                d = json.loads(res.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError):
                continue
            for key in ("lm_eval_version", "git_hash"):
                if d.get(key):
                    return f"{key}={d[key]}"
    return None


#: lm-eval's registered aggregations that are not a mean over samples (the task's score is
#: not the mean of its per-sample values)
NOT_A_MEAN = frozenset({"median", "perplexity", "weighted_perplexity", "bits_per_byte", "bleu",
                        "chrf", "ter", "f1", "matthews_corrcoef", "brier_score"})


def metric_refusal(files: Sequence[Path], metric: str) -> str | None:
    """One line refusing ``metric`` when a ``results_*.json`` beside the logs says the harness
    counts it lower-is-better (its ``higher_is_better``) or aggregates it otherwise than by
    the mean over samples (its task config's ``metric_list``); None otherwise, or without
    results files (the per-sample values, :func:`~.samplelogs.corpus_metric_error`, tell
    the rest)."""
    for folder, tasks in _tasks_by_folder(files).items():
        for res in sorted(folder.glob("results_*.json")):
            try:
                d = json.loads(res.read_text(encoding="utf-8"))
                better = {t: (d.get("higher_is_better") or {}).get(t) or {} for t in tasks}
                lists = {t: ((d.get("configs") or {}).get(t) or {}).get("metric_list") or []
                         for t in tasks}
            except (OSError, ValueError, AttributeError):
                continue
            for t in sorted(tasks):
                if isinstance(better[t], dict) and better[t].get(metric) is False:
                    return (f"metric {metric!r} of task {t!r} is lower-is-better "
                            f"({res.name}'s higher_is_better): a bank measures an ability "
                            "its scores rise with; choose another per-sample metric with "
                            "--metric")
                aggs = {str(m.get("metric")): m.get("aggregation") for m in lists[t]
                        if isinstance(m, dict)}
                if aggs.get(metric) in NOT_A_MEAN:
                    means = [m for m, a in aggs.items() if a == "mean"]
                    return (f"metric {metric!r} of task {t!r} is aggregated by "
                            f"{aggs[metric]!r} over the whole task ({res.name}), not as a mean "
                            "over items, so no item has a score of its own that adds up to it; "
                            + (f"choose a per-sample metric the harness averages with "
                               f"--metric: {', '.join(means)}" if means else
                               "the task has no per-sample metric to build a bank from"))
    return None


def _tasks_by_folder(files: Sequence[Path]) -> dict[Path, set[str]]:
    out: dict[Path, set[str]] = {}
    for f in map(Path, files):
        out.setdefault(f.parent, set()).add(str(task_of(f)))
    return out


def subject_of(path: Path) -> str:
    """lm-eval writes a model's samples under a folder named after it, '/' -> '__' (0.4.0-0.4.2:
    in the file's name, :func:`~.harnessruns.legacy_model`)."""
    legacy = legacy_task(path)
    return legacy_model(path, legacy) if legacy else path.parent.name.replace("__", "/")


def sample_files(paths) -> list[Path]:
    """``samples_*.jsonl[.gz]`` files: the given files, and those found under the given folders."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            files.extend(sorted([*p.rglob("samples_*.jsonl"), *p.rglob("samples_*.jsonl.gz"),
                                 *(f for f in p.rglob("*.jsonl") if legacy_task(f))]))
        elif p.exists():
            files.append(p)
        else:
            raise ResponseDataError(f"{str(p)!r} does not exist; give sample log files "
                                    "(samples_<task>_*.jsonl) or the folders holding them")
    return files


class OtherTaskError(ResponseDataError):
    """Sample logs hold none of the task asked for, only others (``found``: their tasks, as
    one text): :func:`task_files`."""

    def __init__(self, message: str, found: str = ""):
        super().__init__(message)
        self.found = found


def task_files(paths, task: str | None = None, subject_ids: Sequence[str] | None = None
               ) -> tuple[list[Path], str, list[str]]:
    """(files, task, one model name per file) of the sample logs of ONE task found in
    ``paths`` (files and/or folders); ``task`` keeps only that task's files. A file given by
    a name lm_eval does not write is read as ``task`` (required then), its model named by its
    folder, or by its own name when the folder holds several such files. One-line errors:
    no file, several tasks mixed, a task unknown, a name count that does not match."""
    files = sample_files(paths)
    found = sorted({task_of(f) or "?" for f in files})
    groups = group_tasks(files) if len(found) > 1 or (task and task not in found) else {}
    label = task
    if task is not None:
        leaves = {task} if task in found else groups.get(task, frozenset())
        files = [f for f in files if task_of(f) in leaves or task_of(f) is None]
    if not files:
        given = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
        where = f"no samples_*.jsonl file found in {[str(p) for p in given]}"
        if task and found:
            raise OtherTaskError(f"{where} for task {task!r}; the logs there are of "
                                 f"{_task_list(found, groups)}: give one to --task",
                                 _task_list(found, groups))
        raise ResponseDataError(where + (f" for task {task!r}" if task else "")
                                + "; run lm_eval with --log_samples")
    unnamed = [f for f in files if task_of(f) is None]    # a name lm_eval did not write
    if unnamed and task is None:
        raise ResponseDataError(f"cannot tell the task of {str(unnamed[0])!r} (lm_eval names "
                                "its logs samples_<task>_<timestamp>.jsonl): give the task "
                                "with --task")
    tasks = sorted({task_of(f) or str(task) for f in files})
    if label is None:
        whole = sorted(g for g, leaves in groups.items() if leaves == set(tasks))
        if len(tasks) > 1 and not whole:
            raise ResponseDataError(f"sample logs of different tasks mixed "
                                    f"({_task_list(tasks, groups)}); give one task's files or "
                                    "choose one with --task")
        label = min(whole, key=len) if len(tasks) > 1 else tasks[0]   # the outer group
    crowded = {d for d in (f.parent for f in unnamed)
               if sum(g.parent == d for g in unnamed) > 1}   # one folder, a file per model
    names = list(subject_ids) if subject_ids is not None else [
        re.sub(r"\.jsonl(\.gz)?$", "", f.name).replace("__", "/") if f in unnamed
        and f.parent in crowded else subject_of(f) for f in files]
    if len(names) != len(files):
        raise ResponseDataError(f"{len(names)} model names for {len(files)} files")
    return files, label, names


def _task_list(tasks: Sequence[str], groups: Mapping) -> str:
    """The tasks found, a group's leaves said once by the group ('mmlu (57 tasks)')."""
    top = sorted(((g, leaves) for g, leaves in groups.items() if leaves <= set(tasks)
                  and len(leaves) > 1), key=lambda gl: -len(gl[1]))
    said, out = set(), []
    for g, leaves in top:
        if not leaves & said:
            said |= leaves
            out.append(f"{g} (a group of {len(leaves)} tasks)")
    return ", ".join(out + [t for t in tasks if t not in said])
