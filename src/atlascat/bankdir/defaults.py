"""A bank folder's defaults, light enough for the CLI to show them without importing the
builder (:mod:`atlascat.bankdir.builder`)."""
from __future__ import annotations

__all__ = ["MIN_MODELS", "BUDGET", "FOLDS", "PREDICTOR_FILE", "PREDICTOR_ITEMS_FILE",
           "SOURCE_ANSWERS_FILE", "FORM_FOLDS"]

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
#: the source models' answers to the bank's items and their scores (0-1), kept so that a fixed
#: form's precision can be cross-fitted later (:mod:`atlascat.bankdir.formfactor`)
SOURCE_ANSWERS_FILE = "source_answers.npz"
#: folds of a fixed form's cross-fitted factors (:func:`~atlascat.bankdir.formfactor.form_factors`;
#: the number measured in benchmarks/results/fixed_forms.md)
FORM_FOLDS = 3
