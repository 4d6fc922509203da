"""A bank folder's defaults, light enough for the CLI to show them without importing the
builder (:mod:`atlascat.bankdir.builder`)."""
from __future__ import annotations

__all__ = ["MIN_MODELS", "BUDGET", "FOLDS"]

#: fewest source models a bank folder is built from
MIN_MODELS = 20
#: the test length a bank folder's link is fitted for (``atlas simulate --max-items 50``)
BUDGET = 50
#: cross-fitting folds that size a bank folder's interval (:func:`~atlascat.bankdir.builder.cross_fit_factor`)
FOLDS = 5
