"""lm-evaluation-harness sample logs (``--log_samples``) with the exact requests of every item.

The harness writes one JSON object per document and line into
``<output_path>/<model, '/' written '__'>/samples_<task>_<timestamp>.jsonl`` (``.jsonl.gz``
read as well; lm-eval 0.4.0-0.4.2's ``<model_args>_<task>.jsonl`` JSON lists too; re-runs,
groups and ``--limit``: :mod:`.harnessruns`)::

    {"doc_id": 0, "doc": {...}, "target": "...", "arguments": {...}, "resps": [...],
     "filtered_resps": [...], "filter": "none", "metrics": ["acc"], "acc": 1.0, ...}

Two spellings of the same record are read:

- lm-eval 0.4.x: ``arguments`` is a JSON object ``{"gen_args_0": {"arg_0": context,
  "arg_1": continuation}, "gen_args_1": ...}``, numbers are numbers;
- older logs (metabench's, ``../shared/data/lmeval_samples``): ``arguments``, ``doc``,
  ``resps`` and the metric are strings holding a Python ``repr`` (``"{'gen_args_0': ...}"``,
  ``'0.0'``), parsed without ``eval`` (:func:`atlascat.content.parsing.parse_literal`);
  ``arguments`` may also be a list of ``[context, continuation]`` pairs.

Each ``gen_args_k`` is one request, in order: ``loglikelihood`` when ``arg_1`` is a string (the
continuation; multiple choice sends one per choice, WinoGrande-style tasks put the option in the
context), ``generate_until`` when ``arg_1`` is the generation kwargs (``until``, ``max_gen_toks``,
...). ``loglikelihood_rolling`` (a context alone) has no 0/1 score and is refused.

**The scoring rule** (what turns a model's outputs into the item's score, as the harness did):

========================  =====================================================================
metric                    rule (:mod:`atlascat.content.requests`)
========================  =====================================================================
acc_norm                  ``acc_norm``: argmax of ll_j / characters of choice j
acc, mc1, any other       ``acc``: argmax of ll_j (first maximum); an item of one request
(log-likelihood)          (LAMBADA's greedy ``acc``) is kept by name, ``metric:<name>``
exact_match (generation)  ``gsm8k_exact`` when the target carries ``#### <number>`` (GSM8K's
                          strict match; ``gsm8k_flexible``, its last number, read with the
                          ``flexible-extract`` filter), else ``exact_match``: the generation
                          cut at the item's stop strings, stripped, equal to the stripped target
                          (``exact_match_norm``, SQuAD's normalisation, or ``exact_match_raw``,
                          not stripped: the harness's exact_match without a whitespace
                          filter, when it reproduces more logged scores:
                          :attr:`SampleLogs.match_rule`)
f1 (generation)           ``f1``: token F1 of the cut generation against the target (in [0, 1]);
                          a ``target`` list (TriviaQA's aliases): 1 if any target scores > 0
mc2 (log-likelihood)      ``mc2``: probability mass of the true options (the leading
                          ``mc2_true``, the count that reproduces the logged scores)
a continuous metric       ``mc2`` / ``f1`` when that rule reproduces at least 99% of its logged
under another name        scores from the logged outputs (lm-eval 0.4 logs TruthfulQA's mc2 as
                          ``acc``; :attr:`SampleLogs.computed_rule`)
any other metric whose    ``metric:<name>``: kept with its requests; a live run refuses such an
scores are not 0/1        item naming the metric (ask the folder with ``--subject cmd:``)
(ROUGE, BLEU, a judge)
========================  =====================================================================

**Scales.** A per-sample score must lie in [0, 1], or on a declared scale (``score_range``,
``atlas build-bank --score-range LO HI``; the harness's BLEU / chrF / ROUGE ``_max`` fields are
known to be 0-100, :data:`KNOWN_RANGES`), mapped to [0, 1] once here, at the boundary; a value
outside the declared range is refused. A metric the harness aggregates over the corpus (its
per-sample field holds a (reference, prediction) pair: corpus BLEU, chrF, TER, macro F1, MCC)
is not a mean over items and is refused (:func:`corpus_metric_error`); so is a metric the run's
``results_*.json`` call lower-is-better or aggregate otherwise (:func:`.metric_refusal`).

The gold option of a log-likelihood item is ``target`` when it is an index (or the text of
exactly one continuation); otherwise (WinoGrande logs the shared continuation as its target) it
is the option every logged model's outputs and metric agree on: with rule r, option g is
consistent with a model iff ``[r picks g] == metric``. Every item records how many of the logged
(model, item) scores its rule reproduces from the logged outputs (``agreement``): 1.0 means the
bank scores a new model as the harness scored the logged ones.

Item id: ``doc[id_field]`` when the doc has it (default ``metabench_idx``), else ``doc_id``.
"""
from __future__ import annotations

