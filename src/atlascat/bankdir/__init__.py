"""Bank folders: build a bank from your own results, read it back everywhere ``--bank`` goes.

- :func:`build_bank` (``atlas build-bank``): a response matrix or lm-evaluation-harness
  sample logs -> a calibrated bank with each item's logged requests, a score link and a
  manifest, written as a folder (:mod:`atlascat.bankdir.builder`);
- :func:`load_bank_dir` -> :class:`BankFolder` (bank, link, requests, manifest, extra files;
  :mod:`atlascat.bankdir.folder`);
- :func:`read_sample_logs`: sample logs with every item's exact requests and scoring rule
  (:mod:`atlascat.bankdir.samplelogs`);
- :func:`predict_scores`: the predicted score of a model tested on a folder, with its 95%
  interval; :func:`replay_predictor`: the folder's benchmark predictor on recorded answers
  (:mod:`atlascat.bankdir.predict`);
- :func:`replay_adaptive` / :func:`simulate_adaptive`: the folder's adaptive test with its
  score link's stops, scored by the link (``atlas simulate --design adaptive``;
  :mod:`atlascat.bankdir.adaptive`);
- :func:`form_factors`: how much a fixed form's SE and score interval must widen on new models,
  cross-fitted on the source answers the folder keeps (``BankFolder.source_answers()``);
  :func:`widen_form_scores` applies them (``atlas design`` / ``atlas score --form``;
  :mod:`atlascat.bankdir.formfactor`);
- :func:`simulated_sample_logs`: the logs of simulated models made from one real sample log,
  to try the path before running the harness on 20 models (:mod:`atlascat.bankdir.simlogs`).
"""
from .._lazy import lazy_names

_LAZY = {"adaptive_config": "adaptive", "simulate_adaptive": "adaptive",
         "replay_adaptive": "adaptive", "build_bank": "builder", "fit_link": "builder",
         "read_scores": "builder",
         "MIN_MODELS": "defaults", "BUDGET": "defaults", "FOLDS": "defaults",
         "BankFolder": "folder", "is_bank_dir": "folder", "load_bank_dir": "folder",
         "write_bank_dir": "folder", "predict_scores": "predict",
         "PREDICTION_COLUMNS": "predict", "replay_predictor": "predict",
         "load_predictor": "predict", "load_predictor_items": "predict",
         "PREDICTOR_FILE": "predict", "PREDICTOR_ITEMS_FILE": "predict",
         "read_sample_logs": "samplelogs", "SampleLogs": "samplelogs",
         "LoggedItem": "samplelogs", "parse_arguments": "samplelogs",
         "simulated_sample_logs": "simlogs", "SourceAnswers": "folder",
         "form_factors": "formfactor", "widen_form_scores": "formfactor",
         "FormFactors": "formfactor"}

__all__ = list(_LAZY)

__getattr__, __dir__ = lazy_names(__name__, _LAZY)
