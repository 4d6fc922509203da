"""A user walk of the suite path (the Open LLM Leaderboard v1 average from ~150 items, tracked
over many checkpoints): the defects it found."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from atlascat import catalogue
from atlascat.errors import ConfigError
from atlascat.suite import SuiteConfig, load_suite, simulate_suite


def _weighted(suite, weights):
    """The suite with other weights (0: left out of the average)."""
    return suite.replace(members=tuple(dataclasses.replace(m, weight=float(w))
                                       for m, w in zip(suite.members, weights)))


def test_a_member_left_out_of_the_average_gets_no_items_of_its_own():
    """A custom subset (ARC, HellaSwag, MMLU; the other three at weight 0) spent 60 of its
    150 items on GSM8K, which the average does not count: the members' own variances were
    weighed in the selection whatever their weight."""
    suite = _weighted(load_suite("openllm-v1"), (1, 1, 1, 0, 0, 0))
    names = list(suite.names)
    ms = {b: catalogue.load_responses(b) for b in names}
    common = sorted(set.intersection(*[set(ms[b].subject_ids.astype(str)) for b in names]))
    res = simulate_suite(suite, ms, SuiteConfig(), subject_ids=common[:: 80][:8])
    items = res.scores[[f"{b}_items" for b in names]].mean()
    counted = items[[f"{b}_items" for b in names[:3]]].sum()
    assert items["gsm8k_items"] < 35, items.to_dict()
    assert counted > 75, items.to_dict()


def test_a_suite_without_a_member_says_how_to_leave_one_out(tmp_path):
    """A suite file with GSM8K deleted from its members was refused with the prior's and the
    members' names only; the way to a custom subset (weight 0) was nowhere said."""
    suite = load_suite("openllm-v1")
    with pytest.raises(ConfigError, match="weight 0"):
        suite.replace(members=suite.members[:5])