import gzip
import itertools
import json
import os
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Iterator, Mapping, Sequence

import numpy as np

from ..content.parsing import parse_literal
from ..content.requests import (GSM8K_MAX_GEN_TOKS, METRIC_RULE_PREFIX, Request, gsm8k_cut,
                                gsm8k_extract, mc2_score, score_outputs)
from ..errors import AtlasError, ConfigError, ResponseDataError
from .harnessruns import (RERUN_RULE, distinct_runs, harness_version, metric_refusal,
                          runs_by_model, sample_files, subject_of, task_files, task_of,
                          task_sizes)

__all__ = ["SampleLogs", "LoggedItem", "read_sample_logs", "sample_files", "iter_records",
           "sampled_warning",
           "parse_arguments", "task_of", "subject_of", "NON_METRIC_FIELDS", "KNOWN_RANGES",
           "corpus_metric_error", "RERUN_RULE"]

#: record fields that are not per-sample metrics
NON_METRIC_FIELDS = frozenset({"doc_id", "doc", "target", "arguments", "resps", "filtered_resps",
                               "filter", "metrics", "doc_hash", "prompt_hash", "target_hash"})


def _maybe_literal(value, what: str):
    """A field the older logs store as a Python repr string -> its value (else as is)."""
    if isinstance(value, str) and value[:1] in "[{(":
        try:
            return parse_literal(value, what)
        except AtlasError:
            return value
    return value


def iter_records(path) -> Iterator[tuple[int, dict]]:
    """``(line number, record)`` of one sample log, repr-string fields parsed."""
    path = Path(path)
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8") as fh:
            for lineno, rec in _json_records(fh, path):
                if not isinstance(rec, dict) or "doc_id" not in rec:
                    raise ResponseDataError(f"{path}:{lineno}: no 'doc_id' field; is this an "
                                            "lm-eval-harness samples_*.jsonl log?")
                for key in ("arguments", "doc", "resps", "filtered_resps", "metrics"):
                    if key in rec:
                        rec[key] = _maybe_literal(rec[key], key)
                yield lineno, rec
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise ResponseDataError(f"{path}: cannot read it ({exc}); give an uncompressed or "
                                "gzip-compressed samples_*.jsonl log") from None


def _json_records(fh, path: Path) -> Iterator[tuple[int, object]]:
    """``(line or record number, JSON value)``: one per line, or the records of one JSON list
    (lm-eval 0.4.0-0.4.2 wrote each task's samples as a list, ``indent=2``)."""
    first = fh.readline()
    if first.lstrip().startswith("["):
        try:
            records = json.loads(first + fh.read())
        except json.JSONDecodeError as exc:
            raise ResponseDataError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno}); "
                                    "is this an lm-eval-harness sample log?") from None
        yield from enumerate(records if isinstance(records, list) else [records], 1)
        return
    for lineno, line in enumerate(itertools.chain([first], fh), 1):
        if not line.strip():
            continue
        try:
            yield lineno, json.loads(line)
        except json.JSONDecodeError as exc:
            raise ResponseDataError(f"{path}:{lineno}: not valid JSON ({exc.msg}); is "
                                    "this an lm-eval-harness samples_*.jsonl log?") from None


def parse_arguments(arguments, where: str = "?") -> tuple[Request, ...]:
    """The requests of one logged ``arguments`` field (both spellings, see the module doc)."""
    if isinstance(arguments, Mapping):
        keys = sorted(arguments, key=lambda k: int(re.sub(r"\D", "", str(k)) or 0))
        pairs = []
        for k in keys:
            a = arguments[k]
            if not isinstance(a, Mapping) or "arg_0" not in a:
                raise ResponseDataError(f"{where}: arguments[{k!r}] has no 'arg_0'")
            pairs.append([a["arg_0"], *([a["arg_1"]] if "arg_1" in a else [])])
    elif isinstance(arguments, (list, tuple)):
        pairs = [list(a) if isinstance(a, (list, tuple)) else [a] for a in arguments]
    else:
        raise ResponseDataError(f"{where}: 'arguments' is neither an object nor a list "
                                f"({type(arguments).__name__}); is this an lm-eval sample log?")
    if not pairs:
        raise ResponseDataError(f"{where}: 'arguments' holds no request")
    out = []
    for pair in pairs:
        if len(pair) < 2:
            raise ResponseDataError(f"{where}: a request with a context alone "
                                    "(loglikelihood_rolling, perplexity) has no 0/1 score; build "
                                    "banks from multiple-choice or generation tasks")
        ctx, second = pair[0], pair[1]
        if isinstance(second, Mapping):
            until = second.get("until", ())
            until = (until,) if isinstance(until, str) else tuple(str(u) for u in until or ())
            other = {str(k): v for k, v in second.items() if k not in ("until", "max_gen_toks")}
            out.append(Request("generate_until", str(ctx), until=until,
                               max_gen_toks=int(second.get("max_gen_toks", GSM8K_MAX_GEN_TOKS)),
                               gen_kwargs=json.dumps(other, sort_keys=True, default=str)
                               if other else ""))
        else:
            out.append(Request("loglikelihood", str(ctx), str(second)))
    if len({r.kind for r in out}) > 1:
        raise ResponseDataError(f"{where}: an item mixes log-likelihood and generation requests")
    return tuple(out)


