"""What a bank item asks a model: item content (question, options, key, few-shot context) and
the Open LLM Leaderboard's requests (log-likelihood continuations or a generation, and the rule
that scores them).

- :mod:`.parsing`: reading stored cells (option lists, literals) without ``eval``.
- :mod:`.items`: loading benchmark item files, joining content to a bank, building prompts.
- :mod:`.requests`: the harness's requests for an item and the rules that score their outputs.

These are data formats: they know nothing of a live run, a server or the files the package
ships (the shipped content banks are found by name in :mod:`atlascat.catalogue`).
"""
