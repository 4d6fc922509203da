"""The score link's settings: chance levels, support, interval coverage, stop rules."""
from __future__ import annotations

import numpy as np

#: two-sided 95% normal quantile
Z95 = 1.959963984540054

#: theta grid the link's curves are stored on
GRID = np.linspace(-6.0, 6.0, 241)

#: Chance level of each benchmark's published score (0-1): what a model answering at random
#: gets. TruthfulQA's published score is mc2 (the normalized probability mass on the true
#: answers): with uniform probabilities it is the share of true options, 0.459 on average over
#: the 290 TruthfulQA items with content, and the weakest leaderboard models publish 0.45-0.48;
#: models that confidently pick the misconception publish less (down to about 0.30), so
#: TruthfulQA's curve is U-shaped and its floor (below) lies under chance. GSM8K is exact-match
#: generation: 0.
CHANCE = {"arc": 0.25, "hellaswag": 0.25, "mmlu": 0.25, "truthfulqa": 0.46,
          "winogrande": 0.50, "gsm8k": 0.0}

#: Kernel bandwidth (theta) of the support count; a grid point is *supported* when at least
#: ``MIN_SUPPORT`` calibration models are that near (kernel-weighted).
SUPPORT_BANDWIDTH = 0.25

MIN_SUPPORT = 10.0

#: chance of a 0/1 answer of each bank (a guess among the options): ARC, HellaSwag and MMLU
#: four options, WinoGrande two, TruthfulQA mc1 0.23 on average (1 / options over its 290 items
#: with content), GSM8K none (exact match)
ANSWER_CHANCE = {"arc": 0.25, "hellaswag": 0.25, "mmlu": 0.25, "truthfulqa": 0.23,
                 "winogrande": 0.50, "gsm8k": 0.0}

#: floor / top stop: how close (0-1 score units) to the short-test curve's lowest / highest
#: value counts as there (:meth:`ScoreLink.stop_settings`; ``--bound-margin``)
BOUND_MARGIN = 0.02

#: one-sided level of the test "the answers are better than guessing"
CHANCE_ALPHA = 0.025

#: share of the calibration models' replayed (out-of-fold) predictions the 95% interval is
#: scaled to cover: a little above 0.95, because coverage conditional on a band of published
#: score is lower than overall in the bands that collect the large residuals (held-out, seed 0:
#: with 0.95, 87-89% in ARC 40-50, MMLU 70-80 and GSM8K 30-40 while 95% overall)
COVERAGE_TARGET = 0.97

#: score-precision stop: the theta part of the score's SD at most this share of its residual SD
PRECISION_RATIO = 0.75

#: minimum-information stop of the linked banks: an item this informative shrinks an SE of 0.45
#: by 1%
MIN_INFO_STOP = 0.1

#: ... and never asked to be below this (score units): where the residual SD is tiny (GSM8K
#: near 0%) a fraction of it would ask for precision no user reads
PRECISION_FLOOR = 0.01

#: a curve whose lowest value is more than this above the floor never reached chance level
BOTTOM_TOLERANCE = 0.05

#: lz* below this (one-sided 1% of N(0, 1)) flags the answers as not fitting the IRT model.
LZ_CRITICAL = -2.326

#: person fit is computed from this many answered items on (lz* is meaningless on a handful).
MIN_FIT_ITEMS = 10