#: the harness's per-sample metrics on a scale other than [0, 1] (lm-eval's TruthfulQA
#: generation and translation tasks log BLEU, chrF and ROUGE in points; TruthfulQA's ``_diff``,
#: the best true reference's minus the best false one's, -100 to 100): (low, high)
KNOWN_RANGES = {"bleu": (0.0, 100.0), "sacrebleu": (0.0, 100.0), "chrf": (0.0, 100.0),
                **{f"{m}_max": (0.0, 100.0) for m in ("bleu", "rouge1", "rouge2", "rougeL")},
                **{f"{m}_diff": (-100.0, 100.0) for m in ("bleu", "rouge1", "rouge2", "rougeL")}}


def sampled_warning(n_items: int) -> str:
    """The build's warning for items whose logged generations were sampled (``do_sample``, a
    temperature above 0): every generating subject but ``cmd:`` decodes greedily."""
    return (f"{n_items} item(s) were logged with sampled generations (do_sample / temperature): "
            "completions:, hf: and lmeval: decode greedily, so they ask them otherwise; a cmd: "
            "program is sent the logged settings")


def corpus_metric_error(metric: str, where: str, rec: Mapping | None = None
                        ) -> ResponseDataError:
    """The one line for a metric the harness aggregates over the corpus; with the record,
    it names the record's per-sample metrics (or says it has none)."""
    fix = "choose a per-sample metric with --metric"
    if rec is not None:
        named = dict.fromkeys([*_metrics_of(rec), *_metrics_of({k: v for k, v in rec.items()
                                                                 if k != "metrics"})])
        scores = [m for m in named if m in rec and _is_score(rec[m])]
        fix = (f"choose one of its per-sample metrics with --metric: {', '.join(scores)}"
               if scores else f"its records hold no per-sample metric ({', '.join(named)}): "
               "these logs cannot build a bank (--metric names a field that holds one)")
    return ResponseDataError(
        f"{where}: metric {metric!r} logs a (reference, prediction) pair per sample, not a "
        "score: the harness aggregates it over the whole corpus (corpus BLEU, chrF, TER, macro "
        f"F1, MCC), which is not a mean over items, so no item has a score of its own; {fix}")


def _is_score(value) -> bool:
    """Whether a logged metric value is a number (not a corpus metric's pair)."""
    try:
        return not isinstance(value, (list, tuple, dict)) and np.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def _number(value, where: str, metric: str, score_range=None, rec=None) -> float:
    """The per-sample score in [0, 1]: the logged value, mapped from ``score_range`` (lo, hi)
    to [0, 1] when given (a value outside it is refused); ``rec``: the record, for the
    error's alternatives."""
    if isinstance(value, (list, tuple, dict)) or (isinstance(value, str)
                                                  and value.strip()[:1] in ("(", "[", "{")):
        raise corpus_metric_error(metric, where, rec)
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ResponseDataError(f"{where}: {metric}={value!r} is not a number") from None
    if not np.isfinite(v):
        raise ResponseDataError(f"{where}: {metric}={v} is not a finite number (a sample the "
                                "harness could not score); re-run the harness on it or leave "
                                "the model's log out")
    if score_range is not None:
        lo, hi = score_range
        if not lo <= v <= hi:
            raise ResponseDataError(f"{where}: {metric}={v:g} outside the declared range "
                                    f"[{lo:g}, {hi:g}]; give the metric's range with "
                                    "--score-range LO HI")
        return (v - lo) / (hi - lo)
    if not 0.0 <= v <= 1.0:
        raise ResponseDataError(f"{where}: {metric}={v:g} outside [0, 1]; give the metric's "
                                "range with --score-range LO HI (BLEU: 0 100, a 1-10 rating: "
                                "1 10)")
    return v


def _metrics_of(rec: Mapping) -> list[str]:
    """The record's per-sample metrics: its ``metrics`` list, else its numeric fields."""
    listed = rec.get("metrics")
    if isinstance(listed, (list, tuple)) and listed:
        return [str(m) for m in listed]
    out = []
    for k, v in rec.items():
        if k in NON_METRIC_FIELDS:
            continue
        try:
            float(v)
        except (TypeError, ValueError):
            continue
        out.append(k)
    return out


