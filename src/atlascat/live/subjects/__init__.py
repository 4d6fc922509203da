"""Subjects: the models a live adaptive test asks.

Three kinds of subject, told apart by ``subject.kind``:

- **log-likelihood subjects** (``kind = "loglikelihood"``; the leaderboard's protocol) answer the
  lm-evaluation-harness requests of a whole round in one call::

      subject.loglikelihood(requests) -> list[float]   # sum log p(continuation | context)
      subject.generate_until(requests) -> list[str]    # greedy generation up to a stop string

- **prompt subjects** (``kind = "chat"`` or ``"completion"``) answer one
  :class:`~atlascat.content.items.Prompt` at a time, ``subject.ask(prompt, item) -> Answer``; a
  letter or number is then extracted from the text. This is not how the banks were calibrated:
  their results are labelled ``protocol = "approximate"``.
- **item-scored subjects** (``kind = "item"``) are given item ids and score the items
  themselves, ``subject.score_items(ids) -> [(0/1, reply line)]``: a bank without requests
  (built from a response matrix) asked through the user's own harness (:mod:`.itemscored`).

Every subject has ``name`` (the model name), ``cache_key`` (what the answer cache is keyed on
besides item and prompt hash), ``protocol`` and ``describe()`` (a JSON-safe description; never
a secret).

Adapters
--------
OpenAICompletionsSubject  ``/v1/completions`` with ``echo`` + prompt ``logprobs`` (vLLM), the
                          leaderboard's log-likelihoods over HTTP; a server without prompt
                          log-probabilities is refused with :class:`NoPromptLogprobsError`.
OpenAICompatible          OpenAI-style ``/v1/chat/completions`` or ``/v1/completions`` asked with
                          prompts (approximate protocol).
ReplaySubject             answers from a recorded response matrix (``replay:MATRIX.csv#MODEL``).
RecordedAnswers           the same, asked by item id (a bank without requests).
CommandSubject            the user's program (``cmd:COMMAND``): sent a bank's requests, its
                          outputs scored by each item's rule (:mod:`.cmdrequests`); on a bank
                          without requests, it scores items by id.
CallableSubject           wraps a Python function ``fn(item, prompt) -> str``.
SimulatedSubject          answers correctly with the bank's probability at a fixed theta.
SimulatedScores           the same, asked by item id (a bank without item content).
SimulatedRatings          the same on a graded / gpcm bank: ratings drawn from its categories.
:class:`SubjectSpec` parses a ``--subject`` string and builds any of these (and ``hf:`` /
``lmeval:`` subjects from :mod:`atlascat.live.hf` / :mod:`atlascat.live.lmeval_backend`); it
rebuilds a stored run's subject from its description, whose ``type`` is the spec's kind.

Modules (one kind of subject each; this package re-exports every name)
----------------------------------------------------------------------
:mod:`.base`         ``Answer``, the ``Subject`` protocol, ``SubjectError``
:mod:`.http`         the HTTP plumbing shared by the HTTP subjects (deadline, retries, redaction)
:mod:`.chat`         ``OpenAICompatible`` (prompts, approximate protocol)
:mod:`.completions`  ``OpenAICompletionsSubject`` (echoed prompt log-probabilities)
:mod:`.replay`       ``ReplaySubject``
:mod:`.itemscored`   ``CommandSubject``, ``RecordedAnswers`` (item-scored subjects)
:mod:`.scripted`     ``CallableSubject``, ``SimulatedSubject``, ``item_uniform``
:mod:`.spec`         :class:`SubjectSpec`, :func:`subject_from_spec`, :func:`parse_theta_spec`

``httpx`` is imported by the HTTP subjects only (optional extra ``atlascat[live]``).
"""
from __future__ import annotations

from .base import (Answer, ItemScoredSubject, LogLikelihoodSubject, Subject, SubjectError,
                   is_item_scored, is_loglikelihood)
from .chat import OpenAICompatible
from .completions import (NoPromptLogprobsError, OpenAICompletionsSubject,
                          ShiftedPromptLogprobsError, continuation_logprob, echo_alignment,
                          harness_split)
from .http import MAX_REPLY_BYTES, RETRY_STATUS
from .itemscored import CommandSubject, RecordedAnswers
from .replay import ReplaySubject
from .scripted import (CallableSubject, SimulatedRatings, SimulatedScores, SimulatedSubject,
                       item_uniform)
from .spec import (HTTP_OPTIONS, SETTING_KINDS, SUBJECT_KINDS, SubjectSpec, has_requests,
                   is_ordinal, parse_theta_spec, subject_from_spec)

__all__ = ["Answer", "Subject", "LogLikelihoodSubject", "SubjectError", "is_loglikelihood", "OpenAICompatible", "OpenAICompletionsSubject",
           "NoPromptLogprobsError", "ShiftedPromptLogprobsError", "echo_alignment", "ReplaySubject", "CallableSubject", "SimulatedSubject",
           "subject_from_spec", "parse_theta_spec", "continuation_logprob", "harness_split",
           "item_uniform", "RETRY_STATUS", "MAX_REPLY_BYTES", "SUBJECT_KINDS", "HTTP_OPTIONS",
           "SubjectSpec", "SimulatedScores", "SimulatedRatings",
           "ItemScoredSubject", "is_item_scored", "CommandSubject", "RecordedAnswers",
           "has_requests", "is_ordinal", "SETTING_KINDS"]
