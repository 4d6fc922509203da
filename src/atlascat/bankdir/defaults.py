"""A bank folder's defaults, light enough for the CLI to show them without importing the
builder (:mod:`atlascat.bankdir.builder`)."""
from __future__ import annotations

__all__ = ["MIN_MODELS", "BUDGET", "FOLDS", "PREDICTOR_FILE", "PREDICTOR_ITEMS_FILE"]

#: fewest source models a bank folder is built from
MIN_MODELS = 20
#: the test length a bank folder's link is fitted for (``atlas simulate --max-items 50``)
BUDGET = 50
#: cross-fitting folds that size a bank folder's interval (:func:`~atlascat.bankdir.builder.cross_fit_factor`)
FOLDS = 5
#: the benchmark predictor's file in a bank folder
PREDICTOR_FILE = "predictor.json"
#: the predictor's items with their logged requests (folders built from sample logs): what a
#: live run on the predictor asks
PREDICTOR_ITEMS_FILE = "predictor_items.parquet"