def _outputs(rec: Mapping, kind: str, n: int):
    """A logged model's outputs for the rule: one log-likelihood per request, or the raw
    generation (None when the log does not hold them in a readable form)."""
    try:
        if kind == "generate_until":
            resps = rec.get("resps")
            text = resps[0][0] if isinstance(resps[0], (list, tuple)) else resps[0]
            return [str(text)]
        vals = rec.get("filtered_resps", rec.get("resps"))
        out = []
        for v in vals:
            while isinstance(v, (list, tuple)):
                v = v[0]
            out.append(float(v))
        return out if len(out) == n else None
    except (TypeError, ValueError, IndexError, KeyError):
        return None


def _extracted(rec: Mapping, output, until) -> bool:
    """Whether a generation's filtered response is other than its raw one cut at the stop
    strings (not only by whitespace): the harness scored an answer a filter extracted."""
    try:
        kept = rec.get("filtered_resps")
        kept = kept[0] if isinstance(kept, (list, tuple)) else kept
        kept = kept[0] if isinstance(kept, (list, tuple)) else kept
        return output is not None and str(kept).strip() != gsm8k_cut(output[0], until).strip()
    except (IndexError, TypeError):
        return False


@dataclass(frozen=True)
class LoggedItem:
    """One document of a task: its requests (as logged), target, doc and where it came from."""

    item_id: str
    doc_id: str
    requests: tuple[Request, ...]
    target: str
    doc: object
    arguments: object = None
    #: the targets of a task with several (``multiple_target``: any one matches), else ()
    targets: tuple = ()

    @property
    def kind(self) -> str:
        return self.requests[0].kind

    @property
    def gold_text(self) -> str | tuple:
        """What a generation is scored against: the target, or the tuple of its targets."""
        return self.targets if len(self.targets) > 1 else self.target


