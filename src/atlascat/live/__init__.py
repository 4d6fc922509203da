"""Live adaptive evaluation of real models (see ``docs/live.md``).

- item content and the Open LLM Leaderboard's requests live in :mod:`atlascat.content` (re-exported
  here: :func:`build_prompt`, :func:`build_requests`, :func:`build_item_requests`, ...); the
  shipped content banks in :mod:`atlascat.catalogue` (:func:`load_content_bank`)
- :mod:`.scorers`  scorers by name: ``mc`` (letter / option text), ``gsm8k`` (numeric), callables
- :mod:`.subjects` ``OpenAICompletionsSubject`` (log-likelihoods from echoed prompt logprobs),
                   ``OpenAICompatible`` (chat / text prompts, approximate), ``ReplaySubject``,
                   ``CallableSubject``, ``SimulatedSubject``, :class:`SubjectSpec` (``--subject``)
- :mod:`.store`    the SQLite run store (WAL; pending item before asking, one transaction a step)
- :mod:`.runner`   one run's loop (rounds of k items, every step persisted)
- :mod:`.service`  :class:`LiveRun` (runs of every kind, several models at once),
                   :func:`evaluate`, :func:`resume`
- :mod:`.lmeval`   :func:`read_lmeval_samples`: lm-evaluation-harness sample logs -> ResponseMatrix
- :mod:`.report`   a self-contained HTML page per run
- :mod:`.compare`  :func:`compare_runs`: two finished runs' difference with its 95% interval
                   (``atlas compare-models``); :func:`comparison_frame`: its rows as a table
- :mod:`.hf`, :mod:`.lmeval_backend`, :mod:`.toylm`  log-likelihood backends: in-process
                   transformers, any lm-evaluation-harness LM, a deterministic NumPy toy LM

Names are loaded lazily so that importing this package needs neither httpx nor the CAT engine.
"""
from __future__ import annotations

import importlib

_ITEMS, _REQUESTS = "atlascat.content.items", "atlascat.content.requests"
#: name -> its module (relative to this package unless absolute)
_LAZY = {
    "load_content_bank": "atlascat.catalogue", "load_item_content": _ITEMS,
    "attach_content": _ITEMS, "build_prompt": _ITEMS, "Prompt": _ITEMS, "parse_choices": _ITEMS,
    "content_item_ids": _ITEMS,
    "Request": _REQUESTS, "ItemRequests": _REQUESTS, "build_requests": _REQUESTS,
    "build_item_requests": _REQUESTS, "requests_from_record": _REQUESTS,
    "register_scorer": "scorers", "get_scorer": "scorers", "score_answer": "scorers",
    "OpenAICompatible": "subjects", "CallableSubject": "subjects", "SimulatedSubject": "subjects",
    "Answer": "subjects", "Subject": "subjects", "SubjectError": "subjects",
    "RunStore": "store",
    "evaluate": "service", "resume": "service", "LiveRun": "service",
    "PromptSettings": "runner", "RunResult": "runner",
    "read_lmeval_samples": "lmeval",
    "OpenAICompletionsSubject": "subjects", "ReplaySubject": "subjects",
    "NoPromptLogprobsError": "subjects", "subject_from_spec": "subjects",
    "SubjectSpec": "subjects",
    "write_run_report": "report", "compare_runs": "compare",
    "comparison_frame": "compare",
    "HFSubject": "hf", "LMEvalSubject": "lmeval_backend", "ToyLM": "toylm",
}

__all__ = sorted(_LAZY)


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'atlascat.live' has no attribute {name!r}")
    value = getattr(importlib.import_module(module if module.startswith("atlascat.")
                                            else f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
