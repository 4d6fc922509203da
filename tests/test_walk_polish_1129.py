"""Three small defects a 2026-11-29 walk found.

1. ``atlas calibrate DATA --scores S.csv`` wrote subject_id, theta, se only, while ``atlas
   score DATA --bank BANK.csv`` writes n_items, mean_score / mean_rating (and an ordinal
   bank's predicted score), flag, group and freq too: now the two write the same columns.
2. Some CLI errors named the library's keyword (``quadpts``, ``tol``, ``max_iter``) rather
   than the option typed (``--quadpts``, ``--tol``, ``--max-iter``).
3. The fitted results' repr read ``n_iter=125 converged``: now ``n_iter=125, converged``.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from atlascat.irt.calibrate import calibrate
from atlascat.irt.multidimcal import calibrate_multidim


def _answers(n=200, m=8, seed=3):
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=n)
    b = np.linspace(-1.5, 1.5, m)
    y = (rng.random((n, m)) < 1 / (1 + np.exp(-(theta[:, None] - b)))).astype(float)
    return pd.DataFrame(y, index=[f"s{i}" for i in range(n)],
                        columns=[f"i{j}" for j in range(m)])


def test_result_reprs_separate_n_iter_from_the_state_by_a_comma():
    res = calibrate(_answers(), "2pl")
    text = repr(res)
    assert re.search(r"n_iter=\d+, (converged|not converged)", text), text
    md = calibrate_multidim(_answers(m=10), 2, max_iter=30)
    text = repr(md)
    assert re.search(r"n_iter=\d+, (converged|not converged)", text), text