@dataclass
class SampleLogs:
    """What :func:`read_sample_logs` found: per model the 0/1 scores, per item the requests.

    ``outputs[model][item]``: the logged outputs the rule check uses; ``harness``: the version
    the run folders' ``results_*.json`` name (None when absent)."""

    task: str
    metric: str
    filter: str | None
    files: list[Path]
    scores: dict = field(default_factory=dict)
    outputs: dict = field(default_factory=dict)
    items: dict = field(default_factory=dict)
    harness: str | None = None
    score_range: tuple | None = None
    #: models logged in several runs: ``{model: {"runs", "kept" (the latest files of the
    #: tasks run more than once), "superseded"
    #: (older samples of items a later run logged)}}`` (:data:`RERUN_RULE`)
    reruns: dict = field(default_factory=dict)
    #: the per-sample metrics the first record logs, when ``metric`` was not given and so is
    #: the first of them (empty when given)
    metrics_logged: list = field(default_factory=list)
    #: ``{"logged": items read, "in_task": the task's documents}`` when the ``results_*.json``
    #: beside the logs tell every task's size (:func:`~.harnessruns.task_sizes`), else {}
    n_samples: dict = field(default_factory=dict)
    #: items left out as not every model logged them (:meth:`keep_common_items`)
    dropped_missing: list = field(default_factory=list)
    #: the tasks whose logs were read: ``[task]``, or a group's tasks (``mmlu_anatomy``, ...)
    tasks: list = field(default_factory=list)
    #: generations whose filtered response is not the raw one (a regex filter extracted the
    #: scored answer): a match no rule reproduces is then the metric's, not a rule's
    extracted: int = 0

    @property
    def models(self) -> list[str]:
        return list(self.scores)

    def item_ids(self) -> list[str]:
        ids = list(dict.fromkeys(i for sc in self.scores.values() for i in sc))
        if all(i.lstrip("-").isdigit() for i in ids):
            ids.sort(key=int)
        return ids

    def keep_common_items(self, common: bool = False) -> list[str]:
        """Models that logged different items (another ``--limit``, a run cut short): refused,
        one line naming the models short of items, or with ``common`` only the items every
        model logged are kept (the rest recorded in :attr:`dropped_missing`, returned)."""
        sets = {m: set(sc) for m, sc in self.scores.items()}
        every = set.intersection(*sets.values()) if sets else set()
        ids = self.item_ids()
        gone = [i for i in ids if i not in every]
        if gone and not common:
            short = sorted((m for m in sets if len(sets[m]) < len(ids)), key=lambda m:
                           len(sets[m]))
            named = ", ".join(f"{m!r} {len(sets[m])}" for m in short[:3])
            raise ResponseDataError(
                f"models logged different items: {len(gone)} of {len(ids)} items are missing "
                f"from some model's log (items logged: {named}"
                + (f" and {len(short) - 3} more models" if len(short) > 3 else "")
                + "); run every model on the same task and --limit, leave the short logs out, "
                "or keep the items every model logged with --common-items")
        for m in self.scores:
            for i in gone:
                self.scores[m].pop(i, None)
                self.outputs[m].pop(i, None)
        for i in gone:
            self.items.pop(i, None)
        self.dropped_missing = gone
        return gone

    def matrix(self):
        """models x items ResponseMatrix (NaN where a model has no sample of an item), on
        [0, 1]: a metric on another scale (``score_range``) mapped as (x - lo) / (hi - lo)."""
        from ..responses import ResponseMatrix

        ids = self.item_ids()
        col = {i: j for j, i in enumerate(ids)}
        values = np.full((len(self.scores), len(ids)), np.nan)
        for r, sc in enumerate(self.scores.values()):
            for item, v in sc.items():
                values[r, col[item]] = v
        return ResponseMatrix(values, list(self.scores), ids, on_empty="keep")

    def write(self, path) -> Path:
        """The models x items matrix as a file (:meth:`ResponseMatrix.write`) on the metric's
        own scale, as logged (BLEU's 0-100 under ``score_range``): what ``atlas simulate`` and
        ``replay:`` read against a bank folder built from these logs."""
        return self.matrix().write(path, score_range=self.score_range)

    def rule_fields(self, item_id: str) -> dict:
        """The request metadata columns of one item (``REQUEST_COLUMNS`` + until/max_gen_toks)
        and the share of logged scores the rule reproduces (``agreement``, NaN without outputs).

        The gold option and the rule follow the module docstring; an item whose gold the logs
        do not determine gets ``gold = -1``."""
        it = self.items[item_id]
        reqs = it.requests
        logged = [(self.outputs[m].get(item_id), self.scores[m].get(item_id))
                  for m in self.scores]
        logged = [(o, s) for o, s in logged if o is not None and s is not None]
        if it.kind == "generate_until" and (self.metric == "f1"
                                            or self.computed_rule == "f1"):
            return self._f1_fields(it, logged)
        if it.kind == "loglikelihood" and (self.metric == "mc2"
                                           or self.computed_rule == "mc2"):
            return self._mc2_fields(it, logged)
        # a metric atlas cannot compute, kept by name (one continuation: LAMBADA's acc is
        # whether it is the model's greedy one, no argmax over options)
        if self.continuous or len(reqs) < 2 and it.kind == "loglikelihood":
            return self._metric_fields(it)
        if it.kind == "generate_until":
            target = str(it.target)
            rule = (("gsm8k_flexible" if self.filter == "flexible-extract" else "gsm8k_exact")
                    if "#### " in target else self.match_rule)
            if rule.startswith(METRIC_RULE_PREFIX):      # a 0/1 metric no match reproduces
                return self._metric_fields(it)
            gold_text = gsm8k_extract(target) if "#### " in target else it.gold_text
            out = {**self._generation_base(it), "rule": rule,
                   "target": gold_text if isinstance(gold_text, str) else target}
            hits = [score_outputs(rule, o, gold=gold_text, until=reqs[0].until) == round(s)
                    for o, s in logged]
            out["agreement"] = float(np.mean(hits)) if hits else float("nan")
            return out
        rule = "acc_norm" if self.metric == "acc_norm" else "acc"
        ctxs = [r.context for r in reqs]
        conts = [r.continuation for r in reqs]
        prefix = os.path.commonprefix(ctxs)
        suffixes = [c[len(prefix):] for c in ctxs]
        norm = [len(c) - 1 if c.startswith(" ") else len(c) for c in conts]
        n = len(reqs)
        gold_t = _gold_from_target(it.target, conts)
        chosen = []
        for o, s in logged:
            if rule == "acc_norm" and min(norm) <= 0:
                break
            ll = np.asarray(o, float)
            pick = int(np.argmax(ll / np.asarray(norm, float) if rule == "acc_norm" else ll))
            chosen.append((pick, s >= 0.5))
        consistent = [g for g in range(n) if all((p == g) == ok for p, ok in chosen)]
        if gold_t is not None and (gold_t in consistent or not chosen):
            gold = gold_t
        elif len(consistent) == 1:
            gold = consistent[0]
        elif gold_t is not None:
            gold = gold_t
        else:
            gold = -1
        out = {"rule": rule, "context": prefix,
               "ctx_suffixes": suffixes if any(suffixes) else [], "continuations": conts,
               "gold": int(gold), "target": "", "n_choices": n, "mc2_true": 0}
        hits = [(p == gold) == ok for p, ok in chosen]
        out["agreement"] = float(np.mean(hits)) if hits else float("nan")
        return out


    @property
    def continuous(self) -> bool:
        """Whether the metric gives scores other than 0/1 (F1, ROUGE, a rescaled rating)."""
        return any(v not in (0.0, 1.0) for sc in self.scores.values() for v in sc.values())

    @cached_property
    def match_rule(self) -> str:
        """The 0/1 rule of generation items (but GSM8K's): ``exact_match``, or
        ``exact_match_norm`` when it reproduces more of the logged scores (SQuAD-style ``em``:
        lower case, punctuation and articles dropped), or ``exact_match_raw`` (not stripped:
        the harness's ``exact_match`` without a whitespace filter, where " 42" is not "42"),
        or with ``--filter flexible-extract`` GSM8K's last number (a chain-of-thought task
        whose target is the bare number);
        ``metric:<name>`` for a 0/1 metric not
        named a match (``bleu_acc``), or of a match on answers a filter extracted (BBH's
        regex), that no rule reproduces (:data:`RULE_FOUND_AT`)."""
        rates = self._match_rates
        best = max(rates, key=lambda r: (rates[r], r == "exact_match"))
        if (self.metric not in MATCH_METRICS or self.extracted) and rates[best] < RULE_FOUND_AT:
            return METRIC_RULE_PREFIX + self.metric
        return best

    @cached_property
    def _match_rates(self) -> dict[str, float]:
        """The share of logged 0/1 generation scores each match rule reproduces."""
        rates = {}
        for rule in ("exact_match", "exact_match_norm", "exact_match_raw",
                     *(("gsm8k_flexible",) if self.filter == "flexible-extract" else ())):
            hits = [score_outputs(rule, o, gold=it.gold_text, until=it.requests[0].until)
                    == round(s) for item_id, it in self.items.items()
                    if it.kind == "generate_until" and "#### " not in str(it.target)
                    for o, s in ((self.outputs[m].get(item_id), self.scores[m].get(item_id))
                                 for m in self.scores) if o is not None and s is not None]
            rates[rule] = float(np.mean(hits)) if hits else 1.0
        return rates

    @cached_property
    def computed_rule(self) -> str | None:
        """The rule a continuous metric under another name is computed by: ``mc2`` for
        log-likelihood items, ``f1`` for generations, when it reproduces at least
        :data:`RULE_FOUND_AT` of the logged scores from the logged outputs (lm-eval 0.4 logs
        TruthfulQA's mc2 as ``acc``); None otherwise (or for a metric named so, or 0/1)."""
        if self.metric in ("mc2", "f1") or not self.items or not self.continuous:
            return None
        kinds = {it.kind for it in self.items.values()}
        if len(kinds) != 1:
            return None
        rule, fields = (("mc2", self._mc2_fields) if kinds == {"loglikelihood"} else
                        ("f1", self._f1_fields))
        hits = []
        for item_id, it in self.items.items():
            logged = [(self.outputs[m].get(item_id), self.scores[m].get(item_id))
                      for m in self.scores]
            logged = [(o, sc) for o, sc in logged if o is not None and sc is not None]
            if logged:
                agree = fields(it, logged)["agreement"]
                hits.append(agree if agree == agree else 0.0)
        return rule if hits and float(np.mean(hits)) >= RULE_FOUND_AT else None

    def _generation_base(self, it) -> dict:
        r = it.requests[0]
        return {"context": r.context, "ctx_suffixes": [], "continuations": [], "gold": -1,
                "target": str(it.target), "n_choices": 1, "mc2_true": 0,
                "until": list(r.until), "max_gen_toks": int(r.max_gen_toks),
                "gen_kwargs": r.gen_kwargs, "targets": list(it.targets)}

    def _f1_fields(self, it, logged) -> dict:
        """Token F1 of the generation against the target (``f1`` rule)."""
        until = it.requests[0].until
        hits = [abs(score_outputs("f1", o, gold=it.gold_text, until=until) - s) < 1e-6
                for o, s in logged]
        return {"rule": "f1", **self._generation_base(it),
                "agreement": float(np.mean(hits)) if hits else float("nan")}

    def _mc2_fields(self, it, logged) -> dict:
        """TruthfulQA's mc2 over the logged options: the number of true (leading) options is
        the one that reproduces the logged scores from the logged log-likelihoods."""
        n = len(it.requests)
        best, agree = 1, float("nan")
        if logged and n > 1:
            rates = [np.mean([abs(mc2_score(o, k) - s) < 1e-4 for o, s in logged])
                     for k in range(1, n)]
            best, agree = int(np.argmax(rates)) + 1, float(max(rates))
        ctxs = [r.context for r in it.requests]
        prefix = os.path.commonprefix(ctxs)
        suffixes = [c[len(prefix):] for c in ctxs]
        return {"rule": "mc2", "context": prefix,
                "ctx_suffixes": suffixes if any(suffixes) else [],
                "continuations": [r.continuation for r in it.requests], "gold": 0,
                "target": "", "n_choices": n, "mc2_true": best, "agreement": agree}

    def _metric_fields(self, it) -> dict:
        """A continuous metric atlas cannot compute from outputs: the rule names it
        (``metric:<name>``); a live run refuses such an item with that name."""
        rule = METRIC_RULE_PREFIX + self.metric
        if it.kind == "generate_until":
            return {"rule": rule, **self._generation_base(it), "agreement": float("nan")}
        ctxs = [r.context for r in it.requests]
        prefix = os.path.commonprefix(ctxs)
        suffixes = [c[len(prefix):] for c in ctxs]
        return {"rule": rule, "context": prefix,
                "ctx_suffixes": suffixes if any(suffixes) else [],
                "continuations": [r.continuation for r in it.requests], "gold": 0,
                "target": "", "n_choices": len(it.requests), "mc2_true": 0,
                "agreement": float("nan")}


#: 0/1 generation metrics that are a match of the answer: scored by the match rule that
#: reproduces most (another 0/1 metric no match reproduces is kept by name)
MATCH_METRICS = frozenset({"exact_match", "em", "exact", "acc"})

#: the share of a continuous metric's logged scores that ``mc2`` or token F1 must reproduce
#: for the metric to be taken as computed by that rule (:attr:`SampleLogs.computed_rule`)
RULE_FOUND_AT = 0.99


def _gold_from_target(target, conts: Sequence[str]) -> int | None:
    t = str(target).strip()
    if re.fullmatch(r"\d+", t) and int(t) < len(conts):
        return int(t)
    same = [j for j, c in enumerate(conts) if c.strip() == t]
    return same[0] if len(same) == 1 else None


def read_sample_logs(paths, *, task: str | None = None, metric: str | None = None,
                     id_field: str | None = "metabench_idx", filter_name: str | None = None,
                     subject_ids: Sequence[str] | None = None,
                     score_range: tuple | None = None, on_file=None) -> SampleLogs:
    """Read the sample logs of one task, several models.

    Parameters
    ----------
    paths : files and/or folders (searched recursively for ``samples_*.jsonl[.gz]``)
    task : keep only this task's files (required when they hold several tasks, and to read
        files under names lm_eval does not write: one model per file in a shared folder)
    metric : the per-sample metric that is the item's score (default: the task's first one,
        the record's ``metrics`` list, else its first numeric field)
    id_field : doc field that is the item id when present (else ``doc_id``)
    filter_name : the harness filter to keep when a task logs several (GSM8K's
        ``strict-match`` / ``flexible-extract``)
    subject_ids : one model name per file (default: the folder name, ``__`` read as ``/``)
    score_range : (low, high) of the metric's scale, mapped to [0, 1] (default: the harness's
        known range, :data:`KNOWN_RANGES`, else the values must lie in [0, 1])
    on_file : ``on_file(k, n)`` after the k-th of the n files is read (a progress bar's step)
    """
    if score_range is not None:
        from ..validation import check_finite

        if (isinstance(score_range, str) or not hasattr(score_range, "__len__")
                or len(score_range) != 2):
            raise ConfigError(f"score_range must be two numbers (low, high), got "
                              f"{score_range!r}")
        score_range = tuple(check_finite(v, "score_range") for v in score_range)
    files, the_task, names = task_files(paths, task, subject_ids)
    logs = SampleLogs(task=the_task, metric=metric or "", filter=filter_name, files=files,
                      harness=harness_version(files),
                      score_range=None if score_range is None else tuple(map(float,
                                                                              score_range)))
    logs.tasks = sorted({task_of(f) or the_task for f in files})
    if metric and (refusal := metric_refusal(files, metric)):
        raise ResponseDataError(refusal)
    several = len(logs.tasks) > 1                     # a group's tasks: item ids task/id
    k = 0
    for name, tasks in runs_by_model(names, files).items():
        superseded, kept = 0, []
        for t, task_runs in tasks.items():
            taken: set[str] = set()
            for f in task_runs:                             # the latest run first
                superseded += _read_one(logs, name, f, taken, id_field=id_field,
                                        metric=metric, filter_name=filter_name,
                                        prefix=f"{t}/" if several else "")
                k += 1
                if on_file is not None:
                    on_file(k, len(files))
            if len(distinct_runs(task_runs)) > 1:                  # a .jsonl and its .gz: one run
                kept.append(str(task_runs[0]))
        if kept:
            logs.reruns[name] = {"runs": max(len(distinct_runs(fs)) for fs in tasks.values()),
                                 "kept": kept, "superseded": superseded}
    if not metric and (refusal := metric_refusal(files, logs.metric)):
        raise ResponseDataError(refusal)                # the metric each record named first
    sizes = task_sizes(files)
    if sizes and set(sizes) == set(logs.tasks):
        logs.n_samples = {"logged": len(logs.item_ids()), "in_task": sum(sizes.values())}
    return logs


def _read_one(logs: SampleLogs, name: str, f: Path, taken: set, *, id_field, metric,
              filter_name, prefix: str = "") -> int:
    """Read one log file of model ``name``; items in ``taken`` (read from the model's later
    runs) are superseded and skipped. Adds the file's items to ``taken``; returns how many of
    its samples were superseded. ``prefix`` starts each item id (a group's ``task/``)."""
    scores = logs.scores.setdefault(name, {})
    outputs = logs.outputs.setdefault(name, {})
    filters: set[str] = set()
    seen: set[str] = set()
    superseded = 0
    for lineno, rec in iter_records(f):
        where = f"{f}:{lineno}"
        flt = str(rec.get("filter", "none"))
        filters.add(flt)
        if filter_name is not None and flt != filter_name:
            continue
        doc = rec.get("doc")
        doc_id = str(rec["doc_id"])
        item = prefix + (str(doc[id_field]) if id_field and isinstance(doc, Mapping)
                         and id_field in doc else doc_id)
        if item in seen:
            raise ResponseDataError(
                f"{where}: item {item} appears twice in one file"
                + (f" (filters {sorted(filters)}: choose one with --filter)"
                   if len(filters) > 1 else ""))
        seen.add(item)
        if item in taken:                  # a later run of this model logged it
            superseded += 1
            continue
        if not logs.metric:
            found = _metrics_of(rec)
            if not found:
                raise ResponseDataError(f"{where}: no per-sample metric found; name it with "
                                        f"--metric (fields: {sorted(rec)[:12]})")
            logs.metric, logs.metrics_logged = found[0], list(found)
        if logs.metric == "bypass":
            raise ResponseDataError(f"{where}: metric 'bypass': lm_eval ran with --predict_only "
                                    "and scored no sample; run it without --predict_only")
        if logs.score_range is None and logs.metric in KNOWN_RANGES:
            logs.score_range = KNOWN_RANGES[logs.metric]
        if logs.metric not in rec:
            has = [m for m in _metrics_of({k: v for k, v in rec.items() if k != "metrics"})]
            raise ResponseDataError(
                f"metric {logs.metric!r} is missing from {where} (its fields: "
                f"{', '.join(has) or 'no metric'}"
                + ("; its 'metrics' list names it" if logs.metric in _metrics_of(rec) else "")
                + "); choose a metric every record carries with --metric")
        value = _number(rec[logs.metric], where, logs.metric, logs.score_range, rec)
        scores[item] = value
        reqs = parse_arguments(rec.get("arguments"), where) if "arguments" in rec else None
        if reqs is None:
            continue
        outputs[item] = _outputs(rec, reqs[0].kind, len(reqs))
        logs.extracted += reqs[0].kind == "generate_until" and _extracted(rec, outputs[item],
                                                                          reqs[0].until)
        known = logs.items.get(item)
        raw = rec.get("target", "")
        targets = (tuple(map(str, raw)) if isinstance(raw, (list, tuple)) and raw
                   and reqs[0].kind == "generate_until" else ())      # a generation's aliases
        target = targets[0] if targets else str(raw)
        if known is None:
            logs.items[item] = LoggedItem(item, doc_id, reqs, target, doc,
                                          rec.get("arguments"), targets)
        elif known.requests != reqs:
            raise ResponseDataError(f"{where}: item {item} was asked other requests than in "
                                    "another model's log (few-shot seed, prompt or task version "
                                    "differ); build a bank from runs of one task configuration")
        elif (target, targets) != (known.target, known.targets):
            other = str(list(known.targets) or known.target)
            raise ResponseDataError(f"{where}: item {item} has target {str(raw)[:60]!r}, "
                                    f"another model's log {other[:60]!r} (task version or gold "
                                    "answers differ); build a bank from runs of one task "
                                    "configuration")
    if filter_name is None and len(filters) > 1:
        raise ResponseDataError(f"{f}: several filters {sorted(filters)}; choose one with "
                                "--filter")
    if not seen:
        raise ResponseDataError(f"{f}: no samples" + (
            f" with filter {filter_name!r} (its filters: {', '.join(sorted(filters))}; --filter "
            "picks one)" if filter_name and filters else ""))
    taken |= seen
    return superseded
